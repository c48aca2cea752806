/* loadgen-node's Prometheus metrics (metrics.h). */
#include "metrics.h"

#include "cmn/log.h"
#include "cmn/metrics.h"
#include "cmn/metrics_http.h"
#include "cmn/msg.h"
#include "lg/sut_qdl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The nodes a scrape reports (loadgen-node accepts at most 64). */
#define MAX_NODES 64

/* Per node, from qdl_node_stats_t. */
enum {
    N_UP,
    N_SENT,
    N_COMPLETED,
    N_FAILED,
    N_INFLIGHT,
    N_REDISPATCHED,
    N_ERRORS,
    N_RECONNECTS,
    N_BYTES_OUT,
    N_BYTES_IN,
    N_RTT_LAST,
    N_RTT_MIN,
    N_PER_NODE
};

typedef struct {
    const char *name;
    const char *help;
    cmn_metric_type_t type;
    unsigned decimals;
} desc_t;

static const desc_t node_descs[N_PER_NODE] = {
    [N_UP] = {"loadgen_node_up", "1 while the QDL has the node connected.", CMN_METRIC_GAUGE, 0},
    [N_SENT] = {"loadgen_node_samples_sent_total", "Samples the QDL sent to the node.",
                CMN_METRIC_COUNTER, 0},
    [N_COMPLETED] = {"loadgen_node_samples_completed_total", "Samples the node answered.",
                     CMN_METRIC_COUNTER, 0},
    [N_FAILED] = {"loadgen_node_samples_failed_total", "Samples the node answered with an error.",
                  CMN_METRIC_COUNTER, 0},
    [N_INFLIGHT] = {"loadgen_node_inflight_samples", "Samples sent to the node and not answered.",
                    CMN_METRIC_GAUGE, 0},
    [N_REDISPATCHED] = {"loadgen_node_redispatched_total",
                        "Samples moved to another node after this one went down.",
                        CMN_METRIC_COUNTER, 0},
    [N_ERRORS] = {"loadgen_node_errors_total", "Errors on the node's connections.",
                  CMN_METRIC_COUNTER, 0},
    [N_RECONNECTS] = {"loadgen_node_reconnects_total", "Reconnection attempts to the node.",
                      CMN_METRIC_COUNTER, 0},
    [N_BYTES_OUT] = {"loadgen_node_sent_bytes_total", "Bytes sent to the node.", CMN_METRIC_COUNTER,
                     0},
    [N_BYTES_IN] = {"loadgen_node_received_bytes_total", "Bytes received from the node.",
                    CMN_METRIC_COUNTER, 0},
    [N_RTT_LAST] = {"loadgen_node_rtt_seconds", "The last Ping round trip to the node.",
                    CMN_METRIC_GAUGE, 9},
    [N_RTT_MIN] = {"loadgen_node_rtt_min_seconds", "The shortest Ping round trip to the node.",
                   CMN_METRIC_GAUGE, 9},
};

struct lg__metrics {
    lg_sut_t *sut;
    cmn_metrics_t *reg;
    cmn_metrics_http_t *http;
    cmn_series_t *issued, *completed, *failed, *inflight;
    cmn_metric_t *per_node[N_PER_NODE];
    cmn_metric_t *info;
    qdl_node_stats_t st[MAX_NODES]; /* the HTTP thread's scratch (scrapes are serialized) */
};

/* The HTTP thread, before each scrape: the adapter's counters and the QDL's node table. */
static void on_collect(void *arg)
{
    lg__metrics_t *m = arg;
    uint64_t issued, completed, failed;
    int n;

    lg_sut_qdl_counts(m->sut, &issued, &completed, &failed);
    cmn_series_set(m->issued, (int64_t)issued);
    cmn_series_set(m->completed, (int64_t)completed);
    cmn_series_set(m->failed, (int64_t)failed);
    /* A completion can land before its issue() call has returned and been counted. */
    cmn_series_set(m->inflight, issued > completed ? (int64_t)(issued - completed) : 0);
    n = qdl_stats(lg_sut_qdl_handle(m->sut), m->st, MAX_NODES);
    for (int i = 0; i < n && i < MAX_NODES; i++) {
        const qdl_node_stats_t *s = &m->st[i];
        /* The name comes from the node: printable ASCII only before it becomes a label. */
        char name[sizeof(s->name)];
        const char *const node[] = {s->address, NULL};
        const char *const info[] = {
            s->address,
            cmn_sanitize(s->name, strnlen(s->name, sizeof(s->name)), name, sizeof(name)), NULL};
        const uint64_t v[N_PER_NODE] = {[N_UP] = s->up ? 1u : 0u,
                                        [N_SENT] = s->samples_sent,
                                        [N_COMPLETED] = s->samples_completed,
                                        [N_FAILED] = s->samples_failed,
                                        [N_INFLIGHT] = s->inflight,
                                        [N_REDISPATCHED] = s->redispatched,
                                        [N_ERRORS] = s->errors,
                                        [N_RECONNECTS] = s->reconnects,
                                        [N_BYTES_OUT] = s->bytes_out,
                                        [N_BYTES_IN] = s->bytes_in,
                                        [N_RTT_LAST] = s->rtt_ns_last,
                                        [N_RTT_MIN] = s->rtt_ns_min};
        cmn_series_t *series;

        for (int k = 0; k < N_PER_NODE; k++)
            if (cmn_metric_series(m->per_node[k], node, &series) == 0)
                cmn_series_set(series, (int64_t)v[k]);
        if (name[0] && cmn_metric_series(m->info, info, &series) == 0)
            cmn_series_set(series, 1);
    }
}

static int add(lg__metrics_t *m, const char *name, const char *help, cmn_metric_type_t type,
               unsigned decimals, const char *const *labels, cmn_metric_t **mt, cmn_errbuf_t *eb)
{
    cmn_metric_desc_t d = {
        .name = name, .help = help, .type = type, .decimals = decimals, .labels = labels};

    return cmn_metrics_add(m->reg, &d, mt, eb);
}

static int add_plain(lg__metrics_t *m, const char *name, const char *help, cmn_metric_type_t type,
                     cmn_series_t **out, cmn_errbuf_t *eb)
{
    cmn_metric_t *mt;
    int rc = add(m, name, help, type, 0, NULL, &mt, eb);

    return rc < 0 ? rc : cmn_metric_series(mt, NULL, out);
}

static int register_all(lg__metrics_t *m, cmn_errbuf_t *eb)
{
    static const char *const node_label[] = {"node", NULL};
    static const char *const info_labels[] = {"node", "name", NULL};
    int rc;

    rc = add_plain(m, "loadgen_samples_issued_total", "Samples LoadGen handed to the QDL.",
                   CMN_METRIC_COUNTER, &m->issued, eb);
    if (rc == 0)
        rc = add_plain(m, "loadgen_samples_completed_total",
                       "Samples the QDL completed back to LoadGen (failed ones included).",
                       CMN_METRIC_COUNTER, &m->completed, eb);
    if (rc == 0)
        rc = add_plain(m, "loadgen_samples_failed_total", "Samples completed with an error.",
                       CMN_METRIC_COUNTER, &m->failed, eb);
    if (rc == 0)
        rc = add_plain(m, "loadgen_inflight_samples", "Samples issued and not yet completed.",
                       CMN_METRIC_GAUGE, &m->inflight, eb);
    if (rc == 0)
        rc = add(m, "loadgen_node_info", "A node's address and the name it reported (value 1).",
                 CMN_METRIC_GAUGE, 0, info_labels, &m->info, eb);
    for (int k = 0; rc == 0 && k < N_PER_NODE; k++)
        rc = add(m, node_descs[k].name, node_descs[k].help, node_descs[k].type,
                 node_descs[k].decimals, node_label, &m->per_node[k], eb);
    return rc;
}

int lg__metrics_start(lg_sut_t *sut, const char *addr, lg__metrics_t **out, cmn_errbuf_t *eb)
{
    lg__metrics_t *m = calloc(1, sizeof(*m));
    int rc;

    if (!m)
        return cmn_errf(eb, -ENOMEM, "metrics: out of memory");
    m->sut = sut;
    rc = cmn_metrics_new(&m->reg);
    if (rc < 0) {
        free(m);
        return cmn_errf(eb, rc, "metrics: out of memory");
    }
    rc = register_all(m, eb);
    if (rc == 0)
        rc = cmn_metrics_on_collect(m->reg, on_collect, m);
    if (rc == 0)
        rc = cmn_metrics_http_start(m->reg, addr, &m->http, eb);
    if (rc < 0) {
        cmn_metrics_free(m->reg);
        free(m);
        return rc;
    }
    cmn_log_info("metrics on http://%s/metrics", cmn_metrics_http_addr(m->http));
    *out = m;
    return 0;
}

void lg__metrics_stop(lg__metrics_t *m, uint64_t linger_ms)
{
    struct timespec ts;

    if (!m)
        return;
    if (linger_ms) {
        ts.tv_sec = (time_t)(linger_ms / 1000u);
        ts.tv_nsec = (long)(linger_ms % 1000u) * 1000000L;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    cmn_metrics_http_stop(m->http);
    cmn_metrics_free(m->reg);
    free(m);
}
