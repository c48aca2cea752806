/* The UCX transport under cmn_conn_t: one UCX worker per loop, one endpoint per connection, one
 * active message per frame. See cmn/ucx.h for the design. Two concerns: the worker (context,
 * progress on the loop, registered memory, listeners) and the endpoint, a message transport
 * behind the core (core.h): conn.c picks it with cmn__ucx_connect / cmn__ucx_accept, and it
 * enters the core through the cmn__core_* entry points (a frame arrived, a send finished, the
 * endpoint ended). */
#include "cmn/err.h"
#include "cmn/frame.h"
#include "cmn/list.h"
#include "cmn/log.h"
#include "cmn/net.h"
#include "ucx_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

/* The one active-message id the protocol uses: a frame. */
#define AM_FRAME 1u

typedef struct cmn__ucx_ep ep_t;

typedef struct {
    uintptr_t base;
    size_t len;
    ucp_mem_h memh;
} reg_t;

struct cmn_ucx {
    uv_loop_t *loop;
    ucp_context_h ctx;
    ucp_worker_h worker;
    size_t max_am_header;
    int busy_poll;
    uv_poll_t poll;
    uv_prepare_t prepare;
    uv_check_t check;
    uv_idle_t idle;
    int handles_open;
    int refs;                     /* endpoints and listeners alive */
    int err_due;                  /* an endpoint failed inside progress: report after it */
    int closing;                  /* cmn_ucx_close was called */
    unsigned long long anonymous; /* messages dropped: no sender's endpoint to answer */
    int warned_mm;                /* the shared-memory caveat was logged */
    ep_t *eps;                    /* endpoints that receive frames */
    pthread_mutex_t reg_lock;
    reg_t *regs;
    size_t nregs, regs_cap;
};

struct cmn_ucx_listener {
    cmn_ucx_t *u;
    ucp_listener_h l;
    cmn_ucx_accept_cb cb;
    void *arg;
    int port;
};

struct cmn_ucx_incoming {
    cmn_ucx_t *u;
    ucp_conn_request_h req;
    int taken;
};

enum { RX_READY, RX_RNDV_WAIT, RX_RNDV_BUSY, RX_FAILED };

/* A frame held because an earlier one is not delivered yet, or reading is paused. */
typedef struct rx {
    struct rx *next;
    ep_t *e;
    cmn_frame_header_t hdr;
    uint8_t *meta;    /* copy of the metadata (malloc), or inside |buf| */
    uint8_t *payload; /* where the payload is (once READY) */
    void *held;       /* UCX's eager data (ucp_am_data_release) or rendezvous descriptor */
    uint8_t *buf;     /* ours: freed after delivery */
    void *req;        /* the rendezvous receive while RX_RNDV_BUSY */
    size_t held_size; /* counted in e->held_bytes */
    int meta_in_data; /* the sender put the metadata before the payload in the data */
    int state;
} rx_t;

typedef struct tx tx_t;

struct cmn__ucx_ep {
    cmn_ucx_t *u;
    cmn__core_t *k;
    ucp_ep_h ep;
    ep_t *next, *prev; /* in u->eps while frames may arrive */
    rx_t *rx_head, *rx_tail;
    tx_t *tx_head;   /* sends UCX has not completed */
    tx_t *sending;   /* the send inside ucp_am_send_nbx (its callback may run inside it) */
    void *flush_req; /* the connect or shutdown flush UCX has not completed */
    int flushing;    /* that flush is under way (its callback may come inside the call) */
    int inflight;    /* sends, flushes and rendezvous receives UCX still owes a callback */
    size_t held_bytes, held_frames; /* frames held in rx_head (UCX has no backpressure) */
    int connecting;
    int accepted;   /* the server's end (cmn__ucx_accept): its shutdown lingers (ucx_shutdown) */
    int lingering;  /* shutdown flushed: waiting for the peer to close, or the core's deadline */
    int broken;     /* no frame is delivered any more */
    int failed;     /* UCX reported the endpoint broken: nothing can be sent either */
    int err_reason; /* failure to report once UCX's progress call has returned */
    int fetching;   /* inside ucp_am_recv_data_nbx: its callback must not deliver */
    int closing;
    int ep_released;
};

/* One frame on its way out: the packed head, then the data segments. */
struct tx {
    tx_t *next, *prev; /* in e->tx_head until UCX completes it */
    void *req;
    ep_t *e;
    cmn_conn_sent_cb cb;
    void *arg;
    size_t bytes;
    uint8_t *gather; /* several segments copied into one (see ucx_send) */
    ucp_dt_iov_t *iov;
    uint8_t head[];
};

static void ucx_progress(cmn_ucx_t *u);
static void deliver(cmn__core_t *k);
static void on_idle(uv_idle_t *h);
static void report_errors(cmn_ucx_t *u);

/* ---- Worker and loop ------------------------------------------------------------------- */

static void on_u_closed(uv_handle_t *h)
{
    cmn_ucx_t *u = h->data;
    size_t i;

    if (--u->handles_open > 0)
        return;
    for (i = 0; i < u->nregs; i++)
        ucp_mem_unmap(u->ctx, u->regs[i].memh);
    free(u->regs);
    pthread_mutex_destroy(&u->reg_lock);
    ucp_worker_destroy(u->worker);
    ucp_cleanup(u->ctx);
    free(u);
}

/* Destruction waits for the last endpoint and listener and happens from a close callback, never
 * inside a UCX callback. */
static void maybe_destroy(cmn_ucx_t *u)
{
    if (u->closing != 1 || u->refs > 0)
        return;
    u->closing = 2;
    uv_close((uv_handle_t *)&u->poll, on_u_closed);
    uv_close((uv_handle_t *)&u->prepare, on_u_closed);
    uv_close((uv_handle_t *)&u->check, on_u_closed);
    uv_close((uv_handle_t *)&u->idle, on_u_closed);
}

/* The event fd keeps the loop alive while an endpoint or listener may receive. */
static void ref(cmn_ucx_t *u)
{
    if (u->refs++ == 0)
        uv_ref((uv_handle_t *)&u->poll);
}

static void unref(cmn_ucx_t *u)
{
    if (--u->refs == 0)
        uv_unref((uv_handle_t *)&u->poll);
    maybe_destroy(u);
}

/* Runs UCX until it has nothing to do, then arms the event fd so the loop may sleep on it. The
 * work per call is bounded (a worker can stay busy, e.g. with a dead shared-memory peer): when
 * the bound is hit, the idle handle keeps the loop turning and calls again. */
static void ucx_progress(cmn_ucx_t *u)
{
    ucs_status_t st;
    int round, n;

    for (round = 0; round < 16; round++) {
        for (n = 0; n < 1024 && ucp_worker_progress(u->worker) != 0; n++) {
        }
        if (u->err_due) {
            report_errors(u);
            continue;
        }
        if (u->busy_poll || u->closing == 2)
            return;
        if (n == 1024)
            continue;
        st = ucp_worker_arm(u->worker);
        if (st == UCS_OK) {
            uv_idle_stop(&u->idle);
            return;
        }
        if (st != UCS_ERR_BUSY) {
            cmn_log_warn("ucx: cannot arm the worker's event fd: %s", ucs_status_string(st));
            break;
        }
    }
    uv_idle_start(&u->idle, on_idle);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    ucx_progress(h->data);
}

/* Before the loop blocks (work queued by timers and other handles) and after it wakes. */
static void on_prepare(uv_prepare_t *h)
{
    ucx_progress(h->data);
}

static void on_check(uv_check_t *h)
{
    ucx_progress(h->data);
}

static void on_idle(uv_idle_t *h)
{
    ucx_progress(h->data);
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param);

int cmn_ucx_open(uv_loop_t *loop, const cmn_ucx_options_t *opt, cmn_ucx_t **out, cmn_errbuf_t *eb)
{
    ucp_params_t params;
    ucp_worker_params_t wp;
    ucp_worker_attr_t wa;
    ucp_am_handler_param_t ap;
    ucp_config_t *config;
    ucs_status_t st;
    cmn_ucx_t *u;
    int fd, rc;

    *out = NULL;
    u = calloc(1, sizeof(*u));
    if (!u)
        return cmn_errf(eb, -ENOMEM, "ucx: out of memory");
    u->loop = loop;
    /* The option (--ucx-busy-poll of sut-node and loadgen-node), or NSUT_UCX_BUSY_POLL=1 in the
     * environment as a fallback (for a QDL embedded in a program without that flag). */
    u->busy_poll = (opt && opt->busy_poll) ||
                   (getenv("NSUT_UCX_BUSY_POLL") && strcmp(getenv("NSUT_UCX_BUSY_POLL"), "1") == 0);
    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        free(u);
        return cmn_errf(eb, CMN_ECONFIG, "ucx: cannot read the UCX configuration: %s",
                        ucs_status_string(st));
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 1; /* cmn_ucx_register may come from another thread */
    st = ucp_init(&params, config, &u->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        free(u);
        return cmn_errf(eb, CMN_ECONFIG, "ucx: ucp_init failed: %s (check UCX_TLS and ucx_info -d)",
                        ucs_status_string(st));
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(u->ctx, &wp, &u->worker);
    if (st != UCS_OK) {
        ucp_cleanup(u->ctx);
        free(u);
        return cmn_errf(eb, CMN_ECONFIG, "ucx: no worker: %s (check UCX_TLS and ucx_info -d)",
                        ucs_status_string(st));
    }
    memset(&wa, 0, sizeof(wa));
    wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    st = ucp_worker_query(u->worker, &wa);
    u->max_am_header = st == UCS_OK ? wa.max_am_header : CMN_FRAME_HEADER_SIZE;
    if (u->max_am_header < CMN_FRAME_HEADER_SIZE) {
        rc = cmn_errf(eb, CMN_ECONFIG, "ucx: active-message headers of %zu bytes are too small",
                      u->max_am_header);
        goto fail;
    }
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.id = AM_FRAME;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    ap.cb = on_am;
    ap.arg = u;
    st = ucp_worker_set_am_recv_handler(u->worker, &ap);
    if (st == UCS_OK)
        st = ucp_worker_get_efd(u->worker, &fd);
    if (st != UCS_OK) {
        rc = cmn_errf(eb, CMN_ECONFIG, "ucx: worker set-up failed: %s", ucs_status_string(st));
        goto fail;
    }
    rc = uv_poll_init(loop, &u->poll, fd);
    if (rc < 0) {
        rc = cmn_errf(eb, rc, "ucx: cannot poll the worker's event fd: %s", uv_strerror(rc));
        goto fail;
    }
    pthread_mutex_init(&u->reg_lock, NULL);
    uv_prepare_init(loop, &u->prepare);
    uv_check_init(loop, &u->check);
    uv_idle_init(loop, &u->idle);
    u->poll.data = u->prepare.data = u->check.data = u->idle.data = u;
    u->handles_open = 4;
    uv_poll_start(&u->poll, UV_READABLE, on_poll);
    uv_prepare_start(&u->prepare, on_prepare);
    uv_check_start(&u->check, on_check);
    if (u->busy_poll) {
        uv_idle_start(&u->idle, on_idle);
        cmn_log_info("ucx: busy polling (progress on every loop turn)");
    }
    /* The loop stays alive for connections and listeners, not for an idle worker. */
    uv_unref((uv_handle_t *)&u->poll);
    uv_unref((uv_handle_t *)&u->prepare);
    uv_unref((uv_handle_t *)&u->check);
    uv_unref((uv_handle_t *)&u->idle);
    *out = u;
    return 0;

fail:
    ucp_worker_destroy(u->worker);
    ucp_cleanup(u->ctx);
    free(u);
    return rc;
}

void cmn_ucx_close(cmn_ucx_t *u)
{
    if (!u || u->closing)
        return;
    u->closing = 1;
    maybe_destroy(u);
}

/* ---- Registration ---------------------------------------------------------------------- */

int cmn_ucx_register(cmn_ucx_t *u, void *ptr, size_t len)
{
    ucp_mem_map_params_t mp;
    ucp_mem_h memh;
    ucs_status_t st;
    reg_t *nr;
    int rc = 0;

    if (!ptr || len == 0)
        return 0;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = ptr;
    mp.length = len;
    st = ucp_mem_map(u->ctx, &mp, &memh);
    if (st != UCS_OK) {
        cmn_log_error("ucx: cannot register %zu bytes at %p: %s", len, ptr, ucs_status_string(st));
        return CMN_ECONFIG;
    }
    pthread_mutex_lock(&u->reg_lock);
    if (u->nregs == u->regs_cap) {
        size_t ncap = u->regs_cap ? u->regs_cap * 2 : 8;
        nr = realloc(u->regs, ncap * sizeof(*nr));
        if (!nr) {
            rc = -ENOMEM;
            goto out;
        }
        u->regs = nr;
        u->regs_cap = ncap;
    }
    u->regs[u->nregs].base = (uintptr_t)ptr;
    u->regs[u->nregs].len = len;
    u->regs[u->nregs].memh = memh;
    u->nregs++;
out:
    pthread_mutex_unlock(&u->reg_lock);
    if (rc < 0)
        ucp_mem_unmap(u->ctx, memh);
    return rc;
}

void cmn_ucx_unregister(cmn_ucx_t *u, void *ptr)
{
    ucp_mem_h memh = NULL;
    size_t i;

    pthread_mutex_lock(&u->reg_lock);
    for (i = 0; i < u->nregs; i++) {
        if (u->regs[i].base == (uintptr_t)ptr) {
            memh = u->regs[i].memh;
            u->regs[i] = u->regs[--u->nregs];
            break;
        }
    }
    pthread_mutex_unlock(&u->reg_lock);
    if (memh)
        ucp_mem_unmap(u->ctx, memh);
}

/* The registration covering [p, p+len), or NULL. */
static ucp_mem_h find_memh(cmn_ucx_t *u, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    ucp_mem_h memh = NULL;
    size_t i;

    if (u->nregs == 0)
        return NULL; /* read without the lock: a stale zero only skips the hint */
    pthread_mutex_lock(&u->reg_lock);
    for (i = 0; i < u->nregs; i++) {
        if (a >= u->regs[i].base && a - u->regs[i].base <= u->regs[i].len &&
            len <= u->regs[i].len - (a - u->regs[i].base)) {
            memh = u->regs[i].memh;
            break;
        }
    }
    pthread_mutex_unlock(&u->reg_lock);
    return memh;
}

/* ---- Endpoints ------------------------------------------------------------------------- */

static void ep_link(ep_t *e)
{
    cmn_ucx_t *u = e->u;
    e->prev = NULL;
    e->next = u->eps;
    if (u->eps)
        u->eps->prev = e;
    u->eps = e;
}

static void ep_unlink(ep_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else if (e->u->eps == e)
        e->u->eps = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->next = e->prev = NULL;
}

static ep_t *ep_find(cmn_ucx_t *u, ucp_ep_h ep)
{
    ep_t *e;
    for (e = u->eps; e; e = e->next)
        if (e->ep == ep)
            return e;
    return NULL;
}

/* Once the endpoint is released and UCX owes no callback, the core gets the connection back. */
static void maybe_released(ep_t *e)
{
    cmn__core_t *k = e->k;
    cmn_ucx_t *u = e->u;

    if (!e->closing || !e->ep_released || e->inflight > 0)
        return;
    cmn__core_attach(k, k->ops, NULL);
    free(e);
    unref(u);
    cmn__core_released(k);
}

static int status_code(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return 0;
    case UCS_ERR_CANCELED:
        return UV_ECANCELED;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
        return UV_ECONNREFUSED;
    case UCS_ERR_ENDPOINT_TIMEOUT:
        return CMN_ETIMEOUT;
    default:
        return CMN_ECLOSED;
    }
}

static void connect_done(ep_t *e, int status)
{
    if (!e->connecting)
        return;
    e->connecting = 0;
    cmn__core_connected(e->k, status);
}

/* The connection is to end with |reason|, reported once UCX's progress call has returned (a
 * close from inside a UCX callback is not safe while UCX tears the endpoint down). */
static void end_later(ep_t *e, int reason)
{
    if (!e->err_reason)
        e->err_reason = reason;
    e->u->err_due = 1;
}

/* UCX's error handler: the peer is gone (or never answered). */
static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    ep_t *e = arg;
    int reason;

    (void)ep;
    if (e->closing || e->failed)
        return;
    if (e->lingering) { /* the peer has closed after taking everything: the shutdown is done */
        e->failed = e->broken = 1;
        end_later(e, e->k->close_reason ? e->k->close_reason : CMN_ECLOSED);
        return;
    }
    e->failed = e->broken = 1;
    reason = status_code(st);
    if (e->connecting && reason == CMN_ECLOSED)
        reason = UV_ECONNREFUSED;
    cmn__core_set_error(e->k, "UCX endpoint to %s: %s", e->k->peer, ucs_status_string(st));
    end_later(e, reason == UV_ECANCELED ? CMN_ECLOSED : reason);
}

/* Failures recorded by on_ep_error, reported now that UCX's progress call has returned. */
static void report_errors(cmn_ucx_t *u)
{
    ep_t *e, *next;

    u->err_due = 0;
    for (e = u->eps; e; e = next) {
        int reason = e->err_reason;
        next = e->next;
        if (!reason)
            continue;
        e->err_reason = 0;
        if (e->connecting)
            connect_done(e, reason);
        else
            cmn__core_close(e->k, reason);
        /* The callee may have closed endpoints: start over (each reports once). */
        next = u->eps;
    }
}

/* The parameters of a send, flush or close whose end always comes through |cb| with |data|
 * (NO_IMM_CMPL: never completed inside the call), with the operation's |flags| (0: none). */
static void send_param(ucp_request_param_t *rp, uint32_t flags, ucp_send_nbx_callback_t cb,
                       void *data)
{
    memset(rp, 0, sizeof(*rp));
    rp->op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    if (flags) {
        rp->op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        rp->flags = flags;
    }
    rp->cb.send = cb;
    rp->user_data = data;
}

/* Flushes the endpoint (connect: wired up to the peer; shutdown: everything sent has arrived);
 * |cb| follows unless ucx_close abandons the flush first. */
static int flush_start(ep_t *e, ucp_send_nbx_callback_t cb)
{
    ucp_request_param_t rp;
    ucs_status_ptr_t req;

    send_param(&rp, 0, cb, e);
    e->inflight++; /* before the call: its callback may run inside it */
    e->flushing = 1;
    req = ucp_ep_flush_nbx(e->ep, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        e->inflight--;
        e->flushing = 0;
        return CMN_ECLOSED;
    }
    if (e->flushing) /* NO_IMM_CMPL: a request, unless the callback already ran */
        e->flush_req = req;
    return 0;
}

static void flush_done(ep_t *e, void *req)
{
    ucp_request_free(req);
    e->flush_req = NULL;
    e->flushing = 0;
    e->inflight--;
}

static void on_connect_flushed(void *req, ucs_status_t st, void *user_data)
{
    ep_t *e = user_data;

    flush_done(e, req);
    if (!e->closing && e->connecting) {
        if (st == UCS_OK) {
            connect_done(e, 0);
        } else {
            if (!e->failed)
                cmn__core_set_error(e->k, "UCX endpoint to %s: %s", e->k->peer,
                                    ucs_status_string(st));
            e->failed = e->broken = 1;
            end_later(e, UV_ECONNREFUSED);
        }
    }
    maybe_released(e);
}

static ep_t *ep_new(cmn_ucx_t *u, cmn__core_t *k)
{
    ep_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->u = u;
    e->k = k;
    return e;
}

static void ep_params_common(ucp_ep_params_t *p, ep_t *e)
{
    p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p->err_handler.cb = on_ep_error;
    p->err_handler.arg = e;
}

int cmn__ucx_connect(cmn_ucx_t *u, cmn__core_t *k, const struct sockaddr *addr)
{
    ucp_ep_params_t p;
    ucs_status_t st;
    ep_t *e;

    if (u->closing)
        return CMN_ECLOSED;
    cmn_addr_format(addr, k->peer, sizeof(k->peer));
    e = ep_new(u, k);
    if (!e)
        return -ENOMEM;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = addr;
    p.sockaddr.addrlen =
        addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    ep_params_common(&p, e);
    st = ucp_ep_create(u->worker, &p, &e->ep);
    if (st != UCS_OK) {
        cmn__core_set_error(k, "UCX endpoint to %s: %s", k->peer, ucs_status_string(st));
        cmn_log_warn("%s", k->last_error);
        free(e);
        return CMN_ECONFIG;
    }
    ref(u);
    cmn__core_attach(k, &cmn__ucx_ops, e);
    e->connecting = 1;
    ep_link(e);
    /* The flush completes once the endpoint is wired up to the peer's listener. */
    if (flush_start(e, on_connect_flushed) < 0) {
        /* Reported through the error handler or the caller's close. */
        e->connecting = 0;
        return CMN_ECLOSED;
    }
    return 0;
}

int cmn__ucx_accept(cmn_ucx_incoming_t *in, cmn__core_t *k)
{
    cmn_ucx_t *u = in->u;
    ucp_conn_request_attr_t ra;
    ucp_ep_params_t p;
    ucs_status_t st;
    ep_t *e;

    if (in->taken)
        return CMN_ESTATE;
    e = ep_new(u, k);
    if (!e)
        return -ENOMEM;
    memset(&ra, 0, sizeof(ra));
    ra.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(in->req, &ra) == UCS_OK)
        cmn_addr_format((const struct sockaddr *)&ra.client_address, k->peer, sizeof(k->peer));
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = in->req;
    ep_params_common(&p, e);
    in->taken = 1; /* ucp_ep_create consumes the request even when it fails */
    st = ucp_ep_create(u->worker, &p, &e->ep);
    if (st != UCS_OK) {
        cmn_log_warn("ucx: cannot accept %s: %s", k->peer, ucs_status_string(st));
        free(e);
        return CMN_ECLOSED;
    }
    ref(u);
    e->accepted = 1;
    cmn__core_attach(k, &cmn__ucx_ops, e);
    ep_link(e);
    return 0;
}

/* ---- Receiving ------------------------------------------------------------------------- */

static int can_deliver(const ep_t *e)
{
    return !e->broken && !e->closing && cmn__core_can_read(e->k);
}

static void deliver_frame(ep_t *e, const cmn_frame_header_t *h, const uint8_t *meta,
                          const uint8_t *payload)
{
    cmn_frame_t f;

    f.hdr = *h;
    f.meta = meta;
    f.payload = payload;
    cmn__core_frame(e->k, &f, CMN_FRAME_HEADER_SIZE + (uint64_t)h->meta_len + h->payload_len);
}

/* The frame broke the rules (limits, lengths): as on the TCP path, on_decode_error or close. */
static void frame_error(ep_t *e, int err)
{
    e->broken = 1;
    cmn__core_decode_error(e->k, err);
}

static void rx_free(ep_t *e, rx_t *r)
{
    e->held_bytes -= r->held_size;
    e->held_frames--;
    if (r->held)
        ucp_am_data_release(e->u->worker, r->held);
    if (!r->meta_in_data)
        free(r->meta);
    free(r->buf);
    free(r);
}

static void on_rndv_done(void *req, ucs_status_t st, size_t length, void *user_data)
{
    rx_t *r = user_data;
    ep_t *e = r->e;

    (void)length;
    ucp_request_free(req);
    r->req = NULL;
    e->inflight--;
    r->state = st == UCS_OK ? RX_READY : RX_FAILED;
    if (st == UCS_OK) {
        if (!e->fetching)
            deliver(e->k);
    } else if (!e->closing && !e->broken) {
        e->broken = 1;
        cmn__core_set_error(e->k, "UCX receive from %s: %s", e->k->peer, ucs_status_string(st));
        end_later(e, CMN_ECLOSED);
    }
    maybe_released(e);
}

/* The head frame's payload is still at the sender: pick its place (the sink's buffer when there
 * is one, else ours, within the limits already checked) and fetch it. */
static int rndv_start(ep_t *e, rx_t *r)
{
    cmn__core_t *k = e->k;
    ucp_request_param_t rp;
    ucs_status_ptr_t req;
    size_t len = r->hdr.payload_len;
    uint8_t *dst = NULL;
    void *desc = r->held;

    if (r->meta_in_data) {
        len += r->hdr.meta_len;
        r->buf = malloc(len);
        if (!r->buf)
            return -ENOMEM;
        r->meta = r->buf;
        dst = r->buf;
        r->payload = r->buf + r->hdr.meta_len;
    } else {
        if (k->dec.sink && r->hdr.payload_len >= k->dec.sink_min)
            dst = k->dec.sink(k->dec.sink_arg, &r->hdr, r->meta);
        if (!dst) {
            r->buf = malloc(len);
            if (!r->buf)
                return -ENOMEM;
            dst = r->buf;
        }
        r->payload = dst;
    }
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = on_rndv_done;
    rp.user_data = r;
    r->held = NULL; /* the descriptor now belongs to the receive */
    r->state = RX_RNDV_BUSY;
    e->inflight++; /* before the call: its callback may run inside it */
    e->fetching = 1;
    req = ucp_am_recv_data_nbx(e->u->worker, desc, dst, len, &rp);
    e->fetching = 0;
    if (UCS_PTR_IS_ERR(req) || req == NULL)
        e->inflight--;
    if (UCS_PTR_IS_ERR(req)) {
        cmn__core_set_error(k, "UCX receive from %s: %s", k->peer,
                            ucs_status_string(UCS_PTR_STATUS(req)));
        return CMN_ECLOSED;
    }
    if (req == NULL)
        r->state = RX_READY;
    else if (r->state == RX_RNDV_BUSY) /* its callback has not run inside the call */
        r->req = req;
    return 0;
}

/* Hands frames held while reading was paused or not started to on_frame, in order. */
static void deliver(cmn__core_t *k)
{
    ep_t *e = k->tp;
    rx_t *r;
    int rc;

    while (e && (r = e->rx_head) != NULL && can_deliver(e)) {
        if (r->state == RX_RNDV_WAIT) {
            rc = rndv_start(e, r);
            if (rc < 0) {
                e->broken = 1;
                cmn__core_close(k, rc);
                return;
            }
        }
        if (r->state != RX_READY)
            return;
        e->rx_head = r->next;
        if (!e->rx_head)
            e->rx_tail = NULL;
        deliver_frame(e, &r->hdr, r->meta, r->payload);
        rx_free(e, r);
        e = k->tp; /* on_frame may have closed the connection; e stays until released */
    }
}

/* One frame arrived: header = frame header [+ metadata], data = [metadata +] payload. */
static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    cmn_ucx_t *u = arg;
    const uint8_t *hb = header;
    cmn_frame_header_t h;
    ep_t *e;
    rx_t *r;
    int rc, rndv, meta_in_data;

    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
        /* Whose it is cannot be known, so no connection can be told: dropped, and said (the
         * first, then every 1000th, so a flood cannot fill the log). */
        if (u->anonymous++ % 1000 == 0)
            cmn_log_warn("ucx: a message without its sender's endpoint (no UCP_AM_SEND_FLAG_REPLY; "
                         "%zu header + %zu data bytes): dropped (%llu so far)",
                         header_length, length, (unsigned long long)u->anonymous);
        return UCS_OK;
    }
    e = ep_find(u, param->reply_ep);
    if (!e || e->broken || e->closing || e->k->closing)
        return UCS_OK; /* dropped, as bytes after a close are */
    rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (header_length < CMN_FRAME_HEADER_SIZE) {
        /* Nothing of it is read: the frame header is the first bytes of the message header. */
        cmn__core_set_error(e->k,
                            "UCX message of %zu header + %zu data bytes: its header is shorter "
                            "than a frame header (%u bytes)",
                            header_length, length, CMN_FRAME_HEADER_SIZE);
        frame_error(e, CMN_EFIELD);
        return UCS_OK;
    }
    /* Limits first: before a byte of a rendezvous payload moves or anything is allocated. */
    rc = cmn_frame_header_parse(hb, &e->k->dec.limits, &h);
    if (rc < 0) {
        /* For the owner's message (sut-node names the sizes against the limit). */
        cmn_frame_header_t bad = e->k->dec.hdr;
        bad.type = hb[5];
        bad.meta_len =
            (uint32_t)hb[8] << 24 | (uint32_t)hb[9] << 16 | (uint32_t)hb[10] << 8 | hb[11];
        bad.payload_len =
            (uint32_t)hb[12] << 24 | (uint32_t)hb[13] << 16 | (uint32_t)hb[14] << 8 | hb[15];
        cmn__core_frame_header(e->k, &bad);
        frame_error(e, rc);
        return UCS_OK;
    }
    cmn__core_frame_header(e->k, &h);
    meta_in_data = header_length == CMN_FRAME_HEADER_SIZE && h.meta_len > 0;
    if ((!meta_in_data && header_length != CMN_FRAME_HEADER_SIZE + h.meta_len) ||
        length != (size_t)h.payload_len + (meta_in_data ? h.meta_len : 0)) {
        /* A message is whole or absent: no partial frame to wait for, so the lengths must add up.
         */
        cmn__core_set_error(e->k,
                            "UCX message of %zu header + %zu data bytes does not match its frame "
                            "header (%u metadata + %u payload bytes)",
                            header_length, length, h.meta_len, h.payload_len);
        frame_error(e, CMN_EFIELD);
        return UCS_OK;
    }
    if (!rndv && !e->rx_head && can_deliver(e)) {
        const uint8_t *d = data;
        if (meta_in_data)
            deliver_frame(e, &h, d, d + h.meta_len);
        else
            deliver_frame(e, &h, hb + CMN_FRAME_HEADER_SIZE, d);
        return UCS_OK;
    }
    /* Held: behind an earlier frame, paused, or a rendezvous payload still to fetch. A peer's
     * active messages cannot be refused (TCP would stop reading and let the window close), so
     * what is held is bounded: twice the frame limit plus 16 MiB, 65536 frames. */
    {
        size_t add = header_length + (rndv ? 0 : length) + sizeof(rx_t);
        uint64_t cap = 2 * e->k->dec.limits.max_frame + ((uint64_t)16 << 20);
        if ((uint64_t)e->held_bytes + add > cap || e->held_frames >= 65536) {
            cmn__core_set_error(e->k,
                                "UCX peer sent %zu more bytes while %zu frames (%zu bytes) were "
                                "held (reading paused or a payload still to fetch): over the "
                                "limit of %llu bytes or 65536 frames",
                                add, e->held_frames, e->held_bytes, (unsigned long long)cap);
            frame_error(e, CMN_EOVERLOAD);
            return UCS_OK;
        }
    }
    r = calloc(1, sizeof(*r));
    if (!r || (!meta_in_data && h.meta_len && !(r->meta = malloc(h.meta_len)))) {
        free(r);
        frame_error(e, -ENOMEM);
        return UCS_OK;
    }
    r->e = e;
    r->hdr = h;
    r->meta_in_data = meta_in_data;
    r->held_size = header_length + (rndv ? 0 : length) + sizeof(rx_t);
    e->held_bytes += r->held_size;
    e->held_frames++;
    if (!meta_in_data && h.meta_len)
        memcpy(r->meta, hb + CMN_FRAME_HEADER_SIZE, h.meta_len);
    if (rndv || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA)) {
        r->held = data;
    } else {
        /* UCX lends this data for the call only: keep a copy. */
        r->buf = malloc(length ? length : 1);
        if (!r->buf) {
            rx_free(e, r);
            frame_error(e, -ENOMEM);
            return UCS_OK;
        }
        memcpy(r->buf, data, length);
        data = r->buf;
    }
    if (rndv) {
        r->state = RX_RNDV_WAIT;
    } else {
        r->state = RX_READY;
        if (meta_in_data) {
            r->meta = data;
            r->payload = (uint8_t *)data + h.meta_len;
        } else {
            r->payload = data;
        }
    }
    CMN_QUEUE_APPEND(e->rx_head, e->rx_tail, r, next);
    if (!rndv)
        /* Held eager data stays ours until rx_free (ucp_am_data_release); it is delivered from
         * a later call (a finished rendezvous ahead of it, or resumed reading). */
        return r->held ? UCS_INPROGRESS : UCS_OK;
    deliver(e->k); /* fetches the payload now when this frame is first in line */
    return UCS_INPROGRESS;
}

/* ---- Sending --------------------------------------------------------------------------- */

static void tx_unlink(ep_t *e, tx_t *t)
{
    if (e->sending == t)
        e->sending = NULL;
    CMN_DLIST_UNLINK(e->tx_head, t, prev, next);
}

static void gather_free(const cmn__core_t *k, tx_t *t)
{
    if (t->gather && k->opt.copy_free)
        k->opt.copy_free(k->opt.copy_ctx, t->gather, t->bytes);
    else
        free(t->gather);
    t->gather = NULL;
}

static void on_sent(void *req, ucs_status_t st, void *user_data)
{
    tx_t *t = user_data;
    ep_t *e = t->e;
    cmn__core_t *k = e->k;
    size_t bytes;

    ucp_request_free(req);
    e->inflight--;
    tx_unlink(e, t);
    bytes = t->bytes;
    if (t->cb)
        t->cb(t->arg, status_code(st));
    gather_free(k, t);
    free(t);
    cmn__core_written(k, bytes, st == UCS_OK);
    maybe_released(e);
}

/* Sends one frame at once (the cmn_conn_send contract): an ops->send. */
static int ucx_send(cmn__core_t *k, unsigned type, const ProtobufCMessage *meta,
                    const struct iovec *payload, size_t n_payload, cmn_conn_sent_cb cb, void *arg)
{
    ep_t *e = k->tp;
    ucp_request_param_t rp;
    ucs_status_ptr_t req;
    size_t hsize, i, nseg = 0, hlen, bytes;
    uint64_t plen = 0;
    const void *buf = NULL;
    size_t count = 0;
    cmn_conn_sent_cb early = NULL; /* called before returning: the payload was copied */
    void *early_arg = NULL;
    long hl;
    tx_t *t;

    if (!e || e->failed || e->closing || e->connecting)
        return CMN_ECLOSED;
    for (i = 0; i < n_payload; i++)
        plen += payload[i].iov_len;
    hsize = cmn_frame_head_size(meta);
    t = malloc(sizeof(*t) + hsize + (n_payload + 1) * sizeof(ucp_dt_iov_t) + 8);
    if (!t)
        return -ENOMEM;
    hl = cmn_frame_encode_head(type, meta, plen, t->head, hsize);
    if (hl < 0) {
        free(t);
        return (int)hl;
    }
    /* The iov array after the head, aligned. */
    t->iov = (ucp_dt_iov_t *)(((uintptr_t)(t->head + hsize) + 7u) & ~(uintptr_t)7u);
    t->e = e;
    t->gather = NULL;
    t->cb = cb;
    t->arg = arg;
    t->bytes = (size_t)hl + (size_t)plen;
    /* Metadata too large for an active-message header travels at the front of the data. */
    hlen = (size_t)hl;
    if (hlen > e->u->max_am_header) {
        hlen = CMN_FRAME_HEADER_SIZE;
        t->iov[nseg].buffer = t->head + CMN_FRAME_HEADER_SIZE;
        t->iov[nseg].length = (size_t)hl - CMN_FRAME_HEADER_SIZE;
        nseg++;
    }
    for (i = 0; i < n_payload; i++) {
        if (payload[i].iov_len == 0)
            continue;
        t->iov[nseg].buffer = payload[i].iov_base;
        t->iov[nseg].length = payload[i].iov_len;
        nseg++;
    }
    /* REPLY: the receiver finds the connection by its endpoint */
    send_param(&rp, UCP_AM_SEND_FLAG_REPLY, on_sent, t);
    if (nseg == 1) {
        buf = t->iov[0].buffer;
        count = t->iov[0].length;
        rp.memh = find_memh(e->u, buf, count);
        if (rp.memh)
            rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    } else if (nseg > 1) {
        /* UCX 1.13.1 mishandles the iov datatype on rendezvous active messages: sent with
         * UCP_OP_ATTR_FIELD_DATATYPE = ucp_dt_make_iov() and count = 3 segments of 8 MiB in all,
         * the receiver's callback got length 3 (the segment count) instead of 8388608 (measured
         * with test_ucx's three-segment frame, UCX_TLS=tcp and sm). So several segments are
         * gathered into one buffer: the one copy on this path, avoided by passing the payload as
         * one segment. */
        size_t off = 0;
        t->gather =
            k->opt.copy_alloc ? k->opt.copy_alloc(k->opt.copy_ctx, t->bytes) : malloc(t->bytes);
        if (!t->gather) {
            free(t);
            return -ENOMEM;
        }
        for (i = 0; i < nseg; i++) {
            memcpy(t->gather + off, t->iov[i].buffer, t->iov[i].length);
            off += t->iov[i].length;
        }
        buf = t->gather;
        count = off;
    }
    /* Accounted before the call: UCX may complete the send (on_sent frees |t|) inside it. */
    bytes = t->bytes;
    e->inflight++;
    cmn__core_writing(k, bytes, 0);
    t->req = NULL;
    t->prev = NULL;
    t->next = e->tx_head;
    if (e->tx_head)
        e->tx_head->prev = t;
    e->tx_head = t;
    e->sending = t;
    req = ucp_am_send_nbx(e->ep, AM_FRAME, t->head, hlen, buf, count, &rp);
    if (e->sending == t && !UCS_PTR_IS_ERR(req)) { /* on_sent has not run inside the call */
        t->req = req;
        if (t->gather && k->opt.copy_alloc) { /* the copy is what UCX sends (conn.h) */
            early = t->cb;
            early_arg = t->arg;
            t->cb = NULL;
        }
    }
    e->sending = NULL;
    if (UCS_PTR_IS_ERR(req)) {
        tx_unlink(e, t);
        e->inflight--;
        gather_free(k, t);
        free(t);
        cmn__core_set_error(k, "UCX send to %s: %s", k->peer,
                            ucs_status_string(UCS_PTR_STATUS(req)));
        cmn__core_written(k, bytes, 0);
        return CMN_ECLOSED;
    }
    cmn__core_writing(k, 0, 1);
    if (early) /* the caller's buffers are free now */
        early(early_arg, 0);
    return 0;
}

/* ---- Closing --------------------------------------------------------------------------- */

static void on_shutdown_flushed(void *req, ucs_status_t st, void *user_data)
{
    ep_t *e = user_data;

    flush_done(e, req);
    if (!e->closing && !e->failed && e->accepted && st == UCS_OK)
        e->lingering = 1; /* see ucx_shutdown */
    else if (!e->closing)
        end_later(e, e->k->close_reason ? e->k->close_reason : CMN_ECLOSED);
    maybe_released(e);
}

/* Waits until everything sent has reached the peer, then ends the connection (an ops->shutdown).
 * On the server's end (a sut-node saying Goodbye) the flush is not the end: over shared memory it
 * completes once the frames are in the peer's queue, and a peer whose UCX sees this endpoint
 * close before it has read that queue loses them (UCX 1.13: the failure, seen first on a TCP
 * lane, stops the progress of the shared-memory interface, measured in sut.ucx_shm.sigterm).
 * So it lingers until the peer closes (on_ep_error), which it does after the last frame, or
 * until the core's shutdown deadline (shutdown_timeout_ms) closes it (forced). A client's end
 * closes after its flush, so two ends shutting down together never wait for each other. */
static void ucx_shutdown(cmn__core_t *k)
{
    ep_t *e = k->tp;

    if (!e || e->closing)
        return;
    if (e->failed || e->connecting) {
        cmn__core_close(k, k->close_reason);
        return;
    }
    if (e->flushing) /* a shutdown flush is under way already */
        return;
    if (flush_start(e, on_shutdown_flushed) < 0)
        cmn__core_close(k, k->close_reason);
}

/* UCX has closed the endpoint (forced) yet still owes callbacks: seen with UCX 1.13 over shared
 * memory, where a flush under way when the peer closes never completes (a QDL's shutdown then
 * waited forever for its node). Nothing more can move on this endpoint: each request is given
 * back to UCX without its callback (ucp_request_free), and its owner told UV_ECANCELED. */
static void abandon(ep_t *e)
{
    cmn__core_t *k = e->k;
    int n = 0;
    tx_t *t;
    rx_t *r;

    if (e->flushing) {
        if (e->flush_req)
            ucp_request_free(e->flush_req);
        e->flush_req = NULL;
        e->flushing = 0;
        e->inflight--;
        n++;
    }
    while ((t = e->tx_head) != NULL) {
        size_t bytes = t->bytes;
        tx_unlink(e, t);
        if (t->req)
            ucp_request_free(t->req);
        e->inflight--;
        n++;
        if (t->cb)
            t->cb(t->arg, UV_ECANCELED);
        gather_free(k, t);
        free(t);
        cmn__core_written(k, bytes, 0);
    }
    r = e->rx_head;
    if (r && r->state == RX_RNDV_BUSY && r->req) {
        ucp_request_free(r->req);
        r->req = NULL;
        e->inflight--;
        n++;
        e->rx_head = e->rx_tail = NULL;
        rx_free(e, r);
    }
    if (n > 0)
        cmn_log_debug("ucx: %s: %d operations UCX did not complete after closing the endpoint: "
                      "abandoned",
                      k->peer, n);
}

/* The endpoint is released (closed by UCX, or given up): what UCX still owes is abandoned, and
 * the core gets the connection back once nothing else holds it. */
static void released(ep_t *e)
{
    e->ep_released = 1;
    abandon(e);
    maybe_released(e);
}

static void on_ep_closed(void *req, ucs_status_t st, void *user_data)
{
    (void)st;
    ucp_request_free(req);
    released(user_data);
}

/* A released endpoint's last word comes from a later loop turn, never from inside the call. */
static void on_release_timer_closed(uv_handle_t *h)
{
    ep_t *e = h->data;
    free(h);
    released(e);
}

/* Releases the endpoint (in-flight sends complete with UV_ECANCELED); the core is told from a
 * later loop turn (an ops->close). */
static void ucx_close(cmn__core_t *k)
{
    ep_t *e = k->tp;
    ucp_request_param_t rp;
    ucs_status_ptr_t req;
    rx_t *r;

    if (!e || e->closing)
        return;
    cmn__core_hold(k); /* released by maybe_released */
    e->closing = 1;
    e->connecting = 0;
    ep_unlink(e);
    while ((r = e->rx_head) != NULL && r->state != RX_RNDV_BUSY) {
        e->rx_head = r->next;
        rx_free(e, r);
    }
    /* A rendezvous receive in flight finishes (into its buffer) before the release. */
    if (r) {
        rx_t *rest = r->next;
        r->next = NULL;
        while (rest) {
            rx_t *n = rest->next;
            rx_free(e, rest);
            rest = n;
        }
    }
    e->rx_tail = e->rx_head;
    /* FORCE: the peer sees the endpoint fail at once */
    send_param(&rp, UCP_EP_CLOSE_FLAG_FORCE, on_ep_closed, e);
    req = ucp_ep_close_nbx(e->ep, &rp);
    if (UCS_PTR_IS_ERR(req) || req == NULL) {
        uv_idle_t *h = malloc(sizeof(*h));
        if (h) {
            uv_idle_init(e->u->loop, h);
            h->data = e;
            uv_close((uv_handle_t *)h, on_release_timer_closed);
            return;
        }
        released(e); /* no memory: released now; the core still holds its own handles */
    }
}

/* "ucx:tcp", "ucx:posix" ...: the UCX transports the endpoint's lanes use. */
static void ucx_describe(const cmn__core_t *k, char *buf, size_t len)
{
    char *text = NULL, *line, *save = NULL, names[256] = "";
    size_t tlen = 0;
    FILE *f;

    const ep_t *e = k->tp;

    snprintf(buf, len, "ucx");
    if (!e || e->closing)
        return;
    /* UCX 1.13 has no query for an endpoint's transports; its info dump names one per lane
     * ("lane[0]:  3:posix/memory.0 md[2] ..."). */
    f = open_memstream(&text, &tlen);
    if (!f)
        return;
    ucp_ep_print_info(e->ep, f);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = strstr(line, "lane["), *colon, *slash;
        char tl[32];
        size_t n;

        if (!p || !(colon = strchr(p, ':')))
            continue;
        colon++;
        while (*colon == ' ')
            colon++;
        while (*colon >= '0' && *colon <= '9')
            colon++;
        if (*colon != ':')
            continue;
        colon++;
        slash = strchr(colon, '/');
        if (!slash || (size_t)(slash - colon) >= sizeof(tl))
            continue;
        n = (size_t)(slash - colon);
        memcpy(tl, colon, n);
        tl[n] = '\0';
        if (strstr(names, tl))
            continue;
        if (names[0])
            strncat(names, ",", sizeof(names) - strlen(names) - 1);
        strncat(names, tl, sizeof(names) - strlen(names) - 1);
    }
    free(text);
    if (names[0])
        snprintf(buf, len, "ucx:%s", names);
    if (!e->u->warned_mm && (strstr(names, "posix") || strstr(names, "sysv"))) {
        /* UCX's shared-memory transports (mm) deliver every peer's messages through one queue
         * per worker, a slot claimed first and marked full after the copy: a peer killed between
         * the two leaves a slot that is never marked, and the worker reads nothing after it.
         * Seen in qdl.ucx_shm.kill_offline: after a kill -9 of one node, the two others went
         * silent and their reconnections timed out. */
        e->u->warned_mm = 1;
        cmn_log_warn("ucx: shared memory (%s) in use: a peer killed in the middle of a send can "
                     "stall every other shared-memory connection of this process (UCX's mm "
                     "queue has no recovery); where a node or loadgen-node may be killed, leave "
                     "sm out of UCX_TLS",
                     names);
    }
}

/* Reading starts or resumes: frames held meanwhile go at the end of the turn. */
static int ucx_read_start(cmn__core_t *k)
{
    cmn__core_arm(k);
    return 0;
}

/* Nothing to stop: UCX delivers anyway, and frames are held while the core does not read. */
static void ucx_read_stop(cmn__core_t *k)
{
    (void)k;
}

/* The end of a turn in which reading (re)started: the held frames, in order. */
static void ucx_turn_end(cmn__core_t *k)
{
    cmn__core_disarm(k);
    deliver(k);
}

const cmn__ops_t cmn__ucx_ops = {
    .name = "ucx",
    .flags = CMN__T_COPIES_SEGMENTS | CMN__T_WHOLE_PAYLOADS,
    .start = ucx_read_start,
    .send = ucx_send,
    .write = NULL, /* frames leave at once: no batch is ever flushed */
    .turn_end = ucx_turn_end,
    .flush = NULL,
    .read_start = ucx_read_start,
    .read_stop = ucx_read_stop,
    .shutdown = ucx_shutdown,
    .close = ucx_close,
    .describe = ucx_describe,
    .peer_identity = NULL,
    .fileno = NULL,
};

/* ---- Listener -------------------------------------------------------------------------- */

static void on_conn_request(ucp_conn_request_h req, void *arg)
{
    cmn_ucx_listener_t *l = arg;
    cmn_ucx_incoming_t in;

    in.u = l->u;
    in.req = req;
    in.taken = 0;
    if (!l->u->closing)
        l->cb(l, &in, l->arg);
    if (!in.taken)
        ucp_listener_reject(l->l, req);
}

int cmn_ucx_listen(cmn_ucx_t *u, const struct sockaddr *addr, cmn_ucx_accept_cb cb, void *arg,
                   cmn_ucx_listener_t **out, cmn_errbuf_t *eb)
{
    ucp_listener_params_t p;
    ucp_listener_attr_t a;
    cmn_ucx_listener_t *l;
    ucs_status_t st;
    char where[64];

    *out = NULL;
    cmn_addr_format(addr, where, sizeof(where));
    l = calloc(1, sizeof(*l));
    if (!l)
        return cmn_errf(eb, -ENOMEM, "ucx: out of memory");
    l->u = u;
    l->cb = cb;
    l->arg = arg;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    p.sockaddr.addr = addr;
    p.sockaddr.addrlen =
        addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    p.conn_handler.cb = on_conn_request;
    p.conn_handler.arg = l;
    st = ucp_listener_create(u->worker, &p, &l->l);
    if (st != UCS_OK) {
        free(l);
        return cmn_errf(eb, st == UCS_ERR_BUSY ? UV_EADDRINUSE : CMN_ECONFIG,
                        "ucx: cannot listen on %s: %s", where, ucs_status_string(st));
    }
    memset(&a, 0, sizeof(a));
    a.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    l->port = ucp_listener_query(l->l, &a) == UCS_OK
                  ? cmn_addr_port((const struct sockaddr *)&a.sockaddr)
                  : cmn_addr_port(addr);
    ref(u);
    *out = l;
    return 0;
}

int cmn_ucx_listener_port(const cmn_ucx_listener_t *l)
{
    return l->port;
}

void cmn_ucx_listener_close(cmn_ucx_listener_t *l)
{
    cmn_ucx_t *u;

    if (!l)
        return;
    u = l->u;
    ucp_listener_destroy(l->l);
    free(l);
    unref(u);
}
