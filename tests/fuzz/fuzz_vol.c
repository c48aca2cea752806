/* Fuzz target: the volume sample header (cmn/vol.h) of a 3D-UNet case, as sut-node's sliding
 * window receives it from a peer. An accepted header must describe exactly the bytes that follow
 * it, and encode back to the same 32 bytes. */
#include "cmn/vol.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmn_vol_t v;
    cmn_errbuf_t eb;
    uint8_t again[CMN_VOL_HEADER_SIZE];

    if (cmn_vol_decode(data, size, &v, &eb) < 0)
        return 0;
    if (cmn_vol_elements(&v) * cmn_vol_itemsize(v.dtype) != size - CMN_VOL_HEADER_SIZE)
        abort();
    if (cmn_vol_encode(&v, again) != 0 || memcmp(again, data, CMN_VOL_HEADER_SIZE) != 0)
        abort();
    return 0;
}
