/* The worker threads: they run the backend on dispatched batches and turn its completions into
 * records (types.h) on the completion queue. An inline backend (SUT_BACKEND_F_INLINE) runs on the
 * loop thread inside sut__workers_submit() instead; its records take the same queue. Records
 * pushed from any thread but the loop's wake the loop (one coalesced wake-up per burst).
 *
 * Results are copied, and LZ4-compressed when the sample's session negotiated it, into pooled
 * buffers on the completing thread, so the loop thread only frames them. The last completion of a
 * batch is followed on the queue by the batch itself (SUT_REC_BATCH_DONE), so the loop sees every
 * result of a batch before it can reuse the batch.
 *
 * Threads: init, submit and shutdown on the loop thread; the rest runs on worker threads (or
 * whatever thread the backend completes on). */
#ifndef SUT_WORKERS_H
#define SUT_WORKERS_H

#include "budget.h"
#include "cmn/err.h"
#include "cmn/pool.h"
#include "types.h"

#include <uv.h>

typedef struct {
    const sut_be_t *be;
    cmn_xq_t *done_q;
    cmn_pool_t *pool;
    sut_budget_t *budget;    /* charged with every result's buffer until it is sent */
    int inline_run;          /* the backend runs on the loop thread */
    uv_thread_t loop_thread; /* pushes from it need no wake-up (workers.c, hand_over) */
    uv_mutex_t mu;           /* guards head, tail, stop and the failure log's counts */
    uv_cond_t cv;
    sut_nbatch_t *head, *tail;
    int stop;
    uint64_t flog_window_ns, flog_dropped; /* failed samples logged (workers.c, log_failure) */
    unsigned flog_n;
    int ready; /* mu and cv exist */
    uv_thread_t *threads;
    uint32_t n_threads;
    atomic_uint_fast64_t encode_ns; /* result compression time (any thread) */
    sut_obs_t *_Atomic obs;         /* metrics.c's series, or NULL (set once, loop thread) */
    int streaming;                  /* the backend streams tokens (int32 token-id samples) */
} sut_workers_t;

/* Starts |n_threads| threads (none for an inline backend). Returns 0 or a negative code with a
 * reason in |eb|; sut__workers_shutdown() undoes a partial start. */
int sut__workers_init(sut_workers_t *w, const sut_be_t *be, cmn_xq_t *done_q, cmn_pool_t *pool,
                      sut_budget_t *budget, uint32_t n_threads, cmn_errbuf_t *eb);
/* Hands a formed batch to the backend. */
void sut__workers_submit(sut_workers_t *w, sut_nbatch_t *nb);
/* Marks samples idx[0..k) of a submitted batch cancelled and tells the backend (its cancel(),
 * when it has one): at once when the backend has started the batch, else right after its infer()
 * returns. Loop thread; the batch must not have been released yet. */
void sut__workers_cancel(sut_workers_t *w, sut_nbatch_t *nb, const size_t *idx, size_t k);
/* Stops and joins the threads; batches still queued are not run. */
void sut__workers_shutdown(sut_workers_t *w);
uint64_t sut__workers_encode_ns(sut_workers_t *w);

#endif
