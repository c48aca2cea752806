/* oai_http.h: many concurrent HTTP requests on a libcurl connection pool, driven by libcurl's
 * multi-socket interface on a libuv loop that runs in a thread of its own.
 *
 * Lifecycle: oai_http_create() starts the thread; oai_http_submit() hands it a request from any
 * thread (a mutex-protected list plus one coalesced uv_async_send); the loop thread calls the
 * request's on_data for each piece of a 2xx response body and on_done exactly once at the end.
 * oai_http_destroy() fails every request still queued or running (on_done with OAI_HTTP_ESTOP),
 * then stops and joins the thread.
 *
 * Limits: at most |max_conns| connections (and so concurrent HTTP/1.1 streams; more requests
 * wait in libcurl's queue); each request has a deadline (timeout_ms, from submission); an error
 * response's body is kept up to 512 bytes for the message. Callbacks run on the loop thread and
 * must not block.
 *
 * Read coalescing (cfg.coalesce_us > 0): once a transfer's urgent part is in (an LLM stream's
 * first token), its reader calls oai_http_coalesce() from on_data; from then on the loop stops
 * watching that transfer's socket and reads it on a common tick every coalesce_us instead (one
 * poll() over all such sockets, then libcurl for the ready ones), so that one wake-up and one
 * recv bring several events. The rest of the response, its end included, then arrives up to
 * coalesce_us later than it could. Every other socket (connecting, sending, waiting for the first
 * token) is watched as usual. */
#ifndef OAI_HTTP_H
#define OAI_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define OAI_HTTP_ESTOP (-125)   /* -ECANCELED: the pool is shutting down */
#define OAI_HTTP_ETRANSFER (-5) /* -EIO: connect, send or receive failed, or the deadline */
#define OAI_HTTP_ESTATUS (-71)  /* -EPROTO: the server answered with a non-2xx status */
#define OAI_HTTP_EABORT (-103)  /* -ECONNABORTED: on_data asked to stop */

typedef struct oai_http oai_http_t;
typedef struct oai_http_req oai_http_req_t;

struct oai_http_req {
    /* Set by the caller; valid until on_done returns. */
    const char *url;
    const char *body; /* POST body */
    size_t body_len;
    const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
    long timeout_ms;
    /* Returns 0 to go on, non-zero to abort the transfer (on_done then gets OAI_HTTP_EABORT). */
    int (*on_data)(oai_http_req_t *r, const char *p, size_t n);
    /* status: 0, or OAI_HTTP_E*; msg says what failed (curl's reason, or the server's status
     * and the start of its error body). */
    void (*on_done)(oai_http_req_t *r, int status, const char *msg);
    /* Optional: each response header line (without its CRLF) of a 2xx response. */
    void (*on_header)(oai_http_req_t *r, const char *line, size_t n);
    void *ctx;

    /* Private to oai_http.c. */
    void *easy;
    void *hdrs;
    oai_http_req_t *next, *prev;
    int aborted;
    int coalesce; /* oai_http_coalesce() was called */
    void *http;   /* the pool */
    void *psock;  /* the socket it is parked on, or NULL */
    int lport;    /* its connection's local TCP port (coalescing only) */
    long http_code;
    char *errbody;
    size_t errbody_len;
};

/* The openai backend's default coalesce_us (its option), also llm_direct's (bench/llm). */
#define OAI_HTTP_COALESCE_US_DEFAULT 2000

typedef struct {
    uint32_t max_conns;
    long connect_timeout_ms;
    uint32_t coalesce_us; /* 0: off; else the read tick of coalescing transfers (above) */
} oai_http_cfg_t;

/* 0, or a negative code with a reason in err. */
int oai_http_create(const oai_http_cfg_t *cfg, oai_http_t **out, char *err, size_t errlen);
/* Thread-safe. 0, or OAI_HTTP_ESTOP once destroy has begun (on_done is then not called). */
int oai_http_submit(oai_http_t *h, oai_http_req_t *r);
void oai_http_destroy(oai_http_t *h);
/* From r's on_data only: the rest of r's response may be read on the coalescing tick (above).
 * No effect when the pool's coalesce_us is 0. */
void oai_http_coalesce(oai_http_req_t *r);
/* How many times a transfer's connection was moved onto the coalescing tick so far (any thread;
 * for tests and figures). */
uint64_t oai_http_parks(oai_http_t *h);

#endif
