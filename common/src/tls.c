/* TLS contexts and the per-connection TLS engine used by conn.c (OpenSSL, memory BIOs).
 *
 * The engine never touches the socket: ciphertext from the socket is written into the read BIO,
 * plaintext comes out of SSL_read, and whatever OpenSSL wants to send (handshake records,
 * session tickets, alerts, encrypted frames) accumulates in the write BIO, which conn.c drains
 * to the socket after every call. */
#include "cmn/tls.h"
#include "tls_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

struct cmn_tls_ctx {
    SSL_CTX *ssl;
    int is_server;
    char **allow; /* NULL-terminated client names, or NULL */
};

struct cmn__tls {
    cmn_tls_ctx_t *ctx;
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int established;
    char peer_name[256];
};

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

static int ctx_common(SSL_CTX *s, cmn_errbuf_t *eb)
{
    if (!SSL_CTX_set_min_proto_version(s, TLS1_3_VERSION))
        return cmn_errf(eb, CMN_ETLS, "cannot require TLS 1.3");
    /* A peer that closes without close_notify is just a closed connection here. */
    SSL_CTX_set_options(s, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(s, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
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

/* ---- per-connection engine ------------------------------------------------------------------- */

int cmn__tls_new(cmn_tls_ctx_t *ctx, const char *peer_name, cmn__tls_t **out, char *err,
                 size_t errlen)
{
    cmn__tls_t *t = calloc(1, sizeof(*t));
    char e[256];

    if (!t)
        return -ENOMEM;
    t->ctx = ctx;
    t->ssl = SSL_new(ctx->ssl);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        snprintf(err, errlen, "TLS session: %s", ossl_err(e, sizeof(e), "out of memory"));
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return CMN_ETLS;
    }
    /* An empty read BIO means "no data yet", not end of file. */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
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
    SSL_free(t->ssl); /* frees both BIOs */
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

int cmn__tls_on_cipher(cmn__tls_t *t, const uint8_t *in, size_t n, uint8_t *plain, size_t plain_cap,
                       int (*deliver)(void *arg, const uint8_t *p, size_t len), void *arg,
                       char *err, size_t errlen)
{
    int r, rc;

    while (n > 0) {
        int w = BIO_write(t->rbio, in, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0) {
            snprintf(err, errlen, "TLS: cannot buffer received data");
            return CMN_ETLS;
        }
        in += w;
        n -= (size_t)w;
    }
    if (!t->established) {
        rc = cmn__tls_start(t, err, errlen);
        if (rc < 0 || !t->established)
            return rc;
    }
    for (;;) {
        ERR_clear_error();
        r = SSL_read(t->ssl, plain, plain_cap > INT32_MAX ? INT32_MAX : (int)plain_cap);
        if (r > 0) {
            rc = deliver(arg, plain, (size_t)r);
            if (rc < 0)
                return rc;
            continue;
        }
        r = SSL_get_error(t->ssl, r);
        if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
            return 0;
        if (r == SSL_ERROR_ZERO_RETURN)
            return CMN_ECLOSED;
        {
            char e[256];
            snprintf(err, errlen, "TLS: %s", ossl_err(e, sizeof(e), "record error"));
        }
        return CMN_ETLS;
    }
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

size_t cmn__tls_take_output(cmn__tls_t *t, uint8_t **out)
{
    size_t n = (size_t)BIO_ctrl_pending(t->wbio);
    uint8_t *buf;

    *out = NULL;
    if (n == 0)
        return 0;
    buf = malloc(n);
    if (!buf)
        return 0;
    if (BIO_read(t->wbio, buf, (int)n) != (int)n) {
        free(buf);
        return 0;
    }
    *out = buf;
    return n;
}
