/* Dispatch: the policy that picks a connection, the size of each Query part, and sending it.
 *
 * A part holds samples of one query only (the QDL never merges queries) and fits the picked
 * node's room: its free window, max_part_samples, PART_BYTES_MAX and the frame size the node
 * advertised. A sample larger than any ready node accepts fails at once, naming both sizes. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <errno.h>
#include <stdlib.h>

/* Bytes of sample payload per Query part: large enough to amortise the frame, small enough that
 * a node starts decoding while the rest of an Offline query is still on the wire. */
#define PART_BYTES_MAX (8u << 20)
/* Past this a part ends as soon as it holds the node's preferred batch: a node receives each
 * large frame straight into a batch buffer of its own (zero-copy), and 2 MiB frames keep those
 * buffers few and warm in cache where 8 MiB ones made the receive copy land in cold memory
 * (bench B2: sut-node 15.6 -> 10.7 us of CPU per 150 KB sample). A node that prefers larger
 * batches still gets them whole, up to PART_BYTES_MAX. */
#define PART_BYTES_PIPE (2u << 20)
/* Frame bytes besides the payload: header and Query fields, and each Sample's fields. */
#define FRAME_OVERHEAD 256u
#define SAMPLE_OVERHEAD 64u

/* A degraded node gets one sample at a time (a probe) until it completes work again. */
static uint64_t conn_window(const qdl_conn_t *qc)
{
    return qc->node->degraded ? 1 : qc->node->window;
}

/* The node's least loaded connection with room for one more sample, or NULL. */
static qdl_conn_t *node_conn(const qdl_t *q, qdl_node_t *nd)
{
    qdl_conn_t *best = NULL;
    size_t k;

    for (k = 0; k < q->cfg.connections_per_node; k++) {
        qdl_conn_t *c = &nd->conns[k];
        if (!qdl__conn_usable(c) || c->n_inflight >= conn_window(c))
            continue;
        if (!best || c->n_inflight < best->n_inflight)
            best = c;
    }
    return best;
}

qdl_conn_t *qdl__pick(qdl_t *q, unsigned codecs, uint64_t min_frame)
{
    qdl_conn_t *best = NULL;
    double best_score = 0;
    size_t i, start;

    /* Round robin starts after the last node used; the other policies start at a rotating node
     * too, so ties (e.g. every node idle at a low rate) are shared out evenly. */
    start = (size_t)(q->rr % q->n_nodes);
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[(start + i) % q->n_nodes];
        qdl_conn_t *nc;
        double score;

        if ((codecs & ~nd->sample_codecs) || nd->max_frame < min_frame)
            continue;
        nc = node_conn(q, nd);
        if (!nc)
            continue;
        if (q->cfg.policy == QDL_POLICY_ROUND_ROBIN && !nd->degraded) {
            q->rr = (start + i + 1) % q->n_nodes;
            return nc;
        }
        score = q->cfg.policy == QDL_POLICY_LEAST_TOKENS ? (double)nd->tokens_out
                                                         : (double)nd->inflight;
        if (q->cfg.policy == QDL_POLICY_WEIGHTED)
            score /= nd->weight > 0 ? nd->weight : 1.0;
        if (nd->degraded)
            score += 1e18; /* only when no healthy node has room */
        if (!best || score < best_score) {
            best = nc;
            best_score = score;
            /* Nothing beats an idle healthy node and ties go to the first in rotation order:
             * stop here, so a query costs O(1) and not a scan of every node (64 nodes at a
             * low rate per node are mostly idle). */
            if (score == 0)
                break;
        }
    }
    if (best)
        q->rr = best->node->index + 1;
    return best;
}

size_t qdl__part_size(const qdl_t *q, const qdl_conn_t *qc, const qdl_pq_t *pq, uint64_t *bytes)
{
    const qdl_srec_t *s;
    uint64_t room = conn_window(qc) > qc->n_inflight ? conn_window(qc) - qc->n_inflight : 1;
    uint64_t frame = qc->node->max_frame, b = 0;
    size_t n = 0;

    if (qc->node->endpoint) {
        *bytes = pq->head->s.size; /* one stream per sample */
        return 1;
    }
    for (s = pq->head; s && n < q->cfg.max_part_samples && n < room; s = s->next) {
        uint64_t next = b + s->s.size;
        if (n > 0 &&
            (next > PART_BYTES_MAX || (next > PART_BYTES_PIPE && n >= qc->node->batch_pref) ||
             next + FRAME_OVERHEAD + SAMPLE_OVERHEAD * (n + 1) > frame))
            break;
        b = next;
        n++;
    }
    *bytes = b;
    return n;
}

/* The codecs of the samples a part from |pq| may hold (a node must accept them all). */
static unsigned part_codecs(const qdl_t *q, const qdl_pq_t *pq)
{
    const qdl_srec_t *s;
    unsigned codecs = 0;
    size_t n = 0;

    /* One codec in the whole query (the usual case): every sample left has it, no walk. The walk
     * per part was 8 % of loadgen-node's CPU in endpoint mode, where a part is one sample. */
    if ((pq->codecs & (pq->codecs - 1u)) == 0)
        return pq->codecs;
    for (s = pq->head; s && n < q->cfg.max_part_samples; s = s->next, n++)
        codecs |= 1u << s->s.codec;
    return codecs;
}

/* Fails the head sample of |pq| when it is larger than every ready node accepts; returns 1 if so.
 */
static int head_too_big(qdl_t *q, qdl_pq_t *pq)
{
    uint64_t need = pq->head->s.size + FRAME_OVERHEAD + SAMPLE_OVERHEAD, most = 0, dropped = 0;
    const qdl_node_t *biggest = NULL;
    size_t i;

    for (i = 0; i < q->n_conns; i++) {
        const qdl_conn_t *qc = &q->conns[i];
        if (qc->state == QC_READY && qc->node->max_frame >= most) {
            most = qc->node->max_frame;
            biggest = qc->node;
        }
    }
    if (!biggest || need <= most)
        return 0;
    if (qdl__ratelog(&q->log_big, cmn_now_ns(), &dropped))
        cmn_log_error("qdl: a sample of %zu bytes needs a %llu-byte frame; node %s accepts frames "
                      "of at most %llu bytes: sample failed%s",
                      pq->head->s.size, (unsigned long long)need, qdl__node_label(biggest),
                      (unsigned long long)most, qdl__more_like_this(dropped));
    qdl__fail_chain(q, qdl__pending_take(q, pq, 1), CMN_ETOOBIG);
    return 1;
}

/* The output tokens a sample sent to |nd| is expected to bring: the mean of what its results
 * brought so far, at first the endpoint max tokens (QDL_POLICY_LEAST_TOKENS). */
static uint64_t expected_out(const qdl_t *q, const qdl_node_t *nd)
{
    if (nd->out_results)
        return nd->out_tokens / nd->out_results;
    return q->cfg.endpoint_max_tokens ? q->cfg.endpoint_max_tokens : 1024;
}

/* A Query frame holding the first |n| samples of |pq| (wire ids assigned), queued on |qc|. */
static int send_frame(qdl_t *q, qdl_conn_t *qc, qdl_pq_t *pq, size_t n)
{
    Nsut__Query msg = NSUT__QUERY__INIT;
    Nsut__Sample *sm;
    Nsut__Sample **sp;
    struct iovec *iov;
    qdl_srec_t *s = pq->head;
    size_t i;
    int rc;

    sm = cmn_arena_alloc(&q->arena, n * sizeof(*sm));
    sp = cmn_arena_alloc(&q->arena, n * sizeof(*sp));
    iov = cmn_arena_alloc(&q->arena, n * sizeof(*iov));
    if (!sm || !sp || !iov) {
        cmn_arena_reset(&q->arena);
        return -ENOMEM;
    }
    for (i = 0; i < n; i++, s = s->next) {
        nsut__sample__init(&sm[i]);
        s->wire_id = q->next_wire_id++;
        sm[i].id = s->wire_id;
        sm[i].codec = (Nsut__Codec)s->s.codec;
        sm[i].raw_size = s->s.raw_size;
        sm[i].wire_size = s->s.size;
        sp[i] = &sm[i];
        /* Straight from the caller's (QSL) memory: no copy in user space. */
        iov[i].iov_base = (void *)s->s.data;
        iov[i].iov_len = s->s.size;
    }
    msg.query_id = pq->query_id;
    msg.n_samples = n;
    msg.samples = sp;
    msg.part = pq->part;
    /* Parts are cut on the fly, so the count is known only when the first part carries the
     * whole query ("part 0 of 1"); otherwise every part says parts 0 (unknown). */
    msg.parts = pq->part == 0 && n == pq->n ? 1 : 0;
    rc = cmn_conn_send(&qc->c, CMN_MSG_QUERY, &msg.base, iov, n, NULL, NULL);
    cmn_arena_reset(&q->arena);
    if (rc < 0)
        return rc;
    if (qdl__is_poller(q) && !q->in_turn)
        qdl__note_unsent(q, qc, pq->head->wire_id, n); /* written, stamped in the next turn */
    return 0;
}

/* Sends the first |n| samples of |pq| on |qc|: one Query part to a sut-node, one stream each to
 * an endpoint. */
static int send_part(qdl_t *q, qdl_conn_t *qc, qdl_pq_t *pq, size_t n, uint64_t bytes)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t *s;
    uint64_t now, out = expected_out(q, nd);
    int rc;

    rc = nd->endpoint ? qdl__ep_send(q, qc, pq->head) : send_frame(q, qc, pq, n);
    if (rc < 0)
        return rc;
    now = cmn_now_ns(); /* the part is on the writer (or the stream submitted): sent_ns */
    if (qc->n_inflight == 0)
        qc->progress_ns = now; /* the progress deadline runs from here */
    for (s = qdl__pending_take(q, pq, n); s; s = s->next) {
        s->conn = qc;
        s->sent_ns = now;
        s->dispatches++;
        s->cost = s->s.size / 4 + out;
        nd->tokens_out += s->cost;
        /* Wire ids are unique in the QDL, so this cannot collide. */
        cmn_idmap_put(&qc->inflight, s->wire_id, s);
    }
    qc->n_inflight += (uint32_t)n;
    nd->inflight += (uint32_t)n;
    nd->st.samples_sent += n;
    nd->st.bytes_out += bytes;
    return 0;
}

/* The head of |pq| cannot go to an endpoint (not int32 token IDs): it fails with a line. */
static void not_tokens(qdl_t *q, qdl_pq_t *pq)
{
    uint64_t dropped = 0;

    if (qdl__ratelog(&q->log_big, cmn_now_ns(), &dropped))
        cmn_log_error("qdl: a sample of %zu bytes (codec %d) is not a whole number of int32 "
                      "token IDs, all an endpoint node takes: sample failed%s",
                      pq->head->s.size, pq->head->s.codec, qdl__more_like_this(dropped));
    qdl__fail_chain(q, qdl__pending_take(q, pq, 1), CMN_EFORMAT);
}

void qdl__dispatch(qdl_t *q)
{
    qdl_pq_t *pq;

    while ((pq = qdl__pending_head(q)) != NULL) {
        qdl_conn_t *qc;
        uint64_t bytes;
        size_t n;
        int rc;

        /* A node with room, whose frame limit fits at least the head sample. Only when there is
         * none can the head be too big for every ready node: that check scans every connection,
         * so it runs then, not once per part. */
        qc = qdl__pick(q, part_codecs(q, pq), pq->head->s.size + FRAME_OVERHEAD + SAMPLE_OVERHEAD);
        if (!qc) {
            if (head_too_big(q, pq))
                continue;
            return; /* no room anywhere: a result or a handshake makes dispatch due again */
        }
        if (qc->node->endpoint && !qdl__ep_sample_ok(pq->head)) {
            not_tokens(q, pq);
            continue;
        }
        n = qdl__part_size(q, qc, pq, &bytes);
        rc = send_part(q, qc, pq, n, bytes);
        if (rc < 0)
            qdl__conn_close(qc, rc, "cannot queue a Query frame");
    }
}
