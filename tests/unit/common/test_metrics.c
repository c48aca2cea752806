/* The metrics registry: the text exposition format byte by byte (escaping, exact decimals,
 * histogram buckets), lock-free updates from several threads, and /metrics over HTTP. */
#include "test_common.h"

#include "cmn/metrics.h"
#include "cmn/metrics_http.h"
#include "cmn/metrics_std.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static char *render(cmn_metrics_t *m)
{
    char *out = NULL;
    size_t len = 0;

    ck_assert_int_eq(cmn_metrics_render(m, &out, &len), 0);
    ck_assert_uint_eq(strlen(out), len);
    return out;
}

/* ---- text format ------------------------------------------------------------------------- */

START_TEST(text_counter_gauge)
{
    cmn_metrics_t *m;
    cmn_metric_t *c, *g, *t;
    cmn_series_t *sc, *sg, *st;
    const cmn_metric_desc_t dc = {
        .name = "x_requests_total", .help = "Requests served.", .type = CMN_METRIC_COUNTER};
    const cmn_metric_desc_t dg = {
        .name = "x_in_flight", .help = "Requests now.", .type = CMN_METRIC_GAUGE};
    const cmn_metric_desc_t dt = {.name = "x_busy_seconds_total",
                                  .help = "Time busy.",
                                  .type = CMN_METRIC_COUNTER,
                                  .decimals = 9};
    char *s;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &dc, &c, NULL), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &dg, &g, NULL), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &dt, &t, NULL), 0);

    /* Unlabelled metrics render 0 before anything happened. */
    s = render(m);
    ck_assert_str_eq(s, "# HELP x_requests_total Requests served.\n"
                        "# TYPE x_requests_total counter\n"
                        "x_requests_total 0\n"
                        "# HELP x_in_flight Requests now.\n"
                        "# TYPE x_in_flight gauge\n"
                        "x_in_flight 0\n"
                        "# HELP x_busy_seconds_total Time busy.\n"
                        "# TYPE x_busy_seconds_total counter\n"
                        "x_busy_seconds_total 0\n");
    free(s);

    ck_assert_int_eq(cmn_metric_series(c, NULL, &sc), 0);
    ck_assert_int_eq(cmn_metric_series(g, NULL, &sg), 0);
    ck_assert_int_eq(cmn_metric_series(t, NULL, &st), 0);
    cmn_series_inc(sc);
    cmn_series_add(sc, 41);
    cmn_series_add(sg, 2);
    cmn_series_sub(sg, 5);             /* gauges go negative */
    cmn_series_add(st, 1500000000ull); /* 1.5 s in ns */
    cmn_series_add(st, 250);           /* + 250 ns: exact, no float rounding */
    ck_assert_int_eq(cmn_series_value(sc), 42);
    ck_assert_int_eq(cmn_series_value(sg), -3);
    s = render(m);
    ck_assert_str_eq(s, "# HELP x_requests_total Requests served.\n"
                        "# TYPE x_requests_total counter\n"
                        "x_requests_total 42\n"
                        "# HELP x_in_flight Requests now.\n"
                        "# TYPE x_in_flight gauge\n"
                        "x_in_flight -3\n"
                        "# HELP x_busy_seconds_total Time busy.\n"
                        "# TYPE x_busy_seconds_total counter\n"
                        "x_busy_seconds_total 1.50000025\n");
    free(s);

    cmn_series_set(sg, 7);
    cmn_series_set(st, 3000000000ll); /* a whole number of seconds prints without a point */
    s = render(m);
    ck_assert_ptr_nonnull(strstr(s, "\nx_in_flight 7\n"));
    ck_assert_ptr_nonnull(strstr(s, "\nx_busy_seconds_total 3\n"));
    free(s);
    cmn_metrics_free(m);
}
END_TEST

START_TEST(text_labels_escaped)
{
    cmn_metrics_t *m;
    cmn_metric_t *e;
    cmn_series_t *s1, *s2, *again;
    const char *const names[] = {"kind", "peer", NULL};
    const cmn_metric_desc_t d = {.name = "x_errors_total",
                                 .help = "Errors by kind.\nA back\\slash and \"quotes\".",
                                 .type = CMN_METRIC_COUNTER,
                                 .labels = names};
    const char *const v1[] = {"decode", "10.0.0.1:7000", NULL};
    const char *const v2[] = {"a\"b\\c\nd", "", NULL};
    char *s;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &e, NULL), 0);
    /* A labelled metric has no series until one is asked for. */
    s = render(m);
    ck_assert_str_eq(s, "# HELP x_errors_total Errors by kind.\\nA back\\\\slash and \"quotes\".\n"
                        "# TYPE x_errors_total counter\n");
    free(s);
    ck_assert_int_eq(cmn_metric_series(e, v1, &s1), 0);
    ck_assert_int_eq(cmn_metric_series(e, v2, &s2), 0);
    ck_assert_int_eq(cmn_metric_series(e, v1, &again), 0);
    ck_assert_ptr_eq(s1, again); /* the same values give the same series */
    cmn_series_add(s1, 3);
    cmn_series_inc(s2);
    s = render(m);
    ck_assert_str_eq(s, "# HELP x_errors_total Errors by kind.\\nA back\\\\slash and \"quotes\".\n"
                        "# TYPE x_errors_total counter\n"
                        "x_errors_total{kind=\"decode\",peer=\"10.0.0.1:7000\"} 3\n"
                        "x_errors_total{kind=\"a\\\"b\\\\c\\nd\",peer=\"\"} 1\n");
    free(s);
    cmn_metrics_free(m);
}
END_TEST

START_TEST(text_histogram)
{
    cmn_metrics_t *m;
    cmn_metric_t *h, *bs;
    cmn_series_t *s, *sb;
    /* 1 ms, 10 ms, 100 ms kept in microseconds, shown in seconds */
    const uint64_t lat_bounds[] = {1000, 10000, 100000};
    const uint64_t size_bounds[] = {1, 2, 4, 8};
    const char *const names[] = {"model", NULL};
    const char *const vals[] = {"resnet50", NULL};
    const cmn_metric_desc_t dh = {.name = "x_latency_seconds",
                                  .help = "Latency.",
                                  .type = CMN_METRIC_HISTOGRAM,
                                  .decimals = 6,
                                  .labels = names,
                                  .bounds = lat_bounds,
                                  .nbounds = 3};
    const cmn_metric_desc_t db = {.name = "x_batch_size",
                                  .help = "Samples per batch.",
                                  .type = CMN_METRIC_HISTOGRAM,
                                  .bounds = size_bounds,
                                  .nbounds = 4};
    char *out;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &dh, &h, NULL), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &db, &bs, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(h, vals, &s), 0);
    ck_assert_int_eq(cmn_metric_series(bs, NULL, &sb), 0);
    cmn_series_observe(s, 0);       /* le 0.001 */
    cmn_series_observe(s, 1000);    /* on the bound: le 0.001 */
    cmn_series_observe(s, 1001);    /* le 0.01 */
    cmn_series_observe(s, 100000);  /* le 0.1 */
    cmn_series_observe(s, 2500001); /* +Inf */
    for (uint64_t n = 1; n <= 9; n++)
        cmn_series_observe(sb, n);
    out = render(m);
    ck_assert_str_eq(out, "# HELP x_latency_seconds Latency.\n"
                          "# TYPE x_latency_seconds histogram\n"
                          "x_latency_seconds_bucket{model=\"resnet50\",le=\"0.001\"} 2\n"
                          "x_latency_seconds_bucket{model=\"resnet50\",le=\"0.01\"} 3\n"
                          "x_latency_seconds_bucket{model=\"resnet50\",le=\"0.1\"} 4\n"
                          "x_latency_seconds_bucket{model=\"resnet50\",le=\"+Inf\"} 5\n"
                          "x_latency_seconds_sum{model=\"resnet50\"} 2.602002\n"
                          "x_latency_seconds_count{model=\"resnet50\"} 5\n"
                          "# HELP x_batch_size Samples per batch.\n"
                          "# TYPE x_batch_size histogram\n"
                          "x_batch_size_bucket{le=\"1\"} 1\n"
                          "x_batch_size_bucket{le=\"2\"} 2\n"
                          "x_batch_size_bucket{le=\"4\"} 4\n"
                          "x_batch_size_bucket{le=\"8\"} 8\n"
                          "x_batch_size_bucket{le=\"+Inf\"} 9\n"
                          "x_batch_size_sum 45\n"
                          "x_batch_size_count 9\n");
    free(out);
    cmn_metrics_free(m);
}
END_TEST

START_TEST(bad_descriptions)
{
    cmn_metrics_t *m;
    cmn_metric_t *mt;
    cmn_series_t *s;
    cmn_errbuf_t eb;
    const uint64_t down[] = {5, 5};
    const char *const le[] = {"le", NULL};
    const char *const dunder[] = {"__x", NULL};
    const char *const twice[] = {"a", "a", NULL};
    const char *const one[] = {"a", NULL};
    char longval[CMN_METRICS_MAX_LABEL_LEN + 2];
    const char *const vlong[] = {longval, NULL};
    cmn_metric_desc_t d = {.name = "1bad", .type = CMN_METRIC_COUNTER};

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "1bad"));
    d.name = "bad-dash";
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.name = "h";
    d.type = CMN_METRIC_HISTOGRAM;
    d.bounds = down;
    d.nbounds = 2;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "ascending"));
    d.nbounds = 1;
    d.labels = le;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.labels = dunder;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.labels = twice;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.type = CMN_METRIC_GAUGE; /* bounds on a gauge */
    d.labels = one;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.nbounds = 0;
    d.bounds = NULL;
    d.decimals = CMN_METRICS_MAX_DECIMALS + 1;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG);
    d.decimals = 0;
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &mt, &eb), CMN_ECONFIG); /* the same name twice */
    ck_assert_ptr_nonnull(strstr(eb.msg, "twice"));
    /* label values: present and bounded */
    ck_assert_int_eq(cmn_metric_series(mt, NULL, &s), CMN_ECONFIG);
    memset(longval, 'x', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    ck_assert_int_eq(cmn_metric_series(mt, vlong, &s), CMN_ECONFIG);
    cmn_metrics_free(m);
}
END_TEST

static void collect_cb(void *arg)
{
    cmn_series_t *s = arg;
    cmn_series_add(s, 10);
}

START_TEST(collect_callback)
{
    cmn_metrics_t *m;
    cmn_metric_t *g;
    cmn_series_t *s;
    const cmn_metric_desc_t d = {.name = "x_rss_bytes", .help = "RSS.", .type = CMN_METRIC_GAUGE};
    char *out;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &g, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(g, NULL, &s), 0);
    ck_assert_int_eq(cmn_metrics_on_collect(m, collect_cb, s), 0);
    out = render(m);
    ck_assert_ptr_nonnull(strstr(out, "\nx_rss_bytes 10\n"));
    free(out);
    out = render(m);
    ck_assert_ptr_nonnull(strstr(out, "\nx_rss_bytes 20\n"));
    free(out);
    cmn_metrics_free(m);
}
END_TEST

/* The value of the sample line "\nNAME VALUE\n" in |out|, or -1. */
static double sample_value(const char *out, const char *name)
{
    char key[128];
    const char *p;

    snprintf(key, sizeof(key), "\n%s ", name);
    p = strstr(out, key);
    return p ? strtod(p + strlen(key), NULL) : -1.0;
}

START_TEST(add_series)
{
    static const char *const labels[] = {"a", NULL};
    const cmn_metric_desc_t plain = {.name = "x_total", .help = "X.", .type = CMN_METRIC_COUNTER};
    const cmn_metric_desc_t labelled = {
        .name = "y_total", .help = "Y.", .type = CMN_METRIC_COUNTER, .labels = labels};
    cmn_errbuf_t eb = {{0}};
    cmn_metrics_t *m;
    cmn_series_t *s = NULL;
    char *out;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add_series(m, &plain, &s, &eb), 0);
    cmn_series_add(s, 3);
    ck_assert_int_eq(cmn_metrics_add_series(m, &labelled, &s, &eb), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "metric y_total: labels, so no single series");
    ck_assert_int_eq(cmn_metrics_add_series(m, &plain, &s, &eb), CMN_ECONFIG); /* twice */
    out = render(m);
    ck_assert_str_eq(out, "# HELP x_total X.\n# TYPE x_total counter\nx_total 3\n");
    free(out);
    cmn_metrics_free(m);
}
END_TEST

START_TEST(process_and_build_info)
{
    cmn_metrics_t *m;
    cmn_errbuf_t eb = {{0}};
    char *out;
    int fd;
    double fds, start, now = (double)time(NULL);

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_process(m, &eb), 0);
    ck_assert_int_eq(cmn_metrics_build_info(m, "x", "1.2", "abc\"d", &eb), 0);
    out = render(m);
    ck_assert_ptr_nonnull(strstr(out, "# TYPE process_cpu_seconds_total counter\n"));
    ck_assert_ptr_nonnull(strstr(out, "\nx_build_info{version=\"1.2\",commit=\"abc\\\"d\"} 1\n"));
    ck_assert(sample_value(out, "process_resident_memory_bytes") > 4096);
    ck_assert(sample_value(out, "process_virtual_memory_bytes") >=
              sample_value(out, "process_resident_memory_bytes"));
    ck_assert(sample_value(out, "process_max_fds") >= 3);
    ck_assert(sample_value(out, "process_cpu_seconds_total") >= 0);
    /* Started within the last hour (a test process), not in the future. */
    start = sample_value(out, "process_start_time_seconds");
    ck_assert_msg(start > now - 3600 && start <= now + 1, "start %f now %f", start, now);
    fds = sample_value(out, "process_open_fds");
    ck_assert(fds >= 3);
    free(out);
    /* One more descriptor is one more in the next scrape. */
    fd = dup(0);
    ck_assert_int_ge(fd, 0);
    out = render(m);
    ck_assert(sample_value(out, "process_open_fds") == fds + 1);
    free(out);
    close(fd);
    cmn_metrics_free(m);
}
END_TEST

/* ---- threads ----------------------------------------------------------------------------- */

#define MT_THREADS 4
#define MT_PER_THREAD 100000

static struct {
    cmn_series_t *c, *h;
    cmn_metrics_t *m;
} mts;

static void *mt_worker(void *arg)
{
    for (uint64_t i = 0; i < MT_PER_THREAD; i++) {
        cmn_series_inc(mts.c);
        cmn_series_observe(mts.h, i % 3);
    }
    return arg;
}

static void *mt_scraper(void *arg)
{
    for (int i = 0; i < 50; i++) {
        char *out;
        size_t len;
        ck_assert_int_eq(cmn_metrics_render(mts.m, &out, &len), 0);
        free(out);
    }
    return arg;
}

START_TEST(threads_lose_nothing)
{
    pthread_t th[MT_THREADS + 1];
    cmn_metric_t *c, *h;
    const uint64_t b[] = {0, 1};
    const cmn_metric_desc_t dc = {.name = "t_total", .type = CMN_METRIC_COUNTER};
    const cmn_metric_desc_t dh = {
        .name = "t_hist", .type = CMN_METRIC_HISTOGRAM, .bounds = b, .nbounds = 2};
    char *out, want[256];

    ck_assert_int_eq(cmn_metrics_new(&mts.m), 0);
    ck_assert_int_eq(cmn_metrics_add(mts.m, &dc, &c, NULL), 0);
    ck_assert_int_eq(cmn_metrics_add(mts.m, &dh, &h, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(c, NULL, &mts.c), 0);
    ck_assert_int_eq(cmn_metric_series(h, NULL, &mts.h), 0);
    for (int i = 0; i < MT_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, mt_worker, NULL), 0);
    ck_assert_int_eq(pthread_create(&th[MT_THREADS], NULL, mt_scraper, NULL), 0);
    for (int i = 0; i <= MT_THREADS; i++)
        pthread_join(th[i], NULL);
    out = render(mts.m);
    /* i % 3 over 0..99999: 33334 zeros, 33333 ones, 33333 twos per thread */
    snprintf(want, sizeof(want),
             "t_total %d\n# HELP t_hist \n# TYPE t_hist histogram\n"
             "t_hist_bucket{le=\"0\"} %d\nt_hist_bucket{le=\"1\"} %d\n"
             "t_hist_bucket{le=\"+Inf\"} %d\nt_hist_sum %d\nt_hist_count %d\n",
             MT_THREADS * MT_PER_THREAD, MT_THREADS * 33334, MT_THREADS * 66667,
             MT_THREADS * MT_PER_THREAD, MT_THREADS * (33333 + 2 * 33333),
             MT_THREADS * MT_PER_THREAD);
    ck_assert_ptr_nonnull(strstr(out, want));
    free(out);
    cmn_metrics_free(mts.m);
}
END_TEST

/* ---- HTTP -------------------------------------------------------------------------------- */

/* One HTTP/1.0 request on a fresh connection; the whole reply into |buf|. */
static size_t http_get(int port, const char *request, char *buf, size_t cap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 10};
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return got;
}

START_TEST(http_serves_metrics)
{
    cmn_metrics_t *m;
    cmn_metric_t *c;
    cmn_series_t *s;
    cmn_metrics_http_t *h, *h2;
    cmn_errbuf_t eb;
    const cmn_metric_desc_t d = {
        .name = "x_scrapes_total", .help = "Test.", .type = CMN_METRIC_COUNTER};
    static char buf[65536];
    char addr[64];
    int port;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &c, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(c, NULL, &s), 0);
    cmn_series_add(s, 5);
    ck_assert_int_eq(cmn_metrics_http_start(m, "127.0.0.1:0", &h, &eb), 0);
    port = cmn_metrics_http_port(h);
    ck_assert_int_gt(port, 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_str_eq(cmn_metrics_http_addr(h), addr);

    http_get(port, "GET /metrics HTTP/1.0\r\n\r\n", buf, sizeof(buf));
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0,
                  "reply: %s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\n# HELP x_scrapes_total Test.\n"
                                      "# TYPE x_scrapes_total counter\nx_scrapes_total 5\n"));
    http_get(port, "GET /other HTTP/1.0\r\n\r\n", buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, " 404 "));
    http_get(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, " 405 "));

    /* The port is taken: a second listener on it says so, naming the address. */
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_int_lt(cmn_metrics_http_start(m, addr, &h2, &eb), 0);
    ck_assert_ptr_nonnull(strstr(eb.msg, addr));
    ck_assert_int_eq(cmn_metrics_http_start(m, "nohost", &h2, &eb), CMN_ECONFIG);

    cmn_metrics_http_stop(h);
    cmn_metrics_free(m);
}
END_TEST

TCase *tcase_metrics(void)
{
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, text_counter_gauge);
    tcase_add_test(tc, text_labels_escaped);
    tcase_add_test(tc, text_histogram);
    tcase_add_test(tc, bad_descriptions);
    tcase_add_test(tc, collect_callback);
    tcase_add_test(tc, add_series);
    tcase_add_test(tc, process_and_build_info);
    tcase_add_test(tc, threads_lose_nothing);
    tcase_set_timeout(tc, 60);
    return tc;
}

TCase *tcase_metrics_http(void)
{
    TCase *tc = tcase_create("metrics_http");
    tcase_add_test(tc, http_serves_metrics);
    tcase_set_timeout(tc, 30);
    return tc;
}
