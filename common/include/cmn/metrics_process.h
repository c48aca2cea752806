/* The standard process metrics and a build-info gauge, as the Prometheus client libraries export
 * them, for a cmn/metrics.h registry.
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
#ifndef CMN_METRICS_PROCESS_H
#define CMN_METRICS_PROCESS_H

#include "cmn/err.h"
#include "cmn/metrics.h"

int cmn_metrics_process(cmn_metrics_t *m, cmn_errbuf_t *eb);

/* |prefix| "sut_node" gives sut_node_build_info. */
int cmn_metrics_build_info(cmn_metrics_t *m, const char *prefix, const char *version,
                           const char *commit, cmn_errbuf_t *eb);

#endif
