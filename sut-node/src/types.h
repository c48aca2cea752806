/* sut-node internals: the types that more than one file of the daemon sees. Types only: every
 * function lives in the header of the file that owns it (opts.h, alloc.h, backend.h, workers.h,
 * batcher.h, session.h, node.h). Not a public API.
 *
 * Threads: one libuv loop thread owns the listeners, every session, the batcher and all
 * bookkeeping. Worker threads run the backend and turn its results into records (sut_rec_t) that
 * reach the loop through one coalesced cross-thread queue (cmn/xq.h). */
#ifndef SUT_TYPES_H
#define SUT_TYPES_H

#include "cmn/xq.h"
#include "sut/sut_backend.h"

#include <stdatomic.h>
#include <stdint.h>

/* sut-node's version (--version, sut_node_build_info). */
#define SUT_VERSION "0.1.0"
#define SUT_MAX_LISTEN 8
#define SUT_MAX_BACKEND_OPTS 64
/* --backend unset: the packaged configuration's value, refused at start (main.c). */
#define SUT_BACKEND_UNSET "unset"

/* The node's configuration, from the command line and the config file (opts.c, main.c). Read-only
 * once the node is initialised. */
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
    uint32_t window;       /* --sliding-window: patch edge of 3D-UNet's window (slide.h); 0 off */
    uint32_t window_batch; /* --window-batch: patches per backend call; 0: the backend's */
    int result_codec;
    uint64_t max_frame;
    uint32_t max_connections;
    uint32_t max_conn_per_peer;
    uint32_t max_preauth;   /* connections before their Hello, all peers together; 0: sized */
    uint64_t memory_budget; /* bytes peers can make the node hold; 0: sized from the machine */
    uint32_t max_inflight;  /* samples per connection before reading pauses; 0: sized at init */
    uint64_t handshake_timeout_ms;
    uint64_t frame_timeout_ms; /* grace before a frame's minimum arrival rate applies */
    uint64_t idle_timeout_ms;  /* a handshaken connection with no frame (Pings aside), no work */
    uint64_t write_timeout_ms; /* a peer that takes none of its results this long */
    uint64_t drain_timeout_ms;
    uint64_t heartbeat_ms;     /* a Ping to a client that heard nothing from us this long */
    uint64_t response_hold_us; /* results may wait this long for the next turn's (cmn hold_ns) */
    uint64_t seed;
    int ucx_busy_poll;      /* --ucx-busy-poll: spin UCX progress on ucx:// listeners */
    int ucx_trusted_fabric; /* --ucx-trusted-fabric: ucx:// listeners allowed */
    const char *port_file;
    const char *metrics_listen; /* ADDR:PORT for Prometheus metrics, or NULL */
    const char *config_file;
    /* TLS (NULL cert: plaintext) */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;    /* verify client certificates against this CA (mutual TLS) */
    const char *tls_allow; /* comma-separated client certificate names allowed */
    char *owned[256];      /* strings copied from the config file and option keys */
    size_t n_owned;
} sut_opts_t;

/* The loaded backend (backend.c). */
typedef struct {
    const sut_backend_ops_t *ops;
    sut_backend_t *be;
    sut_backend_info_t info;
    void *dl;
    /* ops->cancel when the plugin's table has it (ABI 1.1), else NULL */
    void (*cancel)(sut_backend_t *b, sut_batch_t *batch, const size_t *indices, size_t n);
    /* ops->ready when the plugin's table has it (ABI 1.2), else NULL: ready at once. A 1.2
     * plugin may also put a failed sample's message in its result (fail_text). */
    int (*ready)(sut_backend_t *b, char *why, size_t whylen);
    int fail_text;
    /* ops->attach and ops->detach when the plugin's table has them (ABI 1.3), else NULL;
     * |attached| once attach() took the node's loop (node.c), until detach() */
    int (*attach)(sut_backend_t *b, void *uv_loop);
    void (*detach)(sut_backend_t *b);
    int attached;
} sut_be_t;

typedef struct sut_session sut_session_t;
struct sut_peer; /* a peer's account of the memory budget (budget.h) */

/* What travels on the completion queue: a sample's result or first token, or a released batch. */
enum { SUT_REC_RESULT = 1, SUT_REC_FIRST_TOKEN = 2, SUT_REC_BATCH_DONE = 3 };

typedef struct {
    cmn_xq_node_t link; /* first member */
    int kind;
} sut_qhdr_t;

/* A completed sample (or first token): made by workers.c, consumed by session.c. */
typedef struct {
    sut_qhdr_t h; /* first member */
    sut_session_t *s;
    uint64_t wire_id;
    int status; /* Nsut__Status */
    int codec;
    uint64_t raw_size;
    uint64_t wire_size;
    int64_t n_tokens;
    uint64_t queue_ns;   /* its Query's arrival to its batch's backend start (>= 1) */
    uint64_t backend_ns; /* its batch's backend start to this result (>= 1) */
    uint8_t *data;       /* pool buffer with wire_size bytes, or NULL */
    uint64_t charge;     /* bytes of the memory budget (and its peer's account) until sent */
    uint64_t in_charge;  /* its sample's decoded input on the peer's account (results only) */
    char *error; /* a failure's message from the backend (pool buffer, printable), or NULL */
} sut_rec_t;

/* Who a sample in a batch belongs to; opaque to the batcher and the workers. */
typedef struct {
    sut_session_t *s;
    uint64_t wire_id;
    int result_codec;      /* the session's negotiated result codec */
    uint64_t arrival_ns;   /* its Query frame was received (the node's latency metric) */
    struct sut_peer *peer; /* the session's account of the memory budget */
    uint64_t charge;       /* its decoded input on that account (set by the batcher) */
    int cancelled;         /* its client is gone: the backend was (or will be) told (workers.h) */
    uint64_t token1_ns;    /* its first token came back (streaming; metrics), or 0 */
} sut_owner_t;

/* The series the completion path observes into (cmn/metrics.h, set up by metrics.c; workers.c
 * only adds to them: lock-free atomics). */
struct cmn_series;
typedef struct {
    struct cmn_series *e2e;           /* arrival to result, per sample (ns) */
    struct cmn_series *queue;         /* arrival to its batch's backend start (ns) */
    struct cmn_series *ttft;          /* arrival to first token (ns) */
    struct cmn_series *tpot;          /* (result - first token) / (tokens - 1) (ns) */
    struct cmn_series *prompt_tokens; /* counter: input tokens of streaming samples */
    struct cmn_series *output_tokens; /* counter: tokens of completed samples */
    struct cmn_series *running;       /* gauge: samples the backend has started, not completed */
    struct cmn_series *engine_up;     /* gauge: 1 after a sample succeeded, 0 after one failed */
} sut_obs_t;

/* The node's view of a batch (formed by batcher.c, run by workers.c): the backend sees only |b|. */
typedef struct sut_nbatch sut_nbatch_t;
struct sut_nbatch {
    sut_batch_t b;   /* first member: the backend's handle converts back with a cast */
    sut_qhdr_t done; /* SUT_REC_BATCH_DONE travels on the completion queue as this */
    void *workers;   /* the sut_workers_t that runs it (set at submit) */
    sut_sample_t *samples;
    sut_owner_t *owners;
    size_t cap; /* sample slots */
    uint8_t *input;
    size_t input_cap;
    size_t used;
    atomic_size_t remaining; /* samples not yet completed, + 1 while infer() runs (any thread) */
    int wstate;              /* SUT_NB_* (workers.c; guarded by the workers' mutex) */
    uint64_t first_ns;       /* arrival of the first sample */
    uint64_t dispatch_ns;    /* handed to the workers */
    uint64_t start_ns;       /* the backend started it (after any queue wait) */
    uint64_t done_ns;        /* its last sample completed */
    uint64_t resp_charge;    /* the budget held for a plugin backend's response while it runs */
    sut_nbatch_t *next;      /* work queue / free list */
    sut_nbatch_t *rprev, *rnext; /* the batcher's list of dispatched batches (cancel) */
};

#endif
