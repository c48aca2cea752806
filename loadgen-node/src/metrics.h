/* loadgen-node's Prometheus metrics (--metrics-listen, --metrics-push).
 *
 * Always: the run's info (scenario, model, mode, target), its latency, TTFT, TPOT and Server
 * issue-lateness histograms (observed by the completion and issue paths through lg_observe_t:
 * lock-free atomic adds), the result at the end (valid, the result metric's value), process_*
 * and loadgen_build_info. Through the QDL also: samples issued and completed, and per node what
 * the QDL counts (sent, completed, failed, in flight, re-dispatched, errors, reconnects, bytes,
 * ping round trips), read at each scrape from the adapter's counters (lg_sut_qdl_counts) and the
 * QDL's per-node table (qdl_stats, which asks the QDL's loop thread). Served by
 * cmn/metrics_http.h on a thread of its own when an address is given; pushed to a Pushgateway
 * at the end when a URL is.
 *
 * Lifecycle: lg__metrics_start once the SUT exists (its observe table goes into the run's
 * lg_log_settings_t), lg__metrics_result after the run, lg__metrics_stop before the SUT is
 * destroyed. All on the main thread. */
#ifndef LG_METRICS_H
#define LG_METRICS_H

#include "cmn/err.h"
#include "lg/lg.h"
#include "lg/settings.h"

#include <stdint.h>

typedef struct lg__metrics lg__metrics_t;

typedef struct {
    const char *listen; /* --metrics-listen ADDR:PORT, or NULL (push only) */
    const char *push;   /* --metrics-push URL, or NULL */
    const char *model;  /* --model, or NULL */
    const lg_test_settings_t *settings;
    lg_sut_t *qdl; /* the QDL SUT (its counters and nodes), or NULL (the null SUT) */
} lg__metrics_cfg_t;

/* Registers the metrics and listens (port 0: a free one; the bound address is logged). Returns 0
 * or a negative code with a reason in |eb|. */
int lg__metrics_start(const lg__metrics_cfg_t *cfg, lg__metrics_t **out, cmn_errbuf_t *eb);

/* The histograms for lg_log_settings_t.observe (valid until lg__metrics_stop). */
const lg_observe_t *lg__metrics_observe(lg__metrics_t *m);

/* The run's result: loadgen_run_result_valid and loadgen_run_result. NULL |m| is a no-op. */
void lg__metrics_result(lg__metrics_t *m, const lg_result_t *res);

/* Pushes the final exposition (when a URL was given; a failure is logged, the run's exit status
 * stays), keeps serving |linger_ms| more (so a scraper sees the final values), then stops and
 * frees. NULL is a no-op. */
void lg__metrics_stop(lg__metrics_t *m, uint64_t linger_ms);

/* metrics_push.c: HTTP PUT of |body| to URL/metrics/job/loadgen (a Pushgateway replaces the
 * job's group). Returns 0 or a negative code with the URL and the reason in |eb|. */
int lg__metrics_push(const char *url, const char *body, size_t len, cmn_errbuf_t *eb);

#endif
