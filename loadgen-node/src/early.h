/* Early stopping (rules Appendix A), computed exactly as the official LoadGen does.
 *
 * MinPassingQueriesFinder: the smallest h with BetaRegularized(p - d; h, t + 1) < 1 - c, by binary
 * search over a range bounded by earlier answers for smaller t. The answers are memoised per
 * (p, d, c), and because the search range depends on that memo, a finder must see the same calls
 * in the same order as the official one to give the same answers (it does for every caller in
 * results.c). Not thread-safe: one finder per thread. */
#ifndef LG_EARLY_H
#define LG_EARLY_H

#include <stddef.h>
#include <stdint.h>

double lg__beta_regularized(double x, int64_t a, int64_t b);

typedef struct {
    int64_t t, h;
} lg__es_pair_t;

typedef struct {
    double p, d, c;
    lg__es_pair_t *v; /* sorted by t */
    size_t n, cap;
} lg__es_cache_t;

typedef struct {
    lg__es_cache_t *caches;
    size_t n, cap;
} lg__es_finder_t;

void lg__es_init(lg__es_finder_t *f);
void lg__es_free(lg__es_finder_t *f);

/* The minimum h such that odds(h, t, p, d) < 1 - c. Returns -1 only when out of memory. */
int64_t lg__es_min_passing(lg__es_finder_t *f, int64_t t, double p, double d, double c);

#endif
