/* The TCP socket under tcp:// and TLS, and the plain tcp:// transport (tcp_internal.h): reads go
 * to the core's decoder (a large frame's body straight into place), a turn's batch leaves with
 * one uv_try_write, what the kernel does not take at once through uv_write, and large batches
 * through the optional write thread (writer.c). */
#include "tcp_internal.h"
#include "cmn/err.h"
#include "cmn/net.h"
#include "writer_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct cmn__tcp {
    uv_tcp_t h;
    uv_connect_t connect_req;
    uv_shutdown_t shutdown_req;
    cmn__core_t *k;
    int closed;              /* uv_close was called */
    cmn__writer_t *writer;   /* NULL: every write from the loop thread (write_thread_min) */
    size_t writer_bytes;     /* handed to the writer, not yet reported back */
    int writer_shutdown_due; /* the shutdown waits for the writer to finish */
    void *upper;             /* TLS's state */
    void (*upper_free)(void *upper);
};

/* A batch the write thread writes. */
typedef struct {
    cmn__wjob_t job;
    cmn__batch_t *b;
} wjob_t;

static cmn__tcp_t *tcp_of(const cmn__core_t *k)
{
    return k->tp;
}

int cmn__tcp_attach(cmn__core_t *k)
{
    cmn__tcp_t *t = calloc(1, sizeof(*t));
    int rc;

    if (!t)
        return -ENOMEM;
    rc = uv_tcp_init(k->loop, &t->h);
    if (rc < 0) {
        free(t);
        return rc;
    }
    t->k = k;
    t->h.data = k;
    cmn__core_hold(k); /* released when the handle is closed */
    cmn__core_attach(k, &cmn__tcp_ops, t);
    return 0;
}

void cmn__tcp_set_upper(cmn__core_t *k, void *upper, void (*free_fn)(void *upper))
{
    cmn__tcp_t *t = tcp_of(k);
    t->upper = upper;
    t->upper_free = free_fn;
}

void *cmn__tcp_upper(const cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);
    return t ? t->upper : NULL;
}

uv_stream_t *cmn__tcp_stream(const cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);
    return t && !t->closed ? (uv_stream_t *)&t->h : NULL;
}

size_t cmn__tcp_writer_bytes(const cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);
    return t ? t->writer_bytes : 0;
}

static void on_connect(uv_connect_t *req, int status)
{
    cmn__core_connected(req->data, status);
}

int cmn__tcp_connect(cmn__core_t *k, const struct sockaddr *addr)
{
    cmn__tcp_t *t = tcp_of(k);

    cmn_addr_format(addr, k->peer, sizeof(k->peer));
    t->connect_req.data = k;
    return uv_tcp_connect(&t->connect_req, &t->h, addr, on_connect);
}

static void peer_name(cmn__core_t *k)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);

    if (uv_tcp_getpeername(&tcp_of(k)->h, (struct sockaddr *)&ss, &len) == 0)
        cmn_addr_format((struct sockaddr *)&ss, k->peer, sizeof(k->peer));
}

int cmn__tcp_accept(cmn__core_t *k, uv_stream_t *server)
{
    int rc = uv_accept(server, (uv_stream_t *)&tcp_of(k)->h);
    if (rc == 0)
        peer_name(k);
    return rc;
}

int cmn__tcp_prepare(cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);
    int rc;

    peer_name(k);
    /* Nagle plus delayed ACKs stalls request/response traffic by tens of ms; frames are already
     * gathered per loop turn in user space. */
    rc = uv_tcp_nodelay(&t->h, 1);
    if (rc < 0)
        return rc;
    if (k->opt.keepalive_s) {
        rc = uv_tcp_keepalive(&t->h, 1, k->opt.keepalive_s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int cmn__tcp_read_arrived(cmn__core_t *k, ssize_t nread)
{
    if (nread < 0) {
        if (nread != UV_EOF)
            cmn__core_set_error(k, "read error: %s", cmn_strerror((int)nread));
        cmn__core_close(k, nread == UV_EOF ? CMN_ECLOSED : (int)nread);
        return 0;
    }
    if (nread == 0 || k->closing)
        return 0;
    cmn__core_received(k, (size_t)nread);
    return 1;
}

void cmn__tcp_read_stop(cmn__core_t *k)
{
    uv_stream_t *s = cmn__tcp_stream(k);
    if (s)
        uv_read_stop(s);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    cmn__core_t *k = req->data;
    (void)status;
    cmn__core_close(k, k->close_reason);
}

void cmn__tcp_fin(cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);

    t->shutdown_req.data = k;
    if (uv_shutdown(&t->shutdown_req, (uv_stream_t *)&t->h, on_shutdown) < 0)
        cmn__core_close(k, k->close_reason);
}

static void on_closed(uv_handle_t *h)
{
    cmn__core_t *k = h->data;
    cmn__tcp_t *t = tcp_of(k);

    if (t->upper_free)
        t->upper_free(t->upper);
    free(t);
    cmn__core_attach(k, k->ops, NULL);
    cmn__core_released(k);
}

void cmn__tcp_close(cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);

    /* The write thread stops before the socket closes under it; what it had not written is
     * reported cancelled, in order. */
    if (t->writer) {
        cmn__writer_t *w = t->writer;
        t->writer = NULL;
        cmn__writer_stop(w);
    }
    /* Writes already handed to libuv complete with UV_ECANCELED before the close callback. */
    t->closed = 1;
    uv_close((uv_handle_t *)&t->h, on_closed);
}

/* ---- Plain tcp:// ---------------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    cmn__core_read_buf(h->data, 1, buf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cmn__core_t *k = s->data;

    if (!cmn__tcp_read_arrived(k, nread))
        return;
    (void)cmn__core_feed(k, (const uint8_t *)buf->base, (size_t)nread);
    cmn__core_read_done(k);
}

static int tcp_read_start(cmn__core_t *k)
{
    return uv_read_start((uv_stream_t *)&tcp_of(k)->h, on_alloc, on_read);
}

/* The write thread is done with a batch: as on_write, on the loop thread. A failed write closes
 * the connection, naming the error. */
static void on_writer_done(void *owner, cmn__wjob_t *job)
{
    cmn__core_t *k = owner;
    cmn__tcp_t *t = tcp_of(k);
    wjob_t *wj = (wjob_t *)(void *)((char *)job - offsetof(wjob_t, job));
    cmn__batch_t *b = wj->b;
    int status = job->status;

    free(wj);
    t->writer_bytes -= b->bytes;
    cmn__core_sent(k, b, status);
    if (status < 0 && k->closing != 2) {
        cmn__core_set_error(k, "write error: %s", cmn_strerror(status));
        cmn__core_close(k, status);
        return;
    }
    if (t->writer_shutdown_due && !t->writer_bytes && k->closing == 1) {
        t->writer_shutdown_due = 0;
        cmn__tcp_fin(k);
    }
}

static void on_writer_released(void *owner)
{
    cmn__core_released(owner);
}

static const cmn__writer_hooks_t writer_hooks = {on_writer_done, on_writer_released};

static int tcp_start(cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);
    int rc = cmn__tcp_prepare(k);

    if (rc < 0)
        return rc;
    if (k->opt.write_thread_min && !t->writer) {
        uv_os_fd_t fd;
        if ((rc = uv_fileno((uv_handle_t *)&t->h, &fd)) < 0 ||
            (rc = cmn__writer_start(k->loop, fd, &writer_hooks, k, &t->writer)) < 0)
            return rc;
        cmn__core_hold(k); /* released once the writer's handle closes */
    }
    return tcp_read_start(k);
}

static void on_write(uv_write_t *req, int status)
{
    cmn__batch_t *b = req->data;
    cmn__core_sent(b->core, b, status);
}

/* Writes what the kernel takes of |b| at once. Returns 1 when the batch is done (written and
 * completed, or failed and the connection closed), 0 when bytes remain: |b|'s buffers then start
 * at the first byte not written. */
static int try_write(cmn__core_t *k, cmn__batch_t *b)
{
    size_t i = 0;
    int n = uv_try_write((uv_stream_t *)&tcp_of(k)->h, b->bufs, (unsigned)b->nbufs);

    if (n == UV_EAGAIN || n == UV_ENOSYS)
        return 0;
    if (n < 0) {
        cmn__core_refused(k, b, n);
        return 1;
    }
    if ((size_t)n == b->bytes) {
        cmn__core_sent(k, b, 0);
        return 1;
    }
    /* A partial write: drop the buffers the kernel took and trim the one it took part of. The
     * batch keeps its size; on_write accounts for all of it when the rest is written. */
    for (; n > 0 && (size_t)n >= b->bufs[i].len; i++)
        n -= (int)b->bufs[i].len;
    b->bufs[i].base += n;
    b->bufs[i].len -= (size_t)n;
    memmove(b->bufs, b->bufs + i, (b->nbufs - i) * sizeof(*b->bufs));
    b->nbufs -= i;
    return 0;
}

static void tcp_write(cmn__core_t *k, cmn__batch_t *b)
{
    cmn__tcp_t *t = tcp_of(k);
    int rc;

    /* Frames never overtake each other: while one path (the write thread, libuv) has bytes
     * outstanding, the batch follows them; when neither has, the batch's size chooses. */
    if (t->writer && (t->writer_bytes > 0 ||
                      (k->bytes_writing == b->bytes && b->bytes >= k->opt.write_thread_min))) {
        wjob_t *wj = malloc(sizeof(*wj));
        if (!wj) {
            cmn__core_refused(k, b, -ENOMEM);
            return;
        }
        wj->b = b;
        wj->job.bufs = b->bufs;
        wj->job.nbufs = b->nbufs;
        wj->job.bytes = b->bytes;
        t->writer_bytes += b->bytes;
        k->st.batches_thread++;
        cmn__writer_push(t->writer, &wj->job);
        return;
    }
    /* Try the write now: when the kernel takes the whole batch (the usual case below the
     * socket buffer's size) it completes here, and libuv never arms the socket for writing, an
     * epoll_ctl per batch saved; what remains goes through uv_write. */
    if (try_write(k, b) != 0)
        return;
    b->req.data = b;
    rc = uv_write(&b->req, (uv_stream_t *)&t->h, b->bufs, (unsigned)b->nbufs, on_write);
    if (rc < 0)
        cmn__core_refused(k, b, rc);
}

static void tcp_shutdown(cmn__core_t *k)
{
    cmn__tcp_t *t = tcp_of(k);

    if (t->writer_bytes) {
        t->writer_shutdown_due = 1; /* on_writer_done finishes once the thread has written all */
        return;
    }
    cmn__tcp_fin(k);
}

static void tcp_describe(const cmn__core_t *k, char *buf, size_t len)
{
    cmn__tcp_t *t = tcp_of(k);
    snprintf(buf, len, "tcp%s", t && t->writer ? "+write-thread" : "");
}

int cmn__tcp_fileno(const cmn__core_t *k)
{
    uv_stream_t *s = cmn__tcp_stream(k);
    uv_os_fd_t fd;
    int rc;

    if (!s)
        return CMN_ECLOSED;
    rc = uv_fileno((const uv_handle_t *)s, &fd);
    return rc < 0 ? rc : (int)fd;
}

const cmn__ops_t cmn__tcp_ops = {
    .name = "tcp",
    .flags = 0,
    .start = tcp_start,
    .send = cmn__core_queue,
    .write = tcp_write,
    .turn_end = cmn__core_turn_end,
    .flush = cmn__core_flush,
    .read_start = tcp_read_start,
    .read_stop = cmn__tcp_read_stop,
    .shutdown = tcp_shutdown,
    .close = cmn__tcp_close,
    .describe = tcp_describe,
    .peer_identity = NULL,
    .fileno = cmn__tcp_fileno,
};
