/* The read-coalescing tick (rtick.h). */
#include "rtick.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

int httpc_rtick_init(httpc_rtick_t *t, uv_loop_t *loop, uint32_t period_us, uv_poll_cb cb,
                     void *data, char *err, size_t errlen)
{
    int rc;

    memset(t, 0, sizeof(*t));
    t->fd = -1;
    t->period_us = period_us;
    if (!period_us)
        return 0;
    t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t->fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "the read-coalescing timer: %s", strerror(errno));
        return rc;
    }
    rc = uv_poll_init(loop, &t->poll, t->fd);
    if (rc == 0)
        rc = uv_poll_start(&t->poll, UV_READABLE, cb);
    if (rc < 0) {
        snprintf(err, errlen, "the read-coalescing timer: %s", uv_strerror(rc));
        close(t->fd);
        t->fd = -1;
        return rc;
    }
    t->poll.data = data;
    return 0;
}

int httpc_rtick_arm(httpc_rtick_t *t, int on)
{
    struct itimerspec its;

    memset(&its, 0, sizeof(its));
    if (on) {
        its.it_interval.tv_sec = t->period_us / 1000000u;
        its.it_interval.tv_nsec = (long)(t->period_us % 1000000u) * 1000;
        its.it_value = its.it_interval;
    }
    if (timerfd_settime(t->fd, 0, &its, NULL) < 0)
        return -errno;
    t->on = on;
    return 0;
}

int httpc_rtick_due(httpc_rtick_t *t)
{
    uint64_t expirations;

    return read(t->fd, &expirations, sizeof(expirations)) == (ssize_t)sizeof(expirations);
}

int httpc_rtick_room(httpc_rtick_t *t, size_t n)
{
    size_t ncap = n * 2;
    struct pollfd *nf;
    void **nw;

    if (t->cap >= n)
        return 0;
    nf = realloc(t->fds, ncap * sizeof(*nf));
    if (!nf)
        return -ENOMEM;
    t->fds = nf;
    nw = realloc(t->who, ncap * sizeof(*nw));
    if (!nw)
        return -ENOMEM;
    t->who = nw;
    t->cap = ncap;
    return 0;
}

int httpc_rtick_poll(httpc_rtick_t *t, size_t n)
{
    return n ? poll(t->fds, (nfds_t)n, 0) : 0;
}

void httpc_rtick_close(httpc_rtick_t *t, uv_close_cb cb)
{
    if (t->fd < 0)
        return;
    uv_close((uv_handle_t *)&t->poll, cb); /* stops polling the fd: it may close now */
    close(t->fd);
    t->fd = -1;
    free(t->fds);
    free(t->who);
    t->fds = NULL;
    t->who = NULL;
    t->cap = 0;
}
