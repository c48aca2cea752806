/* Unit tests of the lean HTTP/1.1 client (httpc/h1.h). The parser: chunked, Content-Length and
 * to-the-close answers (and a 100 Continue before one) split at every byte boundary and fed byte
 * by byte give the same body and status; hostile heads refused with a message naming what (bad
 * status lines, control bytes, folded lines, bad or conflicting Content-Length, unknown transfer
 * codings, chunked with Content-Length, bad chunk sizes, chunk data past its size); every limit
 * (status line, header count, head size, chunk-size digits and line); a close at each point of
 * an answer named. The pool on a libuv loop against a scripted loopback server: keep-alive reuse,
 * Connection: close (by name), the server's idle close raced by a request (sent again once), a
 * name that does not resolve, a refused connect, the first-byte deadline, an error status with
 * its body in the message, cancel, and close failing what is left with HTTPC_ESTOP. */
#include "h1_call.h"
#include "tnsock.h"
#include "../check_main.h"

#include "httpc/h1.h"
#include "httpc/httpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the parser ---- */

typedef struct {
    char body[4096];
    size_t len;
    int heads, status, ended, err;
    char msg[192];
} parsed_t;

/* Feeds |s| in two pieces split at |split| (or byte by byte when |split| is (size_t)-1), then the
 * close when |eof|. */
static void parse_all(const char *s, size_t n, size_t split, int eof, parsed_t *out)
{
    httpc_h1_parser_t *p = malloc(sizeof(*p));
    size_t off = 0;

    ck_assert_ptr_nonnull(p);
    memset(out, 0, sizeof(*out));
    httpc_h1_parser_init(p);
    while (off <= n && !out->ended && !out->err) {
        size_t piece = off == n ? 0 : split == (size_t)-1 ? 1 : off < split ? split - off : n - off;
        size_t done = 0;
        do { /* once more with nothing left: the end after the last body byte */
            const char *d;
            size_t used, len;
            int ev = httpc_h1_parse(p, s + off + done, piece - done, &used, &d, &len);
            done += used;
            if (ev < 0) {
                out->err = ev;
                snprintf(out->msg, sizeof(out->msg), "%s", p->err);
                break;
            }
            if (ev == HTTPC_H1_HEAD) {
                out->heads++;
                out->status = p->status;
            } else if (ev == HTTPC_H1_DATA) {
                ck_assert_uint_le(out->len + len, sizeof(out->body));
                memcpy(out->body + out->len, d, len);
                out->len += len;
            } else if (ev == HTTPC_H1_END) {
                out->ended = 1;
                break;
            } else {
                ck_assert_uint_eq(used, piece - (done - used)); /* MORE: all of it taken */
                break;
            }
        } while (1);
        off += done;
        if (piece == 0)
            break;
    }
    if (eof && !out->ended && !out->err) {
        int ev = httpc_h1_parse_eof(p);
        if (ev == HTTPC_H1_END)
            out->ended = 1;
        else {
            out->err = ev;
            snprintf(out->msg, sizeof(out->msg), "%s", p->err);
        }
    }
    free(p);
}

static const char CHUNKED[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n"
                              "e\r\ndata: {\"a\":1}\n\r\n"
                              "E;ext=1\r\ndata: [DONE]\n\n\r\n"
                              "0\r\nX-Trailer: t\r\n\r\n";
static const char CHUNKED_BODY[] = "data: {\"a\":1}\ndata: [DONE]\n\n";

START_TEST(h1_splits)
{
    struct {
        const char *in, *body;
        int status, eof;
    } cases[] = {
        {CHUNKED, CHUNKED_BODY, 200, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", 200, 0},
        {"HTTP/1.0 200 OK\r\n\r\nto the close", "to the close", 200, 1},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\nContent-Length: 2\n\nok", "ok", 201,
         0},
        {"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", "", 204, 0},
        {"HTTP/1.1 500 Oops\r\ncontent-length: 4\r\nConnection: keep-alive, close\r\n\r\nboom",
         "boom", 500, 0},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t n = strlen(cases[c].in);
        for (size_t split = 0; split <= n + 1; split++) {
            parsed_t r;
            parse_all(cases[c].in, n, split == n + 1 ? (size_t)-1 : split, cases[c].eof, &r);
            ck_assert_msg(r.err == 0, "case %zu split %zu: %s", c, split, r.msg);
            ck_assert_msg(r.ended, "case %zu split %zu: no end", c, split);
            ck_assert_int_eq(r.heads, 1);
            ck_assert_int_eq(r.status, cases[c].status);
            ck_assert_uint_eq(r.len, strlen(cases[c].body));
            ck_assert(memcmp(r.body, cases[c].body, r.len) == 0);
        }
    }
    /* keep-alive as the head says */
    {
        httpc_h1_parser_t p;
        const char *d;
        size_t used, len;
        const char *h = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        httpc_h1_parser_init(&p);
        ck_assert_int_eq(httpc_h1_parse(&p, h, strlen(h), &used, &d, &len), HTTPC_H1_HEAD);
        ck_assert_int_eq(p.keep_alive, 0);
        h = "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        httpc_h1_parser_init(&p);
        ck_assert_int_eq(httpc_h1_parse(&p, h, strlen(h), &used, &d, &len), HTTPC_H1_HEAD);
        ck_assert_int_eq(p.keep_alive, 1);
        ck_assert_int_eq(httpc_h1_parse(&p, "", 0, &used, &d, &len), HTTPC_H1_END);
    }
}
END_TEST

START_TEST(h1_hostile)
{
    struct {
        const char *in, *words;
    } cases[] = {
        {"HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line"},
        {"ICY 200 OK\r\n\r\n", "not an HTTP/1.x status line"},
        {"HTTP/1.1 2x0 OK\r\n\r\n", "not an HTTP/1.x status line"},
        {"HTTP/1.1 200OK\r\n\r\n", "not an HTTP/1.x status line"},
        {"HTTP/1.1 101 Switching\r\n\r\n", "HTTP 101"},
        {"HTTP/1.1 200 O\x01K\r\n\r\n", "control byte in the status line"},
        {"HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", "control byte in a header line"},
        {"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", "folded header line"},
        {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "without 'name:'"},
        {"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "without 'name:'"},
        {"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "without 'name:'"},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length '-1'"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", "Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n", "at most 18 digits"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "two different"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "only chunked"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", "both"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk-size line"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "bad chunk-size line"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdef0\r\n",
         "over 15 hex digits"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "longer than"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\r\n", "longer than"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad\x02trailer\r\n\r\n",
         "trailer"},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        /* the NUL case is written with its length */
        size_t n = c == 6 ? strlen("HTTP/1.1 200 OK\r\nA: b") + 1 + strlen("c\r\n\r\n")
                          : strlen(cases[c].in);
        for (size_t split = 0; split <= n + 1; split++) {
            parsed_t r;
            parse_all(cases[c].in, n, split == n + 1 ? (size_t)-1 : split, 1, &r);
            ck_assert_msg(r.err == -71, "case %zu split %zu: not refused", c, split);
            ck_assert_msg(strstr(r.msg, cases[c].words), "case %zu: '%s' lacks '%s'", c, r.msg,
                          cases[c].words);
        }
    }
}
END_TEST

START_TEST(h1_limits)
{
    static char big[HTTPC_H1_MAX_HEAD + 1024];
    size_t n;
    parsed_t r;

    /* a status line of HTTPC_H1_MAX_LINE bytes with its CRLF is refused, one less passes */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 ");
    memset(big + n, 'r', HTTPC_H1_MAX_LINE - 2 - n);
    n = HTTPC_H1_MAX_LINE - 2;
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\nContent-Length: 0\r\n\r\n");
    parse_all(big, n, (size_t)-1, 0, &r);
    ck_assert_msg(r.err == 0 && r.ended, "%s", r.msg);
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 ");
    memset(big + n, 'r', HTTPC_H1_MAX_LINE - 1 - n);
    n = HTTPC_H1_MAX_LINE - 1;
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\nContent-Length: 0\r\n\r\n");
    parse_all(big, n, 100, 0, &r);
    ck_assert_int_eq(r.err, -71);
    ck_assert_msg(strstr(r.msg, "the status line over 8192 bytes"), "%s", r.msg);
    /* a line with no end refused as soon as it passes the limit, not at the close */
    memset(big, 'x', HTTPC_H1_MAX_LINE + 10);
    parse_all(big, HTTPC_H1_MAX_LINE + 10, 7, 0, &r);
    ck_assert_int_eq(r.err, -71);
    /* header count */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    for (unsigned i = 0; i <= HTTPC_H1_MAX_HEADERS; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X-%u: v\r\n", i);
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
    parse_all(big, n, 0, 0, &r);
    ck_assert_msg(strstr(r.msg, "over 100 header lines"), "%s", r.msg);
    /* head size: 90 lines of 800 bytes pass the line limit and the count, not the head's */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    for (unsigned i = 0; i < 90 && n + 900 < sizeof(big); i++) {
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X-%u: ", i);
        memset(big + n, 'v', 790);
        n += 790;
        n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
    }
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
    parse_all(big, n, 333, 0, &r);
    ck_assert_msg(strstr(r.msg, "the head over"), "%s", r.msg);
    /* a chunk-size line of over 256 bytes (extensions) */
    n = (size_t)snprintf(big, sizeof(big),
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "1;");
    memset(big + n, 'e', 300);
    n += 300;
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\nx\r\n0\r\n\r\n");
    parse_all(big, n, (size_t)-1, 0, &r);
    ck_assert_msg(strstr(r.msg, "a chunk-size line over 256 bytes"), "%s", r.msg);
}
END_TEST

START_TEST(h1_eof)
{
    struct {
        const char *in, *words;
    } cases[] = {
        {"", "closed before answering"},
        {"HTTP/1.1 2", "closed in the status line"},
        {"HTTP/1.1 200 OK\r\nContent-", "closed in the head"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "7 of 10 body bytes"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "chunked body"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n", "chunked body"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "chunked body"},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        parsed_t r;
        parse_all(cases[c].in, strlen(cases[c].in), 0, 1, &r);
        ck_assert_msg(r.err == -71 && strstr(r.msg, cases[c].words), "case %zu: '%s'", c, r.msg);
    }
}
END_TEST

/* ---- the pool against a scripted server ---- */

typedef struct {
    int lfd;
    int mode; /* 0: answer with keep-alive; 1: Connection: close; 2: answer, then close while
                 idle; 3: never answer; 4: 503 with a JSON body; 5: a stream of N_EV
                 events, one write each, EV_GAP_US apart; 6: three of them, then close */
    int accepted, requests;
    int stop;
} server_t;

#define EV_GAP_US 2000

/* Mode 5's and 6's answer: chunked SSE events "data: NN\n", each its own write. */
static void stream_events(int fd, int n, int end)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    char ev[32];
    int one = 1;
    ssize_t w;

    /* as engines do: else Nagle holds each event until the client's delayed ACK */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    w = write(fd, head, strlen(head));

    for (int i = 0; i < n && w > 0; i++) {
        usleep(EV_GAP_US);
        snprintf(ev, sizeof(ev), "9\r\ndata: %02d\n\r\n", i);
        w = write(fd, ev, strlen(ev));
    }
    if (end && w > 0)
        w = write(fd, "0\r\n\r\n", 5);
    (void)w;
}

static int read_request(int fd, char *buf, size_t cap)
{
    size_t got = 0;

    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        char *end, *cl;
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
        cl = strstr(buf, "Content-Length: ");
        if (end && cl && got >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10))
            return 0;
    }
}

static void *serve(void *arg)
{
    server_t *s = arg;
    char buf[8192];
    static const char sse[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "8\r\ndata: 1\n\r\n0\r\n\r\n";
    static const char sse_close[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: 1\n";
    static const char err503[] = "HTTP/1.1 503 Busy\r\nContent-Length: 26\r\n\r\n"
                                 "{\"error\":\"engine loading\"}";

    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            break;
        __atomic_add_fetch(&s->accepted, 1, __ATOMIC_RELEASE);
        while (read_request(fd, buf, sizeof(buf)) == 0) {
            ssize_t w = 0;
            __atomic_add_fetch(&s->requests, 1, __ATOMIC_RELEASE);
            if (s->mode == 3) {
                usleep(1500000);
                break;
            }
            if (s->mode == 5 || s->mode == 6) {
                stream_events(fd, s->mode == 5 ? N_EV : 3, s->mode == 5);
                if (s->mode == 6)
                    break;
                continue;
            }
            if (s->mode == 4)
                w = write(fd, err503, strlen(err503));
            else
                w = write(fd, s->mode == 1 ? sse_close : sse,
                          s->mode == 1 ? strlen(sse_close) : strlen(sse));
            (void)w;
            if (s->mode == 1 || s->mode == 2)
                break; /* mode 2: the answer kept its keep-alive, the server closes idle */
        }
        if (s->mode == 2)
            usleep(100000);
        close(fd);
    }
    return NULL;
}

static void call_init(call_t *c)
{
    static const char body[] = "{\"prompt\":[1]}";

    call_init_body(c, body, strlen(body));
    c->r.extra = "X-Session-ID: 7\r\n";
    c->r.extra_len = strlen(c->r.extra);
}

static httpc_h1_pool_t *pool_on(uv_loop_t *loop, const char *host, int port, uint32_t conns,
                                uint32_t first_ms)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    httpc_h1_cfg_t cfg = {.host = host,
                          .port = (uint16_t)port,
                          .path = "/v1/completions",
                          .headers = hdrs,
                          .max_conns = conns,
                          .connect_ms = 2000,
                          .first_byte_ms = first_ms,
                          .idle_ms = 2000};
    httpc_h1_pool_t *p = NULL;
    char err[300];
    ck_assert_int_eq(httpc_h1_pool_create(loop, &cfg, &p, err, sizeof(err)), 0);
    return p;
}

static httpc_h1_pool_t *pool_for(uv_loop_t *loop, int port, uint32_t conns, uint32_t first_ms)
{
    return pool_on(loop, "127.0.0.1", port, conns, first_ms);
}

/* Runs the loop until every call is done (a wide deadline). */
static void close_pool(uv_loop_t *loop, httpc_h1_pool_t *p)
{
    httpc_h1_pool_close(p);
    uv_run(loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(loop), 0);
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

START_TEST(h1_pool)
{
    uv_loop_t loop;
    server_t s;
    pthread_t th;
    int port;
    call_t c[6];
    httpc_h1_pool_t *p;
    uint64_t reused, opened;

    /* keep-alive: six requests one after another on one connection */
    server_start(&s, 0, &port, &th);
    uv_loop_init(&loop);
    p = pool_for(&loop, port, 1, 0);
    for (int i = 0; i < 6; i++) {
        call_init(&c[i]);
        ck_assert_int_eq(httpc_h1_send(p, &c[i].r), 0);
        ck_assert_int_eq(c[i].done, 0); /* never from inside send */
    }
    run_until(&loop, c, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(c[i].status == 0, "%d: %s", i, c[i].msg);
        ck_assert_uint_eq(c[i].len, 8);
        ck_assert(memcmp(c[i].data, "data: 1\n", 8) == 0);
    }
    httpc_h1_pool_counts(p, &reused, &opened);
    ck_assert_uint_eq(opened, 1);
    ck_assert_uint_eq(reused, 5);
    ck_assert_int_eq(__atomic_load_n(&s.accepted, __ATOMIC_ACQUIRE), 1);
    /* a request queued at close fails with HTTPC_ESTOP, and send after close is refused */
    call_init(&c[0]);
    call_init(&c[1]);
    httpc_h1_send(p, &c[0].r);
    httpc_h1_send(p, &c[1].r);
    httpc_h1_pool_close(p);
    ck_assert_int_eq(c[0].status, HTTPC_ESTOP);
    ck_assert_int_eq(c[1].status, HTTPC_ESTOP);
    call_init(&c[2]);
    ck_assert_int_eq(httpc_h1_send(p, &c[2].r), HTTPC_ESTOP);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    server_stop(&s, th);

    /* Connection: close and a body to the close: a new connection each time; by name, to a
     * server on IPv4 loopback only ("localhost" may list ::1 first) */
    server_start(&s, 1, &port, &th);
    uv_loop_init(&loop);
    p = pool_on(&loop, "localhost", port, 2, 0);
    for (int i = 0; i < 3; i++) {
        call_init(&c[i]);
        httpc_h1_send(p, &c[i].r);
    }
    run_until(&loop, c, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(c[i].status == 0 && c[i].len == 8, "%d: %s", i, c[i].msg);
    httpc_h1_pool_counts(p, &reused, &opened);
    ck_assert_uint_eq(opened, 3);
    close_pool(&loop, p);
    server_stop(&s, th);

    /* the server closes a keep-alive connection while idle: the next request goes again, once,
     * on a new connection and succeeds */
    server_start(&s, 2, &port, &th);
    uv_loop_init(&loop);
    p = pool_for(&loop, port, 1, 0);
    call_init(&c[0]);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_msg(c[0].status == 0, "%s", c[0].msg);
    usleep(200000); /* the server has closed it by now */
    call_init(&c[1]);
    httpc_h1_send(p, &c[1].r);
    run_until(&loop, &c[1], 1);
    ck_assert_msg(c[1].status == 0 && c[1].len == 8, "%s", c[1].msg);
    close_pool(&loop, p);
    server_stop(&s, th);
    ck_assert_int_eq(s.requests, 2);
}
END_TEST

START_TEST(h1_faults)
{
    uv_loop_t loop;
    server_t s;
    pthread_t th;
    int port, lfd;
    call_t c[2];
    httpc_h1_pool_t *p;

    /* a name that does not resolve: refused at create, naming it */
    {
        httpc_h1_cfg_t cfg = {.host = "no-such-host.invalid", .port = 80, .path = "/"};
        httpc_h1_pool_t *none = NULL;
        char err[300] = "";
        uv_loop_init(&loop);
        ck_assert_int_lt(httpc_h1_pool_create(&loop, &cfg, &none, err, sizeof(err)), 0);
        ck_assert_ptr_null(none);
        ck_assert_msg(strstr(err, "no-such-host.invalid:80: the name does not resolve"), "%s", err);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
    }
    /* refused: a port nobody listens on (bound, then closed) */
    lfd = tn_listen_any(&port);
    close(lfd);
    uv_loop_init(&loop);
    p = pool_for(&loop, port, 1, 0);
    call_init(&c[0]);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_int_eq(c[0].status, HTTPC_H1_ECONNECT);
    ck_assert_msg(strstr(c[0].msg, "127.0.0.1:") && strstr(c[0].msg, "cannot connect"), "%s",
                  c[0].msg);
    close_pool(&loop, p);

    /* a server that never answers: the first-byte deadline */
    server_start(&s, 3, &port, &th);
    uv_loop_init(&loop);
    p = pool_for(&loop, port, 1, 300);
    call_init(&c[0]);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_int_eq(c[0].status, HTTPC_EIDLE);
    ck_assert_msg(strstr(c[0].msg, "no answer within 300 ms"), "%s", c[0].msg);
    close_pool(&loop, p);
    server_stop(&s, th);

    /* an error status: its body in the message, no on_data */
    server_start(&s, 4, &port, &th);
    uv_loop_init(&loop);
    p = pool_for(&loop, port, 1, 0);
    call_init(&c[0]);
    httpc_h1_send(p, &c[0].r);
    run_until(&loop, c, 1);
    ck_assert_int_eq(c[0].status, HTTPC_ESTATUS);
    ck_assert_uint_eq(c[0].len, 0);
    ck_assert_msg(strstr(c[0].msg, "HTTP 503") && strstr(c[0].msg, "engine loading"), "%s",
                  c[0].msg);
    /* cancel: a request cancelled before the loop runs never calls back; the next one works
     * (keep-alive after the 503 with its Content-Length) */
    call_init(&c[0]);
    call_init(&c[1]);
    httpc_h1_send(p, &c[0].r);
    httpc_h1_cancel(p, &c[0].r);
    httpc_h1_send(p, &c[1].r);
    run_until(&loop, &c[1], 1);
    ck_assert_int_eq(c[0].done, 0);
    ck_assert_int_eq(c[1].status, HTTPC_ESTATUS);
    close_pool(&loop, p);
    ck_assert_int_eq(c[0].done, 0);
    server_stop(&s, th);
}
END_TEST

/* ---- read coalescing ---- */

static void coal_init(coal_call_t *cc, httpc_h1_pool_t *p)
{
    call_init(&cc->c);
    coal_attach(cc, p);
}

static httpc_h1_pool_t *coal_pool(uv_loop_t *loop, int port, uint32_t coalesce_us)
{
    httpc_h1_cfg_t cfg = {.host = "127.0.0.1",
                          .port = (uint16_t)port,
                          .path = "/v1/completions",
                          .max_conns = 1,
                          .connect_ms = 2000,
                          .idle_ms = 2000,
                          .coalesce_us = coalesce_us};
    httpc_h1_pool_t *p = NULL;
    char err[300];
    ck_assert_int_eq(httpc_h1_pool_create(loop, &cfg, &p, err, sizeof(err)), 0);
    return p;
}

START_TEST(h1_coalesce)
{
    uv_loop_t loop;
    server_t s;
    pthread_t th;
    int port;
    coal_call_t cc[2];
    httpc_h1_pool_t *p;
    uint64_t reused, opened;

    signal(SIGPIPE, SIG_IGN); /* the server thread writes on after the client closes */
    /* 20 events 2 ms apart read on a 200 ms tick (coalescing starts once two reads came less
     * than 100 ms apart): every byte once and in order, in fewer reads than events; the
     * kept-alive connection then carries the next stream, coalesced again */
    server_start(&s, 5, &port, &th);
    uv_loop_init(&loop);
    p = coal_pool(&loop, port, 200000);
    for (int i = 0; i < 2; i++) {
        coal_init(&cc[i], p);
        httpc_h1_send(p, &cc[i].c.r);
    }
    run_until(&loop, &cc[0].c, 1);
    run_until(&loop, &cc[1].c, 1);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(cc[i].c.status == 0, "%d: %s", i, cc[i].c.msg);
        expect_events(&cc[i].c, N_EV);
        ck_assert_int_eq(cc[i].pieces, N_EV);
        ck_assert_msg(cc[i].bursts <= N_EV / 4, "%d: %d reads for %d events", i, cc[i].bursts,
                      N_EV);
    }
    httpc_h1_pool_counts(p, &reused, &opened);
    ck_assert_uint_eq(opened, 1);
    ck_assert_uint_eq(reused, 1);
    ck_assert_uint_eq(httpc_h1_pool_coalesces(p), 2);
    /* the pool closes with a coalesced stream running: HTTPC_ESTOP, nothing left behind */
    coal_init(&cc[0], p);
    httpc_h1_send(p, &cc[0].c.r);
    while (httpc_h1_pool_coalesces(p) < 3 && !cc[0].c.done)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(cc[0].c.done, 0);
    close_pool(&loop, p);
    ck_assert_int_eq(cc[0].c.status, HTTPC_ESTOP);
    server_stop(&s, th);

    /* a coalesced stream cancelled: no on_done, and the next request gets a new connection */
    server_start(&s, 5, &port, &th);
    uv_loop_init(&loop);
    p = coal_pool(&loop, port, 200000);
    coal_init(&cc[0], p);
    coal_init(&cc[1], p);
    httpc_h1_send(p, &cc[0].c.r);
    while (httpc_h1_pool_coalesces(p) < 1 && !cc[0].c.done)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(cc[0].c.done, 0);
    httpc_h1_cancel(p, &cc[0].c.r);
    httpc_h1_send(p, &cc[1].c.r);
    run_until(&loop, &cc[1].c, 1);
    ck_assert_int_eq(cc[0].c.done, 0);
    ck_assert_msg(cc[1].c.status == 0, "%s", cc[1].c.msg);
    expect_events(&cc[1].c, N_EV);
    httpc_h1_pool_counts(p, &reused, &opened);
    ck_assert_uint_eq(opened, 2);
    close_pool(&loop, p);
    server_stop(&s, th);

    /* the server cuts a coalesced stream: the events before the cut, then the failure */
    server_start(&s, 6, &port, &th);
    uv_loop_init(&loop);
    p = coal_pool(&loop, port, 200000);
    coal_init(&cc[0], p);
    httpc_h1_send(p, &cc[0].c.r);
    run_until(&loop, &cc[0].c, 1);
    ck_assert_int_eq(cc[0].c.status, HTTPC_ETRANSFER);
    ck_assert_msg(strstr(cc[0].c.msg, "127.0.0.1:"), "%s", cc[0].c.msg);
    expect_events(&cc[0].c, 3);
    ck_assert_uint_eq(httpc_h1_pool_coalesces(p), 1);
    close_pool(&loop, p);
    server_stop(&s, th);

    /* a tick of 200 us for events 2 ms apart: one event per tick at most, so it does not pay
     * and the stream stays watched (reads come apart; several in one read, not two close ones);
     * and coalescing off (0): httpc_h1_coalesce changes nothing */
    for (uint32_t us = 200;; us = 0) {
        server_start(&s, 5, &port, &th);
        uv_loop_init(&loop);
        p = coal_pool(&loop, port, us);
        coal_init(&cc[0], p);
        httpc_h1_send(p, &cc[0].c.r);
        run_until(&loop, &cc[0].c, 1);
        ck_assert_msg(cc[0].c.status == 0, "%u: %s", us, cc[0].c.msg);
        expect_events(&cc[0].c, N_EV);
        ck_assert_uint_eq(httpc_h1_pool_coalesces(p), 0);
        close_pool(&loop, p);
        server_stop(&s, th);
        if (us == 0)
            break;
    }
}
END_TEST

TCase *tc_h1_splits(void), *tc_h1_hostile(void), *tc_h1_limits(void), *tc_h1_eof(void),
    *tc_h1_pool(void), *tc_h1_faults(void), *tc_h1_coalesce(void);

CHECK_ONE_TEST_TCASE(h1_splits)
CHECK_ONE_TEST_TCASE(h1_hostile)
CHECK_ONE_TEST_TCASE(h1_limits)
CHECK_ONE_TEST_TCASE(h1_eof)
CHECK_ONE_TEST_TCASE(h1_pool)
CHECK_ONE_TEST_TCASE(h1_faults)
CHECK_ONE_TEST_TCASE(h1_coalesce)

CHECK_MAIN("httpc_h1", tc_h1_splits, tc_h1_hostile, tc_h1_limits, tc_h1_eof, tc_h1_pool,
           tc_h1_faults, tc_h1_coalesce)
