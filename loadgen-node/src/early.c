#include "early.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double lbeta(int64_t x, int64_t y)
{
    return lgamma((double)x) + lgamma((double)y) - lgamma((double)(x + y));
}

/* Gauss' hypergeometric 2F1(1, b; c; x) by its series (DLMF 15.2.1), summed until a term is at
 * most 2^-33, the official tolerance. With b = 1 - (t + 1) <= 0 the series terminates. */
static double hypergeometric_2f1_a1(int64_t b, int64_t c, double x)
{
    const double tolerance = 1.0 / (double)(1LL << 33);
    double term = 1.0, result = 1.0;
    int64_t i;

    for (i = 0; fabs(term) > tolerance; ++i) {
        term *= (double)(b + i) * x / (double)(c + i);
        result += term;
    }
    return result;
}

/* BetaRegularized[x, a, b] = x^a (1-x)^(b-1) / a * 2F1(1, 1-b; 1+a; x/(x-1)) / Beta[a, b]
 * (DLMF 15.8.1), with the operations in the official order so the doubles round the same. */
double lg__beta_regularized(double x, int64_t a, int64_t b)
{
    return exp((double)a * log(x) + (double)(b - 1) * log(1 - x) - lbeta(a, b)) / (double)a *
           hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1));
}

static double odds(int64_t h, int64_t t, double p, double d)
{
    return lg__beta_regularized(p - d, h, 1 + t);
}

static int64_t find_min_passing(int64_t min_h, int64_t max_h, int64_t t, double p, double d,
                                double c)
{
    int64_t count = max_h - min_h;

    while (count > 0) {
        int64_t step = count / 2;
        int64_t h = min_h + step;

        if (odds(h, t, p, d) < 1 - c) {
            count = step;
        } else {
            min_h = h + 1;
            count -= step + 1;
        }
    }
    return min_h;
}

void lg__es_init(lg__es_finder_t *f)
{
    memset(f, 0, sizeof(*f));
}

void lg__es_free(lg__es_finder_t *f)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        free(f->caches[i].v);
    free(f->caches);
    memset(f, 0, sizeof(*f));
}

static lg__es_cache_t *get_cache(lg__es_finder_t *f, double p, double d, double c)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (f->caches[i].p == p && f->caches[i].d == d && f->caches[i].c == c)
            return &f->caches[i];
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        lg__es_cache_t *nc = realloc(f->caches, cap * sizeof(*nc));

        if (!nc)
            return NULL;
        f->caches = nc;
        f->cap = cap;
    }
    memset(&f->caches[f->n], 0, sizeof(f->caches[0]));
    f->caches[f->n].p = p;
    f->caches[f->n].d = d;
    f->caches[f->n].c = c;
    return &f->caches[f->n++];
}

/* First entry with key >= t (std::map::lower_bound). */
static size_t lower_bound(const lg__es_cache_t *cache, int64_t t)
{
    size_t lo = 0, hi = cache->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (cache->v[mid].t < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int64_t lg__es_min_passing(lg__es_finder_t *f, int64_t t, double p, double d, double c)
{
    lg__es_cache_t *cache = get_cache(f, p, d, c);
    size_t it;
    int64_t x0 = -1, y0 = 0, x1 = 0, y1, min_h, max_h, h, max_slope;
    double min_slope;

    if (!cache)
        return -1;
    it = lower_bound(cache, t);
    if (it != cache->n && cache->v[it].t == t)
        return cache->v[it].h;

    y1 = (int64_t)ceil(log(1 - c) / log(p - d));
    /* Bound the search with the two nearest answers below t, as the official finder does. */
    if (it != 0) {
        --it;
        x1 = cache->v[it].t;
        y1 = cache->v[it].h;
    }
    if (it != 0) {
        --it;
        x0 = cache->v[it].t;
        y0 = cache->v[it].h;
    }
    min_slope = (p - d) / (1 - p + d);
    /* A product, not a quotient, as written in the official early_stopping.cc. */
    max_slope = (y1 - y0) * (x1 - x0);
    min_h = (int64_t)((double)(t - x1) * min_slope + (double)y1);
    max_h = (t - x1) * max_slope + y1 + 1;
    h = find_min_passing(min_h, max_h, t, p, d, c);

    it = lower_bound(cache, t);
    if (cache->n == cache->cap) {
        size_t cap = cache->cap ? cache->cap * 2 : 64;
        lg__es_pair_t *nv = realloc(cache->v, cap * sizeof(*nv));

        if (!nv)
            return -1;
        cache->v = nv;
        cache->cap = cap;
    }
    memmove(&cache->v[it + 1], &cache->v[it], (cache->n - it) * sizeof(cache->v[0]));
    cache->v[it].t = t;
    cache->v[it].h = h;
    cache->n++;
    return h;
}
