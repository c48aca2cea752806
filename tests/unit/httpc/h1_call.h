/* One lean-client request as the httpc h1 suites make it (test_h1.c, test_h1_tls.c): the body
 * bytes it gathers, its final status and message, and a loop runner with a bound; the same call
 * coalescing after its first piece, and the check of the suites' N_EV-event stream. Static
 * functions: each suite includes it once. */
#ifndef TEST_H1_CALL_H
#define TEST_H1_CALL_H

#include "httpc/h1.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

typedef struct {
    httpc_h1_req_t r;
    char data[256];
    size_t len;
    int status, done;
    char msg[600];
} call_t;

static int c_data(httpc_h1_req_t *r, const char *p, size_t n)
{
    call_t *c = r->ctx;
    ck_assert_uint_le(c->len + n, sizeof(c->data));
    memcpy(c->data + c->len, p, n);
    c->len += n;
    return 0;
}

static void c_done(httpc_h1_req_t *r, int status, const char *msg)
{
    call_t *c = r->ctx;
    ck_assert_int_eq(c->done, 0);
    c->done = 1;
    c->status = status;
    snprintf(c->msg, sizeof(c->msg), "%s", msg ? msg : "");
}

/* |c| zeroed, to send |body| (|len| bytes) and gather the answer into itself. */
static void call_init_body(call_t *c, const char *body, size_t len)
{
    memset(c, 0, sizeof(*c));
    c->r.body = body;
    c->r.body_len = len;
    c->r.on_data = c_data;
    c->r.on_done = c_done;
    c->r.ctx = c;
}

/* Turns |loop| until the |n| calls at |c| are done (at most 100 000 turns). */
static void run_until(uv_loop_t *loop, call_t *c, size_t n)
{
    for (int spins = 0; spins < 100000; spins++) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++)
            done += (size_t)c[i].done;
        if (done == n)
            return;
        uv_run(loop, UV_RUN_ONCE);
    }
    ck_abort_msg("calls did not finish");
}

/* The suites' streamed answer: N_EV chunked SSE events "data: NN\n", each its own write. */
#define N_EV 20

/* A call that coalesces after its first piece, as the openai backend after the first token. */
typedef struct {
    call_t c; /* first */
    httpc_h1_pool_t *p;
    int pieces; /* on_data calls (one per chunk) */
    int bursts; /* pieces more than 1 ms after the one before: the reads, near enough */
    uint64_t last_ns;
} coal_call_t;

static int coal_data(httpc_h1_req_t *r, const char *d, size_t n)
{
    coal_call_t *cc = r->ctx;
    uint64_t now = uv_hrtime();

    if (cc->pieces++ == 0)
        httpc_h1_coalesce(cc->p, r);
    if (now - cc->last_ns > 1000000)
        cc->bursts++;
    cc->last_ns = now;
    return c_data(r, d, n);
}

/* |cc->c| made by call_init_body (or a suite's own init): it now coalesces on |p|. */
static void coal_attach(coal_call_t *cc, httpc_h1_pool_t *p)
{
    cc->p = p;
    cc->pieces = cc->bursts = 0;
    cc->last_ns = 0;
    cc->c.r.on_data = coal_data;
    cc->c.r.ctx = cc;
}

/* |c| gathered the stream's first |n| events, every byte once and in order. */
static void expect_events(const call_t *c, int n)
{
    char want[N_EV * 9 + 1];
    for (int i = 0; i < n; i++)
        snprintf(want + 9 * i, 10, "data: %02d\n", i);
    ck_assert_uint_eq(c->len, (size_t)(9 * n));
    ck_assert(memcmp(c->data, want, c->len) == 0);
}

#endif
