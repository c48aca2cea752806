#include "cmn/vol.h"

#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t cmn_vol_itemsize(uint32_t dtype)
{
    switch (dtype) {
    case CMN_VOL_F32:
        return 4;
    case CMN_VOL_U8:
        return 1;
    default:
        return 0;
    }
}

uint64_t cmn_vol_elements(const cmn_vol_t *v)
{
    uint64_t n = v->channels;
    int i;

    for (i = 0; i < 3; i++) {
        /* Each factor is below 2^32, so the product overflows only past UINT64_MAX / factor. */
        if (v->dims[i] == 0 || n == 0 || n > UINT64_MAX / v->dims[i])
            return 0;
        n *= v->dims[i];
    }
    return n;
}

int cmn_vol_encode(const cmn_vol_t *v, uint8_t out[CMN_VOL_HEADER_SIZE])
{
    if (cmn_vol_itemsize(v->dtype) == 0 || cmn_vol_elements(v) == 0)
        return CMN_EFIELD;
    memcpy(out, "NVOL", 4);
    put32(out + 4, CMN_VOL_VERSION);
    put32(out + 8, v->dtype);
    put32(out + 12, v->channels);
    put32(out + 16, v->dims[0]);
    put32(out + 20, v->dims[1]);
    put32(out + 24, v->dims[2]);
    put32(out + 28, 0);
    return 0;
}

int cmn_vol_decode(const void *p, size_t n, cmn_vol_t *out, cmn_errbuf_t *eb)
{
    const uint8_t *b = p;
    cmn_vol_t v;
    uint64_t count;
    size_t item;

    if (n < CMN_VOL_HEADER_SIZE)
        return cmn_errf(eb, CMN_EFORMAT,
                        "a volume sample of %zu bytes is shorter than its %u-byte "
                        "header",
                        n, CMN_VOL_HEADER_SIZE);
    if (memcmp(b, "NVOL", 4) != 0)
        return cmn_errf(eb, CMN_EFORMAT, "not a volume sample (no NVOL magic)");
    if (get32(b + 4) != CMN_VOL_VERSION)
        return cmn_errf(eb, CMN_EFORMAT, "volume header version %u (this build reads %u)",
                        get32(b + 4), CMN_VOL_VERSION);
    if (get32(b + 28) != 0)
        return cmn_errf(eb, CMN_EFORMAT, "volume header: reserved field is %u, not 0",
                        get32(b + 28));
    v.dtype = get32(b + 8);
    v.channels = get32(b + 12);
    v.dims[0] = get32(b + 16);
    v.dims[1] = get32(b + 20);
    v.dims[2] = get32(b + 24);
    item = cmn_vol_itemsize(v.dtype);
    if (item == 0)
        return cmn_errf(eb, CMN_EFORMAT, "volume header: unknown dtype %u", v.dtype);
    count = cmn_vol_elements(&v);
    if (count == 0)
        return cmn_errf(eb, CMN_EFORMAT, "volume header: shape %ux%ux%ux%u is empty or overflows",
                        v.channels, v.dims[0], v.dims[1], v.dims[2]);
    if (count > (uint64_t)(n - CMN_VOL_HEADER_SIZE) / item ||
        count * item != (uint64_t)(n - CMN_VOL_HEADER_SIZE))
        return cmn_errf(eb, CMN_EFORMAT,
                        "volume header: shape %ux%ux%ux%u needs %llu elements of %zu bytes, the "
                        "sample holds %zu bytes after the header",
                        v.channels, v.dims[0], v.dims[1], v.dims[2], (unsigned long long)count,
                        item, n - CMN_VOL_HEADER_SIZE);
    *out = v;
    return 0;
}
