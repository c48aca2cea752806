/* The framing core under cmn_conn_t, and the ops table a transport fills in. Internal to common/.
 *
 * The core (core.c) owns what every transport shares and knows none of them: the frame decoder
 * and the read buffer, the turn's batch of queued frames (one gathered write per loop turn, the
 * hold of hold_ns), the backlog and its high/low-water marks (on_drain), the read state (started,
 * paused), the counters, and the close bookkeeping (shutdown deadline, the handles still open,
 * on_close once the last is released). A transport (tcp.c, tls_conn.c, ucx.c) moves bytes or
 * frames: it is picked once, at connect or accept (conn.c), as an ops table, and it calls back
 * into the core only through the cmn__core_* entry points below (bytes or a frame arrived, a
 * write finished, the connection ended, a handle was released).
 *
 * Layers (calls go downwards only): conn.c (the public API, picks the ops) -> tls_conn.c ->
 * tcp.c, ucx.c -> core.c, writer.c, tls.c -> frame.c. */
#ifndef CMN_CORE_H
#define CMN_CORE_H

#include "cmn/conn.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cmn__core cmn__core_t;
typedef struct cmn__batch cmn__batch_t;

typedef struct cmn__done {
    cmn_conn_sent_cb cb;
    void *arg;
} cmn__done_t;

/* All frames queued in one loop turn. Head buffers (header + packed metadata) live in |heads|;
 * the core resolves their uv_buf_t entries before it hands the batch to the transport. From
 * ops->write until cmn__core_sent the batch belongs to the transport, which may use |req| and
 * |next| (its own queue) and trim |bufs| (a partial write); |bytes| stays the batch's size. */
struct cmn__batch {
    uv_write_t req;
    cmn__core_t *core;
    cmn__batch_t *next;
    uv_buf_t *bufs;
    size_t nbufs;
    size_t bytes;
    /* The core's own: */
    uint8_t *heads;
    size_t heads_len, heads_cap;
    size_t *head_off; /* SIZE_MAX for payload entries */
    size_t bufs_cap;
    cmn__done_t *done;
    size_t ndone, done_cap;
    uint64_t first_ns; /* when its first frame was queued (hold_ns only) */
};

enum {
    CMN__T_COPIES_SEGMENTS = 1, /* cmn_conn_copies_segments */
    CMN__T_WHOLE_PAYLOADS = 2,  /* cmn_conn_whole_payloads */
};

/* A transport. Every function runs on the loop thread; |k->tp| is the transport's state. */
typedef struct cmn__ops {
    const char *name;
    unsigned flags; /* CMN__T_* */
    /* cmn_conn_start: the peer is reached (or accepted); begin reading. */
    int (*start)(cmn__core_t *k);
    /* cmn_conn_send. Stream transports use cmn__core_queue (the turn's batch); a message
     * transport sends the frame itself and accounts it with cmn__core_writing. */
    int (*send)(cmn__core_t *k, unsigned type, const ProtobufCMessage *meta,
                const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg);
    /* A turn's batch, in order (stream transports): cmn__core_sent when it is written. */
    void (*write)(cmn__core_t *k, cmn__batch_t *b);
    /* The end of a loop turn in which the core was armed (cmn__core_arm): stream transports
     * use cmn__core_turn_end (flush, or hold); a message transport delivers held frames. */
    void (*turn_end)(cmn__core_t *k);
    /* cmn_conn_flush: NULL when frames leave at once anyway. */
    void (*flush)(cmn__core_t *k);
    /* Reading (re)starts / stops (pause, shutdown, a decode error). */
    int (*read_start)(cmn__core_t *k);
    void (*read_stop)(cmn__core_t *k);
    /* cmn_conn_shutdown, after the core stopped reading and flushed its batch: finish what is
     * under way, then end gracefully (cmn__core_close once done; the core's deadline backs it). */
    void (*shutdown)(cmn__core_t *k);
    /* cmn_conn_close: cancel what is queued (cmn__core_sent with UV_ECANCELED) and release
     * every resource; each resource held with cmn__core_hold is given back with
     * cmn__core_released, from a later loop turn at the earliest. */
    void (*close)(cmn__core_t *k);
    void (*describe)(const cmn__core_t *k, char *buf, size_t len);
    /* The peer's verified identity ("" when none). NULL: none. */
    const char *(*peer_identity)(const cmn__core_t *k);
    /* The socket's descriptor, or a negative code. NULL: none. */
    int (*fileno)(const cmn__core_t *k);
} cmn__ops_t;

/* The connection's state, in the public struct's private storage (cmn_conn_t.private_). A
 * transport reads it; only core.c writes it, except |peer|, which the transport sets when it
 * learns the address. */
struct cmn__core {
    cmn_conn_t *conn; /* the public handle around this state */
    uv_loop_t *loop;
    cmn_conn_callbacks_t cb;
    cmn_conn_options_t opt;
    cmn_frame_decoder_t dec;
    uint8_t *rbuf;
    char peer[64];         /* "1.2.3.4:5678" or "[::1]:5678", for log messages */
    const cmn__ops_t *ops; /* NULL until connect / accept */
    void *tp;              /* the transport's state */

    uv_check_t flush_check;
    uv_idle_t flush_idle; /* keeps the loop from blocking in poll while a flush is due */
    uv_timer_t shutdown_timer;
    void (*connect_cb)(cmn_conn_t *c, int status);
    void (*on_partial)(cmn_conn_t *c);

    cmn__batch_t *cur;    /* frames queued this turn */
    cmn__batch_t *pool;   /* a reusable batch */
    size_t bytes_pending; /* queued in cur */
    size_t bytes_writing; /* handed to the transport, not yet written */
    int above_high_water;

    int closing; /* 1: shutting down, 2: closed or closing */
    int close_reason;
    int handles_open;
    int reading;
    int read_paused;
    int large_frames;     /* the last frame was large: read headers alone (cmn__core_read_buf) */
    char last_error[320]; /* why the connection closed itself, or "" */

    cmn_conn_stats_t st;
    uint64_t frames_at_check; /* st.frames_in at the last turn end (hold_ns) */
};

static inline cmn__core_t *cmn__core(cmn_conn_t *c)
{
    return (cmn__core_t *)(void *)&c->private_;
}

static inline const cmn__core_t *cmn__core_const(const cmn_conn_t *c)
{
    return (const cmn__core_t *)(const void *)&c->private_;
}

/* ---- For conn.c -------------------------------------------------------------------------- */

int cmn__core_init(cmn__core_t *k, cmn_conn_t *c, uv_loop_t *loop, const cmn_conn_callbacks_t *cb,
                   const cmn_conn_options_t *opt, const cmn_frame_limits_t *limits);
/* The transport from now on. */
void cmn__core_attach(cmn__core_t *k, const cmn__ops_t *ops, void *tp);
int cmn__core_start(cmn__core_t *k);
void cmn__core_read_pause(cmn__core_t *k);
void cmn__core_read_resume(cmn__core_t *k);
void cmn__core_shutdown(cmn__core_t *k, int reason);
/* Closes at once (cmn_conn_close); idempotent. Transports call it to end the connection too. */
void cmn__core_close(cmn__core_t *k, int reason);

/* ---- For stream transports: the turn's batch ------------------------------------------- */

/* Queues one frame in the turn's batch (an ops->send). */
int cmn__core_queue(cmn__core_t *k, unsigned type, const ProtobufCMessage *meta,
                    const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg);
/* An ops->turn_end: writes the batch (ops->write) unless hold_ns holds it. */
void cmn__core_turn_end(cmn__core_t *k);
/* Writes the batch now (an ops->flush; shutdown). */
void cmn__core_flush(cmn__core_t *k);
/* The transport is done with |b|: written (status 0) or not (a negative code). Its callbacks
 * run, the backlog falls (on_drain), the batch goes back to the pool (or is freed). */
void cmn__core_sent(cmn__core_t *k, cmn__batch_t *b, int status);
/* A write of |b| could not even start: its callbacks get |rc| and the connection closes. */
void cmn__core_refused(cmn__core_t *k, cmn__batch_t *b, int rc);

/* ---- For every transport --------------------------------------------------------------- */

/* Arms the end-of-turn check (ops->turn_end runs at the end of this loop turn), or stops it. */
void cmn__core_arm(cmn__core_t *k);
void cmn__core_disarm(cmn__core_t *k);
/* Where the next read goes: the core's read buffer, or (|direct|) straight into the frame the
 * decoder is filling, the rest of a large frame. */
void cmn__core_read_buf(cmn__core_t *k, int direct, uv_buf_t *buf);
/* |n| bytes arrived on the wire (counted), about to be fed (stream) or framed (message). */
void cmn__core_received(cmn__core_t *k, size_t n);
/* Plain bytes through the frame decoder (each complete frame to on_frame; a framing error to
 * on_decode_error, reading stopped). Returns 0, or CMN_ECLOSED once the connection is closing.
 * The signature of cmn__tls_on_cipher's deliver callback. */
int cmn__core_feed(void *k, const uint8_t *p, size_t n);
/* A read is over: the owner's on_partial when a frame is still partial. */
void cmn__core_read_done(cmn__core_t *k);
/* A whole frame arrived (message transports), |wire| bytes in all. */
void cmn__core_frame(cmn__core_t *k, const cmn_frame_t *f, uint64_t wire);
/* The header of the frame now arriving (message transports): what cmn_conn_decoder shows, in
 * on_decode_error too. */
void cmn__core_frame_header(cmn__core_t *k, const cmn_frame_header_t *h);
/* A frame broke the rules (message transports): on_decode_error, or the connection closes. */
void cmn__core_decode_error(cmn__core_t *k, int err);
/* Whether frames may be handed to on_frame now (started, not paused, not closing). */
int cmn__core_can_read(const cmn__core_t *k);
/* |bytes| more are on their way out: the backlog grows. With |frames| > 0 (counted as sent
 * frames) the high-water mark is checked too, as when a frame is queued. */
void cmn__core_writing(cmn__core_t *k, size_t bytes, unsigned frames);
/* |bytes| of the backlog were written (counted in bytes_out when |count_out|) or dropped. */
void cmn__core_written(cmn__core_t *k, size_t bytes, int count_out);
/* connect: the peer is reached (0) or not (a negative code): the owner's connect callback. */
void cmn__core_connected(cmn__core_t *k, int status);
/* Records why the connection is ending (cmn_conn_last_error), printf-style. */
void cmn__core_set_error(cmn__core_t *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One more resource the close waits for; cmn__core_released gives it back. */
void cmn__core_hold(cmn__core_t *k);
void cmn__core_released(cmn__core_t *k);

#endif
