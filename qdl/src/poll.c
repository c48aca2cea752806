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
 * arriving through the request queue and are run by whichever thread runs the loop.
 *
 * With lend_write_thread the polling thread writes nothing into a socket: while lent, every tcp://
 * connection hands each batch to its write thread (common/src/writer.c; one wake-up per batch at
 * most, none while the thread is still writing), which writes it with one sendmsg and hands it
 * back to the loop (its cmn_wake: the sent callbacks, the backlog and the write accounting run in
 * a later qdl_poll(), as without the thread). So a Server issue thread's turns never block in the
 * kernel's loopback send on a deadline's path; the frames of a connection keep their order.
 *
 * A part the polling thread queues in qdl_issue_query() is written at the start of its next
 * qdl_poll(), before that turn reads responses, which may be some microseconds later (loadgen-node
 * keeps a quiet window before each issue): its samples' sent_ns is stamped then (write_unsent; with
 * lend_write_thread, when the batch is handed to the write thread), so
 * the QDL queueing a caller reports includes the wait. Samples are found again by wire id, so one
 * completed, failed or moved to another connection meanwhile (a new wire id) is not touched. */
#include "qdl_internal.h"

#include "cmn/clock.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
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

void qdl__note_unsent(qdl_t *q, qdl_conn_t *qc, uint64_t first_wire_id, size_t n)
{
    if (q->n_unsent == q->cap_unsent) {
        size_t cap = q->cap_unsent ? q->cap_unsent * 2 : 64;
        qdl_unsent_t *u = realloc(q->unsent, cap * sizeof(*u));

        if (!u)
            return; /* the samples keep the time they were queued */
        q->unsent = u;
        q->cap_unsent = cap;
    }
    q->unsent[q->n_unsent++] = (qdl_unsent_t){qc, first_wire_id, n};
}

/* Writes the parts the polling thread queued since its last turn, before the turn's reads, and
 * stamps their samples' sent_ns with the time they were handed to the kernel. */
static void write_unsent(qdl_t *q)
{
    uint64_t now;
    size_t i, k;

    if (!q->n_unsent)
        return;
    now = cmn_now_ns();
    for (i = 0; i < q->n_unsent; i++) {
        const qdl_unsent_t *u = &q->unsent[i];

        cmn_conn_flush(&u->conn->c);
        for (k = 0; k < u->n; k++) {
            qdl_srec_t *s = cmn_idmap_get(&u->conn->inflight, u->first_wire_id + k);

            if (s)
                s->sent_ns = now;
        }
    }
    q->n_unsent = 0;
}

/* One turn of the loop without blocking. Parts queued inside it (a result made room) leave in
 * its check phase, as on the loop thread, with the time they were queued. */
static void turn(qdl_t *q)
{
    write_unsent(q);
    q->in_turn = 1;
    uv_run(&q->loop, UV_RUN_NOWAIT);
    q->in_turn = 0;
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
    /* Or their write threads do: this thread only queues each batch and wakes the thread. */
    if (q->cfg.lend_write_thread)
        qdl__conns_lend_writes(q, 1);
    return 0;
}

int qdl_poll(qdl_t *q, uint64_t timeout_ns)
{
    uint64_t wait = timeout_ns;
    int ms, rc = 0;

    if (lent != q)
        return UV_EINVAL;
    turn(q);
    if (!timeout_ns)
        return 0;
    /* uv_backend_timeout(): 0 when the loop has work now (frames to flush, closing handles),
     * else the milliseconds to its next timer, or -1 for none. */
    ms = uv_backend_timeout(&q->loop);
    if (ms == 0) {
        turn(q);
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
    turn(q);
    return rc > 0 ? 1 : 0;
}

void qdl_poll_end(qdl_t *q)
{
    sigset_t pipe_only, pending;
    struct timespec zero = {0, 0};

    if (lent != q)
        return;
    if (q->cfg.lend_write_thread)
        qdl__conns_lend_writes(q, 0);
    lent = NULL;
    /* Frames still queued leave on the loop thread: they keep the time they were queued. */
    q->n_unsent = 0;
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
