/* The pending queue: issue order, parts, re-queueing at the front grouped by query, expiry. */
#include "test_qdl_unit.h"

#include "cmn/clock.h"

#include <stdlib.h>

START_TEST(queries_wait_in_issue_order_and_leave_in_parts)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_srec_t *a = fx_issue(q, 5, 10), *b = fx_issue(q, 3, 10), *part;
    qdl_pq_t *pq;

    ck_assert_uint_eq(qdl__pending_count(q), 8);
    ck_assert_int_eq(q->dispatch_due, 1);
    pq = qdl__pending_head(q);
    ck_assert_uint_eq(pq->query_id, a[0].query_id);
    part = qdl__pending_take(q, pq, 2);
    ck_assert_ptr_eq(part, &a[0]);
    ck_assert_ptr_eq(part->next, &a[1]);
    ck_assert_ptr_null(part->next->next);
    ck_assert_uint_eq(pq->part, 1);
    ck_assert_uint_eq(qdl__pending_count(q), 6);
    qdl__fail_chain(q, part, CMN_ECLOSED);
    part = qdl__pending_take(q, pq, 3);
    qdl__fail_chain(q, part, CMN_ECLOSED);
    /* The emptied query is dropped; the next one is the head. */
    ck_assert_uint_eq(qdl__pending_head(q)->query_id, b[0].query_id);
    ck_assert_uint_eq(fx_seen.n_done, 5);
    ck_assert_uint_eq(fx_seen.done[0].response_id, 1000); /* a[0]: its block is gone */
    fx_free(q);
    ck_assert_uint_eq(fx_seen.n_done, 8);
}
END_TEST

START_TEST(requeued_samples_go_first_grouped_by_query)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_srec_t *a = fx_issue(q, 3, 10), *b = fx_issue(q, 3, 10), *c = fx_issue(q, 2, 10);
    qdl_srec_t *mix[4];
    qdl_pq_t *pq;

    /* a and b left on a connection, interleaved; c still waits. */
    qdl__pending_take(q, qdl__pending_head(q), 3);
    qdl__pending_take(q, qdl__pending_head(q), 3);
    ck_assert_uint_eq(qdl__pending_head(q)->query_id, c[0].query_id); /* b's emptied entry goes */
    a[0].wire_id = 1, a[1].wire_id = 3, b[0].wire_id = 2, b[2].wire_id = 4;
    mix[0] = &b[2];
    mix[1] = &a[1];
    mix[2] = &b[0];
    mix[3] = &a[0];
    qdl__pending_requeue(q, mix, 4);
    pq = qdl__pending_head(q);
    ck_assert_uint_eq(pq->query_id, a[0].query_id);
    ck_assert_uint_eq(pq->n, 2);
    ck_assert_ptr_eq(pq->head, &a[0]);
    ck_assert_ptr_eq(pq->head->next, &a[1]);
    ck_assert_uint_eq(pq->next->query_id, b[0].query_id);
    ck_assert_ptr_eq(pq->next->head, &b[0]);
    ck_assert_uint_eq(pq->next->next->query_id, c[0].query_id);
    ck_assert_uint_eq(qdl__pending_count(q), 6);
    /* a[2] and b[1] completed meanwhile. */
    a[2].next = &b[1];
    b[1].next = NULL;
    qdl__fail_chain(q, &a[2], 0);
    fx_free(q);
    ck_assert_uint_eq(fx_seen.n_done, 8);
}
END_TEST

START_TEST(fail_all_fails_every_query_and_resets_the_tail)
{
    qdl_t *q = fx_new(1, 1, 100);

    fx_issue(q, 2, 10);
    fx_issue(q, 3, 10);
    ck_assert_uint_eq(qdl__pending_fail_all(q, CMN_ENONODE, "test"), 5);
    ck_assert_uint_eq(fx_seen.n_done, 5);
    ck_assert_int_eq(fx_seen.done[0].status, CMN_ENONODE);
    ck_assert_int_eq(fx_seen.done[4].status, CMN_ENONODE);
    ck_assert_ptr_null(qdl__pending_head(q));
    ck_assert_ptr_null(q->pending_tail);
    fx_issue(q, 1, 10); /* the tail was reset: a new query can queue */
    ck_assert_uint_eq(qdl__pending_count(q), 1);
    ck_assert_uint_eq(qdl__pending_fail_all(q, CMN_ECLOSED, NULL), 1);
    ck_assert_uint_eq(fx_seen.n_done, 6);
    fx_free(q);
}
END_TEST

TCase *tcase_pending(void)
{
    TCase *c = tcase_create("unit_pending");
    tcase_add_test(c, queries_wait_in_issue_order_and_leave_in_parts);
    tcase_add_test(c, requeued_samples_go_first_grouped_by_query);
    tcase_add_test(c, fail_all_fails_every_query_and_resets_the_tail);
    return c;
}
