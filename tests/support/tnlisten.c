#include "tnlisten.h"
#include "testnet.h"

#include "cmn/err.h"
#include "cmn/net.h"
#include "cmn/ucx.h"

#include <stdio.h>
#include <stdlib.h>

/* The connection first, so that the cmn_conn_t the callbacks get is the tn_conn_t. */
typedef struct tn_conn {
    cmn_conn_t c;
    tn_listener_t *l;
    struct tn_conn *prev, *next;
    int started; /* the user has seen it (on_conn), so it hears of its close */
} tn_conn_t;

struct tn_listener {
    uv_loop_t *loop;
    tn_listen_options_t opt;
    cmn_conn_callbacks_t cb; /* opt.cb with on_close ours */
    uv_tcp_t tcp;            /* tcp:// */
    int tcp_open;            /* tcp was initialised: it is closed with the listener */
    cmn_ucx_t *ucx;          /* ucx:// */
    cmn_ucx_listener_t *ul;
    int port;
    int closing;
    size_t refs; /* the TCP handle and every connection not yet closed: freed at 0 */
    tn_conn_t *conns;
};

static void maybe_free(tn_listener_t *l)
{
    if (l->closing && l->refs == 0)
        free(l);
}

static void on_conn_close(cmn_conn_t *c, int reason)
{
    tn_conn_t *tc = (tn_conn_t *)c;
    tn_listener_t *l = tc->l;

    if (tc->prev)
        tc->prev->next = tc->next;
    else
        l->conns = tc->next;
    if (tc->next)
        tc->next->prev = tc->prev;
    if (tc->started && l->opt.cb.on_close)
        l->opt.cb.on_close(c, reason);
    free(tc);
    l->refs--;
    maybe_free(l);
}

/* A connection on the loop (its close callback frees it), not yet accepted; NULL when there is
 * no memory. */
static tn_conn_t *new_conn(tn_listener_t *l)
{
    tn_conn_t *tc = calloc(1, sizeof(*tc));
    int rc;

    if (!tc || (rc = cmn_conn_init(l->loop, &tc->c, &l->cb, NULL, &l->opt.limits)) < 0) {
        fprintf(stderr, "tn_listen: cannot set up a connection\n");
        free(tc);
        return NULL;
    }
    tc->l = l;
    tc->c.data = l->opt.arg;
    tc->next = l->conns;
    if (l->conns)
        l->conns->prev = tc;
    l->conns = tc;
    l->refs++;
    return tc;
}

/* |rc|: how the accept went. */
static void start_conn(tn_conn_t *tc, int rc)
{
    tn_listener_t *l = tc->l;

    if (rc >= 0)
        rc = cmn_conn_start(&tc->c);
    if (rc < 0) {
        fprintf(stderr, "tn_listen: accept: %s\n", cmn_strerror(rc));
        cmn_conn_close(&tc->c, rc);
        return;
    }
    tc->started = 1;
    if (l->opt.on_conn)
        l->opt.on_conn(&tc->c, l->opt.arg);
}

static void on_tcp_conn(uv_stream_t *s, int status)
{
    tn_listener_t *l = s->data;
    tn_conn_t *tc;

    if (status < 0) {
        fprintf(stderr, "tn_listen: listen: %s\n", cmn_strerror(status));
        return;
    }
    tc = new_conn(l);
    if (tc)
        start_conn(tc, cmn_conn_accept(&tc->c, s));
}

/* A request not taken here (no memory) is rejected by UCX. */
static void on_ucx_conn(cmn_ucx_listener_t *ul, cmn_ucx_incoming_t *in, void *arg)
{
    tn_listener_t *l = arg;
    tn_conn_t *tc = new_conn(l);

    (void)ul;
    if (tc)
        start_conn(tc, cmn_conn_accept_ucx(&tc->c, in));
}

static void on_tcp_closed(uv_handle_t *h)
{
    tn_listener_t *l = h->data;

    l->refs--;
    maybe_free(l);
}

static int listen_tcp(tn_listener_t *l, const struct sockaddr *sa)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss), rc;

    if ((rc = uv_tcp_init(l->loop, &l->tcp)) < 0)
        return rc;
    l->tcp.data = l;
    l->tcp_open = 1;
    l->refs++;
    if ((rc = uv_tcp_bind(&l->tcp, sa, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&l->tcp, 64, on_tcp_conn)) < 0 ||
        (rc = uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &len)) < 0)
        return rc;
    l->port = cmn_addr_port((struct sockaddr *)&ss);
    return 0;
}

int tn_listen(uv_loop_t *loop, const tn_listen_options_t *opt, tn_listener_t **out)
{
    struct sockaddr_storage ss;
    tn_listener_t *l = calloc(1, sizeof(*l));
    cmn_errbuf_t eb = {""};
    int rc;

    *out = NULL;
    if (!l)
        return -1;
    l->loop = loop;
    l->opt = *opt;
    l->cb = opt->cb;
    l->cb.on_close = on_conn_close;
    rc = cmn_addr_parse("127.0.0.1:0", &ss, &eb);
    if (rc == 0 && !tn_is_ucx()) {
        rc = listen_tcp(l, (struct sockaddr *)&ss);
        if (rc < 0)
            cmn_errf(&eb, rc, "tcp: %s", cmn_strerror(rc));
    } else if (rc == 0) {
        cmn_ucx_options_t uo = {tn_ucx_busy_poll()}; /* as the node the fake stands for */
        rc = cmn_ucx_open(loop, &uo, &l->ucx, &eb);
        if (rc == 0)
            rc = cmn_ucx_listen(l->ucx, (struct sockaddr *)&ss, on_ucx_conn, l, &l->ul, &eb);
        if (rc == 0)
            l->port = cmn_ucx_listener_port(l->ul);
    }
    if (rc < 0) {
        fprintf(stderr, "tn_listen: 127.0.0.1:0: %s\n", eb.msg);
        tn_listener_close(l); /* what was opened goes when the loop runs */
        return -1;
    }
    *out = l;
    return 0;
}

int tn_listener_port(const tn_listener_t *l)
{
    return l->port;
}

void tn_listener_close(tn_listener_t *l)
{
    tn_conn_t *tc, *next;

    if (!l || l->closing)
        return;
    l->closing = 1;
    cmn_ucx_listener_close(l->ul);
    l->ul = NULL;
    if (l->tcp_open)
        uv_close((uv_handle_t *)&l->tcp, on_tcp_closed);
    for (tc = l->conns; tc; tc = next) {
        next = tc->next;
        cmn_conn_close(&tc->c, CMN_ECLOSED);
    }
    /* UCX releases the context once the connections made with it have closed. */
    cmn_ucx_close(l->ucx);
    l->ucx = NULL;
    maybe_free(l);
}
