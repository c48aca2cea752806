/* One lean-client request as the httpc h1 suites make it (test_h1.c, test_h1_tls.c): the body
 * bytes it gathers, its final status and message, and a loop runner with a bound. Static
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

#endif
