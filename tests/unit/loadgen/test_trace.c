/* The random number ports and the query trace, against values of the official LoadGen 6.0.17
 * (loadgen.md 2.2, and runs of the official library built from commit b66003e1 with the round's
 * seeds: the expected numbers below were produced by it). */
#include "test_loadgen.h"

#include "gen.h"
#include "lg/settings.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

/* The round v6.1 seeds of mlperf.conf. */
#define QSL_SEED 2085463073848966840ull
#define SAMPLE_SEED 2747215439041700203ull
#define SCHEDULE_SEED 16159082839903944936ull

START_TEST(mt19937_reference)
{
    lg__mt_t g;
    uint32_t v = 0;
    int i;

    /* The C++ standard fixes the 10000th output of a default-seeded mt19937. */
    lg__mt_seed(&g, 5489);
    ck_assert_uint_eq(lg__mt_next(&g), 3499211612u);
    for (i = 1; i < 10000; i++)
        v = lg__mt_next(&g);
    ck_assert_uint_eq(v, 4123659995u);
    /* Only the low 32 bits of a 64-bit seed count. */
    lg__mt_seed(&g, QSL_SEED);
    v = lg__mt_next(&g);
    lg__mt_seed(&g, 3438689976u);
    ck_assert_uint_eq(lg__mt_next(&g), v);
}
END_TEST

START_TEST(uniform_and_canonical)
{
    lg__mt_t g, h;
    int i;

    lg__mt_seed(&g, 1);
    for (i = 0; i < 10000; i++) {
        uint64_t x = lg__uniform(&g, 5, 9);
        double u = lg__canonical(&g);

        ck_assert_uint_ge(x, 5);
        ck_assert_uint_le(x, 9);
        ck_assert(u >= 0.0 && u < 1.0);
    }
    /* The full generator range returns the raw draw. */
    lg__mt_seed(&g, 7);
    lg__mt_seed(&h, 7);
    ck_assert_uint_eq(lg__uniform(&g, 0, 0xffffffffu), lg__mt_next(&h));
    /* canonical = (g1 + g2 * 2^32) / 2^64: two draws. */
    lg__mt_seed(&g, 7);
    lg__mt_seed(&h, 7);
    {
        double g1 = lg__mt_next(&h), g2 = lg__mt_next(&h);

        ck_assert(lg__canonical(&g) == (g1 + g2 * 4294967296.0) / 18446744073709551616.0);
        ck_assert_uint_eq(lg__mt_next(&g), lg__mt_next(&h));
    }
    lg__mt_seed(&g, 9);
    ck_assert(lg__exponential(&g, 1000.0) > 0);
}
END_TEST

START_TEST(shuffle_draws_without_array)
{
    lg__mt_t a, b;
    uint32_t v[70000];
    size_t n, i;
    const size_t sizes[] = {1, 2, 3, 1024, 65535, 65536, 70000};

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        n = sizes[i];
        for (size_t k = 0; k < n; k++)
            v[k] = (uint32_t)k;
        lg__mt_seed(&a, 11);
        lg__mt_seed(&b, 11);
        lg__shuffle_u32(v, n, &a);
        lg__shuffle_u32(NULL, n, &b);
        /* Both generators are at the same point afterwards. */
        ck_assert_uint_eq(lg__mt_next(&a), lg__mt_next(&b));
        /* Still a permutation. */
        {
            uint8_t *seen = calloc(n, 1);

            for (size_t k = 0; k < n; k++) {
                ck_assert_uint_lt(v[k], n);
                ck_assert_uint_eq(seen[v[k]], 0);
                seen[v[k]] = 1;
            }
            free(seen);
        }
    }
}
END_TEST

START_TEST(loaded_set_reference)
{
    static const uint32_t want[] = {216, 267, 822, 906, 663, 580, 710, 908, 410, 882, 910, 801};
    uint32_t *order;

    ck_assert_int_eq(lg__loadable_order(QSL_SEED, 1024, &order), 0);
    ck_assert_mem_eq(order, want, sizeof(want));
    free(order);
    /* 3000 samples in accuracy mode: the first set starts as the official one. */
    ck_assert_int_eq(lg__loadable_order(QSL_SEED, 3000, &order), 0);
    ck_assert_uint_eq(order[0], 216);
    ck_assert_uint_eq(order[1], 2803);
    ck_assert_uint_eq(order[2], 1075);
    ck_assert_uint_eq(order[1024], 2632);
    ck_assert_uint_eq(order[2048], 2944);
    free(order);
}
END_TEST

/* ---- generator ------------------------------------------------------------------------------ */

typedef struct {
    lg_effective_settings_t s;
    uint32_t *loaded;
    size_t L, end;
    lg__mt_t acc;
    uint64_t seq;
    lg__gen_t g;
    uint32_t *out;
    size_t n_out;
    uint64_t queries;
} trace_t;

static void trace_init(trace_t *t, lg_test_settings_t *ts, size_t total, size_t perf)
{
    uint32_t *order;
    size_t pad, i;

    memset(t, 0, sizeof(*t));
    ts->qsl_rng_seed = QSL_SEED;
    ts->sample_index_rng_seed = SAMPLE_SEED;
    ts->schedule_rng_seed = SCHEDULE_SEED;
    lg_effective_settings(ts, perf, total, &t->s, NULL);
    ck_assert_int_eq(lg__loadable_order(QSL_SEED, perf < total ? perf : total, &order), 0);
    pad = ts->scenario == LG_MULTI_STREAM ? (size_t)t->s.samples_per_query - 1 : 0;
    t->end = perf < total ? perf : total;
    t->L = t->end + pad;
    t->loaded = malloc(t->L * sizeof(uint32_t));
    memcpy(t->loaded, order, t->end * sizeof(uint32_t));
    for (i = 0; i < pad; i++)
        t->loaded[t->end + i] = order[i];
    free(order);
    lg__mt_seed(&t->acc, 5489);
}

/* Generates the whole series (up to |cap| samples kept). */
static void trace_run(trace_t *t, int accuracy, size_t cap)
{
    int64_t sched, prev = -1;
    uint64_t n;
    cmn_errbuf_t eb;

    ck_assert_int_eq(
        lg__gen_init(&t->g, &t->s, accuracy, t->loaded, t->L, t->end, &t->acc, &t->seq, 0, 0, &eb),
        0);
    t->out = malloc(cap * sizeof(uint32_t));
    while (lg__gen_next(&t->g, &sched, &n)) {
        size_t got;
        uint32_t buf[64];

        ck_assert_int_ge(sched, prev);
        prev = sched;
        t->queries++;
        while ((got = lg__gen_fill(&t->g, buf, 64)) > 0) {
            size_t k;

            for (k = 0; k < got && t->n_out < cap; k++)
                t->out[t->n_out++] = buf[k] & LG__IDX_MASK;
        }
    }
}

static void trace_free(trace_t *t)
{
    lg__gen_free(&t->g);
    free(t->loaded);
    free(t->out);
}

START_TEST(single_stream_reference)
{
    static const uint32_t want[] = {784, 618, 960, 248, 513, 635, 155, 667, 431, 242, 804, 751};
    lg_test_settings_t ts;
    trace_t t;

    lg_test_settings_init(&ts);
    ts.min_query_count = 100;
    ts.min_duration_ms = 0;
    trace_init(&t, &ts, 1024, 1024);
    trace_run(&t, 0, 200);
    ck_assert_mem_eq(t.out, want, sizeof(want));
    ck_assert_uint_eq(t.g.count, 100);
    ck_assert_int_eq(t.g.ts, 100000000);
    /* The sequence counter and the accuracy-log generator advanced once per sample. */
    ck_assert_uint_eq(t.seq, 100);
    trace_free(&t);

    /* min_query_count changes the sequence (the equal-issue list is always drawn). */
    lg_test_settings_init(&ts);
    ts.min_query_count = 5000;
    ts.min_duration_ms = 0;
    trace_init(&t, &ts, 50000, 1024);
    trace_run(&t, 0, 10);
    ck_assert_uint_eq(t.g.count, 5000);
    ck_assert(t.out[0] != 784);
    trace_free(&t);
}
END_TEST

START_TEST(server_reference)
{
    static const uint32_t want[] = {1758, 8177, 2469, 59, 6656, 4205};
    static const uint32_t want_fy[] = {97956, 139924, 28579, 132024, 114241, 194925};
    lg_test_settings_t ts;
    trace_t t;

    lg_test_settings_init(&ts);
    ts.scenario = LG_SERVER;
    ts.server_target_qps = 1000;
    ts.min_duration_ms = 1000;
    trace_init(&t, &ts, 24576, 24576);
    trace_run(&t, 0, 2000);
    ck_assert_mem_eq(t.out, want, sizeof(want));
    ck_assert_uint_eq(t.queries, 1036);
    ck_assert_uint_eq(t.g.count, 1036);
    ck_assert_int_eq(t.g.ts, 1002689376);
    trace_free(&t);

    /* A set above 65535 takes the one-swap-per-draw shuffle. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_SERVER;
    ts.server_target_qps = 5000;
    ts.min_duration_ms = 1000;
    trace_init(&t, &ts, 204800, 204800);
    trace_run(&t, 0, 10);
    ck_assert_mem_eq(t.out, want_fy, sizeof(want_fy));
    ck_assert_uint_eq(t.g.count, 5030);
    ck_assert_int_eq(t.g.ts, 1000111188);
    trace_free(&t);
}
END_TEST

START_TEST(multi_stream_reference)
{
    static const uint32_t want[] = {678, 266, 573, 278, 241, 816, 958,  576,
                                    935, 222, 123, 954, 24,  488, 1008, 889};
    lg_test_settings_t ts;
    trace_t t;

    lg_test_settings_init(&ts);
    ts.scenario = LG_MULTI_STREAM;
    ts.min_query_count = 662;
    ts.min_duration_ms = 0;
    trace_init(&t, &ts, 50000, 1024);
    ck_assert_uint_eq(t.L, 1031); /* padded with spq - 1 samples */
    trace_run(&t, 0, 16);
    ck_assert_mem_eq(t.out, want, sizeof(want));
    ck_assert_uint_eq(t.g.count, 662);
    ck_assert_uint_eq(t.g.spq, 8);
    ck_assert_int_eq(t.g.ts, 5296000000);
    trace_free(&t);
}
END_TEST

START_TEST(equal_issue_reference)
{
    static const uint32_t want_off[] = {704, 489, 334, 637, 292, 342, 861, 55};
    lg_test_settings_t ts;
    trace_t t;
    size_t i;
    uint32_t *count;

    lg_test_settings_init(&ts);
    ts.scenario = LG_SERVER;
    ts.server_target_qps = 3000;
    ts.min_duration_ms = 1000;
    ts.sample_concatenate_permutation = true;
    trace_init(&t, &ts, 1024, 1024);
    trace_run(&t, 0, 4000);
    ck_assert_uint_eq(t.g.count, 3072);
    ck_assert_int_eq(t.g.ts, 1008779626);
    /* Whole permutations: every sample exactly three times. */
    count = calloc(1024, sizeof(*count));
    for (i = 0; i < t.n_out; i++)
        count[t.out[i]]++;
    for (i = 0; i < 1024; i++)
        ck_assert_uint_eq(count[i], 3);
    free(count);
    trace_free(&t);

    lg_test_settings_init(&ts);
    ts.scenario = LG_SINGLE_STREAM;
    ts.min_query_count = 100;
    ts.min_duration_ms = 100;
    ts.sample_concatenate_permutation = true;
    trace_init(&t, &ts, 1024, 1024);
    trace_run(&t, 0, 10);
    ck_assert_uint_eq(t.g.count, 1024);
    trace_free(&t);

    /* Offline: the single query is padded to whole permutations, each shuffled. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_OFFLINE;
    ts.offline_expected_qps = 5000;
    ts.min_duration_ms = 1000;
    ts.sample_concatenate_permutation = true;
    trace_init(&t, &ts, 1024, 1024);
    trace_run(&t, 0, 8);
    ck_assert_mem_eq(t.out, want_off, sizeof(want_off));
    ck_assert_uint_eq(t.g.count, 1);
    ck_assert_uint_eq(t.g.spq, 6144);
    trace_free(&t);
}
END_TEST

TCase *tcase_rng(void)
{
    TCase *tc = tcase_create("rng");

    tcase_add_test(tc, mt19937_reference);
    tcase_add_test(tc, uniform_and_canonical);
    tcase_add_test(tc, shuffle_draws_without_array);
    tcase_add_test(tc, loaded_set_reference);
    return tc;
}

TCase *tcase_trace(void)
{
    TCase *tc = tcase_create("trace");

    tcase_add_test(tc, single_stream_reference);
    tcase_add_test(tc, server_reference);
    tcase_add_test(tc, multi_stream_reference);
    tcase_add_test(tc, equal_issue_reference);
    return tc;
}

/* ---- accuracy, unique, same ------------------------------------------------------------------ */

START_TEST(accuracy_covers_each_sample_once)
{
    static const uint32_t want[] = {1541, 1378, 2880, 2418, 1171, 2627, 1889, 1321};
    lg_test_settings_t ts;
    trace_t t;
    uint32_t *order;
    uint8_t *seen;
    size_t i;

    /* The first accuracy set of a 3000-sample QSL in sets of 1024. */
    lg_test_settings_init(&ts);
    ts.mode = LG_MODE_ACCURACY_ONLY;
    trace_init(&t, &ts, 3000, 1024);
    ck_assert_int_eq(lg__loadable_order(QSL_SEED, 3000, &order), 0);
    memcpy(t.loaded, order, 1024 * sizeof(uint32_t));
    free(order);
    trace_run(&t, 1, 2000);
    ck_assert_uint_eq(t.n_out, 1024);
    ck_assert_mem_eq(t.out, want, sizeof(want));
    seen = calloc(3000, 1);
    for (i = 0; i < t.n_out; i++) {
        ck_assert_uint_eq(seen[t.out[i]], 0);
        seen[t.out[i]] = 1;
    }
    free(seen);
    trace_free(&t);
}
END_TEST

START_TEST(issue_same_and_unique)
{
    lg_test_settings_t ts;
    trace_t t;
    size_t i;
    uint8_t *seen;

    lg_test_settings_init(&ts);
    ts.performance_issue_same = true;
    ts.performance_issue_same_index = 3;
    ts.min_query_count = 50;
    ts.min_duration_ms = 0;
    trace_init(&t, &ts, 1000, 300);
    trace_run(&t, 0, 100);
    ck_assert_uint_eq(t.n_out, 50);
    for (i = 0; i < t.n_out; i++)
        ck_assert_uint_eq(t.out[i], t.loaded[3]);
    trace_free(&t);

    /* Unique: every loaded sample once, in performance mode, ignoring min_query_count. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_SERVER;
    ts.performance_issue_unique = true;
    ts.server_target_qps = 100;
    ts.min_query_count = 5;
    ts.min_duration_ms = 10000;
    trace_init(&t, &ts, 1000, 300);
    trace_run(&t, 0, 1000);
    ck_assert_uint_eq(t.n_out, 300);
    seen = calloc(1000, 1);
    for (i = 0; i < t.n_out; i++) {
        ck_assert_uint_eq(seen[t.out[i]], 0);
        seen[t.out[i]] = 1;
    }
    free(seen);
    trace_free(&t);
}
END_TEST

START_TEST(offline_query_composition)
{
    lg_test_settings_t ts;
    trace_t t;
    size_t i;

    /* spq = max(min_query_count, 1.1 * 1 s * 1000) = 1100 over a set of 300: three full repeats
     * of the loaded order, then its first 200 samples. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_OFFLINE;
    ts.offline_expected_qps = 1000;
    ts.min_duration_ms = 1000;
    trace_init(&t, &ts, 1000, 300);
    trace_run(&t, 0, 2000);
    ck_assert_uint_eq(t.g.count, 1);
    ck_assert_uint_eq(t.n_out, 1100);
    for (i = 0; i < t.n_out; i++)
        ck_assert_uint_eq(t.out[i], t.loaded[i % 300]);
    trace_free(&t);
}
END_TEST

static int stop_calls;

static int stop_now(void)
{
    return ++stop_calls >= 2;
}

START_TEST(finish_stops_on_request)
{
    lg_test_settings_t ts;
    trace_t t;
    cmn_errbuf_t eb;
    int64_t sched;
    uint64_t n;

    /* An expected latency of 0 (refused by the checks, issue 34) makes the period 1 ns, not 0,
     * and a week of it (1.2e15 queries) still ends as soon as |stop| says so: the generator's
     * end-of-series loop cannot hold a SIGTERM off. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_SINGLE_STREAM;
    ts.single_stream_expected_latency_ns = 0;
    ts.min_duration_ms = 604800000;
    trace_init(&t, &ts, 64, 64);
    ck_assert_int_eq(lg__gen_init(&t.g, &t.s, 0, t.loaded, t.L, t.end, &t.acc, &t.seq, 0, 0, &eb),
                     0);
    ck_assert_int_eq(t.g.period_ns, 1);
    ck_assert_int_eq(lg__gen_next(&t.g, &sched, &n), 1);
    ck_assert_int_eq(lg__gen_next(&t.g, &sched, &n), 1);
    ck_assert_int_gt(t.g.ts, sched);
    stop_calls = 0;
    ck_assert_int_eq(lg__gen_finish(&t.g, stop_now), 1);
    ck_assert_int_eq(stop_calls, 2);
    ck_assert_uint_le(t.g.count, 2 + 2 * 65536u);
    trace_free(&t);
}
END_TEST

START_TEST(finish_matches_full_generation)
{
    lg_test_settings_t ts;
    trace_t a, b;
    int64_t sched;
    uint64_t n;
    uint32_t buf[8];
    cmn_errbuf_t eb;
    int i;

    /* Stopping after 10 queries and finishing leaves the counters and the accuracy-log generator
     * where generating everything does. */
    lg_test_settings_init(&ts);
    ts.scenario = LG_MULTI_STREAM;
    ts.min_query_count = 40;
    ts.min_duration_ms = 0;
    trace_init(&a, &ts, 1000, 300);
    trace_run(&a, 0, 10);
    trace_init(&b, &ts, 1000, 300);
    ck_assert_int_eq(lg__gen_init(&b.g, &b.s, 0, b.loaded, b.L, b.end, &b.acc, &b.seq, 0, 0, &eb),
                     0);
    for (i = 0; i < 10; i++) {
        ck_assert_int_eq(lg__gen_next(&b.g, &sched, &n), 1);
        ck_assert_uint_eq(lg__gen_fill(&b.g, buf, 3), 3); /* part of the query only */
    }
    lg__gen_finish(&b.g, NULL);
    ck_assert_uint_eq(a.g.count, b.g.count);
    ck_assert_int_eq(a.g.ts, b.g.ts);
    ck_assert_uint_eq(a.seq, b.seq);
    ck_assert_uint_eq(a.seq, 320);
    ck_assert_uint_eq(lg__mt_next(&a.acc), lg__mt_next(&b.acc));
    trace_free(&a);
    trace_free(&b);
}
END_TEST

START_TEST(generator_rejects_crashing_settings)
{
    lg_test_settings_t ts;
    lg_effective_settings_t s;
    lg__gen_t g;
    lg__mt_t acc;
    uint64_t seq = 0;
    uint32_t loaded[4] = {0, 1, 2, 3};
    cmn_errbuf_t eb;

    lg_test_settings_init(&ts);
    ts.performance_issue_same = true;
    ts.performance_issue_same_index = 9;
    lg_effective_settings(&ts, 4, 4, &s, NULL);
    lg__mt_seed(&acc, 5489);
    ck_assert_int_eq(lg__gen_init(&g, &s, 0, loaded, 4, 4, &acc, &seq, 0, 0, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "performance_issue_same_index 9"));

    lg_test_settings_init(&ts);
    ts.scenario = LG_SERVER;
    ts.server_target_qps = 0;
    lg_effective_settings(&ts, 4, 4, &s, NULL);
    ck_assert_int_eq(lg__gen_init(&g, &s, 0, loaded, 4, 4, &acc, &seq, 0, 0, &eb), CMN_ECONFIG);

    lg_test_settings_init(&ts);
    lg_effective_settings(&ts, 4, 4, &s, NULL);
    ck_assert_int_eq(lg__gen_init(&g, &s, 0, loaded, 0, 0, &acc, &seq, 0, 0, &eb), CMN_ECONFIG);
}
END_TEST

TCase *tcase_trace_modes(void)
{
    TCase *tc = tcase_create("trace_modes");

    tcase_add_test(tc, accuracy_covers_each_sample_once);
    tcase_add_test(tc, issue_same_and_unique);
    tcase_add_test(tc, offline_query_composition);
    tcase_add_test(tc, finish_matches_full_generation);
    tcase_add_test(tc, finish_stops_on_request);
    tcase_add_test(tc, generator_rejects_crashing_settings);
    return tc;
}
