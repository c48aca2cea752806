/* Random numbers exactly as the official LoadGen draws them.
 *
 * LoadGen uses std::mt19937 with libstdc++'s distributions (GCC 12). None of those algorithms
 * except mt19937 itself is fixed by the C++ standard, so the query trace is only reproducible if
 * each one is ported as libstdc++ implements it: Lemire's nearly-divisionless uniform_int, the
 * two-positions-per-draw std::shuffle for short ranges, and generate_canonical with two draws.
 * Every function here consumes the generator in the same order and amount as its C++ twin.
 * Not thread-safe: a generator belongs to one thread. */
#ifndef LG_RNG_H
#define LG_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t mt[624];
    unsigned idx;
} lg__mt_t;

/* std::mt19937(seed): libstdc++ reduces the seed modulo 2^32, so only the low 32 bits count. */
void lg__mt_seed(lg__mt_t *g, uint64_t seed);

/* One 32-bit output (operator()). */
uint32_t lg__mt_next(lg__mt_t *g);

/* std::uniform_int_distribution<T>(a, b)(g) for any integer T whose range b - a fits in 32 bits
 * (the only case LoadGen meets). */
uint64_t lg__uniform(lg__mt_t *g, uint64_t a, uint64_t b);

/* std::shuffle(v, v + n, g) on 32-bit elements. With v == NULL it draws exactly what the shuffle
 * would draw and moves nothing, which advances a generator past a shuffle LoadGen performs but
 * whose result is never used. */
void lg__shuffle_u32(uint32_t *v, size_t n, lg__mt_t *g);

/* std::generate_canonical<double, 53>(g): two draws, (g1 + g2 * 2^32) / 2^64, below 1. This is
 * also std::uniform_real_distribution<double>(0, 1). */
double lg__canonical(lg__mt_t *g);

/* std::exponential_distribution<double>(lambda)(g) = -log(1 - canonical) / lambda. */
double lg__exponential(lg__mt_t *g, double lambda);

#endif
