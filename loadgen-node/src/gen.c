#include "gen.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int lg__loadable_order(uint64_t seed, size_t n, uint32_t **out)
{
    lg__mt_t rng;
    uint32_t *v = malloc((n ? n : 1) * sizeof(*v));
    size_t i;

    if (!v)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        v[i] = (uint32_t)i;
    lg__mt_seed(&rng, seed);
    lg__shuffle_u32(v, n, &rng);
    *out = v;
    return 0;
}

/* SampleDistribution<AccuracyOnly>: {0, stride, 2 stride, ... < end}, shuffled. With keep == 0 the
 * shuffle is only drawn (the official code builds this list even when it never uses it). */
static int shuffled_list(lg__mt_t *rng, size_t end, size_t stride, int keep, uint32_t **out,
                         size_t *n)
{
    size_t count = (end + stride - 1) / stride, i;
    uint32_t *v = NULL;

    if (keep) {
        v = malloc((count ? count : 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        for (i = 0; i < count; i++)
            v[i] = (uint32_t)(i * stride);
    }
    lg__shuffle_u32(v, count, rng);
    *out = v;
    *n = count;
    return 0;
}

int lg__gen_init(lg__gen_t *g, const lg_effective_settings_t *s, int accuracy,
                 const uint32_t *loaded, size_t L, size_t end, lg__mt_t *acc_rng, uint64_t *seq,
                 double acc_offset, double acc_prob, cmn_errbuf_t *eb)
{
    size_t stride, j;
    int keep_a, keep_u, rc;

    memset(g, 0, sizeof(*g));
    if (L == 0 || end == 0 || end > L)
        return cmn_errf(eb, CMN_ECONFIG, "the loaded sample set is empty");
    g->scenario = s->scenario;
    g->accuracy = accuracy;
    g->loaded = loaded;
    g->L = L;
    g->end = end;
    g->acc_rng = acc_rng;
    g->seq = seq;
    g->acc_offset = acc_offset;
    g->acc_prob = acc_prob;
    g->qps = s->target_qps;
    g->unique = s->performance_issue_unique;
    g->same = s->performance_issue_same;
    g->same_index = (size_t)s->performance_issue_same_index;
    g->offline_shuffle = s->sample_concatenate_permutation;
    g->off_rep = UINT64_MAX;

    /* Twice the needed duration for the latency-bound scenarios, since the SUT may be faster than
     * expected; the Server schedule depends only on the ideal times. */
    g->gen_duration_ns =
        (int64_t)((s->scenario == LG_SERVER ? 1 : 2) * s->target_duration_ms * 1000000u);
    g->min_queries = s->min_query_count;
    g->spq = s->samples_per_query;
    if (accuracy && s->scenario == LG_OFFLINE)
        g->spq = end;
    if (g->spq == 0)
        return cmn_errf(eb, CMN_ECONFIG, "samples_per_query is 0");
    if (accuracy || s->performance_issue_unique) {
        g->gen_duration_ns = 0;
        g->min_queries = L / g->spq;
    }
    if (s->scenario == LG_SERVER && !(s->target_qps > 0))
        return cmn_errf(eb, CMN_ECONFIG, "the Server target QPS must be above 0 (got %g)",
                        s->target_qps);
    if (g->same && !g->unique) {
        size_t span = s->scenario == LG_MULTI_STREAM ? (size_t)g->spq : 1;

        if (s->scenario != LG_OFFLINE && g->same_index + span > L)
            return cmn_errf(eb, CMN_ECONFIG,
                            "performance_issue_same_index %zu is beyond the loaded set of %zu "
                            "samples",
                            g->same_index, L);
        if (s->scenario == LG_OFFLINE && g->same_index >= L)
            return cmn_errf(eb, CMN_ECONFIG,
                            "performance_issue_same_index %zu is beyond the loaded set of %zu "
                            "samples",
                            g->same_index, L);
    }

    lg__mt_seed(&g->sample_rng, s->sample_index_rng_seed);
    lg__mt_seed(&g->schedule_rng, s->schedule_rng_seed);
    stride = s->scenario == LG_MULTI_STREAM ? (size_t)g->spq : 1;

    /* The official order of draws from the sample generator: the accuracy list (accuracy mode
     * only, where it is the distribution), the unique list (always), the equal-issue
     * permutations (always). */
    keep_a = accuracy && s->scenario != LG_OFFLINE;
    if (accuracy) {
        rc = shuffled_list(&g->sample_rng, end, stride, keep_a, &g->list_a, &g->a_n);
        if (rc < 0)
            goto fail;
    }
    keep_u = g->unique && s->scenario != LG_OFFLINE;
    rc = shuffled_list(&g->sample_rng, end, stride, keep_u, &g->list_u, &g->u_n);
    if (rc < 0)
        goto fail;

    g->ei = s->sample_concatenate_permutation;
    g->ei_rng0 = g->sample_rng;
    for (j = 0; j < g->min_queries; j += L) {
        lg__shuffle_u32(NULL, L, &g->sample_rng);
        g->ei_list_size += L;
    }
    if (g->ei && (s->scenario == LG_SINGLE_STREAM || s->scenario == LG_SERVER) && !g->unique &&
        !g->same) {
        if (g->ei_list_size == 0) {
            rc = cmn_errf(eb, CMN_ECONFIG,
                          "equal issue (sample_concatenate_permutation) needs min_query_count > 0");
            goto fail;
        }
        g->ei_perm = malloc(L * sizeof(*g->ei_perm));
        if (!g->ei_perm) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    if (s->scenario == LG_OFFLINE && g->offline_shuffle && !g->same) {
        g->off_perm = malloc(L * sizeof(*g->off_perm));
        if (!g->off_perm) {
            rc = -ENOMEM;
            goto fail;
        }
    }

    if (s->scenario == LG_SERVER)
        g->period_ns = 0;
    else
        /* At least 1 ns, so that the schedule always advances; at most a day (the settings'
         * ranges keep it there; this keeps the conversion defined whatever comes in). */
        g->period_ns = (int64_t)fmin(fmax((1.0 / s->target_qps) * 1e9, 1.0), 8.64e13);

    /* Equal issue pads to whole permutations of the loaded set. */
    if (!accuracy && g->ei) {
        if (s->scenario == LG_OFFLINE && g->spq % L != 0)
            g->spq += L - g->spq % L;
        else if (s->scenario != LG_OFFLINE && g->min_queries % L != 0)
            g->min_queries += L - g->min_queries % L;
    }
    return 0;

fail:
    lg__gen_free(g);
    return rc;
}

void lg__gen_free(lg__gen_t *g)
{
    free(g->list_a);
    free(g->list_u);
    free(g->ei_perm);
    free(g->off_perm);
    g->list_a = g->list_u = g->ei_perm = g->off_perm = NULL;
}

static int64_t next_delta(lg__gen_t *g)
{
    if (g->scenario == LG_SERVER)
        return (int64_t)(lg__exponential(&g->schedule_rng, g->qps) * 1e9);
    return g->period_ns;
}

/* Draws the accuracy-log value and the sequence id every generated sample gets. */
static uint32_t acc_flag(lg__gen_t *g)
{
    double v = lg__canonical(g->acc_rng) + g->acc_offset;

    (*g->seq)++;
    if (!(v < 1.0))
        v -= 1.0;
    return (g->accuracy || v <= g->acc_prob) ? LG__ACC_FLAG : 0u;
}

static size_t take(lg__gen_t *g, uint32_t **list, size_t n, size_t *pos)
{
    if (*pos >= n) {
        g->err = 1;
        return 0;
    }
    return (*list)[(*pos)++];
}

static size_t ei_next(lg__gen_t *g)
{
    uint64_t p = g->ei_i++ % g->ei_list_size;
    size_t k = (size_t)(p % g->L), i;

    if (k == 0) {
        if (p == 0) {
            g->ei_rng = g->ei_rng0;
            for (i = 0; i < g->L; i++)
                g->ei_perm[i] = (uint32_t)i;
        }
        /* The official list concatenates successive shuffles of one vector. */
        lg__shuffle_u32(g->ei_perm, g->L, &g->ei_rng);
    }
    return g->ei_perm[k];
}

/* The distribution a non-Offline query draws from when neither unique nor same applies. */
static size_t dist_next(lg__gen_t *g)
{
    if (g->accuracy)
        return take(g, &g->list_a, g->a_n, &g->a_pos);
    return (size_t)lg__uniform(&g->sample_rng, 0, g->end - 1);
}

/* The Offline query: the loaded set repeated (each repeat shuffled in equal-issue mode), then
 * the first spq % L samples; or one sample everywhere with performance_issue_same. */
static uint32_t offline_sample(lg__gen_t *g, uint64_t k)
{
    uint64_t full = g->spq / g->L, r = k / g->L;

    if (g->same)
        return g->loaded[g->same_index];
    if (r < full && g->off_perm) {
        if (r != g->off_rep) {
            memcpy(g->off_perm, g->loaded, g->L * sizeof(*g->off_perm));
            lg__shuffle_u32(g->off_perm, g->L, &g->sample_rng);
            g->off_rep = r;
        }
        return g->off_perm[k % g->L];
    }
    return g->loaded[k % g->L];
}

size_t lg__gen_fill(lg__gen_t *g, uint32_t *idx, size_t max)
{
    size_t filled = 0;

    while (filled < max && g->q_pos < g->q_n) {
        uint32_t qsl;

        switch (g->scenario) {
        case LG_MULTI_STREAM:
            if (g->q_pos == 0)
                g->q_ms_base = g->unique ? take(g, &g->list_u, g->u_n, &g->u_pos)
                               : g->same ? g->same_index
                                         : dist_next(g);
            qsl = g->loaded[g->q_ms_base + g->q_pos];
            break;
        case LG_OFFLINE:
            qsl = offline_sample(g, g->q_pos);
            break;
        default: {
            size_t i = g->unique ? take(g, &g->list_u, g->u_n, &g->u_pos)
                       : g->same ? g->same_index
                       : g->ei   ? ei_next(g)
                                 : dist_next(g);

            qsl = g->loaded[i];
            break;
        }
        }
        idx[filled++] = (qsl & LG__IDX_MASK) | acc_flag(g);
        g->q_pos++;
    }
    return filled;
}

int lg__gen_next(lg__gen_t *g, int64_t *sched_ns, uint64_t *n)
{
    /* A query is complete only once all its samples have their ids and accuracy-log draws. */
    while (g->q_pos < g->q_n) {
        acc_flag(g);
        g->q_pos++;
    }
    if (g->ended || g->err || !(g->prev_ts < g->gen_duration_ns || g->count < g->min_queries)) {
        g->ended = 1;
        return 0;
    }
    *sched_ns = g->ts;
    *n = g->spq;
    g->q_n = g->spq;
    g->q_pos = 0;
    g->count++;
    g->prev_ts = g->ts;
    g->ts += next_delta(g);
    /* Equal issue keeps whole permutations while the duration is still short. */
    if (g->ei && g->count >= g->min_queries && g->prev_ts < g->gen_duration_ns &&
        g->scenario != LG_OFFLINE)
        g->min_queries += g->L;
    return 1;
}

int lg__gen_finish(lg__gen_t *g, int (*stop)(void))
{
    int64_t sched;
    uint64_t n, k = 0;

    while (lg__gen_next(g, &sched, &n)) {
        /* Settings the checks let through could still make this loop long: it stays
         * interruptible (a poll every 65536 queries costs nothing measurable). */
        if ((++k & 0xffffu) == 0 && stop && stop())
            return 1;
    }
    return 0;
}
