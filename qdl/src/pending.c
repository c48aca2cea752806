/* The pending queue: queries (or what is left of them) waiting for a connection with room, in
 * issue order, with re-dispatched samples at the front. A part taken from it holds samples of one
 * query only: the QDL never merges queries. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/list.h"
#include "cmn/log.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

static void pq_append(qdl_pq_t *pq, qdl_srec_t *s)
{
    s->query_id = pq->query_id; /* re-queueing groups by it */
    s->next = NULL;
    s->conn = NULL;
    CMN_QUEUE_APPEND(pq->head, pq->tail, s, next);
    pq->n++;
    pq->codecs |= 1u << s->s.codec;
}

static void stamp(qdl_pq_t *pq, uint64_t now)
{
    qdl_srec_t *s;

    for (s = pq->head; s; s = s->next)
        s->queued_ns = now;
}

/* Links |n| records into a chain, in array order. */
static qdl_srec_t *chain_of(qdl_srec_t **recs, size_t n)
{
    qdl_srec_t *head = NULL;

    while (n-- > 0) {
        recs[n]->next = head;
        head = recs[n];
    }
    return head;
}

void qdl__pending_enqueue(qdl_t *q, qdl_srec_t *samples, size_t n)
{
    qdl_pq_t *pq = qdl__calloc(1, sizeof(*pq));
    size_t i;

    if (!pq) {
        for (i = 0; i + 1 < n; i++)
            samples[i].next = &samples[i + 1];
        samples[n - 1].next = NULL;
        cmn_log_error("qdl: out of memory queueing a query of %zu samples", n);
        qdl__fail_chain(q, samples, -ENOMEM);
        return;
    }
    pq->query_id = q->next_query_id++;
    for (i = 0; i < n; i++)
        pq_append(pq, &samples[i]);
    stamp(pq, cmn_now_ns());
    CMN_QUEUE_APPEND(q->pending_head, q->pending_tail, pq, next);
    q->dispatch_due = 1;
}

static int cmp_query(const void *a, const void *b)
{
    const qdl_srec_t *x = *(const qdl_srec_t *const *)a, *y = *(const qdl_srec_t *const *)b;
    if (x->query_id != y->query_id)
        return x->query_id < y->query_id ? -1 : 1;
    return x->wire_id < y->wire_id ? -1 : x->wire_id > y->wire_id;
}

void qdl__pending_requeue(qdl_t *q, qdl_srec_t **recs, size_t n)
{
    qdl_pq_t *pq = NULL, *first = NULL, *last = NULL;
    uint64_t now = cmn_now_ns();
    size_t i;

    if (n == 0)
        return;
    qsort(recs, n, sizeof(*recs), cmp_query);
    for (i = 0; i < n; i++) {
        if (!pq || pq->query_id != recs[i]->query_id) {
            pq = qdl__calloc(1, sizeof(*pq));
            if (!pq) {
                cmn_log_error("qdl: out of memory re-queueing %zu samples: they fail", n - i);
                qdl__fail_chain(q, chain_of(recs + i, n - i), -ENOMEM);
                break;
            }
            pq->query_id = recs[i]->query_id;
            if (last)
                last->next = pq;
            else
                first = pq;
            last = pq;
        }
        pq_append(pq, recs[i]);
    }
    if (!first)
        return;
    /* To the front of the queue, in order: these samples have waited longest. */
    for (pq = first; pq; pq = pq->next)
        stamp(pq, now);
    last->next = q->pending_head;
    q->pending_head = first;
    if (!q->pending_tail)
        q->pending_tail = last;
    q->dispatch_due = 1;
}

qdl_pq_t *qdl__pending_head(qdl_t *q)
{
    while (q->pending_head && !q->pending_head->head) {
        qdl_pq_t *pq = q->pending_head;
        q->pending_head = pq->next;
        if (!q->pending_head)
            q->pending_tail = NULL;
        free(pq);
    }
    return q->pending_head;
}

qdl_srec_t *qdl__pending_take(qdl_t *q, qdl_pq_t *pq, size_t n)
{
    qdl_srec_t *head = pq->head, *s = head;
    size_t i;

    (void)q;
    for (i = 1; i < n && s->next; i++)
        s = s->next;
    pq->head = s->next;
    s->next = NULL;
    if (!pq->head)
        pq->tail = NULL;
    pq->n -= i;
    pq->part++;
    return head;
}

size_t qdl__pending_fail_all(qdl_t *q, int status, const char *what)
{
    size_t n_samples = 0, n_queries = 0;
    unsigned long long lo_id = ULLONG_MAX, hi_id = 0, id;

    while (q->pending_head) {
        qdl_pq_t *pq = q->pending_head;
        q->pending_head = pq->next;
        if (pq->head) {
            id = (unsigned long long)pq->query_id;
            lo_id = id < lo_id ? id : lo_id;
            hi_id = id > hi_id ? id : hi_id;
            n_queries++;
            n_samples += pq->n;
        }
        qdl__fail_chain(q, pq->head, status);
        free(pq);
    }
    q->pending_tail = NULL;
    /* One line, however many queries it fails (a Server run issues thousands a second). */
    if (what && n_queries == 1)
        cmn_log_error("qdl: %s: failing %zu samples of query %llu", what, n_samples, lo_id);
    else if (what && n_queries > 1)
        cmn_log_error("qdl: %s: failing %zu samples of the queries with ids %llu to %llu", what,
                      n_samples, lo_id, hi_id);
    return n_samples;
}

size_t qdl__pending_count(const qdl_t *q)
{
    const qdl_pq_t *pq;
    size_t n = 0;

    for (pq = q->pending_head; pq; pq = pq->next)
        n += pq->n;
    return n;
}
