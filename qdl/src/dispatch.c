/* The QDL's network side (loop thread only): connections and their handshake, the dispatch
 * policies, splitting an Offline query into parts, results back to the caller, liveness and
 * faults.
 *
 * Exactly once: a sample record is either on the pending list or in one connection's in-flight
 * map. A result is accepted only if its id is in the map of the connection it arrived on, and is
 * removed from it, so a duplicate or stray result is dropped. When a connection dies its map is
 * emptied back onto the pending list (re-dispatch) and the connection is closed, so a late result
 * from the old node can never arrive. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of sample payload per Query part: large enough to amortise the frame, small enough that
 * a node starts decoding while the rest of an Offline query is still on the wire. */
#define PART_BYTES_MAX (8u << 20)
#define BACKOFF_MIN_MS 100u

static void conn_connect(qdl_conn_t *qc);
static void conn_cleanup(qdl_conn_t *qc, int reason, const char *why);

static const char *node_label(const qdl_node_t *nd)
{
    return nd->named ? nd->name : nd->address;
}

static int conn_usable(const qdl_conn_t *qc)
{
    return qc->state == QC_READY && !qc->draining;
}

int qdl__ready_nodes(const qdl_t *q)
{
    size_t i;
    unsigned k;
    int n = 0;

    for (i = 0; i < q->n_nodes; i++) {
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            if (conn_usable(&q->nodes[i].conns[k])) {
                n++;
                break;
            }
        }
    }
    return n;
}

/* ---- completion helpers ---------------------------------------------------------------------- */

static int grow_resp(qdl_t *q, size_t n)
{
    qdl_response_t *r;
    size_t cap;

    if (n <= q->resp_cap)
        return 0;
    cap = q->resp_cap ? q->resp_cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    r = realloc(q->resp, cap * sizeof(*r));
    if (!r)
        return UV_ENOMEM;
    q->resp = r;
    q->resp_cap = cap;
    return 0;
}

/* Completes a chain of sample records with |status| (failures). */
static void fail_chain(qdl_t *q, qdl_srec_t *s, int status)
{
    qdl_srec_t *next;
    size_t n = 0, i;

    for (next = s; next; next = next->next)
        n++;
    if (n == 0)
        return;
    if (grow_resp(q, n) < 0) {
        /* Without memory for the array, complete one at a time. */
        qdl_response_t one;
        for (; s; s = next) {
            next = s->next;
            memset(&one, 0, sizeof(one));
            one.response_id = s->s.response_id;
            one.status = status;
            q->cfg.on_complete(q->cfg.user, &one, 1);
            qdl__srec_done(q, s);
        }
        return;
    }
    for (i = 0, next = s; next; next = next->next, i++) {
        memset(&q->resp[i], 0, sizeof(q->resp[i]));
        q->resp[i].response_id = next->s.response_id;
        q->resp[i].status = status;
    }
    q->cfg.on_complete(q->cfg.user, q->resp, n);
    for (; s; s = next) {
        next = s->next;
        qdl__srec_done(q, s);
    }
}

/* ---- the pending list ------------------------------------------------------------------------ */

static qdl_pq_t *pq_new(qdl_t *q, uint64_t query_id)
{
    qdl_pq_t *pq = calloc(1, sizeof(*pq));

    (void)q;
    if (pq)
        pq->query_id = query_id;
    return pq;
}

static void pq_append(qdl_pq_t *pq, qdl_srec_t *s)
{
    s->next = NULL;
    s->conn = NULL;
    if (pq->tail)
        pq->tail->next = s;
    else
        pq->head = s;
    pq->tail = s;
    pq->n++;
}

/* Parts are cut on the fly (by samples, bytes, the node's frame limit and its free window), so
 * the count is known only when the first part carries the whole query: "part 0 of 1"; otherwise
 * every part says parts 0 (unknown). */
static void pq_set_parts(qdl_t *q, qdl_pq_t *pq)
{
    (void)q;
    pq->part = 0;
}

static void pending_push(qdl_t *q, qdl_pq_t *pq, int front)
{
    uint64_t now = cmn_now_ns();
    qdl_srec_t *s;

    for (s = pq->head; s; s = s->next)
        s->queued_ns = now;
    q->pending_samples += pq->n;
    if (front) {
        pq->next = q->pending_head;
        q->pending_head = pq;
        if (!q->pending_tail)
            q->pending_tail = pq;
    } else {
        pq->next = NULL;
        if (q->pending_tail)
            q->pending_tail->next = pq;
        else
            q->pending_head = pq;
        q->pending_tail = pq;
    }
}

void qdl__enqueue(qdl_t *q, qdl_srec_t *samples, size_t n)
{
    qdl_pq_t *pq = pq_new(q, q->next_query_id++);
    size_t i;

    if (!pq) {
        qdl_srec_t *head = NULL;
        for (i = n; i-- > 0;) {
            samples[i].next = head;
            head = &samples[i];
        }
        cmn_log_error("qdl: out of memory queueing a query of %zu samples", n);
        fail_chain(q, head, UV_ENOMEM);
        return;
    }
    for (i = 0; i < n; i++)
        pq_append(pq, &samples[i]);
    pq_set_parts(q, pq);
    pending_push(q, pq, 0);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/* The connection the policy picks for a part of |n| samples with codec mask |codecs|, or NULL. */
static qdl_conn_t *pick(qdl_t *q, size_t n, unsigned codecs)
{
    qdl_conn_t *best = NULL;
    double best_score = 0;
    size_t i, start = 0;
    unsigned k;

    /* Round robin starts after the last node used; the other policies start at a rotating
     * node too, so ties (e.g. every node idle at a low rate) are shared out evenly. */
    start = (size_t)(q->rr % q->n_nodes);
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[(start + i) % q->n_nodes];
        qdl_conn_t *nc = NULL;
        double score;

        if (codecs & ~nd->sample_codecs)
            continue;
        /* The node's least loaded connection with room. */
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *c = &nd->conns[k];
            if (!conn_usable(c))
                continue;
            if (c->n_inflight && c->n_inflight + n > nd->window)
                continue;
            if (!nc || c->n_inflight < nc->n_inflight)
                nc = c;
        }
        if (!nc)
            continue;
        if (q->cfg.policy == QDL_POLICY_ROUND_ROBIN) {
            q->rr = (start + i + 1) % q->n_nodes;
            return nc;
        }
        score = (double)nd->inflight;
        if (q->cfg.policy == QDL_POLICY_WEIGHTED)
            score /= nd->weight > 0 ? nd->weight : 1.0;
        if (!best || score < best_score) {
            best = nc;
            best_score = score;
        }
    }
    if (best)
        q->rr = best->node->index + 1;
    return best;
}

/* Sends up to one part of the head query on |qc|. The samples of a part all belong to one query:
 * the QDL never merges queries. */
static int send_part(qdl_t *q, qdl_conn_t *qc, qdl_pq_t *pq, size_t n)
{
    qdl_node_t *nd = qc->node;
    Nsut__Query msg = NSUT__QUERY__INIT;
    Nsut__Sample *sm;
    Nsut__Sample **sp;
    struct iovec *iov;
    qdl_srec_t *s = pq->head;
    uint64_t bytes = 0;
    size_t i;
    int rc;

    sm = cmn_arena_alloc(&q->arena, n * sizeof(*sm));
    sp = cmn_arena_alloc(&q->arena, n * sizeof(*sp));
    iov = cmn_arena_alloc(&q->arena, n * sizeof(*iov));
    if (!sm || !sp || !iov) {
        cmn_arena_reset(&q->arena);
        return UV_ENOMEM;
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
        bytes += s->s.size;
    }
    msg.query_id = pq->query_id;
    msg.n_samples = n;
    msg.samples = sp;
    msg.part = pq->part;
    msg.parts = pq->part == 0 && n == pq->n ? 1 : 0;
    rc = cmn_conn_send(&qc->c, CMN_MSG_QUERY, &msg.base, iov, n, NULL, NULL);
    cmn_arena_reset(&q->arena);
    if (rc < 0)
        return rc;
    for (i = 0; i < n; i++) {
        s = pq->head;
        pq->head = s->next;
        s->next = NULL;
        s->conn = qc;
        /* Wire ids are unique in the QDL, so this cannot collide. */
        cmn_idmap_put(&qc->inflight, s->wire_id, s);
    }
    if (!pq->head)
        pq->tail = NULL;
    pq->n -= n;
    pq->part++;
    q->pending_samples -= n;
    qc->n_inflight += (uint32_t)n;
    nd->inflight += (uint32_t)n;
    nd->st.samples_sent += n;
    nd->st.bytes_out += bytes;
    return 0;
}

void qdl__dispatch(qdl_t *q)
{
    while (q->pending_head) {
        qdl_pq_t *pq = q->pending_head;
        qdl_srec_t *s = pq->head;
        uint64_t bytes = 0;
        unsigned codecs = 0;
        size_t n = 0;
        qdl_conn_t *qc;
        int rc;

        if (!s) {
            q->pending_head = pq->next;
            if (!q->pending_head)
                q->pending_tail = NULL;
            free(pq);
            continue;
        }
        /* The next part: at most max_part_samples and PART_BYTES_MAX (always at least one). */
        for (; s && n < q->cfg.max_part_samples; s = s->next) {
            if (n > 0 && bytes + s->s.size > PART_BYTES_MAX)
                break;
            bytes += s->s.size;
            codecs |= 1u << s->s.codec;
            n++;
        }
        /* The connection with room for at least one, by policy; then a part that fits its room,
         * so a node's window bounds what it holds and faster nodes come back for more. */
        qc = pick(q, 1, codecs);
        if (!qc)
            return; /* no room anywhere: results will call us again */
        {
            uint64_t room =
                qc->node->window > qc->n_inflight ? qc->node->window - qc->n_inflight : 1;
            if (n > room) {
                size_t k;
                n = (size_t)room;
                for (k = 0, bytes = 0, s = pq->head; k < n; k++, s = s->next)
                    bytes += s->s.size;
            }
        }
        if (bytes + 64u * n > qc->node->max_frame && n > 1) {
            /* Over the node's frame limit: send fewer (the rest stays at the head). */
            n = n / 2;
            if (n == 0)
                n = 1;
        }
        rc = send_part(q, qc, pq, n);
        if (rc < 0) {
            qdl__conn_close(qc, rc, "cannot queue a Query frame");
            continue;
        }
    }
}

void qdl__flush_nodes(qdl_t *q)
{
    Nsut__Flush f = NSUT__FLUSH__INIT;
    size_t i;
    unsigned k;

    for (i = 0; i < q->n_nodes; i++)
        for (k = 0; k < q->cfg.connections_per_node; k++)
            if (q->nodes[i].conns[k].state == QC_READY)
                (void)cmn_conn_send(&q->nodes[i].conns[k].c, CMN_MSG_FLUSH, &f.base, NULL, 0, NULL,
                                    NULL);
}

/* ---- results --------------------------------------------------------------------------------- */

static int cmp_query(const void *a, const void *b)
{
    const qdl_srec_t *x = *(const qdl_srec_t *const *)a, *y = *(const qdl_srec_t *const *)b;
    if (x->query_id != y->query_id)
        return x->query_id < y->query_id ? -1 : 1;
    return x->wire_id < y->wire_id ? -1 : x->wire_id > y->wire_id;
}

static void collect_srec(void *arg, uint64_t key, void *val)
{
    qdl_srec_t ***cur = arg;
    (void)key;
    **cur = val;
    (*cur)++;
}

/* Puts every sample in flight on |qc| back at the front of the pending list, grouped by the query
 * it came from (so a re-dispatched part still holds samples of one query only). */
static void requeue_inflight(qdl_t *q, qdl_conn_t *qc)
{
    qdl_node_t *nd = qc->node;
    size_t n = qc->inflight.count, i;
    qdl_srec_t **all, **cur;
    qdl_pq_t *pq = NULL, *first = NULL, *last = NULL;

    if (n == 0)
        return;
    all = malloc(n * sizeof(*all));
    if (!all) {
        cmn_log_error("qdl: out of memory re-dispatching %zu samples of node %s", n,
                      node_label(nd));
        return;
    }
    cur = all;
    cmn_idmap_each(&qc->inflight, collect_srec, &cur);
    qsort(all, n, sizeof(*all), cmp_query);
    cmn_idmap_free(&qc->inflight);
    cmn_idmap_init(&qc->inflight);
    for (i = 0; i < n; i++) {
        if (!pq || pq->query_id != all[i]->query_id) {
            if (pq)
                pq_set_parts(q, pq);
            pq = pq_new(q, all[i]->query_id);
            if (!pq) {
                qdl_srec_t *chain = NULL;
                size_t k;
                for (k = n; k-- > i;) {
                    all[k]->next = chain;
                    chain = all[k];
                }
                fail_chain(q, chain, UV_ENOMEM);
                break;
            }
            if (last)
                last->next = pq;
            else
                first = pq;
            last = pq;
        }
        pq_append(pq, all[i]);
    }
    if (pq)
        pq_set_parts(q, pq);
    /* To the front of the queue, in order: these samples have waited longest. */
    if (first) {
        uint64_t now = cmn_now_ns();
        qdl_pq_t *it;
        for (it = first; it; it = it->next) {
            qdl_srec_t *sr;
            for (sr = it->head; sr; sr = sr->next)
                sr->queued_ns = now;
            q->pending_samples += it->n;
        }
        last->next = q->pending_head;
        q->pending_head = first;
        if (!q->pending_tail)
            q->pending_tail = last;
    }
    nd->st.redispatched += n;
    nd->inflight -= qc->n_inflight;
    qc->n_inflight = 0;
    free(all);
}

static void handle_results(qdl_t *q, qdl_conn_t *qc, int first_token, Nsut__Result **res, size_t nr,
                           const uint8_t *payload)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t *done = NULL, **tail = &done;
    uint64_t raw_total = 0, max_raw = q->cfg.max_frame_size;
    const uint8_t *p = payload;
    size_t i, n = 0, off = 0;
    cmn_errbuf_t eb;

    for (i = 0; i < nr; i++)
        raw_total += res[i]->raw_size;
    if (raw_total > q->scratch_cap) {
        uint8_t *ns = realloc(q->scratch, raw_total);
        if (!ns) {
            qdl__conn_close(qc, UV_ENOMEM, "out of memory for results");
            return;
        }
        q->scratch = ns;
        q->scratch_cap = raw_total;
    }
    if (grow_resp(q, nr) < 0) {
        qdl__conn_close(qc, UV_ENOMEM, "out of memory for results");
        return;
    }
    for (i = 0; i < nr; i++) {
        const Nsut__Result *r = res[i];
        const uint8_t *wire = p;
        qdl_srec_t *s;
        qdl_response_t *out;

        p += r->wire_size;
        s = first_token ? cmn_idmap_get(&qc->inflight, r->id) : cmn_idmap_del(&qc->inflight, r->id);
        if (!s) {
            nd->st.errors++;
            cmn_log_warn("qdl: node %s sent a %s for id %llu, which is not outstanding on that "
                         "connection: dropped",
                         node_label(nd), first_token ? "first token" : "result",
                         (unsigned long long)r->id);
            continue;
        }
        if (!first_token) {
            qc->n_inflight--;
            nd->inflight--;
        }
        if (!first_token && r->status == NSUT__STATUS__STATUS_REJECTED) {
            /* The node is stopping: the sample goes elsewhere. */
            qdl_pq_t *pq = pq_new(q, s->query_id);
            qc->draining = 1;
            nd->st.redispatched++;
            if (!pq) {
                s->next = NULL;
                fail_chain(q, s, UV_ENOMEM);
                continue;
            }
            pq_append(pq, s);
            pq_set_parts(q, pq);
            pending_push(q, pq, 1);
            continue;
        }
        out = &q->resp[n++];
        memset(out, 0, sizeof(*out));
        out->response_id = s->s.response_id;
        out->n_tokens = r->n_tokens;
        if (r->status != NSUT__STATUS__STATUS_OK) {
            out->status = CMN_EBACKEND;
            nd->st.samples_failed++;
        } else {
            uint8_t *dst = q->scratch + off;
            int rc = cmpr_check_sizes((int)r->codec, r->raw_size, r->wire_size, max_raw, &eb);
            /* Decoding a compressed result is the one processing the QDL may do (timed). */
            if (rc == 0)
                rc = cmpr_decompress((int)r->codec, wire, (size_t)r->wire_size, dst,
                                     (size_t)r->raw_size);
            if (rc < 0) {
                out->status = rc;
                nd->st.samples_failed++;
                cmn_log_error(
                    "qdl: node %s: result for id %llu does not decode (%s): sample failed",
                    node_label(nd), (unsigned long long)r->id, cmn_strerror(rc));
            } else {
                out->data = dst;
                out->size = (size_t)r->raw_size;
                off += (size_t)r->raw_size;
            }
        }
        if (!first_token) {
            nd->st.samples_completed++;
            *tail = s;
            s->next = NULL;
            tail = &s->next;
        }
    }
    if (n) {
        if (first_token) {
            if (q->cfg.on_first_token)
                q->cfg.on_first_token(q->cfg.user, q->resp, n);
        } else {
            q->cfg.on_complete(q->cfg.user, q->resp, n);
        }
    }
    while (done) {
        qdl_srec_t *next = done->next;
        qdl__srec_done(q, done);
        done = next;
    }
    /* Completions freed room on this connection: send what waits. */
    if (!first_token && q->pending_head)
        qdl__dispatch(q);
}

/* ---- name ------------------------------------------------------------------------------------ */

int qdl__name_start(qdl_t *q, qdl_req_t *r)
{
    Nsut__NameRequest nr = NSUT__NAME_REQUEST__INIT;
    size_t i, asked = 0;
    unsigned k;

    r->start_ns = cmn_now_ns();
    r->request_id = ++q->name_seq;
    nr.request_id = r->request_id;
    q->name_req = r;
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        nd->name_pending = 0;
        nd->name_reply[0] = '\0';
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *qc = &nd->conns[k];
            if (qc->state != QC_READY)
                continue;
            if (cmn_conn_send(&qc->c, CMN_MSG_NAME_REQUEST, &nr.base, NULL, 0, NULL, NULL) == 0) {
                nd->name_pending = 1;
                asked++;
                break;
            }
        }
    }
    if (asked == 0) {
        q->name_req = NULL;
        snprintf(r->err ? r->err : (char[1]){0}, r->err ? r->errlen : 1,
                 "Name(): no sut-node is reachable");
        r->rc = CMN_ENONODE;
        return CMN_ENONODE;
    }
    return 0;
}

void qdl__name_finish(qdl_t *q, int rc, const char *why)
{
    qdl_req_t *r = q->name_req;
    size_t i, j, off, answered = 0;
    char down[512] = "";
    size_t doff = 0;

    if (!r)
        return;
    q->name_req = NULL;
    r->duration_ns = cmn_now_ns() - r->start_ns;
    if (rc == 0) {
        for (i = 0; i < q->n_nodes && rc == 0; i++) {
            if (!q->nodes[i].name_reply[0])
                continue;
            for (j = i + 1; j < q->n_nodes; j++) {
                if (q->nodes[j].name_reply[0] &&
                    strcmp(q->nodes[i].name_reply, q->nodes[j].name_reply) == 0) {
                    if (r->err)
                        snprintf(r->err, r->errlen,
                                 "Name(): nodes %s and %s both report the name '%s'; node names "
                                 "must be unique",
                                 q->nodes[i].address, q->nodes[j].address, q->nodes[i].name_reply);
                    rc = CMN_EDUPNAME;
                    break;
                }
            }
        }
    }
    if (rc == 0) {
        for (i = 0; i < q->n_nodes; i++)
            answered += q->nodes[i].name_reply[0] != '\0';
        off = (size_t)snprintf(r->buf, r->len, "Network SUT (%zu node%s: ", answered,
                               answered == 1 ? "" : "s");
        for (i = 0, j = 0; i < q->n_nodes && off < r->len; i++) {
            if (!q->nodes[i].name_reply[0]) {
                if (doff < sizeof(down))
                    doff += (size_t)snprintf(down + doff, sizeof(down) - doff, "%s%s",
                                             doff ? ", " : "", q->nodes[i].address);
                continue;
            }
            off += (size_t)snprintf(r->buf + off, r->len - off, "%s%s", j++ ? ", " : "",
                                    q->nodes[i].name_reply);
        }
        if (off < r->len)
            off += (size_t)snprintf(r->buf + off, r->len - off, "%s%s)", down[0] ? "; down: " : "",
                                    down);
        if (answered == 0) {
            rc = CMN_ENONODE;
            if (r->err)
                snprintf(r->err, r->errlen, "Name(): no node answered");
        }
    } else if (why && r->err) {
        snprintf(r->err, r->errlen, "%s", why);
    }
    r->rc = rc;
    uv_sem_post(&r->done);
    /* The next queued Name(). */
    while (q->name_queue) {
        qdl_req_t *next = q->name_queue;
        q->name_queue = (qdl_req_t *)next->link.next;
        if (qdl__name_start(q, next) == 0)
            break;
        uv_sem_post(&next->done);
    }
}

static void name_check_done(qdl_t *q)
{
    size_t i;

    if (!q->name_req)
        return;
    for (i = 0; i < q->n_nodes; i++)
        if (q->nodes[i].name_pending)
            return;
    qdl__name_finish(q, 0, NULL);
}

/* ---- connections ----------------------------------------------------------------------------- */

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
    h.max_frame_size = q->cfg.max_frame_size;
    (void)cmn_conn_send(&qc->c, CMN_MSG_HELLO, &h.base, NULL, 0, NULL, NULL);
}

/* A HelloAck: record what the node is, check its name is unique, open for dispatch. */
static void handle_hello_ack(qdl_t *q, qdl_conn_t *qc, const Nsut__HelloAck *a)
{
    qdl_node_t *nd = qc->node;
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    char name[256], why[700];
    size_t i;

    if (qc->state != QC_HANDSHAKE) {
        qdl__conn_close(qc, CMN_ESTATE, "a second HelloAck");
        return;
    }
    if (a->version != CMN_PROTOCOL_VERSION) {
        snprintf(why, sizeof(why), "node chose protocol version %u; this QDL speaks %u", a->version,
                 CMN_PROTOCOL_VERSION);
        qdl__conn_close(qc, CMN_EVERSION, why);
        return;
    }
    cmn_sanitize(a->node_name, strlen(a->node_name), name, sizeof(name));
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *o = &q->nodes[i];
        if (o != nd && o->named && strcmp(o->name, name) == 0) {
            snprintf(why, sizeof(why),
                     "nodes %s and %s both report the name '%s'; node names must be unique",
                     o->address, nd->address, name);
            if (q->start_req) {
                if (q->start_req->err)
                    snprintf(q->start_req->err, q->start_req->errlen, "%s", why);
                q->start_req->rc = CMN_EDUPNAME;
                uv_sem_post(&q->start_req->done);
                q->start_req = NULL;
            }
            qdl__conn_close(qc, CMN_EDUPNAME, why);
            return;
        }
    }
    if (nd->named && strcmp(nd->name, name) != 0)
        cmn_log_warn("qdl: node at %s now calls itself '%s' (was '%s')", nd->address, name,
                     nd->name);
    snprintf(nd->name, sizeof(nd->name), "%s", name);
    nd->named = 1;
    nd->sample_codecs = 0;
    for (i = 0; i < a->n_sample_codecs; i++)
        if (cmn_codec_known((int)a->sample_codecs[i]))
            nd->sample_codecs |= 1u << a->sample_codecs[i];
    nd->sample_codecs |= 1u << CMPR_NONE;
    nd->result_codec = (int)a->result_codec;
    nd->window = 65536;
    nd->weight = 1.0;
    nd->max_frame = q->cfg.max_frame_size;
    if (a->caps) {
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
    lim.max_frame = q->cfg.max_frame_size;
    cmn_conn_set_limits(&qc->c, &lim);
    qc->state = QC_READY;
    qc->state_ns = qc->last_rx_ns = cmn_now_ns();
    qc->backoff_ms = 0;
    qc->draining = 0;
    cmn_log_info("qdl: connected to node '%s' at %s (connection %u, backend %s, device %s)",
                 nd->name, nd->address, qc->index, nd->caps_backend[0] ? nd->caps_backend : "?",
                 nd->caps_device[0] ? nd->caps_device : "?");
    qdl__check_start(q);
    qdl__dispatch(q);
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
    lim.max_sample_size = q->cfg.max_frame_size;
    rc = cmn_msg_unpack(f, &lim, &q->arena.pb, &m, &eb);
    if (rc < 0) {
        snprintf(why, sizeof(why), "bad %s frame: %s", cmn_msg_type_name(f->hdr.type), eb.msg);
        nd->st.errors++;
        qdl__conn_close(qc, rc, why);
        cmn_arena_reset(&q->arena);
        return;
    }
    if (qc->state == QC_HANDSHAKE && f->hdr.type != CMN_MSG_HELLO_ACK &&
        f->hdr.type != CMN_MSG_ERROR) {
        snprintf(why, sizeof(why), "%s before HelloAck", cmn_msg_type_name(f->hdr.type));
        qdl__conn_close(qc, CMN_ESTATE, why);
        goto out;
    }
    switch (f->hdr.type) {
    case CMN_MSG_HELLO_ACK:
        handle_hello_ack(q, qc, (const Nsut__HelloAck *)m);
        break;
    case CMN_MSG_NAME_REPLY: {
        const Nsut__NameReply *r = (const Nsut__NameReply *)m;
        if (q->name_req && r->request_id == q->name_req->request_id && nd->name_pending) {
            cmn_sanitize(r->node_name, strlen(r->node_name), nd->name_reply,
                         sizeof(nd->name_reply));
            nd->name_pending = 0;
            name_check_done(q);
        }
        break;
    }
    case CMN_MSG_RESPONSE: {
        const Nsut__Response *r = (const Nsut__Response *)m;
        handle_results(q, qc, 0, r->results, r->n_results, f->payload);
        break;
    }
    case CMN_MSG_FIRST_TOKEN: {
        const Nsut__FirstToken *r = (const Nsut__FirstToken *)m;
        handle_results(q, qc, 1, r->results, r->n_results, f->payload);
        break;
    }
    case CMN_MSG_PONG: {
        const Nsut__Pong *p = (const Nsut__Pong *)m;
        if (qc->ping_sent_ns && p->seq == qc->ping_seq) {
            uint64_t rtt = cmn_now_ns() - qc->ping_sent_ns;
            nd->st.rtt_ns_last = rtt;
            if (!nd->st.rtt_ns_min || rtt < nd->st.rtt_ns_min)
                nd->st.rtt_ns_min = rtt;
            qc->ping_sent_ns = 0;
        }
        break;
    }
    case CMN_MSG_PING: {
        Nsut__Pong p = NSUT__PONG__INIT;
        p.seq = ((const Nsut__Ping *)m)->seq;
        p.sent_ns = ((const Nsut__Ping *)m)->sent_ns;
        (void)cmn_conn_send(c, CMN_MSG_PONG, &p.base, NULL, 0, NULL, NULL);
        break;
    }
    case CMN_MSG_STATS:
        break;
    case CMN_MSG_GOODBYE:
        cmn_log_info("qdl: node %s is shutting down (Goodbye)", node_label(nd));
        qc->draining = 1;
        break;
    case CMN_MSG_ERROR: {
        const Nsut__Error *e = (const Nsut__Error *)m;
        char txt[300];
        const ProtobufCEnumValue *v =
            protobuf_c_enum_descriptor_get_value(&nsut__error_code__descriptor, (int)e->code);
        snprintf(why, sizeof(why), "node reported %s: %s", v ? v->name : "an error",
                 cmn_sanitize(e->message, strlen(e->message), txt, sizeof(txt)));
        nd->st.errors++;
        if (q->start_req && qc->state == QC_HANDSHAKE) {
            if (q->start_req->err)
                snprintf(q->start_req->err, q->start_req->errlen, "node %s: %s", nd->address, why);
            q->start_req->rc = CMN_EPEER;
            uv_sem_post(&q->start_req->done);
            q->start_req = NULL;
        }
        qdl__conn_close(qc, CMN_EPEER, why);
        break;
    }
    default:
        snprintf(why, sizeof(why), "%s is not a message a node sends",
                 cmn_msg_type_name(f->hdr.type));
        nd->st.errors++;
        qdl__conn_close(qc, CMN_ESTATE, why);
        break;
    }
out:
    cmn_msg_free(m, &q->arena.pb);
    cmn_arena_reset(&q->arena);
}

static void on_decode_error(cmn_conn_t *c, int err)
{
    qdl_conn_t *qc = c->data;
    char why[200];

    qc->node->st.errors++;
    snprintf(why, sizeof(why), "frame from the node rejected: %s", cmn_strerror(err));
    qdl__conn_close(qc, err, why);
}

static void on_retry(uv_timer_t *t)
{
    qdl_conn_t *qc = t->data;
    if (!qc->node->q->stopping && qc->state == QC_IDLE)
        conn_connect(qc);
}

static void on_conn_closed(cmn_conn_t *c, int reason)
{
    qdl_conn_t *qc = c->data;
    qdl_t *q = qc->node->q;
    char why[400];

    if (qc->state != QC_CLOSING) {
        /* Closed by the peer or by the connection itself, not by us. */
        qc->was_ready = qc->state == QC_READY;
        if (cmn_conn_last_error(c)[0])
            snprintf(why, sizeof(why), "%s", cmn_conn_last_error(c));
        else
            snprintf(why, sizeof(why), "connection closed (%s)",
                     reason == CMN_ECLOSED ? "by the node" : cmn_strerror(reason));
        if (!q->stopping)
            cmn_log_warn("qdl: node %s (connection %u): %s", node_label(qc->node), qc->index, why);
    } else {
        snprintf(why, sizeof(why), "%s", qc->why);
    }
    qc->open = 0;
    qc->state = QC_IDLE;
    conn_cleanup(qc, reason, why);
    qc->state_ns = cmn_now_ns();
    if (q->stopping)
        return;
    /* Reconnect with exponential backoff. */
    qc->backoff_ms = qc->backoff_ms ? qc->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (qc->backoff_ms > q->cfg.reconnect_max_ms)
        qc->backoff_ms = q->cfg.reconnect_max_ms;
    uv_timer_start(&qc->retry, on_retry, qc->backoff_ms, 0);
}

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
    qdl_t *q = qc->node->q;
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    cmn_conn_options_t opt = cmn_conn_options_default();
    int rc;

    if (qc->connects++ > 0)
        qc->node->st.reconnects++;
    rc = cmn_conn_init(&q->loop, &qc->c, &cb, &opt, &pre);
    if (rc < 0) {
        cmn_log_error("qdl: node %s: %s", qc->node->address, cmn_strerror(rc));
        return;
    }
    qc->c.data = qc;
    qc->open = 1;
    if (q->tls) {
        const char *peer = q->cfg.tls_server_name ? q->cfg.tls_server_name : qc->node->host;
        if (cmn_conn_use_tls(&qc->c, q->tls, peer) < 0) {
            qdl__conn_close(qc, CMN_ETLS, "cannot start a TLS session");
            return;
        }
    }
    qc->state = QC_CONNECTING;
    qc->state_ns = cmn_now_ns();
    qc->ping_sent_ns = 0;
    qc->draining = 0;
    if (qc->node->transport == CMN_TRANSPORT_UCX)
        rc = cmn_conn_connect_ucx(&qc->c, q->ucx, (struct sockaddr *)&qc->node->addr, on_connected);
    else
        rc = cmn_conn_connect(&qc->c, (struct sockaddr *)&qc->node->addr, on_connected);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof(why), "cannot connect: %s", cmn_strerror(rc));
        qdl__conn_close(qc, rc, why);
    }
}

/* Everything a closed connection leaves behind: its samples go back to the queue, a pending
 * start or Name() learns the node is gone. Runs once per connection, from on_conn_closed. */
static void conn_cleanup(qdl_conn_t *qc, int reason, const char *why)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;

    if (q->start_req && !qc->was_ready) {
        if (q->start_req->err)
            snprintf(q->start_req->err, q->start_req->errlen, "sut-node %s: %s", nd->address, why);
        q->start_req->rc = reason < 0 && reason != CMN_ECLOSED ? reason : CMN_ECLOSED;
        uv_sem_post(&q->start_req->done);
        q->start_req = NULL;
    }
    if (q->stopping)
        return;
    if (qc->n_inflight)
        cmn_log_warn(
            "qdl: node %s (connection %u) lost with %u samples in flight: re-dispatching them",
            node_label(nd), qc->index, qc->n_inflight);
    requeue_inflight(q, qc);
    if (nd->name_pending) {
        int other = 0;
        unsigned k;
        for (k = 0; k < q->cfg.connections_per_node; k++)
            other |= nd->conns[k].state == QC_READY;
        if (!other) {
            nd->name_pending = 0;
            name_check_done(q);
        }
    }
    qdl__dispatch(q);
}

void qdl__conn_close(qdl_conn_t *qc, int reason, const char *why)
{
    qdl_node_t *nd = qc->node;
    qdl_t *q = nd->q;

    if (!qc->open || qc->state == QC_CLOSING)
        return;
    if (!q->stopping)
        cmn_log_warn("qdl: node %s (connection %u): %s", node_label(nd), qc->index, why);
    snprintf(qc->why, sizeof(qc->why), "%s", why);
    qc->was_ready = qc->state == QC_READY;
    qc->state = QC_CLOSING;
    qc->ping_sent_ns = 0;
    cmn_conn_close(&qc->c, reason);
}

/* ---- set-up, liveness, shutdown ------------------------------------------------------------- */

int qdl__nodes_init(qdl_t *q, char *err, size_t errlen)
{
    size_t i;
    unsigned k;
    cmn_errbuf_t eb;

    q->n_nodes = q->cfg.n_nodes;
    q->nodes = calloc(q->n_nodes, sizeof(*q->nodes));
    if (!q->nodes)
        return UV_ENOMEM;
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        int rc;
        nd->q = q;
        nd->index = (unsigned)i;
        snprintf(nd->address, sizeof(nd->address), "%s", q->cfg.nodes[i]);
        /* "host:port" or "[v6]:port": the host part, for TLS name checks. */
        {
            const char *a =
                strstr(nd->address, "://") ? strstr(nd->address, "://") + 3 : nd->address;
            const char *end = strrchr(a, ':');
            size_t hl;
            if (*a == '[') {
                a++;
                end = strchr(a, ']');
            }
            hl = end ? (size_t)(end - a) : strlen(a);
            if (hl >= sizeof(nd->host))
                hl = sizeof(nd->host) - 1;
            memcpy(nd->host, a, hl);
            nd->host[hl] = '\0';
        }
        rc = cmn_endpoint_parse(q->cfg.nodes[i], &nd->transport, &nd->addr, &eb);
        if (rc == 0 && nd->transport == CMN_TRANSPORT_UCX && q->tls)
            rc = cmn_errf(&eb, CMN_ECONFIG, "sut-node %s: TLS runs on tcp:// only", nd->address);
        if (rc == 0 && nd->transport == CMN_TRANSPORT_UCX && !q->ucx)
            rc = cmn_ucx_open(&q->loop, NULL, &q->ucx, &eb);
        if (rc < 0) {
            if (err)
                snprintf(err, errlen, "%s", eb.msg);
            return rc;
        }
        for (k = 0; k < i; k++) {
            if (strcmp(q->nodes[k].address, nd->address) == 0) {
                if (err)
                    snprintf(err, errlen, "sut-node %s is listed twice", nd->address);
                return CMN_ECONFIG;
            }
        }
        nd->conns = calloc(q->cfg.connections_per_node, sizeof(*nd->conns));
        if (!nd->conns)
            return UV_ENOMEM;
        nd->window = 65536;
        nd->weight = 1.0;
        nd->max_frame = q->cfg.max_frame_size;
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *qc = &nd->conns[k];
            qc->node = nd;
            qc->index = k;
            qc->state = QC_IDLE;
            cmn_idmap_init(&qc->inflight);
            uv_timer_init(&q->loop, &qc->retry);
            qc->retry.data = qc;
            qc->retry_open = 1;
        }
    }
    return 0;
}

void qdl__connect_all(qdl_t *q)
{
    size_t i;
    unsigned k;

    for (i = 0; i < q->n_nodes; i++)
        for (k = 0; k < q->cfg.connections_per_node; k++)
            conn_connect(&q->nodes[i].conns[k]);
}

void qdl__check_start(qdl_t *q)
{
    size_t i;
    unsigned k;

    if (!q->start_req)
        return;
    for (i = 0; i < q->n_nodes; i++)
        for (k = 0; k < q->cfg.connections_per_node; k++)
            if (q->nodes[i].conns[k].state != QC_READY)
                return;
    q->start_req->rc = 0;
    uv_sem_post(&q->start_req->done);
    q->start_req = NULL;
}

void qdl__tick(qdl_t *q)
{
    uint64_t now = cmn_now_ns();
    size_t i;
    unsigned k;
    char why[160];

    if (q->start_req && now - q->start_req->start_ns > q->cfg.connect_timeout_ms * 1000000u) {
        char missing[512] = "";
        size_t off = 0;
        for (i = 0; i < q->n_nodes; i++) {
            int ready = 1;
            for (k = 0; k < q->cfg.connections_per_node; k++)
                ready &= q->nodes[i].conns[k].state == QC_READY;
            if (!ready && off < sizeof(missing))
                off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s",
                                        off ? ", " : "", q->nodes[i].address);
        }
        if (q->start_req->err)
            snprintf(q->start_req->err, q->start_req->errlen,
                     "no handshake within %llu ms with sut-node %s",
                     (unsigned long long)q->cfg.connect_timeout_ms, missing);
        q->start_req->rc = CMN_ETIMEOUT;
        uv_sem_post(&q->start_req->done);
        q->start_req = NULL;
    }
    if (q->name_req && now - q->name_req->start_ns > q->cfg.name_timeout_ms * 1000000u) {
        char missing[512] = "";
        size_t off = 0;
        for (i = 0; i < q->n_nodes; i++)
            if (q->nodes[i].name_pending && off < sizeof(missing))
                off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s",
                                        off ? ", " : "", q->nodes[i].address);
        snprintf(why, sizeof(why), "Name(): no NameReply within %llu ms from %s",
                 (unsigned long long)q->cfg.name_timeout_ms, missing);
        qdl__name_finish(q, CMN_ETIMEOUT, why);
    }
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *qc = &nd->conns[k];
            if ((qc->state == QC_CONNECTING || qc->state == QC_HANDSHAKE) &&
                now - qc->state_ns > q->cfg.connect_timeout_ms * 1000000u) {
                snprintf(why, sizeof(why), "no handshake within %llu ms",
                         (unsigned long long)q->cfg.connect_timeout_ms);
                qdl__conn_close(qc, CMN_ETIMEOUT, why);
                continue;
            }
            if (qc->state != QC_READY || !q->cfg.ping_interval_ms)
                continue;
            /* Alive means: some frame from the node recently (a Pong, a result, or the heartbeat
             * Ping a node sends when it has nothing else to say). A Pong alone would not do: it
             * can wait behind megabytes of queries in the socket, or behind a node that has
             * paused reading at its in-flight limit. */
            if (now - qc->last_rx_ns > q->cfg.ping_timeout_ms * 1000000u) {
                snprintf(why, sizeof(why),
                         "nothing from the node for %llu ms (no Pong, result or heartbeat): "
                         "node marked down",
                         (unsigned long long)q->cfg.ping_timeout_ms);
                qdl__conn_close(qc, CMN_ETIMEOUT, why);
                continue;
            }
            if (!qc->ping_sent_ns || now - qc->ping_sent_ns > q->cfg.ping_timeout_ms * 1000000u) {
                if (now - qc->state_ns > q->cfg.ping_interval_ms * 1000000u) {
                    Nsut__Ping p = NSUT__PING__INIT;
                    p.seq = ++qc->ping_seq;
                    p.sent_ns = now;
                    qc->ping_sent_ns = now;
                    qc->state_ns = now; /* the next ping is due one interval after this one */
                    (void)cmn_conn_send(&qc->c, CMN_MSG_PING, &p.base, NULL, 0, NULL, NULL);
                }
            }
        }
    }
    /* Samples no node can take: fail them after the deadline instead of waiting forever. One
     * line per sweep, however many queries it fails (a Server run issues thousands a second). */
    if (q->pending_head && qdl__ready_nodes(q) == 0) {
        qdl_pq_t **pp = &q->pending_head, *last = NULL;
        size_t n_samples = 0, n_queries = 0;
        unsigned long long lo_id = ULLONG_MAX, hi_id = 0, id;
        while (*pp) {
            qdl_pq_t *pq = *pp;
            if (pq->head && now - pq->head->queued_ns > q->cfg.fail_timeout_ms * 1000000u) {
                id = (unsigned long long)pq->query_id;
                lo_id = id < lo_id ? id : lo_id;
                hi_id = id > hi_id ? id : hi_id;
                n_queries++;
                n_samples += pq->n;
                q->pending_samples -= pq->n;
                *pp = pq->next;
                fail_chain(q, pq->head, CMN_ENONODE);
                free(pq);
                continue;
            }
            last = pq;
            pp = &pq->next;
        }
        if (n_queries > 0 && lo_id == hi_id)
            cmn_log_error(
                "qdl: no sut-node reachable for %llu ms: failing %zu samples of query %llu",
                (unsigned long long)q->cfg.fail_timeout_ms, n_samples, lo_id);
        else if (n_queries > 0)
            cmn_log_error("qdl: no sut-node reachable for %llu ms: failing %zu samples of the "
                          "queries with ids %llu to %llu",
                          (unsigned long long)q->cfg.fail_timeout_ms, n_samples, lo_id, hi_id);
        q->pending_tail = last;
    }
}

static void fail_inflight_each(void *arg, uint64_t key, void *val)
{
    qdl_srec_t **chain = arg;
    qdl_srec_t *s = val;
    (void)key;
    s->next = *chain;
    *chain = s;
}

void qdl__fail_all(qdl_t *q, int status)
{
    size_t i;
    unsigned k;

    while (q->pending_head) {
        qdl_pq_t *pq = q->pending_head;
        q->pending_head = pq->next;
        fail_chain(q, pq->head, status);
        free(pq);
    }
    q->pending_tail = NULL;
    q->pending_samples = 0;
    for (i = 0; i < q->n_nodes; i++) {
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *qc = &q->nodes[i].conns[k];
            qdl_srec_t *chain = NULL;
            cmn_idmap_each(&qc->inflight, fail_inflight_each, &chain);
            cmn_idmap_free(&qc->inflight);
            cmn_idmap_init(&qc->inflight);
            qc->n_inflight = 0;
            fail_chain(q, chain, status);
        }
        q->nodes[i].inflight = 0;
    }
    if (q->name_req)
        qdl__name_finish(q, CMN_ECLOSED, "QDL destroyed during Name()");
    while (q->name_queue) {
        qdl_req_t *r = q->name_queue;
        q->name_queue = (qdl_req_t *)r->link.next;
        r->rc = CMN_ECLOSED;
        uv_sem_post(&r->done);
    }
}

void qdl__stop_nodes(qdl_t *q)
{
    Nsut__Goodbye g = NSUT__GOODBYE__INIT;
    size_t i;
    unsigned k;

    g.reason = (char *)"QDL closing";
    for (i = 0; i < q->n_nodes; i++) {
        for (k = 0; k < q->cfg.connections_per_node; k++) {
            qdl_conn_t *qc = &q->nodes[i].conns[k];
            if (qc->retry_open) {
                uv_close((uv_handle_t *)&qc->retry, NULL);
                qc->retry_open = 0;
            }
            if (!qc->open)
                continue;
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
}
