/* Sessions: one per client connection. The protocol handlers (Hello, NameRequest, Query, Flush,
 * Ping, StatsRequest, Goodbye, Error), the per-connection limits and deadlines, and the way back:
 * result records queued per session during one completion pass and sent as one Response (and one
 * FirstToken) frame per session.
 *
 * The set of sessions (sut_sessions_t) owns the list, the admission limits, the shared metadata
 * arena and the session counters. The node above drives it: accept, tick, records, flush, drain.
 * Sessions call down into the batcher only.
 *
 * Lifecycle: a session lives from accept until its connection's close callback and every sample
 * it has in flight has come back (refs). Threads: the loop thread only. */
#ifndef SUT_SESSION_H
#define SUT_SESSION_H

#include "batcher.h"
#include "budget.h"
#include "cmn/arena.h"
#include "cmn/conn.h"
#include "cmn/idmap.h"
#include "cmn/msg.h"
#include "cmn/pool.h"
#include "cmn/tls.h"
#include "probe.h"
#include "types.h"
#include "workers.h"

typedef struct sut_sessions sut_sessions_t;

struct sut_session {
    cmn_conn_t conn;
    sut_sessions_t *ss;
    int ready; /* handshake done */
    int dead;  /* connection closed: results are dropped */
    int refs;  /* 1 for the connection + 1 per sample in flight + 1 while touched */
    uint32_t inflight;
    cmn_idmap_t ids;        /* wire ids in flight */
    unsigned sample_codecs; /* bit per accepted codec */
    int result_codec;
    uint64_t result_max_frame;
    int refused; /* over an admission limit: only its Error frame and close are left */
    int preauth; /* counted in the pre-authentication budget (before its Hello) */
    uint64_t accepted_ns;
    uint64_t last_frame_ns;  /* the last frame's arrival */
    uint64_t active_ns;      /* the last frame other than Ping/Pong: idle deadline */
    uint64_t work_ns;        /* the last Query (or the accept): eviction at the limits */
    uint64_t frame_start_ns; /* the tick that first saw the frame being received partial, or 0 */
    uint64_t frame_bytes_in; /* conn.bytes_in then */
    uint64_t win_ns;         /* the start of the frame's current rate window */
    uint64_t win_bytes_in;   /* conn.bytes_in then */
    uint64_t frame_frames;   /* conn.frames_in then */
    uint64_t congested_ns;   /* its results backed up above the high-water mark since, or 0 */
    uint64_t congested_out;  /* conn.bytes_out then */
    uint64_t frame_charge;   /* budget held by the frame being received: charged as it fills */
    uint64_t frame_total;    /* the payload that frame buffer will hold when complete */
    uint64_t budget_wait_ns; /* reading paused since: the budget could not charge its next chunk */
    uint64_t sink_charge;    /* its sink batch's input on the peer's account, until handled */
    uint64_t decode_big_ns;  /* its last Query whose decode took DECODE_BIG_NS (session_admit.c) */
    uint64_t decode_till_ns; /* reading paused until then for the decode time it took */
    sut_peer_t peer;         /* its account of the memory budget (budget.h), from its Hello */
    int joined;              /* the account counts among the budget's peers */
    uint64_t hb_frames;      /* conn.frames_out when the heartbeat clock last restarted */
    uint64_t hb_ns;
    uint64_t hb_seq;
    char peer_ip[64];
    sut_session_t *prev, *next;
    /* results gathered during one completion pass */
    sut_rec_t **pend_res, **pend_tok;
    size_t n_res, n_tok, cap_res, cap_tok;
    sut_session_t *touched_next;
    int touched;
    sut_nbatch_t *sink;       /* the batch receiving the current frame's payload directly */
    ProtobufCMessage *sink_q; /* that frame's Query, unpacked once by the sink (malloc) */
};

/* What the sessions need from the node, fixed at init. */
typedef struct {
    const sut_opts_t *opt; /* max_inflight already sized */
    const char *name;
    const sut_backend_info_t *info;
    uint32_t max_batch;
    uint32_t engines;
    sut_batcher_t *bt;
    sut_workers_t *workers; /* for its counters */
    cmn_pool_t *pool;
    sut_budget_t *budget;
    struct cmn_tls_ctx *tls; /* NULL: plaintext */
    sut_probe_t *probe;      /* the backend's readiness, told in every HelloAck */
} sut_sessions_env_t;

typedef struct {
    uint64_t connections_total;
    uint64_t queries, samples;
    uint64_t bytes_in, bytes_out;
    uint64_t errors, samples_failed, samples_rejected;
} sut_sessions_stats_t;

struct sut_sessions {
    sut_sessions_env_t env;
    uv_loop_t *loop;
    uint64_t started_ns;
    cmn_arena_t arena; /* unpacking of received metadata */
    sut_session_t *head;
    uint32_t n;
    uint32_t n_preauth;     /* sessions before their Hello, refused ones excluded */
    uint64_t sink_arriving; /* payload bytes of sink batches charged whole, their frames arriving */
    uint32_t n_refused;
    int closed;             /* a session closed since sut__sessions_closed() was last asked */
    sut_session_t *touched; /* sessions with records queued this pass */
    int draining;
    cmn_conn_options_t conn_opt; /* write high-water mark sized from the budget */
    /* refusing a connection that could not get a session: accepted here and closed */
    uv_tcp_t spare;
    int spare_busy;
    uv_stream_t *refuse_pending;
    sut_sessions_stats_t st;
    uv_timer_t decode_timer; /* resumes reading paused for decode time (decode_till_ns) */
    int decode_timer_ready;
    uint64_t decode_due_ns; /* when it fires, or 0 when not started */
};

/* Limits of one arriving frame, shared by session.c and session_admit.c (charging it) and
 * session_deadline.c. */
/* A frame's payload buffer is charged to the budget FRAME_CHUNK bytes ahead of what has arrived,
 * not whole at its header (its pages cost memory only once written): a slow-but-legal frame holds
 * what it has sent, not what it announced. */
#define FRAME_CHUNK (4u << 20)

/* An arriving frame, after --frame-timeout-ms of grace from its first byte, must gain at least
 * FRAME_MIN_RATE bytes in every window of FRAME_RATE_WINDOW_MS (or whatever was left of it at the
 * window's start): a byte now and then cannot keep a frame, and the buffer its header reserved,
 * alive. Windows while the node itself does not read the connection do not count. */
#define FRAME_MIN_RATE (256u << 10) /* bytes per second */
#define FRAME_RATE_WINDOW_MS 1000u

/* The session files and their layers; calls flow down only (a file calls the entry points of
 * the files below it, declared here, and is never called back by them):
 *
 *   session_proto.c     the protocol: handshake, dispatch of each frame, the set of sessions,
 *                       accept, close, drain, Goodbye
 *   session_deadline.c  deadlines and heartbeats, on the node's tick
 *   session_admit.c     admission: connections at the limits, Queries and their samples to the
 *                       batcher (or a sink batch), arriving frames on the budget, decode pauses
 *   session_results.c   results to frames: records queued per session, Response / FirstToken
 *   session.c           lifetime, failing, sending one frame, the reading switch
 *
 * session_deadline.c calls session.c only. */

/* session.c. sut__session_fail: the one way a session fails (a log line naming the peer and the
 * reason, an Error frame with |wire_err|, then the close with |code|). sut__session_send: one
 * message frame. sut__session_update_reading: pauses or resumes reading by the in-flight and
 * results limits, the budget and the decode pause, and tracks whether its results back up
 * (congested_ns). sut__session_release: drops one reference (refs), freeing the session at the
 * last. sut__session_frame_top_up: charges the frame being received FRAME_CHUNK ahead of what has
 * arrived; 0, or CMN_EOVERLOAD when the budget refuses (reading then pauses). */
void sut__session_fail(sut_session_t *s, int code, int wire_err, const char *why);
void sut__session_send(sut_session_t *s, unsigned type, const ProtobufCMessage *m);
void sut__session_update_reading(sut_session_t *s);
void sut__session_release(sut_session_t *s);
int sut__session_frame_top_up(sut_session_t *s);
/* The ErrorCode's name for the log ("ERROR_?" for one this build does not know). */
const char *sut__session_wire_error_name(int wire_err);
/* The message limits of received frames: samples per Query follow --max-inflight. */
cmn_msg_limits_t sut__session_msg_limits(const sut_sessions_env_t *env);

/* session_results.c. sut__session_reject: queues a STATUS_REJECTED result for |wire_id| (fails
 * the session when out of memory). sut__session_flush_results: sends what the session has queued.
 * sut__session_copy_hooks: the budget-charged copy buffers of a transport that copies frames. */
void sut__session_reject(sut_session_t *s, uint64_t wire_id);
void sut__session_flush_results(sut_session_t *s);
void sut__session_copy_hooks(cmn_conn_options_t *o, sut_budget_t *b);

/* session_admit.c. sut__session_admission: NULL when the new session |s| is within the connection
 * limits (evicting an idle one first where that makes room), else why not, written into |why|.
 * sut__session_refuse: refuses it (an Error frame to a plaintext peer; a TLS peer is closed
 * before any TLS work). sut__session_admit_frames: the zero-copy sink and the budget charge of
 * arriving frames, on a started connection. sut__session_handle_query: admits a Query's samples.
 * sut__session_release_frame_charge: gives back the charge of the frame just handled (or of the
 * connection's last one). */
const char *sut__session_admission(sut_sessions_t *ss, sut_session_t *s, char *why, size_t cap);
void sut__session_refuse(sut_sessions_t *ss, sut_session_t *s, const char *why);
void sut__session_admit_frames(sut_session_t *s);
void sut__session_handle_query(sut_session_t *s, const Nsut__Query *q, const uint8_t *payload,
                               sut_nbatch_t *sink);
void sut__session_release_frame_charge(sut_session_t *s);

void sut__sessions_init(sut_sessions_t *ss, uv_loop_t *loop, const sut_sessions_env_t *env);
void sut__sessions_free(sut_sessions_t *ss);
/* The timer that resumes sessions paused for their decode time: with the node's other handles. */
void sut__sessions_init_timer(sut_sessions_t *ss, uv_loop_t *loop);
void sut__sessions_close_timer(sut_sessions_t *ss);
/* Accepts one connection from the tcp:// |server|, or the ucx:// connection request |in| (then
 * |server| is NULL); whatever fails, the listener keeps accepting. */
void sut__sessions_accept(sut_sessions_t *ss, uv_stream_t *server, struct cmn_ucx_incoming *in);
/* Whether a session closed since the last call (the node then gives memory back). */
int sut__sessions_closed(sut_sessions_t *ss);
/* Deadlines (handshake, whole frame, idle, results not taken) and heartbeats. */
void sut__sessions_tick(sut_sessions_t *ss, uint64_t now_ns);
/* Queues a result or first-token record on its session (or drops it when the session is gone). */
void sut__sessions_take(sut_sessions_t *ss, sut_rec_t *rec);
/* Sends what sut__sessions_take queued: one frame per session and kind. */
void sut__sessions_flush(sut_sessions_t *ss);
/* New samples are rejected (STATUS_REJECTED) from now on. */
void sut__sessions_drain(sut_sessions_t *ss);
/* Goodbye on every connection, then an orderly close. */
void sut__sessions_goodbye(sut_sessions_t *ss, const char *reason);
/* The node's counters, as a StatsRequest returns them. */
void sut__sessions_stats(sut_sessions_t *ss, Nsut__Stats *st);

#endif
