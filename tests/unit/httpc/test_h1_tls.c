/* Unit tests of the lean HTTP/1.1 client's TLS (httpc/h1.h with cfg.tls; src/h1_tls.c) against
 * an OpenSSL server thread with a certificate made here (EC P-256, IP 127.0.0.1): six requests
 * and a 40 KB request (several records) on one kept-alive TLS connection, the answers' bytes
 * equal; the server's close_notify on an idle connection raced by a request (sent again, once, on
 * a new connection); a stalled handshake failing the request at the handshake deadline with its
 * message; a request cancelled during the handshake (no callback, its connection closed); the pool
 * closed during a handshake (HTTPC_ESTOP); a certificate for another host refused ("hostname
 * mismatch"); a CA file that does not exist refused at create, naming it. */
#include "h1_call.h"
#include "tnsock.h"
#include "../check_main.h"

#include "httpc/h1.h"
#include "httpc/httpc.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BIG_BODY 40000u

/* ---- a certificate and a TLS server thread ---- */

static char ca_path[64];
static SSL_CTX *srv_ctx;

static void add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX v3;
    X509_EXTENSION *e;

    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A self-signed certificate for IP 127.0.0.1, written to ca_path; the server's context. */
static void make_cert(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *n;
    FILE *f;
    int fd;

    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, k);
    n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1,
                               0);
    X509_set_issuer_name(x, n);
    add_ext(x, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(x, NID_subject_alt_name, "IP:127.0.0.1");
    ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
    snprintf(ca_path, sizeof(ca_path), "/tmp/h1tls-ca-XXXXXX");
    fd = mkstemp(ca_path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    ck_assert_int_eq(PEM_write_X509(f, x), 1);
    fclose(f);
    srv_ctx = SSL_CTX_new(TLS_server_method());
    ck_assert_int_eq(SSL_CTX_use_certificate(srv_ctx, x), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(srv_ctx, k), 1);
    X509_free(x);
    EVP_PKEY_free(k);
}

typedef struct {
    int lfd;
    int mode; /* 0: keep-alive answers; 1: one answer, then close_notify and a close while idle;
                 2: accept, never a byte back (a stalled handshake); 3: keep-alive streams of
                 N_EV events, one record each, 2 ms apart */
    int accepted, requests, closed_by_peer;
    size_t biggest; /* the largest request body read */
    int stop;
} server_t;

static int read_request(SSL *ssl, char *buf, size_t cap, size_t *body)
{
    size_t got = 0;

    for (;;) {
        int r = SSL_read(ssl, buf + got, (int)(cap - 1 - got));
        char *end, *cl;
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
        cl = strstr(buf, "Content-Length: ");
        if (end && cl) {
            *body = strtoul(cl + 16, NULL, 10);
            if (got >= (size_t)(end + 4 - buf) + *body)
                return 0;
        }
    }
}

/* Mode 3's answer: chunked SSE events "data: NN\n", each its own TLS record and segment. */
static int stream_events(SSL *ssl)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    char ev[32];
    int one = 1;

    setsockopt(SSL_get_fd(ssl), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (SSL_write(ssl, head, (int)strlen(head)) <= 0)
        return -1;
    for (int i = 0; i < N_EV; i++) {
        usleep(2000);
        snprintf(ev, sizeof(ev), "9\r\ndata: %02d\n\r\n", i);
        if (SSL_write(ssl, ev, (int)strlen(ev)) <= 0)
            return -1;
    }
    return SSL_write(ssl, "0\r\n\r\n", 5) <= 0 ? -1 : 0;
}

static void *serve(void *arg)
{
    server_t *s = arg;
    static char buf[BIG_BODY + 4096];
    static const char sse[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "8\r\ndata: 1\n\r\n0\r\n\r\n";

    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int fd = accept(s->lfd, NULL, NULL);
        SSL *ssl;
        size_t body = 0;
        if (fd < 0)
            break;
        __atomic_add_fetch(&s->accepted, 1, __ATOMIC_RELEASE);
        if (s->mode == 2) {
            char b[4096];
            while (read(fd, b, sizeof(b)) > 0)
                ;
            __atomic_add_fetch(&s->closed_by_peer, 1, __ATOMIC_RELEASE);
            close(fd);
            continue;
        }
        ssl = SSL_new(srv_ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1) {
            while (read_request(ssl, buf, sizeof(buf), &body) == 0) {
                __atomic_add_fetch(&s->requests, 1, __ATOMIC_RELEASE);
                if (body > s->biggest)
                    s->biggest = body;
                if (s->mode == 3) {
                    if (stream_events(ssl) < 0)
                        break;
                    continue;
                }
                if (SSL_write(ssl, sse, (int)strlen(sse)) <= 0 || s->mode == 1)
                    break;
            }
            if (s->mode == 1) {
                usleep(100000);
                SSL_shutdown(ssl);
            }
        }
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

static void server_start(server_t *s, int mode, int *port, pthread_t *th)
{
    memset(s, 0, sizeof(*s));
    s->mode = mode;
    s->lfd = tn_listen_any(port);
    ck_assert_int_eq(pthread_create(th, NULL, serve, s), 0);
}

static void server_stop(server_t *s, pthread_t th)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    shutdown(s->lfd, SHUT_RDWR);
    close(s->lfd);
    pthread_join(th, NULL);
}

/* ---- the client side ---- */

static httpc_h1_pool_t *tls_pool_c(uv_loop_t *loop, const char *host, int port, uint32_t hs_ms,
                                   uint32_t coalesce_us)
{
    httpc_h1_cfg_t cfg = {.host = host,
                          .port = (uint16_t)port,
                          .path = "/v1/completions",
                          .max_conns = 1,
                          .connect_ms = 2000,
                          .first_byte_ms = 5000,
                          .idle_ms = 5000,
                          .tls = 1,
                          .ca_file = ca_path,
                          .handshake_ms = hs_ms,
                          .coalesce_us = coalesce_us};
    httpc_h1_pool_t *p = NULL;
    char err[300];
    int rc = httpc_h1_pool_create(loop, &cfg, &p, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    return p;
}

static httpc_h1_pool_t *tls_pool(uv_loop_t *loop, const char *host, int port, uint32_t hs_ms)
{
    return tls_pool_c(loop, host, port, hs_ms, 0);
}

static void close_pool(uv_loop_t *loop, httpc_h1_pool_t *p)
{
    httpc_h1_pool_close(p);
    uv_run(loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(loop), 0);
}

static void on_wait(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop for about |ms|. */
static void run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uint64_t end;

    uv_update_time(loop);
    end = uv_now(loop) + ms;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, on_wait, 10, 10);
    while (uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

START_TEST(h1_tls)
{
    static char big[BIG_BODY];
    uv_loop_t loop;
    server_t s;
    pthread_t th;
    int port;
    call_t c[7];
    httpc_h1_pool_t *p;
    uint64_t reused, opened;

    make_cert();
    memset(big, 'x', sizeof(big));

    /* keep-alive over TLS: six requests and a 40 KB one on one connection */
    server_start(&s, 0, &port, &th);
    uv_loop_init(&loop);
    p = tls_pool(&loop, "127.0.0.1", port, 0);
    for (int i = 0; i < 7; i++) {
        call_init_body(&c[i], i == 6 ? big : "{\"prompt\":[1]}", i == 6 ? sizeof(big) : 14);
        ck_assert_int_eq(httpc_h1_send(p, &c[i].r), 0);
    }
    run_until(&loop, c, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_msg(c[i].status == 0 && c[i].len == 8 && memcmp(c[i].data, "data: 1\n", 8) == 0,
                      "%d: %d %s", i, c[i].status, c[i].msg);
    httpc_h1_pool_counts(p, &reused, &opened);
    ck_assert_uint_eq(opened, 1);
    ck_assert_uint_eq(reused, 6);
    close_pool(&loop, p);
    server_stop(&s, th);
    ck_assert_int_eq(s.accepted, 1);
    ck_assert_int_eq(s.requests, 7);
    ck_assert_uint_eq(s.biggest, BIG_BODY);

    /* the server's close_notify on the idle connection, raced by the next request: sent again
     * once on a new connection */
    server_start(&s, 1, &port, &th);
    uv_loop_init(&loop);
    p = tls_pool(&loop, "127.0.0.1", port, 0);
    call_init_body(&c[0], "{}", 2);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_msg(c[0].status == 0, "%s", c[0].msg);
    usleep(300000); /* closed by now, its close_notify not read yet */
    call_init_body(&c[1], "{}", 2);
    httpc_h1_send(p, &c[1].r);
    run_until(&loop, &c[1], 1);
    ck_assert_msg(c[1].status == 0 && c[1].len == 8, "%s", c[1].msg);
    close_pool(&loop, p);
    server_stop(&s, th);
    ck_assert_int_eq(s.requests, 2);

    /* a stalled handshake: the request fails at the handshake deadline, named */
    server_start(&s, 2, &port, &th);
    uv_loop_init(&loop);
    p = tls_pool(&loop, "127.0.0.1", port, 300);
    call_init_body(&c[0], "{}", 2);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_int_eq(c[0].status, HTTPC_H1_ECONNECT);
    {
        char want[120];
        snprintf(want, sizeof(want),
                 "https://127.0.0.1:%d: TLS handshake failed: not done within "
                 "300 ms",
                 port);
        ck_assert_msg(strcmp(c[0].msg, want) == 0, "'%s'", c[0].msg);
    }
    /* cancelled during the handshake: no callback, its connection closed (the server sees the
     * close) */
    call_init_body(&c[1], "{}", 2);
    httpc_h1_send(p, &c[1].r);
    run_for(&loop, 50);
    httpc_h1_cancel(p, &c[1].r);
    run_for(&loop, 200);
    ck_assert_int_eq(c[1].done, 0);
    ck_assert_int_eq(__atomic_load_n(&s.closed_by_peer, __ATOMIC_ACQUIRE), 2);
    /* the pool closed during a handshake: HTTPC_ESTOP */
    call_init_body(&c[2], "{}", 2);
    httpc_h1_send(p, &c[2].r);
    run_for(&loop, 50);
    ck_assert_int_eq(c[2].done, 0);
    close_pool(&loop, p);
    ck_assert_int_eq(c[2].status, HTTPC_ESTOP);
    server_stop(&s, th);

    /* a certificate for another host: refused, naming the endpoint and the defect */
    server_start(&s, 0, &port, &th);
    uv_loop_init(&loop);
    p = tls_pool(&loop, "localhost", port, 0);
    call_init_body(&c[0], "{}", 2);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_int_eq(c[0].status, HTTPC_H1_ECONNECT);
    {
        char want[160];
        snprintf(want, sizeof(want),
                 "https://localhost:%d: TLS handshake failed: certificate "
                 "verify failed (hostname mismatch)",
                 port);
        ck_assert_msg(strcmp(c[0].msg, want) == 0, "'%s'", c[0].msg);
    }
    close_pool(&loop, p);
    server_stop(&s, th);
    ck_assert_int_eq(s.requests, 0);

    /* a CA file that does not exist: refused at create */
    {
        httpc_h1_cfg_t cfg = {.host = "127.0.0.1",
                              .port = 443,
                              .path = "/",
                              .tls = 1,
                              .ca_file = "/nonexistent/ca.pem"};
        httpc_h1_pool_t *none = NULL;
        char err[300] = "";
        uv_loop_init(&loop);
        ck_assert_int_lt(httpc_h1_pool_create(&loop, &cfg, &none, err, sizeof(err)), 0);
        ck_assert_ptr_null(none);
        ck_assert_msg(strstr(err, "https://127.0.0.1:443: TLS CA /nonexistent/ca.pem: "), "%s",
                      err);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
    }

    /* read coalescing over TLS: two 20-event streams on one connection, every byte once and in
     * order, read on a 200 ms tick once reads came less than 100 ms apart */
    {
        coal_call_t cc[2];
        server_start(&s, 3, &port, &th);
        uv_loop_init(&loop);
        p = tls_pool_c(&loop, "127.0.0.1", port, 0, 200000);
        for (int i = 0; i < 2; i++) {
            call_init_body(&cc[i].c, "{\"prompt\":[1]}", 14);
            coal_attach(&cc[i], p);
            httpc_h1_send(p, &cc[i].c.r);
        }
        run_until(&loop, &cc[0].c, 1);
        run_until(&loop, &cc[1].c, 1);
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(cc[i].c.status == 0, "%d: %s", i, cc[i].c.msg);
            ck_assert_int_eq(cc[i].pieces, N_EV);
            expect_events(&cc[i].c, N_EV);
        }
        httpc_h1_pool_counts(p, &reused, &opened);
        ck_assert_uint_eq(opened, 1);
        ck_assert_uint_eq(reused, 1);
        ck_assert_uint_eq(httpc_h1_pool_coalesces(p), 2);
        close_pool(&loop, p);
        server_stop(&s, th);
    }
    SSL_CTX_free(srv_ctx);
    unlink(ca_path);
}
END_TEST

TCase *tc_h1_tls(void);

CHECK_ONE_TEST_TCASE(h1_tls)

CHECK_MAIN("httpc_h1_tls", tc_h1_tls)
