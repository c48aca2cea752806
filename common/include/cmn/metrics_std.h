/* What every program's metrics share: the standard process metrics and a build-info gauge, as
 * the Prometheus client libraries export them, and the duration buckets of LLM serving, for a
 * cmn/metrics.h registry.
 *
 * cmn_metrics_process registers process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds and process_start_time_seconds
 * and a collect callback that reads /proc/self (stat, statm, fd, limits) at each scrape: nothing
 * is tracked between scrapes. Where /proc is not mounted the values stay 0.
 *
 * cmn_metrics_build_info registers PREFIX_build_info{version,commit} 1.
 *
 * Both at start-up, before the registry is served. cmn_metrics_process serves at most 16
 * registries in a process (CMN_EOVERLOAD past that). Errors: as cmn_metrics_add. */
#ifndef CMN_METRICS_STD_H
#define CMN_METRICS_STD_H

#include "cmn/err.h"
#include "cmn/metrics.h"

/* Histogram bounds in nanoseconds (decimals 9). Latency: 50 us .. 7680 s, from a null backend's
 * round trip to a long LLM generation (vLLM's request latency buckets end at 7680 s). Time to
 * first token: vLLM's list, 1 ms .. 2560 s. Time per output token: vLLM's list (10 ms .. 80 s)
 * with 0.1 .. 5 ms below it for fast engines. */
enum { CMN_METRICS_LATENCY_N = 26, CMN_METRICS_TTFT_N = 22, CMN_METRICS_TPOT_N = 25 };
extern const uint64_t cmn_metrics_latency_ns[CMN_METRICS_LATENCY_N];
extern const uint64_t cmn_metrics_ttft_ns[CMN_METRICS_TTFT_N];
extern const uint64_t cmn_metrics_tpot_ns[CMN_METRICS_TPOT_N];
/* A cmn_metric_desc_t's type, decimals, labels and bounds for a histogram of durations kept in
 * nanoseconds with one of these bucket lists: what follows its name and help, as in
 * {"x_seconds", "help", CMN_METRICS_HIST_TTFT}. */
#define CMN_METRICS_HIST_NS(bounds, n) CMN_METRIC_HISTOGRAM, 9, NULL, (bounds), (n)
#define CMN_METRICS_HIST_LATENCY CMN_METRICS_HIST_NS(cmn_metrics_latency_ns, CMN_METRICS_LATENCY_N)
#define CMN_METRICS_HIST_TTFT CMN_METRICS_HIST_NS(cmn_metrics_ttft_ns, CMN_METRICS_TTFT_N)
#define CMN_METRICS_HIST_TPOT CMN_METRICS_HIST_NS(cmn_metrics_tpot_ns, CMN_METRICS_TPOT_N)

int cmn_metrics_process(cmn_metrics_t *m, cmn_errbuf_t *eb);

/* |prefix| "sut_node" gives sut_node_build_info. */
int cmn_metrics_build_info(cmn_metrics_t *m, const char *prefix, const char *version,
                           const char *commit, cmn_errbuf_t *eb);

#endif
