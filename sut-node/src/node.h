/* The node: the listeners, the periodic tick, the signals, the completion queue and the orderly
 * drain, over the sessions (session.h), the batcher (batcher.h), the workers (workers.h) and the
 * backend (backend.h). main.c parses the options and runs the loop.
 *
 * Lifecycle: sut__node_init, sut__node_listen, uv_run; sut__node_stop closes the loop's handles
 * (uv_run then returns); sut__node_free after the loop ends. Threads: the loop thread only. */
#ifndef SUT_NODE_H
#define SUT_NODE_H

#include "backend.h"
#include "batcher.h"
#include "budget.h"
#include "cmn/err.h"
#include "cmn/pool.h"
#include "cmn/tls.h"
#include "cmn/ucx.h"
#include "metrics.h"
#include "probe.h"
#include "session.h"
#include "types.h"
#include "workers.h"

#include <uv.h>

typedef struct {
    sut_opts_t opt; /* max_inflight sized at init */
    uv_loop_t *loop;
    char name[256];
    int port; /* the first listener's bound port */
    uv_tcp_t listeners[SUT_MAX_LISTEN];
    cmn_ucx_t *ucx; /* the ucx:// transport, when a listen address names it */
    cmn_ucx_listener_t *ucx_listeners[SUT_MAX_LISTEN];
    size_t n_listeners;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t tick;
    uv_check_t turn; /* once per loop turn: the batcher's rules, the drain check */
    uv_timer_t drain_timer;
    cmn_xq_t done_q;
    int handles_ready; /* the loop handles exist: sut__node_stop can close them */
    sut_be_t be;
    sut_probe_t probe; /* the backend's readiness, told in every handshake */
    uint32_t max_batch;
    uint32_t engines;
    cmn_pool_t *pool;
    sut_budget_t budget;
    cmn_tls_ctx_t *tls;     /* NULL: plaintext */
    sut_metrics_t *metrics; /* NULL: no --metrics-listen */
    sut_workers_t workers;
    sut_batcher_t batcher;
    sut_sessions_t sessions;
    int draining;
    int stopping;
    int exit_code;
} sut_node_t;

/* Listens on every address (a port conflict fails here, before the backend loads), then loads
 * the backend and sets up the rest. Returns 0 or a negative code with a reason in |eb|; on
 * failure call sut__node_stop, run the loop, then sut__node_free. */
int sut__node_init(sut_node_t *n, uv_loop_t *loop, const sut_opts_t *opt, cmn_errbuf_t *eb);
/* The node serves: writes the port file (--port-file) and starts the metrics endpoint. */
int sut__node_listen(sut_node_t *n, cmn_errbuf_t *eb);
/* Removes --port-file's file, if any (at start, when the node stops listening, at exit). */
void sut__node_remove_port_file(const sut_opts_t *o);
/* Stop accepting, finish the work in flight, say Goodbye, stop (bounded by drain_timeout_ms). */
void sut__node_drain(sut_node_t *n, const char *why);
void sut__node_stop(sut_node_t *n);
void sut__node_free(sut_node_t *n);
void sut__node_log_stats(sut_node_t *n);

#endif
