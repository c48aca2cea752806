/* The session protocol (session.h): the handshake, the frames a client sends and what each
 * asks for (Query to session_admit.c, the others answered here), the set of sessions, accept,
 * close, drain and Goodbye. The top of the session files: it calls session_admit.c,
 * session_results.c and session.c, and none of them calls it. */
#include "session.h"

#include "alloc.h"
#include "cmn/clock.h"
#include "cmn/list.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Codecs this build can decode, in order of preference. */
static const int supported_codecs[] = {CMPR_NONE, CMPR_LZ4};

/* The metadata of one Sample is under 48 bytes: the metadata limit follows the in-flight limit,
 * so a Query's metadata is refused by its header before protobuf-c unpacks it. */
#define META_PER_SAMPLE 64u
#define META_BASE 4096u

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

static void on_drain(cmn_conn_t *c)
{
    sut__session_update_reading(c->data);
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
                 sut__session_wire_error_name((int)e->code),
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
        sut__session_handle_query(s, (const Nsut__Query *)m, payload, sink);
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
    cmn_msg_limits_t lim = sut__session_msg_limits(&ss->env);
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
    sut__session_release_frame_charge(s);
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
    CMN_DLIST_UNLINK(ss->head, s, prev, next);
    s->prev = s->next = NULL;
    ss->n--;
}

static void link_session(sut_sessions_t *ss, sut_session_t *s)
{
    CMN_DLIST_PUSH(ss->head, s, prev, next);
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
    sut__session_release_frame_charge(s);
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
    sut__session_release(s);
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

static void peer_ip(sut_session_t *s)
{
    char *colon;

    /* The accepted socket's peer (ucx://: the address UCX's connection request named). */
    snprintf(s->peer_ip, sizeof(s->peer_ip), "%s", cmn_conn_peer(&s->conn));
    colon = strrchr(s->peer_ip, ':');
    if (colon)
        *colon = '\0';
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
    refusal = sut__session_admission(ss, s, why, sizeof(why));
    if (refusal) {
        sut__session_refuse(ss, s, refusal);
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
    sut__session_admit_frames(s);
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
    sut__session_copy_hooks(&ss->conn_opt, env->budget);
}

void sut__sessions_free(sut_sessions_t *ss)
{
    cmn_arena_free(&ss->arena);
}
