/* The framing core under cmn_conn_t (core.h): batching, the decoder feed, backpressure, the hold,
 * the flush and the close bookkeeping. It knows no transport: it reaches one through its ops
 * table only. */
#include "core.h"
#include "cmn/clock.h"
#include "cmn/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A direct read into a frame body is worth it only when the rest of the body is large; a small
 * remainder is read with whatever follows it into the shared read buffer. */
#define DIRECT_READ_MIN (32u * 1024u)
/* hold_ns: a turn's frames wait for the next turn's only while they are this small; larger
 * writes gain nothing from merging. */
#define HOLD_MAX_BYTES (64u * 1024u)

_Static_assert(sizeof(cmn__core_t) <= sizeof(((cmn_conn_t *)0)->private_),
               "CMN_CONN_PRIVATE_SIZE (cmn/conn.h) is too small for the core's state");

/* The defaults of cmn_conn_options_t (cmn/conn.h): the core runs with them when given none. */
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

static void batch_free(cmn__batch_t *b)
{
    free(b->heads);
    free(b->bufs);
    free(b->head_off);
    free(b->done);
    free(b);
}

static cmn__batch_t *batch_get(cmn__core_t *k)
{
    cmn__batch_t *b = k->pool;

    if (b) {
        k->pool = b->next;
    } else {
        b = calloc(1, sizeof(*b));
        if (!b)
            return NULL;
    }
    b->core = k;
    b->next = NULL;
    b->heads_len = 0;
    b->nbufs = 0;
    b->ndone = 0;
    b->bytes = 0;
    return b;
}

static void batch_put(cmn__core_t *k, cmn__batch_t *b)
{
    /* Keep one spare batch; a burst of writes in flight does not pin memory afterwards. */
    if (!k->pool && !k->closing) {
        b->next = NULL;
        k->pool = b;
    } else {
        batch_free(b);
    }
}

static void batch_complete(cmn__batch_t *b, int status)
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
        return -ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

/* bufs and head_off are parallel arrays with one capacity. */
static int bufs_reserve(cmn__batch_t *b, size_t need)
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
        return -ENOMEM;
    b->bufs = nb;
    nh = realloc(b->head_off, ncap * sizeof(*nh));
    if (!nh)
        return -ENOMEM; /* bufs_cap unchanged: the larger bufs array is simply not used yet */
    b->head_off = nh;
    b->bufs_cap = ncap;
    return 0;
}

static void flush_stop(cmn__core_t *k)
{
    uv_check_stop(&k->flush_check);
    uv_idle_stop(&k->flush_idle);
}

void cmn__core_writing(cmn__core_t *k, size_t bytes, unsigned frames)
{
    k->bytes_writing += bytes;
    k->st.frames_out += frames;
    if (frames && k->bytes_pending + k->bytes_writing > k->opt.write_high_water)
        k->above_high_water = 1;
}

void cmn__core_written(cmn__core_t *k, size_t bytes, int count_out)
{
    k->bytes_writing -= bytes;
    if (count_out)
        k->st.bytes_out += bytes;
    if (k->above_high_water && k->bytes_pending + k->bytes_writing <= k->opt.write_low_water) {
        k->above_high_water = 0;
        if (k->cb.on_drain && !k->closing)
            k->cb.on_drain(k->conn);
    }
}

void cmn__core_sent(cmn__core_t *k, cmn__batch_t *b, int status)
{
    size_t bytes = b->bytes;

    batch_complete(b, status);
    batch_put(k, b); /* may free b */
    cmn__core_written(k, bytes, status == 0);
}

void cmn__core_refused(cmn__core_t *k, cmn__batch_t *b, int rc)
{
    k->bytes_writing -= b->bytes;
    batch_complete(b, rc);
    batch_put(k, b);
    cmn__core_close(k, rc);
}

/* Hands the turn's batch to the transport. */
void cmn__core_flush(cmn__core_t *k)
{
    cmn__batch_t *b = k->cur;
    size_t i;

    flush_stop(k);
    if (!b)
        return;
    k->cur = NULL;
    k->st.batches_out++;
    for (i = 0; i < b->nbufs; i++) {
        if (b->head_off[i] != SIZE_MAX)
            b->bufs[i].base = (char *)b->heads + b->head_off[i];
    }
    k->bytes_pending -= b->bytes;
    k->bytes_writing += b->bytes;
    k->ops->write(k, b);
}

/* hold_ns: the queued frames wait for the next turn's while the peer keeps sending (this turn
 * read frames from it), they are small, and the first of them has waited less than hold_ns. The
 * idle handle keeps the loop turning meanwhile; a turn that reads nothing writes at once. */
static int hold(cmn__core_t *k)
{
    int active = k->st.frames_in != k->frames_at_check;

    k->frames_at_check = k->st.frames_in;
    if (!k->opt.hold_ns || !active || !k->cur || k->cur->bytes > HOLD_MAX_BYTES || !k->reading ||
        k->read_paused || k->closing)
        return 0;
    return cmn_now_ns() - k->cur->first_ns < k->opt.hold_ns;
}

void cmn__core_turn_end(cmn__core_t *k)
{
    if (hold(k))
        return; /* still armed: the next turn reads what waits and comes back here */
    cmn__core_flush(k);
}

static void on_flush_check(uv_check_t *h)
{
    cmn__core_t *k = h->data;
    k->ops->turn_end(k);
}

static void on_flush_idle(uv_idle_t *h)
{
    /* Nothing to do: an active idle handle only makes the loop poll without blocking, so the
     * check handle runs in this turn even when the frame was queued from a timer callback. */
    (void)h;
}

void cmn__core_arm(cmn__core_t *k)
{
    if (!uv_is_active((uv_handle_t *)&k->flush_check)) {
        uv_check_start(&k->flush_check, on_flush_check);
        uv_idle_start(&k->flush_idle, on_flush_idle);
    }
}

void cmn__core_disarm(cmn__core_t *k)
{
    flush_stop(k);
}

void cmn__core_hold(cmn__core_t *k)
{
    k->handles_open++;
}

/* One of the connection's handles (or its transport's) is released; the last one ends it. */
void cmn__core_released(cmn__core_t *k)
{
    cmn__batch_t *b;

    if (--k->handles_open > 0)
        return;
    while ((b = k->pool) != NULL) {
        k->pool = b->next;
        batch_free(b);
    }
    cmn_frame_decoder_free(&k->dec);
    free(k->rbuf);
    k->rbuf = NULL;
    if (k->cb.on_close)
        k->cb.on_close(k->conn, k->close_reason);
}

static void on_handle_closed(uv_handle_t *h)
{
    cmn__core_released(h->data);
}

int cmn__core_init(cmn__core_t *k, cmn_conn_t *c, uv_loop_t *loop, const cmn_conn_callbacks_t *cb,
                   const cmn_conn_options_t *opt, const cmn_frame_limits_t *limits)
{
    memset(k, 0, sizeof(*k));
    k->conn = c;
    k->loop = loop;
    k->cb = *cb;
    k->opt = opt ? *opt : cmn_conn_options_default();
    if (k->opt.read_buf_size < 4096)
        k->opt.read_buf_size = 4096;
    k->rbuf = malloc(k->opt.read_buf_size);
    if (!k->rbuf)
        return -ENOMEM;
    cmn_frame_decoder_init(&k->dec, limits);
    snprintf(k->peer, sizeof(k->peer), "(unconnected)");
    uv_check_init(loop, &k->flush_check);
    uv_idle_init(loop, &k->flush_idle);
    uv_timer_init(loop, &k->shutdown_timer);
    k->flush_check.data = k;
    k->flush_idle.data = k;
    k->shutdown_timer.data = k;
    k->handles_open = 3;
    return 0;
}

void cmn__core_attach(cmn__core_t *k, const cmn__ops_t *ops, void *tp)
{
    k->ops = ops;
    k->tp = tp;
}

void cmn__core_connected(cmn__core_t *k, int status)
{
    if (k->connect_cb)
        k->connect_cb(k->conn, k->closing && status == 0 ? CMN_ECLOSED : status);
}

void cmn__core_set_error(cmn__core_t *k, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(k->last_error, sizeof(k->last_error), fmt, ap);
    va_end(ap);
}

void cmn__core_read_buf(cmn__core_t *k, int direct, uv_buf_t *buf)
{
    uint8_t *p;
    size_t n;

    buf->base = (char *)k->rbuf;
    buf->len = k->opt.read_buf_size;
    if (!direct)
        return;
    /* The rest of a large frame goes straight to its place: the metadata first (so a sink can
     * place the payload), then the payload. */
    if (cmn_frame_decoder_direct(&k->dec, &p, &n) &&
        cmn_frame_decoder_missing(&k->dec) >= DIRECT_READ_MIN) {
        buf->base = (char *)p;
        buf->len = n;
        return;
    }
    /* While large frames stream, read only the next header: the body then comes by direct
     * reads instead of being copied out of the shared buffer. */
    if (k->large_frames && !cmn_frame_decoder_partial(&k->dec))
        buf->len = CMN_FRAME_HEADER_SIZE;
}

void cmn__core_received(cmn__core_t *k, size_t n)
{
    k->st.bytes_in += n;
}

int cmn__core_feed(void *arg, const uint8_t *p, size_t left)
{
    cmn__core_t *k = arg;
    size_t used;
    cmn_frame_t f;
    int rc;

    while (left > 0 && !k->closing) {
        rc = cmn_frame_decode(&k->dec, p, left, &used, &f);
        if (rc < 0) {
            k->ops->read_stop(k);
            k->reading = 0;
            cmn__core_decode_error(k, rc);
            return CMN_ECLOSED;
        }
        p += used;
        left -= used;
        if (rc == CMN_FRAME_READY) {
            k->st.frames_in++;
            k->large_frames = (size_t)f.hdr.meta_len + f.hdr.payload_len >= DIRECT_READ_MIN;
            k->cb.on_frame(k->conn, &f);
        }
    }
    return k->closing ? CMN_ECLOSED : 0;
}

void cmn__core_read_done(cmn__core_t *k)
{
    if (!k->closing && k->on_partial && cmn_frame_decoder_partial(&k->dec))
        k->on_partial(k->conn);
}

void cmn__core_frame(cmn__core_t *k, const cmn_frame_t *f, uint64_t wire)
{
    k->st.frames_in++;
    k->st.bytes_in += wire;
    k->cb.on_frame(k->conn, f);
}

void cmn__core_frame_header(cmn__core_t *k, const cmn_frame_header_t *h)
{
    k->dec.hdr = *h;
}

void cmn__core_decode_error(cmn__core_t *k, int err)
{
    if (k->cb.on_decode_error)
        k->cb.on_decode_error(k->conn, err);
    else
        cmn__core_close(k, err);
}

int cmn__core_can_read(const cmn__core_t *k)
{
    return !k->closing && k->reading && !k->read_paused;
}

int cmn__core_start(cmn__core_t *k)
{
    int rc;

    k->read_paused = 0;
    k->reading = 1;
    rc = k->ops->start(k);
    if (rc < 0)
        k->reading = 0;
    return rc;
}

int cmn__core_queue(cmn__core_t *k, unsigned type, const ProtobufCMessage *meta,
                    const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg)
{
    cmn__batch_t *b;
    size_t hsize, i, nb, total;
    uint64_t plen = 0;
    long hl;
    int rc;

    for (i = 0; i < n_payload; i++)
        plen += payload[i].iov_len;
    if (!k->cur) {
        k->cur = batch_get(k);
        if (!k->cur)
            return -ENOMEM;
        if (k->opt.hold_ns)
            k->cur->first_ns = cmn_now_ns();
    }
    b = k->cur;
    hsize = cmn_frame_head_size(meta);
    nb = b->nbufs + 1 + n_payload;
    if ((rc = grow((void **)&b->heads, &b->heads_cap, b->heads_len + hsize, 1)) < 0 ||
        (rc = bufs_reserve(b, nb)) < 0)
        return rc;
    if (cb && (rc = grow((void **)&b->done, &b->done_cap, b->ndone + 1, sizeof(cmn__done_t))) < 0)
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
    k->bytes_pending += total;
    k->st.frames_out++;
    if (k->bytes_pending + k->bytes_writing > k->opt.write_high_water)
        k->above_high_water = 1;
    cmn__core_arm(k);
    return 0;
}

void cmn__core_read_pause(cmn__core_t *k)
{
    if (k->reading && !k->read_paused) {
        k->ops->read_stop(k);
        k->read_paused = 1;
    }
}

void cmn__core_read_resume(cmn__core_t *k)
{
    if (k->reading && k->read_paused && !k->closing) {
        k->read_paused = 0;
        if (k->ops->read_start(k) < 0)
            cmn__core_close(k, CMN_ECLOSED);
    }
}

void cmn__core_close(cmn__core_t *k, int reason)
{
    cmn__batch_t *b;

    if (k->closing == 2)
        return;
    if (!k->closing)
        k->close_reason = reason;
    k->closing = 2;
    k->reading = 0;
    flush_stop(k);
    uv_timer_stop(&k->shutdown_timer);
    /* The transport's batches are the oldest: reported first (cancelled), then the turn's. */
    if (k->ops)
        k->ops->close(k);
    b = k->cur;
    k->cur = NULL;
    if (b) {
        k->bytes_pending -= b->bytes;
        batch_complete(b, UV_ECANCELED);
        batch_free(b);
    }
    uv_close((uv_handle_t *)&k->flush_check, on_handle_closed);
    uv_close((uv_handle_t *)&k->flush_idle, on_handle_closed);
    uv_close((uv_handle_t *)&k->shutdown_timer, on_handle_closed);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
    cmn__core_t *k = t->data;
    cmn__core_close(k, k->close_reason);
}

void cmn__core_shutdown(cmn__core_t *k, int reason)
{
    if (k->closing)
        return;
    if (!k->ops) { /* never connected: nothing to flush */
        cmn__core_close(k, reason);
        return;
    }
    k->closing = 1;
    k->close_reason = reason;
    if (k->reading) {
        k->ops->read_stop(k);
        k->reading = 0;
    }
    /* The deadline covers everything below, including a peer that reads nothing. */
    uv_timer_start(&k->shutdown_timer, on_shutdown_timeout, k->opt.shutdown_timeout_ms, 0);
    cmn__core_flush(k);
    if (k->closing == 2)
        return; /* the flush failed and closed the connection */
    k->ops->shutdown(k);
}
