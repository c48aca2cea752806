/* Results: matching ids, in-place codec-none bytes, LZ4 decoding, negotiated codecs, the decoded
 * size bound, one first token per sample, rejected samples re-queued. */
#include "test_qdl_unit.h"

#include "cmn/clock.h"
#include "cmpr/cmpr.h"

#include <stdlib.h>
#include <string.h>

/* A result for |s| (or |id| when s is NULL) with |wire| bytes at the frame payload. */
static Nsut__Result *result(Nsut__Result *r, uint64_t id, int codec, uint64_t raw, uint64_t wire)
{
    nsut__result__init(r);
    r->id = id;
    r->codec = (Nsut__Codec)codec;
    r->raw_size = raw;
    r->wire_size = wire;
    r->status = NSUT__STATUS__STATUS_OK;
    return r;
}

START_TEST(codec_none_results_arrive_in_place)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_conn_t *qc = &q->conns[0];
    qdl_srec_t *a = fx_issue(q, 2, 10);
    Nsut__Result r[2], *rp[2] = {&r[0], &r[1]};
    uint8_t payload[7] = "abcdefg";
    cmn_errbuf_t eb;

    fx_send(q, qc, 2);
    result(&r[0], a[1].wire_id, 0, 3, 3);
    result(&r[1], a[0].wire_id, 0, 4, 4);
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, rp, 2, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_calls, 1);
    ck_assert_uint_eq(fx_seen.n_done, 2);
    ck_assert_uint_eq(fx_seen.done[0].response_id, 1001); /* a[1]; the block is freed */
    ck_assert_ptr_eq(fx_seen.data_ptr[0], payload);       /* no copy into scratch */
    ck_assert_ptr_eq(fx_seen.data_ptr[1], payload + 3);
    ck_assert_uint_eq(fx_seen.done[1].size, 4);
    ck_assert_uint_eq(qc->n_inflight, 0);
    ck_assert_uint_eq(q->nodes[0].st.samples_completed, 2);
    ck_assert_int_eq(q->dispatch_due, 1);
    fx_free(q);
}
END_TEST

START_TEST(lz4_results_are_decoded_and_bounded)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_conn_t *qc = &q->conns[0];
    qdl_srec_t *a = fx_issue(q, 2, 10);
    Nsut__Result r, *rp = &r;
    uint8_t raw[4096], wire[4096];
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    cmn_errbuf_t eb;
    long n;

    memset(raw, 'x', sizeof(raw));
    n = cmpr_compress(ctx, CMPR_LZ4, raw, sizeof(raw), wire, sizeof(wire));
    ck_assert_int_gt(n, 0);
    fx_send(q, qc, 2);
    /* LZ4 was not negotiated on this connection: refused, the caller closes it. */
    q->nodes[0].result_codec = CMPR_NONE;
    result(&r, a[0].wire_id, CMPR_LZ4, sizeof(raw), (uint64_t)n);
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, &rp, 1, wire, &eb), CMN_ECODEC);
    ck_assert_ptr_nonnull(strstr(eb.msg, "not negotiated"));
    ck_assert_uint_eq(fx_seen.n_done, 0);
    /* Negotiated: decoded into scratch. */
    q->nodes[0].result_codec = CMPR_LZ4;
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, &rp, 1, wire, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 1);
    ck_assert_uint_eq(fx_seen.done[0].size, sizeof(raw));
    ck_assert_int_eq(memcmp(fx_seen.done[0].data, raw, sizeof(raw)), 0);
    /* A frame whose results would decode to more than max_frame_size is refused. */
    q->cfg.max_frame_size = 1000;
    result(&r, a[1].wire_id, CMPR_LZ4, sizeof(raw), (uint64_t)n);
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, &rp, 1, wire, &eb), CMN_ETOOBIG);
    ck_assert_uint_eq(fx_seen.n_done, 1);
    /* Within max_frame_size, but the frame, its unpacked result and the decoded bytes together
     * are over the connection's share of node_memory_budget: refused, naming the share. */
    q->cfg.max_frame_size = 1u << 20;
    q->conn_share = 5000;
    qc->rx_frame_bytes = 1000;
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, &rp, 1, wire, &eb), CMN_EOVERLOAD);
    ck_assert_ptr_nonnull(strstr(eb.msg, "a frame holding 1128 bytes (unpacked) whose results "
                                         "decode to 4096 more is over the connection's share of "
                                         "the node memory budget, 5000 bytes"));
    ck_assert_uint_eq(fx_seen.n_done, 1);
    q->conn_share = 6000;
    ck_assert_int_eq(qdl__results_handle(q, qc, 0, &rp, 1, wire, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 2);
    cmpr_ctx_free(ctx);
    fx_free(q);
}
END_TEST

START_TEST(stray_and_duplicate_results_are_dropped)
{
    qdl_t *q = fx_new(2, 1, 100);
    qdl_srec_t *a = fx_issue(q, 1, 10);
    Nsut__Result r, *rp = &r;
    uint8_t payload[1] = {0};
    cmn_errbuf_t eb;
    int i;

    fx_send(q, &q->conns[0], 1);
    result(&r, a[0].wire_id, 0, 0, 0);
    /* On the wrong connection: not outstanding there. */
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[1], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 0);
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    /* Many duplicates: dropped (and logged at a bounded rate). */
    for (i = 0; i < 100; i++)
        ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 1);
    ck_assert_uint_eq(q->nodes[1].st.errors, 1);
    ck_assert_uint_eq(q->nodes[0].st.errors, 100);
    ck_assert_uint_gt(q->log_stray.suppressed, 0);
    fx_free(q);
}
END_TEST

START_TEST(one_first_token_per_sample_across_redispatch)
{
    qdl_t *q = fx_new(2, 1, 100);
    qdl_srec_t *a = fx_issue(q, 1, 10), *one;
    Nsut__Result r, *rp = &r;
    uint8_t payload[1] = {0};
    cmn_errbuf_t eb;

    fx_send(q, &q->conns[0], 1);
    result(&r, a[0].wire_id, 0, 0, 0);
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 1, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_first, 1);
    /* The node is lost: the sample goes to the other one, which streams it again. */
    one = cmn_idmap_del(&q->conns[0].inflight, a[0].wire_id);
    q->conns[0].n_inflight--;
    q->nodes[0].inflight--;
    qdl__pending_requeue(q, &one, 1);
    fx_send(q, &q->conns[1], 1);
    result(&r, a[0].wire_id, 0, 0, 0);
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[1], 1, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_first, 1);
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[1], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 1);
    fx_free(q);
}
END_TEST

START_TEST(rejected_samples_are_requeued_and_the_connection_drains)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_srec_t *a = fx_issue(q, 2, 10);
    Nsut__Result r, *rp = &r;
    uint8_t payload[1] = {0};
    cmn_errbuf_t eb;

    fx_send(q, &q->conns[0], 2);
    result(&r, a[1].wire_id, 0, 0, 0);
    r.status = NSUT__STATUS__STATUS_REJECTED;
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.n_done, 0);
    ck_assert_int_eq(q->conns[0].draining, 1);
    ck_assert_ptr_eq(qdl__pending_head(q)->head, &a[1]);
    /* A backend failure completes the sample with a status. */
    result(&r, a[0].wire_id, 0, 0, 0);
    r.status = NSUT__STATUS__STATUS_BACKEND_ERROR;
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    ck_assert_int_eq(fx_seen.done[0].status, CMN_EBACKEND);
    fx_free(q);
}
END_TEST

START_TEST(a_rejected_sample_fails_after_max_dispatches)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_srec_t *a = fx_issue(q, 1, 10);
    Nsut__Result r, *rp = &r;
    uint8_t payload[1] = {0};
    cmn_errbuf_t eb;
    uint32_t i;

    q->cfg.max_dispatches = 3;
    /* Rejected, re-queued and sent again: a node that rejects and reconnects. */
    for (i = 1; i <= 3; i++) {
        fx_send(q, &q->conns[0], 1);
        ck_assert_uint_eq(a[0].dispatches, i);
        result(&r, a[0].wire_id, 0, 0, 0);
        r.status = NSUT__STATUS__STATUS_REJECTED;
        ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
        q->conns[0].draining = 0;
        if (i < 3) {
            ck_assert_uint_eq(fx_seen.n_done, 0);
            ck_assert_ptr_eq(qdl__pending_head(q)->head, &a[0]);
        }
    }
    /* The third rejection used up its dispatches: it fails, and is not queued again. */
    ck_assert_uint_eq(fx_seen.n_done, 1);
    ck_assert_int_eq(fx_seen.done[0].status, CMN_ENONODE);
    ck_assert_ptr_null(qdl__pending_head(q));
    ck_assert_uint_eq(q->nodes[0].st.samples_failed, 1);
    ck_assert_uint_eq(q->nodes[0].st.redispatched, 2);
    fx_free(q);
}
END_TEST

START_TEST(node_times_are_clamped_to_the_round_trip)
{
    qdl_t *q = fx_new(1, 1, 100);
    qdl_srec_t *a = fx_issue(q, 2, 10);
    Nsut__Result r, *rp = &r;
    uint8_t payload[1] = {0};
    cmn_errbuf_t eb;
    uint64_t before = cmn_now_ns();

    fx_send(q, &q->conns[0], 2);
    a[0].sent_ns = a[1].sent_ns = before - 1000000; /* sent a millisecond ago */
    /* Plausible times pass unchanged. */
    result(&r, a[0].wire_id, 0, 0, 0);
    r.node_queue_ns = 1000;
    r.node_backend_ns = 2000;
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.done[0].node_queue_ns, 1000);
    ck_assert_uint_eq(fx_seen.done[0].node_backend_ns, 2000);
    ck_assert_int_eq(q->nodes[0].warned_times, 0);
    /* Times past the round trip (2^64 - 1 would be negative as a signed column): clamped so
     * that together they fit in it, and the node is warned about. */
    result(&r, a[1].wire_id, 0, 0, 0);
    r.node_queue_ns = 500000;
    r.node_backend_ns = UINT64_MAX;
    ck_assert_int_eq(qdl__results_handle(q, &q->conns[0], 0, &rp, 1, payload, &eb), 0);
    ck_assert_uint_eq(fx_seen.done[1].node_queue_ns, 500000);
    ck_assert_uint_ge(fx_seen.done[1].node_backend_ns, 1000000 - 500000);
    ck_assert_uint_le(fx_seen.done[1].node_queue_ns + fx_seen.done[1].node_backend_ns,
                      cmn_now_ns() - (before - 1000000));
    ck_assert_int_eq(q->nodes[0].warned_times, 1);
    fx_free(q);
}
END_TEST

TCase *tcase_results(void)
{
    TCase *c = tcase_create("unit_results");
    tcase_add_test(c, codec_none_results_arrive_in_place);
    tcase_add_test(c, lz4_results_are_decoded_and_bounded);
    tcase_add_test(c, stray_and_duplicate_results_are_dropped);
    tcase_add_test(c, one_first_token_per_sample_across_redispatch);
    tcase_add_test(c, rejected_samples_are_requeued_and_the_connection_drains);
    tcase_add_test(c, a_rejected_sample_fails_after_max_dispatches);
    tcase_add_test(c, node_times_are_clamped_to_the_round_trip);
    return c;
}
