/* The completion path: lg_complete() (QuerySamplesComplete) and lg_first_token()
 * (FirstTokenComplete), called from any thread, usually the QDL's.
 *
 * A response id is the sample's sequence number, so its slot is found by arithmetic. Per batch:
 * one timestamp, then per sample a compare-and-swap of its slot from -(scheduled + 1) to the
 * latency (a second completion finds a non-negative value and is an error), and at the end one
 * update of the counters the issue thread waits on. No lock and no allocation, except for the
 * first tokens of the few samples whose response goes to the accuracy log (a small hash table
 * under a mutex). |active| and |closed| keep completions out of a series that has ended. */
#include "run.h"

#include "cmn/clock.h"
#include "cmn/digest.h"
#include "cmn/metrics.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void tok_put(lg_run_t *run, uint64_t seq, const void *data, size_t size)
{
    lg__tok_node_t *n = malloc(sizeof(*n) + size);

    if (!n)
        return;
    n->seq = seq;
    n->size = size;
    if (size)
        memcpy(n->data, data, size);
    pthread_mutex_lock(&run->tok_mu);
    n->next = run->tok[seq % LG__TOK_BUCKETS];
    run->tok[seq % LG__TOK_BUCKETS] = n;
    pthread_mutex_unlock(&run->tok_mu);
}

static lg__tok_node_t *tok_take(lg_run_t *run, uint64_t seq)
{
    lg__tok_node_t **pp, *n = NULL;

    pthread_mutex_lock(&run->tok_mu);
    for (pp = &run->tok[seq % LG__TOK_BUCKETS]; *pp; pp = &(*pp)->next) {
        if ((*pp)->seq == seq) {
            n = *pp;
            *pp = n->next;
            break;
        }
    }
    pthread_mutex_unlock(&run->tok_mu);
    return n;
}

void lg__tok_clear(lg_run_t *run)
{
    size_t i;

    for (i = 0; i < LG__TOK_BUCKETS; i++) {
        while (run->tok[i]) {
            lg__tok_node_t *n = run->tok[i];

            run->tok[i] = n->next;
            free(n);
        }
    }
}

/* Finds the slot of response id |id| in the current series, or NULL. */
lg__chunk_t *lg__slot_find(lg_run_t *run, uint64_t id, uint64_t hi, size_t *k)
{
    uint64_t o;

    if (id < run->first_seq || id >= hi)
        return NULL;
    o = id - run->first_seq;
    *k = (size_t)(o & LG__CHUNK_MASK);
    return atomic_load_explicit(&run->dir[o >> LG__CHUNK_BITS], memory_order_acquire);
}

/* A call with |n| responses received at |now| may go on: 1 (counted in run->active) with the
 * time since the run's start in *rel and the issued ids' bound in *hi; 0 when there is nothing
 * to do or the series has ended. */
static int enter(lg_run_t *run, size_t n, uint64_t now, int64_t *rel, uint64_t *hi)
{
    if (!run || n == 0 || atomic_load(&run->finished))
        return 0;
    atomic_fetch_add(&run->active, 1);
    if (atomic_load(&run->closed)) {
        atomic_fetch_sub(&run->active, 1);
        lg__run_error(run, LG__E_LATE, "a completion arrived after the end of its series; dropped");
        return 0;
    }
    *rel = (int64_t)(now - run->t0);
    *hi = atomic_load_explicit(&run->issued_hi, memory_order_acquire);
    return 1;
}

static void record_tokens(lg_run_t *run, lg__chunk_t *c, size_t k, int64_t *n_tokens, uint64_t id)
{
    if (run->needs_first_token && atomic_load_explicit(&c->ttft[k], memory_order_relaxed) == 0)
        lg__run_error(
            run, LG__E_NO_FIRST_TOKEN,
            "Attempted to record a sample latency before it's first token latency (sample %" PRIu64
            ")",
            id);
    if (*n_tokens == 0) {
        lg__run_error(run, LG__E_TOKENS_ZERO,
                      "n_tokens argument missing or attempted to record 0 as number of tokens "
                      "(sample %" PRIu64 ")",
                      id);
    } else if (*n_tokens < 0) {
        lg__run_error(run, LG__E_TOKENS_NEGATIVE,
                      "Attempted to record a negative number of tokens (sample %" PRIu64 ")", id);
        *n_tokens = 0;
    } else if (*n_tokens == 1) {
        lg__run_error(run, LG__E_TOKENS_ONE,
                      "Number of tokens need to be greater than 1 (sample %" PRIu64 ")", id);
        *n_tokens = 0;
    }
    c->ntok[k] = *n_tokens;
}

/* A duration as a signed count, saturated at INT64_MAX (a SUT's report of 2^63 or more would
 * otherwise turn negative). */
static int64_t ns_i64(uint64_t ns)
{
    return ns >= (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ns;
}

/* A duration for a 64-bit column that keeps 0 for "not reported": ns + 1, saturated so that the
 * column's value less one is at most INT64_MAX - 1 (never negative in the CSV). */
static uint64_t ns_plus1(uint64_t ns)
{
    return ns >= (uint64_t)INT64_MAX - 1 ? (uint64_t)INT64_MAX : ns + 1u;
}

/* --metrics-listen's histograms (lg_observe_t): a few relaxed atomic adds per sample. */
static void observe(const lg_observe_t *o, lg__chunk_t *c, size_t k, int64_t lat, int tokens)
{
    int64_t t1;

    if (o->latency && lat >= 0)
        cmn_series_observe(o->latency, (uint64_t)lat);
    if (!tokens || !c->ttft)
        return;
    t1 = atomic_load_explicit(&c->ttft[k], memory_order_relaxed) - 1;
    if (t1 < 0)
        return;
    if (o->ttft)
        cmn_series_observe(o->ttft, (uint64_t)t1);
    if (o->tpot && c->ntok[k] > 1 && lat >= t1)
        cmn_series_observe(o->tpot, (uint64_t)((lat - t1) / (c->ntok[k] - 1)));
}

/* The slot of response |r| (its chunk; *k its place there), or NULL after the run error that no
 * such sample is outstanding (|what| it brought: "completion", "first token"). */
static lg__chunk_t *outstanding(lg_run_t *run, const lg_response_t *r, uint64_t hi, size_t *k,
                                const char *what)
{
    lg__chunk_t *c = lg__slot_find(run, r->response_id, hi, k);

    if (!c)
        lg__run_error(run, LG__E_UNKNOWN_ID,
                      "Received a %s for sample id %" PRIu64
                      ", which is not outstanding in this series",
                      what, r->response_id);
    return c;
}

void lg_complete(lg_run_t *run, const lg_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns(), hi, done;
    int64_t rel, cur, q_left = 1;
    size_t i, ok = 0, failed = 0, bad = 0;

    if (!enter(run, n, now, &rel, &hi))
        return;
    for (i = 0; i < n; i++) {
        size_t k;
        lg__chunk_t *c = outstanding(run, &r[i], hi, &k, "completion");
        int64_t old, lat;
        uint32_t idx;
        int64_t n_tokens = r[i].n_tokens;

        if (!c)
            continue;
        old = atomic_load_explicit(&c->lat[k], memory_order_relaxed);
        if (old >= 0) {
            lg__run_error(run, LG__E_TWICE,
                          "Attempted to complete a sample twice. (sample %" PRIu64 ")",
                          r[i].response_id);
            continue;
        }
        lat = rel + old + 1;
        idx = c->idx[k];
        if (r[i].status < 0) {
            failed++;
            lg__run_error(run, LG__E_FAILED,
                          "Sample %" PRIu64 " (qsl_idx %u) failed in the SUT%s%s: %s (%s)%s%s",
                          r[i].response_id, idx & LG__IDX_MASK, r[i].node ? " at node " : "",
                          r[i].node ? r[i].node : "", cmn_strerror(r[i].status),
                          cmn_err_name(r[i].status), r[i].error ? ": " : "",
                          r[i].error ? r[i].error : "");
        } else {
            if (run->verify_digest) {
                uint64_t want = lg_qsl_digest(run->qsl, idx & LG__IDX_MASK);

                if (r[i].size != 8 || !r[i].data || cmn_digest_get(r[i].data) != want) {
                    bad++;
                    lg__run_error(
                        run, LG__E_DIGEST,
                        "Sample %" PRIu64 " (qsl_idx %u): the response (%zu bytes, digest "
                        "%016" PRIx64 ") does not match the sample's digest %016" PRIx64,
                        r[i].response_id, idx & LG__IDX_MASK, r[i].size,
                        r[i].size == 8 && r[i].data ? cmn_digest_get(r[i].data) : 0, want);
                }
            }
            if (run->use_tokens)
                record_tokens(run, c, k, &n_tokens, r[i].response_id);
            if (run->accuracy || (idx & LG__ACC_FLAG)) {
                int mode = !run->use_tokens ? 0 : !run->needs_first_token ? 1 : 2;
                lg__tok_node_t *t = mode == 2 ? tok_take(run, r[i].response_id) : NULL;

                lg__acclog_write(&run->acc, r[i].response_id, idx & LG__IDX_MASK, r[i].data,
                                 r[i].size, mode, t ? t->data : NULL, t ? t->size : 0, n_tokens);
                free(t);
            }
        }
        if (!atomic_compare_exchange_strong(&c->lat[k], &old, lat)) {
            lg__run_error(run, LG__E_TWICE,
                          "Attempted to complete a sample twice. (sample %" PRIu64 ")",
                          r[i].response_id);
            continue;
        }
        if (run->obs && !run->accuracy && r[i].status >= 0)
            observe(run->obs, c, k, lat, run->use_tokens);
        if (run->progress_on) {
            lg__hist_add(&run->hist, lat);
            if (run->use_tokens && c->ttft && r[i].status >= 0) {
                int64_t t1 = atomic_load_explicit(&c->ttft[k], memory_order_relaxed);

                if (t1 > 0)
                    lg__hist_add(&run->ttft_hist, t1 - 1);
                if (t1 > 0 && c->ntok[k] > 1)
                    lg__hist_add(&run->tpot_hist, (lat - (t1 - 1)) / (c->ntok[k] - 1));
            }
        }
        /* The SUT's own queueing (the QDL's issue call to the wire), where it reports one. */
        if (r[i].sent_ns && r[i].sent_ns >= r[i].issued_ns && !run->accuracy) {
            uint64_t qq = r[i].sent_ns - r[i].issued_ns;

            lg__hist_add(&run->qq_hist, ns_i64(qq));
            if (c->qq)
                c->qq[k] = ns_plus1(qq);
        }
        /* The node's own times, where it reports them, and what remains of the time from the
         * wire to this completion: the network and the framing both ways. */
        if (r[i].sent_ns && r[i].node_backend_ns && !run->accuracy) {
            uint64_t nq = r[i].node_queue_ns, nb = r[i].node_backend_ns;
            uint64_t node = nq > UINT64_MAX - nb ? UINT64_MAX : nq + nb;
            uint64_t trip = now > r[i].sent_ns ? now - r[i].sent_ns : 0;
            uint64_t wr = trip > node ? trip - node : 0;

            lg__hist_add(&run->nq_hist, ns_i64(nq));
            lg__hist_add(&run->nb_hist, ns_i64(nb));
            lg__hist_add(&run->wr_hist, ns_i64(wr));
            if (c->nq) {
                c->nq[k] = ns_plus1(r[i].node_queue_ns);
                c->nb[k] = ns_plus1(r[i].node_backend_ns);
                c->wr[k] = ns_plus1(wr);
            }
        }
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
        lg__wait_wake(run, q_left, done);
    }
    atomic_fetch_sub(&run->active, 1);
}

void lg_first_token(lg_run_t *run, const lg_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns(), hi;
    int64_t rel;
    size_t i;

    if (!enter(run, n, now, &rel, &hi))
        return;
    for (i = 0; i < n; i++) {
        size_t k;
        lg__chunk_t *c = outstanding(run, &r[i], hi, &k, "first token");
        int64_t old, expect = 0;

        if (!c)
            continue;
        if (!c->ttft)
            continue; /* token latencies are off */
        old = atomic_load_explicit(&c->lat[k], memory_order_relaxed);
        if (old >= 0) {
            lg__run_error(
                run, LG__E_TOKEN_AFTER,
                "Attempted to record token latency after sample was completed (sample %" PRIu64 ")",
                r[i].response_id);
            continue;
        }
        if (!atomic_compare_exchange_strong(&c->ttft[k], &expect, rel + old + 2)) {
            lg__run_error(run, LG__E_TOKEN_TWICE,
                          "Attempted to complete a sample twice. (first token of sample %" PRIu64
                          ")",
                          r[i].response_id);
            continue;
        }
        /* Only a logged response of a scenario that records first tokens needs the bytes. */
        if (run->needs_first_token && (run->accuracy || (c->idx[k] & LG__ACC_FLAG)))
            tok_put(run, r[i].response_id, r[i].data, r[i].data ? r[i].size : 0);
    }
    atomic_fetch_sub(&run->active, 1);
}
