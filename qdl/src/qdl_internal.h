/* QDL internals (qdl__ prefix). Not a public API.
 *
 * One libuv loop thread owns every node, connection, sample record and timer. Other threads talk
 * to it only through |reqs|, a cross-thread queue with coalesced wake-ups: issued queries, flush,
 * name, stats and stop requests. Synchronous requests (name, stats, stop, create) carry a
 * semaphore the caller waits on.
 *
 * The files form layers; each calls only the ones below it (README.md has the map):
 *
 *   qdl.c       the API and the loop thread (requests, config, timers, the dispatch check)
 *   dispatch.c  the policy that picks a connection, part sizing, sending Query parts
 *   node_frames_in.c   frames in from a node, routed to the files below
 *   node_session.c     the handshake and readiness   node_liveness.c  heartbeats and deadlines
 *   node.c             connections: set-up, connect, close, re-queue, reconnect, shutdown
 *   node_frames_out.c  the control frames to a node (Hello, Ping, Pong, Flush, Goodbye)
 *   results.c   Response/FirstToken results decoded and completed     name.c  Name() aggregation
 *   pending.c   the queue of samples waiting for a connection
 *   complete.c  query blocks, sample completion, synchronous requests answered
 *   alloc.c     allocation (with a failing hook for tests)
 *
 * An event in a lower layer that may let samples move (a result, a handshake, a lost connection)
 * never dispatches itself: it sets |dispatch_due|, and qdl.c acts on it once per loop turn. */
#ifndef QDL_INTERNAL_H
#define QDL_INTERNAL_H

#include "qdl/qdl.h"

#include "cmn/arena.h"
#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/idmap.h"
#include "cmn/msg.h"
#include "cmn/tls.h"
#include "cmn/net.h"
#include "cmn/ucx.h"
#include "cmn/xq.h"

#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

typedef struct qdl_node qdl_node_t;
typedef struct qdl_conn qdl_conn_t;

/* What a sut-node connection (node.c) hands to the files above it: each frame and decode error
 * (node_frames_in.c) and its connect (node_session.c sends the Hello). qdl.c passes
 * qdl__node_events to qdl__nodes_init, so node.c calls nothing above it by name. */
typedef struct {
    void (*on_frame)(cmn_conn_t *c, const cmn_frame_t *f);
    void (*on_decode_error)(cmn_conn_t *c, int err);
    void (*on_connected)(cmn_conn_t *c, int status);
} qdl_node_events_t;

/* What node.c asks of endpoint nodes (endpoint.c, above it): whether an address names one, its
 * set-up, its "connect" and its streams' cancel on close. qdl.c passes qdl__ep_hooks to
 * qdl__nodes_init beside qdl__node_events, so node.c calls endpoint.c by no name either. */
typedef struct {
    int (*is_address)(const char *address);
    int (*node_init)(qdl_t *q, qdl_node_t *nd, cmn_errbuf_t *eb);
    void (*connect)(qdl_conn_t *qc);
    void (*cancel)(qdl_conn_t *qc);
} qdl_ep_hooks_t;

/* A part whose frame waits for the polling thread's next turn: its samples' wire ids are
 * first_wire_id .. first_wire_id + n - 1 on |conn|. */
typedef struct {
    qdl_conn_t *conn;
    uint64_t first_wire_id;
    size_t n;
} qdl_unsent_t;

/* One sample from issue to completion. It sits in exactly one place at a time: a query's pending
 * list, or one connection's in-flight map, so it can never be completed twice. */
typedef struct qdl_srec {
    qdl_sample_t s;
    uint64_t query_id;
    uint64_t wire_id;
    uint64_t issued_ns;    /* when qdl_issue_query() took it (qdl_response_t.issued_ns) */
    uint64_t queued_ns;    /* when it became pending (for fail_timeout) */
    qdl_conn_t *conn;      /* NULL while pending */
    size_t index_in_block; /* position in its query's block (see qdl__srec_done) */
    uint32_t dispatches;   /* times sent to a node */
    uint64_t sent_ns;      /* when last sent */
    int first_token_seen;  /* a first token was passed on: never a second one */
    uint64_t cost;         /* tokens it adds to its node's outstanding count (least-tokens) */
    struct qdl_srec *next;
} qdl_srec_t;

/* A query (or what is left of it) waiting for a connection with room. */
typedef struct qdl_pq {
    uint64_t query_id;
    qdl_srec_t *head, *tail;
    size_t n;
    uint32_t part;   /* index of the next part sent */
    uint32_t codecs; /* 1 << codec of every sample ever appended (a superset of those left) */
    struct qdl_pq *next;
} qdl_pq_t;

enum { QC_IDLE, QC_CONNECTING, QC_HANDSHAKE, QC_READY, QC_CLOSING };

struct qdl_conn {
    cmn_conn_t c;
    qdl_node_t *node;
    unsigned index; /* within its node */
    int state;
    int open;     /* cmn_conn initialised and not yet closed */
    int draining; /* the node said Goodbye or rejected: no new samples */
    cmn_idmap_t inflight;
    uint32_t n_inflight;
    uint64_t ping_seq;
    uint64_t ping_sent_ns;      /* 0: no Ping outstanding */
    int pong_queued;            /* a Pong to the node waits in the write queue: Pings meanwhile are
                                   not answered again (one Pong owed at most) */
    uint64_t pings_window_ns;   /* the node's Pings: when the current one-second window began */
    unsigned pings_in_window;   /* and how many came in it */
    uint64_t last_rx_ns;        /* the last frame from the node: proof it is alive */
    uint64_t rx_frame_bytes;    /* the size of the frame being handled (metadata and payload) */
    uint64_t progress_ns;       /* the last completion, or when samples began to wait on it */
    uint64_t state_ns;          /* when the current state began */
    int was_ready;              /* the closing connection had completed its handshake */
    char why[400];              /* why we closed it */
    struct qdl_ep_req *ep_reqs; /* endpoint: its requests whose end is not yet handled */
    uv_timer_t retry;           /* reconnect backoff */
    int retry_open;
};

struct qdl_node {
    qdl_t *q;
    unsigned index;
    char address[256];
    struct sockaddr_storage addr;
    cmn_transport_t transport; /* tcp:// or ucx:// */
    char name[256];
    char host[64]; /* the address's host part: the name its TLS certificate must carry */
    int named;     /* name known from a HelloAck */
    char caps_backend[64], caps_device[256];
    int result_codec;
    unsigned sample_codecs; /* bit per codec the node accepts */
    double weight;
    uint64_t window;     /* samples in flight per connection */
    uint64_t batch_pref; /* the node's preferred batch (HelloAck caps; 0 or 1: none) */
    uint64_t max_frame;  /* the smaller of ours and the node's advertised frame limit */
    uint64_t backoff_ms; /* reconnect delay; grows until the node completes work */
    int degraded;        /* missed a progress deadline: one sample at a time until it completes */
    int streaming;       /* its backend streams (an LLM): a longer default progress deadline */
    int not_ready;       /* its last HelloAck said its engine cannot serve */
    char last_why[400];  /* why its last connection closed before the handshake, or "" */
    uint64_t lat_max_ns; /* the slowest completion seen (send to result), for the deadline */
    uint64_t connects;   /* connection attempts so far */
    int warned_times;    /* said once that it reports more time than the round trip took */
    qdl_conn_t *conns;   /* its connections_per_node entries of qdl_t.conns */
    uint32_t inflight;   /* over all its connections */
    qdl_node_stats_t st;
    char name_reply[256];
    int name_pending;
    /* Tokens outstanding (QDL_POLICY_LEAST_TOKENS): each in-flight sample's cost; and the output
     * tokens its results brought so far, whose mean is the next sample's expected output. */
    uint64_t tokens_out;
    uint64_t out_tokens, out_results;
    /* An OpenAI-compatible serving engine over HTTP (endpoint.c) instead of a sut-node. */
    int endpoint;
    struct qdl_ep_node *ep; /* its URL and dialect (endpoint.c); NULL for a sut-node */
};

/* Requests from other threads. */
enum { RQ_ISSUE = 1, RQ_FLUSH, RQ_NAME, RQ_STATS, RQ_STOP, RQ_START, RQ_PARK };

typedef struct qdl_req {
    cmn_xq_node_t link;
    int kind;
    uv_sem_t done; /* synchronous kinds */
    int rc;
    /* RQ_ISSUE */
    qdl_srec_t *samples;
    size_t n;
    /* RQ_NAME */
    char *buf;
    size_t len;
    uint64_t start_ns, duration_ns;
    uint64_t request_id;
    /* RQ_STATS */
    qdl_node_stats_t *stats;
    size_t cap;
    cmn_errbuf_t *eb; /* the caller's reason for a failure (may be NULL) */
} qdl_req_t;

/* A rate-limited log line: the first few, then one summary per interval with the count. */
typedef struct {
    uint64_t window_ns;
    unsigned in_window;
    uint64_t suppressed;
} qdl_ratelog_t;

struct qdl {
    qdl_config_t cfg;
    char *strings; /* owned copies of the config's strings */
    uv_loop_t loop;
    uv_thread_t thread;
    cmn_xq_t reqs;
    uv_timer_t tick;
    uv_check_t check; /* runs dispatch once per loop turn when |dispatch_due| */
    cmn_arena_t arena;
    cmn_tls_ctx_t *tls; /* NULL: plaintext */
    cmn_ucx_t *ucx;     /* the ucx:// transport, when a node address names it */
    qdl_node_t *nodes;
    size_t n_nodes;
    qdl_conn_t *conns; /* every connection: node i's are conns[i * cpn .. (i + 1) * cpn) */
    size_t n_conns;
    const qdl_node_events_t *node_events; /* the files above node.c (qdl__nodes_init) */
    const qdl_ep_hooks_t *ep_hooks;       /* endpoint.c, also above it (qdl__nodes_init) */
    char client_name[128];

    /* What one connection may make the QDL hold at once (its frame, the results decoded from it):
     * node_memory_budget over every connection, at most max_frame_size (qdl.c). */
    uint64_t conn_share;
/* What one result of a frame costs unpacked (its Nsut__Result and pointer, in the arena), charged
 * to the share with the frame. */
#define QDL_RESULT_UNPACKED_BYTES 128u

    uint64_t next_wire_id;
    uint64_t next_query_id;
    uint64_t rr; /* round-robin cursor */

    qdl_pq_t *pending_head, *pending_tail; /* queries waiting for room */
    int dispatch_due;
    uint64_t no_node_since_ns; /* when the last healthy node went; 0 while one is up */

    uint8_t *scratch; /* decoded response bytes for one frame */
    size_t scratch_cap;
    qdl_response_t *resp;
    size_t resp_cap;

    qdl_ratelog_t log_stray;  /* results for ids not outstanding */
    qdl_ratelog_t log_decode; /* results that do not decode */
    qdl_ratelog_t log_failed; /* results the node failed (its log has the reason by wire id) */
    qdl_ratelog_t log_big;    /* samples larger than any node accepts */
    qdl_ratelog_t log_reject; /* samples failed after rejections used up their dispatches */

    qdl_req_t *start_req;  /* qdl_create waiting for every node */
    qdl_req_t *name_req;   /* the Name() in progress */
    qdl_req_t *name_queue; /* Name() calls waiting their turn */
    int stopping;
    uint64_t name_seq;

    /* poll.c: the loop lent to a caller's thread (qdl_poll_begin .. qdl_poll_end). */
    qdl_req_t *park_req; /* loop thread: a lend asked for; uv_run stops and the thread parks */
    uv_mutex_t park_mu;
    uv_cond_t park_cv;
    int park_ready;        /* park_mu and park_cv exist */
    int parked;            /* under park_mu: the loop is the caller's until cleared */
    sigset_t poll_oldmask; /* the polling thread's signal mask before SIGPIPE was blocked */
    /* Parts queued by the polling thread outside a turn: their frames are written in its next
     * qdl_poll(), which stamps their samples' sent_ns then (poll.c). */
    qdl_unsent_t *unsent;
    size_t n_unsent, cap_unsent;
    int in_turn;     /* the polling thread is inside uv_run() */
    int lend_writes; /* lent with lend_write_thread: every batch goes to the write threads */

    /* endpoint.c: one HTTP pool for every endpoint node, its thread's events handed to the loop
     * (NULL when no node is an endpoint). The layout here never depends on the build's options. */
    struct qdl_ep *ep;
};

/* How a node is named in messages: its name once known, else its address. */
static inline const char *qdl__node_label(const qdl_node_t *nd)
{
    return nd->named ? nd->name : nd->address;
}

/* ---- poll.c --------------------------------------------------------------------------------- */

/* Blocks SIGPIPE on the calling thread, which writes to sockets; the mask before in |old| when
 * not NULL. */
void qdl__block_sigpipe(sigset_t *old);
/* Whether the calling thread has the loop lent to it (between qdl_poll_begin and _end). */
int qdl__is_poller(const qdl_t *q);
/* The polling thread queued a part outside a turn (in qdl_issue_query): its frame is written and
 * its sent_ns stamped at the start of the next qdl_poll(). */
void qdl__note_unsent(qdl_t *q, qdl_conn_t *qc, uint64_t first_wire_id, size_t n);
/* Runs |r| on the thread that runs the loop and waits for its answer (a polling thread runs the
 * loop meanwhile). */
int qdl__sync_req(qdl_t *q, qdl_req_t *r);
/* Loop thread, once uv_run() returned for a lend: answers the request, waits for the loop back. */
void qdl__park(qdl_t *q);

/* ---- qdl.c ---------------------------------------------------------------------------------- */

/* Runs one request on the thread that runs the loop (the loop thread, or the polling thread). */
void qdl__handle_req(qdl_t *q, qdl_req_t *r);

/* ---- alloc.c -------------------------------------------------------------------------------- */

/* malloc/calloc/realloc for the QDL. A test may install |qdl__alloc_fail| to fail chosen calls. */
void *qdl__malloc(size_t n);
void *qdl__calloc(size_t n, size_t size);
void *qdl__realloc(void *p, size_t n);
extern int (*qdl__alloc_fail)(size_t n); /* NULL, or returns non-zero to fail this allocation */

/* ---- complete.c ----------------------------------------------------------------------------- */

/* A block holding one issued query's sample records (and the request that carried it). */
qdl_req_t *qdl__qblock_new(const qdl_sample_t *samples, size_t n);
qdl_srec_t *qdl__qblock_recs(qdl_req_t *issue);
void qdl__qblock_free(qdl_req_t *issue);
/* A sample is finished (completed or failed); frees its query's block after the last. */
void qdl__srec_done(qdl_srec_t *s);
/* Room for |n| responses in q->resp. */
int qdl__resp_reserve(qdl_t *q, size_t n);
/* Completes a chain of sample records with |status| (failures), then releases them. */
void qdl__fail_chain(qdl_t *q, qdl_srec_t *s, int status);
/* Answers a synchronous request. */
void qdl__req_done(qdl_req_t *r, int rc);
/* qdl_create's request: fails it with |rc| and a message (no-op when none is waiting). */
void qdl__start_fail(qdl_t *q, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Rate-limited logging: returns 1 when this occurrence is to be logged (and then *suppressed
 * holds how many were dropped since the last logged one, reset to 0). */
int qdl__ratelog(qdl_ratelog_t *rl, uint64_t now, uint64_t *suppressed);
/* " (and 1234 more like this)" for a logged line after |dropped| suppressed ones, or "". The
 * string is valid until the next call on this thread. */
const char *qdl__more_like_this(uint64_t dropped);

/* ---- pending.c ------------------------------------------------------------------------------ */

/* Queues an issued query's |n| records at the tail. */
void qdl__pending_enqueue(qdl_t *q, qdl_srec_t *samples, size_t n);
/* Puts |n| records (any order, any queries) back at the front, grouped by query, oldest first. */
void qdl__pending_requeue(qdl_t *q, qdl_srec_t **recs, size_t n);
/* The first query with samples waiting (empty queries are dropped), or NULL. */
qdl_pq_t *qdl__pending_head(qdl_t *q);
/* Takes the first |n| records of |pq| (a part) as a chain. */
qdl_srec_t *qdl__pending_take(qdl_t *q, qdl_pq_t *pq, size_t n);
/* Fails every pending sample with |status|; with |what|, logs one line "qdl: <what>: failing
 * ..."; returns how many. */
size_t qdl__pending_fail_all(qdl_t *q, int status, const char *what);
size_t qdl__pending_count(const qdl_t *q);

/* ---- results.c ------------------------------------------------------------------------------ */

/* Completes the results of one Response (or FirstToken) frame that arrived on |qc|. Returns 0, or
 * a negative code when the connection must be closed (|eb| says why). */
int qdl__results_handle(qdl_t *q, qdl_conn_t *qc, int first_token, Nsut__Result *const *res,
                        size_t nr, const uint8_t *payload, cmn_errbuf_t *eb);

/* ---- name.c --------------------------------------------------------------------------------- */

/* Sends a NameRequest to every node; returns 0, or CMN_ENONODE (r answered) with none up. */
int qdl__name_start(qdl_t *q, qdl_req_t *r);
/* A NameReply from |nd|. */
void qdl__name_reply(qdl_t *q, qdl_node_t *nd, const Nsut__NameReply *r);
/* |nd| can no longer answer the Name() in progress. */
void qdl__name_node_lost(qdl_t *q, qdl_node_t *nd);
/* Ends the Name() in progress: formats the answer (rc 0) or reports |why|; starts the next. */
void qdl__name_finish(qdl_t *q, int rc, const char *why);
/* The Name() in progress has waited longer than name_timeout_ms: finish it. */
void qdl__name_tick(qdl_t *q, uint64_t now);
/* Fails the Name() in progress and every queued one. */
void qdl__name_fail_all(qdl_t *q);

/* ---- node.c, node_session.c, node_liveness.c, node_frames_in.c, node_frames_out.c ------------ *
 * The node files, top to bottom (README.md, "Map of the files"): frames in, then the session
 * protocol and liveness side by side, the connections (node.c), frames out. */

/* ---- node_frames_out.c ---------------------------------------------------------------------- */

/* The control frames to a node: Hello (codecs offered, our frame limit), a heartbeat Ping (its
 * time and sequence recorded for the Pong), one Pong for a node's Ping (pong_queued while it
 * waits in the write queue), Goodbye, and Flush to every ready sut-node. */
void qdl__send_hello(qdl_conn_t *qc);
void qdl__send_ping(qdl_conn_t *qc, uint64_t now);
void qdl__send_pong(qdl_conn_t *qc, const Nsut__Ping *m);
void qdl__send_goodbye(qdl_conn_t *qc);
void qdl__flush_nodes(qdl_t *q);

/* ---- node.c --------------------------------------------------------------------------------- */

int qdl__conn_usable(const qdl_conn_t *qc);
int qdl__ready_nodes(const qdl_t *q);
/* The nodes and their connections from the configuration; a connection hands its frames, decode
 * errors and connect to |events| (qdl__node_events), an endpoint node is set up, connected and
 * cancelled through |ep| (qdl__ep_hooks): the layers above node.c. */
int qdl__nodes_init(qdl_t *q, const qdl_node_events_t *events, const qdl_ep_hooks_t *ep,
                    cmn_errbuf_t *eb);
void qdl__nodes_free(qdl_t *q);
void qdl__connect_all(qdl_t *q);
void qdl__conn_close(qdl_conn_t *qc, int reason, const char *why);
/* Fails every sample in flight with |status|. */
void qdl__nodes_fail_inflight(qdl_t *q, int status);
void qdl__stop_nodes(qdl_t *q);
void qdl__stats_fill(const qdl_t *q, qdl_node_stats_t *out, size_t cap);
/* Every open tcp:// connection's write_thread_min (cmn_conn_set_write_thread_min): 1 while the
 * loop is lent with lend_write_thread, the configured one otherwise. Thread running the loop. */
void qdl__conns_lend_writes(qdl_t *q, int on);

/* ---- node_liveness.c ------------------------------------------------------------------------ */

/* A Pong: the round trip of our last Ping. */
void qdl__live_pong(qdl_conn_t *qc, const Nsut__Pong *p);
/* A node's Ping: one Pong owed at most; a flood drops the node. */
void qdl__live_ping(qdl_conn_t *qc, const Nsut__Ping *m);
/* Connect deadlines, pings, liveness and progress deadlines. */
void qdl__nodes_tick(qdl_t *q, uint64_t now);

/* ---- node_session.c ------------------------------------------------------------------------- */

/* The connection is up (cmn_conn's connect callback): starts it and sends the Hello. */
void qdl__session_connected(cmn_conn_t *c, int status);
/* A HelloAck: checked, recorded, and the connection ready unless the node is not. */
void qdl__session_hello_ack(qdl_t *q, qdl_conn_t *qc, const Nsut__HelloAck *a);
/* The node's Error frame: the connection closes with its text (and a waiting start fails). */
void qdl__session_error(qdl_t *q, qdl_conn_t *qc, const Nsut__Error *e);
/* Answers qdl_create's request once every connection is ready. */
void qdl__check_start(qdl_t *q);

/* ---- node_frames_in.c ----------------------------------------------------------------------- */

/* What node.c's connections call above it: frames in, decode errors, the session's start. */
extern const qdl_node_events_t qdl__node_events;

/* ---- endpoint.c ----------------------------------------------------------------------------- */

/* Whether |address| names an endpoint ("openai+http://", "openai+https://"). */
int qdl__ep_address(const char *address);
/* An endpoint node from its address: URL, dialect, name. CMN_ECONFIG with a reason, or
 * CMN_ENOTSUP in a QDL built without libcurl and yajl. */
int qdl__ep_node_init(qdl_t *q, qdl_node_t *nd, cmn_errbuf_t *eb);
/* The HTTP pool and the event queue, when some node is an endpoint. */
int qdl__ep_open(qdl_t *q, cmn_errbuf_t *eb);
/* An endpoint "connection" comes up (there is no connection to make: each stream opens its own,
 * kept alive in the pool). */
void qdl__ep_connect(qdl_conn_t *qc);
/* Whether a sample can go to an endpoint: a whole number of int32 token IDs, no codec. */
int qdl__ep_sample_ok(const qdl_srec_t *s);
/* Sends sample |s| on endpoint connection |qc| as one stream and assigns its wire id; 0 or
 * -ENOMEM (nothing sent). */
int qdl__ep_send(qdl_t *q, qdl_conn_t *qc, qdl_srec_t *s);
/* Cancels the streams of a closing endpoint connection (their ends are dropped). */
void qdl__ep_cancel(qdl_conn_t *qc);
/* Stops the pool (every stream ends) and the event queue; on the loop thread, at stop. */
void qdl__ep_stop(qdl_t *q);
void qdl__ep_free(qdl_t *q);
/* qdl__ep_address, qdl__ep_node_init, qdl__ep_connect and qdl__ep_cancel, for node.c. */
extern const qdl_ep_hooks_t qdl__ep_hooks;

/* ---- dispatch.c ----------------------------------------------------------------------------- */

/* The connection the policy picks for a part with codec mask |codecs| on a node that accepts
 * frames of |min_frame| bytes, or NULL (no room). */
qdl_conn_t *qdl__pick(qdl_t *q, unsigned codecs, uint64_t min_frame);
/* How many of |pq|'s first samples the next part to |qc| carries (at least 1); *bytes their
 * payload. */
size_t qdl__part_size(const qdl_t *q, const qdl_conn_t *qc, const qdl_pq_t *pq, uint64_t *bytes);
/* Sends pending samples while some connection has room. */
void qdl__dispatch(qdl_t *q);

#endif
