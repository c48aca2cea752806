/* loadgen-node's Prometheus metrics (metrics.h). */
#include "metrics.h"

#include "cmn/log.h"
#include "cmn/metrics.h"
#include "cmn/metrics_http.h"
#include "cmn/metrics_std.h"
#include "cmn/msg.h"
#ifdef LG_HAVE_QDL
#    include "lg/sut_qdl.h"
#endif

#include "build_info.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LG_HAVE_QDL
/* The nodes a scrape reports (loadgen-node accepts at most 64). */
#    define MAX_NODES 64

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
#else
#    define N_PER_NODE 1
#endif

struct lg__metrics {
    lg_sut_t *sut; /* the QDL SUT, or NULL */
    char *push;    /* --metrics-push, or NULL */
    cmn_metrics_t *reg;
    cmn_metrics_http_t *http;
    lg_observe_t obs;
    cmn_series_t *valid, *result;
    cmn_metric_t *result_mt;
    cmn_series_t *issued, *completed, *failed, *inflight;
    cmn_metric_t *per_node[N_PER_NODE];
    cmn_metric_t *info;
#ifdef LG_HAVE_QDL
    qdl_node_stats_t st[MAX_NODES]; /* the HTTP thread's scratch (scrapes are serialized) */
#endif
};

#ifdef LG_HAVE_QDL
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
#endif

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
    cmn_metric_desc_t d = {.name = name, .help = help, .type = type};

    return cmn_metrics_add_series(m->reg, &d, out, eb);
}

/* The histograms the run observes (lg_observe_t). */
static const cmn_metric_slot_t hist_descs[] = {
    {{"loadgen_sample_latency_seconds",
      "Each successful performance-run sample: from its scheduled issue to its completion (the "
      "latency LoadGen judges).",
      CMN_METRICS_HIST_LATENCY},
     offsetof(lg_observe_t, latency)},
    {{"loadgen_time_to_first_token_seconds",
      "Token runs: each sample's time from its scheduled issue to its first token.",
      CMN_METRICS_HIST_TTFT},
     offsetof(lg_observe_t, ttft)},
    {{"loadgen_time_per_output_token_seconds",
      "Token runs: each sample's (latency - time to first token) / (output tokens - 1).",
      CMN_METRICS_HIST_TPOT},
     offsetof(lg_observe_t, tpot)},
    {{"loadgen_issue_lateness_seconds",
      "Server: how long after its scheduled time each sample was issued.",
      CMN_METRICS_HIST_LATENCY},
     offsetof(lg_observe_t, late)},
};

/* The scenario's target as a label value: what the run was asked to reach. */
static void target_text(const lg_test_settings_t *s, char *buf, size_t len)
{
    switch (s->scenario) {
    case LG_SERVER:
        snprintf(buf, len, "server_target_qps=%g", s->server_target_qps);
        break;
    case LG_OFFLINE:
        snprintf(buf, len, "offline_expected_qps=%g", s->offline_expected_qps);
        break;
    case LG_SINGLE_STREAM:
        snprintf(buf, len, "single_stream_expected_latency_ns=%.0f",
                 s->single_stream_expected_latency_ns);
        break;
    default:
        snprintf(buf, len, "multi_stream_expected_latency_ns=%.0f",
                 s->multi_stream_expected_latency_ns);
        break;
    }
}

/* Every run: its info, its histograms, the result (set at the end), process_* and build info. */
static int register_run(lg__metrics_t *m, const lg__metrics_cfg_t *cfg, cmn_errbuf_t *eb)
{
    static const char *const info_labels[] = {"scenario", "model", "mode", "target", NULL};
    static const char *const result_labels[] = {"metric", NULL};
    char target[96];
    const char *values[5];
    cmn_metric_t *mt;
    cmn_series_t *s;
    int rc;

    target_text(cfg->settings, target, sizeof(target));
    values[0] = lg_scenario_name(cfg->settings->scenario);
    values[1] = cfg->model ? cfg->model : "";
    values[2] = lg_mode_name(cfg->settings->mode);
    values[3] = target;
    values[4] = NULL;
    rc = add(m, "loadgen_run_info", "The run's scenario, model, mode and target (value 1).",
             CMN_METRIC_GAUGE, 0, info_labels, &mt, eb);
    if (rc == 0 && (rc = cmn_metric_series(mt, values, &s)) == 0)
        cmn_series_set(s, 1);
    if (rc == 0)
        rc = cmn_metrics_add_slots(m->reg, hist_descs, sizeof(hist_descs) / sizeof(hist_descs[0]),
                                   &m->obs, eb);
    if (rc == 0)
        rc = add_plain(m, "loadgen_run_result_valid",
                       "1 when the performance run's result is VALID, 0 when INVALID, -1 until "
                       "the run has ended (or when no performance run ran).",
                       CMN_METRIC_GAUGE, &m->valid, eb);
    if (rc == 0)
        cmn_series_set(m->valid, -1);
    if (rc == 0)
        rc = cmn_metrics_add(
            m->reg,
            &(cmn_metric_desc_t){.name = "loadgen_run_result",
                                 .help = "The performance run's result metric (its name in the "
                                         "label, as in the summary: samples per second, tokens "
                                         "per second, a latency in ns), set at the end; the "
                                         "value in millionths rounded.",
                                 .type = CMN_METRIC_GAUGE,
                                 .decimals = 6,
                                 .labels = result_labels},
            &m->result_mt, eb);
    if (rc == 0)
        rc = cmn_metrics_process(m->reg, eb);
    if (rc == 0)
        rc = cmn_metrics_build_info(m->reg, "loadgen", LG_VERSION, BUILD_GIT_COMMIT, eb);
    return rc;
}

#ifdef LG_HAVE_QDL
/* Through the QDL: the adapter's counters and the nodes'. */
static int register_qdl(lg__metrics_t *m, cmn_errbuf_t *eb)
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
#endif

static void metrics_free(lg__metrics_t *m)
{
    cmn_metrics_http_stop(m->http);
    cmn_metrics_free(m->reg);
    free(m->push);
    free(m);
}

int lg__metrics_start(const lg__metrics_cfg_t *cfg, lg__metrics_t **out, cmn_errbuf_t *eb)
{
    lg__metrics_t *m = calloc(1, sizeof(*m));
    int rc;

    if (!m)
        return cmn_errf(eb, -ENOMEM, "metrics: out of memory");
    m->sut = cfg->qdl;
    if (cfg->push && !(m->push = strdup(cfg->push))) {
        free(m);
        return cmn_errf(eb, -ENOMEM, "metrics: out of memory");
    }
    rc = cmn_metrics_new(&m->reg);
    if (rc < 0) {
        free(m->push);
        free(m);
        return cmn_errf(eb, rc, "metrics: out of memory");
    }
    rc = register_run(m, cfg, eb);
#ifdef LG_HAVE_QDL
    if (rc == 0 && m->sut)
        rc = register_qdl(m, eb);
    if (rc == 0 && m->sut)
        rc = cmn_metrics_on_collect(m->reg, on_collect, m);
#endif
    if (rc == 0 && cfg->listen)
        rc = cmn_metrics_http_start(m->reg, cfg->listen, &m->http, eb);
    if (rc < 0) {
        metrics_free(m);
        return rc;
    }
    if (m->http)
        cmn_log_info("metrics on http://%s/metrics", cmn_metrics_http_addr(m->http));
    *out = m;
    return 0;
}

const lg_observe_t *lg__metrics_observe(lg__metrics_t *m)
{
    return m ? &m->obs : NULL;
}

void lg__metrics_result(lg__metrics_t *m, const lg_result_t *res)
{
    const char *const label[] = {res->metric_name[0] ? res->metric_name : "none", NULL};
    cmn_series_t *s;

    if (!m || !res->performance_ran)
        return;
    cmn_series_set(m->valid, res->performance_valid ? 1 : 0);
    if (cmn_metric_series(m->result_mt, label, &s) == 0) {
        double v = res->metric * 1e6;
        cmn_series_set(s, v >= 9.2e18    ? INT64_MAX
                          : v <= -9.2e18 ? INT64_MIN
                                         : (int64_t)(v + (v < 0 ? -0.5 : 0.5)));
    }
}

void lg__metrics_stop(lg__metrics_t *m, uint64_t linger_ms)
{
    struct timespec ts;

    if (!m)
        return;
    if (m->push) {
        cmn_errbuf_t eb = {{0}};
        char *body = NULL;
        size_t len = 0;

        if (cmn_metrics_render(m->reg, &body, &len) < 0)
            cmn_log_warn("--metrics-push: out of memory rendering the metrics");
#ifdef LG_HAVE_CURL
        else if (lg__metrics_push(m->push, body, len, &eb) < 0)
            cmn_log_warn("%s", eb.msg);
        else
            cmn_log_info("metrics pushed to %s/metrics/job/loadgen", m->push);
#else
        else
            cmn_log_warn("--metrics-push: this build has no libcurl");
        (void)eb;
#endif
        free(body);
    }
    if (linger_ms && m->http) {
        ts.tv_sec = (time_t)(linger_ms / 1000u);
        ts.tv_nsec = (long)(linger_ms % 1000u) * 1000000L;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    metrics_free(m);
}
