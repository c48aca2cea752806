/* The state of one lg_start_test() run, shared by the files that implement it, and the internal
 * calls between them. Calls flow one way, from the top of this list to the bottom:
 *
 *   start.c         StartTest: the run's lifetime, the log files, the settings it logs
 *   settings_log.c  the requested_* and effective_* detail-log keys
 *   modes.c         accuracy, performance and find-peak modes; loadable sets; the report
 *   harness.c       the summary's harness block: overhead, SUT health, warnings
 *   series.c        one series: begin, issue loop, drain, collect, close
 *   collect.c       slots to latency arrays; sample_latencies and latency_intervals CSVs
 *   issue.c         the issue loops: Server on its schedule, the others one query at a time
 *   complete.c      lg_complete() and lg_first_token(): the lock-free completion path
 *   pace.c          Server: waiting for a scheduled time (calibrated sleep, bounded spin)
 *   floor.c         Server: the host's floor under the issue lateness, probed by pace.c
 *   cpu.c           --issue-cpu: the issue thread alone on one CPU while a series issues
 *   wait.c          the issue thread waiting for completions, and completions waking it
 *   slots.c         the per-sample slots in chunks that never move
 *   errors.c        runtime errors: counted always, logged the first few of each kind
 *   interrupt.c     the request to end early (Ctrl-C), polled by issue.c, wait.c and series.c
 *
 * Per issued sample the run keeps 12 bytes in chunked slot arrays indexed by the sample's
 * sequence number, which is also its response id: an int64 that holds -(scheduled time + 1)
 * while the sample is outstanding and its latency once completed, and the QSL index (with the
 * accuracy-log flag in the top bit). lg_complete() therefore needs no lookup table, no lock and
 * no allocation per sample: one timestamp per batch, a compare-and-swap per slot, and one counter
 * update per batch. Chunks are never moved, so completions read them while the issue thread adds
 * more. */
#ifndef LG_RUN_H
#define LG_RUN_H

#include "lg/lg.h"

#include "gen.h"
#include "logs.h"
#include "progress.h"
#include "results.h"
#include "rng.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define LG__CHUNK_BITS 16
#define LG__CHUNK_SIZE (1u << LG__CHUNK_BITS)
#define LG__CHUNK_MASK (LG__CHUNK_SIZE - 1u)
/* 2^16 chunks of 2^16 samples: 2^32 samples per series. */
#define LG__DIR_SIZE (1u << 16)
/* Errors of one kind logged one by one before the rest are only counted. */
#define LG__ERR_LOG_LIMIT 10u
/* Buckets of the first-token cache. */
#define LG__TOK_BUCKETS 4096u

/* The slots of 2^16 consecutive samples of a series. */
typedef struct {
    _Atomic int64_t lat[LG__CHUNK_SIZE]; /* -(scheduled + 1) while outstanding, then latency */
    uint32_t idx[LG__CHUNK_SIZE];        /* QSL index | LG__ACC_FLAG */
    _Atomic int64_t *ttft;               /* token mode: first-token latency + 1; 0 while none */
    int64_t *ntok;                       /* token mode: output tokens */
    int64_t *sched; /* with sample_latencies or latency intervals: each scheduled time */
    uint32_t *late; /* with sample_latencies: issue lateness (ns, Server) */
    uint32_t *call; /* with sample_latencies: wake to issue() returned (ns) */
    /* With sample_latencies, durations that can pass 4.29 s (an LLM request), so 64-bit: */
    uint64_t *qq;   /* QDL queueing (ns) + 1; 0 when not reported */
    uint64_t *nq;   /* node queue (ns) + 1; 0 when not reported */
    uint64_t *nb;   /* node backend (ns) + 1; 0 when not reported */
    uint64_t *wr;   /* wire and return (ns) + 1; 0 when not reported */
    uint8_t *cause; /* with sample_latencies: lg__late_cause_t + 1 (Server); 0 when none */
} lg__chunk_t;

/* Kinds of runtime error, each counted and logged on its own. */
enum {
    LG__E_UNKNOWN_ID,
    LG__E_TWICE,
    LG__E_FAILED,
    LG__E_DIGEST,
    LG__E_ISSUE,
    LG__E_NO_FIRST_TOKEN,
    LG__E_TOKENS_ZERO,
    LG__E_TOKENS_NEGATIVE,
    LG__E_TOKENS_ONE,
    LG__E_TOKEN_AFTER,
    LG__E_TOKEN_TWICE,
    LG__E_LATE,
    LG__E_COUNT
};

/* A first token's bytes, kept until the sample's response is logged. */
typedef struct lg__tok_node {
    struct lg__tok_node *next;
    uint64_t seq;
    size_t size;
    uint8_t data[];
} lg__tok_node_t;

/* What the issue thread waits for while it sleeps. */
enum { LG__WAIT_NONE = 0, LG__WAIT_QUERY = 1, LG__WAIT_TOTAL = 2 };

/* pace.c: the Server issue thread's wait for a scheduled time. */
#define LG__PACE_RING 64
/* Why an issue went out when it did, as the wait that preceded it saw it (pace.c decides, issue.c
 * counts per sample, harness.c reports the causes of the issues at the tail of the lateness). An
 * issue already due when the wait began is late for the largest part of its lateness: what was
 * left of the last wait's, or the issuing since. */
typedef enum {
    LG__LATE_SPIN,   /* the thread was on its CPU, watching the clock, at the deadline */
    LG__LATE_OFFCPU, /* it lost its CPU across the deadline: the host, or another thread, ran */
    LG__LATE_IO,     /* a turn of the SUT's I/O (lent to the issue thread) ran past the deadline */
    LG__LATE_SLEEP,  /* a sleep woke past the deadline */
    LG__LATE_WORK,   /* issuing the queries before it took the thread past the deadline */
    LG__LATE_CAUSES
} lg__late_cause_t;
/* The kinds of the spin's turns of the SUT's I/O (pace.c measures them, harness.c reports). */
#define LG__TURN_WRITE 0 /* the first poll after an issue: writes its frame, then reads */
#define LG__TURN_READ 1  /* a poll with nothing of the issue thread's to write: reads only */
#define LG__TURN_KINDS 2
/* floor.c: the host's floor under the issue lateness, probed at the start of a Server series. */
#define LG__FLOOR_MAX_CPUS 8
#define LG__FLOOR_PROBE_NS 250000000u
typedef struct {
    int ok;                /* measured */
    unsigned cpus;         /* CPUs spun on (at most LG__FLOOR_MAX_CPUS) */
    unsigned cpus_allowed; /* CPUs the process may use */
    uint64_t probe_ns;     /* how long */
    uint64_t p99_ns;       /* a perfect issuer's lateness p99 in the gaps all those CPUs shared */
    uint64_t lost_ns, gaps;
    int truncated; /* a CPU had more gaps than were kept: the floor is an underestimate */
} lg__floor_t;
/* Spins on each CPU the process may use for |probe_ns|; 0 or a negative errno. */
int lg__floor_probe(lg__floor_t *f, uint64_t probe_ns);
/* Smallest x with sum over |len| of max(0, g - x) <= (1 - q) * total_ns (sorts |len|). */
uint64_t lg__floor_quantile(uint64_t *len, size_t n, uint64_t total_ns, double q);
typedef struct {
    lg__floor_t floor;      /* the host's floor, probed at the start of the series */
    uint64_t sleep_cost_ns; /* calibrated at the start: 90th percentile oversleep of 1 us */
    uint64_t min_spin_ns;   /* --spin-us */
    uint64_t base_guard_ns; /* sleep_cost_ns + min_spin_ns: never sleep closer to a deadline */
    uint64_t guard_ns;      /* the same, following the sleeps of the run */
    uint64_t max_guard_ns;
    double budget; /* --spin-budget as a fraction of wall time (1: no limit below one core) */
    uint64_t t_start, spin_ns;
    uint64_t sleeps, budget_sleeps, max_oversleep_ns;
    unsigned contended; /* > 0: sleeping for this many more windows (a contended host) */
    uint64_t win_start, win_spin_ns, win_lost_ns;
    uint64_t contended_windows;   /* times a window of spins was found preempted */
    int own_cpu;                  /* the thread has a CPU of its own (--issue-cpu): no yields */
    lg_sut_t *io;                 /* the SUT whose I/O the thread runs while it waits, or NULL */
    int io_lent;                  /* the SUT lent its loop for this series (for the report) */
    uint32_t ring[LG__PACE_RING]; /* oversleeps of the last sleeps */
    /* The quiet window (with the SUT's I/O lent): the last quiet_ns before an issue the thread
     * neither polls the SUT nor yields. quiet_ns is the longest of the last LG__PACE_RING turns
     * of the spin (a poll and a yield), at most quiet_cap_ns, half the mean gap of the schedule. */
    uint64_t quiet_cap_ns, quiet_ns, max_quiet_ns;
    uint64_t turns;
    uint32_t turn_ring[LG__PACE_RING];
    /* Every turn's length by kind (LG__TURN_*), for the report: does a turn fit in a gap? A turn
     * writes when an issue was made since the last poll (|unsent|): the QDL writes the frames it
     * queued at the start of its next poll. */
    int unsent;
    lg__hist_t turn_hist[LG__TURN_KINDS];
    /* The last wait: why it ended when it did, when, how late, and that lateness in parts per
     * cause (a backlog carries the parts of the waits before it). */
    lg__late_cause_t cause;
    uint64_t woke, late_ns;
    double part[LG__LATE_CAUSES];
    /* Time the spinning thread did not run: gaps of LG__OFFCPU_NS or more between two clock
     * reads of a spin (whoever ran instead, the host or another thread). */
    uint64_t offcpu_ns, offcpu_gaps, longest_gap_ns;
    /* The thread's run-queue wait (runnable, another thread on the CPU): /proc/thread-self/
     * schedstat, open while a series issues (-1 where the kernel does not keep it). */
    int schedstat_fd;
    int64_t runq_start;   /* at the series' start, or -1 */
    int64_t runq_wait_ns; /* over the series (lg__pace_finish), or -1 when unknown */
} lg__pace_t;
/* A turn of the spin without I/O (a clock read and a yield or a pause) takes well under 1 us on
 * the slowest machine measured (0.3 us on a VM); a gap between two clock reads this long means the
 * thread did not run. */
#define LG__OFFCPU_NS 5000u
/* The adaptive query wait (wait.c): ways to wait, and queries per window of one way. */
#define LG__WS_SLEEP 0
#define LG__WS_SPIN 1
#define LG__WS_WINDOW 32u

/* cpu.c: the issue thread's own CPU for a series (--issue-cpu). */
typedef struct {
    int cpu, on;
    int pinned;      /* the last claim succeeded */
    cpu_set_t saved; /* the issue thread's CPUs before, given back to every thread after */
} lg__cpu_t;

struct lg_run {
    lg_sut_t *sut;
    lg_qsl_t *qsl;
    const lg_log_settings_t *ls;
    lg__dlog_t dlog;
    lg__acclog_t acc;
    FILE *summary;
    char sut_name[512];
    lg__mt_t acc_rng; /* SequenceGen's accuracy-log generator: never seeded (5489) */
    uint64_t seq;     /* SequenceGen's sample counter */
    int use_tokens, needs_first_token, verify_digest;
    int csv_started; /* the sample-latency file exists (later series append) */
    int ivl_started; /* the latency-interval file exists (later series append) */

    /* The current series. Written by the issue thread before the samples are handed out. */
    lg_scenario_t scenario;
    int accuracy;
    uint64_t first_seq;
    uint64_t t0;
    _Atomic(lg__chunk_t *) *dir;
    size_t n_chunks;
    atomic_uint_fast64_t issued_hi;
    atomic_uint_fast64_t completed, failed, digest_bad;
    atomic_int_fast64_t q_remaining;
    atomic_int_fast64_t max_done_rel;
    atomic_int active, closed;
    atomic_int finished; /* lg_start_test has returned: nothing may be touched any more */

    /* wait.c: the issue thread sleeping on cv, and what it waits for. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int sleeping, wait_kind;
    atomic_uint_fast64_t wait_target;
    /* wait.c, the adaptive query wait (issue thread only): the way the current window of
     * queries waits (LG__WS_SPIN or LG__WS_SLEEP), the latencies of its queries, the median
     * latency each way measured last, windows so far, and totals for the report. */
    int ws_mode;
    unsigned ws_n;
    uint64_t ws_lat[LG__WS_WINDOW];
    uint64_t ws_med[2];
    uint64_t ws_windows, ws_spins, ws_skipped, ws_switches;

    /* errors.c */
    atomic_uint_fast64_t err_count[LG__E_COUNT];
    atomic_uint_fast64_t suppressed;

    /* complete.c: first tokens of logged samples. */
    pthread_mutex_t tok_mu;
    lg__tok_node_t **tok;

    /* harness.c: the SUT's counters when the series began. */
    lg_sut_health_t health0;

    /* series.c: the progress display, an lg_progress_t: LG_PROGRESS_OFF, _ON (the live line)
     * or _LINES (plain lines); the histograms are kept whenever it is not off. */
    int progress_on;
    const lg_observe_t *obs; /* lg_log_settings_t.observe, or NULL */
    lg__hist_t hist;
    lg__hist_t ttft_hist, tpot_hist; /* token runs */
    double prog_pct;                 /* the judged percentile and bounds the line shows */
    uint64_t prog_target_ns, prog_ttft_target_ns, prog_tpot_target_ns;
    const char *phase;
    uint64_t eta_samples; /* samples the series will issue, when known */
    uint64_t eta_min_ns;  /* the series lasts at least this long */

    /* issue.c and harness.c: the issue thread's own cost, per performance series. */
    lg__pace_t pace;
    lg__cpu_t cpu;
    /* Server: issue time minus scheduled time, per sample, one histogram per cause
     * (lg__late_cause_t); the lateness of all samples is their sum. */
    lg__hist_t late_cause_hist[LG__LATE_CAUSES];
    lg__hist_t late_hist; /* harness.c: their sum, made for the report (not on the issue path) */
    lg__hist_t call_hist; /* from waking to issue() returning, per sample */
    lg__hist_t qq_hist;   /* the SUT's issued_ns to sent_ns (QDL queueing), per sample */
    lg__hist_t nq_hist;   /* the node's queue time (arrival to backend start), per sample */
    lg__hist_t nb_hist;   /* the node's backend time (start to result), per sample */
    lg__hist_t wr_hist;   /* sent_ns to completion minus the node's times, per sample */

    /* issue.c: one Offline part's indices, samples, and failed-issue responses. */
    uint32_t *idxbuf;
    lg_sample_t *sbuf;
    lg_response_t *rbuf;
};

/* What a series' issue loop leaves for collecting its results. */
typedef struct {
    int64_t last_sched_rel, last_issue_rel;
    uint64_t last_q_first, queries_issued;
    int ran_out;
    int interrupted; /* the loop stopped on lg_interrupt(): the signal */
} lg__issue_state_t;

/* pace.c */
/* |floor_probe_ns|: how long to probe the host's floor first (floor.c); 0 skips it. */
void lg__pace_init(lg__pace_t *p, uint64_t min_spin_ns, unsigned budget_pct, uint64_t mean_gap_ns,
                   uint64_t floor_probe_ns);
/* Waits until |deadline| (CLOCK_MONOTONIC ns). Returns the lg_interrupt() signal, or 0. */
int lg__pace_wait(lg__pace_t *p, uint64_t deadline);
/* The cause's name in the sample-latency file and the detail log ("offcpu", ...). */
const char *lg__late_cause_name(lg__late_cause_t c);
/* The series' issues are done: closes what lg__pace_init opened, keeps the figures. */
void lg__pace_finish(lg__pace_t *p);

/* interrupt.c: the signal given to lg_interrupt(), 0 if none. */
int lg__interrupted(void);

/* cpu.c: --issue-cpu (lg_issue_cpu_check() is public).
 * lg__cpu_claim() moves the process's other threads off it and the caller onto it (0, or a
 * negative code with nothing moved); lg__cpu_release() undoes it (a no-op when not claimed). */
int lg__cpu_claim(lg__cpu_t *c, int cpu);
void lg__cpu_release(lg__cpu_t *c);

/* errors.c */
void lg__run_error(lg_run_t *run, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t lg__run_error_total(lg_run_t *run);
void lg__run_errors_reset(lg_run_t *run);
/* Logs, per kind, how many errors were counted but not logged one by one. */
void lg__run_errors_flush(lg_run_t *run);

/* slots.c */
lg__chunk_t *lg__slot_chunk(lg_run_t *run, size_t ci);
void lg__slot_free_chunk(lg_run_t *run, size_t ci);
lg__chunk_t *lg__slot_find(lg_run_t *run, uint64_t id, uint64_t hi, size_t *k);

/* wait.c */
void lg__wait_wake(lg_run_t *run, int64_t q_left, uint64_t done);
void lg__wait_query(lg_run_t *run, uint64_t first, uint64_t n);
int lg__wait_total(lg_run_t *run, uint64_t target, uint64_t timeout_ms);

/* complete.c (lg_complete and lg_first_token are public) */
void lg__tok_clear(lg_run_t *run);

/* issue.c */
void lg__issue_sequential(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                          lg__issue_state_t *st);
void lg__issue_server(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                      lg__issue_state_t *st);

/* collect.c: moves the slots into |pr| (freeing them) and writes the requested CSV files. */
int lg__collect(lg_run_t *run, const lg_effective_settings_t *s, const lg__issue_state_t *st,
                int64_t end_rel, lg__perf_t *pr);

/* series.c: one series (IssueQueries) over the loaded samples |loaded|[0, L). */
int lg__series_run(lg_run_t *run, const lg_effective_settings_t *s, int accuracy,
                   const uint32_t *loaded, size_t L, size_t end, lg__perf_t *pr, cmn_errbuf_t *eb);

/* modes.c */
int lg__mode_accuracy(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                      cmn_errbuf_t *eb);
int lg__mode_performance(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                         cmn_errbuf_t *eb);
int lg__mode_find_peak(lg_run_t *run, const lg_effective_settings_t *base, lg_result_t *res,
                       cmn_errbuf_t *eb);

/* harness.c: the harness block after a performance summary. */
void lg__harness_report(lg_run_t *run, const lg_effective_settings_t *s);

/* settings_log.c */
void lg__log_requested(lg__dlog_t *d, const lg_test_settings_t *s);
void lg__log_effective(lg__dlog_t *d, const lg_effective_settings_t *s);
void lg__log_msgs(lg__dlog_t *d, const lg_msgs_t *m);

#endif
