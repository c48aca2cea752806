/* A tcp:// connection's write thread (writer.c), used by tcp.c. Calls flow from tcp.c to
 * writer.c; writer.c reaches back through the hooks tcp.c hands it, always on the loop thread, with
 * the owner's pointer (it knows no connection).
 *
 * Why a thread: on one TCP connection the kernel's copy of a large payload into the socket (and,
 * over loopback, the receiver's TCP work done in the sender's context) runs in the thread that
 * calls sendmsg. With the loop thread doing it, one core carries every connection's copies; with a
 * thread per connection, a sender of several connections spreads them over the cores
 * (bench/README.md, "Offline: spreading the copies"). */
#ifndef CMN_WRITER_INTERNAL_H
#define CMN_WRITER_INTERNAL_H

#include <stddef.h>
#include <uv.h>

typedef struct cmn__writer cmn__writer_t;

/* One unit of work handed to the writer, embedded in the caller's batch. The buffers must stay
 * valid, and unchanged, until the job comes back through hooks->done. */
typedef struct cmn__wjob {
    struct cmn__wjob *next; /* the writer's queues */
    const uv_buf_t *bufs;
    size_t nbufs;
    size_t bytes;
    int status; /* set by the writer: 0, a negative errno, or UV_ECANCELED */
} cmn__wjob_t;

typedef struct {
    /* On the loop thread, in the order the jobs were pushed: |job| was written (status 0) or
     * not (the write failed, or the writer stopped first). */
    void (*done)(void *owner, cmn__wjob_t *job);
    /* The writer's loop handle is closed and its memory freed. */
    void (*released)(void *owner);
} cmn__writer_hooks_t;

/* Starts the thread writing to |fd| (the connection's socket, non-blocking; reads stay with
 * libuv) into |*out|. Returns 0 or a negative code (|*out| untouched). */
int cmn__writer_start(uv_loop_t *loop, int fd, const cmn__writer_hooks_t *hooks, void *owner,
                      cmn__writer_t **out);

/* Queues |job| behind the jobs already pushed (loop thread). */
void cmn__writer_push(cmn__writer_t *w, cmn__wjob_t *job);

/* Stops and joins the thread (it never blocks in the kernel: the socket is non-blocking and its
 * wait for room is woken), reports every job not yet reported (written ones with their status,
 * the rest with UV_ECANCELED) and closes the loop handle; hooks->released follows. Call before
 * the socket is closed. Loop thread. */
void cmn__writer_stop(cmn__writer_t *w);

#endif
