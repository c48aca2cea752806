/* The sample digest: XXH3-64 (see cmn/digest.h). xxhash.h is used inline (XXH_INLINE_ALL), as
 * libxxhash's header is written to be, so the hash is compiled into this file and the hot path
 * has no call into the shared library. */
#include "cmn/digest.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t cmn_digest64(const void *data, size_t len)
{
    return (uint64_t)XXH3_64bits(data, len);
}

void cmn_digest_put(uint8_t out[8], uint64_t v)
{
    size_t i;
    for (i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

uint64_t cmn_digest_get(const uint8_t in[8])
{
    uint64_t v = 0;
    size_t i;
    for (i = 0; i < 8; i++)
        v |= (uint64_t)in[i] << (8 * i);
    return v;
}
