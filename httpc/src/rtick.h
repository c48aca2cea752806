/* The read-coalescing tick both HTTP clients share (httpc.c's libcurl pool, h1_conn.c's lean
 * connections): a timerfd on the caller's libuv loop, armed only while some connection is read on
 * it, and one poll() per tick over those connections' sockets. Loop thread only. */
#ifndef HTTPC_RTICK_H
#define HTTPC_RTICK_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct {
    uv_poll_t poll; /* on the timerfd; its data is the caller's */
    int fd;         /* the timerfd; -1: coalescing off */
    uint32_t period_us;
    int on;
    size_t cap;
    struct pollfd *fds;
    void **who; /* the caller's object for each fds[i] */
} httpc_rtick_t;

/* Off (period_us 0: nothing made, fd -1) or a timerfd polled on |loop|, |cb| on each expiry with
 * |data| as the poll handle's data. 0, or -errno with |err| saying what failed. */
int httpc_rtick_init(httpc_rtick_t *t, uv_loop_t *loop, uint32_t period_us, uv_poll_cb cb,
                     void *data, char *err, size_t errlen);
/* Starts (on) or stops the periodic expiry; 0 or -errno. */
int httpc_rtick_arm(httpc_rtick_t *t, int on);
/* In |cb|: consumes the expiry; 1 when the tick is due, 0 when it was not (a spurious wake-up). */
int httpc_rtick_due(httpc_rtick_t *t);
/* Room for |n| sockets in t->fds / t->who: 0, or -ENOMEM (the arrays unchanged). */
int httpc_rtick_room(httpc_rtick_t *t, size_t n);
/* poll() of the first |n| entries without waiting: how many have revents, or <= 0. */
int httpc_rtick_poll(httpc_rtick_t *t, size_t n);
/* Closes the handle (|cb| as uv_close's, NULL allowed) and the timerfd, frees the arrays. No-op
 * when off. */
void httpc_rtick_close(httpc_rtick_t *t, uv_close_cb cb);

#endif
