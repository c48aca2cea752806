/* loadgen-node: the MLPerf LoadGen scheduler in C, behind a small SUT interface.
 *
 * lg_start_test() is the official StartTest: it reads the QSL's sets, schedules the queries of the
 * chosen scenario and mode with the official trace (same samples, same Poisson schedule), measures
 * latency from each query's scheduled time to its completion, and writes mlperf_log_summary.txt,
 * mlperf_log_detail.txt and mlperf_log_accuracy.json in the official formats.
 *
 * The SUT is a vtable (lg_sut_t): the in-process null SUT (lg/sut_null.h) for tests and for
 * measuring the scheduler alone, or the QDL adapter (lg/sut_qdl.h) that sends every query over the
 * network to sut-node daemons. A SUT reports completions with lg_complete() from any thread, in
 * batches; a sample that failed (status < 0) counts as an error, makes the run INVALID, and never
 * hangs it.
 *
 * Thread-safety: lg_start_test() blocks its caller, which becomes the issue thread (its timer
 * slack is set to 1 ns, and stays so, for precise Server issue times).
 * lg_complete() and lg_first_token() are thread-safe and may be called from inside issue() (an
 * inline SUT) or from any other thread. Once lg_start_test() has returned, only samples it
 * counted as lost may still be completed (they are dropped); sut->run is NULL by then. */
#ifndef LG_LG_H
#define LG_LG_H

#include "cmn/err.h"
#include "qdl/qdl.h"
#include "lg/qsl.h"
#include "lg/settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lg_run lg_run_t;

/* This implementation's name and version, as logged in loadgen_version. */
#define LG_VERSION "0.1.0"
#define LG_VERSION_STRING "loadgen-node " LG_VERSION " (LoadGen 6.0.17 compatible)"

/* One sample of an issued query, and one completed sample or first token: the QDL's own types
 * (qdl/qdl.h, the layer below), so the QDL adapter passes them through without copying. A
 * sample's |response_id| is its sequence number in the test (0, 1, 2, ...) and |index| its QSL
 * index (for local SUTs; the QDL never sends it). A response's |status| < 0 fails the sample (an
 * error, the run INVALID); issued_ns/sent_ns (0: not known) give the harness block's "QDL queueing"
 * and the qdl_queue_ns column, node_queue_ns/node_backend_ns with sent_ns its "Network and return";
 * |error| and |node| (NULL: not known) name a failed sample's reason and node. */
typedef qdl_sample_t lg_sample_t;
typedef qdl_response_t lg_response_t;

typedef struct lg_sut lg_sut_t;

/* Histograms (cmn/metrics.h, kept in ns) the run observes each successful performance-run sample
 * into as it completes: one lock-free atomic add per bucket and sum (cmn_series_observe). NULL
 * members are skipped. loadgen-node's --metrics-listen sets them up (src/metrics.c). */
struct cmn_series;
typedef struct {
    struct cmn_series *latency; /* issue (scheduled time) to completion */
    struct cmn_series *ttft;    /* token runs: to the first token */
    struct cmn_series *tpot;    /* token runs: (latency - ttft) / (tokens - 1) */
    struct cmn_series *late;    /* Server: issued this long after its scheduled time */
} lg_observe_t;

/* A SUT's own trouble, counted since the SUT was created; the run reports what changed during each
 * performance series (a warning in the summary and the detail log). */
typedef struct {
    uint64_t nodes;        /* nodes in total */
    uint64_t nodes_down;   /* nodes not connected now */
    uint64_t nodes_lost;   /* nodes that lost their connection at least once */
    uint64_t reconnects;   /* reconnect attempts, all nodes */
    uint64_t redispatched; /* samples sent again to another node after a loss */
    /* Gathered writes to the nodes (a batch of frames each), and those a write thread wrote. */
    uint64_t batches_out, batches_write_thread;
} lg_sut_health_t;

/* The SUT interface. issue() may complete inline or return at once; it should not block for long
 * (in Server its time is charged to the latency of every later query). A query with more than
 * LG_ISSUE_CHUNK samples (only Offline's) arrives as consecutive issue() calls, each a part of
 * the same query. flush() is LoadGen's FlushQueries(): no more queries follow in this series. */
struct lg_sut {
    /* LoadGen's Name(): writes the name and the time the call took (may be NULL). 0 or < 0. */
    int (*name)(lg_sut_t *sut, char *buf, size_t len, uint64_t *dur_ns, char *err, size_t errlen);
    /* 0, or < 0: the samples of this call are failed (errors) and the test goes on. */
    int (*issue)(lg_sut_t *sut, const lg_sample_t *s, size_t n);
    int (*flush)(lg_sut_t *sut);
    void *data;
    /* Set by lg_start_test() before the first issue() and cleared at its end; read it with
     * __atomic_load_n(&sut->run, __ATOMIC_ACQUIRE) from other threads and pass it to
     * lg_complete(). A completion for a sample still outstanding when the test ended (see
     * drain_timeout_ms) is safe: it finds the run closed and is dropped. */
    lg_run_t *run;
    /* Optional (NULL): fills |h|; called by the issue thread before and after each series. */
    int (*health)(lg_sut_t *sut, lg_sut_health_t *h);
    /* Optional (NULL): called by the test thread for each sample's bytes after they load, and
     * before they are freed at unload (no query from them outstanding); e.g. the QDL registers
     * them with UCX. A failing mem_register is logged by the SUT and the run goes on. */
    int (*mem_register)(lg_sut_t *sut, void *ptr, size_t len);
    void (*mem_unregister)(lg_sut_t *sut, void *ptr);
    /* Optional (NULL), used in Server series with lg_log_settings_t.issue_thread_io: the SUT
     * lends its event loop to the issue thread, which runs it between issues instead of spinning
     * or sleeping idle. poll_begin(): 0, or < 0 (the SUT keeps its own thread; the run goes on).
     * poll(): runs the SUT's ready I/O, then with timeout_ns > 0 waits up to that long for more;
     * > 0 when woken by I/O. poll_end(): gives the loop back. Between them the SUT completes from
     * inside poll() and issue(), on the issue thread. */
    int (*poll_begin)(lg_sut_t *sut);
    int (*poll)(lg_sut_t *sut, uint64_t timeout_ns);
    void (*poll_end)(lg_sut_t *sut);
};

#define LG_ISSUE_CHUNK 65536u

/* QuerySamplesComplete: one timestamp for the whole batch, taken on entry. */
void lg_complete(lg_run_t *run, const lg_response_t *r, size_t n);

/* FirstTokenComplete (token latencies): the first token of each sample has been produced. */
void lg_first_token(lg_run_t *run, const lg_response_t *r, size_t n);

typedef enum {
    LG_PROGRESS_AUTO = -1, /* a live line when stderr is a terminal, else plain lines */
    LG_PROGRESS_OFF = 0,
    LG_PROGRESS_ON = 1,    /* a live line ("\r" and a terminal code) whatever stderr is */
    LG_PROGRESS_LINES = 2, /* a plain line every progress_interval_ms (logs, CI, nohup) */
} lg_progress_t;

/* What |p| means for this process: LG_PROGRESS_OFF, _ON (live) or _LINES. */
lg_progress_t lg_progress_mode(lg_progress_t p);

/* LogSettings plus what this implementation adds. */
typedef struct {
    const char *outdir; /* "." */
    const char *prefix; /* "mlperf_log_" */
    const char *suffix; /* "" */
    bool prefix_with_datetime;
    bool copy_detail_to_stdout;
    bool copy_summary_to_stdout;
    /* Read with model "*" and the scenario's name when the file exists, as the official
     * "audit.config" in the working directory (the default). NULL: never. */
    const char *audit_config;
    lg_progress_t progress;
    /* Plain progress lines: one every this many ms (default 10000). */
    uint64_t progress_interval_ms;
    /* 0: wait for every response forever, as officially. Otherwise samples still outstanding
     * this long after the last issue are counted as lost (errors) and the run is INVALID. */
    uint64_t drain_timeout_ms;
    /* Server: the issue thread never sleeps when less than the measured cost of a sleep plus
     * this remains before a scheduled issue; it spins instead (default 30 us). */
    uint64_t spin_ns;
    /* Server: the most of the series' wall time the issue thread may spin, in percent (1-100,
     * default 100: up to one core). Past it, short gaps are slept and issues come late, which
     * the harness block of the summary reports. */
    unsigned spin_budget_pct;
    /* SingleStream/MultiStream: spin this long for a query's completion before sleeping on a
     * condition variable (default 150 us). A sleeping issue thread on a virtual machine takes
     * tens of microseconds to wake, which would be charged to the SUT's latency. */
    uint64_t wait_spin_ns;
    /* Adapt that spin to the host (default true): when the spinning thread keeps losing its CPU
     * (more runnable threads than cores: the spin takes the CPU the SUT's threads need) it
     * sleeps at once for a while, then tries again. false: always spin wait_spin_ns. */
    bool wait_spin_adapt;
    /* -1 (the default): the issue thread runs where the scheduler puts it. Otherwise the CPU it
     * has alone while a series issues: every other thread of the process is kept off it (the
     * SUT's threads included; other processes are not touched). On a host with few cores this
     * keeps the threads that wake for completions from preempting the issue thread. */
    int issue_cpu;
    /* Server: between issues the issue thread runs the SUT's network I/O itself (lg_sut_t.poll*;
     * the QDL's loop), so the SUT's loop thread sleeps while the series issues: one busy thread
     * instead of two, and no hand-off or wake-up per query. Not with issue_cpu (the issue thread
     * keeps that CPU to itself). Default true. */
    bool issue_thread_io;
    /* Check every response against the digest of its sample (the sut-node digest backend). */
    bool verify_digest;
    /* Also write <prefix>sample_latencies<suffix>.csv: one line per performance-run sample,
     * "sample_seq,scheduled_ns,latency_ns,issue_late_ns,issue_call_ns" (ns from the start of its
     * series; latency -1 for a sample that never completed; issue_late_ns: issued this long after
     * its scheduled time (Server; 0 elsewhere); issue_call_ns: from the issue thread taking it to
     * issue() returning). Costs 16 more bytes per sample while the run lasts. */
    bool sample_latencies;
    /* Non-zero: also write <prefix>latency_intervals<suffix>.csv: the performance-run samples
     * grouped by scheduled time into intervals of this many ms, each with its count and latency
     * percentiles (for soak runs: drift, stalls). Costs 8 more bytes per sample, like
     * sample_latencies. */
    uint64_t latency_interval_ms;
    /* Messages from reading the conf files, logged at the start of the detail log. */
    const lg_msgs_t *msgs;
    /* Optional (NULL): Prometheus histograms the run adds its performance-run samples to. */
    const lg_observe_t *observe;
} lg_log_settings_t;

void lg_log_settings_init(lg_log_settings_t *ls);

/* Whether CPU |cpu| can be the issue thread's alone (lg_log_settings_t.issue_cpu): one this
 * process may run on, and not its only one. lg_start_test() checks it too. */
int lg_issue_cpu_check(int cpu, cmn_errbuf_t *eb);

typedef struct {
    bool accuracy_ran;
    bool performance_ran;
    bool performance_valid; /* "Result is : VALID" of the (last) performance summary */
    char metric_name[64];   /* e.g. "Samples per second" */
    double metric;
    uint64_t num_errors; /* as logged in num_errors */
    uint64_t failed_samples, lost_samples, digest_mismatches;
    uint64_t samples_issued;
    int interrupted; /* the signal that ended the run early (lg_interrupt), 0 if none */
    char sut_name[512];
} lg_result_t;

/* StartTest. Returns 0 when the test ran (valid or not: see |res|), or a negative code with a
 * reason when it could not run (output files, SUT name, QSL load, invalid settings). */
int lg_start_test(lg_sut_t *sut, lg_qsl_t *qsl, const lg_test_settings_t *settings,
                  const lg_log_settings_t *log, lg_result_t *res, cmn_errbuf_t *eb);

/* Asks the running test to end early, as on Ctrl-C: it stops issuing, waits for the samples in
 * flight (at most LG_INTERRUPT_DRAIN_MS, or drain_timeout_ms when that is shorter), and writes
 * its logs with the run INVALID and marked interrupted (lg_result_t.interrupted = |signo|).
 * Async-signal-safe; process-wide: it also ends any test started later until
 * lg_interrupt_clear(). */
#define LG_INTERRUPT_DRAIN_MS 2000u
void lg_interrupt(int signo);
void lg_interrupt_clear(void);

#endif
