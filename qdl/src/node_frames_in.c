/* Frames in from a sut-node (layer list: README.md, "Map of the files"): the connection's frame
 * and decode-error callbacks, the limits a frame is unpacked under (the connection's window and
 * its share of the node memory budget), the handshake gate, and each message routed to the file
 * that owns it (the session, liveness, results, Name()).
 *
 * The top of the node files: it calls the ones below, none calls it; node.c gets its callbacks
 * as qdl__node_events, which qdl.c hands to qdl__nodes_init. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <stdio.h>
#include <string.h>

static void handle_msg(qdl_t *q, qdl_conn_t *qc, const cmn_frame_t *f, const ProtobufCMessage *m)
{
    unsigned type = f->hdr.type;
    qdl_node_t *nd = qc->node;
    cmn_errbuf_t eb;
    char why[700];
    int rc;

    switch (type) {
    case CMN_MSG_HELLO_ACK:
        qdl__session_hello_ack(q, qc, (const Nsut__HelloAck *)m);
        break;
    case CMN_MSG_NAME_REPLY:
        qdl__name_reply(q, nd, (const Nsut__NameReply *)m);
        break;
    case CMN_MSG_RESPONSE:
    case CMN_MSG_FIRST_TOKEN: {
        int ft = type == CMN_MSG_FIRST_TOKEN;
        const Nsut__Response *r = (const Nsut__Response *)m;
        const Nsut__FirstToken *t = (const Nsut__FirstToken *)m;
        rc = qdl__results_handle(q, qc, ft, ft ? t->results : r->results,
                                 ft ? t->n_results : r->n_results, f->payload, &eb);
        if (rc < 0) {
            nd->st.errors++;
            qdl__conn_close(qc, rc, eb.msg);
        }
        break;
    }
    case CMN_MSG_PONG:
        qdl__live_pong(qc, (const Nsut__Pong *)m);
        break;
    case CMN_MSG_PING:
        qdl__live_ping(qc, (const Nsut__Ping *)m);
        break;
    case CMN_MSG_STATS:
        break;
    case CMN_MSG_GOODBYE:
        cmn_log_info("qdl: node %s is shutting down (Goodbye)", qdl__node_label(nd));
        qc->draining = 1;
        break;
    case CMN_MSG_ERROR:
        qdl__session_error(q, qc, (const Nsut__Error *)m);
        break;
    default:
        snprintf(why, sizeof(why), "%s is not a message a node sends", cmn_msg_type_name(type));
        nd->st.errors++;
        qdl__conn_close(qc, CMN_ESTATE, why);
        break;
    }
}

static void on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    qdl_conn_t *qc = c->data;
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;
    char why[700];
    int rc;

    nd->st.bytes_in += CMN_FRAME_HEADER_SIZE + f->hdr.meta_len + f->hdr.payload_len;
    qc->last_rx_ns = cmn_now_ns();
    qc->rx_frame_bytes = (uint64_t)f->hdr.meta_len + f->hdr.payload_len;
    lim.max_sample_size = q->cfg.max_frame_size;
    /* A frame has at most a result per sample the connection may hold: a larger count is
     * refused before protobuf-c unpacks it. */
    if (qc->state == QC_READY && nd->window < lim.max_samples)
        lim.max_samples = (uint32_t)nd->window;
    /* And no more than the rest of the connection's share holds unpacked. */
    if (qc->state == QC_READY && qc->rx_frame_bytes < q->conn_share &&
        (q->conn_share - qc->rx_frame_bytes) / QDL_RESULT_UNPACKED_BYTES < lim.max_samples)
        lim.max_samples =
            (uint32_t)((q->conn_share - qc->rx_frame_bytes) / QDL_RESULT_UNPACKED_BYTES);
    rc = cmn_msg_unpack(f, &lim, &q->arena.pb, &m, &eb);
    if (rc < 0) {
        snprintf(why, sizeof(why), "bad %s frame: %s", cmn_msg_type_name(f->hdr.type), eb.msg);
        nd->st.errors++;
        qdl__conn_close(qc, rc, why);
    } else if (qc->state == QC_HANDSHAKE && f->hdr.type != CMN_MSG_HELLO_ACK &&
               f->hdr.type != CMN_MSG_ERROR) {
        snprintf(why, sizeof(why), "%s before HelloAck", cmn_msg_type_name(f->hdr.type));
        qdl__conn_close(qc, CMN_ESTATE, why);
    } else {
        handle_msg(q, qc, f, m);
    }
    if (m)
        cmn_msg_free(m, &q->arena.pb);
    cmn_arena_reset(&q->arena);
}

static void on_decode_error(cmn_conn_t *c, int err)
{
    qdl_conn_t *qc = c->data;
    const cmn_frame_decoder_t *d = cmn_conn_decoder(c);
    char why[400];

    qc->node->st.errors++;
    if (err == CMN_ETOOBIG && d->hdr.meta_len > d->limits.max_meta)
        snprintf(why, sizeof(why),
                 "frame rejected by its header: %s metadata of %u bytes, over the limit of %u "
                 "(%llu results in flight at most)",
                 cmn_msg_type_name(d->hdr.type), d->hdr.meta_len, d->limits.max_meta,
                 (unsigned long long)qc->node->window);
    else if (err == CMN_ETOOBIG)
        snprintf(why, sizeof(why),
                 "frame rejected by its header: %s of %u metadata + %u payload bytes, over the "
                 "limit of %llu (%s)",
                 cmn_msg_type_name(d->hdr.type), d->hdr.meta_len, d->hdr.payload_len,
                 (unsigned long long)d->limits.max_frame,
                 qc->state == QC_READY ? "the connection's share of the node memory budget"
                                       : "before the handshake");
    else
        snprintf(why, sizeof(why), "frame from the node rejected: %s", cmn_strerror(err));
    if (qc->state == QC_HANDSHAKE && !qc->node->q->tls)
        snprintf(why + strlen(why), sizeof(why) - strlen(why),
                 "; the node does not speak this protocol in plaintext (a TLS node? give the QDL "
                 "a CA file, tls_ca_file)");
    qdl__conn_close(qc, err, why);
}

const qdl_node_events_t qdl__node_events = {on_frame, on_decode_error, qdl__session_connected};
