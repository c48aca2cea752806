/* The lean client's TLS engine (h1_tls.h): OpenSSL over a BIO of our own on the connection's
 * libuv stream. common/'s TLS (cmn/tls.h) is the wire protocol's: TLS 1.3 only, client
 * certificates, private to common's framing core, and linked with the rest of cmn (UCX, protobuf)
 * that httpc and the backend plugins do not link; an HTTPS engine may speak TLS 1.2 and wants
 * ALPN, so the client context is made here, on the same principles (no memory BIO, one output
 * buffer reused, the deepest OpenSSL reason in the message). */
#include "h1_tls.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAIN 16384u /* TLS's largest record */
#define GATHER 16384u
#define OUT_FIRST 4096u
/* Ciphertext queued for a socket that does not take it, at most, beyond the first write queued
 * (a request of any size goes): a server that never reads but keeps asking for answers (key
 * updates) cannot grow the queue past it. */
#define QUEUED_MAX (4u << 20)

struct h1_tls_ctx {
    SSL_CTX *ssl;
    /* The BIO's methods, the context's own: a process-wide one would outlive a backend plugin
     * unloaded with dlclose (and be a leak there). */
    BIO_METHOD *bio;
};

static BIO_METHOD *method_new(void);

struct h1_tls {
    SSL *ssl;
    const char *in; /* ciphertext not yet taken by OpenSSL (the BIO's read side) */
    size_t in_len;
    char *out; /* ciphertext made and not yet sent (the BIO's write side) */
    size_t out_len, out_cap;
    int writes;    /* queued writes not yet done */
    size_t queued; /* their bytes */
    int got_any;   /* some ciphertext came */
    int plaintext; /* the server's first bytes read "HTTP/": it does not speak TLS */
    char plain[PLAIN];
};

/* A queued write: the rest of the output, copied. */
typedef struct {
    uv_write_t req;
    h1_tls_t *t;
    size_t len;
    char data[];
} tls_wr_t;

/* ---- the context ----------------------------------------------------------------------------- */

/* OpenSSL's reason for the deepest error in its queue (the root cause), or |fallback|. */
static const char *reason(char *buf, size_t len, const char *fallback)
{
    unsigned long e = 0, next;
    const char *r;

    while ((next = ERR_get_error()) != 0)
        e = next;
    r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, len, "%s", r ? r : fallback);
    return buf;
}

int h1_tls_ctx_new(const char *ca_file, h1_tls_ctx_t **out, char *err, size_t errlen)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    h1_tls_ctx_t *x = calloc(1, sizeof(*x));
    char e[160];

    *out = NULL;
    if (!x)
        return -ENOMEM;
    ERR_clear_error();
    x->ssl = SSL_CTX_new(TLS_client_method());
    if (!x->ssl) {
        snprintf(err, errlen, "TLS context: %s", reason(e, sizeof(e), "out of memory"));
        free(x);
        return -ENOMEM;
    }
    if (SSL_CTX_set_min_proto_version(x->ssl, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_alpn_protos(x->ssl, alpn, sizeof(alpn) - 1) != 0) {
        snprintf(err, errlen, "TLS context: cannot require TLS 1.2 and ALPN http/1.1: %s",
                 reason(e, sizeof(e), "failed"));
        h1_tls_ctx_free(x);
        return -EINVAL;
    }
    SSL_CTX_set_options(x->ssl, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(x->ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (ca_file ? SSL_CTX_load_verify_locations(x->ssl, ca_file, NULL) != 1
                : SSL_CTX_set_default_verify_paths(x->ssl) != 1) {
        snprintf(err, errlen, "TLS CA %s: %s", ca_file ? ca_file : "(the system's store)",
                 reason(e, sizeof(e), "unreadable"));
        h1_tls_ctx_free(x);
        return -EINVAL;
    }
    SSL_CTX_set_verify(x->ssl, SSL_VERIFY_PEER, NULL);
    x->bio = method_new();
    if (!x->bio) {
        snprintf(err, errlen, "TLS context: out of memory");
        h1_tls_ctx_free(x);
        return -ENOMEM;
    }
    *out = x;
    return 0;
}

void h1_tls_ctx_free(h1_tls_ctx_t *x)
{
    if (!x)
        return;
    SSL_CTX_free(x->ssl);
    BIO_meth_free(x->bio);
    free(x);
}

/* ---- the BIO: ciphertext in where it lies, out into one buffer ------------------------------ */

static int bio_write(BIO *b, const char *p, int n)
{
    h1_tls_t *t = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (t->out_len + (size_t)n > t->out_cap) {
        size_t cap = t->out_cap ? t->out_cap : OUT_FIRST;
        char *q;
        while (cap < t->out_len + (size_t)n)
            cap *= 2;
        q = realloc(t->out, cap);
        if (!q)
            return -1; /* no retry flag: the SSL call fails and says so */
        t->out = q;
        t->out_cap = cap;
    }
    memcpy(t->out + t->out_len, p, (size_t)n);
    t->out_len += (size_t)n;
    return n;
}

static int bio_read(BIO *b, char *p, int n)
{
    h1_tls_t *t = BIO_get_data(b);
    size_t k;

    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (t->in_len == 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    k = t->in_len < (size_t)n ? t->in_len : (size_t)n;
    memcpy(p, t->in, k);
    t->in += k;
    t->in_len -= k;
    return (int)k;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    h1_tls_t *t = BIO_get_data(b);

    (void)num;
    (void)ptr;
    if (cmd == BIO_CTRL_FLUSH)
        return 1; /* h1_tls_flush sends it */
    if (cmd == BIO_CTRL_PENDING)
        return t ? (long)t->in_len : 0;
    if (cmd == BIO_CTRL_WPENDING)
        return t ? (long)t->out_len : 0;
    return 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *method_new(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOURCE_SINK, "httpc h1 tls");

    if (m && BIO_meth_set_write(m, bio_write) == 1 && BIO_meth_set_read(m, bio_read) == 1 &&
        BIO_meth_set_ctrl(m, bio_ctrl) == 1 && BIO_meth_set_create(m, bio_create) == 1)
        return m;
    BIO_meth_free(m);
    return NULL;
}

/* ---- a connection ---------------------------------------------------------------------------- */

int h1_tls_new(h1_tls_ctx_t *x, const char *host, h1_tls_t **out)
{
    h1_tls_t *t = malloc(sizeof(*t));
    BIO *bio = NULL;

    *out = NULL;
    if (!t)
        return -ENOMEM;
    memset(t, 0, offsetof(h1_tls_t, plain));
    t->ssl = SSL_new(x->ssl);
    if (t->ssl)
        bio = BIO_new(x->bio);
    if (!t->ssl || !bio) {
        BIO_free(bio);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return -ENOMEM;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio); /* one reference for both directions, the SSL's */
    SSL_set_connect_state(t->ssl);
    {
        /* an address is checked against the certificate's IP names; a name against its DNS
         * names, and sent as SNI */
        X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) {
            X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            if (SSL_set_tlsext_host_name(t->ssl, host) != 1 ||
                X509_VERIFY_PARAM_set1_host(vp, host, 0) != 1) {
                SSL_free(t->ssl);
                free(t);
                ERR_clear_error();
                return -ENOMEM;
            }
        }
    }
    *out = t;
    return 0;
}

void h1_tls_free(h1_tls_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* and the BIO */
    free(t->out);
    free(t);
}

void h1_tls_feed(h1_tls_t *t, const char *p, size_t n)
{
    if (!t->got_any && n > 0) {
        t->got_any = 1;
        t->plaintext = n >= 5 && memcmp(p, "HTTP/", 5) == 0;
    }
    t->in = p;
    t->in_len = n;
}

int h1_tls_handshake(h1_tls_t *t, char *err, size_t errlen)
{
    char e[160];
    long vr;
    int r;

    ERR_clear_error();
    r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return 1;
    r = SSL_get_error(t->ssl, r);
    if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
        return 0;
    t->in_len = 0;
    vr = SSL_get_verify_result(t->ssl);
    if (vr != X509_V_OK) {
        snprintf(err, errlen, "TLS handshake failed: %s (%s)",
                 reason(e, sizeof(e), "certificate verify failed"),
                 X509_verify_cert_error_string(vr));
        return -EPROTO;
    }
    snprintf(err, errlen, "TLS handshake failed: %s%s", reason(e, sizeof(e), "refused"),
             t->plaintext ? " (the server answered in plaintext HTTP: an http:// address?)" : "");
    return -EPROTO;
}

int h1_tls_read(h1_tls_t *t, const char **p, char *err, size_t errlen)
{
    char e[160];
    int r;

    ERR_clear_error();
    r = SSL_read(t->ssl, t->plain, (int)sizeof(t->plain));
    if (r > 0) {
        *p = t->plain;
        return r;
    }
    r = SSL_get_error(t->ssl, r);
    if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
        return 0;
    t->in_len = 0;
    if (r == SSL_ERROR_ZERO_RETURN)
        return H1_TLS_EOF;
    snprintf(err, errlen, "TLS: %s", reason(e, sizeof(e), "a record that does not decrypt"));
    return -EPROTO;
}

int h1_tls_pending(const h1_tls_t *t)
{
    return t->in_len > 0 || SSL_pending(t->ssl) > 0;
}

static int write_all(h1_tls_t *t, const char *p, size_t n, char *err, size_t errlen)
{
    char e[160];

    while (n > 0) {
        int k = n > (1u << 30) ? (1 << 30) : (int)n;
        ERR_clear_error();
        k = SSL_write(t->ssl, p, k); /* the output is memory: it always completes */
        if (k <= 0) {
            snprintf(err, errlen, "TLS write: %s", reason(e, sizeof(e), "out of memory"));
            return -EIO;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int h1_tls_write(h1_tls_t *t, const uv_buf_t *b, unsigned nb, char *err, size_t errlen)
{
    char gather[GATHER];
    size_t g = 0;
    int rc;

    /* pieces gathered while they fit one record, so a request is one record, not one each */
    for (unsigned i = 0; i < nb; i++) {
        if (g + b[i].len <= sizeof(gather)) {
            memcpy(gather + g, b[i].base, b[i].len);
            g += b[i].len;
            continue;
        }
        if (g > 0 && (rc = write_all(t, gather, g, err, errlen)) < 0)
            return rc;
        g = 0;
        if ((rc = write_all(t, b[i].base, b[i].len, err, errlen)) < 0)
            return rc;
    }
    return g > 0 ? write_all(t, gather, g, err, errlen) : 0;
}

static void on_written(uv_write_t *w, int status)
{
    tls_wr_t *q = w->data;

    (void)status; /* a failed socket is seen by the reader */
    q->t->writes--;
    q->t->queued -= q->len;
    free(q);
}

int h1_tls_flush(h1_tls_t *t, uv_stream_t *s)
{
    uv_buf_t b;
    size_t done = 0;
    tls_wr_t *q;
    int rc;

    if (t->out_len == 0)
        return 0;
    b = uv_buf_init(t->out, (unsigned)t->out_len);
    rc = t->writes ? UV_EAGAIN : uv_try_write(s, &b, 1);
    if (rc >= 0)
        done = (size_t)rc;
    else if (rc != UV_EAGAIN && rc != UV_ENOSYS) {
        t->out_len = 0;
        return rc;
    }
    if (done < t->out_len) {
        if (t->queued > 0 && t->queued + (t->out_len - done) > QUEUED_MAX) {
            t->out_len = 0;
            return UV_ENOBUFS;
        }
        q = malloc(sizeof(*q) + t->out_len - done);
        if (!q) {
            t->out_len = 0;
            return UV_ENOMEM;
        }
        q->len = t->out_len - done;
        memcpy(q->data, t->out + done, t->out_len - done);
        q->t = t;
        q->req.data = q;
        b = uv_buf_init(q->data, (unsigned)(t->out_len - done));
        rc = uv_write(&q->req, s, &b, 1, on_written);
        if (rc < 0) {
            free(q);
            t->out_len = 0;
            return rc;
        }
        t->writes++;
        t->queued += q->len;
    }
    t->out_len = 0;
    return 0;
}

int h1_tls_writing(const h1_tls_t *t)
{
    return t->writes > 0;
}
