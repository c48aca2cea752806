/* loadgen-node's Prometheus metrics (--metrics-listen), while a run goes through the QDL: samples
 * issued and completed, and per node what the QDL counts (sent, completed, failed, in flight,
 * re-dispatched, errors, reconnects, bytes, ping round trips).
 *
 * Nothing is added to the hot paths: each scrape reads the adapter's counters
 * (lg_sut_qdl_counts) and the QDL's per-node table (qdl_stats, which asks the QDL's loop thread).
 * Served by cmn/metrics_http.h on a thread of its own.
 *
 * Lifecycle: lg__metrics_start once the QDL SUT exists, lg__metrics_stop before it is destroyed.
 * Both on the main thread. Built only with the QDL (LG_HAVE_QDL). */
#ifndef LG_METRICS_H
#define LG_METRICS_H

#include "cmn/err.h"
#include "lg/lg.h"

#include <stdint.h>

typedef struct lg__metrics lg__metrics_t;

/* Registers the metrics for |sut| (a QDL SUT) and listens on |addr| (port 0: a free one; the
 * bound address is logged). Returns 0 or a negative code with a reason in |eb|. */
int lg__metrics_start(lg_sut_t *sut, const char *addr, lg__metrics_t **out, cmn_errbuf_t *eb);

/* Keeps serving |linger_ms| more (so a scraper sees the final counts), then stops and frees. NULL
 * is a no-op. */
void lg__metrics_stop(lg__metrics_t *m, uint64_t linger_ms);

#endif
