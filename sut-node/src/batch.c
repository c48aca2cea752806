/* The dynamic batcher, the worker threads and the completion path.
 *
 * Samples are decoded straight into the open batch's input buffer (the one copy on the receive
 * side: socket buffer -> batch tensor). A batch is dispatched when it is full (max batch, or its
 * input buffer), when it reaches the backend's preferred batch and an engine is idle, when an
 * engine is idle and max_wait has passed since its first sample (at once with max_wait 0), or on
 * Flush. While every engine is busy the open batch keeps growing, so batches get larger exactly
 * when the backend is the bottleneck.
 *
 * Completions: backend threads call sut__batch_complete(), which copies (and, when negotiated,
 * LZ4-compresses) each result into a pooled buffer and hands the records to the loop through one
 * coalesced queue. The loop groups them per connection into one Response frame per pass. */
#include "node.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local cmpr_ctx_t *tls_cmpr;

static sut_nbatch_t *batch_of(sut_batch_t *b)
{
    return (sut_nbatch_t *)b;
}

/* ---- completion (any thread) --------------------------------------------------------------- */

static sut_rec_t *make_record(sut_node_t *n, int kind, const sut_owner_t *ow, const sut_result_t *r)
{
    sut_rec_t *rec = cmn_pool_get(n->pool, sizeof(*rec));
    sut_session_t *s = ow->s;

    if (!rec)
        return NULL;
    memset(rec, 0, sizeof(*rec));
    rec->h.kind = kind;
    rec->s = s;
    rec->wire_id = ow->wire_id;
    rec->n_tokens = r->n_tokens;
    if (r->status < 0) {
        rec->status = NSUT__STATUS__STATUS_BACKEND_ERROR;
        return rec;
    }
    rec->status = NSUT__STATUS__STATUS_OK;
    rec->raw_size = r->size;
    rec->wire_size = r->size;
    rec->codec = CMPR_NONE;
    if (r->size == 0)
        return rec;
    /* result_codec is set at the handshake, before any sample of the session exists. */
    if (s->result_codec == CMPR_LZ4 && r->size >= CMPR_MIN_SIZE) {
        size_t cap = cmpr_bound(CMPR_LZ4, r->size);
        uint64_t t0 = cmn_now_ns();
        long c;
        if (!tls_cmpr)
            tls_cmpr = cmpr_ctx_new();
        rec->data = cap ? cmn_pool_get(n->pool, cap) : NULL;
        if (rec->data && tls_cmpr) {
            c = cmpr_compress(tls_cmpr, CMPR_LZ4, r->data, r->size, rec->data, cap);
            atomic_fetch_add_explicit(&n->encode_ns, cmn_now_ns() - t0, memory_order_relaxed);
            if (c > 0) {
                rec->codec = CMPR_LZ4;
                rec->wire_size = (uint64_t)c;
                return rec;
            }
            memcpy(rec->data, r->data, r->size);
            return rec;
        }
        cmn_pool_put(n->pool, rec->data);
    }
    rec->data = cmn_pool_get(n->pool, r->size);
    if (!rec->data) {
        rec->status = NSUT__STATUS__STATUS_BACKEND_ERROR;
        rec->raw_size = rec->wire_size = 0;
        return rec;
    }
    memcpy(rec->data, r->data, r->size);
    return rec;
}

static void push_results(sut_batch_t *b, const sut_result_t *results, size_t cnt, int kind)
{
    sut_nbatch_t *nb = batch_of(b);
    sut_node_t *n = nb->node;
    cmn_xq_node_t *first = NULL, *last = NULL;
    size_t i, done = 0;

    for (i = 0; i < cnt; i++) {
        sut_rec_t *rec;
        if (results[i].index >= b->n) {
            cmn_log_error("backend %s completed sample index %zu of a batch of %zu: ignored",
                          n->info.name, results[i].index, b->n);
            continue;
        }
        rec = make_record(n, kind, &nb->owners[results[i].index], &results[i]);
        if (!rec) {
            /* Out of memory: the sample cannot be answered; the connection will time out on it
             * rather than the node crashing. */
            cmn_log_error("out of memory for a result record");
            continue;
        }
        if (kind == REC_RESULT && results[i].status < 0)
            atomic_fetch_add_explicit(&n->failed_by_backend, 1, memory_order_relaxed);
        if (last)
            last->next = &rec->h.link;
        else
            first = &rec->h.link;
        last = &rec->h.link;
        done++;
    }
    /* The batch goes back to the loop after its last result, on the same queue, so the loop
     * sees every result before the release. */
    if (kind == REC_RESULT && done &&
        atomic_fetch_sub_explicit(&nb->remaining, done, memory_order_acq_rel) == done) {
        nb->done.link.next = NULL;
        if (last)
            last->next = &nb->done.link;
        else
            first = &nb->done.link;
        last = &nb->done.link;
    }
    if (!first)
        return;
    if (nb->inline_run) {
        /* On the loop thread, inside infer(): keep them for dispatch() to handle right after. */
        if (n->local_last)
            n->local_last->next = first;
        else
            n->local_first = first;
        n->local_last = last;
        last->next = NULL;
        return;
    }
    cmn_xq_push_list(&n->done_q, first, last);
}

static void batch_complete(sut_batch_t *b, const sut_result_t *results, size_t cnt)
{
    push_results(b, results, cnt, REC_RESULT);
}

static void batch_first_token(sut_batch_t *b, const sut_result_t *results, size_t cnt)
{
    push_results(b, results, cnt, REC_FIRST_TOKEN);
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

static void run_batch(sut_node_t *n, sut_nbatch_t *nb)
{
    size_t count = nb->b.n;
    int rc = n->ops->infer(n->be, &nb->b);
    /* On failure the backend completed nothing, so the batch is still ours. */
    if (rc < 0) {
        cmn_log_error("backend %s failed a batch of %zu: %s", n->info.name, count,
                      cmn_strerror(rc));
        fail_batch(nb, rc);
    }
}

/* ---- workers --------------------------------------------------------------------------------- */

static void worker_main(void *arg)
{
    sut_node_t *n = arg;
    sut_nbatch_t *nb;

    /* Backends that sleep (sim) then wake when asked, not up to 50 us late. */
    cmn_timer_slack_min();
    for (;;) {
        uv_mutex_lock(&n->wq_mu);
        while (!n->wq_head && !n->wq_stop)
            uv_cond_wait(&n->wq_cv, &n->wq_mu);
        nb = n->wq_head;
        if (nb) {
            n->wq_head = nb->next;
            if (!n->wq_head)
                n->wq_tail = NULL;
        }
        uv_mutex_unlock(&n->wq_mu);
        if (!nb)
            break;
        run_batch(n, nb);
    }
    cmpr_ctx_free(tls_cmpr);
    tls_cmpr = NULL;
}

int sut__batcher_init(sut_node_t *n, cmn_errbuf_t *eb)
{
    uint32_t i;
    int rc;

    rc = uv_mutex_init(&n->wq_mu);
    if (rc < 0)
        return cmn_errf(eb, rc, "work queue mutex: %s", cmn_strerror(rc));
    rc = uv_cond_init(&n->wq_cv);
    if (rc < 0) {
        uv_mutex_destroy(&n->wq_mu);
        return cmn_errf(eb, rc, "work queue condition: %s", cmn_strerror(rc));
    }
    n->batcher_ready = 1;
    if (n->info.flags & SUT_BACKEND_F_INLINE)
        return 0; /* the loop thread runs the backend itself */
    n->n_threads = n->opt.workers ? n->opt.workers : n->engines;
    n->threads = calloc(n->n_threads, sizeof(uv_thread_t));
    if (!n->threads)
        return cmn_errf(eb, UV_ENOMEM, "worker threads: out of memory");
    for (i = 0; i < n->n_threads; i++) {
        rc = uv_thread_create(&n->threads[i], worker_main, n);
        if (rc < 0) {
            n->n_threads = i;
            return cmn_errf(eb, rc, "starting worker thread %u: %s", i, cmn_strerror(rc));
        }
    }
    return 0;
}

void sut__batcher_shutdown(sut_node_t *n)
{
    uint32_t i;
    sut_nbatch_t *nb;

    if (!n->batcher_ready)
        return;
    uv_mutex_lock(&n->wq_mu);
    n->wq_stop = 1;
    uv_cond_broadcast(&n->wq_cv);
    uv_mutex_unlock(&n->wq_mu);
    for (i = 0; i < n->n_threads; i++)
        uv_thread_join(&n->threads[i]);
    free(n->threads);
    n->threads = NULL;
    n->n_threads = 0;
    while ((nb = n->free_batches) != NULL) {
        n->free_batches = nb->next;
        if (n->ops && n->ops->free_input)
            n->ops->free_input(n->be, nb->input, nb->input_cap);
        else
            free(nb->input);
        free(nb->samples);
        free(nb->owners);
        free(nb);
    }
    uv_cond_destroy(&n->wq_cv);
    uv_mutex_destroy(&n->wq_mu);
    n->batcher_ready = 0;
    cmpr_ctx_free(tls_cmpr);
    tls_cmpr = NULL;
}

/* ---- the batcher (loop thread) --------------------------------------------------------------- */

static void *input_alloc(sut_node_t *n, size_t size)
{
    if (n->ops->alloc_input)
        return n->ops->alloc_input(n->be, size);
    return malloc(size);
}

static void input_free(sut_node_t *n, void *p, size_t size)
{
    if (n->ops->free_input)
        n->ops->free_input(n->be, p, size);
    else
        free(p);
}

/* A batch with room for |bytes| of input. */
static sut_nbatch_t *batch_open(sut_node_t *n, size_t bytes)
{
    sut_nbatch_t *nb = n->free_batches;

    if (nb) {
        n->free_batches = nb->next;
    } else {
        nb = calloc(1, sizeof(*nb));
        if (!nb)
            return NULL;
        nb->cap = n->max_batch;
        nb->samples = calloc(nb->cap, sizeof(*nb->samples));
        nb->owners = calloc(nb->cap, sizeof(*nb->owners));
        if (!nb->samples || !nb->owners) {
            free(nb->samples);
            free(nb->owners);
            free(nb);
            return NULL;
        }
        nb->node = n;
        nb->done.kind = REC_BATCH_DONE;
        nb->b.complete = batch_complete;
        nb->b.first_token = batch_first_token;
    }
    if (nb->input_cap < bytes) {
        if (nb->input)
            input_free(n, nb->input, nb->input_cap);
        nb->input = input_alloc(n, bytes);
        nb->input_cap = nb->input ? bytes : 0;
        if (!nb->input) {
            nb->next = n->free_batches;
            n->free_batches = nb;
            return NULL;
        }
    }
    nb->b.n = 0;
    nb->b.samples = nb->samples;
    nb->b.input = nb->input;
    nb->b.input_size = 0;
    nb->b.uniform = 1;
    nb->b.backend_data = NULL;
    nb->b.node_priv = nb;
    nb->used = 0;
    nb->first_ns = cmn_now_ns();
    nb->next = NULL;
    return nb;
}

static void batch_recycle(sut_node_t *n, sut_nbatch_t *nb)
{
    nb->next = n->free_batches;
    n->free_batches = nb;
}

static void dispatch(sut_node_t *n, sut_nbatch_t *nb)
{
    nb->b.input_size = nb->used;
    atomic_store_explicit(&nb->remaining, nb->b.n, memory_order_relaxed);
    nb->dispatch_ns = cmn_now_ns();
    n->batches_inflight++;
    n->st.batches++;
    nb->inline_run = (n->info.flags & SUT_BACKEND_F_INLINE) != 0;
    if (nb->inline_run) {
        cmn_xq_node_t *list;
        nb->inline_run = 1;
        run_batch(n, nb);
        list = n->local_first;
        n->local_first = n->local_last = NULL;
        if (list)
            sut__on_records(&n->done_q, list);
        return;
    }
    uv_mutex_lock(&n->wq_mu);
    if (n->wq_tail)
        n->wq_tail->next = nb;
    else
        n->wq_head = nb;
    n->wq_tail = nb;
    uv_cond_signal(&n->wq_cv);
    uv_mutex_unlock(&n->wq_mu);
}

static void close_open_batch(sut_node_t *n)
{
    sut_nbatch_t *nb = n->open;

    if (!nb)
        return;
    n->open = NULL;
    uv_timer_stop(&n->batch_timer);
    if (nb->b.n == 0) {
        batch_recycle(n, nb);
        return;
    }
    dispatch(n, nb);
}

void sut__batcher_flush(sut_node_t *n)
{
    close_open_batch(n);
}

sut_nbatch_t *sut__batcher_sink_open(sut_node_t *n, size_t bytes)
{
    return batch_open(n, bytes ? bytes : 1);
}

void sut__batcher_sink_add(sut_nbatch_t *nb, sut_session_t *s, uint64_t wire_id, size_t size)
{
    size_t i = nb->b.n;

    nb->samples[i].data = nb->input + nb->used;
    nb->samples[i].size = size;
    if (i > 0 && nb->samples[0].size != size)
        nb->b.uniform = 0;
    nb->owners[i].s = s;
    nb->owners[i].wire_id = wire_id;
    nb->b.n++;
    nb->used += size;
}

void sut__batcher_sink_commit(sut_node_t *n, sut_nbatch_t *nb)
{
    if (nb->b.n == 0) {
        batch_recycle(n, nb);
        return;
    }
    dispatch(n, nb);
}

static int engine_idle(const sut_node_t *n)
{
    return (n->info.flags & SUT_BACKEND_F_INLINE) || n->batches_inflight < n->engines;
}

static void on_batch_timer(uv_timer_t *t)
{
    sut__batcher_kick(t->data);
}

/* Decides whether the open batch goes now (called at the end of each loop turn, from the
 * timer, and when a batch completes). */
void sut__batcher_kick(sut_node_t *n)
{
    sut_nbatch_t *nb = n->open;
    uint64_t now, wait_ns;

    if (!nb || nb->b.n == 0)
        return;
    if (!engine_idle(n) && nb->b.n < n->max_batch)
        return; /* it grows until an engine frees up */
    if (nb->b.n >= n->info.preferred_batch || n->opt.max_wait_us == 0 || n->draining) {
        close_open_batch(n);
        return;
    }
    now = cmn_now_ns();
    wait_ns = n->opt.max_wait_us * 1000u;
    if (now - nb->first_ns >= wait_ns) {
        close_open_batch(n);
        return;
    }
    if (!uv_is_active((uv_handle_t *)&n->batch_timer)) {
        /* libuv timers have millisecond resolution: round the remaining wait up. */
        uint64_t ms = (wait_ns - (now - nb->first_ns) + 999999u) / 1000000u;
        n->batch_timer.data = n;
        uv_timer_start(&n->batch_timer, on_batch_timer, ms, 0);
    }
}

int sut__batcher_add(sut_node_t *n, sut_session_t *s, uint64_t wire_id, int codec,
                     const uint8_t *wire, uint64_t wire_size, uint64_t raw_size, cmn_errbuf_t *eb)
{
    sut_nbatch_t *nb = n->open;
    uint64_t t0;
    uint8_t *dst;
    size_t i;
    int rc;

    if (nb && (nb->b.n >= nb->cap || nb->input_cap - nb->used < raw_size)) {
        close_open_batch(n);
        nb = NULL;
    }
    if (!nb) {
        /* Room for a full batch of samples of this size, within the batch byte limit (a single
         * sample larger than the limit gets a batch of its own). */
        uint64_t want = raw_size * n->max_batch;
        if (want > n->opt.max_batch_bytes)
            want = n->opt.max_batch_bytes;
        if (want < raw_size)
            want = raw_size;
        if (want == 0)
            want = 64;
        nb = batch_open(n, (size_t)want);
        if (!nb)
            return cmn_errf(eb, UV_ENOMEM, "no memory for a batch of %llu bytes",
                            (unsigned long long)want);
        n->open = nb;
    }
    dst = nb->input + nb->used;
    t0 = cmn_now_ns();
    rc = cmpr_decompress(codec, wire, (size_t)wire_size, dst, (size_t)raw_size);
    n->st.decode_ns += cmn_now_ns() - t0;
    if (rc < 0)
        return cmn_errf(eb, CMN_EDECOMPRESS,
                        "sample %llu (%s, %llu bytes) does not decode to its declared %llu bytes",
                        (unsigned long long)wire_id, cmpr_codec_name(codec),
                        (unsigned long long)wire_size, (unsigned long long)raw_size);
    i = nb->b.n;
    nb->samples[i].data = dst;
    nb->samples[i].size = (size_t)raw_size;
    if (i > 0 && nb->samples[0].size != raw_size)
        nb->b.uniform = 0;
    nb->owners[i].s = s;
    nb->owners[i].wire_id = wire_id;
    nb->b.n++;
    nb->used += (size_t)raw_size;
    if (nb->b.n >= n->max_batch)
        close_open_batch(n);
    return 0;
}

/* ---- results to frames (loop thread) -------------------------------------------------------- */

typedef struct {
    sut_node_t *n;
    size_t cnt;
    sut_rec_t *recs[];
} sent_frame_t;

static void on_frame_sent(void *arg, int status)
{
    sent_frame_t *f = arg;
    size_t i;

    (void)status;
    for (i = 0; i < f->cnt; i++) {
        cmn_pool_put(f->n->pool, f->recs[i]->data);
        cmn_pool_put(f->n->pool, f->recs[i]);
    }
    free(f);
}

static void free_records(sut_node_t *n, sut_rec_t **recs, size_t cnt)
{
    size_t i;
    for (i = 0; i < cnt; i++) {
        cmn_pool_put(n->pool, recs[i]->data);
        cmn_pool_put(n->pool, recs[i]);
    }
}

/* Sends the records as one Response (or FirstToken) frame, splitting only when a frame would
 * exceed the client's limit. Takes ownership of the records. */
static void send_records(sut_session_t *s, unsigned type, sut_rec_t **recs, size_t cnt)
{
    sut_node_t *n = s->node;
    size_t start = 0;

    while (start < cnt) {
        size_t end = start, k;
        uint64_t bytes = 0;
        sent_frame_t *f;
        Nsut__Result *res;
        Nsut__Result **rp;
        struct iovec *iov;
        int rc;

        /* The metadata costs at most ~40 bytes per result; keep a margin under the limit. */
        while (end < cnt &&
               (end == start ||
                bytes + recs[end]->wire_size + 64 * (end - start + 1) <= s->result_max_frame))
            bytes += recs[end++]->wire_size;
        k = end - start;
        f = malloc(sizeof(*f) + k * sizeof(f->recs[0]));
        res = calloc(k, sizeof(*res));
        rp = calloc(k, sizeof(*rp));
        iov = calloc(k, sizeof(*iov));
        if (!f || !res || !rp || !iov) {
            free(f);
            free(res);
            free(rp);
            free(iov);
            free_records(n, recs + start, cnt - start);
            sut__session_protocol_error(s, UV_ENOMEM, NSUT__ERROR_CODE__ERROR_INTERNAL,
                                        "out of memory");
            return;
        }
        f->n = n;
        f->cnt = k;
        for (size_t i = 0; i < k; i++) {
            sut_rec_t *r = recs[start + i];
            nsut__result__init(&res[i]);
            res[i].id = r->wire_id;
            res[i].status = (Nsut__Status)r->status;
            res[i].codec = (Nsut__Codec)r->codec;
            res[i].raw_size = r->raw_size;
            res[i].wire_size = r->wire_size;
            res[i].n_tokens = r->n_tokens;
            rp[i] = &res[i];
            iov[i].iov_base = r->data;
            iov[i].iov_len = (size_t)r->wire_size;
            f->recs[i] = r;
        }
        if (type == CMN_MSG_RESPONSE) {
            Nsut__Response m = NSUT__RESPONSE__INIT;
            m.n_results = k;
            m.results = rp;
            rc = cmn_conn_send(&s->conn, type, &m.base, iov, k, on_frame_sent, f);
        } else {
            Nsut__FirstToken m = NSUT__FIRST_TOKEN__INIT;
            m.n_results = k;
            m.results = rp;
            rc = cmn_conn_send(&s->conn, type, &m.base, iov, k, on_frame_sent, f);
        }
        free(res);
        free(rp);
        free(iov);
        if (rc < 0) {
            free_records(n, f->recs, k);
            free(f);
            if (rc != CMN_ECLOSED)
                cmn_log_error("%s: cannot send %s: %s", s->conn.peer, cmn_msg_type_name(type),
                              cmn_strerror(rc));
        } else {
            n->st.bytes_out += bytes;
        }
        start = end;
    }
}

void sut__session_flush_results(sut_session_t *s)
{
    /* First tokens before results: a sample's FirstToken must precede its Result. */
    if (s->n_tok) {
        send_records(s, CMN_MSG_FIRST_TOKEN, s->pend_tok, s->n_tok);
        s->n_tok = 0;
    }
    if (s->n_res) {
        send_records(s, CMN_MSG_RESPONSE, s->pend_res, s->n_res);
        s->n_res = 0;
    }
}

static int pend_push(sut_rec_t ***arr, size_t *cnt, size_t *cap, sut_rec_t *r)
{
    if (*cnt == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        sut_rec_t **na = realloc(*arr, ncap * sizeof(*na));
        if (!na)
            return UV_ENOMEM;
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*cnt)++] = r;
    return 0;
}

/* Queues a record on its session (loop thread). Returns the session when it was not yet on the
 * touched list. */
static void session_take(sut_node_t *n, sut_rec_t *rec, sut_session_t **touched)
{
    sut_session_t *s = rec->s;
    int rc;

    if (rec->h.kind == REC_RESULT) {
        /* The sample is done for the node whether or not its connection is still there. */
        cmn_idmap_del(&s->ids, rec->wire_id);
        s->inflight--;
        if (rec->status == NSUT__STATUS__STATUS_BACKEND_ERROR)
            n->st.samples_failed++;
    }
    if (s->dead) {
        int was_result = rec->h.kind == REC_RESULT;
        cmn_pool_put(n->pool, rec->data);
        cmn_pool_put(n->pool, rec);
        if (was_result)
            sut__session_release(s);
        return;
    }
    if (rec->h.kind == REC_RESULT)
        rc = pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec);
    else
        rc = pend_push(&s->pend_tok, &s->n_tok, &s->cap_tok, rec);
    if (rc < 0) {
        cmn_pool_put(n->pool, rec->data);
        cmn_pool_put(n->pool, rec);
        sut__session_protocol_error(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL, "out of memory");
    }
    if (!s->touched) {
        s->touched = 1;
        s->refs++; /* keeps the session while it is on the touched list */
        s->touched_next = *touched;
        *touched = s;
    }
    if (rec->h.kind == REC_RESULT)
        sut__session_release(s);
}

void sut__reject_sample(sut_node_t *n, sut_session_t *s, uint64_t wire_id)
{
    sut_rec_t *rec = cmn_pool_get(n->pool, sizeof(*rec));

    n->st.samples_rejected++;
    if (!rec || pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec) < 0) {
        cmn_pool_put(n->pool, rec);
        sut__session_protocol_error(s, UV_ENOMEM, NSUT__ERROR_CODE__ERROR_INTERNAL,
                                    "out of memory");
        return;
    }
    memset(rec, 0, sizeof(*rec));
    rec->h.kind = REC_RESULT;
    rec->s = s;
    rec->wire_id = wire_id;
    rec->status = NSUT__STATUS__STATUS_REJECTED;
}

void sut__on_records(cmn_xq_t *q, cmn_xq_node_t *list)
{
    sut_node_t *n = q->data;
    sut_session_t *touched = NULL, *s;
    int freed_engine = 0;

    while (list) {
        sut_qhdr_t *h = (sut_qhdr_t *)list;
        list = list->next;
        if (h->kind == REC_BATCH_DONE) {
            sut_nbatch_t *nb = (sut_nbatch_t *)(void *)((char *)h - offsetof(sut_nbatch_t, done));
            n->st.infer_ns += cmn_now_ns() - nb->dispatch_ns;
            n->batches_inflight--;
            batch_recycle(n, nb);
            freed_engine = 1;
            continue;
        }
        session_take(n, (sut_rec_t *)h, &touched);
    }
    while ((s = touched) != NULL) {
        touched = s->touched_next;
        s->touched = 0;
        if (!s->dead) {
            sut__session_flush_results(s);
            if (s->conn.read_paused && s->inflight < s->node->opt.max_inflight)
                cmn_conn_read_resume(&s->conn);
        }
        sut__session_release(s);
    }
    if (freed_engine)
        sut__batcher_kick(n);
    if (n->draining)
        sut__node_drain(n, NULL);
}
