/* The dynamic batcher (batcher.h). */
#include "batcher.h"

#include "alloc.h"
#include "cmn/clock.h"
#include "cmn/list.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Idle batch input kept for reuse beyond one batch per engine (batch_recycle). */
#define FREE_KEEP_BYTES (32u << 20)

void sut__batcher_init(sut_batcher_t *bt, uv_loop_t *loop, const sut_batcher_config_t *cfg,
                       const sut_be_t *be, sut_workers_t *workers, sut_budget_t *budget)
{
    memset(bt, 0, sizeof(*bt));
    bt->budget = budget;
    bt->cfg = *cfg;
    bt->be = be;
    bt->workers = workers;
    uv_timer_init(loop, &bt->timer);
    bt->timer.data = bt;
    bt->timer_ready = 1;
}

void sut__batcher_close(sut_batcher_t *bt)
{
    if (bt->timer_ready && !uv_is_closing((uv_handle_t *)&bt->timer))
        uv_close((uv_handle_t *)&bt->timer, NULL);
}

/* A batch's input, charged to the budget under the fairness rules of the peer whose sample opens
 * it (budget.h; NULL: none). */
static void *input_alloc(sut_batcher_t *bt, size_t size, sut_peer_t *peer)
{
    void *p;

    if (sut__budget_take_for(bt->budget, peer, size, 0) < 0)
        return NULL;
    if (bt->be->ops && bt->be->ops->alloc_input)
        p = bt->be->ops->alloc_input(bt->be->be, size);
    else
        p = sut__malloc(size);
    if (!p)
        sut__budget_give(bt->budget, size);
    return p;
}

static void input_free(sut_batcher_t *bt, void *p, size_t size)
{
    sut__budget_give(bt->budget, size);
    if (bt->be->ops && bt->be->ops->free_input)
        bt->be->ops->free_input(bt->be->be, p, size);
    else
        free(p);
}

static void batch_destroy(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    if (nb->input)
        input_free(bt, nb->input, nb->input_cap);
    free(nb->samples);
    free(nb->owners);
    free(nb);
}

void sut__batcher_free(sut_batcher_t *bt)
{
    free(bt->cancel_idx);
    bt->cancel_idx = NULL;
    bt->cancel_cap = 0;
    if (bt->open) {
        batch_destroy(bt, bt->open);
        bt->open = NULL;
    }
    sut__batcher_trim(bt);
}

void sut__batcher_trim(sut_batcher_t *bt)
{
    sut_nbatch_t *nb;

    while ((nb = bt->free_list) != NULL) {
        bt->free_list = nb->next;
        batch_destroy(bt, nb);
    }
    bt->n_free = 0;
    bt->free_bytes = 0;
}

static sut_nbatch_t *batch_new(sut_batcher_t *bt)
{
    sut_nbatch_t *nb = sut__calloc(1, sizeof(*nb));

    if (!nb)
        return NULL;
    nb->cap = bt->cfg.max_batch;
    nb->samples = sut__calloc(nb->cap, sizeof(*nb->samples));
    if (!nb->samples)
        goto fail_samples;
    nb->owners = sut__calloc(nb->cap, sizeof(*nb->owners));
    if (!nb->owners)
        goto fail_owners;
    nb->done.kind = SUT_REC_BATCH_DONE;
    return nb;

fail_owners:
    free(nb->samples);
fail_samples:
    free(nb);
    return NULL;
}

/* A batch with room for |bytes| of input. */
static sut_nbatch_t *batch_open(sut_batcher_t *bt, size_t bytes, sut_peer_t *peer)
{
    sut_nbatch_t **pp = &bt->free_list, *nb;

    /* The most recently used idle batch whose input is large enough (its memory is warm and
     * mapped), else the most recent one. */
    while (*pp && (*pp)->input_cap < bytes)
        pp = &(*pp)->next;
    if (!*pp)
        pp = &bt->free_list;
    nb = *pp;
    if (nb) {
        *pp = nb->next;
        bt->n_free--;
        bt->free_bytes -= nb->input_cap;
    } else if (!(nb = batch_new(bt)))
        return NULL;
    if (nb->input_cap < bytes) {
        if (nb->input)
            input_free(bt, nb->input, nb->input_cap);
        nb->input = input_alloc(bt, bytes, peer);
        nb->input_cap = nb->input ? bytes : 0;
        if (!nb->input) {
            nb->next = bt->free_list;
            bt->free_list = nb;
            bt->n_free++; /* no input: free_bytes unchanged */
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
    nb->start_ns = nb->done_ns = 0;
    nb->next = NULL;
    return nb;
}

/* Keeps a batch for reuse, or frees it when enough are idle already: one per engine and one
 * open, and besides those as many as FREE_KEEP_BYTES of input (at most a sixteenth of the
 * budget's limit) hold. Zero-copy receive opens a batch per frame arriving, so a steady Offline
 * stream keeps several alive; freeing them each time the count dips made every third 8 MB frame
 * land in memory just mapped (page faults on the receive copy, and brk or mmap calls). A burst's
 * extra batches still give their memory back, and all idle ones go when no peer is connected
 * (sut__batcher_trim). */
static void batch_recycle(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    uint64_t keep = FREE_KEEP_BYTES;

    if (bt->budget && bt->budget->limit / 16 < keep)
        keep = bt->budget->limit / 16;
    if (bt->n_free > bt->cfg.engines && bt->free_bytes + nb->input_cap > keep) {
        batch_destroy(bt, nb);
        return;
    }
    nb->next = bt->free_list;
    bt->free_list = nb;
    bt->n_free++;
    bt->free_bytes += nb->input_cap;
}

static void submit(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    CMN_DLIST_PUSH(bt->running, nb, rprev, rnext);
    sut__workers_submit(bt->workers, nb);
}

/* Submits the held batches the budget now covers (the first one whatever it says once nothing
 * runs), in order. */
static void submit_held(sut_batcher_t *bt)
{
    sut_nbatch_t *nb;

    while ((nb = bt->held) != NULL) {
        if (sut__budget_take(bt->budget, nb->resp_charge) < 0) {
            if (bt->inflight > bt->n_held)
                return;
            sut__budget_charge(bt->budget, nb->resp_charge);
        }
        bt->held = nb->next;
        nb->next = NULL;
        bt->n_held--;
        submit(bt, nb);
    }
}

static void dispatch(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    sut_nbatch_t **tail;

    /* A plugin backend (kserve, openai, onnx) receives each batch's response into buffers of its
     * own while the batch runs, at most its declared output size per sample (the backend
     * enforces it); the node charges that before it hands the batch over, until the batch comes
     * back. The built-in backends complete from memory they hold whatever the load. A batch the
     * budget cannot cover waits, in order, for running batches to give theirs back (release);
     * with nothing running it goes anyway, charged: its samples were admitted, and only it can
     * make progress. */
    nb->resp_charge = bt->be->dl ? (uint64_t)nb->b.n * bt->be->info.output_size : 0;
    nb->b.input_size = nb->used;
    nb->dispatch_ns = cmn_now_ns();
    bt->inflight++;
    bt->st.batches++;
    if (!nb->resp_charge) {
        submit(bt, nb);
        return;
    }
    /* Behind the batches already waiting, then through the same rule as they. */
    nb->next = NULL;
    for (tail = &bt->held; *tail; tail = &(*tail)->next)
        ;
    *tail = nb;
    bt->n_held++;
    submit_held(bt);
}

static void close_open_batch(sut_batcher_t *bt)
{
    sut_nbatch_t *nb = bt->open;

    if (!nb)
        return;
    bt->open = NULL;
    uv_timer_stop(&bt->timer);
    if (nb->b.n == 0)
        batch_recycle(bt, nb);
    else
        dispatch(bt, nb);
}

void sut__batcher_flush(sut_batcher_t *bt)
{
    close_open_batch(bt);
}

void sut__batcher_drain(sut_batcher_t *bt)
{
    bt->draining = 1;
    close_open_batch(bt);
}

static void place(sut_nbatch_t *nb, const sut_owner_t *ow, uint8_t *data, size_t size)
{
    size_t i = nb->b.n;

    nb->samples[i].data = data;
    nb->samples[i].size = size;
    if (i > 0 && nb->samples[0].size != size)
        nb->b.uniform = 0;
    nb->owners[i] = *ow;
    nb->b.n++;
    nb->used += size;
}

sut_nbatch_t *sut__batcher_sink_open(sut_batcher_t *bt, size_t bytes, sut_peer_t *peer)
{
    return batch_open(bt, bytes ? bytes : 1, peer);
}

void sut__batcher_sink_add(sut_nbatch_t *nb, const sut_owner_t *ow, size_t size)
{
    place(nb, ow, nb->input + nb->used, size);
}

void sut__batcher_sink_commit(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    if (nb->b.n == 0)
        batch_recycle(bt, nb);
    else
        dispatch(bt, nb);
}

static int engine_idle(const sut_batcher_t *bt)
{
    return bt->cfg.inline_run || bt->inflight < bt->cfg.engines;
}

static void on_timer(uv_timer_t *t)
{
    sut__batcher_kick(t->data);
}

void sut__batcher_kick(sut_batcher_t *bt)
{
    sut_nbatch_t *nb = bt->open;
    uint64_t now, waited, wait_ns;

    if (!nb || nb->b.n == 0)
        return;
    if (!engine_idle(bt) && nb->b.n < bt->cfg.max_batch)
        return; /* it grows until an engine frees up */
    if (nb->b.n >= bt->cfg.preferred_batch || bt->cfg.max_wait_us == 0 || bt->draining) {
        close_open_batch(bt);
        return;
    }
    now = cmn_now_ns();
    waited = now - nb->first_ns;
    wait_ns = bt->cfg.max_wait_us * 1000u;
    if (waited >= wait_ns) {
        close_open_batch(bt);
        return;
    }
    if (!uv_is_active((uv_handle_t *)&bt->timer)) {
        /* libuv timers have millisecond resolution: round the remaining wait up. */
        uint64_t ms = (wait_ns - waited + 999999u) / 1000000u;
        uv_timer_start(&bt->timer, on_timer, ms, 0);
    }
}

/* Room for a full batch of samples of this size within the batch byte limit; a single sample
 * larger than the limit gets a batch of its own (which the budget may still refuse). */
static uint64_t open_size(const sut_batcher_t *bt, uint64_t raw_size, const sut_peer_t *peer)
{
    uint64_t want = raw_size * bt->cfg.max_batch;
    uint64_t left = sut__budget_room(bt->budget, peer), room = bt->budget->limit / 2;

    if (want > bt->cfg.max_batch_bytes)
        want = bt->cfg.max_batch_bytes;
    /* And within what the memory budget has left for the peer whose sample opens it (budget.h):
     * at most half of the limit for one batch, so that other batches and results still fit. */
    if (left < room)
        room = left;
    if (want > room)
        want = room;
    if (want < raw_size)
        want = raw_size;
    return want ? want : 64;
}

int sut__batcher_add(sut_batcher_t *bt, const sut_owner_t *ow, int codec, const uint8_t *wire,
                     uint64_t wire_size, uint64_t raw_size, cmn_errbuf_t *eb)
{
    sut_nbatch_t *nb = bt->open;
    sut_owner_t mine = *ow;
    uint64_t t0 = 0;
    uint8_t *dst;
    int timed;
    int rc;

    /* The decoded size goes on the peer's account before a byte is decoded: a peer over its
     * share (LZ4 bombs) is refused while the budget is wanted by others (budget.h). */
    if (ow->peer && sut__budget_attribute(bt->budget, ow->peer, raw_size, 0) < 0)
        return cmn_errf(eb, CMN_EOVERLOAD,
                        "sample %llu: %llu decoded bytes would take its peer (%llu bytes held) "
                        "past its share of the memory budget (%llu of %llu bytes in use)",
                        (unsigned long long)ow->wire_id, (unsigned long long)raw_size,
                        (unsigned long long)sut__budget_peer_used(ow->peer),
                        (unsigned long long)sut__budget_used(bt->budget),
                        (unsigned long long)bt->budget->limit);
    mine.charge = ow->peer ? raw_size : 0;
    if (nb && (nb->b.n >= nb->cap || nb->input_cap - nb->used < raw_size)) {
        close_open_batch(bt);
        nb = NULL;
    }
    if (!nb) {
        uint64_t want = open_size(bt, raw_size, ow->peer);
        nb = batch_open(bt, (size_t)want, ow->peer);
        if (!nb && mine.charge)
            sut__budget_unattribute(ow->peer, mine.charge);
        /* (the room left to a peer is never more than the limit leaves) */
        if (!nb && sut__budget_room(bt->budget, ow->peer) < want)
            return cmn_errf(eb, CMN_EOVERLOAD,
                            "a batch of %llu bytes does not fit the memory budget (%llu of %llu "
                            "bytes in use, %llu left to this sample's peer)",
                            (unsigned long long)want,
                            (unsigned long long)sut__budget_used(bt->budget),
                            (unsigned long long)bt->budget->limit,
                            (unsigned long long)sut__budget_room(bt->budget, ow->peer));
        if (!nb)
            return cmn_errf(eb, -ENOMEM, "no memory for a batch of %llu bytes",
                            (unsigned long long)want);
        bt->open = nb;
    }
    dst = nb->input + nb->used;
    /* Only decompression is timed: for a plain copy two clock reads would cost more than the
     * copy of a small sample. */
    timed = codec != CMPR_NONE;
    if (timed)
        t0 = cmn_now_ns();
    rc = cmpr_decompress(codec, wire, (size_t)wire_size, dst, (size_t)raw_size);
    if (timed)
        bt->st.decode_ns += cmn_now_ns() - t0;
    if (rc < 0) {
        if (mine.charge)
            sut__budget_unattribute(ow->peer, mine.charge);
        return cmn_errf(eb, CMN_EDECOMPRESS,
                        "sample %llu (%s, %llu bytes) does not decode to its declared %llu bytes",
                        (unsigned long long)ow->wire_id, cmpr_codec_name(codec),
                        (unsigned long long)wire_size, (unsigned long long)raw_size);
    }
    place(nb, &mine, dst, (size_t)raw_size);
    if (nb->b.n >= bt->cfg.max_batch)
        close_open_batch(bt);
    return 0;
}

void sut__batcher_release(sut_batcher_t *bt, sut_nbatch_t *nb)
{
    if (nb->done_ns > nb->start_ns)
        bt->st.infer_ns += nb->done_ns - nb->start_ns;
    if (nb->start_ns > nb->dispatch_ns)
        bt->st.queue_ns += nb->start_ns - nb->dispatch_ns;
    bt->inflight--;
    CMN_DLIST_UNLINK(bt->running, nb, rprev, rnext);
    nb->rprev = nb->rnext = NULL;
    if (nb->resp_charge)
        sut__budget_give(bt->budget, nb->resp_charge);
    nb->resp_charge = 0;
    batch_recycle(bt, nb);
    submit_held(bt);
}

/* The samples of |nb| owned by |s| (NULL: every one) not cancelled yet, into bt->cancel_idx. */
static size_t cancel_pick(sut_batcher_t *bt, const sut_nbatch_t *nb, const sut_session_t *s)
{
    size_t i, k = 0;

    if (bt->cancel_cap < nb->b.n) {
        size_t *ni = realloc(bt->cancel_idx, nb->b.n * sizeof(*ni));
        if (!ni)
            return 0; /* out of memory: these samples run to their end */
        bt->cancel_idx = ni;
        bt->cancel_cap = nb->b.n;
    }
    for (i = 0; i < nb->b.n; i++)
        if (!nb->owners[i].cancelled && (!s || nb->owners[i].s == s))
            bt->cancel_idx[k++] = i;
    return k;
}

/* Marks the samples of a batch not started yet owned by |s| (NULL: every one); returns how many. */
static size_t cancel_mark(sut_nbatch_t *nb, const sut_session_t *s)
{
    size_t i, total = 0;

    for (i = 0; i < nb->b.n; i++)
        if (!nb->owners[i].cancelled && (!s || nb->owners[i].s == s)) {
            nb->owners[i].cancelled = 1;
            total++;
        }
    return total;
}

size_t sut__batcher_cancel(sut_batcher_t *bt, const sut_session_t *s)
{
    sut_nbatch_t *nb;
    size_t total = 0, k;

    if (!bt->be->cancel)
        return 0;
    /* The open batch and the held ones: marked now, told to the backend once it has started
     * the batch. */
    if (bt->open)
        total += cancel_mark(bt->open, s);
    for (nb = bt->held; nb; nb = nb->next)
        total += cancel_mark(nb, s);
    for (nb = bt->running; nb; nb = nb->rnext) {
        k = cancel_pick(bt, nb, s);
        sut__workers_cancel(bt->workers, nb, bt->cancel_idx, k);
        total += k;
    }
    return total;
}

int sut__batcher_idle(const sut_batcher_t *bt)
{
    return bt->inflight == 0 && (!bt->open || bt->open->b.n == 0);
}
