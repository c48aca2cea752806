/* The session protocol with a node (layer list: README.md, "Map of the files"): on connect the
 * Hello, then the HelloAck checked (version, codecs, a unique name) and recorded (what the node
 * accepts), readiness (a node whose engine is not ready gets no samples), the node's Error, and
 * qdl_create's wait for every connection. The Name() round trip is name.c's.
 *
 * Calls one way: node.c and node_frames_out.c below; node_frames_in.c above routes the node's
 * frames here. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <stdio.h>
#include <string.h>

/* The metadata of one Result is under 80 bytes: a Response's metadata limit follows the
 * connection's in-flight window, so a larger one is refused by its header. */
#define META_PER_RESULT 80u
#define META_BASE 4096u

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
    nd->batch_pref = 1;
    if (!a->caps)
        return;
    if (a->caps->preferred_batch > 1)
        nd->batch_pref = a->caps->preferred_batch;
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

void qdl__session_hello_ack(qdl_t *q, qdl_conn_t *qc, const Nsut__HelloAck *a)
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

void qdl__session_error(qdl_t *q, qdl_conn_t *qc, const Nsut__Error *e)
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

void qdl__session_connected(cmn_conn_t *c, int status)
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
    qdl__send_hello(qc);
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
