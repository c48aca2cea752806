/* qdl.h: the Query Dispatch Library (MLPerf Inference rules 6.2.1).
 *
 * The QDL looks like one SUT to LoadGen and sends every query's sample bytes over TCP to one or
 * more sut-node daemons, then hands each response back. It never batches, pads, caches or alters
 * sample data, and never merges two queries into one frame; it may split an Offline query into
 * parts across nodes (a network function), and it decodes compressed responses (timed, inside the
 * latency). Compression of samples happens earlier, in the QSL.
 *
 * Threads: the QDL runs its own libuv loop thread, which owns every socket. qdl_issue_query() and
 * qdl_flush() are thread-safe and never block on the network (they hand the query to the loop
 * thread through a coalesced wake-up). qdl_name() and qdl_stats() are thread-safe and block the
 * caller until the answer is in. The completion callbacks run on the QDL's loop thread, or, while
 * the loop is lent to a caller's thread (qdl_poll_begin), on that thread.
 *
 * Memory: sample bytes are written to the socket straight from the caller's memory (no copy in
 * user space); they must stay valid and unchanged until the sample's completion callback has run.
 * Response bytes passed to the callbacks are valid only during the call.
 *
 * Errors: functions return 0 or a negative code (cmn/err.h codes or negated errno values) and
 * write a sentence naming what failed and why into err[0..errlen) when err is not NULL.
 *
 * Faults: a node that disconnects or misses its ping deadline is marked down, and one that holds
 * samples past its progress deadline (progress_timeout_ms) is marked degraded; its in-flight
 * samples are sent again to the remaining nodes (at most max_dispatches times per sample) and it
 * is reconnected with a backoff that grows until the node completes work. When no node
 * is left, every outstanding and later sample completes with a negative status within
 * fail_timeout_ms: a lost node never hangs the caller. A response for an unknown or already
 * completed id is logged and dropped, never passed on twice. */
#ifndef QDL_QDL_H
#define QDL_QDL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qdl qdl_t;

typedef enum {
    QDL_POLICY_LEAST_OUTSTANDING = 0, /* the node with the fewest samples in flight (default) */
    QDL_POLICY_ROUND_ROBIN = 1,
    QDL_POLICY_WEIGHTED = 2, /* in-flight samples divided by the node's capability weight */
    /* Endpoints (LLMs): the node with the fewest tokens outstanding, each sample counted as its
     * prompt plus the output tokens expected (the mean the node has returned so far, at first
     * endpoint_max_tokens). Samples of a sut-node count their bytes / 4. */
    QDL_POLICY_LEAST_TOKENS = 3,
} qdl_policy_t;

/* One sample to dispatch; loadgen-node's lg_sample_t is this type (no copy between them). */
typedef struct {
    uint64_t response_id; /* the caller's id (LoadGen's ResponseId), returned on completion */
    const void *data;     /* sample bytes as they go on the wire (compressed if codec != 0) */
    size_t size;          /* bytes at data */
    int codec;            /* 0 none, 1 lz4 (cmpr/cmpr.h), chosen by the QSL */
    size_t raw_size;      /* decoded size (== size when codec is 0) */
    uint64_t index;       /* the caller's QSL sample index; the QDL neither reads nor sends it */
} qdl_sample_t;

/* One completed sample (or first token); loadgen-node's lg_response_t is this type, so the
 * QDL's completions reach lg_complete() as they are. */
typedef struct {
    uint64_t response_id; /* the sample's qdl_sample_t.response_id */
    int status;           /* 0, or a negative code: the sample failed and carries no data */
    const void *data;     /* decoded response bytes, valid during the callback only */
    size_t size;
    int64_t n_tokens; /* output tokens (LLMs); 0 otherwise */
    /* Where the sample's time went inside the QDL, on CLOCK_MONOTONIC (cmn_now_ns()): when
     * qdl_issue_query() took its query (one clock read per query), and when the Query part
     * carrying it (its last dispatch) was queued on its connection's writer, which writes all
     * the frames queued in a loop turn with one uv_write at that turn's end (one clock read per
     * part); a part queued by a thread the loop is lent to (qdl_poll_begin) is written at the
     * start of that thread's next qdl_poll(), and sent_ns is that moment. sent_ns - issued_ns is
     * the sample's queueing in the QDL. sent_ns is 0 for a sample that failed before it was ever
     * sent. Not set for first tokens. */
    uint64_t issued_ns, sent_ns;
    /* Where it went inside the node, as the node measured it (durations on the node's clock):
     * from its Query's arrival to its batch's backend start, and from that start to its result.
     * 0 when the node does not report them (an older node), and for first tokens. Clamped so
     * that together they are no longer than the round trip the QDL measured (sent_ns to the
     * result's arrival): a node reporting more is warned about once, naming it. */
    uint64_t node_queue_ns, node_backend_ns;
    /* A failed sample's reason as its node's backend gave it (an engine's own error text,
     * printable, at most 240 bytes), or NULL; and the name of the node that answered, or NULL
     * (a sample that failed in the QDL). Valid during the callback only. */
    const char *error;
    const char *node;
} qdl_response_t;

/* Called on the QDL loop thread with one or more completions (all responses of one frame). */
typedef void (*qdl_complete_cb)(void *user, const qdl_response_t *r, size_t n);

/* qdl_config_t.node_memory_budget's default. */
#define QDL_NODE_MEMORY_BUDGET_DEFAULT (1024ull * 1024 * 1024)

typedef struct {
    const char *const *nodes; /* "host:port" of each sut-node */
    size_t n_nodes;
    unsigned connections_per_node; /* default 1 */
    qdl_policy_t policy;
    int result_codec;            /* codec the QDL offers for responses: 0 none, 1 lz4 */
    uint64_t connect_timeout_ms; /* qdl_create waits this long for every node; default 5000 */
    uint64_t ping_interval_ms;   /* default 1000; 0 disables pings */
    uint64_t ping_timeout_ms;    /* no Pong within this marks the node down; default 3000 */
    uint64_t name_timeout_ms;    /* qdl_name waits this long for all replies; default 2000 */
    uint64_t fail_timeout_ms;    /* with no node up, samples fail after this; default 10000 */
    uint64_t reconnect_max_ms;   /* backoff cap for reconnects; default 2000 */
    uint64_t max_frame_size;     /* largest frame sent or accepted; default 256 MiB */
    uint32_t max_part_samples;   /* samples per Query frame when a query is split; default 1024 */
    const char *client_name;     /* shown in node logs; default "qdl@<host>:<pid>" */
    /* A node holding samples without completing any for this long is marked degraded: its
     * samples go to other nodes and it gets one sample at a time until it completes work.
     * 0 (default): 10 s (60 s for a streaming backend), or 4 x the slowest completion
     * the node has shown if longer. */
    uint64_t progress_timeout_ms;
    uint32_t max_dispatches; /* a sample sent this often without a result fails; default 3 */

    qdl_complete_cb on_complete;    /* required */
    qdl_complete_cb on_first_token; /* optional (LLM streaming) */
    void *user;

    /* TLS (NULL: plaintext). See qdl/README.md. */
    const char *tls_ca_file;   /* verify node certificates against this CA */
    const char *tls_cert_file; /* client certificate (mutual TLS) */
    const char *tls_key_file;
    const char *tls_server_name; /* expected node certificate name; default: the host part */

    /* ucx:// nodes: progress UCX on every loop turn instead of sleeping on its event fd
     * (lowest latency, one core busy; needed for UCX shared memory). Default 0. */
    int ucx_busy_poll;

    /* ucx:// nodes are refused unless this is 1: UCX 1.13 aborts the process on malformed
     * connection bytes from any peer that reaches its ports (cmn/ucx.h,
     * CMN_UCX_UNTRUSTED_REASON), so it is for a fabric where every host is trusted. Default 0;
     * NSUT_UCX_TRUSTED_FABRIC=1 in the environment as a fallback, for a program embedding the
     * QDL without an option for it. */
    int ucx_trusted_fabric;

    /* tcp:// nodes (not TLS): 0 (the default) writes every frame from the loop thread. N > 0
     * gives each connection a write thread, and the frames of a loop turn that make at least N
     * bytes leave from it (smaller ones still leave at once from the loop thread). The kernel's
     * copy of the sample bytes then runs beside the loop, so with connections_per_node > 1 one
     * node's copies spread over several cores: for a LoadGen host whose QDL loop thread is at
     * 100 % while cores are idle. On a host whose cores are all busy it costs a thread hop per
     * large write and gains nothing (bench/README.md, "Offline: spreading the copies"). */
    uint64_t write_thread_min;
    /* tcp:// nodes (not TLS): 0 (the default) lets a thread the loop is lent to (qdl_poll_begin)
     * write the frames itself, one writev per connection at the start of each qdl_poll(). 1 gives
     * each connection a write thread (as write_thread_min), idle while the loop thread runs the
     * loop, that writes every batch while the loop is lent: the polling thread (loadgen-node's
     * Server issue thread, --issue-write-thread) then never enters the kernel to write; it queues
     * the batch and, when the thread is waiting, wakes it. Endpoint nodes still write on the
     * polling thread. */
    int lend_write_thread;

    /* What nodes may make the QDL hold at once (a frame being received, the results decoded from
     * it), shared equally by every connection (n_nodes x connections_per_node); each
     * connection's share, at most max_frame_size, is the frame size the QDL advertises and
     * accepts. A node past its share is dropped with a line naming it and the limit, and its
     * samples go to other nodes. Default 1 GiB (with up to 4 connections, each keeps the 256 MiB
     * max_frame_size; a hostile node holds no more than that); at least 16 KiB per connection. */
    uint64_t node_memory_budget;

    /* A node whose HelloAck says it is not ready (its engine is down or loading its model) gets
     * no samples. qdl_create fails with CMN_ENOTREADY naming the node and the engine's reason
     * when this is 0 (the default); with N > 0 it waits up to N ms (instead of
     * connect_timeout_ms) for every node to be ready, reconnecting with the usual backoff, which
     * also covers a node not yet listening (connection refused). */
    uint64_t wait_ready_ms;
    /* Endpoint nodes (qdl/README.md, "Endpoints"): an address "openai+http://HOST:PORT[/PATH]"
     * or "openai+https://..." with an optional "?dialect=D" makes the node an OpenAI-compatible
     * serving engine: each sample (little-endian int32 token IDs) goes as one streaming
     * completion over HTTP, its first token is the first token, its token IDs the result. */
    const char *endpoint_dialect;   /* vllm (default), trtllm, sglang or llamacpp */
    const char *endpoint_model;     /* "model" of OpenAI requests; default "model" */
    uint32_t endpoint_max_tokens;   /* output tokens asked per sample; default 1024 */
    uint32_t endpoint_min_tokens;   /* default 0 */
    uint32_t endpoint_max_inflight; /* streams in flight per endpoint; default 256 */
    const char *endpoint_api_key;   /* sent as "Authorization: Bearer KEY"; NULL: none */
    /* A header naming each sample's session ("NAME: <response id>"), as MLCommons Endpoints'
     * X-Session-ID, for a router that keeps a session on one replica; NULL: none. */
    const char *endpoint_session_header;
    /* The CA openai+https:// endpoints' certificates are verified against; NULL: tls_ca_file,
     * else the system's CAs. Apart from tls_ca_file, which also turns on TLS to every sut-node,
     * so plaintext sut-nodes and an endpoint with a private CA can share one fabric. */
    const char *endpoint_ca_file;
    /* Endpoints' HTTP client: 0 (default) the lean HTTP/1.1 client on the QDL's loop, its own TLS
     * for openai+https:// (TLS 1.2+, the certificate and host verified); 1 libcurl's pool on a
     * thread of its own (for comparison, or an engine the lean client cannot speak to). */
    int endpoint_curl;
} qdl_config_t;

/* Fills |cfg| with the defaults above (no nodes, no callback). */
void qdl_config_init(qdl_config_t *cfg);

/* Starts the loop thread, connects to every node and completes the handshake. Returns 0 and
 * *out, or a negative code when a node cannot be reached within connect_timeout_ms, refuses the
 * handshake, is not ready (CMN_ENOTREADY; see wait_ready_ms), or two nodes report the same
 * name. */
int qdl_create(const qdl_config_t *cfg, qdl_t **out, char *err, size_t errlen);

/* LoadGen's Name(): sends a NameRequest to every node and waits for all replies (a network round
 * trip on every call, never a cached answer). Writes "Network SUT (<n> nodes: name1, name2, ...)"
 * into buf when every node is a sut-node; with an endpoint among them "Endpoint SUT (<n> nodes:
 * ...)", an endpoint named "endpoint <dialect> <URL>" (no round trip for it). Fails with
 * CMN_EDUPNAME naming both nodes when two names are equal, or CMN_ETIMEOUT. *duration_ns (may be
 * NULL) receives the time the round trips took. */
int qdl_name(qdl_t *q, char *buf, size_t len, uint64_t *duration_ns, char *err, size_t errlen);

/* Dispatches one query (n samples). Thread-safe, non-blocking. The samples array itself may be
 * reused when the call returns; the bytes it points at may not (see Memory above). */
int qdl_issue_query(qdl_t *q, const qdl_sample_t *samples, size_t n);

/* LoadGen's FlushQueries(): asks every node to run its partial batches now. Thread-safe. */
int qdl_flush(qdl_t *q);

/* The loop lent to the calling thread, for a host thread that would otherwise spin or sleep
 * between issues (a Server issue thread): from qdl_poll_begin() until qdl_poll_end() the QDL's
 * loop thread sleeps and the caller runs the loop with qdl_poll(). Meanwhile qdl_issue_query()
 * from this thread dispatches at once, without a hand-off, and the frames leave at the start of
 * its next qdl_poll(), before that poll reads responses; the completion callbacks run on this
 * thread, inside qdl_poll() (and inside qdl_name() and qdl_stats(), which poll until answered);
 * other threads may still call everything they could before, served whenever this thread polls.
 * qdl_destroy() on this thread ends the lend first. SIGPIPE is blocked on the thread while lent (a
 * node closing mid-write is an EPIPE), and a SIGPIPE left pending is taken at the end.
 *
 * qdl_poll_begin(): 0, UV_EBUSY (this thread polls another QDL), UV_ENOTSUP (a ucx:// node: its
 * worker stays on the loop thread), CMN_ECLOSED (being destroyed); a no-op if already lent.
 * qdl_poll(): runs what is ready now; with timeout_ns > 0 then waits up to that long for network
 * I/O or the QDL's next timer and runs what that made ready. Returns 1 when woken by I/O, 0
 * otherwise, UV_EINVAL when the loop is not lent to this thread. The sleep's precision is the
 * kernel's (ppoll, with this thread's timer slack).
 * qdl_poll_end(): gives the loop back (a no-op when not lent to this thread). */
int qdl_poll_begin(qdl_t *q);
int qdl_poll(qdl_t *q, uint64_t timeout_ns);
void qdl_poll_end(qdl_t *q);

/* Per-node counters. */
typedef struct {
    char name[256];
    char address[64];
    int up;
    uint64_t samples_sent, samples_completed, samples_failed;
    uint64_t bytes_out, bytes_in;
    uint64_t inflight;
    uint64_t redispatched; /* samples moved to another node after this one went down */
    uint64_t errors;
    uint64_t reconnects;
    uint64_t rtt_ns_last, rtt_ns_min; /* ping round trips */
    uint64_t losses; /* connections lost after their handshake (closed, stuck, dead) */
    uint64_t stalls; /* progress deadlines missed (samples held, none completed) */
    int degraded;    /* now on probation: one sample at a time until it completes one */
    /* Endpoints: requests sent again once on a new connection because the engine closed the
     * kept-alive one as they went out (nothing of their answer came; httpc/h1.h), counted as
     * each request ends. The engine got samples_sent requests, plus those of these it read
     * before closing (none when its idle close came first). */
    uint64_t resent;
    /* Gathered writes to the node (one per flushed batch of frames, tcp:// and TLS), and how many
     * of them a write thread wrote (write_thread_min, lend_write_thread). */
    uint64_t batches_out, batches_write_thread;
} qdl_node_stats_t;

/* Copies up to |cap| nodes' counters into |out|; returns the number of nodes (may exceed cap). */
int qdl_stats(qdl_t *q, qdl_node_stats_t *out, size_t cap);

/* Prints the per-node counters as a table (for the end of a run). */
void qdl_stats_print(qdl_t *q, void *file /* FILE* */);

/* Writes the per-node counters as one JSON object {"nodes": [{"name": ..., "address": ...,
 * "up", "degraded", "samples_sent", "samples_completed", "samples_failed", "redispatched",
 * "errors", "reconnects", "losses", "stalls", "inflight", "bytes_out", "bytes_in", "resent",
 * "rtt_us_last", "rtt_us_min"}, ...]} followed by a newline, e.g. into a run's output folder.
 * Thread-safe. Returns 0, -ENOMEM, or UV_EIO when the write fails. */
int qdl_stats_write_json(qdl_t *q, void *file /* FILE* */);

/* Registers [ptr, ptr+len) (QSL memory, e.g. each sample when it loads) with the transport once, so
 * sends from it need no per-send registration and, on an RDMA fabric, the node reads the bytes
 * straight from it. A no-op returning 0 when no node uses ucx:// (tcp:// needs nothing). The memory
 * must stay valid until qdl_unregister_memory() or qdl_destroy(). Thread-safe. Returns 0 or
 * CMN_ECONFIG (UCX refused; sends from it still work, registering per send). */
int qdl_register_memory(qdl_t *q, void *ptr, size_t len);

/* Undoes qdl_register_memory() for the region starting at |ptr| (before freeing it, with no
 * query from it outstanding); a no-op when none does or no node uses ucx://. Thread-safe. */
void qdl_unregister_memory(qdl_t *q, void *ptr);

/* Stops the loop thread and closes every connection (sending Goodbye). Samples still outstanding
 * complete with CMN_ECLOSED before it returns. */
void qdl_destroy(qdl_t *q);

#ifdef __cplusplus
}
#endif

#endif
