/* sut-node internals shared by the daemon's source files (sut__ prefix). Not a public API.
 *
 * Threads: one libuv loop thread owns the listeners, every connection (session), the batcher and
 * all bookkeeping. Worker threads only call the backend's infer() and, through
 * sut__batch_complete(), turn results into records that reach the loop through one coalesced
 * cross-thread queue. Fields are loop-thread-only unless marked otherwise. */
#ifndef SUT_NODE_INTERNAL_H
#define SUT_NODE_INTERNAL_H

#include "cmn/arena.h"
#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/idmap.h"
#include "cmn/msg.h"
#include "cmn/pool.h"
#include "cmn/tls.h"
#include "cmn/ucx.h"
#include "cmn/xq.h"
#include "sut/sut_backend.h"

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#define SUT_MAX_LISTEN 8
#define SUT_MAX_BACKEND_OPTS 64

typedef struct {
    const char *listen[SUT_MAX_LISTEN];
    size_t n_listen;
    const char *name;    /* NULL: <hostname>:<port> */
    const char *backend; /* built-in name, or a path to a plugin (contains '/') */
    const char *opt_keys[SUT_MAX_BACKEND_OPTS];
    const char *opt_values[SUT_MAX_BACKEND_OPTS];
    size_t n_opts;
    const char *device;
    uint32_t max_batch;       /* 0: the backend's max_batch */
    uint64_t max_batch_bytes; /* input bytes in one batch */
    uint64_t max_wait_us;     /* 0: dispatch as soon as an engine is idle */
    uint32_t workers;         /* 0: the backend's engine count */
    uint32_t threads;
    int result_codec;
    uint64_t max_frame;
    uint32_t max_connections;
    uint32_t max_conn_per_peer;
    uint32_t max_inflight; /* samples per connection before reading pauses */
    uint64_t handshake_timeout_ms;
    uint64_t frame_timeout_ms;
    uint64_t drain_timeout_ms;
    uint64_t heartbeat_ms; /* a Ping to a client that heard nothing from us this long */
    uint64_t seed;
    const char *port_file;
    const char *config_file;
    /* TLS (NULL cert: plaintext) */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;    /* verify client certificates against this CA (mutual TLS) */
    const char *tls_allow; /* comma-separated client certificate names allowed */
    char *owned[256];      /* strings copied from the config file and option keys */
    size_t n_owned;
} sut_opts_t;

void sut__opts_defaults(sut_opts_t *o);
/* Keeps |s| (malloc'ed) until sut__opts_free; returns it, or NULL (and frees it) when full. */
char *sut__opts_own(sut_opts_t *o, char *s);
void sut__opts_free(sut_opts_t *o);

typedef struct sut_node sut_node_t;
typedef struct sut_session sut_session_t;
typedef struct sut_nbatch sut_nbatch_t;

/* A completed sample (or first token, or a released batch) travelling to the loop thread. */
enum { REC_RESULT = 1, REC_FIRST_TOKEN = 2, REC_BATCH_DONE = 3 };

/* Header of everything on the completion queue. */
typedef struct {
    cmn_xq_node_t link; /* first member */
    int kind;
} sut_qhdr_t;

typedef struct {
    sut_qhdr_t h; /* first member */
    sut_session_t *s;
    uint64_t wire_id;
    int status; /* Nsut__Status */
    int codec;
    uint64_t raw_size;
    uint64_t wire_size;
    int64_t n_tokens;
    uint8_t *data; /* pool buffer with wire_size bytes, or NULL */
} sut_rec_t;

typedef struct {
    sut_session_t *s;
    uint64_t wire_id;
} sut_owner_t;

/* The node's view of a batch: the backend sees only |b|. */
struct sut_nbatch {
    sut_batch_t b;   /* first member: the backend's handle converts back with a cast */
    sut_qhdr_t done; /* REC_BATCH_DONE travels on the completion queue as this */
    sut_node_t *node;
    sut_sample_t *samples;
    sut_owner_t *owners;
    size_t cap; /* sample slots */
    uint8_t *input;
    size_t input_cap;
    size_t used;
    atomic_size_t remaining; /* samples not yet completed (any thread) */
    uint64_t first_ns;       /* arrival of the first sample */
    uint64_t dispatch_ns;
    int inline_run;
    sut_nbatch_t *next; /* work queue / free list */
};

struct sut_session {
    cmn_conn_t conn;
    sut_node_t *node;
    int ready; /* handshake done */
    int dead;  /* connection closed: results are dropped */
    int refs;  /* 1 for the connection + 1 per sample in flight */
    uint32_t inflight;
    cmn_idmap_t ids;        /* wire ids in flight */
    unsigned sample_codecs; /* bit per accepted codec */
    int result_codec;
    uint64_t result_max_frame;
    uint64_t accepted_ns;
    uint64_t progress_bytes; /* conn.bytes_in at the last tick */
    uint64_t progress_ns;
    uint64_t hb_frames; /* conn.frames_out when the heartbeat clock last restarted */
    uint64_t hb_ns;
    uint64_t hb_seq;
    char peer_ip[64];
    sut_session_t *prev, *next;
    /* results gathered during one completion pass */
    sut_rec_t **pend_res, **pend_tok;
    size_t n_res, n_tok, cap_res, cap_tok;
    sut_session_t *touched_next;
    int touched;
    sut_nbatch_t *sink; /* the batch receiving the current frame's payload directly, or NULL */
};

typedef struct {
    uint64_t connections_total;
    uint64_t queries, samples, batches;
    uint64_t bytes_in, bytes_out;
    uint64_t decode_ns, infer_ns;
    uint64_t errors, samples_failed, samples_rejected;
} sut_stats_t;

struct sut_node {
    sut_opts_t opt;
    uv_loop_t *loop;
    char name[256];
    uv_tcp_t listeners[SUT_MAX_LISTEN];
    cmn_ucx_t *ucx; /* the ucx:// transport, when a listen address names it */
    cmn_ucx_listener_t *ucx_listeners[SUT_MAX_LISTEN];
    size_t n_listeners;
    int listening;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t tick;
    uv_timer_t batch_timer;
    uv_check_t batch_check;
    uv_timer_t drain_timer;
    cmn_xq_t done_q;
    int handles_ready; /* the loop handles exist: sut__node_stop can close them */
    int batcher_ready; /* the work queue's mutex and condition exist */
    cmn_arena_t arena; /* unpacking of received metadata (loop thread) */

    sut_session_t *sessions;
    uint32_t n_sessions;

    /* backend */
    const sut_backend_ops_t *ops;
    sut_backend_t *be;
    sut_backend_info_t info;
    void *dl;
    uint32_t max_batch;
    uint32_t engines;

    cmn_pool_t *pool;

    /* batcher (loop thread) */
    sut_nbatch_t *open;
    sut_nbatch_t *free_batches;
    uint32_t batches_inflight;
    /* An inline backend completes on the loop thread, inside infer(): its records are gathered
     * here and handled right after, without a trip through the cross-thread queue. */
    int inline_active;
    cmn_xq_node_t *local_first, *local_last;

    /* work queue (shared with workers) */
    uv_mutex_t wq_mu;
    uv_cond_t wq_cv;
    sut_nbatch_t *wq_head, *wq_tail;
    int wq_stop;
    uv_thread_t *threads;
    uint32_t n_threads;

    /* lifecycle */
    int draining;
    int stopping;
    int exit_code;
    uint64_t started_ns;

    sut_stats_t st;
    atomic_uint_fast64_t encode_ns; /* worker threads */
    atomic_uint_fast64_t failed_by_backend;

    cmn_tls_ctx_t *tls; /* NULL: plaintext */
};

/* node.c */
int sut__node_init(sut_node_t *n, uv_loop_t *loop, const sut_opts_t *opt, cmn_errbuf_t *eb);
int sut__node_listen(sut_node_t *n, cmn_errbuf_t *eb);
void sut__node_drain(sut_node_t *n, const char *why);
void sut__node_stop(sut_node_t *n);
void sut__node_log_stats(sut_node_t *n);
void sut__session_release(sut_session_t *s);
void sut__session_protocol_error(sut_session_t *s, int code, int wire_err, const char *why);

/* batch.c */
int sut__batcher_init(sut_node_t *n, cmn_errbuf_t *eb);
void sut__batcher_shutdown(sut_node_t *n);
/* Places one sample into the open batch (decoding it). Returns 0 or a negative code with a
 * reason in |eb| (the caller closes the connection). */
int sut__batcher_add(sut_node_t *n, sut_session_t *s, uint64_t wire_id, int codec,
                     const uint8_t *wire, uint64_t wire_size, uint64_t raw_size, cmn_errbuf_t *eb);
void sut__batcher_flush(sut_node_t *n);
/* Zero-copy receive: a batch of its own whose input is |bytes| long, into which a Query frame's
 * uncompressed payload is read straight from the socket. Then add the frame's samples (in
 * payload order) and commit, or abort when the frame never completes. */
sut_nbatch_t *sut__batcher_sink_open(sut_node_t *n, size_t bytes);
void sut__batcher_sink_add(sut_nbatch_t *nb, sut_session_t *s, uint64_t wire_id, size_t size);
void sut__batcher_sink_commit(sut_node_t *n, sut_nbatch_t *nb);
void sut__batcher_kick(sut_node_t *n);
/* Completion records from the queue (loop thread). */
void sut__on_records(cmn_xq_t *q, cmn_xq_node_t *list);
/* Result for a sample the node did not run (loop thread). */
void sut__reject_sample(sut_node_t *n, sut_session_t *s, uint64_t wire_id);
void sut__session_flush_results(sut_session_t *s);

/* backend.c */
int sut__backend_load(sut_node_t *n, cmn_errbuf_t *eb);
void sut__backend_unload(sut_node_t *n);
const char *sut__backend_list(void);

/* built-in backends */
const sut_backend_ops_t *sut_backend_null_ops(void);
const sut_backend_ops_t *sut_backend_digest_ops(void);
const sut_backend_ops_t *sut_backend_sim_ops(void);

#endif
