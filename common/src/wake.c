/* A loop's wake-up from other threads: an eventfd and one flag (cmn/wake.h says why). */
#include "cmn/wake.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void on_readable(uv_poll_t *p, int status, int events)
{
    cmn_wake_t *w = p->data;
    uint64_t n;

    (void)status; /* an eventfd reports no errors; the callback runs either way */
    (void)events;
    /* Read first, then clear: a send that lands after the clear writes the eventfd again. */
    while (read(w->fd, &n, sizeof(n)) < 0 && errno == EINTR)
        ;
    atomic_store(&w->pending, 0);
    w->cb(w);
}

int cmn_wake_init(uv_loop_t *loop, cmn_wake_t *w, cmn_wake_cb cb)
{
    int rc;

    w->cb = cb;
    w->close_cb = NULL;
    atomic_init(&w->pending, 0);
    w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->fd < 0)
        return uv_translate_sys_error(errno);
    rc = uv_poll_init(loop, &w->poll, w->fd);
    if (rc < 0) {
        close(w->fd);
        w->fd = -1;
        return rc;
    }
    w->poll.data = w;
    /* libuv's unix uv_poll_start has no failure to report (it returns 0 for any valid event
     * mask): nothing is left for a caller to close on failure, only before this point. */
    (void)uv_poll_start(&w->poll, UV_READABLE, on_readable);
    return 0;
}

void cmn_wake_send(cmn_wake_t *w)
{
    static const uint64_t one = 1;

    /* A cheap read first: most sends in a burst find the loop already signalled. */
    if (atomic_load_explicit(&w->pending, memory_order_relaxed))
        return;
    if (atomic_exchange(&w->pending, 1) == 0)
        while (write(w->fd, &one, sizeof(one)) < 0 && errno == EINTR)
            ;
}

static void on_closed(uv_handle_t *h)
{
    cmn_wake_t *w = h->data;

    close(w->fd);
    w->fd = -1;
    if (w->close_cb)
        w->close_cb(w);
}

void cmn_wake_close(cmn_wake_t *w, void (*close_cb)(cmn_wake_t *w))
{
    w->close_cb = close_cb;
    uv_close((uv_handle_t *)&w->poll, on_closed);
}
