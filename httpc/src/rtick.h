/* The read-coalescing tick both HTTP clients share (httpc.c's libcurl pool, h1_conn.c's lean
 * connections): a timerfd on the caller's libuv loop, armed only while some connection is read on
 * it, and an epoll set of those connections' sockets of its own, asked without waiting on each
 * tick, so a tick costs what is ready, not what is coalesced (a socket stays in the loop's own
 * set too: libuv drops it from there when it next reports it unwatched). Loop thread only. */
#ifndef HTTPC_RTICK_H
#define HTTPC_RTICK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <uv.h>

#define HTTPC_RTICK_BATCH 256 /* ready sockets taken per epoll_wait */

typedef struct {
    uv_poll_t poll; /* on the timerfd; its data is the caller's */
    int fd;         /* the timerfd; -1: coalescing off */
    int epfd;       /* the coalesced sockets */
    uint32_t period_us;
    int on;
    size_t n; /* sockets in the set */
} httpc_rtick_t;

/* Off (period_us 0: nothing made, fd -1) or a timerfd polled on |loop|, |cb| on each expiry with
 * |data| as the poll handle's data. 0, or a negative code with |err| saying what failed. */
int httpc_rtick_init(httpc_rtick_t *t, uv_loop_t *loop, uint32_t period_us, uv_poll_cb cb,
                     void *data, char *err, size_t errlen);
/* Socket |sfd| read on the tick (and, with |out|, written), reported as |who|; arms the tick.
 * 0, or -errno (the caller keeps watching it). */
int httpc_rtick_add(httpc_rtick_t *t, int sfd, void *who, int out);
/* What |sfd| is reported for changes (|out|); 0 or -errno. */
int httpc_rtick_mod(httpc_rtick_t *t, int sfd, void *who, int out);
/* |sfd| off the tick (before it closes, or when it is watched again). */
void httpc_rtick_del(httpc_rtick_t *t, int sfd);
/* In |cb|: the tick's work. Consumes the expiry (nothing more on a spurious wake-up), stops the
 * timer when no socket is left on it, else calls |each| with the |who| and the epoll events of
 * every socket that is ready, HTTPC_RTICK_BATCH at a time, at most one pass over the set (level-
 * triggered: what is left is there on the next tick). The |who|s must stay valid for the whole
 * call (both clients free theirs in the loop's close phase). */
void httpc_rtick_run(httpc_rtick_t *t, void (*each)(void *who, uint32_t events, void *arg),
                     void *arg);
/* Closes the handle (|cb| as uv_close's, NULL allowed), the timerfd and the set. No-op when
 * off. */
void httpc_rtick_close(httpc_rtick_t *t, uv_close_cb cb);

#endif
