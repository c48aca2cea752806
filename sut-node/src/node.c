/* sut-node: listeners, connections (sessions), the handshake, frame handling, deadlines,
 * limits and the orderly shutdown. The wire protocol is proto/README.md. */
#include "node.h"

#include "cmn/arena.h"
#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICK_MS 250u

/* Codecs this build can decode, in order of preference. */
static const int supported_codecs[] = {CMPR_NONE, CMPR_LZ4};

void sut__opts_defaults(sut_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->backend = "null";
    o->device = "cpu";
    o->max_batch_bytes = 64u << 20;
    o->result_codec = CMPR_NONE;
    o->max_frame = CMN_FRAME_DEFAULT_MAX;
    o->max_connections = 256;
    o->max_conn_per_peer = 64;
    o->max_inflight = 0; /* auto: see sut__node_init */
    o->handshake_timeout_ms = 5000;
    o->frame_timeout_ms = 10000;
    o->drain_timeout_ms = 30000;
    o->heartbeat_ms = 1000;
}

char *sut__opts_own(sut_opts_t *o, char *s)
{
    if (!s || o->n_owned == sizeof(o->owned) / sizeof(o->owned[0])) {
        free(s);
        return NULL;
    }
    o->owned[o->n_owned++] = s;
    return s;
}

void sut__opts_free(sut_opts_t *o)
{
    while (o->n_owned)
        free(o->owned[--o->n_owned]);
}

/* ---- sessions -------------------------------------------------------------------------------- */

void sut__session_release(sut_session_t *s)
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

void sut__session_protocol_error(sut_session_t *s, int code, int wire_err, const char *why)
{
    Nsut__Error e = NSUT__ERROR__INIT;

    if (s->conn.closing)
        return;
    s->node->st.errors++;
    cmn_log_warn("%s: %s (%s); closing the connection", s->conn.peer, why,
                 wire_error_name(wire_err));
    e.code = (Nsut__ErrorCode)wire_err;
    e.message = (char *)why;
    (void)cmn_conn_send(&s->conn, CMN_MSG_ERROR, &e.base, NULL, 0, NULL, NULL);
    cmn_conn_shutdown(&s->conn, code);
}

static void session_send(sut_session_t *s, unsigned type, const ProtobufCMessage *m)
{
    int rc = cmn_conn_send(&s->conn, type, m, NULL, 0, NULL, NULL);
    if (rc < 0 && rc != CMN_ECLOSED)
        cmn_log_error("%s: cannot send %s: %s", s->conn.peer, cmn_msg_type_name(type),
                      cmn_strerror(rc));
}

static void handle_hello(sut_session_t *s, const Nsut__Hello *h)
{
    sut_node_t *n = s->node;
    Nsut__HelloAck ack = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    Nsut__Codec accepted[8];
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    size_t i, k, na = 0;
    char why[256], client[128];
    int result_codec = CMPR_NONE;

    if (h->version_min > CMN_PROTOCOL_VERSION || h->version_max < CMN_PROTOCOL_VERSION) {
        snprintf(why, sizeof(why),
                 "no common protocol version: client speaks %u..%u, node speaks %u..%u",
                 h->version_min, h->version_max, CMN_PROTOCOL_VERSION, CMN_PROTOCOL_VERSION);
        sut__session_protocol_error(s, CMN_EVERSION, NSUT__ERROR_CODE__ERROR_VERSION, why);
        return;
    }
    for (i = 0; i < h->n_sample_codecs; i++) {
        for (k = 0; k < sizeof(supported_codecs) / sizeof(supported_codecs[0]); k++) {
            if ((int)h->sample_codecs[i] == supported_codecs[k] &&
                !(s->sample_codecs & (1u << h->sample_codecs[i]))) {
                s->sample_codecs |= 1u << h->sample_codecs[i];
                accepted[na++] = h->sample_codecs[i];
            }
        }
    }
    if (!(s->sample_codecs & (1u << CMPR_NONE))) {
        /* Uncompressed samples are always understood, whatever the offer said. */
        s->sample_codecs |= 1u << CMPR_NONE;
    }
    for (i = 0; i < h->n_result_codecs; i++) {
        if ((int)h->result_codecs[i] == n->opt.result_codec)
            result_codec = n->opt.result_codec;
    }
    s->result_codec = result_codec;
    s->result_max_frame = h->max_frame_size && h->max_frame_size < CMN_FRAME_ABS_MAX
                              ? h->max_frame_size
                              : CMN_FRAME_DEFAULT_MAX;
    caps.backend = (char *)n->info.name;
    caps.device = (char *)n->info.device;
    caps.max_batch = n->max_batch;
    caps.preferred_batch = n->info.preferred_batch;
    caps.max_frame_size = n->opt.max_frame;
    caps.max_inflight_samples = n->opt.max_inflight;
    caps.streaming = (n->info.flags & SUT_BACKEND_F_STREAMING) != 0;
    caps.output_size = n->info.output_size;
    caps.engines = n->engines;
    caps.weight = n->info.weight;
    ack.version = CMN_PROTOCOL_VERSION;
    ack.n_sample_codecs = na;
    ack.sample_codecs = accepted;
    ack.result_codec = (Nsut__Codec)result_codec;
    ack.node_name = n->name;
    ack.caps = &caps;
    session_send(s, CMN_MSG_HELLO_ACK, &ack.base);
    lim.max_frame = n->opt.max_frame;
    cmn_conn_set_limits(&s->conn, &lim);
    s->ready = 1;
    cmn_log_info("%s: handshake done (client '%s', result codec %s)", s->conn.peer,
                 cmn_sanitize(h->client_name ? h->client_name : "",
                              h->client_name ? strlen(h->client_name) : 0, client, sizeof(client)),
                 cmpr_codec_name(result_codec));
}

/* Frames below this payload size are cheaper to copy than to give a batch of their own. */
#define SINK_MIN_PAYLOAD (64u * 1024u)

/* The decoder's payload sink: a Query whose samples are all uncompressed and that fills a batch
 * by itself gets a batch of its own, and its payload is read from the socket straight into that
 * batch's input (no copy in user space). Anything else returns NULL and takes the normal path,
 * which also reports any error in the frame. */
static uint8_t *session_sink(void *arg, const cmn_frame_header_t *h, const uint8_t *meta)
{
    sut_session_t *s = arg;
    sut_node_t *n = s->node;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    const Nsut__Query *q;
    cmn_frame_t f;
    uint8_t *dst = NULL;
    size_t i;

    if (h->type != CMN_MSG_QUERY || !s->ready || n->draining || s->sink)
        return NULL;
    f.hdr = *h;
    f.meta = meta;
    f.payload = NULL;
    lim.max_sample_size = n->opt.max_frame;
    if (cmn_msg_unpack(&f, &lim, &n->arena.pb, &m, NULL) < 0)
        goto out;
    q = (const Nsut__Query *)m;
    if (q->n_samples > n->max_batch ||
        (q->n_samples < n->info.preferred_batch && n->info.preferred_batch > 1))
        goto out;
    for (i = 0; i < q->n_samples; i++)
        if (q->samples[i]->codec != NSUT__CODEC__CODEC_NONE)
            goto out;
    s->sink = sut__batcher_sink_open(n, h->payload_len);
    if (s->sink)
        dst = s->sink->input;
out:
    cmn_msg_free(m, &n->arena.pb);
    cmn_arena_reset(&n->arena);
    return dst;
}

static void handle_query(sut_session_t *s, const Nsut__Query *q, const uint8_t *payload)
{
    sut_node_t *n = s->node;
    const uint8_t *p = payload;
    sut_nbatch_t *sink = s->sink && payload == s->sink->input ? s->sink : NULL;
    cmn_errbuf_t eb;
    size_t i;
    int rc;

    s->sink = NULL;
    n->st.queries++;
    for (i = 0; i < q->n_samples; i++) {
        const Nsut__Sample *sm = q->samples[i];
        const uint8_t *wire = p;
        int codec = (int)sm->codec;

        p += sm->wire_size;
        if (!(s->sample_codecs & (1u << codec))) {
            snprintf(eb.msg, sizeof(eb.msg), "sample %llu uses codec %s, which was not negotiated",
                     (unsigned long long)sm->id, cmpr_codec_name(codec));
            sut__session_protocol_error(s, CMN_ECODEC, NSUT__ERROR_CODE__ERROR_CODEC, eb.msg);
            break;
        }
        rc = cmpr_check_sizes(codec, sm->raw_size, sm->wire_size, n->opt.max_frame, &eb);
        if (rc < 0) {
            char why[600];
            snprintf(why, sizeof(why), "sample %llu: %s", (unsigned long long)sm->id, eb.msg);
            sut__session_protocol_error(s, rc,
                                        rc == CMN_ETOOBIG ? NSUT__ERROR_CODE__ERROR_TOO_LARGE
                                                          : NSUT__ERROR_CODE__ERROR_DECOMPRESS,
                                        why);
            break;
        }
        if (n->draining) {
            sut__reject_sample(n, s, sm->id);
            continue;
        }
        rc = cmn_idmap_put(&s->ids, sm->id, s);
        if (rc == UV_EEXIST) {
            snprintf(eb.msg, sizeof(eb.msg),
                     "sample id %llu is already in flight on this connection",
                     (unsigned long long)sm->id);
            sut__session_protocol_error(s, CMN_EFIELD, NSUT__ERROR_CODE__ERROR_BAD_MESSAGE, eb.msg);
            break;
        }
        if (rc < 0) {
            sut__session_protocol_error(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL, "out of memory");
            break;
        }
        /* Counted before the batcher sees it: an inline backend may complete it before
         * sut__batcher_add returns. */
        s->refs++;
        s->inflight++;
        if (sink) {
            /* Already in place in the sink batch's input. */
            sut__batcher_sink_add(sink, s, sm->id, (size_t)sm->raw_size);
            n->st.samples++;
            continue;
        }
        rc = sut__batcher_add(n, s, sm->id, codec, wire, sm->wire_size, sm->raw_size, &eb);
        if (rc < 0) {
            s->refs--;
            s->inflight--;
            cmn_idmap_del(&s->ids, sm->id);
            sut__session_protocol_error(s, rc,
                                        rc == CMN_EDECOMPRESS ? NSUT__ERROR_CODE__ERROR_DECOMPRESS
                                                              : NSUT__ERROR_CODE__ERROR_INTERNAL,
                                        eb.msg);
            break;
        }
        n->st.samples++;
    }
    /* A sink batch holds the samples that passed, in payload order up to the first failure. */
    if (sink)
        sut__batcher_sink_commit(n, sink);
    if (s->n_res)
        sut__session_flush_results(s); /* samples rejected while draining */
    if (s->inflight >= n->opt.max_inflight)
        cmn_conn_read_pause(&s->conn);
}

static void handle_stats(sut_session_t *s)
{
    sut_node_t *n = s->node;
    Nsut__Stats st = NSUT__STATS__INIT;
    sut_session_t *it;
    uint32_t inflight = 0;

    for (it = n->sessions; it; it = it->next)
        inflight += it->inflight;
    st.node_name = n->name;
    st.uptime_ns = cmn_now_ns() - n->started_ns;
    st.connections_total = n->st.connections_total;
    st.connections_open = n->n_sessions;
    st.queries = n->st.queries;
    st.samples = n->st.samples;
    st.batches = n->st.batches;
    st.bytes_in = n->st.bytes_in;
    st.bytes_out = n->st.bytes_out;
    st.decode_ns = n->st.decode_ns;
    st.infer_ns = n->st.infer_ns;
    st.encode_ns = atomic_load(&n->encode_ns);
    st.errors = n->st.errors;
    st.samples_failed = n->st.samples_failed;
    st.inflight_samples = inflight;
    session_send(s, CMN_MSG_STATS, &st.base);
}

static void on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    sut_session_t *s = c->data;
    sut_node_t *n = s->node;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    cmn_arena_t *arena = &n->arena;
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;
    char why[700];
    int rc;

    n->st.bytes_in += CMN_FRAME_HEADER_SIZE + f->hdr.meta_len + f->hdr.payload_len;
    lim.max_sample_size = n->opt.max_frame;
    rc = cmn_msg_unpack(f, &lim, &arena->pb, &m, &eb);
    if (rc < 0) {
        snprintf(why, sizeof(why), "bad %s frame: %s", cmn_msg_type_name(f->hdr.type), eb.msg);
        sut__session_protocol_error(s, rc,
                                    rc == CMN_ETOOBIG  ? NSUT__ERROR_CODE__ERROR_TOO_LARGE
                                    : rc == CMN_ECODEC ? NSUT__ERROR_CODE__ERROR_CODEC
                                                       : NSUT__ERROR_CODE__ERROR_BAD_MESSAGE,
                                    why);
        goto out;
    }
    if (!s->ready && f->hdr.type != CMN_MSG_HELLO) {
        snprintf(why, sizeof(why), "%s before Hello", cmn_msg_type_name(f->hdr.type));
        sut__session_protocol_error(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED, why);
        goto out;
    }
    switch (f->hdr.type) {
    case CMN_MSG_HELLO:
        if (s->ready) {
            sut__session_protocol_error(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED,
                                        "a second Hello");
            break;
        }
        handle_hello(s, (const Nsut__Hello *)m);
        break;
    case CMN_MSG_NAME_REQUEST: {
        Nsut__NameReply r = NSUT__NAME_REPLY__INIT;
        r.request_id = ((const Nsut__NameRequest *)m)->request_id;
        r.node_name = n->name;
        session_send(s, CMN_MSG_NAME_REPLY, &r.base);
        break;
    }
    case CMN_MSG_QUERY:
        handle_query(s, (const Nsut__Query *)m, f->payload);
        break;
    case CMN_MSG_FLUSH:
        sut__batcher_flush(n);
        break;
    case CMN_MSG_PING: {
        Nsut__Pong r = NSUT__PONG__INIT;
        r.seq = ((const Nsut__Ping *)m)->seq;
        r.sent_ns = ((const Nsut__Ping *)m)->sent_ns;
        session_send(s, CMN_MSG_PONG, &r.base);
        break;
    }
    case CMN_MSG_PONG:
        break;
    case CMN_MSG_STATS_REQUEST:
        handle_stats(s);
        break;
    case CMN_MSG_GOODBYE:
        cmn_log_info("%s: client said goodbye", c->peer);
        cmn_conn_shutdown(c, CMN_ECLOSED);
        break;
    case CMN_MSG_ERROR: {
        const Nsut__Error *e = (const Nsut__Error *)m;
        char txt[300];
        cmn_log_warn("%s: client reported %s: %s; closing", c->peer, wire_error_name((int)e->code),
                     cmn_sanitize(e->message ? e->message : "", e->message ? strlen(e->message) : 0,
                                  txt, sizeof(txt)));
        cmn_conn_shutdown(c, CMN_EPEER);
        break;
    }
    default:
        snprintf(why, sizeof(why), "%s is not a message a client sends",
                 cmn_msg_type_name(f->hdr.type));
        sut__session_protocol_error(s, CMN_ESTATE, NSUT__ERROR_CODE__ERROR_UNEXPECTED, why);
        break;
    }
out:
    /* A sink batch whose frame was not a good Query goes back unused. */
    if (s->sink && f->payload == s->sink->input) {
        sut__batcher_sink_commit(n, s->sink);
        s->sink = NULL;
    }
    cmn_msg_free(m, &arena->pb);
    cmn_arena_reset(arena);
}

static void on_decode_error(cmn_conn_t *c, int err)
{
    sut_session_t *s = c->data;
    char why[256];
    int wire = NSUT__ERROR_CODE__ERROR_PROTOCOL;

    if (err == CMN_ETOOBIG) {
        wire = NSUT__ERROR_CODE__ERROR_TOO_LARGE;
        snprintf(
            why, sizeof(why), "frame of %u metadata + %u payload bytes over the limit of %llu%s",
            c->dec.hdr.meta_len, c->dec.hdr.payload_len,
            (unsigned long long)c->dec.limits.max_frame, s->ready ? "" : " before the handshake");
    } else if (err == UV_ENOMEM) {
        wire = NSUT__ERROR_CODE__ERROR_INTERNAL;
        snprintf(why, sizeof(why), "out of memory for a frame");
    } else {
        snprintf(why, sizeof(why), "frame header rejected: %s", cmn_strerror(err));
    }
    sut__session_protocol_error(s, err, wire, why);
}

static void node_check_drained(sut_node_t *n);

static void on_session_close(cmn_conn_t *c, int reason)
{
    sut_session_t *s = c->data;
    sut_node_t *n = s->node;

    s->dead = 1;
    if (s->sink) {
        /* The connection died mid-payload: the batch never saw a sample. */
        sut__batcher_sink_commit(n, s->sink);
        s->sink = NULL;
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        n->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    n->n_sessions--;
    cmn_log_info("%s: connection closed (%s)%s", c->peer,
                 reason == CMN_ECLOSED ? "peer closed" : cmn_strerror(reason),
                 s->inflight ? ", results still in flight are dropped" : "");
    sut__session_release(s);
    if (n->draining)
        node_check_drained(n);
}

/* A new session from a tcp:// |server| or a ucx:// connection request |in|. */
static void session_accept(sut_node_t *n, uv_stream_t *server, cmn_ucx_incoming_t *in)
{
    static const cmn_conn_callbacks_t cb = {on_frame, on_decode_error, on_session_close, NULL};
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    cmn_conn_options_t copt = cmn_conn_options_default();
    sut_session_t *s, *it;
    uint32_t same_peer = 0;
    char *colon;
    int rc;

    s = calloc(1, sizeof(*s));
    if (!s || cmn_conn_init(n->loop, &s->conn, &cb, &copt, &pre) < 0) {
        cmn_log_error("out of memory for a connection");
        free(s);
        return;
    }
    s->node = n;
    s->refs = 1;
    s->conn.data = s;
    if (n->tls && cmn_conn_use_tls(&s->conn, n->tls, NULL) < 0) {
        cmn_log_error("out of memory for a TLS session");
        free(s);
        return;
    }
    cmn_idmap_init(&s->ids);
    s->accepted_ns = s->progress_ns = cmn_now_ns();
    cmn_frame_decoder_set_sink(&s->conn.dec, session_sink, s, SINK_MIN_PAYLOAD);
    rc = in ? cmn_conn_accept_ucx(&s->conn, in) : uv_accept(server, (uv_stream_t *)&s->conn.tcp);
    if (rc < 0 || (rc = cmn_conn_start(&s->conn)) < 0) {
        cmn_log_error("accept: %s", cmn_strerror(rc));
        n->n_sessions++; /* balanced in on_session_close */
        s->next = n->sessions;
        if (n->sessions)
            n->sessions->prev = s;
        n->sessions = s;
        cmn_conn_close(&s->conn, rc);
        return;
    }
    snprintf(s->peer_ip, sizeof(s->peer_ip), "%s", s->conn.peer);
    colon = strrchr(s->peer_ip, ':');
    if (colon)
        *colon = '\0';
    for (it = n->sessions; it; it = it->next)
        same_peer += strcmp(it->peer_ip, s->peer_ip) == 0;
    s->next = n->sessions;
    if (n->sessions)
        n->sessions->prev = s;
    n->sessions = s;
    n->n_sessions++;
    n->st.connections_total++;
    cmn_log_debug("%s: connected (%u open)", s->conn.peer, n->n_sessions);
    if (n->n_sessions > n->opt.max_connections) {
        char why[128];
        snprintf(why, sizeof(why), "over the limit of %u connections", n->opt.max_connections);
        sut__session_protocol_error(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
    } else if (same_peer >= n->opt.max_conn_per_peer) {
        char why[128];
        snprintf(why, sizeof(why), "over the limit of %u connections from %s",
                 n->opt.max_conn_per_peer, s->peer_ip);
        sut__session_protocol_error(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) {
        cmn_log_error("accept: %s", cmn_strerror(status));
        return;
    }
    session_accept(server->data, server, NULL);
}

static void on_ucx_connection(cmn_ucx_listener_t *l, cmn_ucx_incoming_t *in, void *arg)
{
    (void)l;
    session_accept(arg, NULL, in);
}

/* ucx:// listeners go with the tcp:// ones (stop, drain). */
static void close_ucx_listeners(sut_node_t *n)
{
    size_t i;

    for (i = 0; i < SUT_MAX_LISTEN; i++) {
        cmn_ucx_listener_close(n->ucx_listeners[i]);
        n->ucx_listeners[i] = NULL;
    }
}

/* ---- timers, signals, drain ------------------------------------------------------------------ */

static void on_tick(uv_timer_t *t)
{
    sut_node_t *n = t->data;
    uint64_t now = cmn_now_ns();
    sut_session_t *s, *next;
    char why[160];

    for (s = n->sessions; s; s = next) {
        next = s->next;
        if (s->conn.closing)
            continue;
        if (!s->ready && now - s->accepted_ns > n->opt.handshake_timeout_ms * 1000000u) {
            snprintf(why, sizeof(why), "no Hello within %llu ms",
                     (unsigned long long)n->opt.handshake_timeout_ms);
            sut__session_protocol_error(s, CMN_ETIMEOUT, NSUT__ERROR_CODE__ERROR_TIMEOUT, why);
            continue;
        }
        /* Heartbeat: the client judges a node alive by any frame from it, and a node that has
         * paused reading (in-flight limit) or whose socket is full of queries cannot answer its
         * Pings in time; so it sends one of its own on a connection that heard nothing lately. */
        if (s->ready && n->opt.heartbeat_ms) {
            if (s->conn.frames_out != s->hb_frames) {
                s->hb_frames = s->conn.frames_out;
                s->hb_ns = now;
            } else if (now - s->hb_ns >= n->opt.heartbeat_ms * 1000000u) {
                Nsut__Ping hb = NSUT__PING__INIT;
                hb.seq = ++s->hb_seq;
                hb.sent_ns = now;
                session_send(s, CMN_MSG_PING, &hb.base);
                s->hb_frames = s->conn.frames_out;
                s->hb_ns = now;
            }
        }
        if (!cmn_frame_decoder_partial(&s->conn.dec) || s->conn.bytes_in != s->progress_bytes) {
            s->progress_bytes = s->conn.bytes_in;
            s->progress_ns = now;
        } else if (now - s->progress_ns > n->opt.frame_timeout_ms * 1000000u) {
            snprintf(why, sizeof(why), "a frame half received and no byte for %llu ms",
                     (unsigned long long)n->opt.frame_timeout_ms);
            sut__session_protocol_error(s, CMN_ETIMEOUT, NSUT__ERROR_CODE__ERROR_TIMEOUT, why);
        }
    }
}

static void on_batch_check(uv_check_t *h)
{
    sut__batcher_kick(h->data);
}

void sut__node_log_stats(sut_node_t *n)
{
    cmn_log_info("stats: %u connections open (%llu total), %llu queries, %llu samples (%llu "
                 "failed, %llu rejected), "
                 "%llu batches, %llu bytes in, %llu bytes out, decode %.3f s, infer %.3f s, encode "
                 "%.3f s, %llu errors",
                 n->n_sessions, (unsigned long long)n->st.connections_total,
                 (unsigned long long)n->st.queries, (unsigned long long)n->st.samples,
                 (unsigned long long)n->st.samples_failed,
                 (unsigned long long)n->st.samples_rejected, (unsigned long long)n->st.batches,
                 (unsigned long long)n->st.bytes_in, (unsigned long long)n->st.bytes_out,
                 (double)n->st.decode_ns / 1e9, (double)n->st.infer_ns / 1e9,
                 (double)atomic_load(&n->encode_ns) / 1e9, (unsigned long long)n->st.errors);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void sut__node_stop(sut_node_t *n)
{
    size_t i;

    if (n->stopping || !n->handles_ready)
        return;
    n->stopping = 1;
    for (i = 0; i < n->n_listeners; i++)
        close_handle((uv_handle_t *)&n->listeners[i]);
    close_ucx_listeners(n);
    cmn_ucx_close(n->ucx); /* once its last session has closed */
    n->ucx = NULL;
    close_handle((uv_handle_t *)&n->tick);
    close_handle((uv_handle_t *)&n->batch_timer);
    close_handle((uv_handle_t *)&n->batch_check);
    close_handle((uv_handle_t *)&n->drain_timer);
    close_handle((uv_handle_t *)&n->sig_term);
    close_handle((uv_handle_t *)&n->sig_int);
    close_handle((uv_handle_t *)&n->sig_hup);
    cmn_xq_close(&n->done_q, NULL);
}

static void node_check_drained(sut_node_t *n)
{
    sut_session_t *s, *next;

    if (n->stopping || n->batches_inflight > 0 || (n->open && n->open->b.n > 0))
        return;
    /* Every result is out: say goodbye on each connection, then stop. */
    for (s = n->sessions; s; s = next) {
        Nsut__Goodbye g = NSUT__GOODBYE__INIT;
        next = s->next;
        if (s->conn.closing)
            continue;
        g.reason = (char *)"node shutting down";
        session_send(s, CMN_MSG_GOODBYE, &g.base);
        cmn_conn_shutdown(&s->conn, CMN_ECLOSED);
    }
    sut__node_log_stats(n);
    cmn_log_info("drained: every result sent; exiting");
    sut__node_stop(n);
}

static void on_drain_timeout(uv_timer_t *t)
{
    sut_node_t *n = t->data;
    cmn_log_error("shutdown: %u batches still running after %llu ms; exiting without their results",
                  n->batches_inflight, (unsigned long long)n->opt.drain_timeout_ms);
    /* A backend thread may still complete into the queue; the process must not outlive it in a
     * half-torn-down state. */
    _exit(1);
}

void sut__node_drain(sut_node_t *n, const char *why)
{
    size_t i;

    if (!n->draining) {
        n->draining = 1;
        cmn_log_info("%s: stop accepting, finishing the samples in flight", why ? why : "shutdown");
        for (i = 0; i < n->n_listeners; i++)
            close_handle((uv_handle_t *)&n->listeners[i]);
        close_ucx_listeners(n);
        sut__batcher_flush(n);
        n->drain_timer.data = n;
        uv_timer_start(&n->drain_timer, on_drain_timeout, n->opt.drain_timeout_ms, 0);
    }
    node_check_drained(n);
}

static void on_signal(uv_signal_t *h, int signum)
{
    sut_node_t *n = h->data;

    if (signum == SIGHUP) {
        sut__node_log_stats(n);
        return;
    }
    if (n->draining) {
        cmn_log_error("second %s while draining: exiting now",
                      signum == SIGINT ? "SIGINT" : "SIGTERM");
        _exit(1);
    }
    sut__node_drain(n, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* ---- set-up ---------------------------------------------------------------------------------- */

int sut__node_init(sut_node_t *n, uv_loop_t *loop, const sut_opts_t *opt, cmn_errbuf_t *eb)
{
    int rc;

    memset(n, 0, sizeof(*n));
    n->opt = *opt;
    n->loop = loop;
    n->started_ns = cmn_now_ns();
    atomic_init(&n->encode_ns, 0);
    atomic_init(&n->failed_by_backend, 0);
    cmn_arena_init(&n->arena, 64u * 1024u);
    /* The loop's handles first, so that a failure further down can always be unwound by
     * sut__node_stop(). */
    rc = cmn_xq_init(loop, &n->done_q, sut__on_records);
    if (rc < 0)
        return cmn_errf(eb, rc, "completion queue: %s", cmn_strerror(rc));
    n->done_q.data = n;
    uv_timer_init(loop, &n->tick);
    uv_timer_init(loop, &n->batch_timer);
    uv_timer_init(loop, &n->drain_timer);
    uv_check_init(loop, &n->batch_check);
    uv_signal_init(loop, &n->sig_term);
    uv_signal_init(loop, &n->sig_int);
    uv_signal_init(loop, &n->sig_hup);
    n->tick.data = n->batch_check.data = n->drain_timer.data = n;
    n->sig_term.data = n->sig_int.data = n->sig_hup.data = n;
    n->handles_ready = 1;

    n->pool = cmn_pool_new(256u << 20);
    if (!n->pool)
        return cmn_errf(eb, UV_ENOMEM, "out of memory");
    if (opt->tls_cert || opt->tls_key || opt->tls_ca || opt->tls_allow) {
        rc = cmn_tls_server_ctx(opt->tls_cert, opt->tls_key, opt->tls_ca, opt->tls_allow, &n->tls,
                                eb);
        if (rc < 0)
            return rc;
    }
    rc = sut__backend_load(n, eb);
    if (rc < 0)
        return rc;
    n->max_batch = opt->max_batch ? opt->max_batch : n->info.max_batch;
    if (n->max_batch == 0)
        n->max_batch = 64;
    if (n->info.max_batch && n->max_batch > n->info.max_batch)
        return cmn_errf(eb, CMN_ECONFIG, "--max-batch %u is over the %s backend's limit of %u",
                        n->max_batch, n->info.name, n->info.max_batch);
    if (n->info.preferred_batch == 0 || n->info.preferred_batch > n->max_batch)
        n->info.preferred_batch = n->max_batch;
    n->engines = opt->workers ? opt->workers : (n->info.engines ? n->info.engines : 1);
    /* The samples a client keeps in flight here: enough to fill every engine's batches several
     * times over, few enough that a faster node can take more of an Offline query. */
    if (!n->opt.max_inflight) {
        uint64_t w = (uint64_t)n->engines * n->max_batch * 4u;
        n->opt.max_inflight = (uint32_t)(w < 64 ? 64 : w > 65536 ? 65536 : w);
    }
    rc = sut__batcher_init(n, eb);
    if (rc < 0)
        return rc;
    uv_timer_start(&n->tick, on_tick, TICK_MS, TICK_MS);
    uv_check_start(&n->batch_check, on_batch_check);
    uv_signal_start(&n->sig_term, on_signal, SIGTERM);
    uv_signal_start(&n->sig_int, on_signal, SIGINT);
    uv_signal_start(&n->sig_hup, on_signal, SIGHUP);
    return 0;
}

static int write_port_file(const char *path, int port, cmn_errbuf_t *eb)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f)
        return cmn_errf(eb, CMN_ECONFIG, "cannot write port file %s", tmp);
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return cmn_errf(eb, CMN_ECONFIG, "cannot write port file %s", path);
    return 0;
}

int sut__node_listen(sut_node_t *n, cmn_errbuf_t *eb)
{
    size_t i;
    int first_port = -1, rc;
    char addr[64], host[200];

    for (i = 0; i < n->opt.n_listen; i++) {
        struct sockaddr_storage ss;
        int len = sizeof(ss);

        cmn_transport_t t;

        rc = cmn_endpoint_parse(n->opt.listen[i], &t, &ss, eb);
        if (rc < 0)
            return rc;
        uv_tcp_init(n->loop, &n->listeners[i]);
        n->listeners[i].data = n;
        n->n_listeners = i + 1;
        if (t == CMN_TRANSPORT_UCX) {
            if (n->tls)
                return cmn_errf(eb, CMN_ECONFIG, "%s: TLS runs on tcp:// only", n->opt.listen[i]);
            if (!n->ucx && (rc = cmn_ucx_open(n->loop, NULL, &n->ucx, eb)) < 0)
                return rc;
            rc = cmn_ucx_listen(n->ucx, (struct sockaddr *)&ss, on_ucx_connection, n,
                                &n->ucx_listeners[i], eb);
            if (rc < 0)
                return rc;
            cmn_addr_format((struct sockaddr *)&ss, addr, sizeof(addr));
            if (first_port < 0)
                first_port = cmn_ucx_listener_port(n->ucx_listeners[i]);
            cmn_log_info("listening on ucx://%s (port %d)", addr,
                         cmn_ucx_listener_port(n->ucx_listeners[i]));
            continue;
        }
        rc = uv_tcp_bind(&n->listeners[i], (struct sockaddr *)&ss, 0);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&n->listeners[i], 511, on_connection);
        if (rc < 0)
            return cmn_errf(eb, rc, "cannot listen on %s: %s", n->opt.listen[i], cmn_strerror(rc));
        uv_tcp_getsockname(&n->listeners[i], (struct sockaddr *)&ss, &len);
        cmn_addr_format((struct sockaddr *)&ss, addr, sizeof(addr));
        if (first_port < 0)
            first_port = cmn_addr_port((struct sockaddr *)&ss);
        cmn_log_info("listening on %s", addr);
    }
    if (n->opt.name) {
        snprintf(n->name, sizeof(n->name), "%s", n->opt.name);
    } else {
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "localhost");
        host[sizeof(host) - 1] = '\0';
        snprintf(n->name, sizeof(n->name), "%s:%d", host, first_port);
    }
    if (n->opt.port_file && (rc = write_port_file(n->opt.port_file, first_port, eb)) < 0)
        return rc;
    return 0;
}
