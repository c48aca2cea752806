/* The lean client's keep-alive connections on the caller's libuv loop (httpc/h1.h): one request
 * at a time per connection, each written with one write (the pool's preformatted head, the
 * Content-Length digits, the request's extra lines, its body), the answer parsed in place from
 * the connection's receive buffer (h1_parse.c) and handed to on_data as spans of it. Deadlines
 * are checked on one timer for all connections against the loop's cached clock (no clock read
 * per byte). HTTPS goes through one seam: a connection with |tls| handshakes after its connect,
 * hands what it reads to h1_tls.c and the plaintext to the same parser, and writes through it.
 * Read coalescing (cfg.coalesce_us, httpc_h1_coalesce): a request's connection stops being
 * watched and is read on the pool's tick (rtick.h) with every other such connection, by one
 * recv() per tick that brings everything that came meanwhile; the same input path as a watched
 * read, so a coalesced answer is parsed, ended, kept alive or failed exactly as any other. */
#include "h1_tls.h"
#include "httpc/h1.h"
#include "httpc/httpc.h"
#include "rtick.h"

#include "cmn/list.h"

#include <errno.h>
#include <stddef.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RBUF 16384u
#define EBODY 300u /* the start of an error answer's body kept for the message */
#define HEAD_MAX 4096u

enum { C_CONNECTING = 0, C_IDLE, C_BUSY, C_CLOSING };
enum { PH_CONNECT = 0, PH_FIRST, PH_BODY, PH_HANDSHAKE };

typedef struct h1_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t wreq;
    httpc_h1_pool_t *pool;
    httpc_h1_req_t *req;
    int state, phase, writing;
    int fd;                   /* the socket, once connected (the coalescing tick reads it) */
    int coalesced;            /* read on the pool's tick, not watched (httpc_h1_coalesce) */
    int want_coal;            /* its request asked for it; it starts once reads come fast enough */
    uint64_t last_ns, gap_ns; /* the last watched read, and the time from the one before */
    uint64_t served;          /* answers completed on it */
    uint64_t deadline_ms;
    httpc_h1_parser_t parser;
    char ebody[EBODY + 1];
    size_t ebody_len;
    char *wbuf;    /* the unwritten rest of a request, when one write did not take it all */
    h1_tls_t *tls; /* HTTPS */
    struct h1_conn *next, *prev, *next_idle;
    char rbuf[RBUF];
} h1_conn_t;

struct httpc_h1_pool {
    uv_loop_t *loop;
    uv_timer_t timer, kick;
    struct sockaddr_storage addr;
    char name[296]; /* "HOST:PORT" ("https://HOST:PORT") for messages */
    char *head;     /* request line and fixed headers, up to "Content-Length: " */
    size_t head_len;
    uint32_t max_conns, n_conns;
    uint64_t connect_ms, first_ms, idle_ms;
    h1_conn_t *all, *idle;
    httpc_h1_req_t *wait, *wait_tail;
    httpc_h1_req_t *failed; /* failed before their connection existed; their on_done on kick */
    int closing, handles;
    uint64_t reused, opened;
    h1_tls_ctx_t *tls; /* HTTPS */
    char host[256];    /* what the certificate must name */
    uint64_t hs_ms;
    httpc_rtick_t tick; /* read coalescing; fd -1 when off */
    uint64_t coalesces;
};

static void pump(httpc_h1_pool_t *p);

/* ---- set-up ---------------------------------------------------------------------------------- */

static int line_ok(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

static void on_handle_closed(uv_handle_t *h);
static void handle_gone(httpc_h1_pool_t *p);
static void on_tick(uv_timer_t *t);
static void on_kick(uv_timer_t *t);
static void on_coal_tick(uv_poll_t *h, int status, int events);

int httpc_h1_pool_create(uv_loop_t *loop, const httpc_h1_cfg_t *cfg, httpc_h1_pool_t **out,
                         char *err, size_t errlen)
{
    httpc_h1_pool_t *p;
    struct addrinfo hints, *res = NULL;
    char port[8], host_hdr[280];
    size_t cap;
    int rc;

    *out = NULL;
    if (!cfg->host[0] || strlen(cfg->host) > 255 || !line_ok(cfg->host) || !cfg->path ||
        cfg->path[0] != '/' || !line_ok(cfg->path) || strchr(cfg->path, ' ')) {
        snprintf(err, errlen, "%s:%u%s: a bad host or path", cfg->host, cfg->port,
                 cfg->path ? cfg->path : "");
        return -EINVAL;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    snprintf(host_hdr, sizeof(host_hdr), strchr(cfg->host, ':') ? "[%s]:%u" : "%s:%u", cfg->host,
             cfg->port);
    snprintf(p->name, sizeof(p->name), "%s%s", cfg->tls ? "https://" : "", host_hdr);
    snprintf(p->host, sizeof(p->host), "%s", cfg->host);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", cfg->port);
    rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "%s: the name does not resolve: %s", p->name, gai_strerror(rc));
        free(p);
        return -ENOENT;
    }
    {
        /* IPv4 first when the name has it: "localhost" resolves to ::1 first on Debian, and
         * engines started with --host 0.0.0.0 listen on IPv4 only (libcurl would try both) */
        const struct addrinfo *pick = res;
        for (const struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
        memcpy(&p->addr, pick->ai_addr, pick->ai_addrlen);
    }
    freeaddrinfo(res);
    cap = strlen(cfg->path) + strlen(host_hdr) + 128;
    for (const char *const *h = cfg->headers; h && *h; h++) {
        if (!line_ok(*h) || !strchr(*h, ':')) {
            snprintf(err, errlen, "%s: header '%.60s' is not one 'Name: value' line", p->name, *h);
            free(p);
            return -EINVAL;
        }
        cap += strlen(*h) + 2;
    }
    p->head = malloc(cap);
    if (!p->head) {
        free(p);
        return -ENOMEM;
    }
    p->head_len = (size_t)snprintf(p->head, cap, "%s %s HTTP/1.1\r\nHost: %s\r\n",
                                   cfg->method ? cfg->method : "POST", cfg->path, host_hdr);
    for (const char *const *h = cfg->headers; h && *h; h++)
        p->head_len += (size_t)snprintf(p->head + p->head_len, cap - p->head_len, "%s\r\n", *h);
    p->head_len += (size_t)snprintf(p->head + p->head_len, cap - p->head_len, "Content-Length: ");
    if (p->head_len + 64 > HEAD_MAX) {
        snprintf(err, errlen, "%s: the request head is over %u bytes", p->name, HEAD_MAX - 64);
        free(p->head);
        free(p);
        return -EINVAL;
    }
    p->max_conns = cfg->max_conns ? cfg->max_conns : 1;
    p->connect_ms = cfg->connect_ms ? cfg->connect_ms : 10000;
    p->first_ms = cfg->first_byte_ms ? cfg->first_byte_ms : 600000;
    p->idle_ms = cfg->idle_ms ? cfg->idle_ms : 600000;
    p->hs_ms = cfg->handshake_ms ? cfg->handshake_ms : p->connect_ms;
    if (cfg->tls) {
        char why[300];
        rc = h1_tls_ctx_new(cfg->ca_file, &p->tls, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", p->name, why);
            free(p->head);
            free(p);
            return rc;
        }
    }
    rc = httpc_rtick_init(&p->tick, loop, cfg->coalesce_us, on_coal_tick, p, err, errlen);
    if (rc < 0) {
        h1_tls_ctx_free(p->tls);
        free(p->head);
        free(p);
        return rc;
    }
    uv_timer_init(loop, &p->timer);
    uv_timer_init(loop, &p->kick);
    p->timer.data = p->kick.data = p;
    p->handles = 2 + (p->tick.fd >= 0);
    {
        uint64_t tick = p->connect_ms < p->first_ms ? p->connect_ms : p->first_ms;
        tick = (tick < p->idle_ms ? tick : p->idle_ms) / 4;
        tick = tick < 10 ? 10 : tick > 1000 ? 1000 : tick;
        uv_timer_start(&p->timer, on_tick, tick, tick);
    }
    uv_unref((uv_handle_t *)&p->timer);
    *out = p;
    return 0;
}

void httpc_h1_pool_counts(const httpc_h1_pool_t *p, uint64_t *reused, uint64_t *opened)
{
    *reused = p->reused;
    *opened = p->opened;
}

uint64_t httpc_h1_pool_coalesces(const httpc_h1_pool_t *p)
{
    return p->coalesces;
}

/* ---- connections ----------------------------------------------------------------------------- */

static void idle_remove(httpc_h1_pool_t *p, h1_conn_t *c)
{
    for (h1_conn_t **pp = &p->idle; *pp; pp = &(*pp)->next_idle)
        if (*pp == c) {
            *pp = c->next_idle;
            return;
        }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b);

/* Off the coalescing tick (the caller watches it again, or closes it). */
static void uncoalesce(h1_conn_t *c)
{
    if (!c->coalesced)
        return;
    httpc_rtick_del(&c->pool->tick, c->fd);
    c->coalesced = 0;
}

static void on_conn_closed(uv_handle_t *h)
{
    h1_conn_t *c = h->data;
    httpc_h1_pool_t *p = c->pool;

    CMN_DLIST_UNLINK(p->all, c, prev, next);
    free(c->wbuf);
    h1_tls_free(c->tls);
    free(c);
    handle_gone(p);
}

/* Closes |c| (its request, if any, is the caller's to finish). */
static void conn_close(h1_conn_t *c)
{
    httpc_h1_pool_t *p = c->pool;

    if (c->state == C_CLOSING)
        return;
    if (c->state == C_IDLE)
        idle_remove(p, c);
    uncoalesce(c);
    c->state = C_CLOSING;
    c->req = NULL;
    p->n_conns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Ends |c|'s request with |status| and a message naming the address; |keep|: the connection may
 * carry the next one. */
static void finish(h1_conn_t *c, int keep, int status, const char *fmt, ...)
{
    httpc_h1_pool_t *p = c->pool;
    httpc_h1_req_t *r = c->req;
    char msg[512];

    msg[0] = '\0';
    if (fmt) {
        va_list ap;
        int k = snprintf(msg, sizeof(msg), "%s: ", p->name);
        va_start(ap, fmt);
        vsnprintf(msg + k, sizeof(msg) - (size_t)k, fmt, ap);
        va_end(ap);
    }
    c->req = NULL;
    if (r) {
        r->conn = NULL;
        r->http_status = c->parser.status;
    }
    /* answered before its request was all sent: not kept; a coalesced one is watched again
     * (while idle, a close or stray bytes from the server are seen at once) */
    if (keep && c->coalesced && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        keep = 0;
    if (keep)
        uncoalesce(c);
    if (keep && !p->closing && !c->writing && !(c->tls && h1_tls_writing(c->tls))) {
        c->served++;
        c->state = C_IDLE;
        c->next_idle = p->idle;
        p->idle = c;
    } else {
        conn_close(c);
    }
    if (r)
        r->on_done(r, status, fmt ? msg : NULL);
    pump(p);
}

static void on_written(uv_write_t *w, int status)
{
    h1_conn_t *c = w->data;

    c->writing = 0;
    free(c->wbuf);
    c->wbuf = NULL;
    if (c->state != C_BUSY || !c->req)
        return;
    if (status < 0)
        finish(c, 0, HTTPC_ETRANSFER, "cannot send the request: %s", uv_strerror(status));
}

/* HTTPS: the request through the TLS engine (h1_tls.c), then its deadline. */
static void tls_send(h1_conn_t *c, const uv_buf_t *b, unsigned nb)
{
    char why[300];
    int rc = h1_tls_write(c->tls, b, nb, why, sizeof(why));

    if (rc == 0 && (rc = h1_tls_flush(c->tls, (uv_stream_t *)&c->tcp)) < 0)
        snprintf(why, sizeof(why), "cannot send the request: %s", uv_strerror(rc));
    if (rc < 0) {
        finish(c, 0, HTTPC_ETRANSFER, "%s", why);
        return;
    }
    c->phase = PH_FIRST;
    c->deadline_ms = uv_now(c->pool->loop) + c->pool->first_ms;
}

/* One write: head, Content-Length, extra lines, body; the rest, if any, copied and queued. */
static void write_req(h1_conn_t *c)
{
    httpc_h1_pool_t *p = c->pool;
    httpc_h1_req_t *r = c->req;
    char head[HEAD_MAX];
    size_t hl = p->head_len, total;
    uv_buf_t b[3];
    int n, rc;

    memcpy(head, p->head, hl);
    hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "%zu\r\n", r->body_len);
    b[0] = uv_buf_init(head, (unsigned)hl);
    b[1] = uv_buf_init((char *)(r->extra ? r->extra : ""), (unsigned)r->extra_len);
    b[2] = uv_buf_init((char *)"\r\n", 2);
    /* the body after the blank line: with extra lines in between, four pieces */
    {
        uv_buf_t all[4] = {b[0], b[1], b[2], uv_buf_init((char *)r->body, (unsigned)r->body_len)};
        total = hl + r->extra_len + 2 + r->body_len;
        if (c->tls) { /* HTTPS: encrypted as one record (one per 16 KiB), sent by h1_tls.c */
            tls_send(c, all, 4);
            return;
        }
        n = uv_try_write((uv_stream_t *)&c->tcp, all, 4);
        if (n == UV_EAGAIN || n == UV_ENOSYS)
            n = 0;
        if (n < 0) {
            finish(c, 0, HTTPC_ETRANSFER, "cannot send the request: %s", uv_strerror(n));
            return;
        }
        c->phase = PH_FIRST;
        c->deadline_ms = uv_now(p->loop) + p->first_ms;
        if ((size_t)n == total)
            return;
        /* the kernel took part of it: the rest goes with uv_write from a copy of its own */
        c->wbuf = malloc(total - (size_t)n);
        if (!c->wbuf) {
            finish(c, 0, HTTPC_ETRANSFER, "out of memory for a %zu-byte request", total);
            return;
        }
        {
            size_t skip = (size_t)n, off = 0;
            for (int i = 0; i < 4; i++) {
                size_t len = all[i].len;
                if (skip >= len) {
                    skip -= len;
                    continue;
                }
                memcpy(c->wbuf + off, all[i].base + skip, len - skip);
                off += len - skip;
                skip = 0;
            }
            b[0] = uv_buf_init(c->wbuf, (unsigned)off);
        }
    }
    c->wreq.data = c;
    c->writing = 1;
    rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, b, 1, on_written);
    if (rc < 0) {
        c->writing = 0;
        finish(c, 0, HTTPC_ETRANSFER, "cannot send the request: %s", uv_strerror(rc));
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    h1_conn_t *c = h->data;
    (void)hint;
    *b = uv_buf_init(c->rbuf, RBUF);
}

/* The connection closed under a request: sent again once when nothing of its answer came on a
 * reused connection (the server closed it idle as the request went out), else failed. */
static void closed_under(h1_conn_t *c, ssize_t why)
{
    httpc_h1_pool_t *p = c->pool;
    httpc_h1_req_t *r = c->req;
    int rc;

    if (c->parser.seen == 0 && c->served > 0 && !r->resent) {
        r->resent = 1;
        r->conn = NULL;
        conn_close(c);
        r->next = p->wait;
        p->wait = r;
        if (!p->wait_tail)
            p->wait_tail = r;
        pump(p);
        return;
    }
    if (why != UV_EOF) {
        finish(c, 0, HTTPC_ETRANSFER, "connection failed (%s) %s", uv_strerror((int)why),
               c->parser.seen ? "mid-answer" : "before answering");
        return;
    }
    rc = httpc_h1_parse_eof(&c->parser);
    if (rc == HTTPC_H1_END && c->parser.status >= 200 && c->parser.status <= 299) {
        finish(c, 0, 0, NULL);
        return;
    }
    if (rc == HTTPC_H1_END)
        finish(c, 0, HTTPC_ESTATUS, "HTTP %d: %s", c->parser.status,
               c->ebody_len ? c->ebody : "(no body)");
    else
        finish(c, 0, HTTPC_ETRANSFER, "%s", c->parser.err);
}

static void tls_read(h1_conn_t *c, ssize_t nread, const char *buf);
static void got(h1_conn_t *c, const char *buf, size_t n);

/* What a read of the socket brought (|nread| bytes at |buf|, or UV_EOF / a negative error),
 * watched or on the coalescing tick alike. */
static void coalesce_now(h1_conn_t *c);

static void conn_input(h1_conn_t *c, ssize_t nread, const char *buf)
{
    if (c->state == C_CLOSING || nread == 0)
        return;
    if (nread > 0 && !c->coalesced && c->pool->tick.fd >= 0) {
        uint64_t now = uv_hrtime();
        c->gap_ns = c->last_ns ? now - c->last_ns : UINT64_MAX;
        c->last_ns = now;
        if (c->want_coal)
            coalesce_now(c); /* if the reads now come fast enough */
    }
    if (c->tls) {
        tls_read(c, nread, buf);
        return;
    }
    if (!c->req) { /* idle: the server closed it, or sent what nobody asked for */
        conn_close(c);
        return;
    }
    if (nread < 0) {
        closed_under(c, nread);
        return;
    }
    got(c, buf, (size_t)nread);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn_input(s->data, nread, b->base);
}

/* Bytes of the answer (with TLS, the plaintext): parsed in place, the body handed on. */
static void got(h1_conn_t *c, const char *buf, size_t n)
{
    httpc_h1_pool_t *p = c->pool;

    c->phase = PH_BODY;
    c->deadline_ms = uv_now(p->loop) + p->idle_ms;
    for (;;) { /* until the parser wants more: the end may follow the last body byte */
        httpc_h1_req_t *r = c->req;
        const char *d;
        size_t used, len;
        int ev = httpc_h1_parse(&c->parser, buf, n, &used, &d, &len);
        buf += used;
        n -= used;
        if (ev < 0) {
            finish(c, 0, HTTPC_ETRANSFER, "%s", c->parser.err);
            return;
        }
        if (ev == HTTPC_H1_MORE)
            return;
        if (ev == HTTPC_H1_DATA) {
            int ok = c->parser.status >= 200 && c->parser.status <= 299;
            if (ok && r->on_data(r, d, len)) {
                if (c->req == r) /* not cancelled from inside */
                    finish(c, 0, HTTPC_EABORT, "the reader stopped the answer");
                return;
            }
            if (c->req != r || c->state == C_CLOSING)
                return; /* cancelled, or the pool closed, from inside on_data */
            if (!ok && c->ebody_len < EBODY) {
                size_t k = len < EBODY - c->ebody_len ? len : EBODY - c->ebody_len;
                for (size_t i = 0; i < k; i++)
                    c->ebody[c->ebody_len++] =
                        (d[i] < 0x20 || (unsigned char)d[i] > 0x7e) ? ' ' : d[i];
                c->ebody[c->ebody_len] = '\0';
            }
        } else if (ev == HTTPC_H1_END) {
            int keep = c->parser.keep_alive && n == 0 && !(c->tls && h1_tls_pending(c->tls));
            if (c->parser.status >= 200 && c->parser.status <= 299)
                finish(c, keep, 0, NULL);
            else
                finish(c, keep, HTTPC_ESTATUS, "HTTP %d: %s", c->parser.status,
                       c->ebody_len ? c->ebody : "(no body)");
            return;
        }
    }
}

static void start_req(h1_conn_t *c, httpc_h1_req_t *r)
{
    c->want_coal = 0;
    c->last_ns = 0;
    c->gap_ns = UINT64_MAX;
    c->req = r;
    r->conn = c;
    r->sent_ms = uv_now(c->pool->loop);
    c->state = C_BUSY;
    c->ebody_len = 0;
    c->ebody[0] = '\0';
    httpc_h1_parser_init(&c->parser);
    write_req(c);
}

/* Connected (with TLS, the handshake done): its request goes, or it waits idle. */
static void conn_ready(h1_conn_t *c)
{
    httpc_h1_pool_t *p = c->pool;

    if (!c->req) { /* its request was cancelled while connecting: the connection waits idle */
        c->state = C_IDLE;
        c->next_idle = p->idle;
        p->idle = c;
        pump(p);
        return;
    }
    c->state = C_BUSY;
    write_req(c);
}

/* HTTPS: the handshake's next step (the first when |buf| is NULL); 1 once it is done. */
static int tls_step(h1_conn_t *c, const char *buf, size_t n)
{
    httpc_h1_pool_t *p = c->pool;
    char why[300];
    int rc;

    if (!buf) {
        rc = h1_tls_new(p->tls, p->host, &c->tls);
        if (rc < 0) {
            finish(c, 0, HTTPC_H1_ECONNECT, "out of memory for a TLS session");
            return rc;
        }
        c->phase = PH_HANDSHAKE;
        c->deadline_ms = uv_now(p->loop) + p->hs_ms;
    } else {
        h1_tls_feed(c->tls, buf, n);
    }
    rc = h1_tls_handshake(c->tls, why, sizeof(why));
    if (rc >= 0) {
        int w = h1_tls_flush(c->tls, (uv_stream_t *)&c->tcp);
        if (w < 0) {
            snprintf(why, sizeof(why), "TLS handshake failed: cannot send: %s", uv_strerror(w));
            rc = w;
        }
    }
    if (rc < 0)
        finish(c, 0, HTTPC_H1_ECONNECT, "%s", why);
    return rc;
}

/* HTTPS: ciphertext in, for the handshake or decrypted and parsed as plaintext is. */
static void tls_read(h1_conn_t *c, ssize_t nread, const char *buf)
{
    char why[300];
    const char *pt;
    int k;

    if (nread < 0) {
        if (c->phase == PH_HANDSHAKE)
            finish(c, 0, HTTPC_H1_ECONNECT, "TLS handshake failed: the connection closed (%s)",
                   uv_strerror((int)nread));
        else if (!c->req)
            conn_close(c);
        else
            closed_under(c, nread);
        return;
    }
    if (c->phase == PH_HANDSHAKE) {
        if ((k = tls_step(c, buf, (size_t)nread)) <= 0)
            return;
        conn_ready(c); /* the rest of the input (TLS 1.3's tickets) is read below */
        if (c->state == C_CLOSING)
            return;
    } else {
        h1_tls_feed(c->tls, buf, (size_t)nread);
    }
    while ((k = h1_tls_read(c->tls, &pt, why, sizeof(why))) > 0) {
        if (!c->req) { /* idle: what nobody asked for */
            conn_close(c);
            return;
        }
        got(c, pt, (size_t)k);
        if (c->state == C_CLOSING)
            return;
    }
    if (k == 0) { /* what OpenSSL answered (a key update), if anything */
        int w = h1_tls_flush(c->tls, (uv_stream_t *)&c->tcp);
        if (w < 0 && c->req)
            finish(c, 0, HTTPC_ETRANSFER, "cannot send: %s", uv_strerror(w));
        else if (w < 0)
            conn_close(c);
        return;
    }
    if (!c->req)
        conn_close(c);
    else if (k == H1_TLS_EOF)
        closed_under(c, UV_EOF);
    else
        finish(c, 0, HTTPC_ETRANSFER, "%s", why);
}

static void on_connect(uv_connect_t *cr, int status)
{
    h1_conn_t *c = cr->data;
    httpc_h1_pool_t *p = c->pool;
    int rc;

    if (c->state == C_CLOSING)
        return;
    if (status < 0) {
        finish(c, 0, HTTPC_H1_ECONNECT, "cannot connect: %s", uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_fileno((uv_handle_t *)&c->tcp, &c->fd) < 0)
        c->fd = -1;
    rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        finish(c, 0, HTTPC_H1_ECONNECT, "cannot read: %s", uv_strerror(rc));
        return;
    }
    if (p->tls)
        (void)tls_step(c, NULL, 0); /* conn_ready once the handshake is done */
    else
        conn_ready(c);
}

/* A new connection for |r|; 0, or a negative code (|r| is not taken). */
static int conn_new(httpc_h1_pool_t *p, httpc_h1_req_t *r, char *why, size_t whylen)
{
    h1_conn_t *c = malloc(sizeof(*c));
    int rc;

    if (!c) {
        snprintf(why, whylen, "%s: out of memory for a connection", p->name);
        return -ENOMEM;
    }
    memset(c, 0, offsetof(h1_conn_t, rbuf));
    c->pool = p;
    c->fd = -1;
    c->gap_ns = UINT64_MAX;
    rc = uv_tcp_init(p->loop, &c->tcp);
    if (rc < 0) {
        free(c);
        snprintf(why, whylen, "%s: cannot make a socket: %s", p->name, uv_strerror(rc));
        return rc;
    }
    c->tcp.data = c->connect.data = c;
    c->next = p->all;
    if (p->all)
        p->all->prev = c;
    p->all = c;
    p->handles++;
    p->n_conns++;
    p->opened++;
    c->state = C_CONNECTING;
    c->phase = PH_CONNECT;
    c->deadline_ms = uv_now(p->loop) + p->connect_ms;
    c->req = r;
    r->conn = c;
    r->sent_ms = uv_now(p->loop);
    httpc_h1_parser_init(&c->parser);
    rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&p->addr, on_connect);
    if (rc < 0) {
        snprintf(why, whylen, "%s: cannot connect: %s", p->name, uv_strerror(rc));
        r->conn = NULL;
        conn_close(c);
        return rc;
    }
    return 0;
}

/* Waiting requests onto idle connections, then onto new ones while there is room. */
static void pump(httpc_h1_pool_t *p)
{
    while (p->wait && !p->closing) {
        httpc_h1_req_t *r = p->wait;
        char why[400];
        if (!p->idle && p->n_conns >= p->max_conns)
            return;
        p->wait = r->next;
        if (!p->wait)
            p->wait_tail = NULL;
        r->next = NULL;
        if (p->idle) {
            h1_conn_t *c = p->idle;
            p->idle = c->next_idle;
            p->reused++;
            start_req(c, r);
            continue;
        }
        if (conn_new(p, r, why, sizeof(why)) < 0) {
            /* failed before any connection: its on_done from the kick timer, never from here */
            r->next = p->failed;
            p->failed = r;
            uv_timer_start(&p->kick, on_kick, 0, 0);
        }
    }
}

static void on_kick(uv_timer_t *t)
{
    httpc_h1_pool_t *p = t->data;
    char msg[400];

    while (p->failed) {
        httpc_h1_req_t *r = p->failed;
        p->failed = r->next;
        r->next = NULL;
        snprintf(msg, sizeof(msg), "%s: cannot open a connection", p->name);
        r->on_done(r, HTTPC_H1_ECONNECT, msg);
    }
}

/* Every connection's deadline, on the loop's cached clock. */
static void on_tick(uv_timer_t *t)
{
    httpc_h1_pool_t *p = t->data;
    uint64_t now = uv_now(p->loop);
    h1_conn_t *c, *next;

    for (c = p->all; c; c = next) {
        next = c->next;
        if ((c->state != C_BUSY && c->state != C_CONNECTING) ||
            (!c->req && c->phase != PH_HANDSHAKE) || now < c->deadline_ms)
            continue;
        if (c->phase == PH_HANDSHAKE)
            finish(c, 0, HTTPC_H1_ECONNECT, "TLS handshake failed: not done within %llu ms",
                   (unsigned long long)p->hs_ms);
        else if (c->phase == PH_CONNECT)
            finish(c, 0, HTTPC_H1_ECONNECT, "cannot connect: no answer within %llu ms",
                   (unsigned long long)p->connect_ms);
        else if (c->phase == PH_FIRST)
            finish(c, 0, HTTPC_EIDLE, "no answer within %llu ms of the request",
                   (unsigned long long)p->first_ms);
        else
            finish(c, 0, HTTPC_EIDLE, "no byte for %llu ms mid-answer",
                   (unsigned long long)p->idle_ms);
    }
}

/* ---- read coalescing ------------------------------------------------------------------------ */

/* Reads |c| until the kernel has nothing more (a read that does not fill the buffer is the last),
 * or until its request ends and it is watched again. */
static void drain(h1_conn_t *c)
{
    for (;;) {
        ssize_t k = recv(c->fd, c->rbuf, RBUF, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn_input(c, k < 0 ? -errno : k == 0 ? UV_EOF : k, c->rbuf);
        if (k < (ssize_t)RBUF || !c->coalesced || c->state == C_CLOSING)
            return;
    }
}

/* A coalesced connection the kernel has bytes (or an end) for, on the tick. */
static void coal_ready(void *who, uint32_t events, void *arg)
{
    h1_conn_t *c = who;

    (void)events;
    (void)arg;
    if (c->coalesced && c->state == C_BUSY)
        drain(c);
}

/* The tick (rtick.h). A connection closed meanwhile is freed only by the loop's close phase,
 * after this callback. */
static void on_coal_tick(uv_poll_t *h, int status, int events)
{
    httpc_h1_pool_t *p = h->data;

    (void)status;
    (void)events;
    httpc_rtick_run(&p->tick, coal_ready, NULL);
}

/* Onto the tick, when it pays: two reads since the request asked came at most half a period
 * apart, so a tick brings two events or more where watching it would wake the loop for each (at
 * one event per tick, coalescing would only add the tick's own wake-ups and a late end). */
static void coalesce_now(h1_conn_t *c)
{
    httpc_h1_pool_t *p = c->pool;

    if (c->coalesced || c->state != C_BUSY || c->fd < 0 ||
        c->gap_ns >= (uint64_t)p->tick.period_us * 500u)
        return;
    if (httpc_rtick_add(&p->tick, c->fd, c, 0) < 0)
        return; /* no timer or no room in the set: it stays watched */
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->coalesced = 1;
    p->coalesces++;
}

void httpc_h1_coalesce(httpc_h1_pool_t *p, httpc_h1_req_t *r)
{
    h1_conn_t *c = r->conn;

    if (!c || c->state != C_BUSY || p->tick.fd < 0 || c->want_coal)
        return;
    /* judged from the next read on: the reads before the urgent part (an answer's head, sent
     * apart from its first event) say nothing of the pace after it */
    c->want_coal = 1;
    c->gap_ns = UINT64_MAX;
}

/* ---- the API --------------------------------------------------------------------------------- */

int httpc_h1_send(httpc_h1_pool_t *p, httpc_h1_req_t *r)
{
    if (p->closing)
        return HTTPC_ESTOP;
    r->next = NULL;
    r->conn = NULL;
    r->resent = 0;
    r->sent_ms = 0;
    CMN_QUEUE_APPEND(p->wait, p->wait_tail, r, next);
    pump(p);
    return 0;
}

static int unlink_from(httpc_h1_req_t **head, httpc_h1_req_t **tail, httpc_h1_req_t *r)
{
    httpc_h1_req_t *prev = NULL;

    for (httpc_h1_req_t *x = *head; x; prev = x, x = x->next)
        if (x == r) {
            if (prev)
                prev->next = r->next;
            else
                *head = r->next;
            if (tail && *tail == r)
                *tail = prev;
            r->next = NULL;
            return 1;
        }
    return 0;
}

void httpc_h1_cancel(httpc_h1_pool_t *p, httpc_h1_req_t *r)
{
    if (r->conn) {
        h1_conn_t *c = r->conn;
        r->conn = NULL;
        c->req = NULL;
        conn_close(c);
        pump(p);
        return;
    }
    if (!unlink_from(&p->wait, &p->wait_tail, r))
        (void)unlink_from(&p->failed, NULL, r);
}

static void handle_gone(httpc_h1_pool_t *p)
{
    if (--p->handles == 0 && p->closing) {
        h1_tls_ctx_free(p->tls);
        free(p->head);
        free(p);
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

void httpc_h1_pool_close(httpc_h1_pool_t *p)
{
    char msg[320];

    if (!p || p->closing)
        return;
    p->closing = 1;
    snprintf(msg, sizeof(msg), "%s: the client is closing", p->name);
    while (p->wait || p->failed) {
        httpc_h1_req_t *r = p->wait ? p->wait : p->failed;
        (void)unlink_from(r == p->wait ? &p->wait : &p->failed, r == p->wait ? &p->wait_tail : NULL,
                          r);
        r->on_done(r, HTTPC_ESTOP, msg);
    }
    for (h1_conn_t *c = p->all; c; c = c->next) {
        httpc_h1_req_t *r = c->req;
        if (c->state == C_CLOSING)
            continue;
        conn_close(c);
        if (r) {
            r->conn = NULL;
            r->on_done(r, HTTPC_ESTOP, msg);
        }
    }
    uv_close((uv_handle_t *)&p->timer, on_handle_closed);
    uv_close((uv_handle_t *)&p->kick, on_handle_closed);
    httpc_rtick_close(&p->tick, on_handle_closed);
}
