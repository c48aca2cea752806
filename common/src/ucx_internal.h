/* Between conn.c (the cmn_conn_t API, TCP and TLS) and ucx.c (the UCX transport under it). Calls
 * flow from conn.c to ucx.c only; ucx.c reaches back through the hooks conn.c hands it. */
#ifndef CMN_UCX_INTERNAL_H
#define CMN_UCX_INTERNAL_H

#include "cmn/conn.h"
#include "cmn/ucx.h"

typedef struct {
    /* The endpoint broke (peer gone, bad frame without on_decode_error, shutdown flushed): the
     * connection is to close with |reason|. */
    void (*end)(cmn_conn_t *c, int reason);
    /* Nothing in UCX refers to |c| any more (c->ucx is NULL already). */
    void (*released)(cmn_conn_t *c);
} cmn__ucx_hooks_t;

/* Creates the endpoint; c->connect_cb gets 0 once the peer is reached, or a negative code. */
int cmn__ucx_connect(cmn_ucx_t *u, cmn_conn_t *c, const struct sockaddr *addr,
                     const cmn__ucx_hooks_t *hooks);

/* Accepts |in| into |c|. */
int cmn__ucx_accept(cmn_ucx_incoming_t *in, cmn_conn_t *c, const cmn__ucx_hooks_t *hooks);

/* Queues one frame (the cmn_conn_send contract). */
int cmn__ucx_send(cmn_conn_t *c, unsigned type, const ProtobufCMessage *meta,
                  const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg);

/* Hands frames held while reading was paused or not started to on_frame, in order. */
void cmn__ucx_deliver(cmn_conn_t *c);

/* Waits until everything sent has reached the peer, then hooks->end(c, c->close_reason). */
void cmn__ucx_shutdown(cmn_conn_t *c);

/* Releases the endpoint (in-flight sends complete with UV_ECANCELED); hooks->released follows
 * from a later loop turn. */
void cmn__ucx_close(cmn_conn_t *c);

/* "ucx:tcp", "ucx:posix" ...: the UCX transports the endpoint's lanes use. */
void cmn__ucx_describe(const cmn_conn_t *c, char *buf, size_t len);

#endif
