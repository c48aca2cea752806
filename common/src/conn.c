#include "cmn/conn.h"
#include "cmn/clock.h"
#include "cmn/err.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "tls_internal.h"
#include "ucx_internal.h"
#include "writer_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A direct read into a frame body is worth it only when the rest of the body is large; a small
 * remainder is read with whatever follows it into the shared read buffer. */
#define DIRECT_READ_MIN (32u * 1024u)
/* TLS: stop encrypting while this much ciphertext waits for the socket, and encrypt at most this
 * much plaintext per SSL_write, so the limit is checked often. */
#define TLS_OUT_HIGH (1u << 20)
#define TLS_STEP (64u * 1024u)
/* hold_ns: a turn's frames wait for the next turn's only while they are this small; larger
 * writes gain nothing from merging. */
#define HOLD_MAX_BYTES (64u * 1024u)

typedef struct {
    cmn_conn_sent_cb cb;
    void *arg;
} done_t;

/* All frames queued in one loop turn, written with one uv_write. Head buffers (header + packed
 * metadata) live in |heads|; their uv_buf_t entries are resolved from |head_off| at flush time
 * because |heads| may move while the batch grows. */
struct cmn_wbatch {
    uv_write_t req;
    cmn_conn_t *conn;
    cmn_wbatch_t *next;
    uint8_t *heads;
    size_t heads_len, heads_cap;
    uv_buf_t *bufs;
    size_t *head_off; /* SIZE_MAX for payload entries */
    size_t nbufs, bufs_cap;
    done_t *done;
    size_t ndone, done_cap;
    size_t bytes;
    uint64_t first_ns; /* when its first frame was queued (hold_ns only) */
    cmn__wjob_t job;   /* when the connection's write thread writes it */
};

cmn_conn_options_t cmn_conn_options_default(void)
{
    cmn_conn_options_t o;
    memset(&o, 0, sizeof(o));
    o.read_buf_size = 64u * 1024u;
    o.write_high_water = 16u * 1024u * 1024u;
    o.write_low_water = 4u * 1024u * 1024u;
    o.keepalive_s = 30;
    o.shutdown_timeout_ms = 2000;
    return o;
}

static void batch_free(cmn_wbatch_t *b)
{
    free(b->heads);
    free(b->bufs);
    free(b->head_off);
    free(b->done);
    free(b);
}

static cmn_wbatch_t *batch_get(cmn_conn_t *c)
{
    cmn_wbatch_t *b = c->pool;

    if (b) {
        c->pool = b->next;
    } else {
        b = calloc(1, sizeof(*b));
        if (!b)
            return NULL;
    }
    b->conn = c;
    b->next = NULL;
    b->heads_len = 0;
    b->nbufs = 0;
    b->ndone = 0;
    b->bytes = 0;
    return b;
}

static void batch_put(cmn_conn_t *c, cmn_wbatch_t *b)
{
    /* Keep one spare batch; a burst of writes in flight does not pin memory afterwards. */
    if (!c->pool && !c->closing) {
        b->next = NULL;
        c->pool = b;
    } else {
        batch_free(b);
    }
}

static void batch_complete(cmn_wbatch_t *b, int status)
{
    size_t i;
    for (i = 0; i < b->ndone; i++)
        b->done[i].cb(b->done[i].arg, status);
    b->ndone = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *np;

    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    np = realloc(*p, ncap * elem);
    if (!np)
        return UV_ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

/* bufs and head_off are parallel arrays with one capacity. */
static int bufs_reserve(cmn_wbatch_t *b, size_t need)
{
    size_t ncap;
    uv_buf_t *nb;
    size_t *nh;

    if (need <= b->bufs_cap)
        return 0;
    ncap = b->bufs_cap ? b->bufs_cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    nb = realloc(b->bufs, ncap * sizeof(*nb));
    if (!nb)
        return UV_ENOMEM;
    b->bufs = nb;
    nh = realloc(b->head_off, ncap * sizeof(*nh));
    if (!nh)
        return UV_ENOMEM; /* bufs_cap unchanged: the larger bufs array is simply not used yet */
    b->head_off = nh;
    b->bufs_cap = ncap;
    return 0;
}

static void flush_stop(cmn_conn_t *c)
{
    uv_check_stop(&c->flush_check);
    uv_idle_stop(&c->flush_idle);
}

/* The kernel took |n| bytes (or the write failed): backlog accounting and the drain callback. */
static void written(cmn_conn_t *c, size_t n)
{
    c->bytes_writing -= n;
    if (c->above_high_water && cmn_conn_backlog(c) <= c->opt.write_low_water) {
        c->above_high_water = 0;
        if (c->cb.on_drain && !c->closing)
            c->cb.on_drain(c);
    }
}

/* The kernel took |b| (status 0) or a write of it failed: the byte count, its sent callbacks,
 * the batch back to the pool, the backlog and the drain callback (every path that writes). */
static void batch_done(cmn_conn_t *c, cmn_wbatch_t *b, int status)
{
    size_t bytes = b->bytes;

    if (status == 0)
        c->st.bytes_out += bytes;
    batch_complete(b, status);
    batch_put(c, b); /* may free b */
    written(c, bytes);
}

/* A write of |b| could not even start: its callbacks fail and the connection closes. */
static void batch_refused(cmn_conn_t *c, cmn_wbatch_t *b, int rc)
{
    c->bytes_writing -= b->bytes;
    batch_complete(b, rc);
    batch_put(c, b);
    cmn_conn_close(c, rc);
}

static void on_write(uv_write_t *req, int status)
{
    cmn_wbatch_t *b = req->data;

    batch_done(b->conn, b, status);
}

static void finish_shutdown(cmn_conn_t *c);

/* The write thread is done with a batch (writer_internal.h): as on_write, on the loop thread. A
 * failed write closes the connection, naming the error. */
static void on_writer_done(cmn_conn_t *c, cmn__wjob_t *job)
{
    cmn_wbatch_t *b = (cmn_wbatch_t *)(void *)((char *)job - offsetof(cmn_wbatch_t, job));
    int status = job->status;

    c->writer_bytes -= b->bytes;
    batch_done(c, b, status);
    if (status < 0 && c->closing != 2) {
        snprintf(c->last_error, sizeof(c->last_error), "write error: %s", cmn_strerror(status));
        cmn_conn_close(c, status);
        return;
    }
    if (c->writer_shutdown_due && !c->writer_bytes && c->closing == 1) {
        c->writer_shutdown_due = 0;
        finish_shutdown(c);
    }
}

static void handle_done(cmn_conn_t *c);

static const cmn__writer_hooks_t writer_hooks = {on_writer_done, handle_done};

/* Ciphertext on its way to the socket. */
typedef struct {
    uv_write_t req;
    cmn_conn_t *conn;
    uint8_t *buf;
    size_t len;
} tls_out_t;

static void tls_pump(cmn_conn_t *c);

static void on_tls_write(uv_write_t *req, int status)
{
    tls_out_t *o = req->data;
    cmn_conn_t *c = o->conn;

    free(o->buf);
    written(c, o->len);
    free(o);
    /* The socket took some ciphertext: encrypt more of what waits. */
    if (status == 0 && c->closing != 2 && (c->tls_head || c->tls_shutdown_due))
        tls_pump(c);
}

/* Sends whatever OpenSSL produced (handshake records, tickets, encrypted frames). */
static void tls_flush_output(cmn_conn_t *c)
{
    tls_out_t *o;
    uv_buf_t b;
    uint8_t *buf;
    size_t n;
    int rc;

    while ((n = cmn__tls_take_output(c->tls, &buf)) > 0) {
        o = malloc(sizeof(*o));
        if (!o) {
            free(buf);
            cmn_conn_close(c, UV_ENOMEM);
            return;
        }
        o->conn = c;
        o->buf = buf;
        o->len = n;
        o->req.data = o;
        b = uv_buf_init((char *)buf, (unsigned)n);
        c->bytes_writing += n;
        rc = uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, on_tls_write);
        if (rc < 0) {
            c->bytes_writing -= n;
            free(buf);
            free(o);
            cmn_conn_close(c, rc);
            return;
        }
    }
}

/* Encrypts queued frames while less than TLS_OUT_HIGH of ciphertext waits for the socket. A
 * batch's callbacks run once all of it is encrypted: its payload is no longer referenced then. */
static void tls_pump(cmn_conn_t *c)
{
    char err[300];
    int rc = 0;

    while (c->tls_head && c->bytes_writing < TLS_OUT_HIGH && c->closing != 2) {
        cmn_wbatch_t *b = c->tls_head;

        if (c->tls_buf < b->nbufs) {
            const uv_buf_t *ub = &b->bufs[c->tls_buf];
            size_t n = ub->len - c->tls_off;
            if (n > TLS_STEP)
                n = TLS_STEP;
            rc = cmn__tls_write(c->tls, ub->base + c->tls_off, n, err, sizeof(err));
            if (rc < 0)
                break;
            c->tls_off += n;
            if (c->tls_off == ub->len) {
                c->tls_buf++;
                c->tls_off = 0;
            }
            tls_flush_output(c);
            continue;
        }
        c->tls_head = b->next;
        if (!c->tls_head)
            c->tls_tail = NULL;
        c->tls_buf = c->tls_off = 0;
        c->bytes_pending -= b->bytes;
        c->st.bytes_out += b->bytes;
        batch_complete(b, 0);
        batch_put(c, b);
    }
    if (rc < 0) {
        cmn_log_warn("%s: %s", c->peer, err);
        snprintf(c->last_error, sizeof(c->last_error), "%s", err);
        cmn_conn_close(c, rc);
        return;
    }
    if (c->tls_shutdown_due && !c->tls_head && c->closing != 2) {
        c->tls_shutdown_due = 0;
        finish_shutdown(c);
    }
}

/* Writes what the kernel takes of |b| at once. Returns 1 when the batch is done (written and
 * completed, or failed and the connection closed), 0 when bytes remain: |b|'s buffers then start
 * at the first byte not written. */
static int try_write(cmn_conn_t *c, cmn_wbatch_t *b)
{
    size_t i = 0;
    int n = uv_try_write((uv_stream_t *)&c->tcp, b->bufs, (unsigned)b->nbufs);

    if (n == UV_EAGAIN || n == UV_ENOSYS)
        return 0;
    if (n < 0) {
        batch_refused(c, b, n);
        return 1;
    }
    if ((size_t)n == b->bytes) {
        batch_done(c, b, 0);
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

static void flush_now(cmn_conn_t *c)
{
    cmn_wbatch_t *b = c->cur;
    size_t i;
    int rc = 0;

    flush_stop(c);
    if (!b)
        return;
    c->cur = NULL;
    c->st.batches_out++;
    for (i = 0; i < b->nbufs; i++) {
        if (b->head_off[i] != SIZE_MAX)
            b->bufs[i].base = (char *)b->heads + b->head_off[i];
    }
    if (c->tls) {
        /* Into the encryption queue, in order; the pump encrypts as the socket drains (and
         * waits for the handshake). */
        b->next = NULL;
        if (c->tls_tail)
            c->tls_tail->next = b;
        else
            c->tls_head = b;
        c->tls_tail = b;
        if (cmn__tls_established(c->tls))
            tls_pump(c);
        return;
    }
    c->bytes_pending -= b->bytes;
    c->bytes_writing += b->bytes;
    /* Frames never overtake each other: while one path (the write thread, libuv) has bytes
     * outstanding, the batch follows them; when neither has, the batch's size chooses. */
    if (c->writer && (c->writer_bytes > 0 ||
                      (c->bytes_writing == b->bytes && b->bytes >= c->opt.write_thread_min))) {
        c->writer_bytes += b->bytes;
        b->job.bufs = b->bufs;
        b->job.nbufs = b->nbufs;
        b->job.bytes = b->bytes;
        cmn__writer_push(c->writer, &b->job);
        return;
    }
    /* Try the write now: when the kernel takes the whole batch (the usual case below the
     * socket buffer's size) it completes here, and libuv never arms the socket for writing, an
     * epoll_ctl per batch saved; what remains goes through uv_write. */
    if ((rc = try_write(c, b)) != 0)
        return;
    b->req.data = b;
    rc = uv_write(&b->req, (uv_stream_t *)&c->tcp, b->bufs, (unsigned)b->nbufs, on_write);
    if (rc < 0)
        batch_refused(c, b, rc);
}

/* hold_ns: the queued frames wait for the next turn's while the peer keeps sending (this turn
 * read frames from it), they are small, and the first of them has waited less than hold_ns. The
 * idle handle keeps the loop turning meanwhile; a turn that reads nothing writes at once. */
static int hold(cmn_conn_t *c)
{
    int active = c->st.frames_in != c->frames_at_check;

    c->frames_at_check = c->st.frames_in;
    if (!c->opt.hold_ns || !active || !c->cur || c->cur->bytes > HOLD_MAX_BYTES || !c->reading ||
        c->read_paused || c->closing)
        return 0;
    return cmn_now_ns() - c->cur->first_ns < c->opt.hold_ns;
}

static void on_flush_check(uv_check_t *h)
{
    cmn_conn_t *c = h->data;

    if (c->ucx) {
        /* UCX sends at once; the check hands over frames held while reading was paused. */
        flush_stop(c);
        cmn__ucx_deliver(c);
        return;
    }
    if (hold(c))
        return; /* still armed: the next turn reads what waits and comes back here */
    flush_now(c);
}

static void on_flush_idle(uv_idle_t *h)
{
    /* Nothing to do: an active idle handle only makes the loop poll without blocking, so the
     * check handle runs in this turn even when the frame was queued from a timer callback. */
    (void)h;
}

/* One of the connection's handles (or its UCX endpoint) is released; the last one frees. */
static void handle_done(cmn_conn_t *c)
{
    cmn_wbatch_t *b;

    if (--c->handles_open > 0)
        return;
    while ((b = c->pool) != NULL) {
        c->pool = b->next;
        batch_free(b);
    }
    cmn_frame_decoder_free(&c->dec);
    free(c->rbuf);
    c->rbuf = NULL;
    cmn__tls_free(c->tls);
    c->tls = NULL;
    if (c->cb.on_close)
        c->cb.on_close(c, c->close_reason);
}

static void on_handle_closed(uv_handle_t *h)
{
    handle_done(h->data);
}

static void ucx_end(cmn_conn_t *c, int reason)
{
    cmn_conn_close(c, reason);
}

static const cmn__ucx_hooks_t ucx_hooks = {ucx_end, handle_done};

int cmn_conn_init(uv_loop_t *loop, cmn_conn_t *c, const cmn_conn_callbacks_t *cb,
                  const cmn_conn_options_t *opt, const cmn_frame_limits_t *limits)
{
    int rc;

    memset(c, 0, sizeof(*c));
    c->loop = loop;
    c->cb = *cb;
    c->opt = opt ? *opt : cmn_conn_options_default();
    if (c->opt.read_buf_size < 4096)
        c->opt.read_buf_size = 4096;
    c->rbuf = malloc(c->opt.read_buf_size);
    if (!c->rbuf)
        return UV_ENOMEM;
    cmn_frame_decoder_init(&c->dec, limits);
    snprintf(c->peer, sizeof(c->peer), "(unconnected)");
    rc = uv_tcp_init(loop, &c->tcp);
    if (rc < 0)
        goto fail_tcp;
    uv_check_init(loop, &c->flush_check);
    uv_idle_init(loop, &c->flush_idle);
    uv_timer_init(loop, &c->shutdown_timer);
    c->tcp.data = c;
    c->flush_check.data = c;
    c->flush_idle.data = c;
    c->shutdown_timer.data = c;
    c->handles_open = 4;
    return 0;

fail_tcp:
    free(c->rbuf);
    c->rbuf = NULL;
    return rc;
}

static void on_connect(uv_connect_t *req, int status)
{
    cmn_conn_t *c = req->data;

    if (c->connect_cb)
        c->connect_cb(c, c->closing && status == 0 ? CMN_ECLOSED : status);
}

int cmn_conn_connect(cmn_conn_t *c, const struct sockaddr *addr,
                     void (*cb)(cmn_conn_t *c, int status))
{
    cmn_addr_format(addr, c->peer, sizeof(c->peer));
    c->connect_cb = cb;
    c->connect_req.data = c;
    return uv_tcp_connect(&c->connect_req, &c->tcp, addr, on_connect);
}

int cmn_conn_connect_ucx(cmn_conn_t *c, struct cmn_ucx *u, const struct sockaddr *addr,
                         void (*cb)(cmn_conn_t *c, int status))
{
    if (c->tls) {
        cmn_log_error("%s: TLS runs on tcp:// only, not over UCX", c->peer);
        return CMN_ECONFIG;
    }
    if (c->closing || c->ucx)
        return CMN_ECLOSED;
    cmn_addr_format(addr, c->peer, sizeof(c->peer));
    c->connect_cb = cb;
    return cmn__ucx_connect(u, c, addr, &ucx_hooks);
}

int cmn_conn_accept_ucx(cmn_conn_t *c, struct cmn_ucx_incoming *in)
{
    if (c->tls) {
        cmn_log_error("TLS runs on tcp:// only, not over UCX");
        return CMN_ECONFIG;
    }
    if (c->closing || c->ucx)
        return CMN_ECLOSED;
    return cmn__ucx_accept(in, c, &ucx_hooks);
}

void cmn_conn_describe(const cmn_conn_t *c, char *buf, size_t len)
{
    if (c->ucx)
        cmn__ucx_describe(c, buf, len);
    else
        snprintf(buf, len, "%s%s", c->tls ? "tls" : "tcp", c->writer ? "+write-thread" : "");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    cmn_conn_t *c = h->data;
    uint8_t *p;
    size_t n;

    (void)suggested;
    buf->base = (char *)c->rbuf;
    buf->len = c->opt.read_buf_size;
    if (c->tls)
        return; /* ciphertext goes through OpenSSL's buffer anyway */
    /* The rest of a large frame goes straight to its place: the metadata first (so a sink can
     * place the payload), then the payload. */
    if (cmn_frame_decoder_direct(&c->dec, &p, &n) &&
        cmn_frame_decoder_missing(&c->dec) >= DIRECT_READ_MIN) {
        buf->base = (char *)p;
        buf->len = n;
        return;
    }
    /* While large frames stream, read only the next header: the body then comes by direct
     * reads instead of being copied out of the shared buffer. */
    if (c->large_frames && !cmn_frame_decoder_partial(&c->dec))
        buf->len = CMN_FRAME_HEADER_SIZE;
}

/* Plaintext bytes through the frame decoder; returns CMN_ECLOSED once the connection is closing. */
static int feed_plain(void *arg, const uint8_t *p, size_t left)
{
    cmn_conn_t *c = arg;
    size_t used;
    cmn_frame_t f;
    int rc;

    while (left > 0 && !c->closing) {
        rc = cmn_frame_decode(&c->dec, p, left, &used, &f);
        if (rc < 0) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = 0;
            if (c->cb.on_decode_error)
                c->cb.on_decode_error(c, rc);
            else
                cmn_conn_close(c, rc);
            return CMN_ECLOSED;
        }
        p += used;
        left -= used;
        if (rc == CMN_FRAME_READY) {
            c->st.frames_in++;
            c->large_frames = (size_t)f.hdr.meta_len + f.hdr.payload_len >= DIRECT_READ_MIN;
            c->cb.on_frame(c, &f);
        }
    }
    return c->closing ? CMN_ECLOSED : 0;
}

static void flush_arm(cmn_conn_t *c)
{
    if (!uv_is_active((uv_handle_t *)&c->flush_check)) {
        uv_check_start(&c->flush_check, on_flush_check);
        uv_idle_start(&c->flush_idle, on_flush_idle);
    }
}

static void on_tls_read(cmn_conn_t *c, const uint8_t *p, size_t n)
{
    char err[300] = "";
    int was = cmn__tls_established(c->tls), rc;

    /* The ciphertext is copied into OpenSSL's buffer first, so the read buffer can take the
     * plaintext. */
    rc = cmn__tls_on_cipher(c->tls, p, n, c->rbuf, c->opt.read_buf_size, feed_plain, c, err,
                            sizeof(err));
    if (!c->closing || c->closing == 1)
        tls_flush_output(c);
    if (rc < 0) {
        if (rc != CMN_ECLOSED) {
            cmn_log_warn("%s: %s", c->peer, err);
            snprintf(c->last_error, sizeof(c->last_error), "%s", err);
        }
        cmn_conn_close(c, rc);
        return;
    }
    if (!was && cmn__tls_established(c->tls)) {
        const char *who = cmn__tls_peer(c->tls);
        cmn_log_debug("%s: TLS 1.3 established%s%s", c->peer, who[0] ? " with " : "", who);
        if (c->tls_head)
            tls_pump(c); /* frames queued during the handshake */
        if (c->cur)
            flush_arm(c);
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cmn_conn_t *c = s->data;

    if (nread < 0) {
        if (nread != UV_EOF)
            snprintf(c->last_error, sizeof(c->last_error), "read error: %s",
                     cmn_strerror((int)nread));
        cmn_conn_close(c, nread == UV_EOF ? CMN_ECLOSED : (int)nread);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    c->st.bytes_in += (size_t)nread;
    if (c->tls)
        on_tls_read(c, (const uint8_t *)buf->base, (size_t)nread);
    else
        (void)feed_plain(c, (const uint8_t *)buf->base, (size_t)nread);
    if (!c->closing && c->on_partial && cmn_frame_decoder_partial(&c->dec))
        c->on_partial(c);
}

int cmn_conn_use_tls(cmn_conn_t *c, struct cmn_tls_ctx *ctx, const char *peer_name)
{
    char err[300];
    int rc = cmn__tls_new(ctx, peer_name, &c->tls, err, sizeof(err));
    if (rc < 0)
        cmn_log_error("%s: %s", c->peer, err);
    return rc;
}

const char *cmn_conn_last_error(const cmn_conn_t *c)
{
    return c->last_error;
}

const char *cmn_conn_tls_peer(const cmn_conn_t *c)
{
    return c->tls && cmn__tls_established(c->tls) ? cmn__tls_peer(c->tls) : "";
}

int cmn_conn_start(cmn_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss), rc;

    if (c->ucx) {
        c->reading = 1;
        c->read_paused = 0;
        flush_arm(c); /* frames that came before the start */
        return 0;
    }
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
        cmn_addr_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    /* Nagle plus delayed ACKs stalls request/response traffic by tens of ms; frames are already
     * gathered per loop turn in user space. */
    rc = uv_tcp_nodelay(&c->tcp, 1);
    if (rc < 0)
        return rc;
    if (c->opt.keepalive_s) {
        rc = uv_tcp_keepalive(&c->tcp, 1, c->opt.keepalive_s);
        if (rc < 0)
            return rc;
    }
    if (c->opt.write_thread_min && !c->tls && !c->writer) {
        uv_os_fd_t fd;
        if ((rc = uv_fileno((uv_handle_t *)&c->tcp, &fd)) < 0 ||
            (rc = cmn__writer_start(c, fd, &writer_hooks)) < 0)
            return rc;
        c->handles_open++; /* released by handle_done once the writer's handle closes */
    }
    c->read_paused = 0;
    rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0)
        return rc;
    c->reading = 1;
    if (c->tls) {
        char err[300];
        /* A client sends its first flight now; a server's call just waits for one. */
        rc = cmn__tls_start(c->tls, err, sizeof(err));
        if (rc < 0) {
            cmn_log_warn("%s: %s", c->peer, err);
            snprintf(c->last_error, sizeof(c->last_error), "%s", err);
            return rc;
        }
        tls_flush_output(c);
    }
    return 0;
}

void cmn_conn_set_limits(cmn_conn_t *c, const cmn_frame_limits_t *limits)
{
    cmn_frame_decoder_set_limits(&c->dec, limits);
}

void cmn_conn_flush(cmn_conn_t *c)
{
    if (c->closing || c->ucx)
        return;
    flush_now(c);
}

size_t cmn_conn_backlog(const cmn_conn_t *c)
{
    return c->bytes_pending + c->bytes_writing;
}

int cmn_conn_congested(const cmn_conn_t *c)
{
    return cmn_conn_backlog(c) > c->opt.write_high_water;
}

int cmn_conn_copies_segments(const cmn_conn_t *c)
{
    return c->ucx != NULL;
}

int cmn_conn_send(cmn_conn_t *c, unsigned type, const ProtobufCMessage *meta,
                  const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg)
{
    cmn_wbatch_t *b;
    size_t hsize, i, nb, total;
    uint64_t plen = 0;
    long hl;
    int rc;

    if (c->closing)
        return CMN_ECLOSED;
    if (c->ucx)
        return cmn__ucx_send(c, type, meta, payload, n_payload, cb, arg);
    for (i = 0; i < n_payload; i++)
        plen += payload[i].iov_len;
    if (!c->cur) {
        c->cur = batch_get(c);
        if (!c->cur)
            return UV_ENOMEM;
        if (c->opt.hold_ns)
            c->cur->first_ns = cmn_now_ns();
    }
    b = c->cur;
    hsize = cmn_frame_head_size(meta);
    nb = b->nbufs + 1 + n_payload;
    if ((rc = grow((void **)&b->heads, &b->heads_cap, b->heads_len + hsize, 1)) < 0 ||
        (rc = bufs_reserve(b, nb)) < 0)
        return rc;
    if (cb && (rc = grow((void **)&b->done, &b->done_cap, b->ndone + 1, sizeof(done_t))) < 0)
        return rc;
    hl = cmn_frame_encode_head(type, meta, plen, b->heads + b->heads_len, hsize);
    if (hl < 0)
        return (int)hl;
    b->bufs[b->nbufs].base = NULL;
    b->bufs[b->nbufs].len = (size_t)hl;
    b->head_off[b->nbufs] = b->heads_len;
    b->nbufs++;
    b->heads_len += (size_t)hl;
    for (i = 0; i < n_payload; i++) {
        b->bufs[b->nbufs] = uv_buf_init(payload[i].iov_base, (unsigned)payload[i].iov_len);
        b->head_off[b->nbufs] = SIZE_MAX;
        b->nbufs++;
    }
    if (cb) {
        b->done[b->ndone].cb = cb;
        b->done[b->ndone].arg = arg;
        b->ndone++;
    }
    total = (size_t)hl + (size_t)plen;
    b->bytes += total;
    c->bytes_pending += total;
    c->st.frames_out++;
    if (cmn_conn_congested(c))
        c->above_high_water = 1;
    flush_arm(c);
    return 0;
}

void cmn_conn_read_pause(cmn_conn_t *c)
{
    if (c->reading && !c->read_paused) {
        if (!c->ucx)
            uv_read_stop((uv_stream_t *)&c->tcp);
        c->read_paused = 1;
    }
}

void cmn_conn_read_resume(cmn_conn_t *c)
{
    if (c->reading && c->read_paused && !c->closing) {
        c->read_paused = 0;
        if (c->ucx) {
            flush_arm(c);
            return;
        }
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            cmn_conn_close(c, CMN_ECLOSED);
    }
}

void cmn_conn_close(cmn_conn_t *c, int reason)
{
    cmn_wbatch_t *b;

    if (c->closing == 2)
        return;
    if (!c->closing)
        c->close_reason = reason;
    c->closing = 2;
    flush_stop(c);
    uv_timer_stop(&c->shutdown_timer);
    /* The write thread stops before the socket closes under it. Its batches are the oldest:
     * they are reported first (what it had not written as cancelled), then the newer ones. */
    cmn__writer_stop(c);
    b = c->cur;
    c->cur = NULL;
    if (b) {
        c->bytes_pending -= b->bytes;
        batch_complete(b, UV_ECANCELED);
        batch_free(b);
    }
    while ((b = c->tls_head) != NULL) {
        c->tls_head = b->next;
        c->bytes_pending -= b->bytes;
        batch_complete(b, UV_ECANCELED);
        batch_free(b);
    }
    c->tls_tail = NULL;
    if (c->ucx) {
        c->handles_open++; /* released by a later handle_done */
        cmn__ucx_close(c);
    }
    /* Writes already handed to libuv complete with UV_ECANCELED before the close callback. */
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->flush_check, on_handle_closed);
    uv_close((uv_handle_t *)&c->flush_idle, on_handle_closed);
    uv_close((uv_handle_t *)&c->shutdown_timer, on_handle_closed);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
    cmn_conn_t *c = t->data;
    cmn_conn_close(c, c->close_reason);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    cmn_conn_t *c = req->data;
    (void)status;
    cmn_conn_close(c, c->close_reason);
}

/* The last step of a graceful close: close_notify (TLS), then FIN once libuv has written all. */
static void finish_shutdown(cmn_conn_t *c)
{
    if (c->tls) {
        cmn__tls_close_notify(c->tls);
        tls_flush_output(c);
        if (c->closing == 2)
            return;
    }
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        cmn_conn_close(c, c->close_reason);
}

void cmn_conn_shutdown(cmn_conn_t *c, int reason)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->close_reason = reason;
    if (c->ucx) {
        c->reading = 0;
        flush_stop(c);
        uv_timer_start(&c->shutdown_timer, on_shutdown_timeout, c->opt.shutdown_timeout_ms, 0);
        cmn__ucx_shutdown(c); /* closes once the peer has everything sent */
        return;
    }
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
    /* The deadline covers everything below, including a peer that reads nothing. */
    uv_timer_start(&c->shutdown_timer, on_shutdown_timeout, c->opt.shutdown_timeout_ms, 0);
    flush_now(c);
    if (c->closing == 2)
        return; /* the flush failed and closed the connection */
    if (c->writer_bytes) {
        c->writer_shutdown_due = 1; /* on_writer_done finishes once the thread has written all */
        return;
    }
    if (c->tls && c->tls_head) {
        c->tls_shutdown_due = 1; /* tls_pump finishes once the queue is encrypted */
        return;
    }
    finish_shutdown(c);
}

int cmn_conn_accept(cmn_conn_t *c, uv_stream_t *server)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss), rc;

    if (c->closing || c->ucx)
        return CMN_ECLOSED;
    rc = uv_accept(server, (uv_stream_t *)&c->tcp);
    if (rc == 0 && uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
        cmn_addr_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    return rc;
}

const char *cmn_conn_peer(const cmn_conn_t *c)
{
    return c->peer;
}

int cmn_conn_closing(const cmn_conn_t *c)
{
    return c->closing;
}

int cmn_conn_read_paused(const cmn_conn_t *c)
{
    return c->read_paused;
}

const cmn_frame_decoder_t *cmn_conn_decoder(const cmn_conn_t *c)
{
    return &c->dec;
}

void cmn_conn_set_sink(cmn_conn_t *c, cmn_frame_sink_fn sink, void *arg, size_t min_payload)
{
    cmn_frame_decoder_set_sink(&c->dec, sink, arg, min_payload);
}

void cmn_conn_set_on_partial(cmn_conn_t *c, void (*on_partial)(cmn_conn_t *c))
{
    c->on_partial = on_partial;
}

const cmn_conn_stats_t *cmn_conn_stats(const cmn_conn_t *c)
{
    return &c->st;
}

int cmn_conn_whole_payloads(const cmn_conn_t *c)
{
    return c->ucx != NULL;
}

int cmn_conn_fileno(const cmn_conn_t *c)
{
    uv_os_fd_t fd;
    int rc;

    if (c->ucx)
        return CMN_ECONFIG;
    rc = uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    return rc < 0 ? rc : (int)fd;
}
