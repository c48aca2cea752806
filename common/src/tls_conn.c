/* The TLS transport: TLS 1.3 (the engine in tls.c) over the TCP socket of tcp.c. Frames queued by
 * the core are encrypted as the socket drains, so memory stays bounded whatever is queued; small
 * buffers (frame heads, small frames) are gathered into full records rather than one small
 * record each. The ciphertext is written from the engine's output buffer, at once when the
 * kernel takes it (the buffer is reused: no allocation per write). The ciphertext read from the
 * socket is decrypted where the core's decoder wants it: a large frame's body straight into
 * place, as plain TCP reads it. */
#include "tls_conn_internal.h"
#include "cmn/err.h"
#include "cmn/list.h"
#include "cmn/log.h"
#include "tcp_internal.h"
#include "tls_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Stop encrypting while this much ciphertext waits for the socket, and encrypt at most this much
 * plaintext per SSL_write, so the limit is checked often. */
#define TLS_OUT_HIGH (1u << 20)
#define TLS_STEP (64u * 1024u)
/* The ciphertext goes to the socket once this much is ready (and at the end of each pump): one
 * write per sample of 150 KB cost more system calls and wake-ups than the kernel's copy. */
#define TLS_FLUSH (512u * 1024u)
/* Buffers smaller than this are copied together and encrypted as one record of up to
 * TLS_RECORD bytes (TLS's largest). */
#define TLS_GATHER (4u * 1024u)
#define TLS_RECORD (16u * 1024u)
/* Ciphertext is read from the socket in steps of up to this much. */
#define TLS_READ (512u * 1024u)

typedef struct {
    cmn__tls_t *tls;
    /* Batches waiting to be encrypted, oldest first. */
    cmn__batch_t *head, *tail;
    size_t buf, off;  /* progress inside head */
    size_t cipher;    /* ciphertext handed to libuv's write queue, not yet written */
    int shutdown_due; /* the shutdown waits for the queue to be encrypted */
    uint8_t *cbuf;    /* ciphertext read from the socket (TLS_READ bytes) */
    size_t stage_len; /* small buffers gathered in |stage|, not yet encrypted */
    uint8_t stage[TLS_RECORD];
} tlsc_t;

/* Ciphertext on its way to the socket through libuv's queue: the engine's output buffer, taken
 * over, from |len| bytes before its end. */
typedef struct {
    uv_write_t req;
    cmn__core_t *k;
    uint8_t *base;
    size_t cap, len;
} tls_out_t;

static tlsc_t *tlsc(const cmn__core_t *k)
{
    return cmn__tcp_upper(k);
}

static void tls_pump(cmn__core_t *k);

static void on_tls_write(uv_write_t *req, int status)
{
    tls_out_t *o = req->data;
    cmn__core_t *k = o->k;
    tlsc_t *x = tlsc(k);

    cmn__tls_give_back(x->tls, o->base, o->cap);
    x->cipher -= o->len;
    cmn__core_written(k, o->len, 0);
    free(o);
    /* The socket took some ciphertext: encrypt more of what waits. */
    if (status == 0 && k->closing != 2 && (x->head || x->shutdown_due))
        tls_pump(k);
}

/* Sends whatever OpenSSL produced (handshake records, tickets, encrypted frames): what the kernel
 * takes at once straight from the engine's buffer, the rest through libuv's queue (after what is
 * queued already, so nothing overtakes). */
static void flush_output(cmn__core_t *k)
{
    tlsc_t *x = tlsc(k);
    uv_stream_t *s = cmn__tcp_stream(k);
    const uint8_t *p;
    size_t n = cmn__tls_output(x->tls, &p), cap, w = 0;
    tls_out_t *o;
    uint8_t *base;
    uv_buf_t b;
    int rc;

    if (n == 0)
        return;
    if (!s) { /* closed: nothing more goes out */
        cmn__tls_output_sent(x->tls);
        return;
    }
    if (x->cipher == 0) {
        b = uv_buf_init((char *)(uintptr_t)p, (unsigned)n);
        rc = uv_try_write(s, &b, 1);
        if (rc < 0 && rc != UV_EAGAIN) {
            cmn__tls_output_sent(x->tls);
            cmn__core_set_error(k, "write error: %s", cmn_strerror(rc));
            cmn__core_close(k, rc);
            return;
        }
        if (rc > 0)
            w = (size_t)rc;
        if (w == n) {
            cmn__tls_output_sent(x->tls);
            return;
        }
    }
    o = malloc(sizeof(*o));
    if (!o) {
        cmn__tls_output_sent(x->tls);
        cmn__core_close(k, -ENOMEM);
        return;
    }
    n = cmn__tls_take_output(x->tls, &base, &cap);
    o->k = k;
    o->base = base;
    o->cap = cap;
    o->len = n - w;
    o->req.data = o;
    b = uv_buf_init((char *)base + w, (unsigned)o->len);
    x->cipher += o->len;
    cmn__core_writing(k, o->len, 0);
    rc = uv_write(&o->req, s, &b, 1, on_tls_write);
    if (rc < 0) {
        x->cipher -= o->len;
        cmn__core_written(k, o->len, 0);
        cmn__tls_give_back(x->tls, base, cap);
        free(o);
        cmn__core_close(k, rc);
    }
}

/* The connection ends on a TLS failure, logged with the peer's address. */
static void tls_failed(cmn__core_t *k, int rc, const char *err)
{
    cmn_log_warn("%s: %s", k->peer, err);
    cmn__core_set_error(k, "%s", err);
    cmn__core_close(k, rc);
}

/* close_notify, then FIN once the socket has written everything. */
static void tls_finish(cmn__core_t *k)
{
    cmn__tls_close_notify(tlsc(k)->tls);
    flush_output(k);
    if (k->closing == 2)
        return;
    cmn__tcp_fin(k);
}

/* Encrypts the gathered small buffers as one record. */
static int stage_out(cmn__core_t *k, char *err, size_t errlen)
{
    tlsc_t *x = tlsc(k);
    int rc;

    if (!x->stage_len)
        return 0;
    rc = cmn__tls_write(x->tls, x->stage, x->stage_len, err, errlen);
    x->stage_len = 0;
    return rc;
}

/* Encrypts queued frames while less than TLS_OUT_HIGH of ciphertext waits for the socket. A
 * batch's callbacks run once all of it is encrypted (or copied into the stage, which is
 * encrypted before this returns): its payload is no longer referenced then. */
static void tls_pump(cmn__core_t *k)
{
    tlsc_t *x = tlsc(k);
    const uint8_t *unused;
    char err[300];
    int rc = 0;

    while (rc == 0 && x->head && x->cipher < TLS_OUT_HIGH && k->closing != 2) {
        cmn__batch_t *b = x->head;

        if (x->buf < b->nbufs) {
            const uv_buf_t *ub = &b->bufs[x->buf];
            const char *src = ub->base + x->off;
            size_t n = ub->len - x->off;

            if (n < TLS_GATHER) {
                if (x->stage_len + n > TLS_RECORD && (rc = stage_out(k, err, sizeof(err))) < 0)
                    break;
                memcpy(x->stage + x->stage_len, src, n);
                x->stage_len += n;
                x->buf++;
                x->off = 0;
                continue;
            }
            if ((rc = stage_out(k, err, sizeof(err))) < 0)
                break;
            if (n > TLS_STEP)
                n = TLS_STEP;
            rc = cmn__tls_write(x->tls, src, n, err, sizeof(err));
            if (rc < 0)
                break;
            x->off += n;
            if (x->off == ub->len) {
                x->buf++;
                x->off = 0;
            }
            if (cmn__tls_output(x->tls, &unused) >= TLS_FLUSH)
                flush_output(k);
            continue;
        }
        x->head = b->next;
        if (!x->head)
            x->tail = NULL;
        x->buf = x->off = 0;
        cmn__core_sent(k, b, 0);
    }
    if (rc == 0 && k->closing != 2)
        rc = stage_out(k, err, sizeof(err));
    if (rc < 0) {
        tls_failed(k, rc, err);
        return;
    }
    if (k->closing == 2)
        return;
    flush_output(k);
    if (x->shutdown_due && !x->head && k->closing != 2) {
        x->shutdown_due = 0;
        tls_finish(k);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    cmn__core_t *k = h->data;

    (void)suggested;
    *buf = uv_buf_init((char *)tlsc(k)->cbuf, TLS_READ);
}

/* Where the next plaintext goes: where plain TCP would read it (cmn__core_read_buf). */
static void place_plain(void *arg, uint8_t **p, size_t *cap)
{
    uv_buf_t b;

    cmn__core_read_buf(arg, 1, &b);
    *p = (uint8_t *)b.base;
    *cap = b.len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cmn__core_t *k = s->data;
    tlsc_t *x = tlsc(k);
    char err[300] = "";
    int was, rc;

    if (!cmn__tcp_read_arrived(k, nread))
        return;
    was = cmn__tls_established(x->tls);
    rc = cmn__tls_on_cipher(x->tls, (const uint8_t *)buf->base, (size_t)nread, place_plain,
                            cmn__core_feed, k, err, sizeof(err));
    if (k->closing != 2)
        flush_output(k);
    if (rc < 0) {
        if (rc != CMN_ECLOSED)
            tls_failed(k, rc, err);
        else
            cmn__core_close(k, rc);
        return;
    }
    if (!was && cmn__tls_established(x->tls)) {
        const char *who = cmn__tls_peer(x->tls);
        cmn_log_debug("%s: TLS 1.3 established%s%s", k->peer, who[0] ? " with " : "", who);
        if (x->head)
            tls_pump(k); /* frames queued during the handshake */
        if (k->cur)
            cmn__core_arm(k);
    }
    cmn__core_read_done(k);
}

static int tls_read_start(cmn__core_t *k)
{
    return uv_read_start(cmn__tcp_stream(k), on_alloc, on_read);
}

static int tls_start(cmn__core_t *k)
{
    char err[300];
    int rc = cmn__tcp_prepare(k);

    if (rc < 0 || (rc = tls_read_start(k)) < 0)
        return rc;
    /* A client sends its first flight now; a server's call just waits for one. */
    rc = cmn__tls_start(tlsc(k)->tls, err, sizeof(err));
    if (rc < 0) {
        cmn_log_warn("%s: %s", k->peer, err);
        cmn__core_set_error(k, "%s", err);
        return rc;
    }
    flush_output(k);
    return 0;
}

/* Into the encryption queue, in order; the pump encrypts as the socket drains (and waits for the
 * handshake). */
static void tls_write(cmn__core_t *k, cmn__batch_t *b)
{
    tlsc_t *x = tlsc(k);

    b->next = NULL;
    CMN_QUEUE_APPEND(x->head, x->tail, b, next);
    if (cmn__tls_established(x->tls))
        tls_pump(k);
}

static void tls_shutdown(cmn__core_t *k)
{
    if (tlsc(k)->head) {
        tlsc(k)->shutdown_due = 1; /* tls_pump finishes once the queue is encrypted */
        return;
    }
    tls_finish(k);
}

static void tls_close(cmn__core_t *k)
{
    tlsc_t *x = tlsc(k);
    cmn__batch_t *b;

    while ((b = x->head) != NULL) {
        x->head = b->next;
        cmn__core_sent(k, b, UV_ECANCELED);
    }
    x->tail = NULL;
    cmn__tcp_close(k);
}

static void tls_describe(const cmn__core_t *k, char *buf, size_t len)
{
    (void)k;
    snprintf(buf, len, "tls");
}

static const char *tls_peer_identity(const cmn__core_t *k)
{
    tlsc_t *x = tlsc(k);
    return x && cmn__tls_established(x->tls) ? cmn__tls_peer(x->tls) : "";
}

static const cmn__ops_t tls_ops = {
    .name = "tls",
    .flags = 0,
    .start = tls_start,
    .send = cmn__core_queue,
    .write = tls_write,
    .turn_end = cmn__core_turn_end,
    .flush = cmn__core_flush,
    .read_start = tls_read_start,
    .read_stop = cmn__tcp_read_stop,
    .shutdown = tls_shutdown,
    .close = tls_close,
    .describe = tls_describe,
    .peer_identity = tls_peer_identity,
    .fileno = cmn__tcp_fileno,
};

static void tlsc_free(void *p)
{
    tlsc_t *x = p;
    cmn__tls_free(x->tls);
    free(x->cbuf);
    free(x);
}

int cmn__tls_attach(cmn__core_t *k, cmn_tls_ctx_t *ctx, const char *peer_name)
{
    tlsc_t *x = calloc(1, sizeof(*x));
    char err[300];
    int rc;

    if (!x)
        return -ENOMEM;
    x->cbuf = malloc(TLS_READ);
    if (!x->cbuf) {
        free(x);
        return -ENOMEM;
    }
    rc = cmn__tls_new(ctx, peer_name, &x->tls, err, sizeof(err));
    if (rc < 0) {
        cmn_log_error("%s: %s", k->peer, err);
        free(x->cbuf);
        free(x);
        return rc;
    }
    cmn__tcp_set_upper(k, x, tlsc_free);
    cmn__core_attach(k, &tls_ops, k->tp);
    return 0;
}
