/* httpc/h1.h: the lean HTTP/1.1 client of the QDL's endpoint nodes (issue 39; httpc/README.md,
 * "Lean HTTP/1.1"). Two parts, no libcurl:
 *
 * - The response parser (src/h1_parse.c), no I/O: bytes in, events out (the head, spans of body
 *   pointing into the caller's buffer, the end). Every limit is checked before a byte is kept:
 *   the status line and each header line at most HTTPC_H1_MAX_LINE bytes, at most
 *   HTTPC_H1_MAX_HEADERS headers and HTTPC_H1_MAX_HEAD bytes of head, Content-Length digits only
 *   (and equal when repeated), a chunk-size line at most HTTPC_H1_MAX_CHUNK_LINE bytes with at
 *   most 15 hex digits, chunked and Content-Length together refused, any other transfer coding
 *   refused, control bytes in the head refused.
 * - Keep-alive connections on the caller's libuv loop (src/h1_conn.c): a pool per endpoint, one
 *   request per connection at a time (no pipelining), each request one write of a preformatted
 *   head and its body, the response parsed in place from the connection's receive buffer.
 *   Deadlines: connect, first byte, progress (no byte for idle_ms). A request that finds its
 *   reused keep-alive connection closed before any byte of the answer is sent again once on a
 *   new connection (the server's idle close raced it). Not thread-safe: everything runs on the
 *   loop's thread. */
#ifndef HTTPC_H1_H
#define HTTPC_H1_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* ---- the response parser --------------------------------------------------------------------- */

#define HTTPC_H1_MAX_LINE 8192u
#define HTTPC_H1_MAX_HEADERS 100u
#define HTTPC_H1_MAX_HEAD 65536u
#define HTTPC_H1_MAX_CHUNK_LINE 256u

/* httpc_h1_parse's events (>= 0); errors are negative (-71, EPROTO) with p->err set. */
enum { HTTPC_H1_MORE = 0, HTTPC_H1_HEAD = 1, HTTPC_H1_DATA = 2, HTTPC_H1_END = 3 };

typedef struct {
    int state;
    int status;      /* after HTTPC_H1_HEAD: the status code */
    int keep_alive;  /* the connection may carry the next request after HTTPC_H1_END */
    int chunked;     /* Transfer-Encoding: chunked */
    int has_length;  /* Content-Length given */
    int http10;      /* an HTTP/1.0 answer */
    uint64_t length; /* Content-Length */
    uint64_t left;   /* body bytes (or the chunk's) still to come */
    uint64_t seen;   /* every byte fed since init (0: nothing of the answer yet) */
    uint32_t n_headers;
    size_t head_bytes;
    size_t line_len; /* bytes of the line being gathered */
    size_t cur_len;  /* the whole line's length while it is handled */
    char line[HTTPC_H1_MAX_LINE];
    char err[192];
} httpc_h1_parser_t;

void httpc_h1_parser_init(httpc_h1_parser_t *p);
/* Consumes bytes of |buf| (*used of |n|) up to the next event and returns it: HTTPC_H1_MORE
 * (all of it used, nothing complete yet), HTTPC_H1_HEAD (p->status and the framing are known),
 * HTTPC_H1_DATA (*data, *len: body bytes in |buf|, chunk framing removed), HTTPC_H1_END (the
 * response is whole; bytes after it are not its), or -71 with p->err naming what and the limit.
 * Call it again (with the rest, even none) until HTTPC_H1_MORE: the end can follow the last body
 * byte with nothing more to read. After an error or the end it returns the same again. */
int httpc_h1_parse(httpc_h1_parser_t *p, const char *buf, size_t n, size_t *used, const char **data,
                   size_t *len);
/* The peer closed: HTTPC_H1_END when the body runs to the close (no length, not chunked), else
 * -71 with p->err saying where the answer was cut (nothing of it yet: "before answering"). */
int httpc_h1_parse_eof(httpc_h1_parser_t *p);

/* ---- keep-alive connections on a libuv loop -------------------------------------------------- */

/* -ECONNREFUSED: cannot connect (refused, timed out, no route, the TLS handshake failed) */
#define HTTPC_H1_ECONNECT (-111)

typedef struct httpc_h1_pool httpc_h1_pool_t;
typedef struct httpc_h1_req httpc_h1_req_t;

struct httpc_h1_req {
    const char *body; /* kept by the caller until on_done or httpc_h1_cancel */
    size_t body_len;
    const char *extra; /* more header lines, each ending in "\r\n", or NULL */
    size_t extra_len;
    /* A piece of a 2xx answer's body, in place. Nonzero stops the request: its connection is
     * closed and on_done gets HTTPC_EABORT. */
    int (*on_data)(httpc_h1_req_t *r, const char *p, size_t n);
    /* Exactly once unless cancelled: 0 (the whole answer came), HTTPC_H1_ECONNECT,
     * HTTPC_ETRANSFER (closed or cut, or an answer that does not parse), HTTPC_ESTATUS (non-2xx;
     * |msg| has the status and the start of the body), HTTPC_EIDLE (first-byte or progress
     * deadline), HTTPC_EABORT, HTTPC_ESTOP (the pool closed). |msg| names the address. */
    void (*on_done)(httpc_h1_req_t *r, int status, const char *msg);
    void *ctx;
    /* the pool's */
    struct h1_conn *conn;
    httpc_h1_req_t *next;
    int resent;
    int http_status;  /* the answer's status when on_done runs (0: none came) */
    uint64_t sent_ms; /* the loop's clock when a connection last took it; 0: still queued */
};

typedef struct {
    const char *host; /* a name or address; resolved once at create (its IPv4 address when it
                         has one, else its first) */
    uint16_t port;
    const char *path;           /* the request path, e.g. "/v1/completions" */
    const char *const *headers; /* fixed header lines without CRLF, NULL-terminated, or NULL */
    uint32_t max_conns;         /* connections at most; more requests wait in order */
    uint32_t connect_ms;        /* 0: 10 000 */
    uint32_t first_byte_ms;     /* after the request is written; 0: 600 000 */
    uint32_t idle_ms;           /* no byte for this long mid-answer; 0: 600 000 */
    /* HTTPS: TLS 1.2 or newer, ALPN http/1.1, the certificate verified against ca_file (PEM;
     * NULL: the system's store) and the host (SNI for a name); messages name "https://HOST:PORT" */
    int tls;
    const char *ca_file;
    uint32_t handshake_ms; /* the TLS handshake after the connect; 0: connect_ms */
    const char *method;    /* NULL: POST */
    /* Read coalescing (0: off): a request whose reader called httpc_h1_coalesce() is read on
     * one tick every coalesce_us with all such requests instead of on each arrival. */
    uint32_t coalesce_us;
} httpc_h1_cfg_t;

/* A pool on |loop| (handles made here; call on the loop's thread, or before it runs). 0, or a
 * negative code with |err| naming the address and why (it does not resolve, a bad header). */
int httpc_h1_pool_create(uv_loop_t *loop, const httpc_h1_cfg_t *cfg, httpc_h1_pool_t **out,
                         char *err, size_t errlen);
/* Starts |r| (or queues it): 0, and its on_done never runs from inside this call; or
 * HTTPC_ESTOP once the pool is closing (|r| not taken, no on_done). */
int httpc_h1_send(httpc_h1_pool_t *p, httpc_h1_req_t *r);
/* Drops |r| without its on_done: a waiting one leaves the queue, a running one's connection is
 * closed. |r| and its body are the caller's again on return. */
void httpc_h1_cancel(httpc_h1_pool_t *p, httpc_h1_req_t *r);
/* Every request fails with HTTPC_ESTOP (on_done runs here), every handle closes; the pool frees
 * itself once the loop has run their close callbacks. */
void httpc_h1_pool_close(httpc_h1_pool_t *p);
/* Requests sent on a reused connection, connections opened (for tests and figures). */
void httpc_h1_pool_counts(const httpc_h1_pool_t *p, uint64_t *reused, uint64_t *opened);
/* From |r|'s on_data (or any time while it runs): what is urgent of its answer is in (an LLM
 * stream's first token), so the rest may wait. Once two of its reads after this call come at
 * most coalesce_us / 2 apart (only then does a tick bring more than one read's worth), its
 * connection is no longer watched and is read on the pool's tick every cfg.coalesce_us, one
 * recv() bringing all that came since the last; it is watched again when the answer ends. Every
 * deadline, error and on_data stays as without; the answer's end comes up to coalesce_us later.
 * No effect when coalesce_us is 0, or when |r| has no connection yet. */
void httpc_h1_coalesce(httpc_h1_pool_t *p, httpc_h1_req_t *r);
/* Requests coalesced so far (tests, figures). */
uint64_t httpc_h1_pool_coalesces(const httpc_h1_pool_t *p);

#endif
