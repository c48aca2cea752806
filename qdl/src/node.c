/* Nodes: their connections (connect, handshake, frames in, close, reconnect with backoff),
 * liveness (pings, connect and progress deadlines) and shutdown.
 *
 * When a connection dies, its in-flight samples go back to the pending queue and the connection
 * is closed first, so a late result from the old node can never arrive. Nothing here dispatches:
 * events that may let samples move set q->dispatch_due. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100u
/* The progress deadline when none is configured: at least this (longer for a streaming backend,
 * whose generations may run long), or a multiple of the slowest completion the node has shown. */
#define PROGRESS_MIN_MS 10000u
#define PROGRESS_MIN_STREAMING_MS 60000u
#define PROGRESS_LATENCY_FACTOR 4u
/* A node Pings once per heartbeat interval (sut-node: a second by default); more than this many
 * in one second is a flood, a protocol violation that drops it. */
#define PINGS_PER_S_MAX 100u
/* The metadata of one Result is under 80 bytes: a Response's metadata limit follows the
 * connection's in-flight window, so a larger one is refused by its header. */
#define META_PER_RESULT 80u
#define META_BASE 4096u

static void conn_connect(qdl_conn_t *qc);
static void conn_closed(qdl_conn_t *qc, int reason);

int qdl__conn_usable(const qdl_conn_t *qc)
{
    return qc->state == QC_READY && !qc->draining;
}

int qdl__ready_nodes(const qdl_t *q)
{
    size_t i, k;
    int n = 0;

    for (i = 0; i < q->n_nodes; i++) {
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            const qdl_conn_t *qc = &q->nodes[i].conns[k];
            if (qdl__conn_usable(qc) && !qc->node->degraded) {
                n++;
                break;
            }
        }
    }
    return n;
}

/* ---- closing --------------------------------------------------------------------------------- */

static void collect_srec(void *arg, uint64_t key, void *val)
{
    qdl_srec_t ***cur = arg;
    (void)key;
    **cur = val;
    (*cur)++;
}

/* Takes every sample out of |qc|'s in-flight map into a new array (*out, count returned). */
static size_t take_inflight(qdl_conn_t *qc, qdl_srec_t ***out)
{
    size_t n = qc->inflight.count;
    qdl_srec_t **all, **cur;

    *out = NULL;
    if (n == 0)
        return 0;
    all = qdl__malloc(n * sizeof(*all));
    if (!all)
        return 0;
    cur = all;
    cmn_idmap_each(&qc->inflight, collect_srec, &cur);
    for (cur = all; cur < all + n; cur++)
        qc->node->tokens_out -= (*cur)->cost;
    cmn_idmap_free(&qc->inflight);
    cmn_idmap_init(&qc->inflight);
    qc->node->inflight -= qc->n_inflight;
    qc->n_inflight = 0;
    *out = all;
    return n;
}

/* Samples in flight on a lost connection: back to the queue, except those that have used up their
 * dispatches, which fail with a reason. */
static void requeue_inflight(qdl_t *q, qdl_conn_t *qc)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t **all, *spent = NULL;
    size_t n, i, keep = 0, n_spent = 0;

    if (qc->n_inflight == 0)
        return;
    n = take_inflight(qc, &all);
    if (!all) {
        cmn_log_error("qdl: out of memory re-dispatching %u samples of node %s", qc->n_inflight,
                      qdl__node_label(nd));
        return;
    }
    for (i = 0; i < n; i++) {
        if (all[i]->dispatches >= q->cfg.max_dispatches) {
            all[i]->next = spent;
            spent = all[i];
            n_spent++;
        } else {
            all[keep++] = all[i];
        }
    }
    if (n_spent) {
        cmn_log_error("qdl: %zu samples fail: each was sent %u times, and every node that held it "
                      "was lost or stuck before completing it",
                      n_spent, q->cfg.max_dispatches);
        nd->st.samples_failed += n_spent;
        qdl__fail_chain(q, spent, CMN_ENONODE);
    }
    nd->st.redispatched += keep;
    qdl__pending_requeue(q, all, keep);
    free(all);
}

/* Everything a closed connection leaves behind: its samples go back to the queue, a pending
 * start or Name() learns the node is gone. Runs once per connection, from on_conn_closed. */
static void conn_cleanup(qdl_conn_t *qc, int reason, const char *why)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;

    if (!qc->was_ready) {
        snprintf(nd->last_why, sizeof(nd->last_why), "%s", why);
        /* Waiting for nodes to come up (wait_ready_ms): the start's deadline decides. */
        if (!q->cfg.wait_ready_ms)
            qdl__start_fail(q, reason < 0 && reason != CMN_ECLOSED ? reason : CMN_ECLOSED,
                            "sut-node %s: %s", nd->address, why);
    }
    if (q->stopping)
        return;
    if (qc->was_ready)
        nd->st.losses++;
    if (qc->n_inflight)
        cmn_log_warn(
            "qdl: node %s (connection %u) lost with %u samples in flight: re-dispatching them",
            qdl__node_label(nd), qc->index, qc->n_inflight);
    requeue_inflight(q, qc);
    qdl__name_node_lost(q, nd);
    q->dispatch_due = 1;
}

void qdl__conn_close(qdl_conn_t *qc, int reason, const char *why)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;

    if (!qc->open || qc->state == QC_CLOSING)
        return;
    if (!q->stopping)
        cmn_log_warn("qdl: node %s (connection %u): %s", qdl__node_label(nd), qc->index, why);
    snprintf(qc->why, sizeof(qc->why), "%s", why);
    qc->was_ready = qc->state == QC_READY;
    qc->state = QC_CLOSING;
    qc->ping_sent_ns = 0;
    if (nd->endpoint) {
        /* No connection to close: its streams are cancelled, their ends dropped; on probation
         * when it comes back (one sample at a time until it completes one). */
        qdl__ep_cancel(qc);
        nd->degraded = 1;
        conn_closed(qc, reason);
        return;
    }
    cmn_conn_close(&qc->c, reason);
}

static void on_retry(uv_timer_t *t)
{
    qdl_conn_t *qc = t->data;
    if (!qc->node->q->stopping && qc->state == QC_IDLE)
        conn_connect(qc);
}

/* Why a connection the node closed (or that closed itself) ended. A plaintext QDL talking to a TLS
 * node sees the connection closed during the handshake: say what is the likely cause. */
static void closed_reason(const qdl_conn_t *qc, int reason, char *why, size_t len)
{
    const qdl_t *q = qc->node->q;
    const char *last = cmn_conn_last_error(&qc->c);

    if (last[0])
        snprintf(why, len, "%s", last);
    else
        snprintf(why, len, "connection closed (%s)",
                 reason == CMN_ECLOSED ? "by the node" : cmn_strerror(reason));
    if (qc->state == QC_HANDSHAKE && !q->tls)
        snprintf(why + strlen(why), len - strlen(why),
                 " during the handshake; if the node uses TLS, give the QDL a CA file "
                 "(tls_ca_file): this QDL speaks plaintext");
}

static void conn_closed(qdl_conn_t *qc, int reason)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;
    char why[700];

    if (qc->state != QC_CLOSING) {
        /* Closed by the peer or by the connection itself, not by us. */
        qc->was_ready = qc->state == QC_READY;
        closed_reason(qc, reason, why, sizeof(why));
        if (!q->stopping)
            cmn_log_warn("qdl: node %s (connection %u): %s", qdl__node_label(nd), qc->index, why);
    } else {
        snprintf(why, sizeof(why), "%s", qc->why);
    }
    qc->open = 0;
    qc->state = QC_IDLE;
    conn_cleanup(qc, reason, why);
    qc->state_ns = cmn_now_ns();
    if (q->stopping)
        return;
    /* Reconnect with exponential backoff; it resets only when the node completes work, so a node
     * that handshakes and then stalls or drops again is retried less and less often. */
    nd->backoff_ms = nd->backoff_ms ? nd->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (nd->backoff_ms > q->cfg.reconnect_max_ms)
        nd->backoff_ms = q->cfg.reconnect_max_ms;
    uv_timer_start(&qc->retry, on_retry, nd->backoff_ms, 0);
}

static void on_conn_closed(cmn_conn_t *c, int reason)
{
    conn_closed(c->data, reason);
}

/* ---- the handshake --------------------------------------------------------------------------- */

static void conn_send_hello(qdl_conn_t *qc)
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

/* Checks a HelloAck against what was offered; 0 or a code with the reason in |eb|. */
static int check_hello_ack(const qdl_t *q, const qdl_node_t *nd, const Nsut__HelloAck *a,
                           const char *name, cmn_errbuf_t *eb)
{
    size_t i;

    if (a->version != CMN_PROTOCOL_VERSION)
        return cmn_errf(eb, CMN_EVERSION, "node chose protocol version %u; this QDL speaks %u",
                        a->version, CMN_PROTOCOL_VERSION);
    if ((int)a->result_codec != CMPR_NONE && (int)a->result_codec != q->cfg.result_codec)
        return cmn_errf(eb, CMN_ECODEC, "node chose result codec %d, which this QDL did not offer",
                        (int)a->result_codec);
    for (i = 0; i < q->n_nodes; i++) {
        const qdl_node_t *o = &q->nodes[i];
        if (o != nd && o->named && strcmp(o->name, name) == 0)
            return cmn_errf(eb, CMN_EDUPNAME,
                            "nodes %s and %s both report the name '%s'; node names must be unique",
                            o->address, nd->address, name);
    }
    return 0;
}

/* What the node is and what it accepts, from its HelloAck. */
static void record_node(qdl_t *q, qdl_node_t *nd, const Nsut__HelloAck *a, const char *name)
{
    size_t i;

    if (nd->named && strcmp(nd->name, name) != 0)
        cmn_log_warn("qdl: node at %s now calls itself '%s' (was '%s')", nd->address, name,
                     nd->name);
    snprintf(nd->name, sizeof(nd->name), "%s", name);
    nd->named = 1;
    nd->sample_codecs = 1u << CMPR_NONE;
    for (i = 0; i < a->n_sample_codecs; i++)
        if (cmn_codec_known((int)a->sample_codecs[i]))
            nd->sample_codecs |= 1u << a->sample_codecs[i];
    nd->result_codec = (int)a->result_codec;
    nd->max_frame = q->cfg.max_frame_size;
    nd->streaming = 0;
    if (!a->caps)
        return;
    nd->streaming = a->caps->streaming;
    if (a->caps->max_inflight_samples)
        nd->window = a->caps->max_inflight_samples;
    if (a->caps->weight > 0)
        nd->weight = a->caps->weight;
    if (a->caps->max_frame_size && a->caps->max_frame_size < nd->max_frame)
        nd->max_frame = a->caps->max_frame_size;
    cmn_sanitize(a->caps->backend, strlen(a->caps->backend), nd->caps_backend,
                 sizeof(nd->caps_backend));
    cmn_sanitize(a->caps->device, strlen(a->caps->device), nd->caps_device,
                 sizeof(nd->caps_device));
}

static void handle_hello_ack(qdl_t *q, qdl_conn_t *qc, const Nsut__HelloAck *a)
{
    qdl_node_t *nd = qc->node;
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_errbuf_t eb;
    char name[256], transport[128];
    int rc;

    if (qc->state != QC_HANDSHAKE) {
        qdl__conn_close(qc, CMN_ESTATE, "a second HelloAck");
        return;
    }
    cmn_sanitize(a->node_name, strlen(a->node_name), name, sizeof(name));
    rc = check_hello_ack(q, nd, a, name, &eb);
    if (rc < 0) {
        qdl__start_fail(q, rc, "%s", eb.msg);
        qdl__conn_close(qc, rc, eb.msg);
        return;
    }
    record_node(q, nd, a, name);
    if (a->not_ready) {
        char reason[300], why[400];
        cmn_sanitize(a->not_ready_reason, strlen(a->not_ready_reason), reason, sizeof(reason));
        nd->not_ready = 1;
        snprintf(why, sizeof(why), "not ready: %s", reason);
        if (!q->cfg.wait_ready_ms)
            qdl__start_fail(q, CMN_ENOTREADY, "sut-node %s (node '%s') is not ready: %s",
                            nd->address, name, reason);
        /* No samples for it; the reconnect's handshake asks again. */
        qdl__conn_close(qc, CMN_ENOTREADY, why);
        return;
    }
    if (nd->not_ready)
        cmn_log_info("qdl: node '%s' at %s is ready now", name, nd->address);
    nd->not_ready = 0;
    nd->last_why[0] = '\0';
    lim.max_frame = q->conn_share;
    if ((uint64_t)META_BASE + (uint64_t)META_PER_RESULT * nd->window < lim.max_meta)
        lim.max_meta = (uint32_t)(META_BASE + META_PER_RESULT * nd->window);
    cmn_conn_set_limits(&qc->c, &lim);
    qc->state = QC_READY;
    qc->state_ns = qc->last_rx_ns = cmn_now_ns();
    qc->draining = 0;
    cmn_conn_describe(&qc->c, transport, sizeof(transport));
    cmn_log_info("qdl: connected to node '%s' at %s (connection %u, transport %s, backend %s, "
                 "device %s)",
                 nd->name, nd->address, qc->index, transport,
                 nd->caps_backend[0] ? nd->caps_backend : "?",
                 nd->caps_device[0] ? nd->caps_device : "?");
    qdl__check_start(q);
    q->dispatch_due = 1;
}

/* ---- frames from the node -------------------------------------------------------------------- */

static void handle_pong(qdl_conn_t *qc, const Nsut__Pong *p)
{
    qdl_node_t *nd = qc->node;
    uint64_t rtt;

    if (!qc->ping_sent_ns || p->seq != qc->ping_seq)
        return;
    rtt = cmn_now_ns() - qc->ping_sent_ns;
    nd->st.rtt_ns_last = rtt;
    if (!nd->st.rtt_ns_min || rtt < nd->st.rtt_ns_min)
        nd->st.rtt_ns_min = rtt;
    qc->ping_sent_ns = 0;
}

static void pong_sent(void *arg, int status)
{
    qdl_conn_t *qc = arg;
    (void)status;
    qc->pong_queued = 0;
}

/* A node's Ping is answered with one Pong, unless one already waits in the write queue (a node
 * that pings and never reads would otherwise make the QDL queue Pongs without end); more than
 * PINGS_PER_S_MAX in a second drop the node. */
static void handle_ping(qdl_conn_t *qc, const Nsut__Ping *m)
{
    uint64_t now = cmn_now_ns();
    Nsut__Pong p = NSUT__PONG__INIT;
    char why[300];

    if (now - qc->pings_window_ns >= 1000000000ull) {
        qc->pings_window_ns = now;
        qc->pings_in_window = 0;
    }
    if (++qc->pings_in_window > PINGS_PER_S_MAX) {
        snprintf(why, sizeof(why),
                 "sent more than %u Pings within one second, over the limit of %u (a node pings "
                 "once per heartbeat): a flood, node dropped",
                 PINGS_PER_S_MAX, PINGS_PER_S_MAX);
        qc->node->st.errors++;
        qdl__conn_close(qc, CMN_EOVERLOAD, why);
        return;
    }
    if (qc->pong_queued)
        return;
    p.seq = m->seq;
    p.sent_ns = m->sent_ns;
    /* Set first: the callback may run inside the send (ucx:// copies small frames at once). */
    qc->pong_queued = 1;
    if (cmn_conn_send(&qc->c, CMN_MSG_PONG, &p.base, NULL, 0, pong_sent, qc) < 0)
        qc->pong_queued = 0;
}

static void handle_error(qdl_t *q, qdl_conn_t *qc, const Nsut__Error *e)
{
    qdl_node_t *nd = qc->node;
    char txt[300], why[700];
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&nsut__error_code__descriptor, (int)e->code);

    snprintf(why, sizeof(why), "node reported %s: %s", v ? v->name : "an error",
             cmn_sanitize(e->message, strlen(e->message), txt, sizeof(txt)));
    nd->st.errors++;
    if (qc->state == QC_HANDSHAKE)
        qdl__start_fail(q, CMN_EPEER, "node %s: %s", nd->address, why);
    qdl__conn_close(qc, CMN_EPEER, why);
}

static void handle_msg(qdl_t *q, qdl_conn_t *qc, const cmn_frame_t *f, const ProtobufCMessage *m)
{
    unsigned type = f->hdr.type;
    qdl_node_t *nd = qc->node;
    cmn_errbuf_t eb;
    char why[700];
    int rc;

    switch (type) {
    case CMN_MSG_HELLO_ACK:
        handle_hello_ack(q, qc, (const Nsut__HelloAck *)m);
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
        handle_pong(qc, (const Nsut__Pong *)m);
        break;
    case CMN_MSG_PING:
        handle_ping(qc, (const Nsut__Ping *)m);
        break;
    case CMN_MSG_STATS:
        break;
    case CMN_MSG_GOODBYE:
        cmn_log_info("qdl: node %s is shutting down (Goodbye)", qdl__node_label(nd));
        qc->draining = 1;
        break;
    case CMN_MSG_ERROR:
        handle_error(q, qc, (const Nsut__Error *)m);
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

/* ---- connecting ------------------------------------------------------------------------------ */

static void on_connected(cmn_conn_t *c, int status)
{
    qdl_conn_t *qc = c->data;
    char why[160];
    int rc;

    if (status < 0) {
        snprintf(why, sizeof(why), "cannot connect: %s", cmn_strerror(status));
        qdl__conn_close(qc, status, why);
        return;
    }
    rc = cmn_conn_start(c);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot start the connection: %s", cmn_strerror(rc));
        qdl__conn_close(qc, rc, why);
        return;
    }
    qc->state = QC_HANDSHAKE;
    qc->state_ns = cmn_now_ns();
    conn_send_hello(qc);
}

static void conn_connect(qdl_conn_t *qc)
{
    static const cmn_conn_callbacks_t cb = {on_frame, on_decode_error, on_conn_closed, NULL};
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    cmn_conn_options_t opt = cmn_conn_options_default();
    char why[160];
    int rc;

    opt.write_thread_min = (size_t)q->cfg.write_thread_min;
    if (nd->connects++ >= q->cfg.connections_per_node)
        nd->st.reconnects++;
    if (nd->endpoint) {
        qdl__ep_connect(qc);
        return;
    }
    rc = cmn_conn_init(&q->loop, &qc->c, &cb, &opt, &pre);
    if (rc < 0) {
        cmn_log_error("qdl: node %s: %s", nd->address, cmn_strerror(rc));
        return;
    }
    qc->c.data = qc;
    qc->open = 1;
    if (q->tls) {
        const char *peer = q->cfg.tls_server_name ? q->cfg.tls_server_name : nd->host;
        if (cmn_conn_use_tls(&qc->c, q->tls, peer) < 0) {
            qdl__conn_close(qc, CMN_ETLS, "cannot start a TLS session");
            return;
        }
    }
    qc->state = QC_CONNECTING;
    qc->state_ns = cmn_now_ns();
    qc->ping_sent_ns = 0;
    qc->pong_queued = 0;
    qc->pings_in_window = 0;
    qc->draining = 0;
    if (nd->transport == CMN_TRANSPORT_UCX)
        rc = cmn_conn_connect_ucx(&qc->c, q->ucx, (struct sockaddr *)&nd->addr, on_connected);
    else
        rc = cmn_conn_connect(&qc->c, (struct sockaddr *)&nd->addr, on_connected);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot connect: %s", cmn_strerror(rc));
        qdl__conn_close(qc, rc, why);
    }
}

void qdl__connect_all(qdl_t *q)
{
    size_t i;

    for (i = 0; i < q->n_conns; i++)
        conn_connect(&q->conns[i]);
}

void qdl__check_start(qdl_t *q)
{
    size_t i;

    if (!q->start_req)
        return;
    for (i = 0; i < q->n_conns; i++)
        if (q->conns[i].state != QC_READY)
            return;
    qdl__req_done(q->start_req, 0);
    q->start_req = NULL;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* "host:port" or "[v6]:port": the host part, for TLS name checks. */
static void host_part(const char *address, char *host, size_t cap)
{
    const char *a = strstr(address, "://") ? strstr(address, "://") + 3 : address;
    const char *end = strrchr(a, ':');
    size_t hl;

    if (*a == '[') {
        a++;
        end = strchr(a, ']');
    }
    hl = end ? (size_t)(end - a) : strlen(a);
    if (hl >= cap)
        hl = cap - 1;
    memcpy(host, a, hl);
    host[hl] = '\0';
}

static int node_init(qdl_t *q, size_t i, cmn_errbuf_t *eb)
{
    qdl_node_t *nd = &q->nodes[i];
    size_t k, cpn = q->cfg.connections_per_node;
    int rc;

    nd->q = q;
    nd->index = (unsigned)i;
    if (strlen(q->cfg.nodes[i]) >= sizeof(nd->address))
        return cmn_errf(eb, CMN_ECONFIG, "node address '%.64s...' is over %zu bytes",
                        q->cfg.nodes[i], sizeof(nd->address) - 1);
    snprintf(nd->address, sizeof(nd->address), "%s", q->cfg.nodes[i]);
    host_part(nd->address, nd->host, sizeof(nd->host));
    nd->window = 65536;
    nd->weight = 1.0;
    if (qdl__ep_address(nd->address))
        rc = qdl__ep_node_init(q, nd, eb);
    else
        rc = cmn_endpoint_parse(q->cfg.nodes[i], &nd->transport, &nd->addr, eb);
    if (rc == 0 && nd->transport == CMN_TRANSPORT_UCX && q->tls)
        rc = cmn_errf(eb, CMN_ECONFIG, "sut-node %s: TLS runs on tcp:// only", nd->address);
    if (rc == 0 && nd->transport == CMN_TRANSPORT_UCX && !q->cfg.ucx_trusted_fabric &&
        !(getenv("NSUT_UCX_TRUSTED_FABRIC") && strcmp(getenv("NSUT_UCX_TRUSTED_FABRIC"), "1") == 0))
        rc = cmn_errf(eb, CMN_ECONFIG, "sut-node %s: %s", nd->address,
                      CMN_UCX_UNTRUSTED_REASON "loadgen-node --ucx-trusted-fabric "
                                               "(qdl_config_t.ucx_trusted_fabric, or "
                                               "NSUT_UCX_TRUSTED_FABRIC=1)");
    if (rc == 0 && nd->transport == CMN_TRANSPORT_UCX && !q->ucx) {
        cmn_ucx_options_t uo = {.busy_poll = q->cfg.ucx_busy_poll};
        rc = cmn_ucx_open(&q->loop, &uo, &q->ucx, eb);
    }
    if (rc < 0)
        return rc;
    for (k = 0; k < i; k++)
        if (strcmp(q->nodes[k].address, nd->address) == 0)
            return cmn_errf(eb, CMN_ECONFIG, "sut-node %s is listed twice", nd->address);
    nd->max_frame = q->cfg.max_frame_size;
    nd->conns = &q->conns[i * cpn];
    for (k = 0; k < cpn; k++) {
        qdl_conn_t *qc = &nd->conns[k];
        qc->node = nd;
        qc->index = (unsigned)k;
        qc->state = QC_IDLE;
        cmn_idmap_init(&qc->inflight);
        uv_timer_init(&q->loop, &qc->retry);
        qc->retry.data = qc;
        qc->retry_open = 1;
    }
    return 0;
}

int qdl__nodes_init(qdl_t *q, cmn_errbuf_t *eb)
{
    size_t i;
    int rc;

    q->n_nodes = q->cfg.n_nodes;
    q->n_conns = q->n_nodes * q->cfg.connections_per_node;
    q->nodes = qdl__calloc(q->n_nodes, sizeof(*q->nodes));
    q->conns = qdl__calloc(q->n_conns, sizeof(*q->conns));
    if (!q->nodes || !q->conns)
        return cmn_errf(eb, -ENOMEM, "out of memory for %zu nodes", q->n_nodes);
    for (i = 0; i < q->n_nodes; i++) {
        rc = node_init(q, i, eb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void qdl__nodes_free(qdl_t *q)
{
    size_t i;

    for (i = 0; q->conns && i < q->n_conns; i++)
        cmn_idmap_free(&q->conns[i].inflight);
    free(q->conns);
    free(q->nodes);
    q->conns = NULL;
    q->nodes = NULL;
}

/* ---- liveness -------------------------------------------------------------------------------- */

static void start_tick(qdl_t *q, uint64_t now)
{
    char missing[1024] = "";
    size_t i, off = 0;

    const uint64_t wait = q->cfg.wait_ready_ms;

    if (!q->start_req ||
        now - q->start_req->start_ns <= (wait ? wait : q->cfg.connect_timeout_ms) * 1000000u)
        return;
    for (i = 0; i < q->n_conns; i++) {
        const qdl_node_t *nd = q->conns[i].node;
        /* Each node once: at its first connection that is not ready. */
        if (q->conns[i].state == QC_READY || off >= sizeof(missing) || strstr(missing, nd->address))
            continue;
        if (wait)
            off +=
                (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s (%s)", off ? "; " : "",
                                 nd->address, nd->last_why[0] ? nd->last_why : "no handshake yet");
        else
            off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s", off ? ", " : "",
                                    nd->address);
    }
    if (wait)
        qdl__start_fail(q, CMN_ENOTREADY, "sut-node not ready within %llu ms: %s",
                        (unsigned long long)wait, missing);
    else
        qdl__start_fail(q, CMN_ETIMEOUT, "no handshake within %llu ms with sut-node %s",
                        (unsigned long long)q->cfg.connect_timeout_ms, missing);
}

static uint64_t progress_deadline_ns(const qdl_t *q, const qdl_node_t *nd)
{
    uint64_t d;

    if (q->cfg.progress_timeout_ms)
        return q->cfg.progress_timeout_ms * 1000000u;
    d = (uint64_t)(nd->streaming ? PROGRESS_MIN_STREAMING_MS : PROGRESS_MIN_MS) * 1000000u;
    if (nd->lat_max_ns * PROGRESS_LATENCY_FACTOR > d)
        d = nd->lat_max_ns * PROGRESS_LATENCY_FACTOR;
    return d;
}

static void send_ping(qdl_conn_t *qc, uint64_t now)
{
    Nsut__Ping p = NSUT__PING__INIT;

    p.seq = ++qc->ping_seq;
    p.sent_ns = now;
    qc->ping_sent_ns = now;
    qc->state_ns = now; /* the next ping is due one interval after this one */
    (void)cmn_conn_send(&qc->c, CMN_MSG_PING, &p.base, NULL, 0, NULL, NULL);
}

static void conn_tick(qdl_t *q, qdl_conn_t *qc, uint64_t now)
{
    const uint64_t ms = 1000000u;
    uint64_t deadline;
    char why[400];

    if ((qc->state == QC_CONNECTING || qc->state == QC_HANDSHAKE) &&
        now - qc->state_ns > q->cfg.connect_timeout_ms * ms) {
        snprintf(why, sizeof(why), "no handshake within %llu ms",
                 (unsigned long long)q->cfg.connect_timeout_ms);
        qdl__conn_close(qc, CMN_ETIMEOUT, why);
        return;
    }
    if (qc->state != QC_READY)
        return;
    /* Stuck: alive (it answers pings) but holding samples without completing any. */
    deadline = progress_deadline_ns(q, qc->node);
    if (qc->n_inflight && now - qc->progress_ns > deadline) {
        snprintf(why, sizeof(why),
                 "holds %u samples and completed none for %llu ms (its progress deadline): node "
                 "marked degraded, its samples go to other nodes",
                 qc->n_inflight, (unsigned long long)(deadline / ms));
        qc->node->degraded = 1;
        qc->node->st.stalls++;
        qdl__conn_close(qc, CMN_ETIMEOUT, why);
        return;
    }
    if (!q->cfg.ping_interval_ms || qc->node->endpoint)
        return; /* an endpoint's liveness is its streams */
    /* Alive means: some frame from the node recently (a Pong, a result, or the heartbeat Ping a
     * node sends when it has nothing else to say). A Pong alone would not do: it can wait behind
     * megabytes of queries in the socket, or behind a node that has paused reading at its
     * in-flight limit. */
    if (now - qc->last_rx_ns > q->cfg.ping_timeout_ms * ms) {
        snprintf(why, sizeof(why),
                 "nothing from the node for %llu ms (no Pong, result or heartbeat): node marked "
                 "down",
                 (unsigned long long)q->cfg.ping_timeout_ms);
        qdl__conn_close(qc, CMN_ETIMEOUT, why);
        return;
    }
    if ((!qc->ping_sent_ns || now - qc->ping_sent_ns > q->cfg.ping_timeout_ms * ms) &&
        now - qc->state_ns > q->cfg.ping_interval_ms * ms)
        send_ping(qc, now);
}

void qdl__nodes_tick(qdl_t *q, uint64_t now)
{
    size_t i;

    start_tick(q, now);
    for (i = 0; i < q->n_conns; i++)
        conn_tick(q, &q->conns[i], now);
}

/* ---- shutdown -------------------------------------------------------------------------------- */

static void fail_inflight_each(void *arg, uint64_t key, void *val)
{
    qdl_srec_t **chain = arg;
    qdl_srec_t *s = val;
    (void)key;
    s->next = *chain;
    *chain = s;
}

void qdl__nodes_fail_inflight(qdl_t *q, int status)
{
    size_t i;

    for (i = 0; i < q->n_conns; i++) {
        qdl_conn_t *qc = &q->conns[i];
        qdl_srec_t *chain = NULL;
        cmn_idmap_each(&qc->inflight, fail_inflight_each, &chain);
        cmn_idmap_free(&qc->inflight);
        cmn_idmap_init(&qc->inflight);
        qc->node->inflight -= qc->n_inflight;
        qc->n_inflight = 0;
        qdl__fail_chain(q, chain, status);
    }
}

void qdl__stop_nodes(qdl_t *q)
{
    Nsut__Goodbye g = NSUT__GOODBYE__INIT;
    size_t i;

    g.reason = (char *)"QDL closing";
    for (i = 0; i < q->n_conns; i++) {
        qdl_conn_t *qc = &q->conns[i];
        if (qc->retry_open) {
            uv_close((uv_handle_t *)&qc->retry, NULL);
            qc->retry_open = 0;
        }
        if (!qc->open)
            continue;
        if (qc->node->endpoint) {
            qc->state = QC_CLOSING; /* its streams end with the pool (qdl__ep_stop) */
            qc->open = 0;
            continue;
        }
        if (qc->state == QC_READY) {
            (void)cmn_conn_send(&qc->c, CMN_MSG_GOODBYE, &g.base, NULL, 0, NULL, NULL);
            qc->state = QC_CLOSING;
            cmn_conn_shutdown(&qc->c, CMN_ECLOSED);
        } else {
            qc->state = QC_CLOSING;
            cmn_conn_close(&qc->c, CMN_ECLOSED);
        }
    }
}

void qdl__flush_nodes(qdl_t *q)
{
    Nsut__Flush f = NSUT__FLUSH__INIT;
    size_t i;

    for (i = 0; i < q->n_conns; i++)
        if (q->conns[i].state == QC_READY && !q->conns[i].node->endpoint)
            (void)cmn_conn_send(&q->conns[i].c, CMN_MSG_FLUSH, &f.base, NULL, 0, NULL, NULL);
}

void qdl__stats_fill(const qdl_t *q, qdl_node_stats_t *out, size_t cap)
{
    size_t i, k;

    for (i = 0; i < q->n_nodes && i < cap; i++) {
        const qdl_node_t *nd = &q->nodes[i];
        out[i] = nd->st;
        snprintf(out[i].name, sizeof(out[i].name), "%s", nd->named ? nd->name : "(unknown)");
        snprintf(out[i].address, sizeof(out[i].address), "%.63s", nd->address);
        out[i].inflight = nd->inflight;
        out[i].up = 0;
        out[i].degraded = nd->degraded;
        for (k = 0; k < q->cfg.connections_per_node; k++)
            out[i].up |= nd->conns[k].state == QC_READY;
    }
}
