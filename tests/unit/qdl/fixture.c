#include "test_qdl_unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fx_seen_t fx_seen;
static uint8_t fx_bytes[1 << 16];

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    size_t i;

    (void)user;
    fx_seen.n_calls++;
    for (i = 0; i < n && fx_seen.n_done < FX_MAX_DONE; i++) {
        fx_seen.data_ptr[fx_seen.n_done] = r[i].data;
        fx_seen.done[fx_seen.n_done++] = r[i];
    }
}

static void on_first(void *user, const qdl_response_t *r, size_t n)
{
    size_t i;

    (void)user;
    for (i = 0; i < n && fx_seen.n_first < FX_MAX_DONE; i++)
        fx_seen.first[fx_seen.n_first++] = r[i];
}

qdl_t *fx_new(size_t n_nodes, unsigned cpn, uint64_t window)
{
    qdl_t *q = calloc(1, sizeof(*q));
    size_t i, k;

    ck_assert_ptr_nonnull(q);
    memset(&fx_seen, 0, sizeof(fx_seen));
    qdl_config_init(&q->cfg);
    q->cfg.connections_per_node = cpn;
    q->cfg.on_complete = on_complete;
    q->cfg.on_first_token = on_first;
    q->n_nodes = n_nodes;
    q->n_conns = n_nodes * cpn;
    q->nodes = calloc(n_nodes, sizeof(*q->nodes));
    q->conns = calloc(q->n_conns, sizeof(*q->conns));
    ck_assert(q->nodes && q->conns);
    q->next_wire_id = q->next_query_id = 1;
    cmn_arena_init(&q->arena, 4096);
    for (i = 0; i < n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        nd->q = q;
        nd->index = (unsigned)i;
        snprintf(nd->address, sizeof(nd->address), "10.0.0.%zu:7000", i + 1);
        snprintf(nd->name, sizeof(nd->name), "node%zu", i);
        nd->named = 1;
        nd->window = window;
        nd->weight = 1.0;
        nd->max_frame = q->cfg.max_frame_size;
        nd->sample_codecs = 3;
        nd->conns = &q->conns[i * cpn];
        for (k = 0; k < cpn; k++) {
            nd->conns[k].node = nd;
            nd->conns[k].index = (unsigned)k;
            nd->conns[k].state = QC_READY;
            cmn_idmap_init(&nd->conns[k].inflight);
        }
    }
    return q;
}

static void free_inflight(void *arg, uint64_t key, void *val)
{
    (void)arg;
    (void)key;
    qdl__srec_done(val);
}

void fx_free(qdl_t *q)
{
    size_t i;

    qdl__pending_fail_all(q, CMN_ECLOSED, NULL);
    for (i = 0; i < q->n_conns; i++) {
        cmn_idmap_each(&q->conns[i].inflight, free_inflight, NULL);
        cmn_idmap_free(&q->conns[i].inflight);
    }
    cmn_arena_free(&q->arena);
    free(q->conns);
    free(q->nodes);
    free(q->scratch);
    free(q->resp);
    free(q);
}

qdl_srec_t *fx_issue(qdl_t *q, size_t n, size_t bytes_each)
{
    qdl_sample_t *s = calloc(n, sizeof(*s));
    qdl_req_t *r;
    size_t i;

    ck_assert_ptr_nonnull(s);
    ck_assert_uint_le(bytes_each, sizeof(fx_bytes));
    for (i = 0; i < n; i++) {
        s[i].response_id = 1000 * q->next_query_id + i;
        s[i].data = fx_bytes;
        s[i].size = s[i].raw_size = bytes_each;
    }
    r = qdl__qblock_new(s, n);
    free(s);
    ck_assert_ptr_nonnull(r);
    qdl__pending_enqueue(q, qdl__qblock_recs(r), n);
    return qdl__qblock_recs(r);
}

void fx_send(qdl_t *q, qdl_conn_t *qc, size_t n)
{
    qdl_pq_t *pq = qdl__pending_head(q);
    qdl_srec_t *s;

    ck_assert_ptr_nonnull(pq);
    for (s = qdl__pending_take(q, pq, n); s; s = s->next) {
        s->wire_id = q->next_wire_id++;
        s->conn = qc;
        s->dispatches++;
        ck_assert_int_eq(cmn_idmap_put(&qc->inflight, s->wire_id, s), 0);
        qc->n_inflight++;
        qc->node->inflight++;
    }
}
