/* Sessions, the layer the others stand on (session.h): a session's lifetime (refs), the one way it
 * fails, one message frame, and the switch that pauses or resumes its reading by its limits (in
 * flight, results not taken, the memory budget, decode time), with the arriving frame's charge to
 * the budget that switch depends on. It calls no other session file; session_results.c,
 * session_admit.c, session_proto.c and session_deadline.c call its entry points. */
#include "session.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <stdlib.h>

cmn_msg_limits_t sut__session_msg_limits(const sut_sessions_env_t *env)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();

    lim.max_sample_size = env->opt->max_frame;
    if (env->opt->max_inflight < lim.max_samples)
        lim.max_samples = env->opt->max_inflight;
    return lim;
}

/* ---- lifetime and errors --------------------------------------------------------------------- */

void sut__session_release(sut_session_t *s)
{
    if (--s->refs > 0)
        return;
    cmn_idmap_free(&s->ids);
    free(s->pend_res);
    free(s->pend_tok);
    free(s);
}

const char *sut__session_wire_error_name(int wire_err)
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
                 sut__session_wire_error_name(wire_err));
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

/* ---- reading ------------------------------------------------------------------------------- */

/* Reading follows the two limits a peer can hit: samples in flight, and results it does not take
 * (the write backlog above its high-water mark). While it reads nothing new, nothing new is queued
 * for it; write_timeout_ms later it is dropped if it still took nothing. */
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
    if (congested || s->inflight >= s->ss->env.opt->max_inflight ||
        sut__session_frame_top_up(s) < 0 ||
        (s->joined && !cmn_frame_decoder_partial(cmn_conn_decoder(&s->conn)) &&
         sut__budget_peer_used(&s->peer) > sut__budget_share(s->ss->env.budget)) ||
        (s->decode_till_ns && !cmn_frame_decoder_partial(cmn_conn_decoder(&s->conn)) &&
         cmn_now_ns() < s->decode_till_ns))
        cmn_conn_read_pause(&s->conn);
    else if (cmn_conn_read_paused(&s->conn))
        cmn_conn_read_resume(&s->conn);
}

/* Charges the frame being received up to FRAME_CHUNK bytes ahead of what has arrived. Returns 0,
 * or CMN_EOVERLOAD when the budget refuses the next chunk under the fairness rules: reading then
 * pauses (the peer waits, its rate windows do not count) and the tick tries again. What has
 * arrived is charged whatever the rules (the memory is taken already). */
int sut__session_frame_top_up(sut_session_t *s)
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
