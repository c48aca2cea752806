/* The bottom layer: query blocks, completing samples, answering synchronous requests.
 *
 * A query's sample records live in one block, freed when its last sample completes. The issue
 * request travels inside the same block, so issuing costs one allocation. */
#include "qdl_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    qdl_req_t req;
    size_t n_left;
    qdl_srec_t recs[];
} qdl_qblock_t;

qdl_req_t *qdl__qblock_new(const qdl_sample_t *samples, size_t n)
{
    qdl_qblock_t *b = qdl__malloc(sizeof(*b) + n * sizeof(b->recs[0]));
    size_t i;

    if (!b)
        return NULL;
    memset(&b->req, 0, sizeof(b->req));
    b->req.kind = RQ_ISSUE;
    b->req.n = n;
    b->n_left = n;
    for (i = 0; i < n; i++) {
        memset(&b->recs[i], 0, sizeof(b->recs[i]));
        b->recs[i].s = samples[i];
        b->recs[i].index_in_block = i;
    }
    return &b->req;
}

qdl_srec_t *qdl__qblock_recs(qdl_req_t *issue)
{
    return ((qdl_qblock_t *)(void *)issue)->recs;
}

void qdl__qblock_free(qdl_req_t *issue)
{
    free(issue);
}

void qdl__srec_done(qdl_srec_t *s)
{
    /* container_of: the records array sits at a fixed offset in its block. */
    qdl_qblock_t *b =
        (qdl_qblock_t *)(void *)((char *)(s - s->index_in_block) - offsetof(qdl_qblock_t, recs));
    if (--b->n_left == 0)
        free(b);
}

int qdl__resp_reserve(qdl_t *q, size_t n)
{
    qdl_response_t *r;
    size_t cap;

    if (n <= q->resp_cap)
        return 0;
    cap = q->resp_cap ? q->resp_cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    r = qdl__realloc(q->resp, cap * sizeof(*r));
    if (!r)
        return -ENOMEM;
    q->resp = r;
    q->resp_cap = cap;
    return 0;
}

void qdl__fail_chain(qdl_t *q, qdl_srec_t *s, int status)
{
    qdl_srec_t *next;
    size_t n = 0, i;

    for (next = s; next; next = next->next)
        n++;
    if (n == 0)
        return;
    if (qdl__resp_reserve(q, n) < 0) {
        /* Without memory for the array, complete one at a time. */
        qdl_response_t one;
        for (; s; s = next) {
            next = s->next;
            memset(&one, 0, sizeof(one));
            one.response_id = s->s.response_id;
            one.status = status;
            one.issued_ns = s->issued_ns;
            one.sent_ns = s->sent_ns;
            q->cfg.on_complete(q->cfg.user, &one, 1);
            qdl__srec_done(s);
        }
        return;
    }
    for (i = 0, next = s; next; next = next->next, i++) {
        memset(&q->resp[i], 0, sizeof(q->resp[i]));
        q->resp[i].response_id = next->s.response_id;
        q->resp[i].status = status;
        q->resp[i].issued_ns = next->issued_ns;
        q->resp[i].sent_ns = next->sent_ns;
    }
    q->cfg.on_complete(q->cfg.user, q->resp, n);
    for (; s; s = next) {
        next = s->next;
        qdl__srec_done(s);
    }
}

void qdl__req_done(qdl_req_t *r, int rc)
{
    r->rc = rc;
    uv_sem_post(&r->done);
}

void qdl__start_fail(qdl_t *q, int rc, const char *fmt, ...)
{
    qdl_req_t *r = q->start_req;
    va_list ap;

    if (!r)
        return;
    q->start_req = NULL;
    if (r->eb) {
        va_start(ap, fmt);
        vsnprintf(r->eb->msg, sizeof(r->eb->msg), fmt, ap);
        va_end(ap);
    }
    qdl__req_done(r, rc);
}

/* At most this many lines of one kind per second; the rest are counted and reported with the
 * next line that is let through. */
#define RATELOG_PER_S 5u

int qdl__ratelog(qdl_ratelog_t *rl, uint64_t now, uint64_t *suppressed)
{
    if (now - rl->window_ns >= 1000000000ull) {
        rl->window_ns = now;
        rl->in_window = 0;
    }
    if (rl->in_window >= RATELOG_PER_S) {
        rl->suppressed++;
        return 0;
    }
    rl->in_window++;
    *suppressed = rl->suppressed;
    rl->suppressed = 0;
    return 1;
}

const char *qdl__more_like_this(uint64_t dropped)
{
    static _Thread_local char buf[64];

    if (!dropped)
        return "";
    snprintf(buf, sizeof(buf), " (and %llu more like this)", (unsigned long long)dropped);
    return buf;
}
