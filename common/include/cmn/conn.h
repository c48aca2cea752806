/* A framed connection on a libuv loop: TCP (optionally TLS), or UCX (cmn/ucx.h), one API.
 *
 * Reading: bytes go into one reusable buffer per connection and through the frame decoder; each
 * complete frame is handed to on_frame, valid only during the call. The body of a large frame is
 * read straight into the decoder's buffer (no user-space copy).
 *
 * Writing: cmn_conn_send() queues a frame (header + metadata packed into a per-batch buffer, the
 * payload referenced in place). Everything queued during one loop turn leaves in a single
 * uv_write of all the buffers, issued from a check handle at the end of that turn (of the next
 * turn when queued from a check callback: an idle handle keeps that turn's poll from blocking),
 * so no frame waits for another (unless hold_ns says so) and N frames cost one syscall. The payload
 * must stay valid until the frame's sent callback runs.
 *
 * Backpressure: cmn_conn_backlog() is the bytes queued and not yet taken by the kernel; producers
 * stop above the high-water mark and on_drain fires when it falls under the low-water mark.
 *
 * Lifecycle (libuv style): cmn_conn_init, then either cmn_conn_accept() or cmn_conn_connect();
 * cmn_conn_start() begins reading. cmn_conn_close() or cmn_conn_shutdown() end it; on_close runs
 * once every handle is closed, after which the memory may be freed.
 *
 * UCX (cmn_conn_connect_ucx / cmn_conn_accept_ucx instead of connect / accept): each frame
 * is one UCX active message, sent at once (UCX gathers itself); the payload goes from the
 * caller's memory and, when large, by rendezvous straight into the frame decoder's payload sink.
 * Frames arrive in order; read_pause holds them (a large payload stays at the sender until
 * reading resumes). TLS is for TCP only.
 *
 * Thread-safety: none. Every function must be called on the loop thread (a connection's write
 * thread, see write_thread_min, is internal: its completions run on the loop thread too). */
#ifndef CMN_CONN_H
#define CMN_CONN_H

#include "cmn/frame.h"

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

typedef struct cmn_conn cmn_conn_t;
struct cmn_tls_ctx;
struct cmn_ucx;
struct cmn_ucx_incoming;

typedef struct {
    /* A complete frame. The frame memory is valid during the call only. */
    void (*on_frame)(cmn_conn_t *c, const cmn_frame_t *f);
    /* The byte stream broke the framing rules (err is a cmn_frame_decode code). Optional: the
     * default closes the connection. The callee typically sends an Error frame and calls
     * cmn_conn_shutdown(). */
    void (*on_decode_error)(cmn_conn_t *c, int err);
    /* Every handle is closed; |reason| is what cmn_conn_close() was given (or the read error). */
    void (*on_close)(cmn_conn_t *c, int reason);
    /* Optional: the write backlog fell under the low-water mark. */
    void (*on_drain)(cmn_conn_t *c);
} cmn_conn_callbacks_t;

/* Called when the kernel has taken the frame (status 0) or the connection closed first
 * (status < 0); the payload is no longer referenced. */
typedef void (*cmn_conn_sent_cb)(void *arg, int status);

typedef struct {
    size_t read_buf_size;         /* default 64 KiB */
    size_t write_high_water;      /* default 16 MiB */
    size_t write_low_water;       /* default 4 MiB */
    unsigned keepalive_s;         /* TCP keepalive idle time; 0 disables; default 30 */
    uint64_t shutdown_timeout_ms; /* how long cmn_conn_shutdown waits for the peer; default 2000 */
    /* ucx:// copies a frame of several payload segments into one buffer (UCX 1.13 mishandles iov
     * lists on rendezvous: common/src/ucx.c). With copy_alloc set, the copy comes from it and
     * the send's callback runs as soon as the copy is made, inside cmn_conn_send (status 0): the
     * caller's buffers are free then and the copy is the only one held, so a caller that budgets
     * its buffers (sut-node) budgets the copy instead of holding both. copy_alloc may return
     * NULL (cmn_conn_send then fails with -ENOMEM). Default NULL: malloc, callback when UCX
     * completes the send. tcp:// never copies. */
    void *(*copy_alloc)(void *ctx, size_t size);
    void (*copy_free)(void *ctx, void *p, size_t size);
    void *copy_ctx;
    /* tcp:// without TLS: 0 (the default) writes every frame from the loop thread. Otherwise the
     * connection gets a write thread of its own, and a loop turn's frames of at least this many
     * bytes leave from it (smaller ones still leave at once from the loop thread, without a
     * thread hop, unless the thread is still writing: frames never overtake each other). The
     * kernel's copy of large payloads then runs beside the loop, and a program with several
     * connections spreads their copies over the cores (common/src/writer.c). */
    size_t write_thread_min;
    /* tcp://: 0 (the default) writes a turn's frames at the end of that turn. Otherwise they may
     * wait for the next turn's frames and leave with them in one write, but only while the peer
     * keeps sending (the turn read frames from it; a turn that reads none writes at once), while
     * they are small (64 KiB) and for at most hold_ns after the first of them was queued. A busy
     * responder (sut-node, --response-hold-us) makes fewer, larger writes; an idle one never
     * waits. */
    uint64_t hold_ns;
} cmn_conn_options_t;

cmn_conn_options_t cmn_conn_options_default(void);

/* What crossed the connection so far (cmn_conn_stats). */
typedef struct {
    uint64_t bytes_in, bytes_out;   /* on the wire (TLS: ciphertext in, plaintext out) */
    uint64_t frames_in, frames_out; /* frames handed to on_frame / queued by cmn_conn_send */
    uint64_t batches_out;           /* gathered writes: one per flushed batch of frames */
    uint64_t batches_thread;        /* of them, handed to the write thread (write_thread_min) */
} cmn_conn_stats_t;

/* Room for the connection's private state (common/src/core.c checks at build time that it fits). */
#define CMN_CONN_PRIVATE_SIZE 1536

/* A connection. Only |data| is the owner's; the rest is private to common/ (the framing core and
 * its transport, common/src/core.h), kept here so that an owner can embed the connection. Read it
 * through the functions below. */
struct cmn_conn {
    void *data; /* owner's pointer */
    union {
        void *p;
        uint64_t u;
        long double ld;
        unsigned char bytes[CMN_CONN_PRIVATE_SIZE];
    } private_;
};

/* |opt| may be NULL for defaults. Returns 0 or a negative code. */
int cmn_conn_init(uv_loop_t *loop, cmn_conn_t *c, const cmn_conn_callbacks_t *cb,
                  const cmn_conn_options_t *opt, const cmn_frame_limits_t *limits);

/* Connects to |addr|; |cb| gets 0 or a negative code (the caller then closes the connection). */
int cmn_conn_connect(cmn_conn_t *c, const struct sockaddr *addr,
                     void (*cb)(cmn_conn_t *c, int status));

/* The same over UCX (cmn/ucx.h): |cb| gets 0 once the peer's listener accepted the endpoint.
 * Returns 0, CMN_ECONFIG (TLS was asked for: it is TCP only) or CMN_ECLOSED. */
int cmn_conn_connect_ucx(cmn_conn_t *c, struct cmn_ucx *u, const struct sockaddr *addr,
                         void (*cb)(cmn_conn_t *c, int status));

/* From a cmn_ucx_listen callback: takes the connection request into |c| (after cmn_conn_init,
 * before cmn_conn_start). Returns 0 or a negative code (the request is then rejected). */
int cmn_conn_accept_ucx(cmn_conn_t *c, struct cmn_ucx_incoming *in);

/* "tcp", "tcp+write-thread" (write_thread_min), "tls" or "ucx:<UCX transports in use>" (e.g.
 * "ucx:posix", "ucx:tcp", "ucx:rc_mlx5"); "unconnected" before connect / accept. */
void cmn_conn_describe(const cmn_conn_t *c, char *buf, size_t len);

/* Runs TLS on this connection (cmn/tls.h); call before cmn_conn_start. |peer_name|: for a client,
 * the host or address its server certificate must match (NULL: the connected address's IP).
 * Returns 0 or CMN_ETLS / -ENOMEM. */
int cmn_conn_use_tls(cmn_conn_t *c, struct cmn_tls_ctx *ctx, const char *peer_name);

/* Why the connection closed by itself (a TLS failure, a read error): a sentence, or "" when it
 * was closed by its owner or by the peer's orderly close. Valid in on_close. */
const char *cmn_conn_last_error(const cmn_conn_t *c);

/* With TLS: the peer certificate's common name once the handshake is done, else "". */
const char *cmn_conn_tls_peer(const cmn_conn_t *c);

/* After accept or connect: TCP_NODELAY, keepalive, the peer name, and reading starts. */
int cmn_conn_start(cmn_conn_t *c);

/* New frame limits (after the handshake); apply from the next frame header. */
void cmn_conn_set_limits(cmn_conn_t *c, const cmn_frame_limits_t *limits);

/* Queues one frame. |payload| segments are referenced, not copied, until |cb| runs (cb may be
 * NULL when nothing needs releasing). Returns 0, CMN_ECLOSED when closing, -ENOMEM, or an
 * encoding error (CMN_ETOOBIG, CMN_EPAYLOAD); on error |cb| is not called. */
int cmn_conn_send(cmn_conn_t *c, unsigned type, const ProtobufCMessage *meta,
                  const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg);

/* Hands the frames queued so far to the socket now rather than in the loop turn's check phase,
 * after the turn's reads (the QDL's loop lent to an issue thread writes a query's frame before
 * it reads responses). No-op for ucx:// (it sends at once) or a closing connection. */
void cmn_conn_flush(cmn_conn_t *c);

/* Bytes queued but not yet taken by the kernel. */
size_t cmn_conn_backlog(const cmn_conn_t *c);

/* Whether the backlog is above the high-water mark (producers should wait for on_drain). */
int cmn_conn_congested(const cmn_conn_t *c);
/* Whether a frame of several payload segments is copied into one buffer to be sent (ucx://, see
 * copy_alloc): a sender of large payloads then sends them one per frame. */
int cmn_conn_copies_segments(const cmn_conn_t *c);

void cmn_conn_read_pause(cmn_conn_t *c);
void cmn_conn_read_resume(cmn_conn_t *c);

/* Accepts a pending TCP connection from |server| (a listening uv_tcp_t) into |c| (after
 * cmn_conn_init, before cmn_conn_start); the peer's address is known from here on. Returns 0 or
 * a negative code (the caller then closes the connection). */
int cmn_conn_accept(cmn_conn_t *c, uv_stream_t *server);

/* "1.2.3.4:5678" or "[::1]:5678" (ucx://: the address UCX's connection request named), for log
 * messages; "(unconnected)" before connect/accept. */
const char *cmn_conn_peer(const cmn_conn_t *c);

/* 0 while open, 1 during cmn_conn_shutdown (flushing, waiting for the peer), 2 once closing or
 * closed (cmn_conn_close, an error, the peer's close). */
int cmn_conn_closing(const cmn_conn_t *c);

/* Whether reading is paused by cmn_conn_read_pause. */
int cmn_conn_read_paused(const cmn_conn_t *c);

/* The connection's frame decoder, read-only: the header of the frame being received (valid in
 * on_decode_error too), its limits, cmn_frame_decoder_partial(). */
const cmn_frame_decoder_t *cmn_conn_decoder(const cmn_conn_t *c);

/* The decoder's payload sink (cmn_frame_decoder_set_sink). */
void cmn_conn_set_sink(cmn_conn_t *c, cmn_frame_sink_fn sink, void *arg, size_t min_payload);

/* Optional (TCP and TLS): called when a read ended with a frame still partial (its bytes are in
 * the decoder), so the owner can charge its buffer as it fills, or pause reading. */
void cmn_conn_set_on_partial(cmn_conn_t *c, void (*on_partial)(cmn_conn_t *c));

/* Counters since cmn_conn_init. */
const cmn_conn_stats_t *cmn_conn_stats(const cmn_conn_t *c);

/* Changes write_thread_min for the batches flushed from now on, on the thread that runs the
 * loop. The write thread exists only when the connection was opened with write_thread_min > 0
 * (tcp://, not TLS): then SIZE_MAX keeps it idle and 1 hands it every batch; without one this
 * changes nothing. Frames never overtake each other either way. */
void cmn_conn_set_write_thread_min(cmn_conn_t *c, size_t min);

/* Whether a frame's payload arrives whole, at once (ucx://: fetched by the transport), rather
 * than as a byte stream read piece by piece (tcp://, TLS). */
int cmn_conn_whole_payloads(const cmn_conn_t *c);

/* The socket's file descriptor (tcp://, TLS), for diagnostics and tests; a negative code when
 * the connection has none (ucx://, not connected). */
int cmn_conn_fileno(const cmn_conn_t *c);

/* Closes at once; queued frames are cancelled (their callbacks get UV_ECANCELED). Idempotent. */
void cmn_conn_close(cmn_conn_t *c, int reason);

/* Stops reading, flushes what is queued (e.g. an Error or Goodbye frame), half-closes, and closes
 * when the peer has taken it or after shutdown_timeout_ms. Idempotent. */
void cmn_conn_shutdown(cmn_conn_t *c, int reason);

#endif
