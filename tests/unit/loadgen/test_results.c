/* Early stopping against the official finder's values (loadgen.md 3.2), percentiles, validity,
 * and the summary and detail texts. */
#include "test_loadgen.h"

#include "early.h"
#include "logs.h"
#include "progress.h"
#include "results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double p;
    int64_t t, h;
} es_ref_t;

static const es_ref_t es_refs[] = {
    {0.90, 0, 44},          {0.90, 1, 63},          {0.90, 2, 79},      {0.90, 10, 187},
    {0.90, 100, 1146},      {0.90, 1000, 9722},     {0.99, 0, 459},     {0.99, 1, 661},
    {0.99, 2, 836},         {0.99, 10, 2000},       {0.99, 100, 12471}, {0.99, 1000, 106569},
    {0.99, 10000, 1013394}, {0.999, 0, 4603},       {0.999, 1, 6635},   {0.999, 10, 20130},
    {0.999, 100, 125726},   {0.999, 1000, 1075032},
};

START_TEST(early_stopping_reference)
{
    const es_ref_t *r = &es_refs[_i];
    lg__es_finder_t f;

    lg__es_init(&f);
    ck_assert_int_eq(lg__es_min_passing(&f, r->t, r->p, 0.0, 0.99), r->h);
    /* Memoised: the same answer again. */
    ck_assert_int_eq(lg__es_min_passing(&f, r->t, r->p, 0.0, 0.99), r->h);
    lg__es_free(&f);
}
END_TEST

START_TEST(early_stopping_sequential)
{
    lg__es_finder_t f;
    int64_t t, prev = 0;

    /* The SingleStream loop asks for t = 1, 2, 3, ...; answers bounded by the memo stay exact. */
    lg__es_init(&f);
    for (t = 0; t <= 100; t++) {
        int64_t h = lg__es_min_passing(&f, t, 0.90, 0.0, 0.99);

        ck_assert_int_gt(h, prev);
        prev = h;
        if (t == 1)
            ck_assert_int_eq(h, 63);
        if (t == 2)
            ck_assert_int_eq(h, 79);
        if (t == 10)
            ck_assert_int_eq(h, 187);
    }
    ck_assert_int_eq(prev, 1146);
    lg__es_free(&f);
    /* odds(h, t) is the binomial tail: with t = 0 it is p^h. */
    ck_assert(fabs(lg__beta_regularized(0.9, 44, 1) - pow(0.9, 44)) < 1e-12);
}
END_TEST

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

START_TEST(radix_sort_matches_qsort)
{
    static const size_t sizes[] = {0, 1, 2, 63, 64, 65, 1000, 100000};
    uint64_t s = 88172645463325252ull;
    size_t k, i;

    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        int64_t *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));

        for (i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            /* Latency-like values, a few large and negative ones, and duplicates. */
            a[i] = i % 17 == 0 ? -(int64_t)(s % 1000) : i % 5 == 0 ? 4242 : (int64_t)(s % 50000000);
            if (i % 97 == 0)
                a[i] = (int64_t)(s >> 2);
            b[i] = a[i];
        }
        lg__sort_i64(a, n);
        qsort(b, n, sizeof(*b), cmp_i64);
        ck_assert(n == 0 || memcmp(a, b, n * sizeof(*a)) == 0);
        free(a);
        free(b);
    }
}
END_TEST

/* A finished series with latencies 1..n microseconds in a scrambled order. */
static void fake_perf(lg__perf_t *pr, size_t n, double duration_s)
{
    size_t i;

    memset(pr, 0, sizeof(*pr));
    pr->n = n;
    pr->lat = malloc(n * sizeof(*pr->lat));
    for (i = 0; i < n; i++)
        pr->lat[i] = (int64_t)(((i * 7919) % n) + 1) * 1000;
    pr->queries_issued = n;
    pr->max_latency = (double)n * 1e-6;
    pr->final_query_scheduled_time = duration_s;
    pr->final_query_issued_time = duration_s;
    pr->final_query_all_samples_done_time = duration_s + 0.001;
}

static char *report_to_files(const lg_effective_settings_t *s, lg__perf_t *pr, lg_result_t *res,
                             char **detail_text, char *dir)
{
    char path[512], dpath[512];
    lg__dlog_t d;
    FILE *f;
    char *text;

    snprintf(path, sizeof(path), "%s/summary.txt", dir);
    snprintf(dpath, sizeof(dpath), "%s/detail.txt", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(lg__dlog_open(&d, dpath, 0, 0, NULL), 0);
    lg__perf_report("Test SUT", s, pr, &d, f, 0, res);
    fclose(f);
    ck_assert_int_eq(lg__dlog_close(&d), 0);
    text = tl_read(path, NULL);
    ck_assert_ptr_nonnull(text);
    *detail_text = tl_read(dpath, NULL);
    ck_assert_ptr_nonnull(*detail_text);
    return text;
}

START_TEST(server_summary)
{
    lg_test_settings_t r;
    lg_effective_settings_t s;
    lg__perf_t pr;
    lg_result_t res = {0};
    char *dir = tl_mkdtemp(), *sum, *det, dpath[512];
    long bad;

    lg_test_settings_init(&r);
    r.scenario = LG_SERVER;
    r.server_target_qps = 1000;
    r.server_target_latency_ns = 995000; /* the p99 sample (990 us) is under it */
    r.min_duration_ms = 1000;
    lg_effective_settings(&r, 1024, 1024, &s, NULL);
    fake_perf(&pr, 1000, 1.0);
    sum = report_to_files(&s, &pr, &res, &det, dir);
    ck_assert_ptr_nonnull(strstr(sum, "================================================\n"
                                      "MLPerf Results Summary\n"
                                      "================================================\n"
                                      "SUT name : Test SUT\n"
                                      "Scenario : Server\n"
                                      "Mode     : PerformanceOnly\n"
                                      "Completed samples per second    : 998.00\n"
                                      "Result is : INVALID\n"
                                      "  Performance constraints satisfied : Yes\n"
                                      "  Min duration satisfied : Yes\n"
                                      "  Min queries satisfied : Yes\n"
                                      "  Early stopping satisfied: NO\n"
                                      "Recommendations:\n"
                                      "Early Stopping Result:\n"
                                      " * Run unsuccessful.\n"
                                      " * Processed 1000 queries.\n"));
    /* 5 latencies (996..1000 us) are over 995 us: h(5) + 5 more than 1000. */
    ck_assert_ptr_nonnull(strstr(sum, "Scheduled samples per second : 999.00\n"));
    ck_assert_ptr_nonnull(strstr(sum, "Min latency (ns)                : 1000\n"));
    ck_assert_ptr_nonnull(strstr(sum, "Mean latency (ns)               : 500500\n"));
    /* percentile(p) = lat[(size_t)(N * p)], no interpolation */
    ck_assert_ptr_nonnull(strstr(sum, "50.00 percentile latency (ns)   : 501000\n"));
    ck_assert_ptr_nonnull(strstr(sum, "99.90 percentile latency (ns)   : 1000000\n"));
    ck_assert_ptr_nonnull(strstr(sum, "target_qps : 1000\ntarget_latency (ns): 995000\n"));
    ck_assert(!res.performance_valid);
    ck_assert_str_eq(tl_detail_value((snprintf(dpath, sizeof(dpath), "%s/detail.txt", dir), dpath),
                                     "result_overlatency_query_count", (char[32]){0}, 32),
                     "5");
    ck_assert_int_gt(tl_detail_lines(dpath, &bad), 10);
    ck_assert_ptr_nonnull(
        strstr(det, "\"key\": \"result_completed_samples_per_sec\", \"value\": 998.002,"));
    ck_assert_ptr_nonnull(
        strstr(det, "\"key\": \"result_scheduled_samples_per_sec\", \"value\": 999,"));
    free(sum);
    free(det);
    lg__perf_free(&pr);
    tl_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(single_stream_summary)
{
    lg_test_settings_t r;
    lg_effective_settings_t s;
    lg__perf_t pr;
    lg_result_t res = {0};
    char *dir = tl_mkdtemp(), *sum, *det;

    lg_test_settings_init(&r);
    r.min_duration_ms = 0;
    lg_effective_settings(&r, 1024, 1024, &s, NULL);
    fake_perf(&pr, 100, 0.01);
    sum = report_to_files(&s, &pr, &res, &det, dir);
    ck_assert_ptr_nonnull(strstr(sum, "90.0th percentile latency (ns) : 91000\n"
                                      "Result is : VALID\n"));
    /* Early stopping with 100 queries (as the official run of the same size): discard 2, the
     * estimate is sorted[N - 3]. */
    ck_assert_ptr_nonnull(strstr(sum, "Early Stopping Result:\n"
                                      " * Processed at least 64 queries (100).\n"
                                      " * Would discard 2 highest latency queries.\n"
                                      " * Early stopping 90.0th percentile estimate: 98000\n"
                                      " * Not enough queries processed for 99.0th percentile\n"
                                      " early stopping estimate (would need to process at\n"
                                      " least 662 total queries).\n"));
    ck_assert_ptr_nonnull(strstr(sum, "QPS w/ loadgen overhead         : 9900.00\n"));
    ck_assert_ptr_nonnull(strstr(det, "\"key\": \"early_stopping_latency_ss\", \"value\": 98000,"));
    /* The detail log replaces the newlines by spaces. */
    ck_assert_ptr_nonnull(strstr(det, "(100).  * Would discard 2"));
    ck_assert(res.performance_valid);
    ck_assert(res.metric == 98000);
    free(sum);
    free(det);
    lg__perf_free(&pr);

    /* Failed samples make an otherwise valid run INVALID, with a reason. */
    fake_perf(&pr, 100, 0.01);
    pr.failed = 3;
    sum = report_to_files(&s, &pr, &res, &det, dir);
    ck_assert_ptr_nonnull(strstr(sum, "Result is : INVALID\n"));
    ck_assert_ptr_nonnull(strstr(sum, " * 3 samples failed in the SUT"));
    ck_assert_ptr_nonnull(strstr(det, "\"result_invalid_reason\", \"value\": \"3 samples failed"));
    ck_assert(!res.performance_valid);
    free(sum);
    free(det);
    lg__perf_free(&pr);
    tl_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(offline_and_multistream_summary)
{
    lg_test_settings_t r;
    lg_effective_settings_t s;
    lg__perf_t pr;
    lg_result_t res = {0};
    char *dir = tl_mkdtemp(), *sum, *det;
    size_t q;

    lg_test_settings_init(&r);
    r.scenario = LG_OFFLINE;
    r.min_duration_ms = 0;
    r.min_query_count = 10;
    lg_effective_settings(&r, 1024, 1024, &s, NULL);
    fake_perf(&pr, 1000, 0.0);
    pr.queries_issued = 1;
    pr.max_latency = 0.125;
    sum = report_to_files(&s, &pr, &res, &det, dir);
    /* The Offline metric prints with 6 significant digits, not %.2f. */
    ck_assert_ptr_nonnull(strstr(sum, "Samples per second: 8000\nResult is : VALID\n"));
    ck_assert_ptr_null(strstr(sum, "Early Stopping Result"));
    ck_assert_ptr_nonnull(strstr(det, "\"key\": \"result_samples_per_second\", \"value\": 8000,"));
    free(sum);
    free(det);
    lg__perf_free(&pr);

    lg_test_settings_init(&r);
    r.scenario = LG_MULTI_STREAM;
    r.min_duration_ms = 0;
    r.min_query_count = 10;
    lg_effective_settings(&r, 1024, 1024, &s, NULL);
    fake_perf(&pr, 80, 0.1);
    pr.queries_issued = 10;
    pr.nq = 10;
    pr.qlat = malloc(10 * sizeof(*pr.qlat));
    for (q = 0; q < 10; q++)
        pr.qlat[q] = (int64_t)(10 - q) * 1000;
    sum = report_to_files(&s, &pr, &res, &det, dir);
    ck_assert_ptr_nonnull(strstr(sum, "99.0th percentile latency (ns) : 10000\n"));
    ck_assert_ptr_nonnull(
        strstr(sum, "Per-query latency:  \nMin latency (ns)                : 1000\n"));
    ck_assert_ptr_nonnull(strstr(sum,
                                 " * Only processed 10 queries.\n * Need to process at least 662 "
                                 "queries for early stopping.\n"));
    ck_assert_ptr_nonnull(
        strstr(det, "\"result_99.00_percentile_per_query_latency_ns\", \"value\": 10000"));
    ck_assert(!res.performance_valid);
    free(sum);
    free(det);
    lg__perf_free(&pr);
    tl_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(progress_histogram)
{
    lg__hist_t h;
    int64_t v;
    uint64_t q;

    lg__hist_reset(&h);
    ck_assert_uint_eq(lg__hist_quantile(&h, 0.99), 0);
    /* 1..100000 ns: the p99 bucket's upper edge is within 1/64 above the true value. */
    for (v = 1; v <= 100000; v++)
        lg__hist_add(&h, v);
    q = lg__hist_quantile(&h, 0.99);
    ck_assert_uint_ge(q, 99000);
    ck_assert_uint_le(q, 99000 + 99000 / 64 + 1);
    q = lg__hist_quantile(&h, 0.5);
    ck_assert_uint_ge(q, 50000);
    ck_assert_uint_le(q, 50000 + 50000 / 64 + 1);
    /* Every value lands in a bucket whose upper edge is at least the value and within 1/64. */
    for (v = 1; v < ((int64_t)1 << 40); v = v * 3 + 1) {
        lg__hist_reset(&h);
        lg__hist_add(&h, v);
        q = lg__hist_quantile(&h, 0.5);
        ck_assert_uint_ge(q, (uint64_t)v);
        ck_assert_uint_le(q, (uint64_t)v + (uint64_t)v / 64 + 1);
    }
    lg__hist_reset(&h);
    for (v = 1; v <= 100000; v++)
        lg__hist_add(&h, v);
    lg__hist_add(&h, -5); /* clamps, never indexes out of range */
    lg__hist_add(&h, INT64_MAX);
    ck_assert_uint_gt(lg__hist_quantile(&h, 1.0), 0);
}
END_TEST

/* The line names the percentile the run is judged at and the bounds beside the values so far. */
START_TEST(progress_line_shows_targets)
{
    lg__progress_snap_t s = {0};
    char line[512];

    s.phase = "Server";
    s.elapsed_ns = 2500000000ull;
    s.issued = 12;
    s.completed = 10;
    s.pct = 0.99;
    s.p99_ns = 12300000;
    s.target_ns = 100000000;
    s.eta_s = 3;
    lg__progress_format(line, sizeof(line), &s, 4.0);
    ck_assert_str_eq(line, "[Server]    2.5s  issued 12  done 10  4/s  p99 12.3ms/100.0ms  ETA 3s");

    /* A token run: TTFT and TPOT with their bounds; "-" before any value. */
    s.target_ns = 0;
    s.p99_ns = 0;
    s.ttft_ns = 1500000000ull;
    s.ttft_target_ns = 2000000000ull;
    s.tpot_target_ns = 200000000;
    s.eta_s = -1;
    lg__progress_format(line, sizeof(line), &s, 4.0);
    ck_assert_str_eq(line,
                     "[Server]    2.5s  issued 12  done 10  4/s  p99 -  TTFT p99 1500.0ms/2000.0ms"
                     "  TPOT p99 -/200.0ms  ETA ?");

    /* SingleStream: judged at p90, no bound. A short buffer truncates, never overflows. */
    memset(&s, 0, sizeof(s));
    s.phase = "SingleStream";
    s.pct = 0.90;
    s.p99_ns = 5000;
    lg__progress_format(line, sizeof(line), &s, 0);
    ck_assert_ptr_nonnull(strstr(line, "  p90 5000ns  ETA 0s"));
    lg__progress_format(line, 20, &s, 0);
    ck_assert_uint_eq(strlen(line), 19);
}
END_TEST

TCase *tcase_early_stopping(void)
{
    TCase *tc = tcase_create("early_stopping");

    tcase_add_loop_test(tc, early_stopping_reference, 0,
                        (int)(sizeof(es_refs) / sizeof(es_refs[0])));
    tcase_add_test(tc, early_stopping_sequential);
    tcase_set_timeout(tc, 60);
    return tc;
}

TCase *tcase_metrics(void)
{
    TCase *tc = tcase_create("metrics");

    tcase_add_test(tc, radix_sort_matches_qsort);
    tcase_add_test(tc, server_summary);
    tcase_add_test(tc, single_stream_summary);
    tcase_add_test(tc, offline_and_multistream_summary);
    tcase_add_test(tc, progress_histogram);
    tcase_add_test(tc, progress_line_shows_targets);
    return tc;
}

/* ---- log writers ----------------------------------------------------------------------------- */

START_TEST(detail_lines_are_json)
{
    char *dir = tl_mkdtemp(), path[512], buf[256];
    lg__dlog_t d;
    long bad;
    static const uint32_t list[] = {3, 1, 2};

    snprintf(path, sizeof(path), "%s/d.txt", dir);
    ck_assert_int_eq(lg__dlog_open(&d, path, 0, 0, NULL), 0);
    /* A SUT name with quotes, backslashes and control characters would break the official line. */
    LG_DSTR(&d, "sut_name", "Network SUT \"a\\b\"\n\t\x01 ok");
    LG_DF64(&d, "result_samples_per_second", 7875350.0);
    LG_DF64(&d, "effective_target_qps", 1000.0);
    LG_DF64(&d, "x", 0.9);
    LG_DF64(&d, "inf", 1.0 / 0.0);
    LG_DBOOL(&d, "b", 1);
    LG_DU64(&d, "seed", 16159082839903944936ull);
    lg__dlog_u32_list(&d, "loaded_qsl_set", list, 3, "f.c", 1);
    LG_DERR(&d, "error_runtime", "oops %d", 3);
    LG_DWARN(&d, "warning_generic_message", "careful");
    ck_assert_uint_eq(atomic_load(&d.errors), 1);
    ck_assert_uint_eq(atomic_load(&d.warnings), 1);
    ck_assert_int_eq(lg__dlog_close(&d), 0);

    ck_assert_int_eq(tl_detail_lines(path, &bad), 10);
    ck_assert_str_eq(tl_detail_value(path, "sut_name", buf, sizeof(buf)),
                     "\"Network SUT \\\"a\\\\b\\\"\\n\\t\\u0001 ok\"");
    ck_assert_str_eq(tl_detail_value(path, "result_samples_per_second", buf, sizeof(buf)),
                     "7.87535e+06");
    ck_assert_str_eq(tl_detail_value(path, "effective_target_qps", buf, sizeof(buf)), "1000");
    ck_assert_str_eq(tl_detail_value(path, "x", buf, sizeof(buf)), "0.9");
    ck_assert_str_eq(tl_detail_value(path, "inf", buf, sizeof(buf)), "null");
    ck_assert_str_eq(tl_detail_value(path, "b", buf, sizeof(buf)), "true");
    ck_assert_str_eq(tl_detail_value(path, "seed", buf, sizeof(buf)), "16159082839903944936");
    ck_assert_str_eq(tl_detail_value(path, "loaded_qsl_set", buf, sizeof(buf)), "[3,1,2]");
    {
        char *text = tl_read(path, NULL);

        ck_assert_ptr_nonnull(strstr(text,
                                     "\"event_type\": \"POINT_IN_TIME\", \"metadata\": "
                                     "{\"is_error\": true, \"is_warning\": false, \"file\": "));
        ck_assert_ptr_nonnull(strstr(text, "\"namespace\": \"mlperf::logging\""));
        free(text);
    }
    tl_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(accuracy_log_format)
{
    char *dir = tl_mkdtemp(), path[512], *text;
    lg__acclog_t a;
    static const uint8_t data[] = {0x00, 0xab, 0x7f, 0xff};

    snprintf(path, sizeof(path), "%s/a.json", dir);
    ck_assert_int_eq(lg__acclog_open(&a, path, NULL), 0);
    ck_assert_int_eq(lg__acclog_close(&a), 0);
    text = tl_read(path, NULL);
    ck_assert_str_eq(text, "[\n]\n");
    free(text);

    ck_assert_int_eq(lg__acclog_open(&a, path, NULL), 0);
    lg__acclog_write(&a, 0, 5, data, 4, 0, NULL, 0, 0);
    lg__acclog_write(&a, 7, 9, data, 2, 2, data + 2, 2, 12);
    lg__acclog_write(&a, 8, 1, NULL, 0, 1, NULL, 0, 3);
    ck_assert_int_eq(lg__acclog_close(&a), 0);
    text = tl_read(path, NULL);
    ck_assert_str_eq(text,
                     "[\n"
                     "{ \"seq_id\" : 0, \"qsl_idx\" : 5, \"data\" : \"00AB7FFF\" },\n"
                     "{ \"seq_id\" : 7, \"qsl_idx\" : 9, \"data\" : \"00AB\", \"token_data\" : "
                     "\"7FFF\", \"token_count\" : 12 },\n"
                     "{ \"seq_id\" : 8, \"qsl_idx\" : 1, \"data\" : \"\", \"token_count\" : 3 }\n"
                     "]\n");
    ck_assert(tl_json_valid(text, strlen(text)));
    free(text);
    tl_rmdir(dir);
    free(dir);
}
END_TEST

TCase *tcase_logs(void)
{
    TCase *tc = tcase_create("logs");

    tcase_add_test(tc, detail_lines_are_json);
    tcase_add_test(tc, accuracy_log_format);
    return tc;
}
