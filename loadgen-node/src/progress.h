/* The progress display, and the cheap latency histogram it reads.
 *
 * A thread wakes a few times per second, asks its callback for a snapshot, and redraws one line
 * on the terminal ("\r...\033[K"), or, for a log (stderr not a terminal, --progress lines),
 * writes a plain line of its own every --progress-interval-ms: elapsed time, samples issued and
 * completed, completions per second, the latency (and, in a token run, TTFT and TPOT) at the judged
 * percentile so far next to the bound it is judged against, and an ETA. The hot path only adds to
 * relaxed atomic counters. */
#ifndef LG_PROGRESS_H
#define LG_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

/* Log-linear buckets: 2^LG__HIST_SUB_BITS per power of two, so a quantile (a bucket's upper
 * edge) is within 1/64 (1.6 %) above the truth. 8 per power of two (12.5 %) put the harness's
 * figures on 2 us steps around the 20 us its lateness is judged at. */
#define LG__HIST_SUB_BITS 6u
#define LG__HIST_SUB (1u << LG__HIST_SUB_BITS)
#define LG__HIST_BUCKETS (64 * LG__HIST_SUB)

typedef struct {
    atomic_uint_fast32_t b[LG__HIST_BUCKETS];
} lg__hist_t;

void lg__hist_reset(lg__hist_t *h);
void lg__hist_add(lg__hist_t *h, int64_t ns);
/* The upper edge of the bucket holding quantile |q|; 0 when empty. */
uint64_t lg__hist_quantile(lg__hist_t *h, double q);
/* Adds every sample of |src| to |dst|. */
void lg__hist_merge(lg__hist_t *dst, lg__hist_t *src);
/* How many samples lie in the bucket holding |ns| and above it. */
uint64_t lg__hist_count_from(lg__hist_t *h, uint64_t ns);

typedef struct {
    const char *phase; /* e.g. "Server performance" */
    uint64_t elapsed_ns, issued, completed;
    double pct;      /* the percentile the run is judged at (0.99 when none is) */
    uint64_t p99_ns; /* the latency at |pct| so far */
    double eta_s;    /* < 0: unknown */
    /* The bounds the run is judged against (0: none), shown beside the values so far. */
    uint64_t target_ns;               /* Server: the latency bound */
    uint64_t ttft_ns, ttft_target_ns; /* token runs: first-token latency at |pct| */
    uint64_t tpot_ns, tpot_target_ns; /* token runs: time per output token at |pct| */
} lg__progress_snap_t;

/* The text of one progress line (no "\r" or terminal codes), |rate| completions per second. */
void lg__progress_format(char *buf, size_t len, const lg__progress_snap_t *s, double rate);

typedef void (*lg__progress_fn)(void *arg, lg__progress_snap_t *snap);

typedef struct lg__progress lg__progress_t;

/* Starts the display on |out| (NULL is allowed: returns NULL and shows nothing): a live line
 * redrawn in place, or with |plain| a line of its own every |interval_ms| (0: 10 s). */
lg__progress_t *lg__progress_start(FILE *out, lg__progress_fn fn, void *arg, int plain,
                                   uint64_t interval_ms);
/* Draws a last line (plain: only after an earlier one), ends it with a newline and joins the
 * thread. */
void lg__progress_stop(lg__progress_t *p);

#endif
