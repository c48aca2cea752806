/* The tests' blocking UCX client: see tnucx.h. */
#include "tnucx.h"

#include "cmn/frame.h"

#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#define AM_FRAME 1u /* common/src/ucx.c's one active-message id */
#define SEND_TIMEOUT_MS 20000
#define CONNECT_TIMEOUT_MS 5000

/* One frame (one active message) received: header then data, as the TCP stream carries it. */
typedef struct chunk {
    struct chunk *next;
    uint8_t *bytes;
    size_t len, off;
    int ready;  /* 0 while its rendezvous data is still being fetched */
    int failed; /* the fetch failed */
} chunk_t;

/* A rendezvous message left unfetched by a peer that stopped reading: its sender still waits. */
typedef struct held {
    struct held *next;
    void *desc;
} held_t;

struct tnucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    int efd;
    size_t max_hdr;
    int failed;  /* UCX reported the endpoint broken */
    int no_read; /* tnucx_stop_reading() */
    chunk_t *head, *tail;
    held_t *held; /* the rendezvous messages not fetched since */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void progress(tnucx_t *t)
{
    while (ucp_worker_progress(t->worker) != 0) {
    }
}

/* Sleeps on the worker's event fd for at most |ms| (UCS_ERR_BUSY: there is more to do now). */
static void wait_event(tnucx_t *t, int ms)
{
    struct pollfd p = {t->efd, POLLIN, 0};

    if (ms <= 0 || ucp_worker_arm(t->worker) != UCS_OK)
        return;
    (void)poll(&p, 1, ms < 50 ? ms : 50); /* capped: a missed wake-up costs 50 ms, not the test */
}

/* Progresses until |req| completes or |timeout_ms| passes; returns its status (UCS_ERR_TIMED_OUT
 * at the deadline, the request then given back without a callback). */
static ucs_status_t wait_req(tnucx_t *t, ucs_status_ptr_t req, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    ucs_status_t st;

    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    for (;;) {
        progress(t);
        st = ucp_request_check_status(req);
        if (st != UCS_INPROGRESS)
            break;
        if (now_ms() >= deadline) {
            st = UCS_ERR_TIMED_OUT;
            break;
        }
        wait_event(t, (int)(deadline - now_ms()));
    }
    ucp_request_free(req);
    return st;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    tnucx_t *t = arg;
    (void)ep;
    (void)st;
    t->failed = 1;
}

static void on_fetched(void *req, ucs_status_t st, size_t length, void *user_data)
{
    chunk_t *k = user_data;
    (void)length;
    if (st != UCS_OK)
        k->failed = 1;
    k->ready = 1;
    ucp_request_free(req);
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    tnucx_t *t = arg;
    chunk_t *k;

    if (t->no_read) {
        /* A rendezvous message is left where it is: its sender's request does not complete until
         * the data is fetched, as a TCP sender's bytes stay queued when its peer stops reading.
         * An eager message is here already (its sender is done with it): dropped. */
        held_t *h;
        if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || !(h = malloc(sizeof(*h))))
            return UCS_OK;
        h->desc = data;
        h->next = t->held;
        t->held = h;
        return UCS_INPROGRESS;
    }
    k = calloc(1, sizeof(*k));
    if (!k || !(k->bytes = malloc(header_length + length + 1))) {
        free(k);
        t->failed = 1;
        return UCS_OK;
    }
    memcpy(k->bytes, header, header_length);
    k->len = header_length + length;
    if (t->tail)
        t->tail->next = k;
    else
        t->head = k;
    t->tail = k;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        ucp_request_param_t rp;
        ucs_status_ptr_t r;

        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        rp.cb.recv_am = on_fetched;
        rp.user_data = k;
        r = ucp_am_recv_data_nbx(t->worker, data, k->bytes + header_length, length, &rp);
        if (UCS_PTR_IS_ERR(r))
            k->failed = k->ready = 1;
        else if (r == NULL)
            k->ready = 1;
        return UCS_INPROGRESS;
    }
    memcpy(k->bytes + header_length, data, length);
    k->ready = 1;
    return UCS_OK;
}

tnucx_t *tnucx_connect(int port)
{
    ucp_params_t params;
    ucp_worker_params_t wp;
    ucp_worker_attr_t wa;
    ucp_am_handler_param_t ap;
    ucp_ep_params_t ep;
    ucp_request_param_t rp;
    ucp_config_t *config;
    struct sockaddr_in a;
    ucs_status_t st;
    tnucx_t *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        free(t);
        return NULL;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    st = ucp_init(&params, config, &t->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        fprintf(stderr, "tnucx: ucp_init: %s\n", ucs_status_string(st));
        free(t);
        return NULL;
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(t->ctx, &wp, &t->worker);
    if (st != UCS_OK) {
        fprintf(stderr, "tnucx: no worker: %s\n", ucs_status_string(st));
        ucp_cleanup(t->ctx);
        free(t);
        return NULL;
    }
    memset(&wa, 0, sizeof(wa));
    wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    t->max_hdr =
        ucp_worker_query(t->worker, &wa) == UCS_OK ? wa.max_am_header : CMN_FRAME_HEADER_SIZE;
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.id = AM_FRAME;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG;
    ap.cb = on_am;
    ap.arg = t;
    st = ucp_worker_set_am_recv_handler(t->worker, &ap);
    if (st == UCS_OK)
        st = ucp_worker_get_efd(t->worker, &t->efd);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (const struct sockaddr *)&a;
    ep.sockaddr.addrlen = sizeof(a);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = on_ep_error;
    ep.err_handler.arg = t;
    if (st == UCS_OK)
        st = ucp_ep_create(t->worker, &ep, &t->ep);
    if (st != UCS_OK) {
        fprintf(stderr, "tnucx: endpoint to port %d: %s\n", port, ucs_status_string(st));
        t->ep = NULL;
        tnucx_close(t);
        return NULL;
    }
    /* Wired up to the node's listener (the node may have answered and closed already: an
     * OVERLOAD refusal, read later as on TCP). */
    memset(&rp, 0, sizeof(rp));
    st = wait_req(t, ucp_ep_flush_nbx(t->ep, &rp), CONNECT_TIMEOUT_MS);
    if (st != UCS_OK && !t->head) {
        fprintf(stderr, "tnucx: connect to port %d: %s\n", port, ucs_status_string(st));
        tnucx_close(t);
        return NULL;
    }
    return t;
}

int tnucx_send_msg(tnucx_t *t, const void *hdr, size_t hlen, const void *data, size_t dlen,
                   int reply)
{
    ucp_request_param_t rp;
    ucs_status_t st;

    if (t->failed)
        return -1;
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0;
    st = wait_req(t, ucp_am_send_nbx(t->ep, AM_FRAME, hdr, hlen, data, dlen, &rp), SEND_TIMEOUT_MS);
    return st == UCS_OK ? 0 : -1;
}

int tnucx_send(tnucx_t *t, const void *bytes, size_t len)
{
    const uint8_t *b = bytes;
    size_t hlen = len;

    if (len >= CMN_FRAME_HEADER_SIZE) {
        uint64_t meta = (uint32_t)b[8] << 24 | (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
        hlen = CMN_FRAME_HEADER_SIZE;
        if (CMN_FRAME_HEADER_SIZE + meta <= len && CMN_FRAME_HEADER_SIZE + meta <= t->max_hdr)
            hlen = CMN_FRAME_HEADER_SIZE + (size_t)meta;
    }
    return tnucx_send_msg(t, b, hlen, b + hlen, len - hlen, 1);
}

long tnucx_recv(tnucx_t *t, uint8_t *buf, size_t cap, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

    if (t->no_read)
        return -1;
    for (;;) {
        chunk_t *k;

        progress(t);
        k = t->head;
        if (k && k->ready) {
            size_t n = k->len - k->off < cap ? k->len - k->off : cap;
            if (k->failed)
                return -1;
            memcpy(buf, k->bytes + k->off, n);
            k->off += n;
            if (k->off == k->len) {
                t->head = k->next;
                if (!t->head)
                    t->tail = NULL;
                free(k->bytes);
                free(k);
            }
            if (n > 0)
                return (long)n;
            continue;
        }
        if (!k && t->failed)
            return -1;
        if (now_ms() >= deadline)
            return 0;
        wait_event(t, (int)(deadline - now_ms()));
    }
}

void tnucx_pump(tnucx_t *t, int ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(ms > 0 ? ms : 0);

    do {
        progress(t);
        wait_event(t, (int)(deadline - now_ms()));
    } while (now_ms() < deadline);
}

void tnucx_stop_reading(tnucx_t *t)
{
    t->no_read = 1;
}

void tnucx_close(tnucx_t *t)
{
    chunk_t *k;
    held_t *h;

    if (!t)
        return;
    while ((h = t->held) != NULL) { /* given back to UCX before the endpoint goes */
        t->held = h->next;
        ucp_am_data_release(t->worker, h->desc);
        free(h);
    }
    if (t->ep) {
        ucp_request_param_t rp;
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
        (void)wait_req(t, ucp_ep_close_nbx(t->ep, &rp), CONNECT_TIMEOUT_MS);
    }
    ucp_worker_destroy(t->worker); /* before the chunks: a fetch may still point into one */
    ucp_cleanup(t->ctx);
    while ((k = t->head) != NULL) {
        t->head = k->next;
        free(k->bytes);
        free(k);
    }
    free(t);
}
