/* The node's Prometheus metrics (--metrics-listen): what the node knows, served at /metrics by
 * cmn/metrics_http.h on a thread of its own.
 *
 * Counters the sessions, the batcher, the workers and the budget already keep are read on the loop
 * thread when a scrape asks (the scrape waits for one loop turn, at most SUT_METRICS_SNAPSHOT_MS,
 * and serves the last values when the loop is busy longer), so their owners change nothing. What
 * no counter holds — the distributions — is observed per completed batch (sut__metrics_batch).
 *
 * Lifecycle: sut__metrics_start after the node's parts exist (loop thread), sut__metrics_stop
 * with the node's other handles (ends the HTTP thread, closes the async handle), sut__metrics_free
 * after the loop ends. Calls flow down: node.c calls this file; this file reads the sessions,
 * the batcher, the workers and the budget, and none of them calls it. Threads: the loop thread,
 * except the collect callback, which runs on the HTTP thread and only waits. */
#ifndef SUT_METRICS_H
#define SUT_METRICS_H

#include "batcher.h"
#include "budget.h"
#include "cmn/err.h"
#include "probe.h"
#include "session.h"
#include "types.h"
#include "workers.h"

#include <uv.h>

#define SUT_METRICS_SNAPSHOT_MS 1000

typedef struct sut_metrics sut_metrics_t;

/* What the metrics read, fixed at start. */
typedef struct {
    const char *listen; /* --metrics-listen */
    const char *name;   /* node name */
    const char *backend;
    uint32_t max_batch;
    sut_sessions_t *sessions;
    sut_batcher_t *batcher;
    sut_workers_t *workers;
    sut_budget_t *budget;
    sut_probe_t *probe; /* the backend's readiness (sut_node_engine_ready) */
} sut_metrics_env_t;

/* Registers the metrics and listens. Returns 0 or a negative code with a reason in |eb| (the
 * address, and why it cannot be served). Logs the bound address. */
int sut__metrics_start(sut_metrics_t **out, uv_loop_t *loop, const sut_metrics_env_t *env,
                       cmn_errbuf_t *eb);
/* The port the endpoint listens on. */
int sut__metrics_port(const sut_metrics_t *m);
/* A batch came back from the workers (before the batcher reuses it): batch size, batch wait,
 * infer time, and each sample's time in the node. NULL |m| is a no-op. */
void sut__metrics_batch(sut_metrics_t *m, const sut_nbatch_t *nb);
/* Stops serving and closes the loop handle. NULL is a no-op. */
void sut__metrics_stop(sut_metrics_t *m);
/* After the loop has ended. NULL is a no-op. */
void sut__metrics_free(sut_metrics_t *m);

#endif
