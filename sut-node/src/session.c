/* Sessions: protocol handlers, admission and limits, and results to frames (session.h); their
 * deadlines and heartbeats are session_deadline.c. The wire protocol is proto/README.md. */
#include "session.h"

#include "alloc.h"
#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Codecs this build can decode, in order of preference. */
static const int supported_codecs[] = {CMPR_NONE, CMPR_LZ4};

/* Frames below this payload size are cheaper to copy than to give a batch of their own. */
#define SINK_MIN_PAYLOAD (64u * 1024u)

/* Decoding (LZ4) runs on the I/O loop: a Query of big samples holds the loop for as long as its
 * decode takes, and peers sending such Queries back to back (LZ4 bombs) can keep it decoding
 * nearly all the time, every other peer waiting seconds for a turn. Per-event fairness: a Query
 * whose decode took T >= DECODE_BIG_NS while n >= 2 sessions (itself included) did such decodes
 * within the last DECODE_WINDOW_NS pauses its session's reading for T x n (from the end of its
 * frame; a timer resumes it), so each decoder gets at most about 1/(n+1) of the loop and
 * the rest is left to everyone else. A session whose decodes stay under DECODE_BIG_NS, or the one
 * session decoding big samples, is never paused by this; nor is a frame ever paused half read,
 * and the pause does not count against the peer in the frame-rate rule. */
#define DECODE_BIG_NS 20000000u        /* 20 ms */
#define DECODE_WINDOW_NS 1000000000ull /* 1 s */

/* The metadata of one Sample is under 48 bytes: the metadata limit follows the in-flight limit,
 * so a Query's metadata is refused by its header before protobuf-c unpacks it. */
#define META_PER_SAMPLE 64u
#define META_BASE 4096u

static cmn_msg_limits_t msg_limits(const sut_sessions_env_t *env)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();

    lim.max_sample_size = env->opt->max_frame;
    if (env->opt->max_inflight < lim.max_samples)
        lim.max_samples = env->opt->max_inflight;
    return lim;
}

/* ---- lifetime and errors --------------------------------------------------------------------- */

static void session_release(sut_session_t *s)
{
    if (--s->refs > 0)
        return;
    cmn_idmap_free(&s->ids);
    free(s->pend_res);
    free(s->pend_tok);
    free(s);
}

static const char *wire_error_name(int wire_err)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&nsut__error_code__descriptor, wire_err);
    return v ? v->name : "ERROR_?";
}

/* The one way a session fails: a log line naming the peer and the reason, an Error frame with
 * the same reason, an orderly close. */
void sut__session_fail(sut_session_t *s, int code, int wire_err, const char *why)
{
    Nsut__Error e = NSUT__ERROR__INIT;

    if (cmn_conn_closing(&s->conn))
        return;
    s->ss->st.errors++;
    cmn_log_warn("%s: %s (%s); closing the connection", cmn_conn_peer(&s->conn), why,
                 wire_error_name(wire_err));
    e.code = (Nsut__ErrorCode)wire_err;
    e.message = (char *)why;
    (void)cmn_conn_send(&s->conn, CMN_MSG_ERROR, &e.base, NULL, 0, NULL, NULL);
    cmn_conn_shutdown(&s->conn, code);
}

void sut__session_send(sut_session_t *s, unsigned type, const ProtobufCMessage *m)
{
    int rc = cmn_conn_send(&s->conn, type, m, NULL, 0, NULL, NULL);
    if (rc < 0 && rc != CMN_ECLOSED)
        cmn_log_error("%s: cannot send %s: %s", cmn_conn_peer(&s->conn), cmn_msg_type_name(type),
                      cmn_strerror(rc));
}

/* ---- results to frames ----------------------------------------------------------------------- */

typedef struct {
    const sut_sessions_env_t *env;
    sut_session_t *s; /* referenced until the frame is sent: its records are on its account */
    size_t cnt;
    sut_rec_t *recs[];
} sent_frame_t;

/* Records go back to the pool and their bytes to the budget and their peer's account. */
static void free_records(const sut_sessions_env_t *env, sut_rec_t **recs, size_t cnt)
{
    size_t i;
    for (i = 0; i < cnt; i++) {
        if (recs[i]->charge) {
            sut__budget_give(env->budget, recs[i]->charge);
            sut__budget_unattribute(&recs[i]->s->peer, recs[i]->charge);
        }
        cmn_pool_put(env->pool, recs[i]->data);
        cmn_pool_put(env->pool, recs[i]->error);
        cmn_pool_put(env->pool, recs[i]);
    }
}

/* ucx:// copies a frame of several results into one buffer (conn.h): the copy is charged to the
 * budget and the records are freed as soon as it is made (on_frame_sent runs then), so the bytes
 * are held once and counted once. Charged whatever the budget's state: it replaces records the
 * budget holds already. */
static void *copy_alloc(void *ctx, size_t size)
{
    void *p = sut__malloc(size);

    if (p)
        sut__budget_charge(ctx, size);
    return p;
}

static void copy_free(void *ctx, void *p, size_t size)
{
    sut__budget_give(ctx, size);
    free(p);
}

static void on_frame_sent(void *arg, int status)
{
    sent_frame_t *f = arg;

    (void)status;
    free_records(f->env, f->recs, f->cnt);
    session_release(f->s);
    free(f);
}

/* The most result bytes in one frame of several results over a transport that copies such a
 * frame (ucx://: cmn_conn_copies_segments): a larger result goes alone, sent from where it is,
 * and the copies stay small. */
#define COPIED_FRAME_MAX (64u * 1024u)

/* The failures' messages in one frame, at most: a client sizes its metadata limit for ~80 bytes
 * a result plus 4 KiB (the QDL does), so the messages must fit in that 4 KiB. */
#define FRAME_ERROR_TEXT_MAX 2048u

/* How many records from |start| fit one frame under the client's limit (at least one). The
 * metadata costs at most ~40 bytes per result; 64 keeps a margin. */
static size_t frame_span(const sut_session_t *s, sut_rec_t **recs, size_t start, size_t cnt,
                         uint64_t *bytes)
{
    uint64_t max = s->result_max_frame;
    size_t end = start, text = 0;

    if (cmn_conn_copies_segments(&s->conn) && max > COPIED_FRAME_MAX)
        max = COPIED_FRAME_MAX;
    *bytes = 0;
    while (end < cnt) {
        size_t t = recs[end]->error ? strlen(recs[end]->error) + 4 : 0;
        if (end > start && (*bytes + recs[end]->wire_size + 64 * (end - start + 1) > max ||
                            text + t > FRAME_ERROR_TEXT_MAX))
            break;
        text += t;
        *bytes += recs[end++]->wire_size;
    }
    return end - start;
}

/* One Response or FirstToken frame of |k| records; takes ownership of them. */
static int send_frame(sut_session_t *s, unsigned type, sut_rec_t **recs, size_t k)
{
    const sut_sessions_env_t *env = &s->ss->env;
    sent_frame_t *f = sut__malloc(sizeof(*f) + k * sizeof(f->recs[0]));
    Nsut__Result *res = sut__calloc(k, sizeof(*res));
    Nsut__Result **rp = sut__calloc(k, sizeof(*rp));
    struct iovec *iov = sut__calloc(k, sizeof(*iov));
    Nsut__Response resp = NSUT__RESPONSE__INIT;
    Nsut__FirstToken tok = NSUT__FIRST_TOKEN__INIT;
    size_t i;
    int rc = -ENOMEM;

    if (!f || !res || !rp || !iov)
        goto fail;
    f->env = env;
    f->s = s;
    f->cnt = k;
    for (i = 0; i < k; i++) {
        sut_rec_t *r = recs[i];
        nsut__result__init(&res[i]);
        res[i].id = r->wire_id;
        res[i].status = (Nsut__Status)r->status;
        res[i].codec = (Nsut__Codec)r->codec;
        res[i].raw_size = r->raw_size;
        res[i].wire_size = r->wire_size;
        res[i].n_tokens = r->n_tokens;
        res[i].node_queue_ns = r->queue_ns;
        res[i].node_backend_ns = r->backend_ns;
        if (r->error)
            res[i].error = r->error;
        rp[i] = &res[i];
        iov[i].iov_base = r->data;
        iov[i].iov_len = (size_t)r->wire_size;
        f->recs[i] = r;
    }
    resp.n_results = tok.n_results = k;
    resp.results = tok.results = rp;
    s->refs++; /* the frame's, given back by on_frame_sent */
    rc = cmn_conn_send(&s->conn, type,
                       type == CMN_MSG_RESPONSE ? &resp.base : (const ProtobufCMessage *)&tok.base,
                       iov, k, on_frame_sent, f);
    if (rc < 0) {
        s->refs--;
        goto fail;
    }
    free(res);
    free(rp);
    free(iov);
    return 0;

fail:
    free(f);
    free(res);
    free(rp);
    free(iov);
    free_records(env, recs, k);
    return rc;
}

/* Sends the records as one frame, split only where a frame would exceed the client's limit. */
static void send_records(sut_session_t *s, unsigned type, sut_rec_t **recs, size_t cnt)
{
    size_t start = 0;

    while (start < cnt) {
        uint64_t bytes;
        size_t k = frame_span(s, recs, start, cnt, &bytes);
        int rc = send_frame(s, type, recs + start, k);

        start += k;
        if (rc == -ENOMEM) {
            free_records(&s->ss->env, recs + start, cnt - start);
            sut__session_fail(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL,
                              "out of memory for a result frame");
            return;
        }
        if (rc < 0 && rc != CMN_ECLOSED)
            cmn_log_error("%s: cannot send %s: %s", cmn_conn_peer(&s->conn),
                          cmn_msg_type_name(type), cmn_strerror(rc));
        if (rc == 0)
            s->ss->st.bytes_out += bytes;
    }
}

static void flush_results(sut_session_t *s)
{
    /* First tokens before results: a sample's FirstToken must precede its Result. */
    if (s->n_tok) {
        send_records(s, CMN_MSG_FIRST_TOKEN, s->pend_tok, s->n_tok);
        s->n_tok = 0;
    }
    if (s->n_res) {
        send_records(s, CMN_MSG_RESPONSE, s->pend_res, s->n_res);
        s->n_res = 0;
    }
}

static int pend_push(sut_rec_t ***arr, size_t *cnt, size_t *cap, sut_rec_t *r)
{
    if (*cnt == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        sut_rec_t **na = sut__realloc(*arr, ncap * sizeof(*na));
        if (!na)
            return -ENOMEM;
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*cnt)++] = r;
    return 0;
}

/* Reading follows the two limits a peer can hit: samples in flight, and results it does not take
 * (the write backlog above its high-water mark). While it reads nothing new, nothing new is queued
 * for it; write_timeout_ms later it is dropped if it still took nothing. */
static int frame_top_up(sut_session_t *s);
static void on_decode_timer(uv_timer_t *t);

void sut__session_update_reading(sut_session_t *s)
{
    int congested = cmn_conn_congested(&s->conn);

    if (congested && !s->congested_ns) {
        s->congested_ns = cmn_now_ns();
        s->congested_out = cmn_conn_stats(&s->conn)->bytes_out;
    } else if (!congested) {
        s->congested_ns = 0;
    }
    if (cmn_conn_closing(&s->conn) || s->refused)
        return;
    /* A peer holding more than its share of the budget gets no new work until it holds less;
     * a frame it has begun goes on while the budget can charge its next chunk (frame_top_up). */
    if (congested || s->inflight >= s->ss->env.opt->max_inflight || frame_top_up(s) < 0 ||
        (s->joined && !cmn_frame_decoder_partial(cmn_conn_decoder(&s->conn)) &&
         sut__budget_peer_used(&s->peer) > sut__budget_share(s->ss->env.budget)) ||
        (s->decode_till_ns && !cmn_frame_decoder_partial(cmn_conn_decoder(&s->conn)) &&
         cmn_now_ns() < s->decode_till_ns))
        cmn_conn_read_pause(&s->conn);
    else if (cmn_conn_read_paused(&s->conn))
        cmn_conn_read_resume(&s->conn);
}

static void on_drain(cmn_conn_t *c)
{
    sut__session_update_reading(c->data);
}

void sut__sessions_take(sut_sessions_t *ss, sut_rec_t *rec)
{
    sut_session_t *s = rec->s;
    int is_result = rec->h.kind == SUT_REC_RESULT;
    int rc;

    if (is_result) {
        /* The sample is done for the node whether or not its connection is still there. */
        if (rec->in_charge)
            sut__budget_unattribute(&s->peer, rec->in_charge);
        cmn_idmap_del(&s->ids, rec->wire_id);
        s->inflight--;
        if (rec->status == NSUT__STATUS__STATUS_BACKEND_ERROR)
            ss->st.samples_failed++;
        else if (rec->status == NSUT__STATUS__STATUS_REJECTED)
            ss->st.samples_rejected++; /* its result over the budget (workers.c) */
    }
    if (s->dead) {
        free_records(&ss->env, &rec, 1);
    } else {
        rc = is_result ? pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec)
                       : pend_push(&s->pend_tok, &s->n_tok, &s->cap_tok, rec);
        if (rc < 0) {
            free_records(&ss->env, &rec, 1);
            sut__session_fail(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL,
                              "out of memory for queued results");
        }
        if (!s->touched) {
            s->touched = 1;
            s->refs++; /* keeps the session while it is on the touched list */
            s->touched_next = ss->touched;
            ss->touched = s;
        }
    }
    if (is_result)
        session_release(s); /* the sample's reference */
}

void sut__sessions_flush(sut_sessions_t *ss)
{
    sut_session_t *s;

    while ((s = ss->touched) != NULL) {
        ss->touched = s->touched_next;
        s->touched = 0;
        if (!s->dead) {
            flush_results(s);
            sut__session_update_reading(s);
        }
        session_release(s);
    }
}

/* A result for a sample the node will not run (draining): the QDL sends it elsewhere. */
static void reject_sample(sut_session_t *s, uint64_t wire_id)
{
    sut_rec_t *rec = cmn_pool_get(s->ss->env.pool, sizeof(*rec));

    s->ss->st.samples_rejected++;
    if (!rec || pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec) < 0) {
        cmn_pool_put(s->ss->env.pool, rec);
        sut__session_fail(s, -ENOMEM, NSUT__ERROR_CODE__ERROR_INTERNAL,
                          "out of memory for a rejected sample's result");
        return;
    }
    memset(rec, 0, sizeof(*rec));
    rec->h.kind = SUT_REC_RESULT;
    rec->s = s;
    rec->wire_id = wire_id;
    rec->status = NSUT__STATUS__STATUS_REJECTED;
}

/* ---- protocol handlers ----------------------------------------------------------------------- */

/* The codecs both sides know, in the client's order; uncompressed samples are always
 * understood, whatever the offer said. */
static size_t negotiate_codecs(sut_session_t *s, const Nsut__Hello *h, Nsut__Codec *accepted)
{
    size_t i, k, na = 0;

    for (i = 0; i < h->n_sample_codecs; i++) {
        for (k = 0; k < sizeof(supported_codecs) / sizeof(supported_codecs[0]); k++) {
            if ((int)h->sample_codecs[i] == supported_codecs[k] &&
                !(s->sample_codecs & (1u << h->sample_codecs[i]))) {
                s->sample_codecs |= 1u << h->sample_codecs[i];
                accepted[na++] = h->sample_codecs[i];
            }
        }
    }
    s->sample_codecs |= 1u << CMPR_NONE;
    return na;
}

static void handle_hello(sut_session_t *s, const Nsut__Hello *h)
{
    const sut_sessions_env_t *env = &s->ss->env;
    Nsut__HelloAck ack = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    Nsut__Codec accepted[8];
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    size_t i;
    char why[256], client[128], transport[128], not_ready[SUT_BACKEND_ERROR_MAX + 1];
    int result_codec = CMPR_NONE;

    if (h->version_min > CMN_PROTOCOL_VERSION || h->version_max < CMN_PROTOCOL_VERSION) {
        snprintf(why, sizeof(why),
                 "no common protocol version: client speaks %u..%u, node speaks %u..%u",
                 h->version_min, h->version_max, CMN_PROTOCOL_VERSION, CMN_PROTOCOL_VERSION);
        sut__session_fail(s, CMN_EVERSION, NSUT__ERROR_CODE__ERROR_VERSION, why);
        return;
    }
    ack.n_sample_codecs = negotiate_codecs(s, h, accepted);
    for (i = 0; i < h->n_result_codecs; i++) {
        if ((int)h->result_codecs[i] == env->opt->result_codec)
            result_codec = env->opt->result_codec;
    }
    s->result_codec = result_codec;
    s->result_max_frame = h->max_frame_size && h->max_frame_size < CMN_FRAME_ABS_MAX
                              ? h->max_frame_size
                              : CMN_FRAME_DEFAULT_MAX;
    caps.backend = (char *)env->info->name;
    caps.device = (char *)env->info->device;
    caps.max_batch = env->max_batch;
    caps.preferred_batch = env->info->preferred_batch;
    caps.max_frame_size = env->opt->max_frame;
    caps.max_inflight_samples = env->opt->max_inflight;
    caps.streaming = (env->info->flags & SUT_BACKEND_F_STREAMING) != 0;
    caps.output_size = env->info->output_size;
    caps.engines = env->engines;
    caps.weight = env->info->weight;
    ack.version = CMN_PROTOCOL_VERSION;
    ack.sample_codecs = accepted;
    ack.result_codec = (Nsut__Codec)result_codec;
    ack.node_name = (char *)env->name;
    ack.caps = &caps;
    if (!sut__probe_get(env->probe, not_ready, sizeof(not_ready))) {
        ack.not_ready = 1;
        ack.not_ready_reason = not_ready;
    }
    sut__session_send(s, CMN_MSG_HELLO_ACK, &ack.base);
    lim.max_frame = env->opt->max_frame;
    if ((uint64_t)META_BASE + (uint64_t)META_PER_SAMPLE * env->opt->max_inflight < lim.max_meta)
        lim.max_meta = META_BASE + META_PER_SAMPLE * env->opt->max_inflight;
    cmn_conn_set_limits(&s->conn, &lim);
    s->ready = 1;
    s->joined = 1;
    sut__budget_join(env->budget);
    if (s->preauth) {
        s->preauth = 0;
        s->ss->n_preauth--;
    }
    cmn_conn_describe(&s->conn, transport, sizeof(transport));
    cmn_log_info("%s: handshake done (client '%s', result codec %s, transport %s)",
                 cmn_conn_peer(&s->conn),
                 cmn_sanitize(h->client_name ? h->client_name : "",
                              h->client_name ? strlen(h->client_name) : 0, client, sizeof(client)),
                 cmpr_codec_name(result_codec), transport);
}

/* Whether a Query may take the zero-copy path: every sample uncompressed, and enough of them to
 * fill a batch by themselves. */
static int sink_fits(const sut_sessions_env_t *env, const Nsut__Query *q)
{
    size_t i;

    if (q->n_samples > env->max_batch ||
        (q->n_samples < env->info->preferred_batch && env->info->preferred_batch > 1))
        return 0;
    for (i = 0; i < q->n_samples; i++)
        if (q->samples[i]->codec != NSUT__CODEC__CODEC_NONE)
            return 0;
    return 1;
}

/* The decoder's payload sink, called once a large frame's header and metadata are in: a Query
 * that fits gets a batch of its own, and its payload is read from the socket straight into that
 * batch's input (no copy in user space). The metadata is unpacked here, once, and kept for
 * on_frame; anything that fails to unpack is left to on_frame to report. */
static uint8_t *session_sink(void *arg, const cmn_frame_header_t *h, const uint8_t *meta)
{
    sut_session_t *s = arg;
    sut_sessions_t *ss = s->ss;
    cmn_msg_limits_t lim = msg_limits(&ss->env);
    ProtobufCMessage *m = NULL;
    cmn_frame_t f;
    char why[200];

    if (h->type == CMN_MSG_QUERY && s->ready && !ss->draining && !s->sink && !s->sink_q) {
        f.hdr = *h;
        f.meta = meta;
        f.payload = NULL;
        if (cmn_msg_unpack(&f, &lim, NULL, &m, NULL) == 0) {
            s->sink_q = m;
            /* charged to the budget as the batch's input, and on the peer's account (under the
             * fairness rules) until its samples are (handle_query): whole at the header, so such
             * frames still arriving hold a quarter of the limit at most (slow peers cannot lock
             * the rest); others go to the frame buffer, charged as it fills */
            if (sink_fits(&ss->env, (const Nsut__Query *)m) &&
                ss->sink_arriving + h->payload_len <= ss->env.budget->limit / 4 &&
                sut__budget_attribute(ss->env.budget, &s->peer, h->payload_len, 0) == 0) {
                s->sink = sut__batcher_sink_open(ss->env.bt, h->payload_len, &s->peer);
                if (!s->sink)
                    sut__budget_unattribute(&s->peer, h->payload_len);
            }
            if (s->sink) {
                s->sink_charge = h->payload_len;
                ss->sink_arriving += h->payload_len;
                return s->sink->input;
            }
        }
    }
    /* The payload goes into the connection's frame buffer: the budget and the peer's account
     * hold it, charged as it fills, until the frame is handled or the connection closes. What
     * can never fit one peer is refused now. */
    if (h->payload_len > ss->env.budget->peer_max) {
        snprintf(why, sizeof(why),
                 "a frame of %u payload bytes can never fit the node's memory budget (one peer "
                 "may hold %llu bytes)",
                 h->payload_len, (unsigned long long)ss->env.budget->peer_max);
        sut__session_fail(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
        return NULL;
    }
    if (cmn_conn_whole_payloads(&s->conn)) {
        /* Over UCX the node fetches the payload whole, at once: charged whole. */
        if (sut__budget_take_for(ss->env.budget, &s->peer, h->payload_len, 1) < 0) {
            snprintf(why, sizeof(why),
                     "a frame of %u payload bytes does not fit the node's memory budget (%llu of "
                     "%llu bytes in use; this peer holds %llu, its share is %llu)",
                     h->payload_len, (unsigned long long)sut__budget_used(ss->env.budget),
                     (unsigned long long)ss->env.budget->limit,
                     (unsigned long long)sut__budget_peer_used(&s->peer),
                     (unsigned long long)sut__budget_share(ss->env.budget));
            sut__session_fail(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
            return NULL;
        }
        s->frame_charge = h->payload_len;
        return NULL;
    }
    s->frame_total = h->payload_len;
    (void)frame_top_up(s);
    return NULL;
}

/* Charges the frame being received up to FRAME_CHUNK bytes ahead of what has arrived. Returns 0,
 * or CMN_EOVERLOAD when the budget refuses the next chunk under the fairness rules: reading then
 * pauses (the peer waits, its rate windows do not count) and the tick tries again. What has
 * arrived is charged whatever the rules (the memory is taken already). */
static int frame_top_up(sut_session_t *s)
{
    sut_budget_t *b = s->ss->env.budget;
    const cmn_frame_decoder_t *d = cmn_conn_decoder(&s->conn);
    uint64_t got = 0, want;

    if (!s->frame_total || !cmn_frame_decoder_partial(d))
        return 0;
    if (d->body_have > d->hdr.meta_len)
        got = d->body_have - d->hdr.meta_len;
    want = got + FRAME_CHUNK < s->frame_total ? got + FRAME_CHUNK : s->frame_total;
    if (want <= s->frame_charge) {
        s->budget_wait_ns = 0;
        return 0;
    }
    if (sut__budget_take_for(b, &s->peer, want - s->frame_charge, 1) == 0) {
        s->frame_charge = want;
        s->budget_wait_ns = 0;
        return 0;
    }
    if (got > s->frame_charge) {
        sut__budget_charge(b, got - s->frame_charge);
        (void)sut__budget_attribute(b, &s->peer, got - s->frame_charge, 1);
        s->frame_charge = got;
    }
    if (!s->budget_wait_ns)
        s->budget_wait_ns = cmn_now_ns();
    return CMN_EOVERLOAD;
}

static void on_partial(cmn_conn_t *c)
{
    sut_session_t *s = c->data;

    if (s->frame_total && frame_top_up(s) < 0)
        cmn_conn_read_pause(&s->conn);
}

static void release_frame_charge(sut_session_t *s)
{
    if (s->frame_charge) {
        sut__budget_give(s->ss->env.budget, s->frame_charge);
        sut__budget_unattribute(&s->peer, s->frame_charge);
        s->frame_charge = 0;
    }
    s->frame_total = 0;
    s->budget_wait_ns = 0;
    if (s->sink_charge) {
        s->ss->sink_arriving -= s->sink_charge;
        sut__budget_unattribute(&s->peer, s->sink_charge);
        s->sink_charge = 0;
    }
}

/* Checks one sample's codec, sizes and id before it is admitted. Returns 0, or a negative code
 * after failing the session. */
static int admit_sample(sut_session_t *s, const Nsut__Sample *sm)
{
    cmn_errbuf_t eb;
    char why[600];
    int codec = (int)sm->codec, rc;

    if (!(s->sample_codecs & (1u << codec))) {
        snprintf(why, sizeof(why), "sample %llu uses codec %s, which was not negotiated",
                 (unsigned long long)sm->id, cmpr_codec_name(codec));
        sut__session_fail(s, CMN_ECODEC, NSUT__ERROR_CODE__ERROR_CODEC, why);
        return CMN_ECODEC;
    }
    rc = cmpr_check_sizes(codec, sm->raw_size, sm->wire_size, s->ss->env.opt->max_frame, &eb);
    if (rc < 0) {
        snprintf(why, sizeof(why), "sample %llu: %s", (unsigned long long)sm->id, eb.msg);
        sut__session_fail(s, rc,
                          rc == CMN_ETOOBIG ? NSUT__ERROR_CODE__ERROR_TOO_LARGE
                                            : NSUT__ERROR_CODE__ERROR_DECOMPRESS,
                          why);
        return rc;
    }
    if (s->ss->draining)
        return 0;
    rc = cmn_idmap_put(&s->ids, sm->id, s);
    if (rc == UV_EEXIST) {
        snprintf(why, sizeof(why), "sample id %llu is already in flight on this connection",
                 (unsigned long long)sm->id);
        sut__session_fail(s, CMN_EFIELD, NSUT__ERROR_CODE__ERROR_BAD_MESSAGE, why);
        return CMN_EFIELD;
    }
    if (rc < 0) {
        sut__session_fail(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL, "out of memory for a sample id");
        return rc;
    }
    return 0;
}

/* The decoded bytes one Query may ask for: LZ4 samples each within the per-sample ratio can still
 * add up to far more than the frame; a quarter of the budget, and never less than a frame. */
static int decoded_too_large(sut_session_t *s, const Nsut__Query *q)
{
    const sut_sessions_env_t *env = &s->ss->env;
    uint64_t limit = env->budget->limit / 4, sum = 0;
    char why[200];
    size_t i;

    if (limit < env->opt->max_frame)
        limit = env->opt->max_frame;
    for (i = 0; i < q->n_samples; i++)
        sum += q->samples[i]->raw_size;
    if (sum <= limit)
        return 0;
    snprintf(why, sizeof(why),
             "a Query of %zu samples decodes to %llu bytes, over the limit of %llu", q->n_samples,
             (unsigned long long)sum, (unsigned long long)limit);
    sut__session_fail(s, CMN_ETOOBIG, NSUT__ERROR_CODE__ERROR_TOO_LARGE, why);
    return 1;
}

static void arm_decode_timer(sut_sessions_t *ss, uint64_t due, uint64_t now)
{
    if (!ss->decode_timer_ready || (ss->decode_due_ns && ss->decode_due_ns <= due))
        return;
    ss->decode_due_ns = due;
    uv_timer_start(&ss->decode_timer, on_decode_timer, (due - now + 999999u) / 1000000u, 0);
}

/* Resumes the sessions whose decode pause is over, and sets the timer for the next one. */
static void on_decode_timer(uv_timer_t *t)
{
    sut_sessions_t *ss = t->data;
    uint64_t now = cmn_now_ns(), next = 0;
    sut_session_t *s;

    ss->decode_due_ns = 0;
    for (s = ss->head; s; s = s->next) {
        if (!s->decode_till_ns || cmn_conn_closing(&s->conn))
            continue;
        if (s->decode_till_ns <= now) {
            s->decode_till_ns = 0;
            sut__session_update_reading(s);
        } else if (!next || s->decode_till_ns < next) {
            next = s->decode_till_ns;
        }
    }
    if (next)
        arm_decode_timer(ss, next, now);
}

void sut__sessions_init_timer(sut_sessions_t *ss, uv_loop_t *loop)
{
    uv_timer_init(loop, &ss->decode_timer);
    ss->decode_timer.data = ss;
    ss->decode_timer_ready = 1;
}

void sut__sessions_close_timer(sut_sessions_t *ss)
{
    if (ss->decode_timer_ready && !uv_is_closing((uv_handle_t *)&ss->decode_timer))
        uv_close((uv_handle_t *)&ss->decode_timer, NULL);
    ss->decode_timer_ready = 0;
}

/* After a Query whose decode took decode_ns: the DECODE_* rule above. */
static void charge_decode(sut_session_t *s, uint64_t decode_ns)
{
    uint64_t now;
    uint32_t n = 0;
    sut_session_t *it;

    if (decode_ns < DECODE_BIG_NS)
        return;
    now = cmn_now_ns();
    s->decode_big_ns = now;
    for (it = s->ss->head; it; it = it->next)
        if (it->decode_big_ns && now - it->decode_big_ns < DECODE_WINDOW_NS)
            n++;
    if (n >= 2) {
        s->decode_till_ns = now + decode_ns * n;
        arm_decode_timer(s->ss, s->decode_till_ns, now);
    }
}

static void handle_query(sut_session_t *s, const Nsut__Query *q, const uint8_t *payload,
                         sut_nbatch_t *sink)
{
    sut_sessions_t *ss = s->ss;
    const uint8_t *p = payload;
    uint64_t arrival = s->last_frame_ns;
    uint64_t decode0 = ss->env.bt->st.decode_ns;
    cmn_errbuf_t eb;
    size_t i;
    int rc;

    ss->st.queries++;
    if (decoded_too_large(s, q))
        return;
    for (i = 0; i < q->n_samples; i++) {
        const Nsut__Sample *sm = q->samples[i];
        const uint8_t *wire = p;
        sut_owner_t ow = {s, sm->id, s->result_codec, arrival, &s->peer, 0, 0, 0};

        p += sm->wire_size;
        if (admit_sample(s, sm) < 0)
            break;
        if (ss->draining || s->inflight >= ss->env.opt->max_inflight) {
            /* Draining, or past the in-flight limit inside one frame: the QDL sends it
             * elsewhere, and one huge Query cannot hold the batcher from other clients. */
            if (!ss->draining)
                cmn_idmap_del(&s->ids, sm->id);
            reject_sample(s, sm->id);
            continue;
        }
        s->refs++;
        s->inflight++;
        if (sink) {
            /* already in place, and admitted with its frame */
            ow.charge = sm->raw_size;
            (void)sut__budget_attribute(ss->env.budget, &s->peer, ow.charge, 1);
            sut__batcher_sink_add(sink, &ow, (size_t)sm->raw_size);
            ss->st.samples++;
            continue;
        }
        rc = sut__batcher_add(ss->env.bt, &ow, (int)sm->codec, wire, sm->wire_size, sm->raw_size,
                              &eb);
        if (rc == CMN_EOVERLOAD) {
            /* The memory budget is spent (on other peers' samples, most likely): this sample
             * goes elsewhere rather than the connection being dropped. */
            s->refs--;
            s->inflight--;
            cmn_idmap_del(&s->ids, sm->id);
            reject_sample(s, sm->id);
            continue;
        }
        if (rc < 0) {
            s->refs--;
            s->inflight--;
            cmn_idmap_del(&s->ids, sm->id);
            sut__session_fail(s, rc,
                              rc == CMN_EDECOMPRESS ? NSUT__ERROR_CODE__ERROR_DECOMPRESS
                                                    : NSUT__ERROR_CODE__ERROR_INTERNAL,
                              eb.msg);
            break;
        }
        ss->st.samples++;
    }
    charge_decode(s, ss->env.bt->st.decode_ns - decode0);
    if (s->n_res)
        flush_results(s); /* rejected samples */
    sut__session_update_reading(s);
}

void sut__sessions_stats(sut_sessions_t *ss, Nsut__Stats *st)
{
    const sut_batcher_stats_t *bs = &ss->env.bt->st;
    sut_session_t *it;
    uint32_t inflight = 0;

    for (it = ss->head; it; it = it->next)
        inflight += it->inflight;
    st->node_name = (char *)ss->env.name;
    st->uptime_ns = cmn_now_ns() - ss->started_ns;
    st->connections_total = ss->st.connections_total;
    st->connections_open = ss->n;
    st->queries = ss->st.queries;
    st->samples = ss->st.samples;
    st->batches = bs->batches;
    st->bytes_in = ss->st.bytes_in;
    st->bytes_out = ss->st.bytes_out;
    st->decode_ns = bs->decode_ns;
    st->infer_ns = bs->infer_ns;
    st->encode_ns = sut__workers_encode_ns(ss->env.workers);
    st->errors = ss->st.errors;
    st->samples_failed = ss->st.samples_failed;
    st->inflight_samples = inflight;
}

static void handle_peer_error(sut_session_t *s, const Nsut__Error *e)
{
    char txt[300];

    cmn_log_warn("%s: client reported %s: %s; closing", cmn_conn_peer(&s->conn),
                 wire_error_name((int)e->code),
                 cmn_sanitize(e->message ? e->message : "", e->message ? strlen(e->message) : 0,
                              txt, sizeof(txt)));
    cmn_conn_shutdown(&s->conn, CMN_EPEER);
}

static void dispatch_message(sut_session_t *s, unsigned type, const ProtobufCMessage *m,
                             const uint8_t *payload, sut_nbatch_t *sink)
{
    char why[160];

    switch (type) {
    case CMN_MSG_HELLO:
        if (s->ready)
            sut__session_fail(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED, "a second Hello");
        else
            handle_hello(s, (const Nsut__Hello *)m);
        break;
    case CMN_MSG_NAME_REQUEST: {
        Nsut__NameReply r = NSUT__NAME_REPLY__INIT;
        r.request_id = ((const Nsut__NameRequest *)m)->request_id;
        r.node_name = (char *)s->ss->env.name;
        sut__session_send(s, CMN_MSG_NAME_REPLY, &r.base);
        break;
    }
    case CMN_MSG_QUERY:
        handle_query(s, (const Nsut__Query *)m, payload, sink);
        break;
    case CMN_MSG_FLUSH:
        sut__batcher_flush(s->ss->env.bt);
        break;
    case CMN_MSG_PING: {
        Nsut__Pong r = NSUT__PONG__INIT;
        r.seq = ((const Nsut__Ping *)m)->seq;
        r.sent_ns = ((const Nsut__Ping *)m)->sent_ns;
        sut__session_send(s, CMN_MSG_PONG, &r.base);
        break;
    }
    case CMN_MSG_PONG:
        break;
    case CMN_MSG_STATS_REQUEST: {
        Nsut__Stats st = NSUT__STATS__INIT;
        sut__sessions_stats(s->ss, &st);
        sut__session_send(s, CMN_MSG_STATS, &st.base);
        break;
    }
    case CMN_MSG_GOODBYE:
        cmn_log_info("%s: client said goodbye", cmn_conn_peer(&s->conn));
        cmn_conn_shutdown(&s->conn, CMN_ECLOSED);
        break;
    case CMN_MSG_ERROR:
        handle_peer_error(s, (const Nsut__Error *)m);
        break;
    default:
        snprintf(why, sizeof(why), "%s is not a message a client sends", cmn_msg_type_name(type));
        sut__session_fail(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED, why);
        break;
    }
}

static void on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    sut_session_t *s = c->data;
    sut_sessions_t *ss = s->ss;
    cmn_msg_limits_t lim = msg_limits(&ss->env);
    ProtobufCMessage *pre = s->sink_q; /* unpacked by session_sink for this very frame (malloc) */
    ProtobufCMessage *m = pre;
    sut_nbatch_t *sink = s->sink && f->payload == s->sink->input ? s->sink : NULL;
    cmn_errbuf_t eb;
    char why[700];
    int rc;

    s->sink_q = NULL;
    s->sink = NULL;
    s->last_frame_ns = cmn_now_ns();
    /* The idle deadline counts useful traffic only: Pings and Pongs alone do not hold a slot. */
    if (f->hdr.type != CMN_MSG_PING && f->hdr.type != CMN_MSG_PONG)
        s->active_ns = s->last_frame_ns;
    if (f->hdr.type == CMN_MSG_QUERY)
        s->work_ns = s->last_frame_ns;
    ss->st.bytes_in += CMN_FRAME_HEADER_SIZE + f->hdr.meta_len + f->hdr.payload_len;
    if (!m) {
        rc = cmn_msg_unpack(f, &lim, &ss->arena.pb, &m, &eb);
        if (rc < 0) {
            snprintf(why, sizeof(why), "bad %s frame: %s", cmn_msg_type_name(f->hdr.type), eb.msg);
            sut__session_fail(s, rc,
                              rc == CMN_ETOOBIG  ? NSUT__ERROR_CODE__ERROR_TOO_LARGE
                              : rc == CMN_ECODEC ? NSUT__ERROR_CODE__ERROR_CODEC
                                                 : NSUT__ERROR_CODE__ERROR_BAD_MESSAGE,
                              why);
            goto out;
        }
    }
    if (!s->ready && f->hdr.type != CMN_MSG_HELLO) {
        snprintf(why, sizeof(why), "%s before Hello", cmn_msg_type_name(f->hdr.type));
        sut__session_fail(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED, why);
        goto out;
    }
    dispatch_message(s, f->hdr.type, m, f->payload, sink);
out:
    /* A sink batch holds the samples that were admitted, in payload order; without any (a bad
     * frame) it goes back unused. */
    if (sink)
        sut__batcher_sink_commit(ss->env.bt, sink);
    release_frame_charge(s);
    if (pre) {
        cmn_msg_free(pre, NULL);
    } else {
        cmn_msg_free(m, &ss->arena.pb);
        cmn_arena_reset(&ss->arena);
    }
}

static void on_decode_error(cmn_conn_t *c, int err)
{
    sut_session_t *s = c->data;
    const cmn_frame_decoder_t *d = cmn_conn_decoder(c);
    char why[256];
    int wire = NSUT__ERROR_CODE__ERROR_PROTOCOL;

    if (err == CMN_ETOOBIG && d->hdr.meta_len > d->limits.max_meta) {
        /* The metadata limit (it follows --max-inflight), not the frame limit, refused it. */
        wire = NSUT__ERROR_CODE__ERROR_TOO_LARGE;
        snprintf(why, sizeof(why), "frame of %u metadata bytes over the metadata limit of %u%s",
                 d->hdr.meta_len, d->limits.max_meta, s->ready ? "" : " before the handshake");
    } else if (err == CMN_ETOOBIG) {
        wire = NSUT__ERROR_CODE__ERROR_TOO_LARGE;
        snprintf(why, sizeof(why),
                 "frame of %u metadata + %u payload bytes over the limit of %llu%s",
                 d->hdr.meta_len, d->hdr.payload_len, (unsigned long long)d->limits.max_frame,
                 s->ready ? "" : " before the handshake");
    } else if (err == -ENOMEM) {
        wire = NSUT__ERROR_CODE__ERROR_INTERNAL;
        snprintf(why, sizeof(why), "out of memory for a frame");
    } else if ((err == CMN_EFIELD || err == CMN_EOVERLOAD) && cmn_conn_last_error(c)[0]) {
        /* ucx://: lengths that do not add up, or too much sent while frames were held */
        if (err == CMN_EOVERLOAD)
            wire = NSUT__ERROR_CODE__ERROR_OVERLOAD;
        snprintf(why, sizeof(why), "%.200s", cmn_conn_last_error(c));
    } else {
        snprintf(why, sizeof(why), "frame header rejected: %s", cmn_strerror(err));
    }
    sut__session_fail(s, err, wire, why);
}

/* ---- the set of sessions --------------------------------------------------------------------- */

static void unlink_session(sut_sessions_t *ss, sut_session_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        ss->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    ss->n--;
}

static void link_session(sut_sessions_t *ss, sut_session_t *s)
{
    s->prev = NULL;
    s->next = ss->head;
    if (ss->head)
        ss->head->prev = s;
    ss->head = s;
    ss->n++;
}

static void on_session_close(cmn_conn_t *c, int reason)
{
    sut_session_t *s = c->data;
    sut_sessions_t *ss = s->ss;
    const char *fate = "";

    s->dead = 1;
    if (s->sink) {
        /* The connection died mid-payload: the batch never saw a sample. */
        sut__batcher_sink_commit(ss->env.bt, s->sink);
        s->sink = NULL;
    }
    if (s->sink_q) {
        cmn_msg_free(s->sink_q, NULL);
        s->sink_q = NULL;
    }
    release_frame_charge(s);
    if (s->joined)
        sut__budget_leave(ss->env.budget);
    s->joined = 0;
    if (s->preauth)
        ss->n_preauth--;
    if (s->refused)
        ss->n_refused--;
    ss->closed = 1;
    unlink_session(ss, s);
    /* Nobody takes its results any more: the backend stops running its samples (ABI cancel). */
    if (s->inflight && sut__batcher_cancel(ss->env.bt, s))
        fate = ", its samples in flight are cancelled";
    else if (s->inflight)
        fate = ", results still in flight are dropped";
    cmn_log_info("%s: connection closed (%s)%s", cmn_conn_peer(c),
                 reason == CMN_ECLOSED ? "peer closed" : cmn_strerror(reason), fate);
    session_release(s);
}

static void on_spare_closed(uv_handle_t *h);

/* A connection that cannot get a session is still accepted, into the spare handle, and closed:
 * a listener whose pending connection is never accepted stops accepting altogether. */
static void refuse(sut_sessions_t *ss, uv_stream_t *server)
{
    if (ss->spare_busy) {
        ss->refuse_pending = server; /* taken when the spare is free again */
        return;
    }
    ss->spare_busy = 1;
    uv_tcp_init(ss->loop, &ss->spare);
    ss->spare.data = ss;
    (void)uv_accept(server, (uv_stream_t *)&ss->spare);
    uv_close((uv_handle_t *)&ss->spare, on_spare_closed);
}

static void on_spare_closed(uv_handle_t *h)
{
    sut_sessions_t *ss = h->data;
    uv_stream_t *server = ss->refuse_pending;

    ss->spare_busy = 0;
    ss->refuse_pending = NULL;
    if (server && !uv_is_closing((uv_handle_t *)server))
        refuse(ss, server);
}

/* At --max-connections (or --max-preauth), a newcomer takes the slot of the connection that has
 * sent no Query for the longest time, at least EVICT_GRACE_MS since its last Query (or its
 * accept), with no sample in flight and no frame half received: a peer that holds a slot with
 * Pings alone would otherwise keep good clients out until its --idle-timeout-ms. */
#define EVICT_GRACE_MS 2000u

static void evict_idle(sut_sessions_t *ss, sut_session_t *s, int preauth_only, const char *limit)
{
    uint64_t now = cmn_now_ns();
    sut_session_t *it, *v = NULL;
    char why[200];

    for (it = ss->head; it; it = it->next) {
        if (it == s || it->refused || it->dead || cmn_conn_closing(&it->conn) || it->inflight ||
            it->sink || (preauth_only && !it->preauth) ||
            cmn_frame_decoder_partial(cmn_conn_decoder(&it->conn)) ||
            now - it->work_ns < EVICT_GRACE_MS * 1000000ull)
            continue;
        if (!v || it->work_ns < v->work_ns)
            v = it;
    }
    if (!v)
        return;
    snprintf(why, sizeof(why),
             "evicted: no Query for %llu ms and nothing in flight while the node is at %s and "
             "%s is connecting",
             (unsigned long long)((now - v->work_ns) / 1000000u), limit, s->peer_ip);
    v->refused = 1; /* its slot is free from now on; only its Error frame and close are left */
    ss->n_refused++;
    if (v->preauth) {
        v->preauth = 0;
        ss->n_preauth--;
    }
    sut__session_fail(v, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
}

/* Admission: the limits on connections, checked before any TLS work. Returns NULL or why the
 * connection is refused. */
static const char *admission(sut_sessions_t *ss, sut_session_t *s, char *why, size_t cap)
{
    const sut_opts_t *o = ss->env.opt;
    sut_session_t *it;
    uint32_t same_peer = 0;

    for (it = ss->head; it; it = it->next)
        same_peer += it != s && !it->refused && strcmp(it->peer_ip, s->peer_ip) == 0;
    if (same_peer < o->max_conn_per_peer && ss->n - ss->n_refused > o->max_connections)
        evict_idle(ss, s, 0, "--max-connections");
    if (same_peer < o->max_conn_per_peer && ss->n_preauth >= o->max_preauth)
        evict_idle(ss, s, 1, "--max-preauth");
    if (ss->n - ss->n_refused > o->max_connections)
        snprintf(why, cap, "over the limit of %u connections", o->max_connections);
    else if (ss->n_preauth >= o->max_preauth)
        snprintf(why, cap, "over the limit of %u connections before their Hello", o->max_preauth);
    else if (same_peer >= o->max_conn_per_peer)
        snprintf(why, cap, "over the limit of %u connections from %s", o->max_conn_per_peer,
                 s->peer_ip);
    else
        return NULL;
    return why;
}

static void peer_ip(sut_session_t *s)
{
    char *colon;

    /* The accepted socket's peer (ucx://: the address UCX's connection request named). */
    snprintf(s->peer_ip, sizeof(s->peer_ip), "%s", cmn_conn_peer(&s->conn));
    colon = strrchr(s->peer_ip, ':');
    if (colon)
        *colon = '\0';
}

/* Over a limit: a plaintext peer gets an Error frame saying which; a TLS peer is closed before
 * any TLS work (an Error frame would need a TLS session first). */
static void refuse_session(sut_sessions_t *ss, sut_session_t *s, const char *why)
{
    s->refused = 1;
    ss->n_refused++;
    if (ss->env.tls || cmn_conn_start(&s->conn) < 0) {
        ss->st.errors++;
        cmn_log_warn("%s: connection refused: %s", s->peer_ip, why);
        cmn_conn_close(&s->conn, CMN_EOVERLOAD);
        return;
    }
    sut__session_fail(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
}

void sut__sessions_accept(sut_sessions_t *ss, uv_stream_t *server, struct cmn_ucx_incoming *in)
{
    static const cmn_conn_callbacks_t cb = {on_frame, on_decode_error, on_session_close, on_drain};
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    sut_session_t *s = sut__calloc(1, sizeof(*s));
    const char *refusal;
    char why[160];
    int rc;

    if (!s) {
        cmn_log_error("accept: out of memory for a session; connection refused");
        if (!in) /* a ucx:// request not taken is rejected */
            refuse(ss, server);
        return;
    }
    rc = cmn_conn_init(ss->loop, &s->conn, &cb, &ss->conn_opt, &pre);
    if (rc < 0) {
        cmn_log_error("accept: connection set-up failed: %s; connection refused", cmn_strerror(rc));
        free(s);
        if (!in) /* a ucx:// request not taken is rejected */
            refuse(ss, server);
        return;
    }
    /* From here the connection's handles are on the loop: the session is freed only by
     * on_session_close, so every failure below closes the connection instead. */
    s->ss = ss;
    s->refs = 1;
    s->conn.data = s;
    cmn_idmap_init(&s->ids);
    s->accepted_ns = s->last_frame_ns = s->active_ns = s->work_ns = cmn_now_ns();
    link_session(ss, s);
    rc = in ? cmn_conn_accept_ucx(&s->conn, in) : cmn_conn_accept(&s->conn, server);
    if (rc < 0) {
        cmn_log_error("accept: %s", cmn_strerror(rc));
        cmn_conn_close(&s->conn, rc);
        return;
    }
    peer_ip(s);
    refusal = admission(ss, s, why, sizeof(why));
    if (refusal) {
        refuse_session(ss, s, refusal);
        return;
    }
    s->preauth = 1;
    ss->n_preauth++;
    if (ss->env.tls && (rc = cmn_conn_use_tls(&s->conn, ss->env.tls, NULL)) < 0)
        cmn_log_error("accept: TLS set-up failed: %s; connection closed", cmn_strerror(rc));
    else if ((rc = cmn_conn_start(&s->conn)) < 0)
        cmn_log_error("accept: %s", cmn_strerror(rc));
    if (rc < 0) {
        cmn_conn_close(&s->conn, rc);
        return;
    }
    cmn_conn_set_sink(&s->conn, session_sink, s, SINK_MIN_PAYLOAD);
    cmn_conn_set_on_partial(&s->conn, on_partial);
    ss->st.connections_total++;
    cmn_log_debug("%s: connected (%u open)", cmn_conn_peer(&s->conn), ss->n);
}

int sut__sessions_closed(sut_sessions_t *ss)
{
    int c = ss->closed;
    ss->closed = 0;
    return c;
}

void sut__sessions_drain(sut_sessions_t *ss)
{
    ss->draining = 1;
}

void sut__sessions_goodbye(sut_sessions_t *ss, const char *reason)
{
    sut_session_t *s, *next;

    for (s = ss->head; s; s = next) {
        Nsut__Goodbye g = NSUT__GOODBYE__INIT;
        next = s->next;
        if (cmn_conn_closing(&s->conn))
            continue;
        g.reason = (char *)reason;
        sut__session_send(s, CMN_MSG_GOODBYE, &g.base);
        cmn_conn_shutdown(&s->conn, CMN_ECLOSED);
    }
}

void sut__sessions_init(sut_sessions_t *ss, uv_loop_t *loop, const sut_sessions_env_t *env)
{
    memset(ss, 0, sizeof(*ss));
    ss->env = *env;
    ss->loop = loop;
    ss->started_ns = cmn_now_ns();
    cmn_arena_init(&ss->arena, 64u * 1024u);
    /* Results one peer may leave queued: its share of a quarter of the budget, 256 KiB to 16 MiB
     * (the default). Above it the peer's reading pauses. */
    ss->conn_opt = cmn_conn_options_default();
    {
        uint64_t share =
            env->budget->limit / 4 / (env->opt->max_connections ? env->opt->max_connections : 1);
        if (share < (256u << 10))
            share = 256u << 10;
        if (share < ss->conn_opt.write_high_water)
            ss->conn_opt.write_high_water = (size_t)share;
        ss->conn_opt.write_low_water = ss->conn_opt.write_high_water / 4;
    }
    ss->conn_opt.hold_ns = env->opt->response_hold_us * 1000u;
    ss->conn_opt.copy_alloc = copy_alloc;
    ss->conn_opt.copy_free = copy_free;
    ss->conn_opt.copy_ctx = env->budget;
}

void sut__sessions_free(sut_sessions_t *ss)
{
    cmn_arena_free(&ss->arena);
}
