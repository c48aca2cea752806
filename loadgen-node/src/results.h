/* Metrics and validity of one performance series, and their summary and detail log entries, as
 * the official PerformanceSummary computes and prints them (results.cc). */
#ifndef LG_RESULTS_H
#define LG_RESULTS_H

#include "lg/lg.h"
#include "logs.h"

#include <stdint.h>
#include <stdio.h>

/* PerformanceResult: what a series leaves behind. The arrays are owned and sorted in place. */
typedef struct {
    int64_t *lat; /* sample latencies (ns), issue order until processed */
    size_t n;
    int64_t *qlat; /* MultiStream query latencies */
    size_t nq;
    int64_t *ttft, *tpot, *ntok; /* token mode: n entries each */
    uint64_t queries_issued;
    double max_latency; /* seconds */
    double final_query_scheduled_time, final_query_issued_time, final_query_all_samples_done_time;
    /* Beyond the official result: samples that failed in the SUT, never completed, or whose
     * response did not match the sample's digest. Any of them makes the run INVALID. */
    uint64_t failed, lost, digest_bad;
    int interrupted; /* the signal that ended the series early (INVALID), 0 if none */
    int processed;
} lg__perf_t;

void lg__perf_free(lg__perf_t *pr);

/* In-place ascending sort of int64 values (an MSD radix sort: no extra memory, fast on the tens of
 * millions of latencies of a long Server run). */
void lg__sort_i64(int64_t *v, size_t n);

/* PerfConstraintsMet (Server latency bound), for FindPeakPerformance. |rec| gets the
 * recommendation when it fails. */
int lg__perf_constraints_met(const lg_effective_settings_t *s, lg__perf_t *pr, char *rec,
                             size_t len);

/* Writes the summary (to |summary| and, if set, stdout) and the detail results, and fills the
 * validity and metric of |res|. */
void lg__perf_report(const char *sut_name, const lg_effective_settings_t *s, lg__perf_t *pr,
                     lg__dlog_t *d, FILE *summary, int summary_stdout, lg_result_t *res);

/* The Test Parameters block of the summary (TestSettingsInternal::LogSummary). */
void lg__settings_summary(const lg_effective_settings_t *s, FILE *f);

#endif
