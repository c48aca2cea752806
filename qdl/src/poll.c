/* The loop lent to a caller's thread: qdl_poll_begin() parks the loop thread and the caller runs
 * the loop itself with qdl_poll() until qdl_poll_end() gives it back.
 *
 * Why: on a host with few cores a Server issue thread that spins between issues and a QDL loop
 * thread woken per issue are two busy threads where one will do. Lent, the loop runs in the issue
 * thread's spare time: a query issued there is dispatched at once, with no hand-off, no wake-up
 * and no context switch, and the frames leave in the next qdl_poll() (never held back to join
 * others: the QDL does not batch queries, rules 6.2.1).
 *
 * The hand-over: RQ_PARK makes the loop thread's uv_run() return after its turn (uv_stop); the
 * loop thread answers the request (the semaphore orders everything it did before the caller's
 * first qdl_poll) and waits on park_cv. qdl_poll_end() clears |parked| under park_mu, which orders
 * the caller's loop work before the loop thread's next turn. Requests from other threads keep
 * arriving through the request queue and are run by whichever thread runs the loop. */
#include "qdl_internal.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

/* The QDL whose loop this thread has been lent, if any (one at a time per thread). */
static _Thread_local qdl_t *lent;

void qdl__block_sigpipe(sigset_t *old)
{
    sigset_t pipe_only;

    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, old);
}

int qdl__is_poller(const qdl_t *q)
{
    return lent == q;
}

void qdl__park(qdl_t *q)
{
    qdl_req_t *r = q->park_req;

    q->park_req = NULL;
    uv_mutex_lock(&q->park_mu);
    q->parked = 1;
    uv_mutex_unlock(&q->park_mu);
    qdl__req_done(r, 0);
    uv_mutex_lock(&q->park_mu);
    while (q->parked)
        uv_cond_wait(&q->park_cv, &q->park_mu);
    uv_mutex_unlock(&q->park_mu);
}

/* Runs |r| on the thread that runs the loop and waits for it; a polling thread runs the loop
 * itself meanwhile. */
int qdl__sync_req(qdl_t *q, qdl_req_t *r)
{
    int rc = uv_sem_init(&r->done, 0);
    if (rc < 0)
        return rc;
    cmn_xq_push(&q->reqs, &r->link);
    if (qdl__is_poller(q)) {
        while (uv_sem_trywait(&r->done) != 0)
            qdl_poll(q, 1000000u);
    } else {
        uv_sem_wait(&r->done);
    }
    uv_sem_destroy(&r->done);
    return r->rc;
}

int qdl_poll_begin(qdl_t *q)
{
    qdl_req_t r;
    int rc;

    if (lent)
        return lent == q ? 0 : UV_EBUSY;
    /* UCX's worker keeps to the thread that created it. */
    if (q->ucx)
        return UV_ENOTSUP;
    memset(&r, 0, sizeof(r));
    r.kind = RQ_PARK;
    rc = qdl__sync_req(q, &r);
    if (rc < 0)
        return rc;
    /* This thread now writes to the sockets: SIGPIPE blocked as on the loop thread. */
    qdl__block_sigpipe(&q->poll_oldmask);
    lent = q;
    return 0;
}

int qdl_poll(qdl_t *q, uint64_t timeout_ns)
{
    uint64_t wait = timeout_ns;
    int ms, rc = 0;

    if (lent != q)
        return UV_EINVAL;
    uv_run(&q->loop, UV_RUN_NOWAIT);
    if (!timeout_ns)
        return 0;
    /* uv_backend_timeout(): 0 when the loop has work now (frames to flush, closing handles),
     * else the milliseconds to its next timer, or -1 for none. */
    ms = uv_backend_timeout(&q->loop);
    if (ms == 0) {
        uv_run(&q->loop, UV_RUN_NOWAIT);
        return 0;
    }
    if (ms > 0 && (uint64_t)ms * 1000000u < wait)
        wait = (uint64_t)ms * 1000000u;
    {
        struct pollfd p = {.fd = uv_backend_fd(&q->loop), .events = POLLIN};
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u),
                              .tv_nsec = (long)(wait % 1000000000u)};

        rc = ppoll(&p, 1, &ts, NULL);
    }
    uv_run(&q->loop, UV_RUN_NOWAIT);
    return rc > 0 ? 1 : 0;
}

void qdl_poll_end(qdl_t *q)
{
    sigset_t pipe_only, pending;
    struct timespec zero = {0, 0};

    if (lent != q)
        return;
    lent = NULL;
    /* A node that closed mid-write left a SIGPIPE pending on this thread: taken here, never
     * delivered to the host program, unless the host had SIGPIPE blocked itself. */
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if (!sigismember(&q->poll_oldmask, SIGPIPE) && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGPIPE))
        (void)sigtimedwait(&pipe_only, NULL, &zero);
    pthread_sigmask(SIG_SETMASK, &q->poll_oldmask, NULL);
    /* Frames still queued leave on the loop thread's first turn (their idle handle is active). */
    uv_mutex_lock(&q->park_mu);
    q->parked = 0;
    uv_cond_signal(&q->park_cv);
    uv_mutex_unlock(&q->park_mu);
}
