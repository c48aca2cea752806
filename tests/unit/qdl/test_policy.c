/* The dispatch policy and part sizing, on hand-built nodes. */
#include "test_qdl_unit.h"

START_TEST(least_outstanding_picks_the_idlest_node)
{
    qdl_t *q = fx_new(3, 1, 100);

    q->nodes[0].inflight = 5;
    q->nodes[1].inflight = 2;
    q->nodes[2].inflight = 9;
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[1].conns[0]);
    fx_free(q);
}
END_TEST

/* Least tokens (LLM endpoints): the fewest tokens outstanding wins, though it holds more samples.
 */
START_TEST(least_tokens_counts_tokens_not_samples)
{
    qdl_t *q = fx_new(3, 1, 100);

    q->cfg.policy = QDL_POLICY_LEAST_TOKENS;
    q->nodes[0].inflight = 1;
    q->nodes[0].tokens_out = 4000; /* one long prompt */
    q->nodes[1].inflight = 6;
    q->nodes[1].tokens_out = 600; /* six short ones */
    q->nodes[2].inflight = 2;
    q->nodes[2].tokens_out = 2500;
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[1].conns[0]);
    q->cfg.policy = QDL_POLICY_LEAST_OUTSTANDING; /* the same nodes by samples pending */
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[0].conns[0]);
    fx_free(q);
}
END_TEST

START_TEST(round_robin_rotates)
{
    qdl_t *q = fx_new(3, 1, 100);
    unsigned seen = 0;
    int i;

    q->cfg.policy = QDL_POLICY_ROUND_ROBIN;
    for (i = 0; i < 3; i++)
        seen |= 1u << qdl__pick(q, 1, 0)->node->index;
    ck_assert_uint_eq(seen, 7);
    fx_free(q);
}
END_TEST

START_TEST(weighted_divides_by_weight)
{
    qdl_t *q = fx_new(2, 1, 100);

    q->cfg.policy = QDL_POLICY_WEIGHTED;
    q->nodes[0].inflight = 10;
    q->nodes[0].weight = 4.0; /* 2.5 per unit */
    q->nodes[1].inflight = 3;
    q->nodes[1].weight = 1.0; /* 3 per unit */
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[0].conns[0]);
    fx_free(q);
}
END_TEST

START_TEST(full_draining_and_codec_filtered_nodes_are_skipped)
{
    qdl_t *q = fx_new(3, 2, 4);

    q->nodes[0].conns[0].n_inflight = 4; /* full */
    q->nodes[0].conns[1].state = QC_HANDSHAKE;
    q->nodes[1].conns[0].draining = 1;
    q->nodes[1].conns[1].draining = 1;
    q->nodes[2].sample_codecs = 1; /* no LZ4 */
    ck_assert_ptr_null(qdl__pick(q, 2, 0));
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[2].conns[0]);
    /* Within a node, its least loaded connection. */
    q->nodes[2].conns[0].n_inflight = 3;
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[2].conns[1]);
    /* A node whose frame limit is below the part's smallest frame is skipped. */
    q->nodes[2].max_frame = 1000;
    ck_assert_ptr_null(qdl__pick(q, 1, 1001));
    fx_free(q);
}
END_TEST

/* 64 nodes: the search stops at the first idle node in rotation order (issue 38), which must
 * still share idle nodes out evenly and never skip past a lone idle node or pick a degraded one
 * while a healthy node has room. */
START_TEST(sixty_four_nodes_idle_ones_shared_out_evenly)
{
    qdl_t *q = fx_new(64, 1, 100);
    unsigned long long seen = 0;
    size_t i;

    for (i = 0; i < 64; i++) {
        qdl_conn_t *c = qdl__pick(q, 1, 0);

        ck_assert_ptr_nonnull(c);
        ck_assert_msg(!(seen & (1ull << c->node->index)), "node %u picked twice in 64 picks",
                      c->node->index);
        seen |= 1ull << c->node->index;
        c->node->inflight = 1; /* busy now, as a sent part makes it */
        c->n_inflight = 1;
    }
    ck_assert(seen == ~0ull);
    /* Every node busy but one, anywhere in the order: that one. */
    for (i = 0; i < 64; i += 7) {
        q->nodes[i].inflight = 0;
        q->nodes[i].conns[0].n_inflight = 0;
        ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[i].conns[0]);
        q->nodes[i].inflight = 1;
        q->nodes[i].conns[0].n_inflight = 1;
    }
    /* An idle degraded node loses to the least loaded healthy one. */
    q->nodes[5].inflight = 0;
    q->nodes[5].conns[0].n_inflight = 0;
    q->nodes[5].degraded = 1;
    q->nodes[40].inflight = 0; /* room, one sample less than the others */
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[40].conns[0]);
    fx_free(q);
}
END_TEST

START_TEST(degraded_nodes_get_one_sample_and_only_as_a_last_resort)
{
    qdl_t *q = fx_new(2, 1, 100);

    q->nodes[0].degraded = 1;
    q->nodes[1].inflight = 50;
    q->nodes[1].conns[0].n_inflight = 50;
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[1].conns[0]);
    q->nodes[1].conns[0].n_inflight = 100; /* full */
    ck_assert_ptr_eq(qdl__pick(q, 1, 0), &q->nodes[0].conns[0]);
    q->nodes[0].conns[0].n_inflight = 1; /* its probe is out */
    ck_assert_ptr_null(qdl__pick(q, 1, 0));
    fx_free(q);
}
END_TEST

TCase *tcase_policy(void)
{
    TCase *c = tcase_create("unit_policy");
    tcase_add_test(c, least_outstanding_picks_the_idlest_node);
    tcase_add_test(c, least_tokens_counts_tokens_not_samples);
    tcase_add_test(c, round_robin_rotates);
    tcase_add_test(c, weighted_divides_by_weight);
    tcase_add_test(c, full_draining_and_codec_filtered_nodes_are_skipped);
    tcase_add_test(c, degraded_nodes_get_one_sample_and_only_as_a_last_resort);
    tcase_add_test(c, sixty_four_nodes_idle_ones_shared_out_evenly);
    return c;
}

START_TEST(parts_are_bounded_by_samples_window_and_bytes)
{
    qdl_t *q = fx_new(1, 1, 10);
    qdl_conn_t *qc = &q->conns[0];
    uint64_t bytes;

    fx_issue(q, 40, 100);
    q->cfg.max_part_samples = 16;
    ck_assert_uint_eq(qdl__part_size(q, qc, qdl__pending_head(q), &bytes), 10); /* window */
    ck_assert_uint_eq(bytes, 1000);
    qc->n_inflight = 7;
    ck_assert_uint_eq(qdl__part_size(q, qc, qdl__pending_head(q), &bytes), 3);
    qc->n_inflight = 0;
    q->nodes[0].window = 1000;
    ck_assert_uint_eq(qdl__part_size(q, qc, qdl__pending_head(q), &bytes), 16); /* samples */
    fx_free(q);
}
END_TEST

START_TEST(parts_fit_the_nodes_frame_limit)
{
    qdl_t *q = fx_new(1, 1, 1000);
    qdl_conn_t *qc = &q->conns[0];
    uint64_t bytes;
    size_t n;

    fx_issue(q, 100, 60000);
    q->nodes[0].max_frame = 1 << 20; /* 1 MiB: 17 samples of 60 kB and their overhead */
    n = qdl__part_size(q, qc, qdl__pending_head(q), &bytes);
    ck_assert_uint_eq(n, 17);
    ck_assert_uint_le(bytes + 256 + 64 * n, 1u << 20);
    /* A single sample always makes a part (dispatch fails it when it cannot fit). */
    q->nodes[0].max_frame = 1000;
    ck_assert_uint_eq(qdl__part_size(q, qc, qdl__pending_head(q), &bytes), 1);
    fx_free(q);
}
END_TEST

/* Past 2 MiB a part ends once it holds the node's preferred batch; never past 8 MiB. */
START_TEST(parts_stop_at_two_mib_past_the_preferred_batch_and_at_eight)
{
    qdl_t *q = fx_new(1, 1, 100000);
    uint64_t bytes;

    fx_issue(q, 1024, 65536);
    ck_assert_uint_eq(qdl__part_size(q, &q->conns[0], qdl__pending_head(q), &bytes), 32);
    ck_assert_uint_eq(bytes, 2u << 20);
    q->nodes[0].batch_pref = 100;
    ck_assert_uint_eq(qdl__part_size(q, &q->conns[0], qdl__pending_head(q), &bytes), 100);
    ck_assert_uint_eq(bytes, 100u * 65536);
    q->nodes[0].batch_pref = 1000;
    ck_assert_uint_eq(qdl__part_size(q, &q->conns[0], qdl__pending_head(q), &bytes), 128);
    ck_assert_uint_eq(bytes, 8u << 20);
    fx_free(q);
}
END_TEST

TCase *tcase_part_size(void)
{
    TCase *c = tcase_create("unit_part_size");
    tcase_add_test(c, parts_are_bounded_by_samples_window_and_bytes);
    tcase_add_test(c, parts_fit_the_nodes_frame_limit);
    tcase_add_test(c, parts_stop_at_two_mib_past_the_preferred_batch_and_at_eight);
    return c;
}
