/* The read-coalescing tick (rtick.h). */
#include "rtick.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

int httpc_rtick_init(httpc_rtick_t *t, uv_loop_t *loop, uint32_t period_us, uv_poll_cb cb,
                     void *data, char *err, size_t errlen)
{
    int rc;

    memset(t, 0, sizeof(*t));
    t->fd = t->epfd = -1;
    t->period_us = period_us;
    if (!period_us)
        return 0;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->epfd >= 0)
        t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t->fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "the read-coalescing timer: %s", strerror(errno));
        if (t->epfd >= 0)
            close(t->epfd);
        t->epfd = -1;
        return rc;
    }
    rc = uv_poll_init(loop, &t->poll, t->fd);
    if (rc == 0)
        rc = uv_poll_start(&t->poll, UV_READABLE, cb);
    if (rc < 0) {
        snprintf(err, errlen, "the read-coalescing timer: %s", uv_strerror(rc));
        close(t->fd);
        close(t->epfd);
        t->fd = t->epfd = -1;
        return rc;
    }
    t->poll.data = data;
    return 0;
}

/* Starts (on) or stops the periodic expiry; 0 or -errno. */
static int arm(httpc_rtick_t *t, int on)
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

static int ctl(httpc_rtick_t *t, int op, int sfd, void *who, int out)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0);
    ev.data.ptr = who;
    return epoll_ctl(t->epfd, op, sfd, &ev) < 0 ? -errno : 0;
}

int httpc_rtick_add(httpc_rtick_t *t, int sfd, void *who, int out)
{
    int rc;

    if (t->fd < 0)
        return -ENOTSUP;
    if (!t->on && (rc = arm(t, 1)) < 0)
        return rc;
    if ((rc = ctl(t, EPOLL_CTL_ADD, sfd, who, out)) < 0)
        return rc;
    t->n++;
    return 0;
}

int httpc_rtick_mod(httpc_rtick_t *t, int sfd, void *who, int out)
{
    return ctl(t, EPOLL_CTL_MOD, sfd, who, out);
}

void httpc_rtick_del(httpc_rtick_t *t, int sfd)
{
    if (epoll_ctl(t->epfd, EPOLL_CTL_DEL, sfd, NULL) == 0)
        t->n--;
}

void httpc_rtick_run(httpc_rtick_t *t, void (*each)(void *who, uint32_t events, void *arg),
                     void *arg)
{
    struct epoll_event ev[HTTPC_RTICK_BATCH];
    size_t rounds = t->n / HTTPC_RTICK_BATCH + 1;
    uint64_t expirations;
    int n;

    if (read(t->fd, &expirations, sizeof(expirations)) != (ssize_t)sizeof(expirations))
        return; /* not due */
    if (!t->n) {
        (void)arm(t, 0);
        return;
    }
    do {
        do
            n = epoll_wait(t->epfd, ev, HTTPC_RTICK_BATCH, 0);
        while (n < 0 && errno == EINTR);
        for (int i = 0; i < n; i++)
            each(ev[i].data.ptr, ev[i].events, arg);
    } while (n == HTTPC_RTICK_BATCH && --rounds);
}

void httpc_rtick_close(httpc_rtick_t *t, uv_close_cb cb)
{
    if (t->fd < 0)
        return;
    uv_close((uv_handle_t *)&t->poll, cb); /* stops polling the fd: it may close now */
    close(t->fd);
    close(t->epfd);
    t->fd = t->epfd = -1;
    t->n = 0;
}
