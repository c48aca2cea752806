/* Worker threads and the completion path (workers.h). */
#include "workers.h"

#include "alloc.h"
#include "cmn/clock.h"
#include "cmn/list.h"
#include "cmn/log.h"
#include "cmn/metrics.h"
#include "cmn/msg.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local cmpr_ctx_t *tls_cmpr;

/* A batch's place between the loop and the backend (sut_nbatch_t.wstate): queued for a worker,
 * inside infer(), or started (the backend knows its samples and can be told to cancel them). */
enum { SUT_NB_QUEUED = 0, SUT_NB_STARTING = 1, SUT_NB_RUNNING = 2 };

/* Per pooled buffer: the pool's header (16 B) and malloc's chunk header and rounding. */
#define POOL_OVERHEAD 32u
/* Per result in the frame that carries it, until the peer takes it: its packed metadata (under
 * 64 B), its iovec and its slot in the frame's record list. */
#define RESULT_FRAME_OVERHEAD 96u

/* Copies the result into a pooled buffer, compressed when the session asked for LZ4 and it
 * pays. Returns 0, or -ENOMEM (the record then reports a backend error, without data). */
static int record_data(cmn_pool_t *pool, sut_workers_t *w, sut_rec_t *rec, int codec,
                       const sut_result_t *r)
{
    if (codec == CMPR_LZ4 && r->size >= CMPR_MIN_SIZE) {
        size_t cap = cmpr_bound(CMPR_LZ4, r->size);
        uint64_t t0 = cmn_now_ns();
        long c = -1;

        if (!tls_cmpr)
            tls_cmpr = cmpr_ctx_new();
        rec->data = cap ? cmn_pool_get(pool, cap) : NULL;
        if (rec->data && tls_cmpr) {
            c = cmpr_compress(tls_cmpr, CMPR_LZ4, r->data, r->size, rec->data, cap);
            atomic_fetch_add_explicit(&w->encode_ns, cmn_now_ns() - t0, memory_order_relaxed);
        }
        if (c > 0) {
            rec->codec = CMPR_LZ4;
            rec->wire_size = (uint64_t)c;
            return 0;
        }
        if (rec->data) { /* incompressible: sent as it is from the same buffer */
            memcpy(rec->data, r->data, r->size);
            return 0;
        }
    }
    rec->data = cmn_pool_get(pool, r->size);
    if (!rec->data)
        return -ENOMEM;
    memcpy(rec->data, r->data, r->size);
    return 0;
}

/* What the allocator holds for a pooled buffer of |size| bytes: its power-of-two class (64 B and
 * up) or the size itself past the largest, plus the pool's header and malloc's own. */
static uint64_t pooled_cost(uint64_t size)
{
    uint64_t c = 64;

    while (c < size && c < (1ull << 30))
        c <<= 1;
    return (c < size ? size : c) + POOL_OVERHEAD;
}

/* A 1.2 backend's message for a failed sample, bounded and made printable, for the client's log.
 * Returns the bytes it holds (charged with the record), 0 when there is none. Without memory for
 * it the failure still goes out, without its text. */
static uint64_t record_error(sut_workers_t *w, sut_rec_t *rec, const sut_result_t *r)
{
    size_t n = r->size < SUT_BACKEND_ERROR_MAX ? r->size : SUT_BACKEND_ERROR_MAX;

    if (r->status >= 0 || r->status == SUT_BACKEND_ECANCELED || !w->be->fail_text || !r->data ||
        !r->size)
        return 0;
    rec->error = cmn_pool_get(w->pool, SUT_BACKEND_ERROR_MAX + 1);
    if (!rec->error)
        return 0;
    cmn_sanitize(r->data, n, rec->error, SUT_BACKEND_ERROR_MAX + 1);
    return pooled_cost(SUT_BACKEND_ERROR_MAX + 1);
}

static sut_rec_t *make_record(sut_workers_t *w, int kind, const sut_owner_t *ow,
                              const sut_result_t *r)
{
    sut_rec_t *rec = cmn_pool_get(w->pool, sizeof(*rec));
    uint64_t data_cost;

    if (!rec)
        return NULL;
    memset(rec, 0, sizeof(*rec));
    rec->h.kind = kind;
    rec->s = ow->s;
    rec->wire_id = ow->wire_id;
    rec->n_tokens = r->n_tokens;
    rec->codec = CMPR_NONE;
    if (kind == SUT_REC_RESULT)
        rec->in_charge = ow->charge;
    /* The record itself and its share of the frame that carries it exist whatever the budget
     * says (the sample must be answered): charged as they are. */
    rec->charge = pooled_cost(sizeof(*rec)) + RESULT_FRAME_OVERHEAD + record_error(w, rec, r);
    sut__budget_charge(w->budget, rec->charge);
    if (ow->peer)
        (void)sut__budget_attribute(w->budget, ow->peer, rec->charge, 1);
    if (r->status < 0) {
        rec->status = NSUT__STATUS__STATUS_BACKEND_ERROR;
        return rec;
    }
    rec->status = NSUT__STATUS__STATUS_OK;
    rec->raw_size = rec->wire_size = r->size;
    if (r->size == 0)
        return rec;
    /* Its buffer is charged at the pool's size for it (an LZ4 copy at the compressor's bound)
     * before it is taken. A peer that does not take its results must not make the node hold
     * more than its share of the budget: past it the sample is answered REJECTED (the QDL runs
     * it elsewhere). */
    data_cost = ow->result_codec == CMPR_LZ4 && r->size >= CMPR_MIN_SIZE
                    ? cmpr_bound(CMPR_LZ4, r->size)
                    : 0;
    data_cost = pooled_cost(data_cost > r->size ? data_cost : r->size);
    if (sut__budget_take_for(w->budget, ow->peer, data_cost, 1) < 0) {
        rec->status = NSUT__STATUS__STATUS_REJECTED;
        rec->raw_size = rec->wire_size = 0;
        return rec;
    }
    rec->charge += data_cost;
    if (record_data(w->pool, w, rec, ow->result_codec, r) < 0) {
        sut__budget_give(w->budget, data_cost);
        if (ow->peer)
            sut__budget_unattribute(ow->peer, data_cost);
        rec->charge -= data_cost;
        rec->status = NSUT__STATUS__STATUS_BACKEND_ERROR;
        rec->raw_size = rec->wire_size = 0;
    }
    return rec;
}

/* Queues records for the loop. Whether the loop must be woken depends on the calling thread, not
 * on the backend's flags: an inline backend's infer() runs on the loop thread, which drains the
 * queue at the end of this turn (node.c, on_turn), but even an inline backend may complete later
 * from a thread of its own (openai: its libcurl thread), and then only a wake-up gets the record
 * out before the node's next tick. The wake-up stays coalesced (xq.h: one per batch of pushes). */
static void hand_over(sut_workers_t *w, cmn_xq_node_t *first, cmn_xq_node_t *last)
{
    const uv_thread_t self = uv_thread_self();

    if (uv_thread_equal(&self, &w->loop_thread))
        cmn_xq_push_list_local(w->done_q, first, last);
    else
        cmn_xq_push_list(w->done_q, first, last);
}

/* At most this many failed samples logged a second; the rest are counted in the next line. */
#define FAIL_LOG_PER_S 10u

/* The backend's own log names a failed sample by its index in the batch; the wire id is what the
 * client's log (the QDL's) names it by. Any completing thread; rate-limited. */
static void log_failure(sut_workers_t *w, const sut_batch_t *b, const sut_result_t *r,
                        const sut_owner_t *ow, uint64_t now)
{
    uint64_t dropped = 0;
    int say;

    uv_mutex_lock(&w->mu);
    if (now - w->flog_window_ns >= 1000000000ull) {
        w->flog_window_ns = now;
        w->flog_n = 0;
    }
    say = w->flog_n < FAIL_LOG_PER_S;
    if (say) {
        w->flog_n++;
        dropped = w->flog_dropped;
        w->flog_dropped = 0;
    } else {
        w->flog_dropped++;
    }
    uv_mutex_unlock(&w->mu);
    if (!say)
        return;
    if (dropped)
        cmn_log_warn("backend %s failed sample %zu of its batch of %zu (status %d): its wire id "
                     "is %llu (and %llu more failed samples not logged before it)",
                     w->be->info.name, r->index, b->n, r->status, (unsigned long long)ow->wire_id,
                     (unsigned long long)dropped);
    else
        cmn_log_warn("backend %s failed sample %zu of its batch of %zu (status %d): its wire id "
                     "is %llu",
                     w->be->info.name, r->index, b->n, r->status, (unsigned long long)ow->wire_id);
}

/* The metrics of one result or first token (sut_obs_t): a few relaxed atomic adds. The sample's
 * first token time is kept in its owner slot, which only the backend's calls for that sample
 * touch, in order (first_token() before complete()). */
static void observe(sut_obs_t *o, sut_nbatch_t *nb, int kind, const sut_result_t *r, uint64_t now)
{
    sut_owner_t *ow = &nb->owners[r->index];
    const uint64_t arrived = ow->arrival_ns;

    if (kind == SUT_REC_FIRST_TOKEN) {
        if (!ow->token1_ns && r->status >= 0) {
            ow->token1_ns = now;
            if (now >= arrived)
                cmn_series_observe(o->ttft, now - arrived);
        }
        return;
    }
    cmn_series_sub(o->running, 1);
    if (r->status == SUT_BACKEND_ECANCELED)
        return;
    cmn_series_set(o->engine_up, r->status >= 0 ? 1 : 0);
    if (r->status < 0)
        return;
    if (now >= arrived)
        cmn_series_observe(o->e2e, now - arrived);
    if (nb->start_ns >= arrived)
        cmn_series_observe(o->queue, nb->start_ns - arrived);
    if (r->n_tokens > 0)
        cmn_series_add(o->output_tokens, (uint64_t)r->n_tokens);
    if (ow->token1_ns && r->n_tokens > 1 && now >= ow->token1_ns)
        cmn_series_observe(o->tpot, (now - ow->token1_ns) / (uint64_t)(r->n_tokens - 1));
}

static void push_results(sut_batch_t *b, const sut_result_t *results, size_t cnt, int kind)
{
    sut_nbatch_t *nb = (sut_nbatch_t *)b;
    sut_workers_t *w = nb->workers;
    sut_obs_t *obs = atomic_load_explicit(&w->obs, memory_order_acquire);
    cmn_xq_node_t *first = NULL, *last = NULL;
    const uint64_t now = cmn_now_ns(); /* one clock read per completion call */
    size_t i, done = 0;

    for (i = 0; i < cnt; i++) {
        const sut_owner_t *ow;
        sut_rec_t *rec;
        if (results[i].index >= b->n) {
            cmn_log_error("backend %s completed sample index %zu of a batch of %zu: ignored",
                          w->be->info.name, results[i].index, b->n);
            continue;
        }
        ow = &nb->owners[results[i].index];
        if (results[i].status < 0 && results[i].status != SUT_BACKEND_ECANCELED)
            log_failure(w, b, &results[i], ow, now);
        if (obs)
            observe(obs, nb, kind, &results[i], now);
        rec = make_record(w, kind, ow, &results[i]);
        if (!rec) {
            /* The sample cannot be answered; its client times it out rather than the node
             * crashing. */
            cmn_log_error("out of memory for the result of sample index %zu", results[i].index);
            continue;
        }
        rec->queue_ns = nb->start_ns > ow->arrival_ns ? nb->start_ns - ow->arrival_ns : 1;
        rec->backend_ns = now > nb->start_ns ? now - nb->start_ns : 1;
        if (last)
            last->next = &rec->h.link;
        else
            first = &rec->h.link;
        last = &rec->h.link;
        done++;
    }
    /* The batch follows its last result on the same queue. */
    if (kind == SUT_REC_RESULT && done &&
        atomic_fetch_sub_explicit(&nb->remaining, done, memory_order_acq_rel) == done) {
        nb->done_ns = cmn_now_ns();
        if (last)
            last->next = &nb->done.link;
        else
            first = &nb->done.link;
        last = &nb->done.link;
    }
    if (first)
        hand_over(w, first, last);
}

static void batch_complete(sut_batch_t *b, const sut_result_t *results, size_t cnt)
{
    push_results(b, results, cnt, SUT_REC_RESULT);
}

static void batch_first_token(sut_batch_t *b, const sut_result_t *results, size_t cnt)
{
    push_results(b, results, cnt, SUT_REC_FIRST_TOKEN);
}

/* The hold run_batch() keeps on a batch while infer() runs (sut_nbatch_t.remaining counts it), so
 * that the batch cannot go back to the loop, and be reused, before run_batch() is done with it. */
static void release_hold(sut_workers_t *w, sut_nbatch_t *nb)
{
    if (atomic_fetch_sub_explicit(&nb->remaining, 1, memory_order_acq_rel) != 1)
        return;
    nb->done_ns = cmn_now_ns();
    nb->done.link.next = NULL;
    hand_over(w, &nb->done.link, &nb->done.link);
}

/* Tells the backend about the samples cancelled before it started the batch (sut_owner_t), and
 * marks the batch started: later cancels go to the backend directly (sut__workers_cancel). */
static void cancel_marked(sut_workers_t *w, sut_nbatch_t *nb)
{
    size_t small[64], *idx = small, i, k = 0;
    const size_t n = nb->b.n;

    if (!w->inline_run)
        uv_mutex_lock(&w->mu);
    nb->wstate = SUT_NB_RUNNING;
    for (i = 0; i < n; i++)
        k += nb->owners[i].cancelled != 0;
    if (k > 64)
        idx = malloc(k * sizeof(*idx));
    if (idx)
        for (i = 0, k = 0; i < n; i++)
            if (nb->owners[i].cancelled)
                idx[k++] = i;
    if (!w->inline_run)
        uv_mutex_unlock(&w->mu);
    /* Out of memory: the samples run to their end, as without cancel. */
    if (idx && k)
        w->be->cancel(w->be->be, &nb->b, idx, k);
    if (idx != small)
        free(idx);
}

/* Whether every sample of a batch not yet started was cancelled: then it is not started at all
 * (nothing reaches the engine), and it is marked started so that later cancels go nowhere. */
static int all_cancelled(sut_workers_t *w, sut_nbatch_t *nb)
{
    size_t i;
    int all = 1;

    if (!w->inline_run)
        uv_mutex_lock(&w->mu);
    for (i = 0; i < nb->b.n && all; i++)
        all = nb->owners[i].cancelled != 0;
    if (all)
        nb->wstate = SUT_NB_RUNNING;
    if (!w->inline_run)
        uv_mutex_unlock(&w->mu);
    return all;
}

void sut__workers_cancel(sut_workers_t *w, sut_nbatch_t *nb, const size_t *idx, size_t k)
{
    size_t i;
    int started = 1;

    if (!w->be->cancel || k == 0)
        return;
    if (!w->inline_run)
        uv_mutex_lock(&w->mu);
    for (i = 0; i < k; i++)
        nb->owners[idx[i]].cancelled = 1;
    if (!w->inline_run) {
        started = nb->wstate == SUT_NB_RUNNING;
        uv_mutex_unlock(&w->mu);
    }
    /* Not started yet: run_batch() passes the marks on once infer() has returned. */
    if (started)
        w->be->cancel(w->be->be, &nb->b, idx, k);
}

/* Fails every sample of a batch that the backend refused to start. */
static void fail_batch(sut_nbatch_t *nb, int rc)
{
    const size_t n = nb->b.n; /* the last completion hands the batch back: read it once */
    sut_result_t r;
    size_t i;

    for (i = 0; i < n; i++) {
        memset(&r, 0, sizeof(r));
        r.index = i;
        r.status = rc < 0 ? rc : CMN_EBACKEND;
        batch_complete(&nb->b, &r, 1);
    }
}

/* A batch starts: its samples run; a streaming backend's samples are int32 token ids. */
static void started_metrics(sut_workers_t *w, sut_nbatch_t *nb)
{
    sut_obs_t *obs = atomic_load_explicit(&w->obs, memory_order_acquire);
    uint64_t tokens = 0;

    if (!obs)
        return;
    cmn_series_add(obs->running, nb->b.n);
    if (!w->streaming)
        return;
    for (size_t i = 0; i < nb->b.n; i++)
        tokens += nb->b.samples[i].size / 4;
    cmn_series_add(obs->prompt_tokens, tokens);
}

static void run_batch(sut_workers_t *w, sut_nbatch_t *nb)
{
    size_t count = nb->b.n;
    int rc;

    nb->start_ns = cmn_now_ns();
    started_metrics(w, nb);
    if (w->be->cancel && all_cancelled(w, nb)) {
        fail_batch(nb, SUT_BACKEND_ECANCELED);
        release_hold(w, nb);
        return;
    }
    rc = w->be->ops->infer(w->be->be, &nb->b);
    /* On failure the backend completed nothing; either way the hold keeps the batch ours. */
    if (rc < 0) {
        cmn_log_error("backend %s failed a batch of %zu: %s", w->be->info.name, count,
                      cmn_strerror(rc));
        fail_batch(nb, rc);
    } else if (w->be->cancel) {
        cancel_marked(w, nb);
    }
    release_hold(w, nb);
}

static void worker_main(void *arg)
{
    sut_workers_t *w = arg;
    sut_nbatch_t *nb;

    /* Backends that sleep (sim) then wake when asked, not up to 50 us late. */
    cmn_timer_slack_min();
    for (;;) {
        uv_mutex_lock(&w->mu);
        while (!w->head && !w->stop)
            uv_cond_wait(&w->cv, &w->mu);
        nb = w->stop ? NULL : w->head;
        if (nb) {
            w->head = nb->next;
            if (!w->head)
                w->tail = NULL;
            nb->wstate = SUT_NB_STARTING;
        }
        uv_mutex_unlock(&w->mu);
        if (!nb)
            break;
        run_batch(w, nb);
    }
    cmpr_ctx_free(tls_cmpr);
    tls_cmpr = NULL;
}

int sut__workers_init(sut_workers_t *w, const sut_be_t *be, cmn_xq_t *done_q, cmn_pool_t *pool,
                      sut_budget_t *budget, uint32_t n_threads, cmn_errbuf_t *eb)
{
    uint32_t i;
    int rc;

    memset(w, 0, sizeof(*w));
    w->be = be;
    w->done_q = done_q;
    w->pool = pool;
    w->budget = budget;
    w->loop_thread = uv_thread_self();
    atomic_init(&w->encode_ns, 0);
    rc = uv_mutex_init(&w->mu);
    if (rc < 0)
        return cmn_errf(eb, rc, "work queue mutex: %s", cmn_strerror(rc));
    rc = uv_cond_init(&w->cv);
    if (rc < 0) {
        uv_mutex_destroy(&w->mu);
        return cmn_errf(eb, rc, "work queue condition: %s", cmn_strerror(rc));
    }
    w->ready = 1;
    w->inline_run = (be->info.flags & SUT_BACKEND_F_INLINE) != 0;
    w->streaming = (be->info.flags & SUT_BACKEND_F_STREAMING) != 0;
    if (w->inline_run)
        return 0;
    w->threads = sut__calloc(n_threads, sizeof(uv_thread_t));
    if (!w->threads)
        return cmn_errf(eb, -ENOMEM, "worker threads: out of memory");
    for (i = 0; i < n_threads; i++) {
        rc = uv_thread_create(&w->threads[i], worker_main, w);
        if (rc < 0)
            return cmn_errf(eb, rc, "starting worker thread %u: %s", i, cmn_strerror(rc));
        w->n_threads = i + 1;
    }
    return 0;
}

void sut__workers_submit(sut_workers_t *w, sut_nbatch_t *nb)
{
    nb->workers = w;
    nb->b.complete = batch_complete;
    nb->b.first_token = batch_first_token;
    atomic_store_explicit(&nb->remaining, nb->b.n + 1, memory_order_relaxed); /* + the hold */
    nb->wstate = w->inline_run ? SUT_NB_STARTING : SUT_NB_QUEUED;
    if (w->inline_run) {
        run_batch(w, nb);
        return;
    }
    nb->next = NULL;
    uv_mutex_lock(&w->mu);
    CMN_QUEUE_APPEND(w->head, w->tail, nb, next);
    uv_cond_signal(&w->cv);
    uv_mutex_unlock(&w->mu);
}

void sut__workers_shutdown(sut_workers_t *w)
{
    uint32_t i;

    if (!w->ready)
        return;
    uv_mutex_lock(&w->mu);
    w->stop = 1;
    uv_cond_broadcast(&w->cv);
    uv_mutex_unlock(&w->mu);
    for (i = 0; i < w->n_threads; i++)
        uv_thread_join(&w->threads[i]);
    free(w->threads);
    w->threads = NULL;
    w->n_threads = 0;
    uv_cond_destroy(&w->cv);
    uv_mutex_destroy(&w->mu);
    w->ready = 0;
    cmpr_ctx_free(tls_cmpr); /* an inline backend's compression context */
    tls_cmpr = NULL;
}

uint64_t sut__workers_encode_ns(sut_workers_t *w)
{
    return atomic_load_explicit(&w->encode_ns, memory_order_relaxed);
}
