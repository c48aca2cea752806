#include "rng.h"

#include <math.h>
#include <stdlib.h>

#define MT_N 624u
#define MT_M 397u

void lg__mt_seed(lg__mt_t *g, uint64_t seed)
{
    unsigned i;

    g->mt[0] = (uint32_t)seed;
    for (i = 1; i < MT_N; i++)
        g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + i;
    g->idx = MT_N;
}

static void mt_twist(lg__mt_t *g)
{
    unsigned i;
    uint32_t y;

    for (i = 0; i < MT_N; i++) {
        y = (g->mt[i] & 0x80000000u) | (g->mt[(i + 1) % MT_N] & 0x7fffffffu);
        g->mt[i] = g->mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->idx = 0;
}

uint32_t lg__mt_next(lg__mt_t *g)
{
    uint32_t z;

    if (g->idx >= MT_N)
        mt_twist(g);
    z = g->mt[g->idx++];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    return z;
}

uint64_t lg__uniform(lg__mt_t *g, uint64_t a, uint64_t b)
{
    uint64_t urange = b - a, product;
    uint32_t range, low, threshold;

    /* The generator's own range: libstdc++ returns the raw draw. */
    if (urange == 0xffffffffu)
        return a + lg__mt_next(g);
    /* Wider ranges take libstdc++'s upscaling path, which no LoadGen distribution reaches (every
     * range is a sample count, far below 2^32). Failing loudly beats a silently different trace. */
    if (urange > 0xffffffffu)
        abort();
    range = (uint32_t)(urange + 1);
    product = (uint64_t)lg__mt_next(g) * range;
    low = (uint32_t)product;
    if (low < range) {
        threshold = (uint32_t)(0u - range) % range;
        while (low < threshold) {
            product = (uint64_t)lg__mt_next(g) * range;
            low = (uint32_t)product;
        }
    }
    return a + (product >> 32);
}

static void swap_u32(uint32_t *v, size_t i, size_t j)
{
    uint32_t t;

    if (!v)
        return;
    t = v[i];
    v[i] = v[j];
    v[j] = t;
}

void lg__shuffle_u32(uint32_t *v, size_t n, lg__mt_t *g)
{
    size_t i;

    if (n == 0)
        return;
    /* libstdc++ draws two swap positions from one number while n * n still fits in the
     * generator's 32-bit range, i.e. for n <= 65535. */
    if (0xffffffffu / (uint64_t)n >= (uint64_t)n) {
        i = 1;
        if (n % 2 == 0) {
            swap_u32(v, i, (size_t)lg__uniform(g, 0, 1));
            i++;
        }
        while (i != n) {
            uint64_t s = (uint64_t)i + 1;
            uint64_t x = lg__uniform(g, 0, s * (s + 1) - 1);
            swap_u32(v, i, (size_t)(x / (s + 1)));
            i++;
            swap_u32(v, i, (size_t)(x % (s + 1)));
            i++;
        }
        return;
    }
    for (i = 1; i < n; i++)
        swap_u32(v, i, (size_t)lg__uniform(g, 0, i));
}

double lg__canonical(lg__mt_t *g)
{
    double sum = (double)lg__mt_next(g);
    double ret;

    sum += (double)lg__mt_next(g) * 4294967296.0;
    ret = sum / 18446744073709551616.0;
    if (ret >= 1.0)
        ret = nextafter(1.0, 0.0);
    return ret;
}

double lg__exponential(lg__mt_t *g, double lambda)
{
    return -log(1.0 - lg__canonical(g)) / lambda;
}
