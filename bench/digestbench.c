/* digestbench: the speed of the sample digest (cmn_digest64, XXH3-64 from libxxhash) against
 * the hand-written 64-bit digest it replaced, on sample sizes from a Fashion-MNIST image (784 B)
 * to 4 MiB. Prints GB/s of each and their ratio, each the median of 3 runs; nothing asserts a
 * speed.
 *
 *   digestbench [--seconds S]     S per run and digest (default 0.2)
 *
 * Each run hashes consecutive samples of one 8 MiB pool of random bytes (or one sample, when it
 * is larger), so small samples are not all served from the same cache lines, and the two digests
 * alternate run by run so that a noisy neighbour hurts both alike. */
#include "cmn/clock.h"
#include "cmn/digest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BYTES (8u << 20)
#define RUNS 3

/* The digest before XXH3 (common/src/digest.c until it moved to libxxhash), kept here only to be
 * measured against: MurmurHash3-style word mixing and its fmix64 finaliser. */
static uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

static uint64_t old_mix(uint64_t w)
{
    return rotl64(w * 0xC2B2AE3D27D4EB4Full, 31);
}

static uint64_t old_digest64(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len, w;
    size_t i, words = len / 8, tail = len % 8;

    for (i = 0; i < words; i++) {
        memcpy(&w, p + i * 8, 8);
        h = (h ^ old_mix(w)) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    if (tail) {
        w = 0;
        for (i = 0; i < tail; i++)
            w |= (uint64_t)p[words * 8 + i] << (8 * i);
        h = (h ^ old_mix(w)) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

typedef uint64_t (*digest_fn)(const void *, size_t);

/* Hashes samples of |size| bytes from |pool| for about |seconds|; returns GB/s. */
static double run(digest_fn fn, const uint8_t *pool, size_t pool_len, size_t size, double seconds,
                  uint64_t *sink)
{
    size_t per_pool = pool_len / size, k = 0;
    uint64_t t0 = cmn_now_ns(), t, bytes = 0, acc = 0;
    int i;

    do {
        for (i = 0; i < 64; i++) {
            acc ^= fn(pool + (k % per_pool) * size, size);
            k++;
            bytes += size;
        }
        t = cmn_now_ns();
    } while ((double)(t - t0) < seconds * 1e9);
    *sink ^= acc;
    return (double)bytes / (double)(t - t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {784, 4096, 65536, 150528, 1u << 20, 4u << 20};
    double seconds = 0.2, gbs[2][RUNS];
    uint64_t sink = 0, s = 88172645463325252ull;
    uint8_t *pool;
    size_t i, len;
    int r;

    if (argc == 3 && strcmp(argv[1], "--seconds") == 0 && atof(argv[2]) > 0) {
        seconds = atof(argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: digestbench [--seconds S]\n");
        return 2;
    }
    len = POOL_BYTES > sizes[sizeof(sizes) / sizeof(sizes[0]) - 1]
              ? POOL_BYTES
              : sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    if (!(pool = malloc(len))) {
        fprintf(stderr, "digestbench: out of memory for the %zu-byte pool\n", len);
        return 1;
    }
    for (i = 0; i < len; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        pool[i] = (uint8_t)(s >> 56);
    }
    printf("digestbench: GB/s, median of %d runs of %.2f s each, 8 MiB pool\n", RUNS, seconds);
    printf("%10s %14s %14s %8s\n", "sample", "XXH3 (cmn)", "old digest", "ratio");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        for (r = 0; r < RUNS; r++) {
            gbs[0][r] = run(cmn_digest64, pool, len, sizes[i], seconds, &sink);
            gbs[1][r] = run(old_digest64, pool, len, sizes[i], seconds, &sink);
        }
        qsort(gbs[0], RUNS, sizeof(double), cmp_double);
        qsort(gbs[1], RUNS, sizeof(double), cmp_double);
        printf("%10zu %14.2f %14.2f %7.2fx\n", sizes[i], gbs[0][RUNS / 2], gbs[1][RUNS / 2],
               gbs[0][RUNS / 2] / gbs[1][RUNS / 2]);
    }
    free(pool);
    /* keeps the digests from being optimised away */
    return sink == 1 ? 3 : 0;
}
