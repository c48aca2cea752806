/* Session deadlines and liveness (session.h): the handshake, frame-rate, memory-wait, idle and
 * results-not-taken deadlines, and the node's own heartbeat Pings, checked on every tick. Events
 * flow one way: this file calls session.c's entry points (sut__session_fail, sut__session_send,
 * sut__session_update_reading); session.c never calls into it. */
#include "session.h"

#include "cmn/log.h"

#include <stdio.h>

/* The rate rule (FRAME_MIN_RATE, session.h), checked on every tick: returns 1 with the reason when
 * the frame being received has fallen under it. */
static int frame_overdue(sut_session_t *s, uint64_t now, char *why, size_t cap)
{
    const sut_opts_t *o = s->ss->env.opt;
    int partial = cmn_frame_decoder_partial(cmn_conn_decoder(&s->conn));
    uint64_t size, left, need, got, win_ms;

    if (!partial || cmn_conn_stats(&s->conn)->frames_in != s->frame_frames || !s->frame_start_ns) {
        s->frame_start_ns = partial ? now : 0;
        s->frame_frames = cmn_conn_stats(&s->conn)->frames_in;
        s->frame_bytes_in = s->win_bytes_in = cmn_conn_stats(&s->conn)->bytes_in;
        s->win_ns = now;
        return 0;
    }
    if (cmn_conn_read_paused(&s->conn)) { /* the node is not reading: not the peer's doing */
        s->win_ns = now;
        s->win_bytes_in = cmn_conn_stats(&s->conn)->bytes_in;
        return 0;
    }
    win_ms = (now - s->win_ns) / 1000000u;
    if (win_ms < FRAME_RATE_WINDOW_MS)
        return 0;
    size = CMN_FRAME_HEADER_SIZE + (uint64_t)cmn_conn_decoder(&s->conn)->hdr.meta_len +
           cmn_conn_decoder(&s->conn)->hdr.payload_len;
    got = cmn_conn_stats(&s->conn)->bytes_in - s->win_bytes_in;
    left = size > s->win_bytes_in - s->frame_bytes_in ? size - (s->win_bytes_in - s->frame_bytes_in)
                                                      : 0;
    need = (uint64_t)FRAME_MIN_RATE * win_ms / 1000u;
    if (need > left)
        need = left;
    s->win_ns = now;
    s->win_bytes_in = cmn_conn_stats(&s->conn)->bytes_in;
    if (now - s->frame_start_ns <= o->frame_timeout_ms * 1000000u || got >= need)
        return 0;
    snprintf(why, cap,
             "a frame half received, arriving too slowly: %llu bytes in the last %llu ms, under %u "
             "KiB/s (%llu of "
             "%llu bytes after %llu ms)",
             (unsigned long long)got, (unsigned long long)win_ms, FRAME_MIN_RATE >> 10,
             (unsigned long long)(cmn_conn_stats(&s->conn)->bytes_in - s->frame_bytes_in),
             (unsigned long long)size, (unsigned long long)((now - s->frame_start_ns) / 1000000u));
    return 1;
}

/* A frame paused for memory (session.c's frame_top_up) whose next chunk would take its peer over
 * its share: after --frame-timeout-ms the greedy peer is dropped, so its half-frame cannot hold the
 * budget from peers within their share (and half-frames cannot wait on each other for ever).
 * Returns 1 with the reason. */
static int budget_overdue(sut_session_t *s, uint64_t now, char *why, size_t cap)
{
    const sut_budget_t *b = s->ss->env.budget;
    uint64_t held = sut__budget_peer_used(&s->peer);

    if (!s->budget_wait_ns || held + FRAME_CHUNK <= sut__budget_share(b) ||
        now - s->budget_wait_ns <= s->ss->env.opt->frame_timeout_ms * 1000000u)
        return 0;
    snprintf(why, cap,
             "a frame of %llu payload bytes waited %llu ms for memory while this peer holds %llu "
             "bytes, its next 4 MiB over its share of %llu (%llu of %llu bytes in use)",
             (unsigned long long)s->frame_total,
             (unsigned long long)((now - s->budget_wait_ns) / 1000000u), (unsigned long long)held,
             (unsigned long long)sut__budget_share(b), (unsigned long long)sut__budget_used(b),
             (unsigned long long)b->limit);
    return 1;
}

/* Heartbeat: the client judges a node alive by any frame from it, and a node that has paused
 * reading (in-flight limit) or whose socket is full of queries cannot answer its Pings in time; so
 * it sends one of its own on a connection that heard nothing lately. Not while results back up:
 * frames are on their way then, a Ping would only queue behind them on TCP, and over UCX a small
 * message completes at once whether or not the peer takes anything, which write_overdue() would
 * take for the peer taking its results (a stuck UCX peer was never dropped). */
static void heartbeat(sut_session_t *s, uint64_t now)
{
    if (s->congested_ns) {
        s->hb_ns = now;
    } else if (cmn_conn_stats(&s->conn)->frames_out != s->hb_frames) {
        s->hb_frames = cmn_conn_stats(&s->conn)->frames_out;
        s->hb_ns = now;
    } else if (now - s->hb_ns >= s->ss->env.opt->heartbeat_ms * 1000000u) {
        Nsut__Ping hb = NSUT__PING__INIT;
        hb.seq = ++s->hb_seq;
        hb.sent_ns = now;
        sut__session_send(s, CMN_MSG_PING, &hb.base);
        s->hb_frames = cmn_conn_stats(&s->conn)->frames_out;
        s->hb_ns = now;
    }
}

/* A peer whose results back up and who takes none of them for write_timeout_ms is dropped at once
 * (an Error frame would only queue behind them). Returns 1 when it was. */
static int write_overdue(sut_session_t *s, uint64_t now)
{
    const sut_opts_t *o = s->ss->env.opt;

    sut__session_update_reading(s);
    if (!s->congested_ns)
        return 0;
    if (cmn_conn_stats(&s->conn)->bytes_out != s->congested_out) { /* it takes them, slowly */
        s->congested_ns = now;
        s->congested_out = cmn_conn_stats(&s->conn)->bytes_out;
        return 0;
    }
    if (now - s->congested_ns <= o->write_timeout_ms * 1000000u)
        return 0;
    s->ss->st.errors++;
    cmn_log_warn("%s: took none of its %zu bytes of queued results for %llu ms; dropping the "
                 "connection",
                 cmn_conn_peer(&s->conn), cmn_conn_backlog(&s->conn),
                 (unsigned long long)o->write_timeout_ms);
    cmn_conn_close(&s->conn, CMN_ETIMEOUT);
    return 1;
}

static void tick_session(sut_sessions_t *ss, sut_session_t *s, uint64_t now)
{
    const sut_opts_t *o = ss->env.opt;
    char why[300];

    if (!s->ready && now - s->accepted_ns > o->handshake_timeout_ms * 1000000u) {
        snprintf(why, sizeof(why), "no Hello within %llu ms",
                 (unsigned long long)o->handshake_timeout_ms);
        sut__session_fail(s, CMN_ETIMEOUT, NSUT__ERROR_CODE__ERROR_TIMEOUT, why);
        return;
    }
    if (write_overdue(s, now))
        return;
    if (s->ready && o->heartbeat_ms)
        heartbeat(s, now);
    if (frame_overdue(s, now, why, sizeof(why))) {
        sut__session_fail(s, CMN_ETIMEOUT, NSUT__ERROR_CODE__ERROR_TIMEOUT, why);
        return;
    }
    if (budget_overdue(s, now, why, sizeof(why))) {
        sut__session_fail(s, CMN_EOVERLOAD, NSUT__ERROR_CODE__ERROR_OVERLOAD, why);
        return;
    }
    if (s->ready && s->inflight == 0 && !s->frame_start_ns &&
        now - s->active_ns > o->idle_timeout_ms * 1000000u) {
        snprintf(why, sizeof(why), "no frame other than Pings and no work for %llu ms",
                 (unsigned long long)o->idle_timeout_ms);
        sut__session_fail(s, CMN_ETIMEOUT, NSUT__ERROR_CODE__ERROR_TIMEOUT, why);
    }
}

void sut__sessions_tick(sut_sessions_t *ss, uint64_t now_ns)
{
    sut_session_t *s, *next;

    for (s = ss->head; s; s = next) {
        next = s->next;
        if (!cmn_conn_closing(&s->conn))
            tick_session(ss, s, now_ns);
    }
}
