/* Fuzz target: the frame decoder fed arbitrary chunks, then every decoded frame's metadata
 * unpacked and validated. The first input byte picks the chunk size, so the fuzzer also explores
 * how frames are split across reads. */
#include "cmn/frame.h"
#include "cmn/msg.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_msg_limits_t mlim = cmn_msg_limits_default();
    cmn_frame_decoder_t d;
    cmn_frame_t f;
    size_t chunk, off = 0, used;
    int rc;

    if (size < 1)
        return 0;
    chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    /* Keep allocations small: the limits are checked before allocation, which is what is tested. */
    lim.max_frame = 1u << 20;
    cmn_frame_decoder_init(&d, &lim);
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk, k = 0;
        while (k < n) {
            rc = cmn_frame_decode(&d, data + off + k, n - k, &used, &f);
            if (rc < 0)
                goto done;
            k += used;
            if (rc == CMN_FRAME_READY) {
                ProtobufCMessage *m = NULL;
                if (cmn_msg_unpack(&f, &mlim, NULL, &m, NULL) == 0)
                    cmn_msg_free(m, NULL);
            }
        }
        off += n;
    }
done:
    cmn_frame_decoder_free(&d);
    return 0;
}
