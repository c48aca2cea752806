/* Nodes' connections (layer list: README.md, "Map of the files"): set-up, connect, close and what
 * a lost connection leaves behind, reconnect with backoff, shutdown and the per-node stats.
 *
 * When a connection dies, its in-flight samples go back to the pending queue and the connection
 * is closed first, so a late result from the old node can never arrive. Nothing here dispatches:
 * events that may let samples move set q->dispatch_due.
 *
 * This is the bottom of the node files: it calls only node_frames_out.c (and the layers under
 * it). The layers above reach it by name; it reaches them only through the callbacks qdl.c hands
 * to qdl__nodes_init (frames in, and the session's start on connect; an endpoint node's set-up,
 * "connect" and cancel, endpoint.c's). */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100u

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
        q->ep_hooks->cancel(qc);
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
    if (!nd->endpoint) { /* the node's write counters keep what this connection wrote */
        nd->st.batches_out += cmn_conn_stats(&qc->c)->batches_out;
        nd->st.batches_write_thread += cmn_conn_stats(&qc->c)->batches_thread;
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

/* ---- connecting ------------------------------------------------------------------------------ */

static void conn_connect(qdl_conn_t *qc)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;
    const cmn_conn_callbacks_t cb = {q->node_events->on_frame, q->node_events->on_decode_error,
                                     on_conn_closed, NULL};
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    cmn_conn_options_t opt = cmn_conn_options_default();
    char why[160];
    int rc;

    opt.write_thread_min = (size_t)q->cfg.write_thread_min;
    if (q->cfg.lend_write_thread && !opt.write_thread_min)
        opt.write_thread_min = SIZE_MAX; /* a write thread, idle until the loop is lent */
    if (q->lend_writes)
        opt.write_thread_min = 1;
    if (nd->connects++ >= q->cfg.connections_per_node)
        nd->st.reconnects++;
    if (nd->endpoint) {
        q->ep_hooks->connect(qc);
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
        rc = cmn_conn_connect_ucx(&qc->c, q->ucx, (struct sockaddr *)&nd->addr,
                                  q->node_events->on_connected);
    else
        rc = cmn_conn_connect(&qc->c, (struct sockaddr *)&nd->addr, q->node_events->on_connected);
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
    if (q->ep_hooks->is_address(nd->address))
        rc = q->ep_hooks->node_init(q, nd, eb);
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

int qdl__nodes_init(qdl_t *q, const qdl_node_events_t *events, const qdl_ep_hooks_t *ep,
                    cmn_errbuf_t *eb)
{
    size_t i;
    int rc;

    q->node_events = events;
    q->ep_hooks = ep;
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
    size_t i;

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
            qdl__send_goodbye(qc);
            qc->state = QC_CLOSING;
            cmn_conn_shutdown(&qc->c, CMN_ECLOSED);
        } else {
            qc->state = QC_CLOSING;
            cmn_conn_close(&qc->c, CMN_ECLOSED);
        }
    }
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
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            const qdl_conn_t *qc = &nd->conns[k];
            out[i].up |= qc->state == QC_READY;
            if (qc->open && !nd->endpoint) {
                out[i].batches_out += cmn_conn_stats(&qc->c)->batches_out;
                out[i].batches_write_thread += cmn_conn_stats(&qc->c)->batches_thread;
            }
        }
    }
}

void qdl__conns_lend_writes(qdl_t *q, int on)
{
    size_t i, k, base = q->cfg.write_thread_min ? (size_t)q->cfg.write_thread_min : SIZE_MAX;

    q->lend_writes = on;
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];

        for (k = 0; k < q->cfg.connections_per_node && !nd->endpoint; k++) {
            if (nd->conns[k].open)
                cmn_conn_set_write_thread_min(&nd->conns[k].c, on ? 1 : base);
        }
    }
}
