/* StartTest: the modes, the per-scenario issue loops, and the completion path.
 *
 * Per issued sample the run keeps 12 bytes in chunked slot arrays indexed by the sample's sequence
 * number, which is also its response id: an int64 that holds -(scheduled time + 1) while the
 * sample is outstanding and its latency once completed, and the QSL index (with the accuracy-log
 * flag in the top bit). lg_complete() therefore needs no lookup table, no lock and no allocation
 * per sample: one timestamp per batch, a compare-and-swap per slot, and one counter update per
 * batch. Chunks are never moved, so completions read them while the issue thread adds more. */
#include "lg/lg.h"

#include "build_info.h"
#include "cmn/clock.h"
#include "cmn/digest.h"
#include "cmn/log.h"
#include "gen.h"
#include "logs.h"
#include "progress.h"
#include "results.h"
#include "rng.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BITS 16
#define CHUNK_SIZE (1u << CHUNK_BITS)
#define CHUNK_MASK (CHUNK_SIZE - 1u)
/* 2^16 chunks of 2^16 samples: 2^32 samples per series. */
#define DIR_SIZE (1u << 16)
/* Errors of one kind logged one by one before the rest are only counted. */
#define ERR_LOG_LIMIT 10u

typedef struct {
    _Atomic int64_t lat[CHUNK_SIZE];
    uint32_t idx[CHUNK_SIZE];
    _Atomic int64_t *ttft; /* token mode: first-token latency + 1; 0 while none */
    int64_t *ntok;
    int64_t *sched; /* with sample_latencies: each sample's scheduled time */
} chunk_t;

enum {
    E_UNKNOWN_ID,
    E_TWICE,
    E_FAILED,
    E_DIGEST,
    E_ISSUE,
    E_NO_FIRST_TOKEN,
    E_TOKENS_ZERO,
    E_TOKENS_NEGATIVE,
    E_TOKENS_ONE,
    E_TOKEN_AFTER,
    E_TOKEN_TWICE,
    E_LATE,
    E__COUNT
};

static const char *const err_names[E__COUNT] = {
    "completion for an unknown sample id",
    "Attempted to complete a sample twice.",
    "sample failed in the SUT",
    "response does not match the sample's digest",
    "IssueQuery failed",
    "Attempted to record a sample latency before it's first token latency",
    "n_tokens argument missing or attempted to record 0 as number of tokens",
    "Attempted to record a negative number of tokens",
    "Number of tokens need to be greater than 1",
    "Attempted to record token latency after sample was completed",
    "Attempted to complete a sample twice. (first token)",
    "completion after the end of its series",
};

typedef struct tok_node {
    struct tok_node *next;
    uint64_t seq;
    size_t size;
    uint8_t data[];
} tok_node_t;

#define TOK_BUCKETS 4096u

enum { WAIT_NONE = 0, WAIT_QUERY = 1, WAIT_TOTAL = 2 };

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
    _Atomic(chunk_t *) *dir;
    size_t n_chunks;
    atomic_uint_fast64_t issued_hi;
    atomic_uint_fast64_t completed, failed, digest_bad;
    atomic_int_fast64_t q_remaining;
    atomic_int_fast64_t max_done_rel;
    atomic_int active, closed;
    atomic_int finished; /* lg_start_test has returned: nothing may be touched any more */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int sleeping, wait_kind;
    atomic_uint_fast64_t wait_target;

    atomic_uint_fast64_t err_count[E__COUNT];
    atomic_uint_fast64_t suppressed;

    pthread_mutex_t tok_mu;
    tok_node_t **tok;

    int progress_on;
    lg__hist_t hist;
    const char *phase;
    uint64_t eta_samples; /* samples the series will issue, when known */
    uint64_t eta_min_ns;  /* the series lasts at least this long */

    uint32_t *idxbuf;
    lg_sample_t *sbuf;
    lg_response_t *rbuf;
};

/* ---- errors -------------------------------------------------------------------------------- */

static void run_error(lg_run_t *run, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Logs the first few errors of each kind with their details and counts the rest, so a node that
 * fails a million samples does not write a million lines. Every error counts in num_errors. */
static void run_error(lg_run_t *run, int kind, const char *fmt, ...)
{
    uint64_t n = atomic_fetch_add(&run->err_count[kind], 1);
    char text[1024];
    va_list ap;

    if (n >= ERR_LOG_LIMIT) {
        atomic_fetch_add(&run->suppressed, 1);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    lg__dlog_str(&run->dlog, LG__ERR, "error_runtime", text, LG__FILE, __LINE__);
}

static uint64_t error_total(lg_run_t *run)
{
    return atomic_load(&run->dlog.errors) + atomic_load(&run->suppressed);
}

/* ---- waiting ------------------------------------------------------------------------------- */

static void wake_if_waiting(lg_run_t *run, int64_t q_left, uint64_t done)
{
    int kind;

    if (!atomic_load(&run->sleeping))
        return;
    kind = atomic_load(&run->wait_kind);
    if ((kind == WAIT_QUERY && q_left <= 0) ||
        (kind == WAIT_TOTAL && done >= atomic_load(&run->wait_target))) {
        pthread_mutex_lock(&run->mu);
        pthread_cond_broadcast(&run->cv);
        pthread_mutex_unlock(&run->mu);
    }
}

/* Waits until the current SingleStream/MultiStream query has completed: a spin of
 * wait_spin_ns (a fast SUT answers within it), then a condition variable. */
static void wait_query(lg_run_t *run)
{
    uint64_t until = cmn_now_ns() + run->ls->wait_spin_ns;

    while (atomic_load(&run->q_remaining) > 0) {
        if (cmn_now_ns() > until)
            break;
    }
    if (atomic_load(&run->q_remaining) <= 0)
        return;
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->wait_kind, WAIT_QUERY);
    atomic_store(&run->sleeping, 1);
    while (atomic_load(&run->q_remaining) > 0)
        pthread_cond_wait(&run->cv, &run->mu);
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
}

/* Waits for |target| completions; with a timeout, returns 0 if they all came, 1 if not. */
static int wait_total(lg_run_t *run, uint64_t target, uint64_t timeout_ms)
{
    struct timespec ts;
    int timed_out = 0;

    if (atomic_load(&run->completed) >= target)
        return 0;
    if (timeout_ms) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(timeout_ms / 1000);
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->wait_target, target);
    atomic_store(&run->wait_kind, WAIT_TOTAL);
    atomic_store(&run->sleeping, 1);
    while (atomic_load(&run->completed) < target) {
        if (!timeout_ms) {
            pthread_cond_wait(&run->cv, &run->mu);
        } else if (pthread_cond_timedwait(&run->cv, &run->mu, &ts) == ETIMEDOUT) {
            timed_out = atomic_load(&run->completed) < target;
            break;
        }
    }
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
    return timed_out;
}

/* ---- first-token cache (only for samples whose response is logged) ------------------------- */

static void tok_put(lg_run_t *run, uint64_t seq, const void *data, size_t size)
{
    tok_node_t *n = malloc(sizeof(*n) + size);

    if (!n)
        return;
    n->seq = seq;
    n->size = size;
    if (size)
        memcpy(n->data, data, size);
    pthread_mutex_lock(&run->tok_mu);
    n->next = run->tok[seq % TOK_BUCKETS];
    run->tok[seq % TOK_BUCKETS] = n;
    pthread_mutex_unlock(&run->tok_mu);
}

static tok_node_t *tok_take(lg_run_t *run, uint64_t seq)
{
    tok_node_t **pp, *n = NULL;

    pthread_mutex_lock(&run->tok_mu);
    for (pp = &run->tok[seq % TOK_BUCKETS]; *pp; pp = &(*pp)->next) {
        if ((*pp)->seq == seq) {
            n = *pp;
            *pp = n->next;
            break;
        }
    }
    pthread_mutex_unlock(&run->tok_mu);
    return n;
}

static void tok_clear(lg_run_t *run)
{
    size_t i;

    for (i = 0; i < TOK_BUCKETS; i++) {
        while (run->tok[i]) {
            tok_node_t *n = run->tok[i];

            run->tok[i] = n->next;
            free(n);
        }
    }
}

/* ---- completion ---------------------------------------------------------------------------- */

/* Finds the slot of response id |id| in the current series, or NULL. */
static chunk_t *slot_of(lg_run_t *run, uint64_t id, uint64_t hi, size_t *k)
{
    uint64_t o;

    if (id < run->first_seq || id >= hi)
        return NULL;
    o = id - run->first_seq;
    *k = (size_t)(o & CHUNK_MASK);
    return atomic_load_explicit(&run->dir[o >> CHUNK_BITS], memory_order_acquire);
}

static int enter(lg_run_t *run)
{
    if (atomic_load(&run->finished))
        return 0;
    atomic_fetch_add(&run->active, 1);
    if (atomic_load(&run->closed)) {
        atomic_fetch_sub(&run->active, 1);
        run_error(run, E_LATE, "a completion arrived after the end of its series; dropped");
        return 0;
    }
    return 1;
}

static void record_tokens(lg_run_t *run, chunk_t *c, size_t k, int64_t *n_tokens, uint64_t id)
{
    if (run->needs_first_token && atomic_load_explicit(&c->ttft[k], memory_order_relaxed) == 0)
        run_error(
            run, E_NO_FIRST_TOKEN,
            "Attempted to record a sample latency before it's first token latency (sample %" PRIu64
            ")",
            id);
    if (*n_tokens == 0) {
        run_error(run, E_TOKENS_ZERO,
                  "n_tokens argument missing or attempted to record 0 as number of tokens "
                  "(sample %" PRIu64 ")",
                  id);
    } else if (*n_tokens < 0) {
        run_error(run, E_TOKENS_NEGATIVE,
                  "Attempted to record a negative number of tokens (sample %" PRIu64 ")", id);
        *n_tokens = 0;
    } else if (*n_tokens == 1) {
        run_error(run, E_TOKENS_ONE,
                  "Number of tokens need to be greater than 1 (sample %" PRIu64 ")", id);
        *n_tokens = 0;
    }
    c->ntok[k] = *n_tokens;
}

void lg_complete(lg_run_t *run, const lg_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns(), hi, done;
    int64_t rel, cur, q_left = 1;
    size_t i, ok = 0, failed = 0, bad = 0;

    if (!run || n == 0 || !enter(run))
        return;
    rel = (int64_t)(now - run->t0);
    hi = atomic_load_explicit(&run->issued_hi, memory_order_acquire);
    for (i = 0; i < n; i++) {
        size_t k;
        chunk_t *c = slot_of(run, r[i].id, hi, &k);
        int64_t old, lat;
        uint32_t idx;
        int64_t n_tokens = r[i].n_tokens;

        if (!c) {
            run_error(run, E_UNKNOWN_ID,
                      "Received a completion for sample id %" PRIu64
                      ", which is not outstanding in this series",
                      r[i].id);
            continue;
        }
        old = atomic_load_explicit(&c->lat[k], memory_order_relaxed);
        if (old >= 0) {
            run_error(run, E_TWICE, "Attempted to complete a sample twice. (sample %" PRIu64 ")",
                      r[i].id);
            continue;
        }
        lat = rel + old + 1;
        idx = c->idx[k];
        if (r[i].status < 0) {
            failed++;
            run_error(run, E_FAILED, "Sample %" PRIu64 " (qsl_idx %u) failed in the SUT: %s (%s)",
                      r[i].id, idx & LG__IDX_MASK, cmn_strerror(r[i].status),
                      cmn_err_name(r[i].status));
        } else {
            if (run->verify_digest) {
                uint64_t want = lg_qsl_digest(run->qsl, idx & LG__IDX_MASK);

                if (r[i].size != 8 || !r[i].data || cmn_digest_get(r[i].data) != want) {
                    bad++;
                    run_error(run, E_DIGEST,
                              "Sample %" PRIu64 " (qsl_idx %u): the response (%zu bytes, digest "
                              "%016" PRIx64 ") does not match the sample's digest %016" PRIx64,
                              r[i].id, idx & LG__IDX_MASK, r[i].size,
                              r[i].size == 8 && r[i].data ? cmn_digest_get(r[i].data) : 0, want);
                }
            }
            if (run->use_tokens)
                record_tokens(run, c, k, &n_tokens, r[i].id);
            if (run->accuracy || (idx & LG__ACC_FLAG)) {
                int mode = !run->use_tokens ? 0 : !run->needs_first_token ? 1 : 2;
                tok_node_t *t = mode == 2 ? tok_take(run, r[i].id) : NULL;

                lg__acclog_write(&run->acc, r[i].id, idx & LG__IDX_MASK, r[i].data, r[i].size, mode,
                                 t ? t->data : NULL, t ? t->size : 0, n_tokens);
                free(t);
            }
        }
        if (!atomic_compare_exchange_strong(&c->lat[k], &old, lat)) {
            run_error(run, E_TWICE, "Attempted to complete a sample twice. (sample %" PRIu64 ")",
                      r[i].id);
            continue;
        }
        if (run->progress_on)
            lg__hist_add(&run->hist, lat);
        ok++;
    }
    if (failed)
        atomic_fetch_add(&run->failed, failed);
    if (bad)
        atomic_fetch_add(&run->digest_bad, bad);
    if (ok) {
        cur = atomic_load(&run->max_done_rel);
        while (cur < rel && !atomic_compare_exchange_weak(&run->max_done_rel, &cur, rel)) {
        }
        if (run->scenario == LG_SINGLE_STREAM || run->scenario == LG_MULTI_STREAM)
            q_left = atomic_fetch_sub(&run->q_remaining, (int64_t)ok) - (int64_t)ok;
        done = atomic_fetch_add(&run->completed, ok) + ok;
        wake_if_waiting(run, q_left, done);
    }
    atomic_fetch_sub(&run->active, 1);
}

void lg_first_token(lg_run_t *run, const lg_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns(), hi;
    int64_t rel;
    size_t i;

    if (!run || n == 0 || !enter(run))
        return;
    rel = (int64_t)(now - run->t0);
    hi = atomic_load_explicit(&run->issued_hi, memory_order_acquire);
    for (i = 0; i < n; i++) {
        size_t k;
        chunk_t *c = slot_of(run, r[i].id, hi, &k);
        int64_t old, expect = 0;

        if (!c) {
            run_error(run, E_UNKNOWN_ID,
                      "Received a first token for sample id %" PRIu64
                      ", which is not outstanding in this series",
                      r[i].id);
            continue;
        }
        if (!c->ttft)
            continue; /* token latencies are off */
        old = atomic_load_explicit(&c->lat[k], memory_order_relaxed);
        if (old >= 0) {
            run_error(
                run, E_TOKEN_AFTER,
                "Attempted to record token latency after sample was completed (sample %" PRIu64 ")",
                r[i].id);
            continue;
        }
        if (!atomic_compare_exchange_strong(&c->ttft[k], &expect, rel + old + 2)) {
            run_error(run, E_TOKEN_TWICE,
                      "Attempted to complete a sample twice. (first token of sample %" PRIu64 ")",
                      r[i].id);
            continue;
        }
        /* Only a logged response of a scenario that records first tokens needs the bytes. */
        if (run->needs_first_token && (run->accuracy || (c->idx[k] & LG__ACC_FLAG)))
            tok_put(run, r[i].id, r[i].data, r[i].data ? r[i].size : 0);
    }
    atomic_fetch_sub(&run->active, 1);
}

/* ---- series bookkeeping -------------------------------------------------------------------- */

static chunk_t *chunk_get(lg_run_t *run, size_t ci)
{
    chunk_t *c;

    while (run->n_chunks <= ci) {
        if (run->n_chunks >= DIR_SIZE)
            return NULL;
        c = malloc(sizeof(*c));
        if (!c)
            return NULL;
        c->ttft = NULL;
        c->ntok = NULL;
        c->sched = NULL;
        if ((run->ls->sample_latencies || run->ls->latency_interval_ms) &&
            !(c->sched = malloc(CHUNK_SIZE * sizeof(*c->sched)))) {
            free(c);
            return NULL;
        }
        if (run->use_tokens) {
            c->ttft = calloc(CHUNK_SIZE, sizeof(*c->ttft));
            c->ntok = calloc(CHUNK_SIZE, sizeof(*c->ntok));
            if (!c->ttft || !c->ntok) {
                free(c->ttft);
                free(c->ntok);
                free(c->sched);
                free(c);
                return NULL;
            }
        }
        atomic_store_explicit(&run->dir[run->n_chunks], c, memory_order_release);
        run->n_chunks++;
    }
    return atomic_load_explicit(&run->dir[ci], memory_order_relaxed);
}

static void chunk_free(lg_run_t *run, size_t ci)
{
    chunk_t *c = atomic_load_explicit(&run->dir[ci], memory_order_relaxed);

    if (!c)
        return;
    free(c->ttft);
    free(c->ntok);
    free(c->sched);
    free(c);
    atomic_store_explicit(&run->dir[ci], NULL, memory_order_relaxed);
}

static void series_begin(lg_run_t *run, lg_scenario_t scenario, int accuracy)
{
    size_t i;

    run->scenario = scenario;
    run->accuracy = accuracy;
    run->first_seq = run->seq;
    run->n_chunks = 0;
    atomic_store(&run->issued_hi, run->seq);
    atomic_store(&run->completed, 0);
    atomic_store(&run->failed, 0);
    atomic_store(&run->digest_bad, 0);
    atomic_store(&run->q_remaining, 0);
    atomic_store(&run->max_done_rel, 0);
    for (i = 0; i < E__COUNT; i++)
        atomic_store(&run->err_count[i], 0);
    lg__hist_reset(&run->hist);
    atomic_store(&run->closed, 0);
}

/* No completion may touch the slots after this returns. */
static void series_close(lg_run_t *run)
{
    size_t i;

    atomic_store(&run->closed, 1);
    while (atomic_load(&run->active) > 0)
        sched_yield();
    for (i = 0; i < E__COUNT; i++) {
        uint64_t n = atomic_load(&run->err_count[i]);

        if (n > ERR_LOG_LIMIT)
            LG_DMSG(&run->dlog,
                    "%" PRIu64 " more errors like \"%s\" were counted in num_errors but not logged "
                    "one by one",
                    n - ERR_LOG_LIMIT, err_names[i]);
    }
    tok_clear(run);
}

/* Records one sample in its slot and fills its lg_sample_t. */
static int record_sample(lg_run_t *run, uint64_t seq, uint32_t idx, int64_t sched_rel,
                         lg_sample_t *s)
{
    uint64_t o = seq - run->first_seq;
    chunk_t *c = chunk_get(run, (size_t)(o >> CHUNK_BITS));
    size_t k = (size_t)(o & CHUNK_MASK);
    lg_qsl_sample_t qs = {0};

    if (!c)
        return -ENOMEM;
    c->idx[k] = idx;
    if (c->sched)
        c->sched[k] = sched_rel;
    atomic_store_explicit(&c->lat[k], -(sched_rel + 1), memory_order_relaxed);
    if (c->ttft) {
        atomic_store_explicit(&c->ttft[k], 0, memory_order_relaxed);
        c->ntok[k] = 0;
    }
    s->id = seq;
    s->index = idx & LG__IDX_MASK;
    lg_qsl_get(run->qsl, idx & LG__IDX_MASK, &qs);
    s->data = qs.data;
    s->size = qs.size;
    s->codec = qs.codec;
    s->raw_size = qs.raw_size;
    return 0;
}

/* Hands samples [first, first + n) of the series to the SUT. A failed issue() completes them as
 * failed samples, so the run goes on and ends INVALID instead of hanging. */
static void issue_batch(lg_run_t *run, const lg_sample_t *s, size_t n)
{
    int rc;
    size_t i;

    atomic_store_explicit(&run->issued_hi, s[n - 1].id + 1, memory_order_release);
    rc = run->sut->issue(run->sut, s, n);
    if (rc >= 0)
        return;
    run_error(run, E_ISSUE, "IssueQuery of %zu samples failed: %s (%s)", n, cmn_strerror(rc),
              cmn_err_name(rc));
    for (i = 0; i < n; i++) {
        run->rbuf[i].id = s[i].id;
        run->rbuf[i].status = rc;
        run->rbuf[i].data = NULL;
        run->rbuf[i].size = 0;
        run->rbuf[i].n_tokens = 0;
    }
    lg_complete(run, run->rbuf, n);
}

/* Takes the next |n| samples of the current query, all scheduled at |sched_rel|, and issues them
 * in parts of at most LG_ISSUE_CHUNK. */
static int issue_query(lg_run_t *run, lg__gen_t *g, uint64_t n, int64_t sched_rel)
{
    while (n > 0) {
        size_t want = n > LG_ISSUE_CHUNK ? LG_ISSUE_CHUNK : (size_t)n, got, i;
        uint64_t seq0 = run->seq;

        got = lg__gen_fill(g, run->idxbuf, want);
        if (got == 0)
            return CMN_ESTATE;
        for (i = 0; i < got; i++)
            if (record_sample(run, seq0 + i, run->idxbuf[i], sched_rel, &run->sbuf[i]) < 0)
                return -ENOMEM;
        issue_batch(run, run->sbuf, got);
        n -= got;
    }
    return 0;
}

/* ---- progress ------------------------------------------------------------------------------ */

static void progress_snap(void *arg, lg__progress_snap_t *s)
{
    lg_run_t *run = arg;
    uint64_t now = cmn_now_ns();
    double rate, left = -1;

    s->phase = run->phase;
    s->elapsed_ns = now - run->t0;
    s->issued = atomic_load(&run->issued_hi) - run->first_seq;
    s->completed = atomic_load(&run->completed);
    s->p99_ns = lg__hist_quantile(&run->hist, 0.99);
    rate = s->elapsed_ns ? (double)s->completed * 1e9 / (double)s->elapsed_ns : 0;
    if (run->eta_samples && rate > 0)
        left =
            (double)(run->eta_samples > s->completed ? run->eta_samples - s->completed : 0) / rate;
    if (run->eta_min_ns)
        left = fmax(left, ((double)run->eta_min_ns - (double)s->elapsed_ns) / 1e9);
    s->eta_s = left < 0 && !run->eta_samples && !run->eta_min_ns ? -1 : fmax(left, 0);
}

/* ---- one series (IssueQueries) ------------------------------------------------------------- */

typedef struct {
    int64_t last_sched_rel, last_issue_rel;
    uint64_t last_q_first, queries_issued;
    int ran_out;
} issue_state_t;

/* The max_query_count and max_duration ends every scenario shares, checked after each issue in
 * the official order. Returns 1 when the series must stop (an error, as officially). */
static int limit_reached(lg_run_t *run, const lg_effective_settings_t *s, uint64_t queries_issued,
                         int64_t now_rel)
{
    if (s->max_query_count != 0 && queries_issued >= s->max_query_count) {
        LG_DERR(&run->dlog, "error_runtime",
                "IssueQueryThread 0 Ending early: Max query count reached. query_count %" PRIu64,
                queries_issued);
        return 1;
    }
    if (s->max_duration_ms != 0 && (uint64_t)now_rel > s->max_duration_ms * 1000000u) {
        LG_DERR(&run->dlog, "error_runtime",
                "IssueQueryThread 0 Ending early: Max test duration reached. duration_ns %" PRId64,
                now_rel);
        return 1;
    }
    return 0;
}

/* SingleStream and MultiStream issue each query when the previous one has completed, scheduled
 * at that moment; Offline issues its one query, scheduled at the start. */
static void issue_sequential(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                             issue_state_t *st)
{
    int offline = s->scenario == LG_OFFLINE;
    int64_t delta;
    uint64_t n;

    st->ran_out = 1;
    while (lg__gen_next(g, &delta, &n)) {
        int64_t now_rel;

        if (st->queries_issued > 0 && !offline)
            wait_query(run);
        now_rel = (int64_t)(cmn_now_ns() - run->t0);
        atomic_store(&run->q_remaining, (int64_t)n);
        st->last_q_first = run->seq;
        st->last_sched_rel = offline ? 0 : now_rel;
        st->last_issue_rel = now_rel;
        if (issue_query(run, g, n, st->last_sched_rel) < 0)
            break;
        st->queries_issued++;
        if (run->accuracy)
            continue;
        if (st->queries_issued >= s->min_query_count &&
            (uint64_t)now_rel >= s->target_duration_ms * 1000000u) {
            LG_DMSG(&run->dlog, "Ending naturally: Minimum query count and test duration met.");
            st->ran_out = 0;
            break;
        }
        if (limit_reached(run, s, st->queries_issued, now_rel)) {
            st->ran_out = 0;
            break;
        }
    }
}

static void issue_server(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                         issue_state_t *st, uint64_t spin_ns)
{
    int64_t delta, next_delta = 0;
    uint64_t n;
    uint32_t next_idx = 0;
    uint64_t next_seq = 0;
    int have_next = 0, more = 1;

    while (more) {
        size_t batch = 0;
        int64_t now_rel;

        if (!have_next) {
            if (!lg__gen_next(g, &next_delta, &n))
                break;
            next_seq = run->seq;
            if (lg__gen_fill(g, &next_idx, 1) != 1)
                break;
        }
        delta = next_delta;
        have_next = 0;
        cmn_sleep_until_ns(run->t0 + (uint64_t)delta, spin_ns);
        now_rel = (int64_t)(cmn_now_ns() - run->t0);
        if (record_sample(run, next_seq, next_idx, delta, &run->sbuf[batch++]) < 0)
            break;
        st->last_sched_rel = delta;
        /* Coalescing: every later query already due joins this IssueQuery with its own
         * scheduled time. */
        while (s->requested.server_coalesce_queries && batch < LG_ISSUE_CHUNK) {
            if (!lg__gen_next(g, &next_delta, &n)) {
                more = 0;
                break;
            }
            next_seq = run->seq;
            if (lg__gen_fill(g, &next_idx, 1) != 1) {
                more = 0;
                break;
            }
            if (now_rel < next_delta) {
                have_next = 1;
                break;
            }
            if (record_sample(run, next_seq, next_idx, next_delta, &run->sbuf[batch++]) < 0) {
                more = 0;
                break;
            }
            st->last_sched_rel = next_delta;
        }
        st->last_q_first = run->sbuf[batch - 1].id;
        st->last_issue_rel = now_rel;
        issue_batch(run, run->sbuf, batch);
        st->queries_issued += batch;
        if (run->accuracy)
            continue;
        if (s->max_async_queries != 0) {
            uint64_t outstanding = st->queries_issued - atomic_load(&run->completed);

            if (outstanding > s->max_async_queries) {
                LG_DERR(
                    &run->dlog, "error_runtime",
                    "IssueQueryThread 0 Ending early: Too many outstanding queries. issued %" PRIu64
                    " outstanding %" PRIu64,
                    st->queries_issued, outstanding);
                break;
            }
        }
        if (limit_reached(run, s, st->queries_issued, now_rel))
            break;
    }
    /* A query generated for coalescing but not issued keeps its place in the official trace;
     * lg__gen_finish() accounts for it. */
}

static void power_time(char *buf, size_t len, uint64_t realtime_ns)
{
    time_t t = (time_t)(realtime_ns / 1000000000u);
    struct tm tm;
    char date[32];

    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%m-%d-%Y %H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03u", date, (unsigned)(realtime_ns % 1000000000u / 1000000u));
}

/* Moves the slots into flat arrays (freeing each chunk once copied, so the peak is one copy). */
/* ---- latency intervals ------------------------------------------------------------------ */

/* The samples of one interval of scheduled time, gathered while collect() walks them in issue
 * order (scheduled times only grow along it), written as one CSV line when the next begins. */
typedef struct {
    FILE *f;
    int64_t width_ns;
    int64_t cur; /* interval index of the samples in v */
    int64_t *v;
    size_t n, cap;
    uint64_t lost; /* samples of this interval that never completed */
    int oom;
} ivl_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void ivl_flush(ivl_t *iv)
{
    static const double p[4] = {0.50, 0.90, 0.99, 0.999};
    int i;

    if (!iv->n)
        return;
    qsort(iv->v, iv->n, sizeof(*iv->v), cmp_i64);
    fprintf(iv->f, "%" PRId64 ",%zu,%" PRIu64, iv->cur * iv->width_ns / 1000000, iv->n, iv->lost);
    for (i = 0; i < 4; i++) {
        size_t k = (size_t)((double)iv->n * p[i]); /* the summary's percentile index */
        fprintf(iv->f, ",%" PRId64, iv->v[k < iv->n ? k : iv->n - 1]);
    }
    fprintf(iv->f, ",%" PRId64 "\n", iv->v[iv->n - 1]);
    iv->n = 0;
    iv->lost = 0;
}

static void ivl_add(ivl_t *iv, int64_t sched, int64_t lat, int lost)
{
    int64_t b;

    if (!iv->f || iv->oom)
        return;
    b = sched / iv->width_ns;
    if (iv->n && b != iv->cur)
        ivl_flush(iv);
    iv->cur = b;
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? 2 * iv->cap : 4096;
        int64_t *v = realloc(iv->v, cap * sizeof(*v));

        if (!v) {
            iv->oom = 1;
            return;
        }
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = lat;
    iv->lost += (uint64_t)lost;
}

static int collect(lg_run_t *run, const lg_effective_settings_t *s, const issue_state_t *st,
                   int64_t end_rel, FILE *csv, ivl_t *iv, lg__perf_t *pr)
{
    uint64_t n = atomic_load(&run->issued_hi) - run->first_seq, i;
    int64_t max_lat = 0, final_done = 0;

    memset(pr, 0, sizeof(*pr));
    pr->n = (size_t)n;
    pr->lat = malloc((n ? n : 1) * sizeof(*pr->lat));
    if (run->use_tokens) {
        pr->ttft = malloc((n ? n : 1) * sizeof(*pr->ttft));
        pr->tpot = malloc((n ? n : 1) * sizeof(*pr->tpot));
        pr->ntok = malloc((n ? n : 1) * sizeof(*pr->ntok));
    }
    if (!pr->lat || (run->use_tokens && (!pr->ttft || !pr->tpot || !pr->ntok)))
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        chunk_t *c = atomic_load_explicit(&run->dir[i >> CHUNK_BITS], memory_order_relaxed);
        size_t k = (size_t)(i & CHUNK_MASK);
        int64_t v = atomic_load_explicit(&c->lat[k], memory_order_relaxed);

        if (csv && c->sched)
            fprintf(csv, "%" PRIu64 ",%" PRId64 ",%" PRId64 "\n", run->first_seq + i, c->sched[k],
                    v < 0 ? -1 : v);
        int never = v < 0;

        if (never) {
            /* Never completed (drain timeout): a lower bound of its latency. */
            pr->lost++;
            v = end_rel + v + 1;
        }
        if (iv && c->sched)
            ivl_add(iv, c->sched[k], v, never);
        pr->lat[i] = v;
        if (v > max_lat)
            max_lat = v;
        if (run->first_seq + i >= st->last_q_first && v > final_done)
            final_done = v;
        if (run->use_tokens) {
            int64_t t = c->ttft ? atomic_load_explicit(&c->ttft[k], memory_order_relaxed) : 0;
            int64_t nt = c->ntok ? c->ntok[k] : 0;

            /* A missing first token (an error) counts as the whole latency, the cautious side. */
            pr->ttft[i] = t > 0 ? t - 1 : v;
            pr->ntok[i] = nt;
            pr->tpot[i] = nt > 1 ? (v - pr->ttft[i]) / (nt - 1) : 0;
        }
        if (k == CHUNK_MASK)
            chunk_free(run, (size_t)(i >> CHUNK_BITS));
    }
    for (i = 0; i < run->n_chunks; i++)
        chunk_free(run, (size_t)i);
    run->n_chunks = 0;
    if (iv && iv->f)
        ivl_flush(iv);

    if (s->scenario == LG_MULTI_STREAM && st->queries_issued > 0) {
        uint64_t spq = n / st->queries_issued, q;

        pr->nq = (size_t)st->queries_issued;
        pr->qlat = malloc(pr->nq * sizeof(*pr->qlat));
        if (!pr->qlat)
            return -ENOMEM;
        /* A query's latency is its last sample's: they share the scheduled time. */
        for (q = 0; q < st->queries_issued; q++) {
            int64_t m = 0;

            for (i = q * spq; i < (q + 1) * spq && i < n; i++)
                m = pr->lat[i] > m ? pr->lat[i] : m;
            pr->qlat[q] = m;
        }
    }
    pr->queries_issued = st->queries_issued;
    pr->max_latency = (double)max_lat / 1e9;
    pr->final_query_scheduled_time = (double)st->last_sched_rel / 1e9;
    pr->final_query_issued_time = (double)st->last_issue_rel / 1e9;
    pr->final_query_all_samples_done_time = (double)(st->last_sched_rel + final_done) / 1e9;
    pr->failed = atomic_load(&run->failed);
    pr->digest_bad = atomic_load(&run->digest_bad);
    return 0;
}

static int issue_series(lg_run_t *run, const lg_effective_settings_t *s, int accuracy,
                        const uint32_t *loaded, size_t L, size_t end, lg__perf_t *pr,
                        cmn_errbuf_t *eb)
{
    lg__gen_t g;
    lg__mt_t off_rng;
    issue_state_t st = {0};
    double offset, prob;
    uint64_t expected, minimum, start_real, issued;
    int64_t end_rel;
    lg__progress_t *prog = NULL;
    char p0[64], p1[64];
    int rc, lost;

    memset(pr, 0, sizeof(*pr));
    /* The accuracy-log sampling of performance mode (3.4). */
    lg__mt_seed(&off_rng, s->accuracy_log_rng_seed);
    offset = lg__canonical(&off_rng);
    prob = s->accuracy_log_probability;
    expected = (uint64_t)fmin(fmax(0, s->target_qps * (double)s->min_duration_ms / 1000), 1e19);
    minimum = s->min_query_count * s->samples_per_query;
    if (s->scenario != LG_OFFLINE)
        expected *= s->samples_per_query;
    else
        minimum = s->min_sample_count;
    if (expected < minimum)
        expected = minimum;
    if (s->accuracy_log_sampling_target > 0)
        prob = (double)s->accuracy_log_sampling_target / (double)expected;

    series_begin(run, s->scenario, accuracy);
    rc = lg__gen_init(&g, s, accuracy, loaded, L, end, &run->acc_rng, &run->seq, offset, prob, eb);
    if (rc < 0) {
        LG_DERR(&run->dlog, "error_invalid_test_settings", "%s", eb ? eb->msg : "invalid settings");
        return rc;
    }

    run->phase = accuracy ? "accuracy" : lg_scenario_name(s->scenario);
    run->eta_samples = accuracy ? L : s->scenario == LG_OFFLINE ? g.spq : 0;
    run->eta_min_ns = accuracy ? 0 : s->min_duration_ms * 1000000u;
    start_real = cmn_realtime_ns();
    run->t0 = cmn_now_ns();
    if (run->progress_on)
        prog = lg__progress_start(stderr, progress_snap, run);

    if (s->scenario == LG_SERVER) {
        /* The spin buys microsecond issue precision, but at a high rate it would spin all the
         * time and take a core the SUT (the QDL and network threads) needs: spin at most a tenth
         * of the mean gap between queries. */
        uint64_t spin = run->ls->spin_ns;
        if (s->target_qps > 0 && spin > (uint64_t)(1e8 / s->target_qps))
            spin = (uint64_t)(1e8 / s->target_qps);
        issue_server(run, s, &g, &st, spin);
    } else
        issue_sequential(run, s, &g, &st);
    if (run->sut->flush)
        run->sut->flush(run->sut);
    if (!accuracy && st.ran_out && s->scenario != LG_SERVER)
        LG_DERR(
            &run->dlog, "error_runtime",
            "Ending early: Ran out of generated queries to issue before the minimum query count "
            "and test duration were reached. Please update the relevant expected latency or "
            "target qps in the TestSettings so they are more accurate.");

    issued = atomic_load(&run->issued_hi) - run->first_seq;
    lost = wait_total(run, issued, run->ls->drain_timeout_ms);
    end_rel = (int64_t)(cmn_now_ns() - run->t0);
    lg__progress_stop(prog);
    series_close(run);
    if (lost)
        LG_DERR(&run->dlog, "error_runtime",
                "%" PRIu64 " samples were still outstanding %" PRIu64
                " ms after the last issue; counted as lost",
                issued - atomic_load(&run->completed), run->ls->drain_timeout_ms);

    /* The official loop runs to its end before issuing; run it now for the counters and the
     * generated_* values. */
    lg__gen_finish(&g);
    LG_DU64(&run->dlog, "generated_query_count", g.count);
    LG_DU64(&run->dlog, "generated_samples_per_query", g.spq);
    LG_DI64(&run->dlog, "generated_query_duration", g.ts);
    lg__gen_free(&g);

    {
        FILE *csv = NULL;
        ivl_t iv = {0};

        if (run->ls->latency_interval_ms && !accuracy) {
            char path[4200];

            snprintf(path, sizeof(path), "%s/%slatency_intervals%s.csv", run->ls->outdir,
                     run->ls->prefix, run->ls->suffix);
            iv.f = fopen(path, run->ivl_started ? "a" : "w");
            iv.width_ns = (int64_t)run->ls->latency_interval_ms * 1000000;
            if (!iv.f)
                LG_DERR(&run->dlog, "error_runtime", "cannot write %s: %s", path, strerror(errno));
            else if (!run->ivl_started)
                fputs("interval_start_ms,samples,lost,p50_ns,p90_ns,p99_ns,p99_9_ns,max_ns\n",
                      iv.f);
            run->ivl_started = 1;
        }
        if (run->ls->sample_latencies && !accuracy) {
            char path[4200];
            /* The first performance series creates the file; later ones (find-peak) append. */
            snprintf(path, sizeof(path), "%s/%ssample_latencies%s.csv", run->ls->outdir,
                     run->ls->prefix, run->ls->suffix);
            csv = fopen(path, run->csv_started ? "a" : "w");
            if (!csv)
                LG_DERR(&run->dlog, "error_runtime", "cannot write %s: %s", path, strerror(errno));
            else if (!run->csv_started)
                fputs("sample_seq,scheduled_ns,latency_ns\n", csv);
            run->csv_started = 1;
        }
        rc = collect(run, s, &st, end_rel, csv, &iv, pr);
        if (csv && fclose(csv) != 0)
            LG_DERR(&run->dlog, "error_runtime", "writing the sample latencies failed: %s",
                    strerror(errno));
        if (iv.oom)
            LG_DERR(&run->dlog, "error_runtime",
                    "out of memory for the latency intervals; the file is incomplete");
        if (iv.f && fclose(iv.f) != 0)
            LG_DERR(&run->dlog, "error_runtime", "writing the latency intervals failed: %s",
                    strerror(errno));
        free(iv.v);
    }
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory collecting %" PRIu64 " latencies", issued);
    power_time(p0, sizeof(p0), start_real);
    power_time(p1, sizeof(p1), start_real + (uint64_t)atomic_load(&run->max_done_rel));
    LG_DSTR(&run->dlog, "power_begin", p0);
    LG_DSTR(&run->dlog, "power_end", p1);
    return 0;
}

/* ---- loadable sets and modes --------------------------------------------------------------- */

typedef struct {
    uint32_t *v;
    size_t n, end;
} set_t;

/* GenerateLoadableSets: a shuffle of [0, min(count, total)) cut into sets of
 * performance_sample_count, each padded in MultiStream with its first spq - 1 samples. */
static int loadable_sets(lg_run_t *run, const lg_effective_settings_t *s, uint64_t count,
                         set_t **out, size_t *n_out)
{
    size_t total = lg_qsl_total_count(run->qsl), n = (size_t)(count < total ? count : total);
    size_t set_size = (size_t)s->performance_sample_count, pad, nsets, i, j;
    uint32_t *order;
    set_t *sets;
    int rc;

    pad = s->scenario == LG_MULTI_STREAM && s->samples_per_query > 0
              ? (size_t)s->samples_per_query - 1
              : 0;
    rc = lg__loadable_order(s->qsl_rng_seed, n, &order);
    if (rc < 0)
        return rc;
    if (set_size == 0)
        set_size = n ? n : 1;
    nsets = n ? (n + set_size - 1) / set_size : 0;
    sets = calloc(nsets ? nsets : 1, sizeof(*sets));
    if (!sets) {
        free(order);
        return -ENOMEM;
    }
    for (i = 0; i < nsets; i++) {
        size_t len = n - i * set_size < set_size ? n - i * set_size : set_size;

        sets[i].v = malloc((len + pad) * sizeof(uint32_t));
        if (!sets[i].v) {
            while (i-- > 0)
                free(sets[i].v);
            free(sets);
            free(order);
            return -ENOMEM;
        }
        memcpy(sets[i].v, order + i * set_size, len * sizeof(uint32_t));
        /* Padding copies the set's first elements, so a query may start anywhere in it. */
        for (j = 0; j < pad; j++)
            sets[i].v[len + j] = sets[i].v[j % len];
        sets[i].n = len + pad;
        sets[i].end = len;
    }
    free(order);
    *out = sets;
    *n_out = nsets;
    return 0;
}

static void free_sets(set_t *sets, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(sets[i].v);
    free(sets);
}

static int load_set(lg_run_t *run, const set_t *set, cmn_errbuf_t *eb)
{
    int rc;

    lg__dlog_u32_list(&run->dlog, "loaded_qsl_set", set->v, set->n, LG__FILE, __LINE__);
    rc = lg_qsl_load(run->qsl, set->v, set->n, eb);
    if (rc < 0)
        LG_DERR(&run->dlog, "error_runtime", "LoadSamplesToRam failed: %s", eb ? eb->msg : "");
    return rc;
}

static void refresh_name(lg_run_t *run)
{
    char name[sizeof(run->sut_name)], err[256];
    uint64_t d;

    /* As officially, each PerformanceSummary asks the SUT for its name again. */
    if (run->sut->name(run->sut, name, sizeof(name), &d, err, sizeof(err)) == 0)
        snprintf(run->sut_name, sizeof(run->sut_name), "%s", name);
}

static void report(lg_run_t *run, const lg_effective_settings_t *s, lg__perf_t *pr,
                   lg_result_t *res)
{
    refresh_name(run);
    lg__perf_report(run->sut_name, s, pr, &run->dlog, run->summary, run->ls->copy_summary_to_stdout,
                    res);
    LG_DU64(&run->dlog, "num_errors", error_total(run));
}

static void add_sample_counts(lg_result_t *res, const lg__perf_t *pr)
{
    res->failed_samples += pr->failed;
    res->lost_samples += pr->lost;
    res->digest_mismatches += pr->digest_bad;
    res->samples_issued += pr->n;
}

static int run_accuracy(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                        cmn_errbuf_t *eb)
{
    set_t *sets;
    size_t nsets, i;
    int rc;

    LG_DMSG(&run->dlog, "Starting accuracy mode");
    rc = loadable_sets(run, s, s->accuracy_sample_count, &sets, &nsets);
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory for the loadable sets");
    for (i = 0; i < nsets && rc == 0; i++) {
        lg__perf_t pr;

        rc = load_set(run, &sets[i], eb);
        if (rc < 0)
            break;
        rc = issue_series(run, s, 1, sets[i].v, sets[i].n, sets[i].end, &pr, eb);
        if (rc == 0)
            add_sample_counts(res, &pr);
        lg__perf_free(&pr);
        lg_qsl_unload(run->qsl, sets[i].v, sets[i].n);
    }
    free_sets(sets, nsets);
    res->accuracy_ran = rc == 0;
    return rc;
}

static void check_clocks(lg_run_t *run, uint64_t pc_ns, uint64_t sc_ns)
{
    double ratio;

    /* Reading the two clocks is a few microseconds apart, which is more than 0.1% of a short
     * run; the official check compares whole milliseconds and has the same blind spot. */
    if (pc_ns < 1000000000u || sc_ns < 1000000000u)
        return;
    ratio = (double)pc_ns / (double)sc_ns;
    if (ratio > 1.01 || ratio < 0.99)
        LG_DERR(&run->dlog, "error_runtime",
                "PerfClock and system_clock differ by more than 1%%!  pc_sc_ratio: %g", ratio);
    else if (ratio > 1.001 || ratio < 0.999)
        LG_DWARN(&run->dlog, "warning_generic_message",
                 "PerfClock and system_clock differ by more than 0.1%%!  pc_sc_ratio: %g", ratio);
}

static int run_performance(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                           cmn_errbuf_t *eb)
{
    set_t *sets;
    size_t nsets;
    lg__perf_t pr;
    uint64_t pc0, sc0, pc1, sc1;
    int rc;

    LG_DMSG(&run->dlog, "Starting performance mode");
    rc = loadable_sets(run, s, s->performance_sample_count, &sets, &nsets);
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory for the loadable sets");
    if (nsets == 0) {
        free_sets(sets, nsets);
        return cmn_errf(eb, CMN_ECONFIG, "the performance sample set is empty");
    }
    rc = load_set(run, &sets[0], eb);
    if (rc < 0)
        goto out;
    pc0 = cmn_now_ns();
    sc0 = cmn_realtime_ns();
    if (s->print_timestamps)
        printf("Loadgen :: Perf mode start. system_clock Timestamp = %llu\n",
               (unsigned long long)(sc0 / 1000000000u));
    rc = issue_series(run, s, 0, sets[0].v, sets[0].n, sets[0].end, &pr, eb);
    pc1 = cmn_now_ns();
    sc1 = cmn_realtime_ns();
    if (rc == 0) {
        if (s->print_timestamps) {
            printf("Loadgen :: Perf mode stop. systme_clock Timestamp = %llu\n",
                   (unsigned long long)(sc1 / 1000000000u));
            printf("Loadgen :: PerfClock Perf duration = %llums\n",
                   (unsigned long long)((pc1 - pc0) / 1000000u));
            printf("Loadgen :: system_clock Perf duration = %llums\n",
                   (unsigned long long)((sc1 - sc0) / 1000000u));
            printf("Loadgen :: PerfClock/system_clock ratio = %.4f\n",
                   (double)(pc1 - pc0) / (double)(sc1 - sc0));
            fflush(stdout);
        }
        check_clocks(run, pc1 - pc0, sc1 - sc0);
        add_sample_counts(res, &pr);
        report(run, s, &pr, res);
    }
    lg__perf_free(&pr);
    lg_qsl_unload(run->qsl, sets[0].v, sets[0].n);
out:
    free_sets(sets, nsets);
    return rc;
}

/* One performance run at the given settings for FindPeakPerformance (with its own set load when
 * |load| is set, as FindBoundaries does). */
static int peak_run(lg_run_t *run, const lg_effective_settings_t *s, const set_t *set, int load,
                    lg__perf_t *pr, lg_result_t *res, cmn_errbuf_t *eb)
{
    int rc;

    if (load && (rc = load_set(run, set, eb)) < 0)
        return rc;
    rc = issue_series(run, s, 0, set->v, set->n, set->end, pr, eb);
    if (rc == 0)
        add_sample_counts(res, pr);
    if (load)
        lg_qsl_unload(run->qsl, set->v, set->n);
    return rc;
}

static int peak_finished(const lg_effective_settings_t *l, const lg_effective_settings_t *u)
{
    uint8_t precision = (uint8_t)l->requested.server_find_peak_qps_decimals_of_precision;
    double lf = floor(l->target_qps * pow(10, precision));
    double uf = floor(u->target_qps * pow(10, precision));

    return lf + 1 >= uf;
}

static int run_find_peak(lg_run_t *run, const lg_effective_settings_t *base, lg_result_t *res,
                         cmn_errbuf_t *eb)
{
    lg_effective_settings_t l = *base, u, m;
    lg__perf_t lp = {0}, up = {0}, mp = {0};
    set_t *sets = NULL;
    size_t nsets = 0;
    char rec[256];
    int rc;

    LG_DMSG(&run->dlog, "Starting FindPeakPerformance mode");
    if (base->scenario != LG_SERVER) {
        LG_DERR(&run->dlog, "error_invalid_config",
                "Finding peak performance is only supported in Server scenarios.");
        return 0;
    }
    LG_DMSG(&run->dlog, "FindPeakPerformance: Check validity of the base settings field: %f",
            base->target_qps);
    rc = loadable_sets(run, base, base->performance_sample_count, &sets, &nsets);
    if (rc < 0 || nsets == 0) {
        free_sets(sets, nsets);
        return cmn_errf(eb, rc < 0 ? rc : CMN_ECONFIG, "no performance sample set");
    }
    rc = peak_run(run, &l, &sets[0], 1, &lp, res, eb);
    if (rc < 0)
        goto out;
    if (!lg__perf_constraints_met(&l, &lp, rec, sizeof(rec))) {
        LG_DERR(
            &run->dlog, "error_runtime",
            "FindPeakPerformance: Initial lower bound does not satisfy performance constraints, "
            "msg: %s",
            rec);
        report(run, &l, &lp, res);
        goto out;
    }
    /* FindBoundaries: widen the rate until a run fails. */
    for (;;) {
        u = l;
        u.target_qps = l.target_qps * (1 + l.requested.server_find_peak_qps_boundary_step_size);
        LG_DMSG(&run->dlog, "FindBoundaries: Checking fields [%f, %f)", l.target_qps, u.target_qps);
        rc = peak_run(run, &u, &sets[0], 1, &up, res, eb);
        if (rc < 0)
            goto out;
        if (!lg__perf_constraints_met(&u, &up, rec, sizeof(rec)))
            break;
        lg__perf_free(&lp);
        lp = up;
        memset(&up, 0, sizeof(up));
        l = u;
    }
    LG_DMSG(&run->dlog, "FindPeakPerformance: Found boundaries: [%f, %f)", l.target_qps,
            u.target_qps);
    rc = load_set(run, &sets[0], eb);
    if (rc < 0)
        goto out;
    while (!peak_finished(&l, &u)) {
        m = l;
        m.target_qps = l.target_qps + (u.target_qps - l.target_qps) / 2;
        LG_DMSG(&run->dlog,
                "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [%f, %f): %f",
                l.target_qps, u.target_qps, m.target_qps);
        rc = peak_run(run, &m, &sets[0], 0, &mp, res, eb);
        if (rc < 0)
            break;
        if (lg__perf_constraints_met(&m, &mp, rec, sizeof(rec))) {
            lg__perf_free(&lp);
            lp = mp;
            l = m;
        } else {
            lg__perf_free(&up);
            up = mp;
            u = m;
        }
        memset(&mp, 0, sizeof(mp));
    }
    if (rc == 0) {
        LG_DMSG(&run->dlog, "FindPeakPerformance: Found peak performance field: %f", l.target_qps);
        report(run, &l, &lp, res);
    }
    lg_qsl_unload(run->qsl, sets[0].v, sets[0].n);
out:
    lg__perf_free(&lp);
    lg__perf_free(&up);
    lg__perf_free(&mp);
    free_sets(sets, nsets);
    return rc;
}

/* ---- settings logging ---------------------------------------------------------------------- */

static void log_requested(lg__dlog_t *d, const lg_test_settings_t *s)
{
    LG_DSTR(d, "requested_scenario", lg_scenario_name(s->scenario));
    LG_DSTR(d, "requested_test_mode", lg_mode_name(s->mode));
    switch (s->scenario) {
    case LG_SINGLE_STREAM:
        LG_DF64(d, "requested_single_stream_expected_latency_ns",
                s->single_stream_expected_latency_ns);
        LG_DF64(d, "requested_single_stream_target_latency_percentile",
                s->single_stream_target_latency_percentile);
        break;
    case LG_MULTI_STREAM:
        LG_DF64(d, "requested_multi_stream_expected_latency_ns",
                s->multi_stream_expected_latency_ns);
        LG_DF64(d, "requested_multi_stream_target_latency_percentile",
                s->multi_stream_target_latency_percentile);
        LG_DU64(d, "requested_multi_stream_samples_per_query", s->multi_stream_samples_per_query);
        break;
    case LG_SERVER:
        LG_DF64(d, "requested_server_target_qps", s->server_target_qps);
        LG_DU64(d, "requested_server_target_latency_ns", s->server_target_latency_ns);
        LG_DF64(d, "requested_server_target_latency_percentile",
                s->server_target_latency_percentile);
        LG_DBOOL(d, "requested_server_coalesce_queries", s->server_coalesce_queries);
        LG_DI64(d, "requested_server_find_peak_qps_decimals_of_precision",
                s->server_find_peak_qps_decimals_of_precision);
        LG_DF64(d, "requested_server_find_peak_qps_boundary_step_size",
                s->server_find_peak_qps_boundary_step_size);
        LG_DU64(d, "requested_server_max_async_queries", s->server_max_async_queries);
        LG_DU64(d, "requested_server_num_issue_query_threads", s->server_num_issue_query_threads);
        break;
    case LG_OFFLINE:
        LG_DF64(d, "requested_offline_expected_qps", s->offline_expected_qps);
        break;
    }
    LG_DU64(d, "requested_min_duration_ms", s->min_duration_ms);
    LG_DU64(d, "requested_max_duration_ms", s->max_duration_ms);
    LG_DU64(d, "requested_min_query_count", s->min_query_count);
    LG_DU64(d, "requested_max_query_count", s->max_query_count);
    LG_DU64(d, "requested_qsl_rng_seed", s->qsl_rng_seed);
    LG_DU64(d, "requested_sample_index_rng_seed", s->sample_index_rng_seed);
    LG_DU64(d, "requested_schedule_rng_seed", s->schedule_rng_seed);
    LG_DU64(d, "requested_accuracy_log_rng_seed", s->accuracy_log_rng_seed);
    LG_DF64(d, "requested_accuracy_log_probability", s->accuracy_log_probability);
    LG_DU64(d, "requested_accuracy_log_sampling_target", s->accuracy_log_sampling_target);
    LG_DBOOL(d, "requested_print_timestamps", s->print_timestamps);
    LG_DBOOL(d, "requested_performance_issue_unique", s->performance_issue_unique);
    LG_DBOOL(d, "requested_performance_issue_same", s->performance_issue_same);
    LG_DU64(d, "requested_performance_issue_same_index", s->performance_issue_same_index);
    LG_DU64(d, "requested_performance_sample_count_override", s->performance_sample_count_override);
    LG_DU64(d, "requested_accuracy_sample_count_override", s->accuracy_sample_count_override);
    LG_DBOOL(d, "requested_sample_concatenate_permutation", s->sample_concatenate_permutation);
    if (s->use_token_latencies) {
        LG_DBOOL(d, "requested_use_token_latencies", s->use_token_latencies);
        if (s->scenario != LG_OFFLINE) {
            LG_DU64(d, "requested_server_ttft_latency", s->server_ttft_latency);
            LG_DU64(d, "requested_server_tpot_latency", s->server_tpot_latency);
        }
    }
}

static void log_effective(lg__dlog_t *d, const lg_effective_settings_t *s)
{
    LG_DSTR(d, "effective_scenario", lg_scenario_name(s->scenario));
    LG_DSTR(d, "effective_test_mode", lg_mode_name(s->mode));
    LG_DU64(d, "effective_samples_per_query", s->samples_per_query);
    LG_DF64(d, "effective_target_qps", s->target_qps);
    LG_DI64(d, "effective_target_latency_ns", s->target_latency_ns);
    LG_DF64(d, "effective_target_latency_percentile", s->target_latency_percentile);
    LG_DU64(d, "effective_max_async_queries", s->max_async_queries);
    LG_DU64(d, "effective_target_duration_ms", s->target_duration_ms);
    LG_DU64(d, "effective_min_duration_ms", s->min_duration_ms);
    LG_DU64(d, "effective_max_duration_ms", s->max_duration_ms);
    LG_DU64(d, "effective_min_query_count", s->min_query_count);
    LG_DU64(d, "effective_max_query_count", s->max_query_count);
    LG_DU64(d, "effective_min_sample_count", s->min_sample_count);
    LG_DU64(d, "effective_qsl_rng_seed", s->qsl_rng_seed);
    LG_DU64(d, "effective_sample_index_rng_seed", s->sample_index_rng_seed);
    LG_DU64(d, "effective_schedule_rng_seed", s->schedule_rng_seed);
    LG_DU64(d, "effective_accuracy_log_rng_seed", s->accuracy_log_rng_seed);
    LG_DF64(d, "effective_accuracy_log_probability", s->accuracy_log_probability);
    LG_DU64(d, "effective_accuracy_log_sampling_target", s->accuracy_log_sampling_target);
    LG_DBOOL(d, "effective_print_timestamps", s->print_timestamps);
    LG_DBOOL(d, "effective_performance_issue_unique", s->performance_issue_unique);
    LG_DBOOL(d, "effective_performance_issue_same", s->performance_issue_same);
    LG_DU64(d, "effective_performance_issue_same_index", s->performance_issue_same_index);
    LG_DU64(d, "effective_performance_sample_count", s->performance_sample_count);
    LG_DU64(d, "effective_accuracy_sample_count", s->accuracy_sample_count);
    LG_DBOOL(d, "effective_sample_concatenate_permutation", s->sample_concatenate_permutation);
}

static void log_msgs(lg__dlog_t *d, const lg_msgs_t *m)
{
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->n; i++)
        lg__dlog_str(d, m->m[i].is_error ? LG__ERR : LG__WARN, m->m[i].key, m->m[i].text, LG__FILE,
                     __LINE__);
    if (m->dropped)
        lg__dlog_strf(d, LG__ERR, "error_invalid_config", LG__FILE, __LINE__,
                      "%zu more configuration messages were dropped", m->dropped);
}

/* ---- StartTest ----------------------------------------------------------------------------- */

void lg_log_settings_init(lg_log_settings_t *ls)
{
    memset(ls, 0, sizeof(*ls));
    ls->outdir = ".";
    ls->prefix = "mlperf_log_";
    ls->suffix = "";
    ls->audit_config = "audit.config";
    ls->progress = LG_PROGRESS_AUTO;
    ls->spin_ns = 30000;
    ls->wait_spin_ns = 150000;
}

/* The official test_datetime ("%FT%TZ" of local time, the Z notwithstanding), or with |zone| == 0
 * the datetime prefix of the log names. */
static void local_datetime(char *buf, size_t len, int zone)
{
    time_t t = time(NULL);
    struct tm tm;

    localtime_r(&t, &tm);
    if (zone)
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
}

static void trailer(lg_run_t *run)
{
    uint64_t w = atomic_load(&run->dlog.warnings), e = error_total(run);
    char text[256];
    size_t n = 0;

    if (w == 0)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\nNo warnings encountered during test.\n");
    else if (w == 1)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\n1 warning encountered. See detailed log.\n");
    else
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\n%" PRIu64 " warnings encountered. See detailed log.\n", w);
    if (e == 0)
        snprintf(text + n, sizeof(text) - n, "\nNo errors encountered during test.\n");
    else if (e == 1)
        snprintf(text + n, sizeof(text) - n, "\n1 ERROR encountered. See detailed log.\n");
    else
        snprintf(text + n, sizeof(text) - n,
                 "\n%" PRIu64 " ERRORS encountered. See detailed log.\n", e);
    if (run->summary)
        fputs(text, run->summary);
    if (run->ls->copy_summary_to_stdout) {
        fputs(text, stdout);
        fflush(stdout);
    }
}

static int open_logs(lg_run_t *run, const lg_log_settings_t *ls, cmn_errbuf_t *eb)
{
    char base[4096], path[4200], dt[64] = "";
    int rc;

    if (ls->prefix_with_datetime) {
        local_datetime(dt, sizeof(dt) - 1, 0);
        strcat(dt, "_");
    }
    snprintf(base, sizeof(base), "%s/%s%s", ls->outdir, ls->prefix, dt);
    snprintf(path, sizeof(path), "%ssummary%s.txt", base, ls->suffix);
    run->summary = fopen(path, "w");
    if (!run->summary)
        return cmn_errf(eb, -errno, "cannot create the summary %s: %s", path, strerror(errno));
    snprintf(path, sizeof(path), "%sdetail%s.txt", base, ls->suffix);
    rc = lg__dlog_open(&run->dlog, path, ls->copy_detail_to_stdout, cmn_now_ns(), eb);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof(path), "%saccuracy%s.json", base, ls->suffix);
    return lg__acclog_open(&run->acc, path, eb);
}

static int close_logs(lg_run_t *run, cmn_errbuf_t *eb, int rc)
{
    int r1 = 0, r2, r3;

    if (run->summary) {
        trailer(run);
        if (ferror(run->summary))
            r1 = -EIO;
        if (fclose(run->summary) != 0 && r1 == 0)
            r1 = -errno;
        run->summary = NULL;
    }
    r2 = lg__acclog_close(&run->acc);
    r3 = lg__dlog_close(&run->dlog);
    if (rc == 0 && (r1 || r2 || r3))
        rc = cmn_errf(eb,
                      r1   ? r1
                      : r2 ? r2
                           : r3,
                      "writing the logs in %s failed: %s", run->ls->outdir,
                      strerror(-(r1   ? r1
                                 : r2 ? r2
                                      : r3)));
    return rc;
}

/* Runs that ended with samples still outstanding. A SUT may complete those later, even after
 * lg_start_test has returned; the run stays allocated (its buffers freed, the struct marked
 * finished) so such a call finds a closed run instead of freed memory. Reachable from here, the
 * parked structs are not leaks. */
static struct parked {
    struct parked *next;
} * parked_runs;
static pthread_mutex_t parked_mu = PTHREAD_MUTEX_INITIALIZER;

static void run_free(lg_run_t *run, int park)
{
    if (!run)
        return;
    free(run->dir);
    free(run->tok);
    free(run->idxbuf);
    free(run->sbuf);
    free(run->rbuf);
    run->dir = NULL;
    run->tok = NULL;
    run->idxbuf = NULL;
    run->sbuf = NULL;
    run->rbuf = NULL;
    if (park) {
        struct parked *p = malloc(sizeof(*p) + sizeof(lg_run_t *));

        atomic_store(&run->finished, 1);
        if (p) {
            memcpy(p + 1, &run, sizeof(run));
            pthread_mutex_lock(&parked_mu);
            p->next = parked_runs;
            parked_runs = p;
            pthread_mutex_unlock(&parked_mu);
            return;
        }
    }
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    pthread_mutex_destroy(&run->tok_mu);
    free(run);
}

static lg_run_t *run_new(void)
{
    lg_run_t *run = calloc(1, sizeof(*run));
    pthread_condattr_t ca;

    if (!run)
        return NULL;
    pthread_mutex_init(&run->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&run->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&run->tok_mu, NULL);
    run->dir = calloc(DIR_SIZE, sizeof(*run->dir));
    run->tok = calloc(TOK_BUCKETS, sizeof(*run->tok));
    run->idxbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->idxbuf));
    run->sbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->sbuf));
    run->rbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->rbuf));
    if (!run->dir || !run->tok || !run->idxbuf || !run->sbuf || !run->rbuf) {
        run_free(run, 0);
        return NULL;
    }
    /* SequenceGen's accuracy-log generator is default-constructed and never seeded. */
    lg__mt_seed(&run->acc_rng, 5489u);
    return run;
}

static int file_exists(const char *path)
{
    struct stat st;

    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int lg_start_test(lg_sut_t *sut, lg_qsl_t *qsl, const lg_test_settings_t *settings,
                  const lg_log_settings_t *log, lg_result_t *res, cmn_errbuf_t *eb)
{
    lg_log_settings_t defaults;
    lg_test_settings_t ts = *settings;
    lg_effective_settings_t s;
    lg_msgs_t msgs = {0};
    lg_result_t local;
    lg_run_t *run;
    char err[256] = "", dt[64];
    uint64_t t, name_ns;
    int rc;

    if (!res)
        res = &local;
    memset(res, 0, sizeof(*res));
    if (!log) {
        lg_log_settings_init(&defaults);
        log = &defaults;
    }
    if (!sut || !sut->issue || !sut->name || !qsl)
        return cmn_errf(eb, CMN_ECONFIG,
                        "lg_start_test needs a SUT with name and issue, and a QSL");
    if ((unsigned)ts.scenario > LG_OFFLINE || (unsigned)ts.mode > LG_MODE_FIND_PEAK_PERFORMANCE)
        return cmn_errf(eb, CMN_ECONFIG, "unknown scenario or mode");
    if (ts.server_num_issue_query_threads != 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "server_num_issue_query_threads = %llu: loadgen-node issues from one "
                        "thread; only 0 is supported",
                        (unsigned long long)ts.server_num_issue_query_threads);
    run = run_new();
    if (!run)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    /* The calling thread issues the queries: with the default 50 us timer slack every Server
     * sleep would end up to 50 us late, and that lateness counts as SUT latency. */
    if (cmn_timer_slack_min() < 0)
        cmn_log_warn("cannot lower the timer slack; Server issue times may be up to 50 us late");
    run->sut = sut;
    run->qsl = qsl;
    run->ls = log;
    rc = open_logs(run, log, eb);
    if (rc < 0)
        goto fail_logs;
    run->progress_on = log->progress == LG_PROGRESS_ON ||
                       (log->progress == LG_PROGRESS_AUTO && isatty(STDERR_FILENO));
    run->verify_digest = log->verify_digest;
    if (run->verify_digest)
        lg_qsl_keep_digests(qsl, 1);

    t = cmn_now_ns();
    rc = sut->name(sut, run->sut_name, sizeof(run->sut_name), NULL, err, sizeof(err));
    name_ns = cmn_now_ns() - t;
    if (rc < 0) {
        rc = cmn_errf(eb, rc, "the SUT's Name() failed: %s", err[0] ? err : cmn_strerror(rc));
        goto fail_run;
    }
    snprintf(res->sut_name, sizeof(res->sut_name), "%s", run->sut_name);

    LG_DSTR(&run->dlog, "loadgen_version", LG_VERSION_STRING);
    LG_DSTR(&run->dlog, "loadgen_build_date_local", BUILD_DATE_LOCAL);
    LG_DSTR(&run->dlog, "loadgen_build_date_utc", BUILD_DATE_UTC);
    LG_DSTR(&run->dlog, "loadgen_git_commit_date", BUILD_GIT_COMMIT_DATE);
    LG_DSTR(&run->dlog, "loadgen_git_log_message", "commit " BUILD_GIT_COMMIT);
    LG_DSTR(&run->dlog, "loadgen_git_status_message", "NA");
    log_msgs(&run->dlog, log->msgs);
    local_datetime(dt, sizeof(dt), 1);
    LG_DSTR(&run->dlog, "test_datetime", dt);
    LG_DSTR(&run->dlog, "sut_name", run->sut_name);
    LG_DU64(&run->dlog, "get_sut_name_duration_ns", name_ns);
    LG_DSTR(&run->dlog, "qsl_name", lg_qsl_name(qsl));
    LG_DU64(&run->dlog, "qsl_reported_total_count", lg_qsl_total_count(qsl));
    LG_DU64(&run->dlog, "qsl_reported_performance_count", lg_qsl_performance_count(qsl));

    if (file_exists(log->audit_config)) {
        cmn_errbuf_t aeb;

        LG_DWARN(
            &run->dlog, "warning_generic_message",
            "Found Audit Config file (audit.config). Overriding TestSettings from audit.config "
            "file.");
        lg_test_settings_from_config(&ts, log->audit_config, "*", lg_scenario_name(ts.scenario),
                                     LG_CONF_AUDIT, &msgs, &aeb);
    }
    if (ts.test05) {
        LG_DWARN(&run->dlog, "warning_generic_message",
                 "Test05 flag detected Overriding random seeds");
        ts.mode = LG_MODE_PERFORMANCE_ONLY;
        ts.qsl_rng_seed = settings->test05_qsl_rng_seed;
        ts.sample_index_rng_seed = settings->test05_sample_index_rng_seed;
        ts.schedule_rng_seed = settings->test05_schedule_rng_seed;
    }
    lg_effective_settings(&ts, lg_qsl_performance_count(qsl), lg_qsl_total_count(qsl), &s, &msgs);
    log_msgs(&run->dlog, &msgs);
    log_requested(&run->dlog, &ts);
    log_effective(&run->dlog, &s);

    run->use_tokens = s.use_token_latencies;
    run->needs_first_token = s.scenario != LG_OFFLINE;
    __atomic_store_n(&sut->run, run, __ATOMIC_RELEASE);
    switch (s.mode) {
    case LG_MODE_SUBMISSION_RUN:
        rc = run_accuracy(run, &s, res, eb);
        if (rc == 0)
            rc = run_performance(run, &s, res, eb);
        break;
    case LG_MODE_ACCURACY_ONLY:
        rc = run_accuracy(run, &s, res, eb);
        break;
    case LG_MODE_PERFORMANCE_ONLY:
        rc = run_performance(run, &s, res, eb);
        break;
    case LG_MODE_FIND_PEAK_PERFORMANCE:
        rc = run_find_peak(run, &s, res, eb);
        break;
    }
    __atomic_store_n(&sut->run, NULL, __ATOMIC_RELEASE);
    res->num_errors = error_total(run);
fail_run:
    rc = close_logs(run, eb, rc);
fail_logs:
    if (run->summary)
        fclose(run->summary);
    lg__acclog_close(&run->acc);
    lg__dlog_close(&run->dlog);
    run_free(run, res->lost_samples > 0);
    return rc;
}
