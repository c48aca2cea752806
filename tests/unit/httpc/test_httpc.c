/* Unit tests of the httpc library: the SSE decoder fed byte by byte and in every split, its
 * limit; the HTTP pool against a scripted loopback server (a full stream, an error status, a
 * connection closed mid-stream, a server that never answers, more requests than connections),
 * also with read coalescing (streams that end, a keep-alive connection reused after a coalesced
 * stream, a cut-off while coalesced); cancel and the idle deadline; the option helpers. */
#include "tnsock.h"
#include "../check_main.h"

#include "httpc/httpc.h"
#include "httpc/opts.h"
#include "httpc/sse.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- SSE ---- */

typedef struct {
    char ev[8][128];
    int n;
} evs_t;

static int in_place; /* feed() reads with httpc_sse_next instead of httpc_sse_feed */

/* Feeds |s| in pieces of |step| bytes (0: all at once) and collects the events. */
static int feed(httpc_sse_t *p, const char *s, size_t len, size_t step, evs_t *out)
{
    size_t off = 0;
    while (off < len) {
        size_t piece = step ? (len - off < step ? len - off : step) : len - off;
        while (piece) {
            int have;
            size_t n = 0;
            const char *e = NULL;
            ssize_t used = in_place ? httpc_sse_next(p, s + off, piece, &e, &n)
                                    : httpc_sse_feed(p, s + off, piece, &have);
            if (used < 0)
                return (int)used;
            off += (size_t)used;
            piece -= (size_t)used;
            if (!in_place && have)
                e = httpc_sse_event(p, &n);
            if (e) {
                ck_assert_int_lt(out->n, 8);
                ck_assert_uint_lt(n, 128);
                memcpy(out->ev[out->n], e, n); /* not NUL-terminated in place */
                out->ev[out->n][n] = '\0';
                out->n++;
            }
        }
    }
    return 0;
}

static const char stream[] = ": keep-alive comment\r\n"
                             "event: message\n"
                             "data: {\"a\":1}\r\n\r\n"
                             "data:{\"b\":2}\r\r"
                             "id: 7\n"
                             "data: line1\n"
                             "data: line2\n"
                             "\n"
                             "retry: 10\n\n" /* no data: no event */
                             "data\n\n"      /* a data field with no value: an empty event */
                             "data: [DONE]\n\n"
                             "data: partial"; /* never finished */

START_TEST(sse_bytewise)
{
    size_t step;
    in_place = 0;
    for (step = 0; step <= sizeof(stream); step++) {
        httpc_sse_t p;
        evs_t e = {0};
        httpc_sse_init(&p, 1024);
        ck_assert_int_eq(feed(&p, stream, sizeof(stream) - 1, step, &e), 0);
        ck_assert_int_eq(e.n, 5);
        ck_assert_str_eq(e.ev[0], "{\"a\":1}");
        ck_assert_str_eq(e.ev[1], "{\"b\":2}");
        ck_assert_str_eq(e.ev[2], "line1\nline2");
        ck_assert_str_eq(e.ev[3], "");
        ck_assert_str_eq(e.ev[4], "[DONE]");
        httpc_sse_free(&p);
    }
}
END_TEST

static void sse_limits_check(void);

START_TEST(sse_limits)
{
    in_place = 0;
    sse_limits_check();
}
END_TEST

/* httpc_sse_next: the same events and limits as httpc_sse_feed in every split, a whole LF event
 * read where it lies, anything else through the decoder. */
START_TEST(sse_in_place)
{
    static const char lf[] = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata:x\r\n\r\n";
    const char *e;
    size_t step, n;
    httpc_sse_t p;
    ssize_t used;

    in_place = 1;
    for (step = 0; step <= sizeof(stream); step++) {
        evs_t ev = {0};
        httpc_sse_init(&p, 1024);
        ck_assert_int_eq(feed(&p, stream, sizeof(stream) - 1, step, &ev), 0);
        ck_assert_int_eq(ev.n, 5);
        ck_assert_str_eq(ev.ev[0], "{\"a\":1}");
        ck_assert_str_eq(ev.ev[1], "{\"b\":2}");
        ck_assert_str_eq(ev.ev[2], "line1\nline2");
        ck_assert_str_eq(ev.ev[3], "");
        ck_assert_str_eq(ev.ev[4], "[DONE]");
        httpc_sse_free(&p);
    }
    sse_limits_check();
    httpc_sse_init(&p, 1024);
    used = httpc_sse_next(&p, lf, sizeof(lf) - 1, &e, &n);
    ck_assert_int_eq(used, 15);
    ck_assert_ptr_eq(e, lf + 6); /* in place */
    ck_assert_uint_eq(n, 7);
    used = httpc_sse_next(&p, lf + 15, sizeof(lf) - 16, &e, &n);
    ck_assert_int_eq(used, 15);
    ck_assert_ptr_eq(e, lf + 21);
    ck_assert_uint_eq(n, 7);
    used = httpc_sse_next(&p, lf + 30, sizeof(lf) - 31, &e, &n);
    ck_assert_int_ge(used, 9);
    ck_assert_ptr_nonnull(e);
    ck_assert(e < lf || e >= lf + sizeof(lf)); /* CRLF: through the decoder */
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(e[0], 'x');
    httpc_sse_free(&p);
    /* Over the limit in one piece: refused as by the decoder. */
    httpc_sse_init(&p, 6);
    ck_assert_int_eq(httpc_sse_next(&p, lf, sizeof(lf) - 1, &e, &n), HTTPC_SSE_ETOOBIG);
    httpc_sse_free(&p);
}
END_TEST

static void sse_limits_check(void)
{
    httpc_sse_t p;
    evs_t e = {0};
    char big[300];

    /* A line over the limit is an error, before it ends. */
    memset(big, 'x', sizeof(big));
    memcpy(big, "data: ", 6);
    httpc_sse_init(&p, 256);
    ck_assert_int_eq(feed(&p, big, sizeof(big), 1, &e), HTTPC_SSE_ETOOBIG);
    httpc_sse_free(&p);
    /* Many short data lines that add up past the limit, too. */
    httpc_sse_init(&p, 64);
    {
        int i, rc = 0;
        for (i = 0; i < 20 && rc == 0; i++)
            rc = feed(&p, "data: 0123456789\n", 17, 0, &e);
        ck_assert_int_eq(rc, HTTPC_SSE_ETOOBIG);
    }
    /* After a reset the decoder works again; a line exactly at the limit passes. */
    httpc_sse_reset(&p);
    memset(big, 'y', sizeof(big));
    memcpy(big, "data: ", 6);
    big[64] = '\n';
    big[65] = '\n';
    ck_assert_int_eq(feed(&p, big, 66, 3, &e), 0);
    ck_assert_int_eq(e.n, 1);
    ck_assert_uint_eq(strlen(e.ev[0]), 58);
    httpc_sse_free(&p);
}

/* ---- the HTTP pool against a scripted server ---- */

typedef struct {
    int lfd;
    const char *reply; /* written after the request; NULL: never answer */
} server_t;

static void *serve_one(void *arg)
{
    server_t *s = arg;
    char buf[4096];
    size_t got = 0;
    int fd = accept(s->lfd, NULL, NULL);

    if (fd < 0)
        return NULL;
    /* Read until the headers end and the small body is in (the tests send < 100 bytes). */
    while (got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n") && strstr(buf, "\r\n\r\n")[4] == '{' && buf[got - 1] == '}')
            break;
    }
    if (s->reply) {
        ssize_t w = write(fd, s->reply, strlen(s->reply));
        (void)w;
        close(fd);
    } else {
        sleep(2); /* past the client's deadline */
        close(fd);
    }
    return NULL;
}

typedef struct {
    char data[1024];
    size_t len;
    int status, done;
    char msg[600];
} result_t;

static int on_data(httpc_req_t *r, const char *p, size_t n)
{
    result_t *res = r->ctx;
    if (res->len + n < sizeof(res->data)) {
        memcpy(res->data + res->len, p, n);
        res->len += n;
    }
    return 0;
}

static void on_done(httpc_req_t *r, int status, const char *msg)
{
    result_t *res = r->ctx;
    res->status = status;
    snprintf(res->msg, sizeof(res->msg), "%s", msg);
    __atomic_store_n(&res->done, 1, __ATOMIC_RELEASE);
}

static void run_request(const char *reply, long timeout_ms, result_t *res)
{
    int port;
    server_t s;
    pthread_t th;
    httpc_t *h;
    httpc_cfg_t cfg = {4, 2000, 0, 0, NULL};
    httpc_req_t req;
    char err[200], url[64];
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    int i;

    memset(res, 0, sizeof(*res));
    s.lfd = tn_listen_any(&port);
    s.reply = reply;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_one, &s), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    memset(&req, 0, sizeof(req));
    req.url = url;
    req.body = "{\"prompt\":[1]}";
    req.body_len = strlen(req.body);
    req.headers = hdrs;
    req.timeout_ms = timeout_ms;
    req.on_data = on_data;
    req.on_done = on_done;
    req.ctx = res;
    ck_assert_int_eq(httpc_submit(h, &req), 0);
    for (i = 0; i < 1000 && !__atomic_load_n(&res->done, __ATOMIC_ACQUIRE); i++)
        usleep(10000); /* polls the condition, bounded at 10 s */
    ck_assert_msg(res->done, "no completion within 10 s");
    httpc_destroy(h);
    pthread_join(th, NULL);
    close(s.lfd);
}

/* Serves |n| requests one connection each, in turn (Connection: close). */
typedef struct {
    int lfd, n;
} serve_n_t;

static void *serve_n(void *arg)
{
    serve_n_t *sv = arg;
    static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n"
                                "\r\nok";
    server_t one = {sv->lfd, reply};
    int i;

    for (i = 0; i < sv->n; i++)
        serve_one(&one);
    return NULL;
}

static httpc_req_t *new_req(const char *url, long timeout_ms, result_t *res)
{
    static const char *hdrs[] = {"Content-Type: application/json", NULL};
    httpc_req_t *req = calloc(1, sizeof(*req));

    ck_assert_ptr_nonnull(req);
    req->url = url;
    req->body = "{\"prompt\":[1]}";
    req->body_len = strlen(req->body);
    req->headers = hdrs;
    req->timeout_ms = timeout_ms;
    req->on_data = on_data;
    req->on_done = on_done;
    req->ctx = res;
    return req;
}

static int wait_all_done(result_t *res, int n, int timeout_ms)
{
    int i, k, done = 0;

    for (k = 0; k < timeout_ms / 10; k++) {
        for (i = 0, done = 0; i < n; i++)
            done += __atomic_load_n(&res[i].done, __ATOMIC_ACQUIRE);
        if (done == n)
            break;
        usleep(10000);
    }
    return done;
}

/* More requests than connections wait in the pool's own queue and all complete; one that waits
 * its whole deadline for a connection fails unsent, saying so. */
START_TEST(http_queue)
{
    enum { N = 40 };
    static result_t res[N];
    httpc_req_t *reqs[N];
    httpc_cfg_t cfg = {2, 2000, 0, 0, NULL};
    serve_n_t sv;
    server_t silent;
    pthread_t th;
    httpc_t *h;
    char err[200], url[64];
    int i, port;

    memset(res, 0, sizeof(res));
    sv.lfd = tn_listen_any(&port);
    sv.n = N;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_n, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/models/m/infer", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    for (i = 0; i < N; i++) {
        reqs[i] = new_req(url, 20000, &res[i]);
        ck_assert_int_eq(httpc_submit(h, reqs[i]), 0);
    }
    ck_assert_int_eq(wait_all_done(res, N, 20000), N);
    for (i = 0; i < N; i++) {
        ck_assert_msg(res[i].status == 0, "request %d: %s", i, res[i].msg);
        ck_assert_str_eq(res[i].data, "ok");
    }
    httpc_destroy(h);
    pthread_join(th, NULL);
    close(sv.lfd);
    for (i = 0; i < N; i++)
        free(reqs[i]);

    /* One connection, held by a request the server never answers (300 ms deadline); the one
     * behind it has 100 ms and never gets the connection. */
    memset(res, 0, 2 * sizeof(res[0]));
    cfg.max_conns = 1;
    silent.lfd = tn_listen_any(&port);
    silent.reply = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_one, &silent), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/models/m/infer", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    reqs[0] = new_req(url, 300, &res[0]);
    reqs[1] = new_req(url, 100, &res[1]);
    ck_assert_int_eq(httpc_submit(h, reqs[0]), 0);
    ck_assert_int_eq(httpc_submit(h, reqs[1]), 0);
    ck_assert_int_eq(wait_all_done(res, 2, 10000), 2);
    ck_assert_int_eq(res[0].status, HTTPC_ETRANSFER);
    ck_assert_int_eq(res[1].status, HTTPC_ETRANSFER);
    ck_assert_msg(strstr(res[1].msg, "for a free connection"), "%s", res[1].msg);
    httpc_destroy(h);
    pthread_join(th, NULL);
    close(silent.lfd);
    free(reqs[0]);
    free(reqs[1]);
}
END_TEST

START_TEST(http_pool)
{
    result_t r;

    run_request("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                "data: {\"x\":1}\n\ndata: [DONE]\n\n",
                5000, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.data, "data: {\"x\":1}\n\ndata: [DONE]\n\n");

    run_request("HTTP/1.1 400 Bad Request\r\nContent-Length: 26\r\nConnection: close\r\n\r\n"
                "{\"message\":\"bad prompt!\"}\n",
                5000, &r);
    ck_assert_int_eq(r.status, HTTPC_ESTATUS);
    ck_assert_msg(strstr(r.msg, "HTTP 400") && strstr(r.msg, "bad prompt!"), "%s", r.msg);
    ck_assert_uint_eq(r.len, 0);

    /* A chunked stream cut off mid-way: the transfer fails. */
    run_request("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                "e\r\ndata: {\"x\":1}\n\r\n",
                5000, &r);
    ck_assert_int_eq(r.status, HTTPC_ETRANSFER);

    /* A server that never answers: the deadline. */
    run_request(NULL, 300, &r);
    ck_assert_int_eq(r.status, HTTPC_ETRANSFER);
    ck_assert_msg(strstr(r.msg, "imeout") || strstr(r.msg, "timed out"), "%s", r.msg);
}
END_TEST

/* ---- read coalescing: streams on one keep-alive connection ---- */

#define CO_EVENTS 40

typedef struct {
    int lfd;
    int requests; /* answered on one connection, one after the other */
    int cut;      /* close after a few events, without the end chunk */
    httpc_t *h;   /* with coalescing: the pool whose parks the server waits for */
} co_server_t;

/* Waits (10 s at most) until the pool moved |n| connections onto its tick: the rest of a stream
 * is then sent to a parked connection however slowly the client runs. */
static void wait_parks(httpc_t *h, uint64_t n)
{
    int i;
    for (i = 0; i < 10000 && httpc_parks(h) < n; i++)
        usleep(1000);
}

/* Reads one small request (headers and a JSON body); 0 at its end, -1 when the peer closed. */
static int read_request(int fd)
{
    char buf[4096];
    size_t got = 0;
    while (got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, 1); /* bytewise: never past this request */
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        if (buf[got - 1] == '}' && strstr(buf, "\r\n\r\n"))
            return 0;
    }
    return -1;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* the client may have closed */
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void *serve_stream(void *arg)
{
    co_server_t *s = arg;
    int fd = accept(s->lfd, NULL, NULL), k, i;

    if (fd < 0)
        return NULL;
    for (k = 0; k < s->requests && read_request(fd) == 0; k++) {
        static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n";
        write_all(fd, hdr, sizeof(hdr) - 1);
        for (i = 0; i < CO_EVENTS; i++) {
            char ev[64], chunk[96];
            int n = snprintf(ev, sizeof(ev), "data: {\"r\":%d,\"i\":%d}\n\n", k, i);
            int m = snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", n, ev);
            if (s->cut && i == 3)
                break;
            write_all(fd, chunk, (size_t)m);
            if (i == 0 && s->h)
                wait_parks(s->h, (uint64_t)k + 1);
            usleep(200); /* one write per event, as engines stream */
        }
        if (s->cut)
            break;
        write_all(fd, "0\r\n\r\n", 5);
    }
    close(fd);
    return NULL;
}

static size_t co_abort_at; /* 0, or stop the transfer once this many bytes came */

static int on_data_coalesce(httpc_req_t *r, const char *p, size_t n)
{
    result_t *res = r->ctx;
    httpc_coalesce(r); /* after the first piece, as the openai backend after a first token */
    on_data(r, p, n);
    return co_abort_at && res->len >= co_abort_at; /* as the backend on a bad event */
}

static void expect_events(const result_t *res, int k, int n)
{
    char want[sizeof(res->data)];
    size_t len = 0;
    int i;
    for (i = 0; i < n; i++)
        len +=
            (size_t)snprintf(want + len, sizeof(want) - len, "data: {\"r\":%d,\"i\":%d}\n\n", k, i);
    ck_assert_uint_eq(res->len, len);
    ck_assert(memcmp(res->data, want, len) == 0);
}

/* |n| requests on a pool of one connection with coalesce_us; all submitted at once. Returns how
 * often a connection was moved onto the coalescing tick. */
static uint64_t run_coalesced(int n, int cut, uint32_t coalesce_us, result_t *res)
{
    int port;
    co_server_t s = {0};
    pthread_t th;
    httpc_t *h;
    httpc_cfg_t cfg = {1, 2000, coalesce_us, 0, NULL};
    httpc_req_t req[2];
    char err[200], url[64];
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    int i, k, done;
    uint64_t parks;

    ck_assert_int_le(n, 2);
    s.lfd = tn_listen_any(&port);
    s.requests = n;
    s.cut = cut;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    s.h = coalesce_us ? h : NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_stream, &s), 0);
    for (k = 0; k < n; k++) {
        memset(&res[k], 0, sizeof(res[k]));
        memset(&req[k], 0, sizeof(req[k]));
        req[k].url = url;
        req[k].body = "{\"prompt\":[1]}";
        req[k].body_len = strlen(req[k].body);
        req[k].headers = hdrs;
        req[k].timeout_ms = 10000;
        req[k].on_data = on_data_coalesce;
        req[k].on_done = on_done;
        req[k].ctx = &res[k];
        ck_assert_int_eq(httpc_submit(h, &req[k]), 0);
    }
    for (i = 0; i < 1000; i++) { /* polls the condition, bounded at 10 s */
        for (k = 0, done = 0; k < n; k++)
            done += __atomic_load_n(&res[k].done, __ATOMIC_ACQUIRE);
        if (done == n)
            break;
        usleep(10000);
    }
    ck_assert_msg(done == n, "%d of %d requests completed within 10 s", done, n);
    parks = httpc_parks(h);
    httpc_destroy(h);
    pthread_join(th, NULL);
    close(s.lfd);
    return parks;
}

START_TEST(http_coalesce)
{
    result_t r[2];

    /* Two streams on one keep-alive connection: the second starts on the connection the first
     * left parked on the coalescing tick; each arrives whole and in order. */
    /* Each stream's connection goes onto the tick at its first data, while the stream runs. */
    ck_assert_uint_eq(run_coalesced(2, 0, 2000, r), 2);
    ck_assert_int_eq(r[0].status, 0);
    ck_assert_int_eq(r[1].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);
    expect_events(&r[1], 1, CO_EVENTS);

    /* A period longer than the whole stream: the end still comes, on a tick. */
    ck_assert_uint_eq(run_coalesced(1, 0, 50000, r), 1);
    ck_assert_int_eq(r[0].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);

    /* Coalescing off: the same bytes. */
    ck_assert_uint_eq(run_coalesced(1, 0, 0, r), 0);
    ck_assert_int_eq(r[0].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);

    /* Cut off while coalesced: the transfer fails, with what came before delivered. */
    ck_assert_uint_eq(run_coalesced(1, 1, 2000, r), 1);
    ck_assert_int_eq(r[0].status, HTTPC_ETRANSFER);
    expect_events(&r[0], 0, 3);

    /* The reader stops a coalesced stream (the backend on a bad event): on_done once, with
     * HTTPC_EABORT. */
    co_abort_at = 100;
    ck_assert_uint_eq(run_coalesced(1, 0, 2000, r), 1);
    co_abort_at = 0;
    ck_assert_int_eq(r[0].status, HTTPC_EABORT);
    ck_assert_uint_ge(r[0].len, 100);
}
END_TEST

/* ---- the option helpers ---- */

START_TEST(options)
{
    static const httpc_optdef_t known[] = {HTTPC_OPT("url", "http://127.0.0.1:8000"),
                                           HTTPC_OPT("model", NULL), HTTPC_OPT("engines", "2")};
    const char *keys[] = {"model", "engines"}, *vals[] = {"m1", "7"};
    const char *bad_keys[] = {"model", "enignes"};
    unsigned long long u = 0;
    char err[256] = "";

    ck_assert_int_eq(httpc_opts_check(2, keys, "test", known, 3, err, sizeof(err)), 0);
    ck_assert_str_eq(httpc_opts_get(2, keys, vals, known, 3, "model"), "m1");
    ck_assert_str_eq(httpc_opts_get(2, keys, vals, known, 3, "engines"), "7");
    ck_assert_str_eq(httpc_opts_get(2, keys, vals, known, 3, "url"), "http://127.0.0.1:8000");
    ck_assert_ptr_null(httpc_opts_get(2, keys, vals, known, 3, "other"));
    ck_assert_int_lt(httpc_opts_check(2, bad_keys, "test", known, 3, err, sizeof(err)), 0);
    ck_assert_str_eq(err,
                     "unknown option 'enignes' for the test backend (known: url model engines)");
    /* A short buffer truncates the list, never overruns. */
    ck_assert_int_lt(httpc_opts_check(2, bad_keys, "test", known, 3, err, 20), 0);
    ck_assert_uint_eq(strlen(err), 19);
    ck_assert_int_eq(httpc_opts_u("engines", "7", 1, 8, &u, err, sizeof(err)), 0);
    ck_assert_uint_eq(u, 7);
    ck_assert_int_lt(httpc_opts_u("engines", "9", 1, 8, &u, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "option engines=9: expected an integer in 1..8");
    ck_assert_int_lt(httpc_opts_u("engines", "-1", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(httpc_opts_u("engines", "3x", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(httpc_opts_u("engines", "", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(
        httpc_opts_u("engines", "99999999999999999999999", 0, ~0ull, &u, err, sizeof(err)), 0);
    ck_assert_uint_eq(u, 7);
}
END_TEST

/* A server that answers each request with |head| (or nothing) and holds the connection until the
 * client closes it; it stops after 1.5 s without a new connection. Counts connections and their
 * closes by the client. */
typedef struct {
    int lfd;
    const char *head;
    int accepted, closed;
} hold_t;

static void *serve_hold(void *arg)
{
    hold_t *s = arg;
    struct pollfd p = {s->lfd, POLLIN, 0};
    char b[256];

    while (poll(&p, 1, 1500) > 0) {
        int fd = accept(s->lfd, NULL, NULL);
        struct pollfd q;
        if (fd < 0)
            break;
        __atomic_add_fetch(&s->accepted, 1, __ATOMIC_ACQ_REL);
        if (read_request(fd) == 0 && s->head)
            write_all(fd, s->head, strlen(s->head));
        q.fd = fd;
        q.events = POLLIN;
        while (poll(&q, 1, 10000) > 0 && read(fd, b, sizeof(b)) > 0) {
        }
        __atomic_add_fetch(&s->closed, 1, __ATOMIC_ACQ_REL);
        close(fd);
    }
    return NULL;
}

/* httpc_cancel: a running request's transfer is aborted (the server sees its connection
 * closed) and a queued one fails unsent; both with HTTPC_ECANCEL, long before their 20 s
 * deadline. */
START_TEST(http_cancel)
{
    static result_t res[2];
    httpc_req_t *reqs[2];
    httpc_cfg_t cfg = {1, 2000, 0, 0, NULL};
    hold_t sv = {0};
    pthread_t th;
    httpc_t *h;
    char err[200], url[64];
    int i, port;

    memset(res, 0, sizeof(res));
    sv.lfd = tn_listen_any(&port);
    sv.head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              "Transfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(pthread_create(&th, NULL, serve_hold, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    for (i = 0; i < 2; i++) {
        reqs[i] = new_req(url, 20000, &res[i]);
        ck_assert_int_eq(httpc_submit(h, reqs[i]), 0);
    }
    for (i = 0; i < 1000 && !__atomic_load_n(&sv.accepted, __ATOMIC_ACQUIRE); i++)
        usleep(10000); /* the first request is running (bounded at 10 s) */
    ck_assert_int_eq(sv.accepted, 1);
    httpc_cancel(h, reqs[1]); /* queued behind the only connection */
    httpc_cancel(h, reqs[0]); /* running */
    ck_assert_int_eq(wait_all_done(res, 2, 10000), 2);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(res[i].status, HTTPC_ECANCEL);
        ck_assert_msg(strstr(res[i].msg, "cancelled"), "%s", res[i].msg);
    }
    pthread_join(th, NULL);           /* after 1.5 s without a new connection */
    ck_assert_int_eq(sv.accepted, 1); /* the queued request was never sent */
    ck_assert_int_eq(sv.closed, 1);
    httpc_destroy(h);
    close(sv.lfd);
    free(reqs[0]);
    free(reqs[1]);
}
END_TEST

/* cfg.idle_ms: a response that starts and then sends nothing fails with HTTPC_EIDLE, naming
 * the URL and the deadline, long before its 20 s timeout. */
START_TEST(http_idle)
{
    static result_t res[1];
    httpc_req_t *req;
    httpc_cfg_t cfg = {1, 2000, 0, 200, NULL};
    hold_t sv = {0};
    pthread_t th;
    httpc_t *h;
    char err[200], url[64];
    int port;

    memset(res, 0, sizeof(res));
    sv.lfd = tn_listen_any(&port);
    sv.head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              "Transfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(pthread_create(&th, NULL, serve_hold, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(httpc_create(&cfg, &h, err, sizeof(err)), 0);
    req = new_req(url, 20000, &res[0]);
    ck_assert_int_eq(httpc_submit(h, req), 0);
    ck_assert_int_eq(wait_all_done(res, 1, 10000), 1);
    ck_assert_int_eq(res[0].status, HTTPC_EIDLE);
    ck_assert_msg(strstr(res[0].msg, url) && strstr(res[0].msg, "idle deadline of 200 ms"), "%s",
                  res[0].msg);
    pthread_join(th, NULL);
    ck_assert_int_eq(sv.closed, 1);
    httpc_destroy(h);
    close(sv.lfd);
    free(req);
}
END_TEST

TCase *tc_sse_bytewise(void), *tc_sse_limits(void), *tc_sse_in_place(void), *tc_http_pool(void),
    *tc_http_coalesce(void), *tc_http_queue(void), *tc_http_cancel(void), *tc_http_idle(void),
    *tc_options(void);

CHECK_ONE_TEST_TCASE(sse_bytewise)

CHECK_ONE_TEST_TCASE(sse_limits)

CHECK_ONE_TEST_TCASE(sse_in_place)

CHECK_ONE_TEST_TCASE(http_pool)

CHECK_ONE_TEST_TCASE(http_coalesce)

CHECK_ONE_TEST_TCASE(http_queue)

CHECK_ONE_TEST_TCASE(http_cancel)

CHECK_ONE_TEST_TCASE(http_idle)

CHECK_ONE_TEST_TCASE(options)

CHECK_MAIN("httpc", tc_sse_bytewise, tc_sse_limits, tc_sse_in_place, tc_http_pool, tc_http_coalesce,
           tc_http_queue, tc_http_cancel, tc_http_idle, tc_options)
