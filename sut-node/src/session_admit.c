/* Admission (session.h): what the node lets in. Connections at --max-connections,
 * --max-preauth and --max-conn-per-peer (evicting the longest idle); a Query's samples (codecs,
 * sizes, ids, the in-flight limit, draining) handed to the batcher, or a zero-copy sink batch of
 * their own; an arriving frame's memory on the budget; the decode-time fairness pause. Calls
 * session_results.c (rejected samples) and session.c, never session_proto.c. */
#include "session.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <stdio.h>
#include <string.h>

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

/* ---- queries and the frames that carry them -------------------------------------------------- */

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
    cmn_msg_limits_t lim = sut__session_msg_limits(&ss->env);
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
    (void)sut__session_frame_top_up(s);
    return NULL;
}

static void on_partial(cmn_conn_t *c)
{
    sut_session_t *s = c->data;

    if (s->frame_total && sut__session_frame_top_up(s) < 0)
        cmn_conn_read_pause(&s->conn);
}

void sut__session_admit_frames(sut_session_t *s)
{
    cmn_conn_set_sink(&s->conn, session_sink, s, SINK_MIN_PAYLOAD);
    cmn_conn_set_on_partial(&s->conn, on_partial);
}

void sut__session_release_frame_charge(sut_session_t *s)
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

static void on_decode_timer(uv_timer_t *t);

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

void sut__session_handle_query(sut_session_t *s, const Nsut__Query *q, const uint8_t *payload,
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
            sut__session_reject(s, sm->id);
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
            sut__session_reject(s, sm->id);
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
        sut__session_flush_results(s); /* rejected samples */
    sut__session_update_reading(s);
}

/* ---- connections ----------------------------------------------------------------------------- */

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

const char *sut__session_admission(sut_sessions_t *ss, sut_session_t *s, char *why, size_t cap)
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

void sut__session_refuse(sut_sessions_t *ss, sut_session_t *s, const char *why)
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
