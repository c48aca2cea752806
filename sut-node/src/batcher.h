/* The dynamic batcher: forms batches from samples and hands them to the workers.
 *
 * Samples are decoded straight into the open batch's input buffer (the one copy on the receive
 * side: socket buffer -> batch tensor). A batch is dispatched when it is full (max batch, or its
 * input buffer), when it reaches the backend's preferred batch and an engine is idle, when an
 * engine is idle and max_wait has passed since its first sample (at once with max_wait 0), on
 * Flush, or at once while draining. While every engine is busy the open batch keeps growing, so
 * batches get larger exactly when the backend is the bottleneck.
 *
 * The batcher knows samples only by their owner (types.h), never sessions or frames.
 * Threads: the loop thread only. */
#ifndef SUT_BATCHER_H
#define SUT_BATCHER_H

#include "budget.h"
#include "cmn/err.h"
#include "types.h"
#include "workers.h"

#include <uv.h>

typedef struct {
    uint32_t max_batch;
    uint32_t preferred_batch;
    uint64_t max_batch_bytes;
    uint64_t max_wait_us;
    uint32_t engines;
    int inline_run; /* the backend runs on the loop thread: an engine is always idle */
} sut_batcher_config_t;

typedef struct {
    uint64_t batches;
    uint64_t decode_ns; /* sample decompression */
    uint64_t infer_ns;  /* from the backend starting a batch to its last completion */
    uint64_t queue_ns;  /* from dispatch to the backend starting it */
} sut_batcher_stats_t;

typedef struct {
    sut_batcher_config_t cfg;
    const sut_be_t *be; /* alloc_input / free_input */
    sut_workers_t *workers;
    sut_budget_t *budget; /* charged with every batch input */
    uv_timer_t timer;     /* max_wait */
    int timer_ready;
    sut_nbatch_t *open;
    sut_nbatch_t *free_list;
    uint32_t n_free;
    uint64_t free_bytes;   /* input capacity of the free list's batches */
    uint32_t inflight;     /* batches dispatched and not yet released */
    sut_nbatch_t *running; /* those batches (rnext) */
    sut_nbatch_t *held;    /* dispatched ones waiting for budget for their responses (next) */
    uint32_t n_held;       /* counted in inflight too */
    size_t *cancel_idx;    /* scratch for sut__batcher_cancel */
    size_t cancel_cap;
    int draining;
    sut_batcher_stats_t st;
} sut_batcher_t;

void sut__batcher_init(sut_batcher_t *bt, uv_loop_t *loop, const sut_batcher_config_t *cfg,
                       const sut_be_t *be, sut_workers_t *workers, sut_budget_t *budget);
/* Closes the timer (the loop must run to finish it). */
void sut__batcher_close(sut_batcher_t *bt);
/* Frees the idle batches; none may be in flight. */
void sut__batcher_free(sut_batcher_t *bt);
/* Gives the idle batches' memory back (when no peer is connected). */
void sut__batcher_trim(sut_batcher_t *bt);

/* Places one sample into the open batch, decoding it; its decoded size goes on |ow|->peer's account
 * first (when there is one), given back with its result. Returns 0, -ENOMEM, CMN_EOVERLOAD (the
 * memory budget has no room for it or its batch under the fairness rules) or CMN_EDECOMPRESS,
 * with a reason in |eb|. */
int sut__batcher_add(sut_batcher_t *bt, const sut_owner_t *ow, int codec, const uint8_t *wire,
                     uint64_t wire_size, uint64_t raw_size, cmn_errbuf_t *eb);

/* Zero-copy receive: a batch of its own whose input is |bytes| long, into which a Query frame's
 * uncompressed payload is read straight from the socket. Add the frame's samples in payload order
 * and commit; commit without samples gives the batch back. NULL: out of memory or budget. */
sut_nbatch_t *sut__batcher_sink_open(sut_batcher_t *bt, size_t bytes, sut_peer_t *peer);
void sut__batcher_sink_add(sut_nbatch_t *nb, const sut_owner_t *ow, size_t size);
void sut__batcher_sink_commit(sut_batcher_t *bt, sut_nbatch_t *nb);

/* Dispatches the open batch now (Flush). */
void sut__batcher_flush(sut_batcher_t *bt);
/* From now on every batch goes at once. */
void sut__batcher_drain(sut_batcher_t *bt);
/* Applies the rules above to the open batch (once per loop turn and when an engine frees up). */
void sut__batcher_kick(sut_batcher_t *bt);
/* A batch came back from the workers (SUT_REC_BATCH_DONE): counts it and reuses it. */
void sut__batcher_release(sut_batcher_t *bt, sut_nbatch_t *nb);
/* Cancels the samples owned by |s| (NULL: every sample) in the open and the dispatched batches:
 * the backend's cancel() is told (workers.h); each sample still completes. Returns how many were
 * newly cancelled; 0 when the backend has no cancel(). */
size_t sut__batcher_cancel(sut_batcher_t *bt, const sut_session_t *s);
/* No batch is running and the open one is empty. */
int sut__batcher_idle(const sut_batcher_t *bt);

#endif
