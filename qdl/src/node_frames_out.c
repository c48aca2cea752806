/* Frames out to a sut-node (layer list: README.md, "Map of the files"): the control messages the
 * QDL sends, Hello, Ping, Pong, Flush and Goodbye. The Query parts are dispatch.c's, the
 * NameRequests name.c's. Calls only common/. */
#include "qdl_internal.h"

#include "cmpr/cmpr.h"

#include <stddef.h>

void qdl__send_hello(qdl_conn_t *qc)
{
    qdl_t *q = qc->node->q;
    Nsut__Hello h = NSUT__HELLO__INIT;
    Nsut__Codec sample[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};
    Nsut__Codec result[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};

    h.version_min = h.version_max = CMN_PROTOCOL_VERSION;
    h.n_sample_codecs = 2;
    h.sample_codecs = sample;
    h.n_result_codecs = q->cfg.result_codec == CMPR_LZ4 ? 2 : 1;
    h.result_codecs = result;
    h.client_name = q->client_name;
    h.max_frame_size = q->conn_share; /* what the node may send: its share of the budget */
    (void)cmn_conn_send(&qc->c, CMN_MSG_HELLO, &h.base, NULL, 0, NULL, NULL);
}

void qdl__send_ping(qdl_conn_t *qc, uint64_t now)
{
    Nsut__Ping p = NSUT__PING__INIT;

    p.seq = ++qc->ping_seq;
    p.sent_ns = now;
    qc->ping_sent_ns = now;
    qc->state_ns = now; /* the next ping is due one interval after this one */
    (void)cmn_conn_send(&qc->c, CMN_MSG_PING, &p.base, NULL, 0, NULL, NULL);
}

static void pong_sent(void *arg, int status)
{
    qdl_conn_t *qc = arg;
    (void)status;
    qc->pong_queued = 0;
}

void qdl__send_pong(qdl_conn_t *qc, const Nsut__Ping *m)
{
    Nsut__Pong p = NSUT__PONG__INIT;

    p.seq = m->seq;
    p.sent_ns = m->sent_ns;
    /* Set first: the callback may run inside the send (ucx:// copies small frames at once). */
    qc->pong_queued = 1;
    if (cmn_conn_send(&qc->c, CMN_MSG_PONG, &p.base, NULL, 0, pong_sent, qc) < 0)
        qc->pong_queued = 0;
}

void qdl__send_goodbye(qdl_conn_t *qc)
{
    Nsut__Goodbye g = NSUT__GOODBYE__INIT;

    g.reason = (char *)"QDL closing";
    (void)cmn_conn_send(&qc->c, CMN_MSG_GOODBYE, &g.base, NULL, 0, NULL, NULL);
}

void qdl__flush_nodes(qdl_t *q)
{
    Nsut__Flush f = NSUT__FLUSH__INIT;
    size_t i;

    for (i = 0; i < q->n_conns; i++)
        if (q->conns[i].state == QC_READY && !q->conns[i].node->endpoint)
            (void)cmn_conn_send(&q->conns[i].c, CMN_MSG_FLUSH, &f.base, NULL, 0, NULL, NULL);
}
