/* A listener for the tests' fake nodes (a spy, a malicious node, stuck nodes): on the test's own
 * libuv loop, 127.0.0.1 on an ephemeral port, over tcp:// or, when the tests run over ucx://
 * (tn_is_ucx()), over UCX with its own UCX context, so that one fake node serves both transports.
 * Every connection it accepts is a started cmn_conn_t that the listener owns: it frees it after
 * the connection closes and closes whatever is still open in tn_listener_close.
 * Thread-safety: none; every function runs on the loop's thread (set-up before uv_run included).
 * For tests only. */
#ifndef TNLISTEN_H
#define TNLISTEN_H

#include "cmn/conn.h"
#include "cmn/frame.h"

#include <uv.h>

typedef struct tn_listener tn_listener_t;

typedef struct {
    /* For every connection; on_close, optional, runs before the listener frees the connection
     * (which the callee must not free). */
    cmn_conn_callbacks_t cb;
    cmn_frame_limits_t limits; /* until the fake node's handshake sets its own */
    /* Optional: a connection has started; c->data is |arg|. */
    void (*on_conn)(cmn_conn_t *c, void *arg);
    void *arg;
} tn_listen_options_t;

/* Listens on 127.0.0.1:0 (tcp:// or ucx://, as tn_scheme() says) on |loop|. Returns 0, or -1
 * with the reason on stderr. */
int tn_listen(uv_loop_t *loop, const tn_listen_options_t *opt, tn_listener_t **out);

/* The port it listens on (the QDL connects to tn_scheme() "127.0.0.1:" port). */
int tn_listener_port(const tn_listener_t *l);

/* Stops listening and closes its connections (reason CMN_ECLOSED); the memory, and the UCX
 * context after the last of them, go once the loop has run their close callbacks. Idempotent for
 * a NULL argument. */
void tn_listener_close(tn_listener_t *l);

#endif
