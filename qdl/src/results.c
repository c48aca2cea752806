/* Results: the samples of one Response (or FirstToken) frame, matched to the connection's
 * in-flight map, decoded and handed to the caller in one callback.
 *
 * Exactly once: a result is accepted only if its id is in the map of the connection it arrived
 * on, and is removed from it, so a duplicate or stray result is dropped; a sample passes on at
 * most one first token, however often it is re-dispatched. Every byte here came from the network:
 * codecs are the ones negotiated, and decoded bytes per frame are bounded by max_frame_size. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Decoded bytes the frame's compressed results need in scratch, checked against the limit: the
 * frame and what it decodes to are held at once, and together stay within the connection's share
 * of the node memory budget. */
static int scratch_need(qdl_t *q, qdl_conn_t *qc, Nsut__Result *const *res, size_t nr,
                        uint64_t frame_bytes, uint64_t *need, cmn_errbuf_t *eb)
{
    const qdl_node_t *nd = qc->node;
    uint64_t total = 0;
    size_t i;

    for (i = 0; i < nr; i++) {
        int codec = (int)res[i]->codec;
        if (codec != CMPR_NONE && codec != nd->result_codec)
            return cmn_errf(eb, CMN_ECODEC,
                            "result for id %llu uses codec %d, which was not negotiated",
                            (unsigned long long)res[i]->id, codec);
        if (codec != CMPR_NONE)
            total += res[i]->raw_size;
    }
    if (total > q->cfg.max_frame_size)
        return cmn_errf(eb, CMN_ETOOBIG,
                        "results of one frame decode to %llu bytes, over the %llu-byte limit",
                        (unsigned long long)total, (unsigned long long)q->cfg.max_frame_size);
    /* The frame, its results unpacked, and what they decode to. */
    frame_bytes += (uint64_t)nr * QDL_RESULT_UNPACKED_BYTES;
    if (q->conn_share && total + frame_bytes > q->conn_share)
        return cmn_errf(eb, CMN_EOVERLOAD,
                        "a frame holding %llu bytes (unpacked) whose results decode to %llu more "
                        "is over the connection's share of the node memory budget, %llu bytes "
                        "(%llu over %zu connections): node dropped",
                        (unsigned long long)frame_bytes, (unsigned long long)total,
                        (unsigned long long)q->conn_share,
                        (unsigned long long)q->cfg.node_memory_budget, q->n_conns);
    *need = total;
    return 0;
}

static int scratch_reserve(qdl_t *q, uint64_t need)
{
    uint8_t *p;

    if (need <= q->scratch_cap)
        return 0;
    p = qdl__realloc(q->scratch, (size_t)need);
    if (!p)
        return -ENOMEM;
    q->scratch = p;
    q->scratch_cap = (size_t)need;
    return 0;
}

/* A node's reason for a failed sample is passed on only as a node must send it: printable
 * ASCII, at most 240 bytes (proto/README.md); anything else is peer junk, not a reason. */
#define ERROR_TEXT_MAX 240u

static int error_text_ok(const char *s)
{
    size_t n;

    if (!s || !s[0])
        return 0;
    for (n = 0; s[n]; n++)
        if (n >= ERROR_TEXT_MAX || (unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e)
            return 0;
    return 1;
}

/* Fills |out| for the result |r| whose wire bytes are at |wire|. Codec-none bytes are passed in
 * place (the frame's payload lives until the callback returns); compressed ones are decoded into
 * scratch at *off (timed, inside the latency: the one processing the QDL may do). */
static void decode_one(qdl_t *q, qdl_node_t *nd, const Nsut__Result *r, const uint8_t *wire,
                       size_t *off, qdl_response_t *out)
{
    cmn_errbuf_t eb;
    uint8_t *dst;
    int rc;

    if (r->status != NSUT__STATUS__STATUS_OK) {
        const ProtobufCEnumValue *v =
            protobuf_c_enum_descriptor_get_value(&nsut__status__descriptor, (int)r->status);
        uint64_t dropped = 0;

        out->status = CMN_EBACKEND;
        nd->st.samples_failed++;
        /* The engine's words travel with the failure (node and backend ABI 1.2); the node also
         * logs them under the same wire id (sut-node: "... its wire id is N"). */
        if (error_text_ok(r->error))
            out->error = r->error; /* the message outlives the callback */
        if (qdl__ratelog(&q->log_failed, cmn_now_ns(), &dropped))
            cmn_log_warn("qdl: node %s failed id %llu (LoadGen response id %llu): %s: %s%s",
                         qdl__node_label(nd), (unsigned long long)r->id,
                         (unsigned long long)out->response_id, v ? v->name : "unknown status",
                         out->error ? out->error
                                    : "(no reason sent; the node's log names this id with it)",
                         qdl__more_like_this(dropped));
        return;
    }
    if (r->codec == NSUT__CODEC__CODEC_NONE && r->raw_size == r->wire_size) {
        out->data = wire;
        out->size = (size_t)r->wire_size;
        return;
    }
    dst = q->scratch + *off;
    rc = cmpr_check_sizes((int)r->codec, r->raw_size, r->wire_size, q->cfg.max_frame_size, &eb);
    if (rc == 0)
        rc = cmpr_decompress((int)r->codec, wire, (size_t)r->wire_size, dst, (size_t)r->raw_size);
    if (rc < 0) {
        uint64_t dropped = 0;
        out->status = rc;
        nd->st.samples_failed++;
        if (qdl__ratelog(&q->log_decode, cmn_now_ns(), &dropped))
            cmn_log_error("qdl: node %s: result for id %llu does not decode (%s): sample failed%s",
                          qdl__node_label(nd), (unsigned long long)r->id, cmn_strerror(rc),
                          qdl__more_like_this(dropped));
        return;
    }
    out->data = dst;
    out->size = (size_t)r->raw_size;
    *off += (size_t)r->raw_size;
}

static void log_stray(qdl_t *q, const qdl_node_t *nd, int first_token, uint64_t id)
{
    uint64_t dropped = 0;

    if (qdl__ratelog(&q->log_stray, cmn_now_ns(), &dropped))
        cmn_log_warn("qdl: node %s sent a %s for id %llu, which is not outstanding on that "
                     "connection: dropped%s",
                     qdl__node_label(nd), first_token ? "first token" : "result",
                     (unsigned long long)id, qdl__more_like_this(dropped));
}

/* A sample the node rejected (it is stopping): back to the front of the queue for another, unless
 * it has been sent max_dispatches times; then it joins *spent, to fail once the frame's results
 * are passed on (a node that rejects and reconnects would otherwise get it for ever). */
static void reject_one(qdl_t *q, qdl_conn_t *qc, qdl_srec_t *s, qdl_srec_t **spent)
{
    qdl_node_t *nd = qc->node;
    uint64_t dropped = 0;

    qc->draining = 1;
    if (s->dispatches >= q->cfg.max_dispatches) {
        nd->st.samples_failed++;
        if (qdl__ratelog(&q->log_reject, cmn_now_ns(), &dropped))
            cmn_log_error("qdl: node %s rejected a sample (response id %llu) that was sent %u "
                          "times, the limit (max_dispatches): sample failed%s",
                          qdl__node_label(nd), (unsigned long long)s->s.response_id, s->dispatches,
                          qdl__more_like_this(dropped));
        s->next = *spent;
        *spent = s;
        return;
    }
    nd->st.redispatched++;
    qdl__pending_requeue(q, &s, 1);
}

/* The node's own times, clamped so that together they fit in the round trip the QDL measured
 * (|trip|): a node cannot have spent longer than that, and a value past it (up to 2^64 - 1)
 * would distort every breakdown downstream. Said once per node. */
static void clamp_node_times(qdl_node_t *nd, const Nsut__Result *r, uint64_t trip,
                             qdl_response_t *out)
{
    uint64_t nq = r->node_queue_ns, nb = r->node_backend_ns;

    if (nq <= trip && nb <= trip - nq) {
        out->node_queue_ns = nq;
        out->node_backend_ns = nb;
        return;
    }
    out->node_queue_ns = nq < trip ? nq : trip;
    out->node_backend_ns = nb < trip - out->node_queue_ns ? nb : trip - out->node_queue_ns;
    if (!nd->warned_times) {
        nd->warned_times = 1;
        cmn_log_warn("qdl: node %s reports %llu ns queued + %llu ns in its backend for id %llu, "
                     "whose round trip took %llu ns: its times are clamped to the round trip "
                     "(said once for this node)",
                     qdl__node_label(nd), (unsigned long long)nq, (unsigned long long)nb,
                     (unsigned long long)r->id, (unsigned long long)trip);
    }
}

/* The sample record a result is for, or NULL (stray; counted and logged). A result takes the
 * record out of the connection's map; a first token only looks, and passes at most once. */
static qdl_srec_t *match(qdl_t *q, qdl_conn_t *qc, int first_token, uint64_t id)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t *s;

    if (first_token) {
        s = cmn_idmap_get(&qc->inflight, id);
        if (s && s->first_token_seen)
            return NULL; /* re-dispatched after its first token: LoadGen has it already */
    } else {
        s = cmn_idmap_del(&qc->inflight, id);
    }
    if (!s) {
        nd->st.errors++;
        log_stray(q, nd, first_token, id);
        return NULL;
    }
    if (first_token) {
        s->first_token_seen = 1;
    } else {
        qc->n_inflight--;
        nd->inflight--;
        nd->tokens_out -= s->cost;
    }
    return s;
}

int qdl__results_handle(qdl_t *q, qdl_conn_t *qc, int first_token, Nsut__Result *const *res,
                        size_t nr, const uint8_t *payload, cmn_errbuf_t *eb)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t *done = NULL, **tail = &done, *spent = NULL;
    const uint8_t *p = payload;
    uint64_t need = 0, now = cmn_now_ns();
    size_t i, n = 0, off = 0;
    int rc;

    rc = scratch_need(q, qc, res, nr, qc->rx_frame_bytes, &need, eb);
    if (rc < 0)
        return rc;
    if (scratch_reserve(q, need) < 0 || qdl__resp_reserve(q, nr) < 0)
        return cmn_errf(eb, -ENOMEM, "out of memory for results");
    for (i = 0; i < nr; i++) {
        const Nsut__Result *r = res[i];
        const uint8_t *wire = p;
        qdl_srec_t *s;
        qdl_response_t *out;

        p += r->wire_size;
        s = match(q, qc, first_token, r->id);
        if (!s)
            continue;
        if (!first_token && r->status == NSUT__STATUS__STATUS_REJECTED) {
            reject_one(q, qc, s, &spent);
            continue;
        }
        out = &q->resp[n++];
        memset(out, 0, sizeof(*out));
        out->response_id = s->s.response_id;
        out->node = nd->name;
        out->n_tokens = r->n_tokens;
        if (!first_token) {
            out->issued_ns = s->issued_ns;
            out->sent_ns = s->sent_ns;
            clamp_node_times(nd, r, now > s->sent_ns ? now - s->sent_ns : 0, out);
        }
        decode_one(q, nd, r, wire, &off, out);
        if (!first_token) {
            uint64_t lat = now - s->sent_ns;
            if (lat > nd->lat_max_ns)
                nd->lat_max_ns = lat;
            nd->st.samples_completed++;
            if (r->status == NSUT__STATUS__STATUS_OK && r->n_tokens > 0) {
                nd->out_tokens += (uint64_t)r->n_tokens; /* least-tokens' expected output */
                nd->out_results++;
            }
            *tail = s;
            s->next = NULL;
            tail = &s->next;
        }
    }
    if (n && first_token)
        qc->progress_ns = now; /* a first token is progress too (long generations) */
    if (n && first_token && q->cfg.on_first_token)
        q->cfg.on_first_token(q->cfg.user, q->resp, n);
    else if (n && !first_token)
        q->cfg.on_complete(q->cfg.user, q->resp, n);
    if (done) {
        /* Work done: the node makes progress, and completions freed room on this connection. */
        qc->progress_ns = now;
        nd->backoff_ms = 0;
        nd->degraded = 0;
        q->dispatch_due = 1;
    }
    while (done) {
        qdl_srec_t *next = done->next;
        qdl__srec_done(done);
        done = next;
    }
    /* After the frame's results: the failure reuses the response array they were passed in. */
    qdl__fail_chain(q, spent, CMN_ENONODE);
    return 0;
}
