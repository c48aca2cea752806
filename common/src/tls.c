/* TLS contexts and the per-connection TLS engine used by tls_conn.c (OpenSSL).
 *
 * The engine never touches the socket. Its BIO (one of our own, not OpenSSL's memory BIOs, which
 * cost two copies of every byte each way and an allocation per drain) reads ciphertext straight
 * from the buffer the socket was read into, and appends whatever OpenSSL wants to send
 * (handshake records, session tickets, alerts, encrypted frames) to one output buffer that
 * tls_conn.c writes to the socket as it is, reused once the kernel has taken it. */
#include "cmn/tls.h"
#include "tls_internal.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#if defined(__aarch64__) && defined(__linux__)
#    include <asm/hwcap.h>
#    include <sys/auxv.h>
#endif

struct cmn_tls_ctx {
    SSL_CTX *ssl;
    int is_server;
    char **allow; /* NULL-terminated client names, or NULL */
};

struct cmn__tls {
    cmn_tls_ctx_t *ctx;
    SSL *ssl;
    int established;
    char peer_name[256];
    /* Ciphertext received and not yet taken by OpenSSL (the BIO's read side). */
    const uint8_t *in;
    size_t in_len;
    /* Ciphertext produced and not yet sent (the BIO's write side), and one spare buffer. */
    uint8_t *out, *spare;
    size_t out_len, out_cap, spare_cap;
};

/* The first output buffer: a full step of records (tls_conn.c's TLS_STEP) and their overhead. */
#define OUT_MIN (80u * 1024u)

/* The most recent OpenSSL error as text (or |fallback|). */
static const char *ossl_err(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_get_error(), next;

    if (!e) {
        snprintf(buf, len, "%s", fallback);
        return buf;
    }
    /* The deepest error is the root cause; report it. */
    while ((next = ERR_get_error()) != 0)
        e = next;
    ERR_error_string_n(e, buf, len);
    return buf;
}

/* Whether this CPU encrypts AES in hardware (AES-NI, the ARMv8 crypto extension). */
static int cpu_has_aes(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes");
#elif defined(__aarch64__) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_AES) != 0;
#else
    return 0;
#endif
}

/* TLS 1.3 suites, fastest first: with AES in hardware AES-128-GCM (5.5 GB/s a core here against
 * 5.2 for AES-256-GCM, OpenSSL's own first choice, and 4.9 for ChaCha20), without it ChaCha20. */
#define SUITES_AES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define SUITES_SOFT "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

static int ctx_common(SSL_CTX *s, cmn_errbuf_t *eb)
{
    if (!SSL_CTX_set_min_proto_version(s, TLS1_3_VERSION))
        return cmn_errf(eb, CMN_ETLS, "cannot require TLS 1.3");
    if (SSL_CTX_set_ciphersuites(s, cpu_has_aes() ? SUITES_AES : SUITES_SOFT) != 1)
        return cmn_errf(eb, CMN_ETLS, "cannot set the TLS 1.3 cipher suites");
    /* A peer that closes without close_notify is just a closed connection here. A server picks
     * by its own order: the client's may put a slower suite first. */
    SSL_CTX_set_options(s, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* No SSL_MODE_RELEASE_BUFFERS: it frees and allocates OpenSSL's record buffers (17 KiB each
     * way) around every SSL_write and every emptied read. */
    SSL_CTX_set_mode(s, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return 0;
}

static int load_pair(SSL_CTX *s, const char *cert, const char *key, cmn_errbuf_t *eb)
{
    char e[256];

    if (SSL_CTX_use_certificate_chain_file(s, cert) != 1)
        return cmn_errf(eb, CMN_ETLS, "TLS certificate %s: %s", cert,
                        ossl_err(e, sizeof(e), "unreadable"));
    if (SSL_CTX_use_PrivateKey_file(s, key, SSL_FILETYPE_PEM) != 1)
        return cmn_errf(eb, CMN_ETLS, "TLS key %s: %s", key, ossl_err(e, sizeof(e), "unreadable"));
    if (SSL_CTX_check_private_key(s) != 1)
        return cmn_errf(eb, CMN_ETLS, "TLS key %s does not match certificate %s", key, cert);
    return 0;
}

static int parse_allow(cmn_tls_ctx_t *c, const char *allow, cmn_errbuf_t *eb)
{
    size_t n = 1, i = 0;
    const char *p;
    char *copy, *tok, *save = NULL;

    for (p = allow; *p; p++)
        n += *p == ',';
    c->allow = calloc(n + 1, sizeof(char *));
    copy = strdup(allow);
    if (!c->allow || !copy) {
        free(copy);
        return cmn_errf(eb, -ENOMEM, "out of memory");
    }
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (*tok)
            c->allow[i++] = strdup(tok);
    }
    free(copy);
    if (i == 0)
        return cmn_errf(eb, CMN_ECONFIG, "TLS allow list '%s' names nobody", allow);
    return 0;
}

int cmn_tls_server_ctx(const char *cert, const char *key, const char *client_ca, const char *allow,
                       cmn_tls_ctx_t **out, cmn_errbuf_t *eb)
{
    cmn_tls_ctx_t *c;
    char e[256];
    int rc;

    if (!cert || !key)
        return cmn_errf(eb, CMN_ECONFIG, "TLS needs both a certificate and a key");
    if (allow && !client_ca)
        return cmn_errf(eb, CMN_ECONFIG, "a TLS allow list needs a client CA (mutual TLS)");
    c = calloc(1, sizeof(*c));
    if (!c)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    c->is_server = 1;
    c->ssl = SSL_CTX_new(TLS_server_method());
    if (!c->ssl) {
        rc = cmn_errf(eb, CMN_ETLS, "TLS context: %s", ossl_err(e, sizeof(e), "failed"));
        goto fail;
    }
    if ((rc = ctx_common(c->ssl, eb)) < 0 || (rc = load_pair(c->ssl, cert, key, eb)) < 0)
        goto fail;
    if (client_ca) {
        if (SSL_CTX_load_verify_locations(c->ssl, client_ca, NULL) != 1) {
            rc = cmn_errf(eb, CMN_ETLS, "TLS client CA %s: %s", client_ca,
                          ossl_err(e, sizeof(e), "unreadable"));
            goto fail;
        }
        SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    if (allow && (rc = parse_allow(c, allow, eb)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    cmn_tls_ctx_free(c);
    return rc;
}

int cmn_tls_client_ctx(const char *ca, const char *cert, const char *key, cmn_tls_ctx_t **out,
                       cmn_errbuf_t *eb)
{
    cmn_tls_ctx_t *c;
    char e[256];
    int rc;

    if ((cert == NULL) != (key == NULL))
        return cmn_errf(eb, CMN_ECONFIG,
                        "a TLS client certificate needs its key, and a key its certificate");
    c = calloc(1, sizeof(*c));
    if (!c)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    c->ssl = SSL_CTX_new(TLS_client_method());
    if (!c->ssl) {
        rc = cmn_errf(eb, CMN_ETLS, "TLS context: %s", ossl_err(e, sizeof(e), "failed"));
        goto fail;
    }
    if ((rc = ctx_common(c->ssl, eb)) < 0)
        goto fail;
    if (ca ? SSL_CTX_load_verify_locations(c->ssl, ca, NULL) != 1
           : SSL_CTX_set_default_verify_paths(c->ssl) != 1) {
        rc = cmn_errf(eb, CMN_ETLS, "TLS CA %s: %s", ca ? ca : "(system store)",
                      ossl_err(e, sizeof(e), "unreadable"));
        goto fail;
    }
    SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER, NULL);
    if (cert && (rc = load_pair(c->ssl, cert, key, eb)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    cmn_tls_ctx_free(c);
    return rc;
}

void cmn_tls_ctx_free(cmn_tls_ctx_t *c)
{
    size_t i;

    if (!c)
        return;
    if (c->allow) {
        for (i = 0; c->allow[i]; i++)
            free(c->allow[i]);
        free(c->allow);
    }
    SSL_CTX_free(c->ssl);
    free(c);
}

/* ---- the engine's BIO --------------------------------------------------------------------- */

static int out_reserve(cmn__tls_t *t, size_t need)
{
    size_t cap = t->out_cap ? t->out_cap : OUT_MIN;
    uint8_t *p;

    if (t->out && need <= t->out_cap)
        return 0;
    while (cap < need)
        cap *= 2;
    p = realloc(t->out, cap);
    if (!p)
        return -ENOMEM;
    t->out = p;
    t->out_cap = cap;
    return 0;
}

static int bio_write(BIO *b, const char *p, int n)
{
    cmn__tls_t *t = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (out_reserve(t, t->out_len + (size_t)n) < 0)
        return -1; /* no retry flag: SSL_write fails, and says so */
    memcpy(t->out + t->out_len, p, (size_t)n);
    t->out_len += (size_t)n;
    return n;
}

static int bio_read(BIO *b, char *p, int n)
{
    cmn__tls_t *t = BIO_get_data(b);
    size_t take;

    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (t->in_len == 0) {
        BIO_set_retry_read(b); /* no data yet, not end of file */
        return -1;
    }
    take = t->in_len < (size_t)n ? t->in_len : (size_t)n;
    memcpy(p, t->in, take);
    t->in += take;
    t->in_len -= take;
    return (int)take;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    cmn__tls_t *t = BIO_get_data(b);

    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1; /* the owner writes the output out */
    case BIO_CTRL_PENDING:
        return t ? (long)t->in_len : 0;
    case BIO_CTRL_WPENDING:
        return t ? (long)t->out_len : 0;
    default:
        return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *bio_method;
static pthread_mutex_t bio_mu = PTHREAD_MUTEX_INITIALIZER;

/* The BIO's method, made once per process (made again by the next connection if it could not
 * be made: out of memory is not for ever). */
static BIO_METHOD *bio_method_get(void)
{
    BIO_METHOD *m;

    pthread_mutex_lock(&bio_mu);
    if (!bio_method) {
        m = BIO_meth_new(BIO_TYPE_SOURCE_SINK, "cmn tls");
        if (m && BIO_meth_set_write(m, bio_write) == 1 && BIO_meth_set_read(m, bio_read) == 1 &&
            BIO_meth_set_ctrl(m, bio_ctrl) == 1 && BIO_meth_set_create(m, bio_create) == 1)
            bio_method = m;
        else
            BIO_meth_free(m);
    }
    m = bio_method;
    pthread_mutex_unlock(&bio_mu);
    return m;
}

/* ---- per-connection engine ------------------------------------------------------------------- */

int cmn__tls_new(cmn_tls_ctx_t *ctx, const char *peer_name, cmn__tls_t **out, char *err,
                 size_t errlen)
{
    cmn__tls_t *t = calloc(1, sizeof(*t));
    char e[256];
    BIO_METHOD *m;
    BIO *bio = NULL;

    if (!t)
        return -ENOMEM;
    t->ctx = ctx;
    t->ssl = SSL_new(ctx->ssl);
    if (t->ssl && (m = bio_method_get()) != NULL)
        bio = BIO_new(m);
    if (!t->ssl || !bio) {
        snprintf(err, errlen, "TLS session: %s", ossl_err(e, sizeof(e), "out of memory"));
        BIO_free(bio);
        SSL_free(t->ssl);
        free(t);
        return CMN_ETLS;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio); /* one reference for both directions, owned by ssl */
    if (ctx->is_server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (peer_name && *peer_name) {
            X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
            /* An address is checked against IP SANs, a name against DNS SANs (and sent as SNI). */
            if (X509_VERIFY_PARAM_set1_ip_asc(vp, peer_name) != 1) {
                SSL_set_tlsext_host_name(t->ssl, peer_name);
                SSL_set1_host(t->ssl, peer_name);
            }
        }
    }
    *out = t;
    return 0;
}

void cmn__tls_free(cmn__tls_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* frees the BIO */
    free(t->out);
    free(t->spare);
    free(t);
}

int cmn__tls_established(const cmn__tls_t *t)
{
    return t->established;
}

const char *cmn__tls_peer(const cmn__tls_t *t)
{
    return t->peer_name;
}

/* After the handshake: record the peer's identity and apply the server's allow list. */
static int check_peer(cmn__tls_t *t, char *err, size_t errlen)
{
    X509 *cert = SSL_get1_peer_certificate(t->ssl);
    size_t i;
    int ok = 0;

    if (cert) {
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, t->peer_name,
                                  (int)sizeof(t->peer_name));
    }
    if (!t->ctx->allow) {
        X509_free(cert);
        return 0;
    }
    for (i = 0; cert && t->ctx->allow[i] && !ok; i++)
        ok = X509_check_host(cert, t->ctx->allow[i], 0, 0, NULL) == 1;
    X509_free(cert);
    if (!ok) {
        snprintf(err, errlen, "client certificate '%s' is not in the allow list",
                 t->peer_name[0] ? t->peer_name : "?");
        return CMN_EAUTH;
    }
    return 0;
}

static int handshake_error(cmn__tls_t *t, int r, char *err, size_t errlen)
{
    char e[256];
    long vr = SSL_get_verify_result(t->ssl);

    (void)r;
    if (vr != X509_V_OK) {
        snprintf(err, errlen, "TLS handshake: certificate verification failed: %s",
                 X509_verify_cert_error_string(vr));
        ERR_clear_error();
        return CMN_EAUTH;
    }
    snprintf(err, errlen, "TLS handshake: %s", ossl_err(e, sizeof(e), "failed"));
    return CMN_ETLS;
}

int cmn__tls_start(cmn__tls_t *t, char *err, size_t errlen)
{
    int r;

    ERR_clear_error();
    r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->established = 1;
        return check_peer(t, err, errlen);
    }
    r = SSL_get_error(t->ssl, r);
    if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
        return 0;
    return handshake_error(t, r, err, errlen);
}

int cmn__tls_on_cipher(cmn__tls_t *t, const uint8_t *in, size_t n,
                       void (*place)(void *arg, uint8_t **p, size_t *cap),
                       int (*deliver)(void *arg, const uint8_t *p, size_t len), void *arg,
                       char *err, size_t errlen)
{
    int r, rc = 0;

    /* OpenSSL reads the ciphertext from where it lies (bio_read); all of it is taken before
     * this returns, the part of a record included. */
    t->in = in;
    t->in_len = n;
    ERR_clear_error();
    if (!t->established) {
        rc = cmn__tls_start(t, err, errlen);
        if (rc < 0 || !t->established)
            goto out;
    }
    for (;;) {
        uint8_t *p;
        size_t cap;

        /* The plaintext goes where the frame decoder wants it: a large frame's body straight
         * into place, the rest into the read buffer. */
        place(arg, &p, &cap);
        r = SSL_read(t->ssl, p, cap > INT32_MAX ? INT32_MAX : (int)cap);
        if (r > 0) {
            rc = deliver(arg, p, (size_t)r);
            if (rc < 0)
                goto out;
            continue;
        }
        r = SSL_get_error(t->ssl, r);
        if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE) {
            rc = 0;
        } else if (r == SSL_ERROR_ZERO_RETURN) {
            rc = CMN_ECLOSED;
        } else {
            char e[256];
            snprintf(err, errlen, "TLS: %s", ossl_err(e, sizeof(e), "record error"));
            rc = CMN_ETLS;
        }
        goto out;
    }
out:
    t->in = NULL;
    t->in_len = 0;
    return rc;
}

int cmn__tls_write(cmn__tls_t *t, const void *p, size_t n, char *err, size_t errlen)
{
    const uint8_t *b = p;

    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n, r;
        ERR_clear_error();
        /* The write BIO is memory: after the handshake a write always completes. */
        r = SSL_write(t->ssl, b, chunk);
        if (r <= 0) {
            char e[256];
            snprintf(err, errlen, "TLS write: %s", ossl_err(e, sizeof(e), "failed"));
            return CMN_ETLS;
        }
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

void cmn__tls_close_notify(cmn__tls_t *t)
{
    if (t->established) {
        ERR_clear_error();
        SSL_shutdown(t->ssl);
    }
}

size_t cmn__tls_output(const cmn__tls_t *t, const uint8_t **p)
{
    *p = t->out;
    return t->out_len;
}

void cmn__tls_output_sent(cmn__tls_t *t)
{
    t->out_len = 0;
}

size_t cmn__tls_take_output(cmn__tls_t *t, uint8_t **out, size_t *cap)
{
    size_t n = t->out_len;

    *out = NULL;
    *cap = 0;
    if (n == 0)
        return 0;
    *out = t->out;
    *cap = t->out_cap;
    t->out = t->spare;
    t->out_cap = t->spare_cap;
    t->out_len = 0;
    t->spare = NULL;
    t->spare_cap = 0;
    return n;
}

void cmn__tls_give_back(cmn__tls_t *t, uint8_t *buf, size_t cap)
{
    if (!t->out) {
        t->out = buf;
        t->out_cap = cap;
    } else if (!t->spare) {
        t->spare = buf;
        t->spare_cap = cap;
    } else {
        free(buf);
    }
}
