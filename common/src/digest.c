#include "cmn/digest.h"

#include <string.h>

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t mix(uint64_t w)
{
    return rotl64(w * 0xC2B2AE3D27D4EB4Full, 31);
}

static inline uint64_t fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

uint64_t cmn_digest64(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len, w;
    size_t i, words = len / 8, tail = len % 8;

    for (i = 0; i < words; i++) {
        h = (h ^ mix(load_le64(p + i * 8))) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    if (tail) {
        w = 0;
        for (i = 0; i < tail; i++)
            w |= (uint64_t)p[words * 8 + i] << (8 * i);
        h = (h ^ mix(w)) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return fmix64(h);
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
