/* The cmn_conn_t API (cmn/conn.h): the one place that picks a connection's transport (tcp, TLS
 * over tcp, ucx) at connect, accept or cmn_conn_use_tls; everything else goes to the framing
 * core (core.c) or through the transport's ops table, with no branch on the kind. */
#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/log.h"
#include "core.h"
#include "tcp_internal.h"
#include "tls_conn_internal.h"
#include "ucx_internal.h"

int cmn_conn_init(uv_loop_t *loop, cmn_conn_t *c, const cmn_conn_callbacks_t *cb,
                  const cmn_conn_options_t *opt, const cmn_frame_limits_t *limits)
{
    c->data = NULL;
    return cmn__core_init(cmn__core(c), c, loop, cb, opt, limits);
}

/* The TCP socket, once: tcp:// or TLS (cmn_conn_use_tls may come first, on a client). */
static int tcp_socket(cmn__core_t *k)
{
    if (k->closing)
        return CMN_ECLOSED;
    if (!k->ops)
        return cmn__tcp_attach(k);
    return k->tp && k->ops != &cmn__ucx_ops ? 0 : CMN_ECLOSED;
}

int cmn_conn_connect(cmn_conn_t *c, const struct sockaddr *addr,
                     void (*cb)(cmn_conn_t *c, int status))
{
    cmn__core_t *k = cmn__core(c);
    int rc = tcp_socket(k);

    if (rc < 0)
        return rc;
    k->connect_cb = cb;
    return cmn__tcp_connect(k, addr);
}

int cmn_conn_accept(cmn_conn_t *c, uv_stream_t *server)
{
    cmn__core_t *k = cmn__core(c);
    int rc = tcp_socket(k);

    return rc < 0 ? rc : cmn__tcp_accept(k, server);
}

int cmn_conn_use_tls(cmn_conn_t *c, struct cmn_tls_ctx *ctx, const char *peer_name)
{
    cmn__core_t *k = cmn__core(c);
    int rc;

    if (k->ops == &cmn__ucx_ops) {
        cmn_log_error("%s: TLS runs on tcp:// only, not over UCX", k->peer);
        return CMN_ECONFIG;
    }
    if ((rc = tcp_socket(k)) < 0)
        return rc;
    if (k->ops != &cmn__tcp_ops)
        return CMN_ESTATE; /* TLS already */
    return cmn__tls_attach(k, ctx, peer_name);
}

/* ucx:// on a connection no transport was picked for yet (cmn_conn_use_tls picks TLS). */
static int ucx_free(cmn__core_t *k)
{
    if (k->ops && k->ops != &cmn__ucx_ops && k->ops != &cmn__tcp_ops) {
        cmn_log_error("%s: TLS runs on tcp:// only, not over UCX", k->peer);
        return CMN_ECONFIG;
    }
    return k->closing || k->ops ? CMN_ECLOSED : 0;
}

int cmn_conn_connect_ucx(cmn_conn_t *c, struct cmn_ucx *u, const struct sockaddr *addr,
                         void (*cb)(cmn_conn_t *c, int status))
{
    cmn__core_t *k = cmn__core(c);
    int rc = ucx_free(k);

    if (rc < 0)
        return rc;
    k->connect_cb = cb;
    return cmn__ucx_connect(u, k, addr);
}

int cmn_conn_accept_ucx(cmn_conn_t *c, struct cmn_ucx_incoming *in)
{
    cmn__core_t *k = cmn__core(c);
    int rc = ucx_free(k);

    return rc < 0 ? rc : cmn__ucx_accept(in, k);
}

void cmn_conn_describe(const cmn_conn_t *c, char *buf, size_t len)
{
    const cmn__core_t *k = cmn__core_const(c);

    if (k->ops)
        k->ops->describe(k, buf, len);
    else
        snprintf(buf, len, "unconnected");
}

const char *cmn_conn_last_error(const cmn_conn_t *c)
{
    return cmn__core_const(c)->last_error;
}

const char *cmn_conn_tls_peer(const cmn_conn_t *c)
{
    const cmn__core_t *k = cmn__core_const(c);
    return k->ops && k->ops->peer_identity ? k->ops->peer_identity(k) : "";
}

int cmn_conn_start(cmn_conn_t *c)
{
    cmn__core_t *k = cmn__core(c);
    return k->ops && !k->closing ? cmn__core_start(k) : CMN_ECLOSED;
}

void cmn_conn_set_limits(cmn_conn_t *c, const cmn_frame_limits_t *limits)
{
    cmn_frame_decoder_set_limits(&cmn__core(c)->dec, limits);
}

void cmn_conn_flush(cmn_conn_t *c)
{
    cmn__core_t *k = cmn__core(c);

    if (!k->closing && k->ops && k->ops->flush)
        k->ops->flush(k);
}

size_t cmn_conn_backlog(const cmn_conn_t *c)
{
    const cmn__core_t *k = cmn__core_const(c);
    return k->bytes_pending + k->bytes_writing;
}

int cmn_conn_congested(const cmn_conn_t *c)
{
    return cmn_conn_backlog(c) > cmn__core_const(c)->opt.write_high_water;
}

int cmn_conn_copies_segments(const cmn_conn_t *c)
{
    const cmn__core_t *k = cmn__core_const(c);
    return k->ops && (k->ops->flags & CMN__T_COPIES_SEGMENTS);
}

int cmn_conn_whole_payloads(const cmn_conn_t *c)
{
    const cmn__core_t *k = cmn__core_const(c);
    return k->ops && (k->ops->flags & CMN__T_WHOLE_PAYLOADS);
}

int cmn_conn_fileno(const cmn_conn_t *c)
{
    const cmn__core_t *k = cmn__core_const(c);
    return k->ops && k->ops->fileno ? k->ops->fileno(k) : CMN_ECONFIG;
}

int cmn_conn_send(cmn_conn_t *c, unsigned type, const ProtobufCMessage *meta,
                  const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg)
{
    cmn__core_t *k = cmn__core(c);

    if (k->closing || !k->ops)
        return CMN_ECLOSED;
    return k->ops->send(k, type, meta, payload, n_payload, cb, arg);
}

void cmn_conn_read_pause(cmn_conn_t *c)
{
    cmn__core_read_pause(cmn__core(c));
}

void cmn_conn_read_resume(cmn_conn_t *c)
{
    cmn__core_read_resume(cmn__core(c));
}

void cmn_conn_close(cmn_conn_t *c, int reason)
{
    cmn__core_close(cmn__core(c), reason);
}

void cmn_conn_shutdown(cmn_conn_t *c, int reason)
{
    cmn__core_shutdown(cmn__core(c), reason);
}

const char *cmn_conn_peer(const cmn_conn_t *c)
{
    return cmn__core_const(c)->peer;
}

int cmn_conn_closing(const cmn_conn_t *c)
{
    return cmn__core_const(c)->closing;
}

int cmn_conn_read_paused(const cmn_conn_t *c)
{
    return cmn__core_const(c)->read_paused;
}

const cmn_frame_decoder_t *cmn_conn_decoder(const cmn_conn_t *c)
{
    return &cmn__core_const(c)->dec;
}

void cmn_conn_set_sink(cmn_conn_t *c, cmn_frame_sink_fn sink, void *arg, size_t min_payload)
{
    cmn_frame_decoder_set_sink(&cmn__core(c)->dec, sink, arg, min_payload);
}

void cmn_conn_set_on_partial(cmn_conn_t *c, void (*on_partial)(cmn_conn_t *c))
{
    cmn__core(c)->on_partial = on_partial;
}

const cmn_conn_stats_t *cmn_conn_stats(const cmn_conn_t *c)
{
    return &cmn__core_const(c)->st;
}

void cmn_conn_set_write_thread_min(cmn_conn_t *c, size_t min)
{
    cmn__core(c)->opt.write_thread_min = min;
}
