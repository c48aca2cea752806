/* The UCX transport: the same frames as the TCP path (proto/README.md), carried by UCX, which
 * picks RDMA (InfiniBand, RoCE), shared memory or TCP at run time (UCX_TLS selects them).
 *
 * One cmn_ucx_t per libuv loop owns a UCX context and worker. Connections made with it are
 * ordinary cmn_conn_t (cmn_conn_connect_ucx, cmn_conn_accept_ucx) and keep the cmn/conn.h API.
 * On the wire:
 *   - connection establishment: UCX's listener/endpoint API (ucp_listener_create,
 *     ucp_ep_create with a socket address), so addresses are the same host:port as tcp://;
 *   - each frame is one active message: the frame header and metadata are the message header,
 *     the payload is the message data, sent from the caller's memory (scatter-gather, no copy)
 *     with UCX's eager protocol when small and its rendezvous protocol when large; on an RDMA
 *     fabric rendezvous is an RDMA read by the receiver straight into its buffer (the frame
 *     decoder's payload sink, e.g. a sut-node batch buffer);
 *   - the header is checked against the connection's frame limits (the small pre-handshake
 *     limit first) before a byte of a rendezvous payload is received or memory allocated.
 * Progress runs on the loop: UCX's event fd in a uv_poll_t, the worker armed before the loop
 * blocks; busy_poll spins instead (lowest latency, one core).
 *
 * Thread-safety: everything but cmn_ucx_register/unregister belongs to the loop thread. */
#ifndef CMN_UCX_H
#define CMN_UCX_H

#include "cmn/err.h"

#include <stddef.h>
#include <sys/socket.h>
#include <uv.h>

/* Why ucx:// is refused unless the operator says the fabric is trusted (sut-node and
 * loadgen-node --ucx-trusted-fabric, qdl_config_t.ucx_trusted_fabric); the caller appends the
 * option that accepts it.
 * UCX 1.13.1 as distributions build it (assertions on) aborts the whole process on connection
 * bytes it does not expect, before any of this code sees them: 16 bytes to a UCX listener
 * (tcp_sockcm_ep.c:825, `offset <= length`), or 21 bytes (its magic number and an
 * active-message header with a length over 64 KiB) to the port every UCX worker's TCP
 * transport listens on, on every interface (tcp_ep.c:1404), listener or not. Nothing in front
 * of UCX's own listener removes the second, so the transport is for trusted peers only. */
#define CMN_UCX_UNTRUSTED_REASON                                                              \
    "refused: UCX 1.13 aborts the whole process on malformed connection bytes from any peer " \
    "that reaches its ports (its listener's and its TCP transport's, on every interface), "   \
    "before this program can check them; use ucx:// only on a fabric where every host is "    \
    "trusted, and say so with "

typedef struct cmn_ucx cmn_ucx_t;
typedef struct cmn_ucx_listener cmn_ucx_listener_t;
typedef struct cmn_ucx_incoming cmn_ucx_incoming_t;

typedef struct {
    int busy_poll; /* progress on every loop turn instead of sleeping on the event fd */
} cmn_ucx_options_t;

/* Opens UCX on |loop| (UCX_* environment variables apply; |opt| NULL: defaults). Busy polling
 * when |opt| asks for it or, as a fallback, the environment has NSUT_UCX_BUSY_POLL=1. Returns 0, or
 * CMN_ECONFIG with the reason in |eb| (no usable transport, UCX refused to start). */
int cmn_ucx_open(uv_loop_t *loop, const cmn_ucx_options_t *opt, cmn_ucx_t **out, cmn_errbuf_t *eb);

/* Releases it once every connection and listener made with it has closed (the loop must run for
 * that). Idempotent for a NULL argument. */
void cmn_ucx_close(cmn_ucx_t *u);

/* Registers [ptr, ptr+len) with UCX once (e.g. the QSL's samples when they load), so sending
 * from it skips per-send registration; on an RDMA fabric the peer then reads it directly.
 * Returns 0 or CMN_ECONFIG. Thread-safe. */
int cmn_ucx_register(cmn_ucx_t *u, void *ptr, size_t len);

/* Undoes cmn_ucx_register for the region starting at |ptr|; a no-op when none does. Call before
 * freeing the memory, with no send from it in flight. Thread-safe. */
void cmn_ucx_unregister(cmn_ucx_t *u, void *ptr);

/* A connection request: the callback calls cmn_conn_accept_ucx() during the call, or nothing
 * (the request is then rejected). */
typedef void (*cmn_ucx_accept_cb)(cmn_ucx_listener_t *l, cmn_ucx_incoming_t *in, void *arg);

/* Listens on |addr| (port 0: an ephemeral port, see cmn_ucx_listener_port). Returns 0, or
 * CMN_ECONFIG with the reason in |eb| (address in use, no transport for it). */
int cmn_ucx_listen(cmn_ucx_t *u, const struct sockaddr *addr, cmn_ucx_accept_cb cb, void *arg,
                   cmn_ucx_listener_t **out, cmn_errbuf_t *eb);

/* The port the listener is bound to. */
int cmn_ucx_listener_port(const cmn_ucx_listener_t *l);

/* Stops listening and frees the listener; connections already accepted stay. */
void cmn_ucx_listener_close(cmn_ucx_listener_t *l);

#endif
