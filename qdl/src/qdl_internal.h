/* QDL internals (qdl__ prefix). Not a public API.
 *
 * One libuv loop thread owns every node, connection, sample record and timer. Other threads talk
 * to it only through |reqs|, a cross-thread queue with coalesced wake-ups: issued queries, flush,
 * name, stats and stop requests. Synchronous requests (name, stats, stop, create) carry a
 * semaphore the caller waits on. */
#ifndef QDL_INTERNAL_H
#define QDL_INTERNAL_H

#include "qdl/qdl.h"

#include "cmn/arena.h"
#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/idmap.h"
#include "cmn/msg.h"
#include "cmn/pool.h"
#include "cmn/tls.h"
#include "cmn/net.h"
#include "cmn/ucx.h"
#include "cmn/xq.h"

#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

typedef struct qdl_node qdl_node_t;
typedef struct qdl_conn qdl_conn_t;

/* One sample from issue to completion. It sits in exactly one place at a time: a query's pending
 * list, or one connection's in-flight map, so it can never be completed twice. */
typedef struct qdl_srec {
    qdl_sample_t s;
    uint64_t query_id;
    uint64_t wire_id;
    uint64_t queued_ns;    /* when it became pending (for fail_timeout) */
    qdl_conn_t *conn;      /* NULL while pending */
    size_t index_in_block; /* position in its query's block (see qdl__srec_done) */
    struct qdl_srec *next;
} qdl_srec_t;

/* A query (or what is left of it) waiting for a connection with room. */
typedef struct qdl_pq {
    uint64_t query_id;
    qdl_srec_t *head, *tail;
    size_t n;
    uint32_t part; /* index of the next part sent */
    struct qdl_pq *next;
} qdl_pq_t;

enum { QC_IDLE, QC_CONNECTING, QC_HANDSHAKE, QC_READY, QC_CLOSING };

struct qdl_conn {
    cmn_conn_t c;
    qdl_node_t *node;
    unsigned index;
    int state;
    int open;     /* cmn_conn initialised and not yet closed */
    int draining; /* the node said Goodbye or rejected: no new samples */
    cmn_idmap_t inflight;
    uint32_t n_inflight;
    uint64_t ping_seq;
    uint64_t ping_sent_ns; /* 0: no Ping outstanding */
    uint64_t last_rx_ns;   /* the last frame from the node: proof it is alive */
    uint64_t state_ns;     /* when the current state began */
    uint64_t backoff_ms;
    uint64_t connects; /* connection attempts so far */
    int was_ready;     /* the closing connection had completed its handshake */
    char why[400];     /* why we closed it */
    uv_timer_t retry;  /* reconnect backoff */
    int retry_open;
};

struct qdl_node {
    qdl_t *q;
    unsigned index;
    char address[64];
    struct sockaddr_storage addr;
    cmn_transport_t transport; /* tcp:// or ucx:// */
    char name[256];
    char host[64]; /* the address's host part: the name its TLS certificate must carry */
    int named;     /* name known from a HelloAck */
    Nsut__Capabilities caps;
    char caps_backend[64], caps_device[256];
    int result_codec;
    unsigned sample_codecs; /* bit per codec the node accepts */
    double weight;
    uint64_t window; /* samples in flight per connection */
    uint64_t max_frame;
    qdl_conn_t *conns;
    uint32_t inflight; /* over all its connections */
    qdl_node_stats_t st;
    uint64_t name_reply_ns;
    char name_reply[256];
    int name_pending;
};

/* Requests from other threads. */
enum { RQ_ISSUE = 1, RQ_FLUSH, RQ_NAME, RQ_STATS, RQ_STOP, RQ_START };

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
    /* errors for the caller */
    char *err;
    size_t errlen;
} qdl_req_t;

struct qdl {
    qdl_config_t cfg;
    char *strings; /* owned copies of the config's strings */
    uv_loop_t loop;
    uv_thread_t thread;
    cmn_xq_t reqs;
    uv_timer_t tick;
    cmn_pool_t *pool;
    cmn_arena_t arena;
    cmn_tls_ctx_t *tls; /* NULL: plaintext */
    cmn_ucx_t *ucx;     /* the ucx:// transport, when a node address names it */
    qdl_node_t *nodes;
    size_t n_nodes;
    char client_name[128];

    uint64_t next_wire_id;
    uint64_t next_query_id;
    uint64_t rr; /* round-robin cursor */

    qdl_pq_t *pending_head, *pending_tail; /* queries waiting for room */
    size_t pending_samples;

    uint8_t *scratch; /* decoded response bytes for one frame */
    size_t scratch_cap;
    qdl_response_t *resp;
    size_t resp_cap;

    qdl_req_t *start_req;  /* qdl_create waiting for every node */
    qdl_req_t *name_req;   /* the Name() in progress */
    qdl_req_t *name_queue; /* Name() calls waiting their turn */
    int stopping;
    int handles_open;
    uint64_t name_seq;
};

/* qdl.c: a sample is finished (completed or failed); frees its query's block after the last. */
void qdl__srec_done(qdl_t *q, qdl_srec_t *s);

/* dispatch.c */
int qdl__nodes_init(qdl_t *q, char *err, size_t errlen);
void qdl__connect_all(qdl_t *q);
void qdl__conn_close(qdl_conn_t *qc, int reason, const char *why);
void qdl__enqueue(qdl_t *q, qdl_srec_t *samples, size_t n);
void qdl__dispatch(qdl_t *q);
void qdl__flush_nodes(qdl_t *q);
void qdl__tick(qdl_t *q);
void qdl__fail_all(qdl_t *q, int status);
int qdl__name_start(qdl_t *q, qdl_req_t *r);
void qdl__name_finish(qdl_t *q, int rc, const char *why);
void qdl__check_start(qdl_t *q);
void qdl__stop_nodes(qdl_t *q);
int qdl__ready_nodes(const qdl_t *q);

#endif
