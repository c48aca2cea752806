/* httpc/httpc.h: many concurrent HTTP requests on a libcurl connection pool, driven by libcurl's
 * multi-socket interface on a libuv loop that runs in a thread of its own.
 *
 * Lifecycle: httpc_create() starts the thread; httpc_submit() hands it a request from any
 * thread (a mutex-protected list plus one coalesced cmn_wake_send); the loop thread calls the
 * request's on_data for each piece of a 2xx response body and on_done exactly once at the end.
 * httpc_destroy() fails every request still queued or running (on_done with HTTPC_ESTOP),
 * then stops and joins the thread.
 *
 * Limits: at most |max_conns| transfers run at once (one HTTP/1.1 connection each); more
 * requests wait in the pool's own FIFO, not in libcurl's pending queue (whose transfers libcurl
 * 7.88 may neither start nor time out: a stall seen under load); each request has a deadline
 * (timeout_ms, from submission: a request that waited its whole deadline fails unstarted); an error
 * response's body is kept up to 512 bytes for the message. Callbacks run on the loop thread and
 * must not block.
 *
 * Cancel: httpc_cancel() marks a request from any thread; the loop thread then fails it with
 * HTTPC_ECANCEL: a queued one is never sent, a running one is removed from libcurl on the loop
 * thread (its connection is closed, so the server sees the client go). Idle deadline
 * (cfg.idle_ms > 0): a running transfer fails with HTTPC_EIDLE when idle_ms passes without
 * progress: from its start, then from its reader's last httpc_progress() (an LLM stream's
 * last token), checked every idle_ms/4 (10 ms..1 s).
 *
 * Read coalescing (cfg.coalesce_us > 0): once a transfer's urgent part is in (an LLM stream's
 * first token), its reader calls httpc_coalesce() from on_data; from then on the loop stops
 * watching that transfer's socket and reads it on a common tick every coalesce_us instead (one
 * poll() over all such sockets, then libcurl for the ready ones), so that one wake-up and one
 * recv bring several events. The rest of the response, its end included, then arrives up to
 * coalesce_us later than it could. Every other socket (connecting, sending, waiting for the first
 * token) is watched as usual. */
#ifndef HTTPC_HTTPC_H
#define HTTPC_HTTPC_H

#include <stddef.h>
#include <stdint.h>

#define HTTPC_ESTOP (-125)   /* -ECANCELED: the pool is shutting down */
#define HTTPC_ETRANSFER (-5) /* -EIO: connect, send or receive failed, or the deadline */
#define HTTPC_ESTATUS (-71)  /* -EPROTO: the server answered with a non-2xx status */
#define HTTPC_EABORT (-103)  /* -ECONNABORTED: on_data asked to stop */
#define HTTPC_ECANCEL (-125) /* -ECANCELED: httpc_cancel() picked it */
#define HTTPC_EIDLE (-62)    /* -ETIME: no progress for cfg.idle_ms */

typedef struct httpc httpc_t;
typedef struct httpc_req httpc_req_t;

struct httpc_req {
    /* Set by the caller; valid until on_done returns. */
    const char *url;
    const char *body; /* POST body */
    size_t body_len;
    const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
    long timeout_ms;
    /* Returns 0 to go on, non-zero to abort the transfer (on_done then gets HTTPC_EABORT). */
    int (*on_data)(httpc_req_t *r, const char *p, size_t n);
    /* status: 0, or HTTPC_E*; msg says what failed (curl's reason, or the server's status
     * and the start of its error body). */
    void (*on_done)(httpc_req_t *r, int status, const char *msg);
    /* Optional: each response header line (without its CRLF) of a 2xx response. */
    void (*on_header)(httpc_req_t *r, const char *line, size_t n);
    void *ctx;

    /* Private to httpc/src/httpc.c. */
    void *easy;
    void *hdrs;
    httpc_req_t *next, *prev;
    int aborted;
    int cancel;           /* marked by httpc_cancel() (under the pool's lock) */
    uint64_t progress_ns; /* its start, or its last httpc_progress() */
    int coalesce;         /* httpc_coalesce() was called */
    void *http;           /* the pool */
    void *psock;          /* the socket it is parked on, or NULL */
    int lport;            /* its connection's local TCP port (coalescing only) */
    uint64_t submit_ns;   /* when httpc_submit() took it (the deadline counts from here) */
    long http_code;
    char *errbody;
    size_t errbody_len;
};

/* The openai backend's default coalesce_us (its option), also llm_direct's (bench/llm). */
#define HTTPC_COALESCE_US_DEFAULT 2000

typedef struct {
    uint32_t max_conns;
    long connect_timeout_ms;
    uint32_t coalesce_us; /* 0: off; else the read tick of coalescing transfers (above) */
    long idle_ms;         /* 0: off; else the idle deadline of a running transfer (above) */
    const char *ca_file;  /* https: the CA file to verify servers against (NULL: the system's) */
} httpc_cfg_t;

/* 0, or a negative code with a reason in err. */
int httpc_create(const httpc_cfg_t *cfg, httpc_t **out, char *err, size_t errlen);
/* Thread-safe. 0, or HTTPC_ESTOP once destroy has begun (on_done is then not called). */
int httpc_submit(httpc_t *h, httpc_req_t *r);
void httpc_destroy(httpc_t *h);
/* Thread-safe. |r| fails soon with HTTPC_ECANCEL on the loop thread, unsent or aborted, unless
 * it finishes first. The caller guarantees that r's on_done has not returned (httpc/live.h). */
void httpc_cancel(httpc_t *h, httpc_req_t *r);
/* From r's on_data only: r made progress (restarts its idle deadline). */
void httpc_progress(httpc_req_t *r);
/* From r's on_data only: the rest of r's response may be read on the coalescing tick (above).
 * No effect when the pool's coalesce_us is 0. */
void httpc_coalesce(httpc_req_t *r);
/* How many times a transfer's connection was moved onto the coalescing tick so far (any thread;
 * for tests and figures). */
uint64_t httpc_parks(httpc_t *h);

#endif
