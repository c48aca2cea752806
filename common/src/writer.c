/* A tcp:// connection's write thread (writer_internal.h says why and the contract).
 *
 * Events flow one way: the loop thread pushes jobs onto |todo|; the thread writes each in turn
 * and moves it onto |done|, then wakes the loop (cmn_wake); the loop reports the done jobs to
 * tcp.c one at a time, so a report that closes the connection leaves the rest to
 * cmn__writer_stop, which reports them in the same order. Nothing else is shared: the thread
 * touches only the socket, the jobs it holds and the two lists (under |mu|). */
#include "writer_internal.h"

#include "cmn/wake.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* iovecs per sendmsg: a job may hold more buffers than one call takes (IOV_MAX is 1024). */
#define IOV_STEP 256

struct cmn__writer {
    cmn_wake_t wake;
    void *owner;
    const cmn__writer_hooks_t *hooks;
    int stopped; /* cmn__writer_stop was called (loop thread) */
    int fd;
    int wake_fd; /* eventfd: wakes the thread's wait for room when it is to stop */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cmn__wjob_t *todo_head, *todo_tail; /* pushed, not yet taken by the thread */
    cmn__wjob_t *done_head, *done_tail; /* written (or failed), not yet reported */
    atomic_int stop;
    int failed; /* the thread's first write error: every later job fails with it unwritten */
};

static void list_push(cmn__wjob_t **head, cmn__wjob_t **tail, cmn__wjob_t *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static cmn__wjob_t *list_pop(cmn__wjob_t **head, cmn__wjob_t **tail)
{
    cmn__wjob_t *j = *head;

    if (j) {
        *head = j->next;
        if (!*head)
            *tail = NULL;
        j->next = NULL;
    }
    return j;
}

/* Waits until the socket takes more, or the writer is to stop (UV_ECANCELED). */
static int wait_room(cmn__writer_t *w)
{
    struct pollfd p[2];

    for (;;) {
        if (atomic_load(&w->stop))
            return UV_ECANCELED;
        p[0].fd = w->fd;
        p[0].events = POLLOUT;
        p[0].revents = 0;
        p[1].fd = w->wake_fd;
        p[1].events = POLLIN;
        p[1].revents = 0;
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return uv_translate_sys_error(errno);
        }
        if (p[1].revents)
            return UV_ECANCELED;
        if (p[0].revents)
            return 0; /* room, or an error the next sendmsg reports */
    }
}

/* Writes all of |job|: 0, a negative errno (the peer reset, ...) or UV_ECANCELED. */
static int write_job(cmn__writer_t *w, const cmn__wjob_t *job)
{
    struct iovec iov[IOV_STEP];
    size_t i = 0, off = 0; /* the first buffer not fully written, and how much of it is */

    while (i < job->nbufs) {
        struct msghdr m;
        size_t n = 0, k, left;
        ssize_t r;

        for (k = i; k < job->nbufs && n < IOV_STEP; k++, n++) {
            size_t skip = k == i ? off : 0;
            iov[n].iov_base = job->bufs[k].base + skip;
            iov[n].iov_len = job->bufs[k].len - skip;
        }
        memset(&m, 0, sizeof(m));
        m.msg_iov = iov;
        m.msg_iovlen = n;
        r = sendmsg(w->fd, &m, MSG_NOSIGNAL); /* a closed peer is EPIPE, never a signal */
        if (r < 0) {
            int rc;
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return uv_translate_sys_error(errno);
            if ((rc = wait_room(w)) < 0)
                return rc;
            continue;
        }
        for (left = (size_t)r; i < job->nbufs;) {
            size_t rem = job->bufs[i].len - off;
            if (left < rem) {
                off += left;
                break;
            }
            left -= rem;
            i++;
            off = 0;
        }
    }
    return 0;
}

static void *writer_main(void *arg)
{
    cmn__writer_t *w = arg;

    prctl(PR_SET_NAME, "nsut-writer", 0, 0, 0);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        cmn__wjob_t *j;

        while (!atomic_load(&w->stop) && !w->todo_head)
            pthread_cond_wait(&w->cv, &w->mu);
        if (atomic_load(&w->stop))
            break;
        j = list_pop(&w->todo_head, &w->todo_tail);
        pthread_mutex_unlock(&w->mu);
        j->status = w->failed ? w->failed : write_job(w, j);
        if (j->status < 0 && j->status != UV_ECANCELED)
            w->failed = j->status;
        pthread_mutex_lock(&w->mu);
        list_push(&w->done_head, &w->done_tail, j);
        pthread_mutex_unlock(&w->mu);
        cmn_wake_send(&w->wake);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Reports done jobs one at a time: a report may stop the writer (the connection closes), and
 * cmn__writer_stop then reports the rest in order. */
static void on_wake(cmn_wake_t *k)
{
    cmn__writer_t *w = k->data;

    while (!w->stopped) {
        cmn__wjob_t *j;
        pthread_mutex_lock(&w->mu);
        j = list_pop(&w->done_head, &w->done_tail);
        pthread_mutex_unlock(&w->mu);
        if (!j)
            break;
        w->hooks->done(w->owner, j);
    }
}

/* The handle is closed: the memory goes. Alone when the thread never started (nothing to
 * report); after every job was reported otherwise. */
static void on_closed_unstarted(cmn_wake_t *k)
{
    cmn__writer_t *w = k->data;

    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    close(w->wake_fd);
    free(w);
}

static void on_closed(cmn_wake_t *k)
{
    cmn__writer_t *w = k->data;
    void *owner = w->owner;
    const cmn__writer_hooks_t *hooks = w->hooks;

    on_closed_unstarted(k);
    hooks->released(owner);
}

int cmn__writer_start(uv_loop_t *loop, int fd, const cmn__writer_hooks_t *hooks, void *owner,
                      cmn__writer_t **out)
{
    cmn__writer_t *w = calloc(1, sizeof(*w));
    sigset_t all, old;
    int rc;

    if (!w)
        return -ENOMEM;
    w->owner = owner;
    w->hooks = hooks;
    w->fd = fd;
    atomic_init(&w->stop, 0);
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0) {
        rc = uv_translate_sys_error(errno);
        free(w);
        return rc;
    }
    rc = cmn_wake_init(loop, &w->wake, on_wake);
    if (rc < 0) {
        close(w->wake_fd);
        free(w);
        return rc;
    }
    w->wake.data = w;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* The thread takes no signal: they stay with the threads the host program chose. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        cmn_wake_close(&w->wake, on_closed_unstarted);
        return -rc;
    }
    *out = w;
    return 0;
}

void cmn__writer_push(cmn__writer_t *w, cmn__wjob_t *job)
{
    job->status = 0;
    pthread_mutex_lock(&w->mu);
    list_push(&w->todo_head, &w->todo_tail, job);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void cmn__writer_stop(cmn__writer_t *w)
{
    uint64_t one = 1;
    cmn__wjob_t *j;

    w->stopped = 1;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (write(w->wake_fd, &one, sizeof(one)) < 0) {
        /* An eventfd write fails only when its counter would overflow: it is non-zero then,
         * so the thread is woken anyway. */
    }
    pthread_join(w->thread, NULL);
    /* One thread again: written jobs first, then the ones never taken, in push order. */
    while ((j = list_pop(&w->done_head, &w->done_tail)) != NULL)
        w->hooks->done(w->owner, j);
    while ((j = list_pop(&w->todo_head, &w->todo_tail)) != NULL) {
        j->status = UV_ECANCELED;
        w->hooks->done(w->owner, j);
    }
    cmn_wake_close(&w->wake, on_closed);
}
