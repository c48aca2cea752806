/* Liveness of a node's connections (layer list: README.md, "Map of the files"): the heartbeats
 * (our Pings and their Pongs' round trip, the node's Pings answered and a flood refused), the
 * connect and start deadlines, the progress deadline (a node alive but holding samples without
 * completing any is degraded) and the silence deadline. A failed check closes the connection
 * (qdl__conn_close), which is what sends its samples to other nodes (node.c).
 *
 * Calls one way: node.c and node_frames_out.c below; node_frames_in.c above routes Pings and
 * Pongs here, qdl.c's tick calls qdl__nodes_tick. */
#include "qdl_internal.h"

#include "cmn/clock.h"

#include <stdio.h>
#include <string.h>

/* The progress deadline when none is configured: at least this (longer for a streaming backend,
 * whose generations may run long), or a multiple of the slowest completion the node has shown. */
#define PROGRESS_MIN_MS 10000u
#define PROGRESS_MIN_STREAMING_MS 60000u
#define PROGRESS_LATENCY_FACTOR 4u
/* A node Pings once per heartbeat interval (sut-node: a second by default); more than this many
 * in one second is a flood, a protocol violation that drops it. */
#define PINGS_PER_S_MAX 100u

void qdl__live_pong(qdl_conn_t *qc, const Nsut__Pong *p)
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

/* A node's Ping is answered with one Pong, unless one already waits in the write queue (a node
 * that pings and never reads would otherwise make the QDL queue Pongs without end); more than
 * PINGS_PER_S_MAX in a second drop the node. */
void qdl__live_ping(qdl_conn_t *qc, const Nsut__Ping *m)
{
    uint64_t now = cmn_now_ns();
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
    qdl__send_pong(qc, m);
}

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
        qdl__send_ping(qc, now);
}

void qdl__nodes_tick(qdl_t *q, uint64_t now)
{
    size_t i;

    start_tick(q, now);
    for (i = 0; i < q->n_conns; i++)
        conn_tick(q, &q->conns[i], now);
}
