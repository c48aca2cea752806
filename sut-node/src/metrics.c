/* The node's Prometheus metrics (metrics.h). */
#include "metrics.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/metrics.h"
#include "cmn/metrics_http.h"
#include "cmn/metrics_std.h"
#include "cmn/wake.h"

#include "build_info.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Durations are kept in nanoseconds and shown in seconds. */
#define NS 9

/* The counters read from their owners at each scrape. */
enum {
    C_CONNECTIONS,
    C_QUERIES,
    C_SAMPLES,
    C_REJECTED,
    C_FAILED,
    C_BATCHES,
    C_BYTES_IN,
    C_BYTES_OUT,
    C_DECODE,
    C_QUEUE,
    C_INFER,
    C_ENCODE,
    C_ERRORS,
    C_MEM_REFUSED,
    G_CONNECTIONS,
    G_INFLIGHT,
    G_MEM_BUDGET,
    G_MEM_LIMIT,
    G_MEM_USED,
    G_MEM_PEAK,
    G_RSS,
    G_UPTIME,
    G_WAITING,
    G_READY,
    N_SNAP
};

typedef struct {
    const char *name;
    const char *help;
    cmn_metric_type_t type;
    unsigned decimals;
} snap_desc_t;

static const snap_desc_t snap_descs[N_SNAP] = {
    [C_CONNECTIONS] = {"sut_node_connections_total", "Connections accepted.", CMN_METRIC_COUNTER,
                       0},
    [C_QUERIES] = {"sut_node_queries_total", "Query frames received.", CMN_METRIC_COUNTER, 0},
    [C_SAMPLES] = {"sut_node_samples_total", "Samples received and placed into a batch.",
                   CMN_METRIC_COUNTER, 0},
    [C_REJECTED] = {"sut_node_samples_rejected_total",
                    "Samples answered STATUS_REJECTED (draining, over the in-flight limit, or "
                    "a result over the memory budget).",
                    CMN_METRIC_COUNTER, 0},
    [C_FAILED] = {"sut_node_samples_failed_total", "Samples the backend failed.",
                  CMN_METRIC_COUNTER, 0},
    [C_BATCHES] = {"sut_node_batches_total", "Batches handed to the backend.", CMN_METRIC_COUNTER,
                   0},
    [C_BYTES_IN] = {"sut_node_received_bytes_total", "Frame bytes received (headers included).",
                    CMN_METRIC_COUNTER, 0},
    [C_BYTES_OUT] = {"sut_node_sent_bytes_total",
                     "Result payload bytes sent (headers and metadata not counted).",
                     CMN_METRIC_COUNTER, 0},
    [C_DECODE] = {"sut_node_decode_seconds_total",
                  "Time spent decompressing samples into batch inputs.", CMN_METRIC_COUNTER, NS},
    [C_QUEUE] = {"sut_node_queue_wait_seconds_total",
                 "Time batches waited between dispatch and the backend starting them, summed.",
                 CMN_METRIC_COUNTER, NS},
    [C_INFER] = {"sut_node_infer_seconds_total",
                 "Time from the backend starting a batch to its last completion, summed.",
                 CMN_METRIC_COUNTER, NS},
    [C_ENCODE] = {"sut_node_encode_seconds_total", "Time spent compressing results.",
                  CMN_METRIC_COUNTER, NS},
    [C_ERRORS] = {"sut_node_errors_total",
                  "Connections closed for an error (protocol, limit, deadline, refusal).",
                  CMN_METRIC_COUNTER, 0},
    [C_MEM_REFUSED] = {"sut_node_memory_refused_total",
                       "Allocations refused because the memory budget was full.",
                       CMN_METRIC_COUNTER, 0},
    [G_CONNECTIONS] = {"sut_node_connections", "Connections open.", CMN_METRIC_GAUGE, 0},
    [G_INFLIGHT] = {"sut_node_inflight_samples",
                    "Samples received and not yet answered, all connections.", CMN_METRIC_GAUGE, 0},
    [G_MEM_BUDGET] = {"sut_node_memory_budget_bytes", "The memory budget (--memory-budget).",
                      CMN_METRIC_GAUGE, 0},
    [G_MEM_LIMIT] = {"sut_node_memory_limit_bytes",
                     "The part of the budget all peers together can make the node hold.",
                     CMN_METRIC_GAUGE, 0},
    [G_MEM_USED] = {"sut_node_memory_used_bytes",
                    "Bytes peers make the node hold now (batch inputs, frames, queued results).",
                    CMN_METRIC_GAUGE, 0},
    [G_MEM_PEAK] = {"sut_node_memory_peak_bytes", "Most bytes of the memory budget ever in use.",
                    CMN_METRIC_GAUGE, 0},
    [G_RSS] = {"sut_node_resident_memory_bytes", "Resident memory of the process.",
               CMN_METRIC_GAUGE, 0},
    [G_UPTIME] = {"sut_node_uptime_seconds", "Time since the node started.", CMN_METRIC_GAUGE, NS},
    [G_WAITING] = {"sut_node_streams_waiting",
                   "Samples received and not yet started by the backend (batching, queued for an "
                   "engine).",
                   CMN_METRIC_GAUGE, 0},
    [G_READY] = {"sut_node_engine_ready",
                 "1 while the backend's readiness probe finds its engine ready (what the handshake "
                 "tells clients), 0 while it does not.",
                 CMN_METRIC_GAUGE, 0},
};

struct sut_metrics {
    sut_metrics_env_t env;
    cmn_metrics_t *reg;
    cmn_metrics_http_t *http;
    cmn_series_t *snap[N_SNAP];
    cmn_series_t *batch_size, *batch_wait, *infer, *latency;
    sut_obs_t obs; /* observed by workers.c on the completion path */
    uint64_t *size_bounds;
    /* A scrape asks the loop for a snapshot: request |req|, wait until |done| reaches it. */
    cmn_wake_t wake;
    int wake_ready;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t req, done;
    int closed; /* no more snapshots: the loop is stopping */
};

/* ---- the snapshot (loop thread) ---- */

static uint64_t resident_bytes(void)
{
    unsigned long long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void take_snapshot(sut_metrics_t *m)
{
    Nsut__Stats st = NSUT__STATS__INIT;
    const sut_budget_t *b = m->env.budget;
    cmn_series_t **s = m->snap;

    sut__sessions_stats(m->env.sessions, &st);
    cmn_series_set(s[C_CONNECTIONS], (int64_t)st.connections_total);
    cmn_series_set(s[C_QUERIES], (int64_t)st.queries);
    cmn_series_set(s[C_SAMPLES], (int64_t)st.samples);
    cmn_series_set(s[C_REJECTED], (int64_t)m->env.sessions->st.samples_rejected);
    cmn_series_set(s[C_FAILED], (int64_t)st.samples_failed);
    cmn_series_set(s[C_BATCHES], (int64_t)st.batches);
    cmn_series_set(s[C_BYTES_IN], (int64_t)st.bytes_in);
    cmn_series_set(s[C_BYTES_OUT], (int64_t)st.bytes_out);
    cmn_series_set(s[C_DECODE], (int64_t)st.decode_ns);
    cmn_series_set(s[C_QUEUE], (int64_t)m->env.batcher->st.queue_ns);
    cmn_series_set(s[C_INFER], (int64_t)st.infer_ns);
    cmn_series_set(s[C_ENCODE], (int64_t)st.encode_ns);
    cmn_series_set(s[C_ERRORS], (int64_t)st.errors);
    cmn_series_set(s[C_MEM_REFUSED], (int64_t)atomic_load(&b->refused));
    cmn_series_set(s[G_CONNECTIONS], (int64_t)st.connections_open);
    cmn_series_set(s[G_INFLIGHT], (int64_t)st.inflight_samples);
    cmn_series_set(s[G_MEM_BUDGET], (int64_t)b->budget);
    cmn_series_set(s[G_MEM_LIMIT], (int64_t)b->limit);
    cmn_series_set(s[G_MEM_USED], (int64_t)sut__budget_used(b));
    cmn_series_set(s[G_MEM_PEAK], (int64_t)atomic_load(&b->peak));
    cmn_series_set(s[G_RSS], (int64_t)resident_bytes());
    cmn_series_set(s[G_UPTIME], (int64_t)st.uptime_ns);
    cmn_series_set(s[G_READY], m->env.probe ? sut__probe_get(m->env.probe, NULL, 0) : 1);
    {
        /* Received and not answered, less those the backend runs: the rest wait. */
        int64_t running = cmn_series_value(m->obs.running);
        int64_t waiting = (int64_t)st.inflight_samples - running;
        cmn_series_set(s[G_WAITING], waiting > 0 ? waiting : 0);
    }
}

static void on_wake(cmn_wake_t *w)
{
    sut_metrics_t *m = w->data;
    uint64_t r;

    pthread_mutex_lock(&m->mu);
    r = m->req;
    pthread_mutex_unlock(&m->mu);
    take_snapshot(m);
    pthread_mutex_lock(&m->mu);
    m->done = r;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* ---- a scrape (HTTP thread) ---- */

static void on_collect(void *arg)
{
    sut_metrics_t *m = arg;
    struct timespec deadline;
    uint64_t mine;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += SUT_METRICS_SNAPSHOT_MS / 1000;
    deadline.tv_nsec += (SUT_METRICS_SNAPSHOT_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    if (!m->closed) {
        mine = ++m->req;
        cmn_wake_send(&m->wake);
        while (!m->closed && m->done < mine)
            if (pthread_cond_timedwait(&m->cv, &m->mu, &deadline) == ETIMEDOUT)
                break; /* the loop is busy: serve the last snapshot */
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- set-up ---- */

static int add_histogram(sut_metrics_t *m, const char *name, const char *help, unsigned decimals,
                         const uint64_t *bounds, size_t n, cmn_series_t **out, cmn_errbuf_t *eb)
{
    cmn_metric_desc_t d = {.name = name,
                           .help = help,
                           .type = CMN_METRIC_HISTOGRAM,
                           .decimals = decimals,
                           .bounds = bounds,
                           .nbounds = n};

    return cmn_metrics_add_series(m->reg, &d, out, eb);
}

/* Powers of two up to the node's largest batch. */
static size_t size_bounds(sut_metrics_t *m)
{
    size_t n = 0;
    uint64_t v;

    m->size_bounds = calloc(CMN_METRICS_MAX_BUCKETS, sizeof(*m->size_bounds));
    if (!m->size_bounds)
        return 0;
    for (v = 1; n < CMN_METRICS_MAX_BUCKETS; v *= 2) {
        m->size_bounds[n++] = v;
        if (v >= m->env.max_batch)
            break;
    }
    return n;
}

/* What workers.c observes per sample (sut_obs_t), named as vLLM names its own. */
/* The batches' durations (sut_metrics_t), after sut_node_batch_size. */
static const cmn_metric_slot_t batch_descs[] = {
    {{"sut_node_batch_wait_seconds",
      "From a batch's first sample to the backend starting it: the batching wait plus the wait "
      "for an engine.",
      CMN_METRICS_HIST_LATENCY},
     offsetof(sut_metrics_t, batch_wait)},
    {{"sut_node_infer_duration_seconds",
      "From the backend starting a batch to its last completion.", CMN_METRICS_HIST_LATENCY},
     offsetof(sut_metrics_t, infer)},
    {{"sut_node_sample_latency_seconds",
      "Each sample's time in the node: from its Query frame's arrival to its batch's completion "
      "(decode, batching, queueing, inference).",
      CMN_METRICS_HIST_LATENCY},
     offsetof(sut_metrics_t, latency)},
};

static const cmn_metric_slot_t llm_descs[] = {
    {{"sut_node_time_to_first_token_seconds",
      "From a sample's Query frame's arrival to its first token (streaming backends).",
      CMN_METRICS_HIST_TTFT},
     offsetof(sut_obs_t, ttft)},
    {{"sut_node_time_per_output_token_seconds",
      "Per sample, from its first token to its result, divided by its output tokens less one "
      "(streaming backends).",
      CMN_METRICS_HIST_TPOT},
     offsetof(sut_obs_t, tpot)},
    {{"sut_node_e2e_request_latency_seconds",
      "From a sample's Query frame's arrival to its own result, successful samples.",
      CMN_METRICS_HIST_LATENCY},
     offsetof(sut_obs_t, e2e)},
    {{"sut_node_request_queue_time_seconds",
      "From a sample's Query frame's arrival to the backend starting its batch, successful "
      "samples.",
      CMN_METRICS_HIST_LATENCY},
     offsetof(sut_obs_t, queue)},
    {{"sut_node_prompt_tokens_total",
      "Input tokens of the samples a streaming backend started (int32 token ids: sample bytes / "
      "4).",
      CMN_METRIC_COUNTER, 0, NULL, NULL, 0},
     offsetof(sut_obs_t, prompt_tokens)},
    {{"sut_node_output_tokens_total",
      "Output tokens the backend reported for its successful samples.", CMN_METRIC_COUNTER, 0, NULL,
      NULL, 0},
     offsetof(sut_obs_t, output_tokens)},
    {{"sut_node_streams_running", "Samples the backend has started and not completed.",
      CMN_METRIC_GAUGE, 0, NULL, NULL, 0},
     offsetof(sut_obs_t, running)},
    {{"sut_node_engine_up",
      "1 when the backend's last finished sample succeeded, 0 when it failed (the engine "
      "unreachable or erroring), -1 before any.",
      CMN_METRIC_GAUGE, 0, NULL, NULL, 0},
     offsetof(sut_obs_t, engine_up)},
};

static int register_llm(sut_metrics_t *m, cmn_errbuf_t *eb)
{
    int rc = cmn_metrics_add_slots(m->reg, llm_descs, sizeof(llm_descs) / sizeof(llm_descs[0]),
                                   &m->obs, eb);

    if (rc == 0)
        cmn_series_set(m->obs.engine_up, -1);
    return rc;
}

static int register_all(sut_metrics_t *m, cmn_errbuf_t *eb)
{
    const char *const info_labels[] = {"name", "backend", NULL};
    const char *const info_values[] = {m->env.name, m->env.backend, NULL};
    cmn_metric_desc_t info = {.name = "sut_node_info",
                              .help = "The node's name and backend (value 1).",
                              .type = CMN_METRIC_GAUGE,
                              .labels = info_labels};
    cmn_metric_t *mt;
    cmn_series_t *s;
    size_t nsize;
    int rc;

    rc = cmn_metrics_add(m->reg, &info, &mt, eb);
    if (rc == 0)
        rc = cmn_metric_series(mt, info_values, &s);
    if (rc < 0)
        return rc;
    cmn_series_set(s, 1);
    for (size_t i = 0; i < N_SNAP; i++) {
        cmn_metric_desc_t d = {.name = snap_descs[i].name,
                               .help = snap_descs[i].help,
                               .type = snap_descs[i].type,
                               .decimals = snap_descs[i].decimals};
        rc = cmn_metrics_add(m->reg, &d, &mt, eb);
        if (rc == 0)
            rc = cmn_metric_series(mt, NULL, &m->snap[i]);
        if (rc < 0)
            return rc;
    }
    nsize = size_bounds(m);
    if (!nsize)
        return cmn_errf(eb, -ENOMEM, "metrics: out of memory");
    rc = add_histogram(m, "sut_node_batch_size", "Samples per batch, counted when it completes.", 0,
                       m->size_bounds, nsize, &m->batch_size, eb);
    if (rc == 0)
        rc = cmn_metrics_add_slots(m->reg, batch_descs,
                                   sizeof(batch_descs) / sizeof(batch_descs[0]), m, eb);
    if (rc == 0)
        rc = register_llm(m, eb);
    if (rc == 0)
        rc = cmn_metrics_process(m->reg, eb);
    if (rc == 0)
        rc = cmn_metrics_build_info(m->reg, "sut_node", SUT_VERSION, BUILD_GIT_COMMIT, eb);
    return rc;
}

int sut__metrics_start(sut_metrics_t **out, uv_loop_t *loop, const sut_metrics_env_t *env,
                       cmn_errbuf_t *eb)
{
    pthread_condattr_t ca;
    sut_metrics_t *m;
    int rc;

    m = calloc(1, sizeof(*m));
    if (!m)
        return cmn_errf(eb, -ENOMEM, "metrics: out of memory");
    m->env = *env;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = m; /* from here on sut__metrics_stop and _free undo whatever was done */
    rc = cmn_wake_init(loop, &m->wake, on_wake);
    if (rc < 0)
        return cmn_errf(eb, rc, "metrics: %s", cmn_strerror(rc));
    m->wake.data = m;
    m->wake_ready = 1;
    rc = cmn_metrics_new(&m->reg);
    if (rc < 0)
        return cmn_errf(eb, rc, "metrics: out of memory");
    rc = register_all(m, eb);
    if (rc < 0)
        return rc;
    rc = cmn_metrics_on_collect(m->reg, on_collect, m);
    if (rc < 0)
        return cmn_errf(eb, rc, "metrics: %s", cmn_strerror(rc));
    rc = cmn_metrics_http_start(m->reg, env->listen, &m->http, eb);
    if (rc < 0)
        return rc;
    atomic_store_explicit(&m->env.workers->obs, &m->obs, memory_order_release);
    cmn_log_info("metrics on http://%s/metrics", cmn_metrics_http_addr(m->http));
    return 0;
}

int sut__metrics_port(const sut_metrics_t *m)
{
    return m && m->http ? cmn_metrics_http_port(m->http) : -1;
}

void sut__metrics_batch(sut_metrics_t *m, const sut_nbatch_t *nb)
{
    if (!m)
        return;
    cmn_series_observe(m->batch_size, nb->b.n);
    if (nb->start_ns >= nb->first_ns)
        cmn_series_observe(m->batch_wait, nb->start_ns - nb->first_ns);
    if (nb->done_ns >= nb->start_ns)
        cmn_series_observe(m->infer, nb->done_ns - nb->start_ns);
    for (size_t i = 0; i < nb->b.n; i++) {
        uint64_t arrived = nb->owners[i].arrival_ns;
        if (arrived && nb->done_ns >= arrived)
            cmn_series_observe(m->latency, nb->done_ns - arrived);
    }
}

void sut__metrics_stop(sut_metrics_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->closed = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    /* The server's thread ends here, so nothing signals the wake-up after its close. */
    cmn_metrics_http_stop(m->http);
    m->http = NULL;
    if (m->wake_ready && !uv_is_closing((uv_handle_t *)&m->wake.poll))
        cmn_wake_close(&m->wake, NULL);
}

void sut__metrics_free(sut_metrics_t *m)
{
    if (!m)
        return;
    cmn_metrics_http_stop(m->http);
    cmn_metrics_free(m->reg);
    free(m->size_bounds);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
