/* Prometheus metrics over HTTP (metrics.h). */
#include "metrics.h"

#include "alloc.h"
#include "cmn/log.h"
#include "cmn/net.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double sut__latency_bounds_s[SUT_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0};

struct sut_metrics {
    struct MHD_Daemon *d;
    uv_mutex_t mu; /* guards text */
    char *text;
    size_t len;
    char name[256];
};

unsigned sut__batch_bucket(uint64_t n)
{
    unsigned i = 0;

    while (i < SUT_BATCH_BUCKETS && n > (1ull << i))
        i++;
    return i;
}

unsigned sut__latency_bucket(uint64_t ns)
{
    unsigned i = 0;

    while (i < SUT_LATENCY_BUCKETS && (double)ns / 1e9 > sut__latency_bounds_s[i])
        i++;
    return i;
}

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} text_t;

static void put(text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        char *nb = sut__realloc(t->buf, t->cap * 2 + (size_t)n);
        if (!nb) {
            t->failed = 1;
            return;
        }
        t->buf = nb;
        t->cap = t->cap * 2 + (size_t)n;
    }
}

static void counter(text_t *t, const char *name, const char *help, const char *type, double v)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void histograms(text_t *t, const sut_histograms_t *h, uint64_t batches)
{
    uint64_t cum = 0;
    unsigned i;

    put(t, "# HELP sut_batch_size Samples per batch given to the backend.\n"
           "# TYPE sut_batch_size histogram\n");
    for (i = 0; i < SUT_BATCH_BUCKETS; i++) {
        cum += h->batch_size[i];
        put(t, "sut_batch_size_bucket{le=\"%llu\"} %llu\n", 1ull << i, (unsigned long long)cum);
    }
    cum += h->batch_size[SUT_BATCH_BUCKETS];
    put(t, "sut_batch_size_bucket{le=\"+Inf\"} %llu\nsut_batch_size_sum %llu\n",
        (unsigned long long)cum, (unsigned long long)h->batch_size_sum);
    put(t, "sut_batch_size_count %llu\n", (unsigned long long)batches);
    put(t,
        "# HELP sut_latency_seconds In-node latency of a sample: its Query frame received to its "
        "result queued for sending.\n# TYPE sut_latency_seconds histogram\n");
    for (cum = 0, i = 0; i < SUT_LATENCY_BUCKETS; i++) {
        cum += h->latency[i];
        put(t, "sut_latency_seconds_bucket{le=\"%g\"} %llu\n", sut__latency_bounds_s[i],
            (unsigned long long)cum);
    }
    cum += h->latency[SUT_LATENCY_BUCKETS];
    put(t, "sut_latency_seconds_bucket{le=\"+Inf\"} %llu\nsut_latency_seconds_sum %.9f\n",
        (unsigned long long)cum, h->latency_sum_s);
    put(t, "sut_latency_seconds_count %llu\n", (unsigned long long)cum);
}

static void render(text_t *t, const char *node, const sut_metrics_values_t *v)
{
    put(t,
        "# HELP sut_node_info The node's name.\n# TYPE sut_node_info gauge\n"
        "sut_node_info{node=\"%s\"} 1\n",
        node);
    counter(t, "sut_queries_total", "Query frames received.", "counter", (double)v->queries);
    counter(t, "sut_samples_total", "Samples accepted for inference.", "counter",
            (double)v->samples);
    counter(t, "sut_batches_total", "Batches given to the backend.", "counter", (double)v->batches);
    counter(t, "sut_bytes_in_total", "Frame bytes received.", "counter", (double)v->bytes_in);
    counter(t, "sut_bytes_out_total", "Result payload bytes sent.", "counter",
            (double)v->bytes_out);
    counter(t, "sut_decode_seconds_total", "Time decompressing samples.", "counter",
            (double)v->decode_ns / 1e9);
    counter(t, "sut_queue_wait_seconds_total", "Time batches waited for a worker after dispatch.",
            "counter", (double)v->queue_ns / 1e9);
    counter(t, "sut_infer_seconds_total", "Time in the backend, from its start on a batch.",
            "counter", (double)v->infer_ns / 1e9);
    counter(t, "sut_encode_seconds_total", "Time compressing results.", "counter",
            (double)v->encode_ns / 1e9);
    counter(t, "sut_errors_total", "Connections closed for a protocol or limit violation.",
            "counter", (double)v->errors);
    counter(t, "sut_samples_failed_total", "Samples the backend failed.", "counter",
            (double)v->samples_failed);
    counter(t, "sut_samples_rejected_total", "Samples answered REJECTED (draining, limits).",
            "counter", (double)v->samples_rejected);
    counter(t, "sut_connections_total", "Connections accepted.", "counter",
            (double)v->connections_total);
    counter(t, "sut_connections_open", "Connections open.", "gauge", (double)v->connections_open);
    counter(t, "sut_inflight_samples", "Samples received and not yet answered.", "gauge",
            (double)v->inflight_samples);
    counter(t, "sut_memory_used_bytes", "Bytes peers hold of the memory budget.", "gauge",
            (double)v->memory_used);
    counter(t, "sut_memory_peak_bytes", "Most bytes peers held of the memory budget.", "gauge",
            (double)v->memory_peak);
    counter(t, "sut_memory_limit_bytes", "Bytes peers may hold (three quarters of the budget).",
            "gauge", (double)v->memory_limit);
    counter(t, "sut_memory_budget_bytes", "The --memory-budget.", "gauge",
            (double)v->memory_budget);
    histograms(t, &v->h, v->batches);
}

void sut__metrics_publish(sut_metrics_t *m, const sut_metrics_values_t *v)
{
    text_t t = {sut__malloc(8192), 0, 8192, 0};

    if (!t.buf)
        return;
    render(&t, m->name, v);
    if (t.failed) {
        free(t.buf);
        return;
    }
    uv_mutex_lock(&m->mu);
    free(m->text);
    m->text = t.buf;
    m->len = t.len;
    uv_mutex_unlock(&m->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    static const char not_found[] = "only /metrics is served here\n";
    sut_metrics_t *m = cls;
    struct MHD_Response *r;
    enum MHD_Result rc;
    char *copy = NULL;
    size_t len = 0;

    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
        r = MHD_create_response_from_buffer(sizeof(not_found) - 1, (void *)not_found,
                                            MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        rc = MHD_queue_response(c, MHD_HTTP_NOT_FOUND, r);
        MHD_destroy_response(r);
        return rc;
    }
    uv_mutex_lock(&m->mu);
    if (m->text && (copy = malloc(m->len ? m->len : 1)) != NULL) {
        memcpy(copy, m->text, m->len);
        len = m->len;
    }
    uv_mutex_unlock(&m->mu);
    r = MHD_create_response_from_buffer(len, copy ? copy : (void *)"",
                                        copy ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(copy);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

int sut__metrics_start(sut_metrics_t **out, const char *addr, const char *node_name, int *port,
                       cmn_errbuf_t *eb)
{
    struct sockaddr_storage ss;
    const union MHD_DaemonInfo *info;
    sut_metrics_t *m;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    int rc;

    rc = cmn_addr_parse(addr, &ss, eb);
    if (rc < 0)
        return rc;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m = sut__calloc(1, sizeof(*m));
    if (!m)
        return cmn_errf(eb, UV_ENOMEM, "--metrics-listen: out of memory");
    if (uv_mutex_init(&m->mu) < 0) {
        free(m);
        return cmn_errf(eb, UV_ENOMEM, "--metrics-listen: cannot create a mutex");
    }
    snprintf(m->name, sizeof(m->name), "%s", node_name);
    for (char *q = m->name; *q; q++) /* a label value: no quote, backslash or newline */
        if (*q == '"' || *q == '\\' || *q == '\n')
            *q = '_';
    m->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 64u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!m->d) {
        uv_mutex_destroy(&m->mu);
        free(m);
        return cmn_errf(eb, CMN_ECONFIG, "--metrics-listen %s: cannot serve HTTP there", addr);
    }
    info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    *out = m;
    return 0;
}

void sut__metrics_stop(sut_metrics_t *m)
{
    if (!m)
        return;
    MHD_stop_daemon(m->d);
    uv_mutex_destroy(&m->mu);
    free(m->text);
    free(m);
}
