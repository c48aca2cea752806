/* Fuzz target: unpack + validate the metadata of one message type (FUZZ_MSG_TYPE, set per
 * target by CMake). The first two bytes claim a payload length, as a frame header would, so the
 * size-consistency checks are explored too. */
#include "cmn/frame.h"
#include "cmn/msg.h"

#include <stddef.h>
#include <stdint.h>

#ifndef FUZZ_MSG_TYPE
#    error "FUZZ_MSG_TYPE must name a message type"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t payload[65536];
    cmn_msg_limits_t mlim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    cmn_frame_t f;

    if (size < 2)
        return 0;
    f.hdr.version = CMN_FRAME_VERSION;
    f.hdr.type = FUZZ_MSG_TYPE;
    f.hdr.flags = 0;
    f.hdr.payload_len =
        cmn_msg_type_has_payload(FUZZ_MSG_TYPE) ? (uint32_t)(data[0] | data[1] << 8) : 0;
    f.hdr.meta_len = (uint32_t)(size - 2);
    f.meta = data + 2;
    f.payload = payload;
    if (cmn_msg_unpack(&f, &mlim, NULL, &m, NULL) == 0)
        cmn_msg_free(m, NULL);
    return 0;
}
