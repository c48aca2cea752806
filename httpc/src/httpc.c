/* The HTTP connection pool: libcurl's multi-socket interface on a libuv loop in its own thread
 * (see httpc/httpc.h). libcurl says which sockets to watch and when to wake it; this file turns
 * that into uv_poll and uv_timer handles, and finished transfers into on_done calls. */
#include "httpc/httpc.h"
#include "rtick.h"

#include "cmn/list.h"
#include "cmn/thread_stop.h"
#include "cmn/wake.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define ERRBODY_MAX 512

typedef struct {
    CURL *e;
    char errbuf[CURL_ERROR_SIZE];
} easy_t;

typedef struct sockctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct httpc *h;
    int events;        /* what libcurl asked to watch (UV_READABLE | UV_WRITABLE) */
    int lport;         /* its local TCP port, once looked up (0: not yet) */
    int closing;       /* libcurl is done with it */
    int parked;        /* read on the coalescing tick instead of watched (httpc/httpc.h) */
    httpc_req_t *want; /* a transfer that asked to coalesce during this socket's action */
    httpc_req_t *req;  /* the coalescing transfer while parked */
    struct sockctx *pnext, *pprev;
} sockctx_t;

struct httpc {
    uv_loop_t loop;
    cmn_wake_t wake;
    uv_timer_t timer;
    uv_thread_t thread;
    CURLM *multi;
    long connect_timeout_ms;
    char *ca_file; /* https: verify against this CA file (NULL: the system's) */

    uv_mutex_t lock; /* guards queue, stopping, cancel_pending and every req's cancel */
    httpc_req_t *queue_head, *queue_tail;
    int stopping;
    int cancel_pending; /* httpc_cancel() marked some since the loop last looked */

    long idle_ms; /* cfg.idle_ms */
    uv_timer_t idle_timer;

    httpc_req_t *active; /* transfers in libcurl (loop thread only) */
    size_t n_active, max_active;
    httpc_req_t *wait_head, *wait_tail; /* submitted, not started: FIFO (loop thread only) */
    easy_t **free_easy;                 /* reusable easy handles (loop thread only) */
    size_t n_free, cap_free;

    /* Read coalescing (loop thread only). */
    uint32_t coalesce_us;
    httpc_rtick_t tick;         /* armed while a socket is parked; fd -1 when coalescing is off */
    sockctx_t *cur_sock;        /* the socket whose action is running, if any */
    sockctx_t *parked;          /* list of parked sockets */
    atomic_uint_fast64_t parks; /* ever (read by httpc_parks() from any thread) */
};

static void check_done(httpc_t *h);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- easy handles ---- */

static easy_t *easy_get(httpc_t *h)
{
    easy_t *x;
    if (h->n_free)
        return h->free_easy[--h->n_free];
    x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->e = curl_easy_init();
    if (!x->e) {
        free(x);
        return NULL;
    }
    return x;
}

static void easy_put(httpc_t *h, easy_t *x)
{
    if (h->n_free == h->cap_free) {
        size_t ncap = h->cap_free ? h->cap_free * 2 : 16;
        easy_t **nf = realloc(h->free_easy, ncap * sizeof(*nf));
        if (!nf) {
            curl_easy_cleanup(x->e);
            free(x);
            return;
        }
        h->free_easy = nf;
        h->cap_free = ncap;
    }
    curl_easy_reset(x->e);
    h->free_easy[h->n_free++] = x;
}

/* The local TCP port of a connected socket, or 0. */
static int local_port(curl_socket_t fd)
{
    struct sockaddr_storage a;
    socklen_t al = sizeof(a);
    if (getsockname(fd, (struct sockaddr *)&a, &al) < 0)
        return 0;
    if (a.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (a.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return 0;
}

/* ---- request completion ---- */

static void unpark(httpc_t *h, sockctx_t *s);

static void finish(httpc_t *h, httpc_req_t *r, int status, const char *msg)
{
    easy_t *x = r->easy;

    if (r->psock) /* its connection may carry the next transfer: watch it again */
        unpark(h, r->psock);
    if (x) {
        curl_multi_remove_handle(h->multi, x->e);
        h->n_active--;
        CMN_DLIST_UNLINK(h->active, r, prev, next);
        easy_put(h, x);
        r->easy = NULL;
    }
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    free(r->errbody);
    r->errbody = NULL;
    r->on_done(r, status, msg);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    httpc_req_t *r = ud;
    size_t n = size * nmemb;

    if (r->http_code == 0)
        curl_easy_getinfo(((easy_t *)r->easy)->e, CURLINFO_RESPONSE_CODE, &r->http_code);
    if (r->http_code < 200 || r->http_code > 299) {
        /* Keep the start of an error body for the message; drop the rest. */
        size_t room = ERRBODY_MAX - r->errbody_len, take = n < room ? n : room;
        if (take) {
            char *nb = realloc(r->errbody, r->errbody_len + take + 1);
            if (nb) {
                memcpy(nb + r->errbody_len, p, take);
                r->errbody_len += take;
                nb[r->errbody_len] = '\0';
                r->errbody = nb;
            }
        }
        return n;
    }
    if (r->on_data(r, p, n) != 0) {
        r->aborted = 1;
        return 0; /* libcurl aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (r->coalesce && !r->psock) {
        /* Park the socket once its action returns, if it is this transfer's: an action may run
         * other transfers' expired timers too. libcurl names a transfer's socket only after the
         * transfer (CURLINFO_ACTIVESOCKET), so the connection is told by its local port. */
        httpc_t *h = r->http;
        sockctx_t *s = h->cur_sock;
        if (s && !s->closing && r->lport) {
            if (!s->lport)
                s->lport = local_port(s->fd);
            if (s->lport == r->lport)
                s->want = r;
        }
    }
    return n;
}

/* libcurl: the transfer's connection is up or reused, the request not yet sent. */
static int on_prereq(void *ud, char *peer_ip, char *local_ip, int peer_port, int local_port_)
{
    httpc_req_t *r = ud;
    (void)peer_ip;
    (void)local_ip;
    (void)peer_port;
    r->lport = local_port_;
    return CURL_PREREQFUNC_OK;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    httpc_req_t *r = ud;
    size_t n = size * nmemb;

    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) { /* a status line: a new response begins */
        r->http_code = 0;
        return n;
    }
    if (r->http_code == 0)
        curl_easy_getinfo(((easy_t *)r->easy)->e, CURLINFO_RESPONSE_CODE, &r->http_code);
    if (r->http_code >= 200 && r->http_code <= 299) {
        size_t len = n;
        while (len && (p[len - 1] == '\n' || p[len - 1] == '\r'))
            len--;
        r->on_header(r, p, len);
    }
    return n;
}

static int start(httpc_t *h, httpc_req_t *r, long timeout_ms, char *msg, size_t msglen)
{
    easy_t *x = easy_get(h);
    struct curl_slist *hl = NULL, *t;
    const char *const *hp;
    CURL *e;

    if (!x) {
        snprintf(msg, msglen, "out of memory for an HTTP handle");
        return -ENOMEM;
    }
    e = x->e;
    x->errbuf[0] = '\0';
    hl = curl_slist_append(NULL, "Expect:"); /* no 100-continue round trip for large bodies */
    for (hp = r->headers; hl && hp && *hp; hp++) {
        t = curl_slist_append(hl, *hp);
        if (!t) {
            curl_slist_free_all(hl);
            hl = NULL;
        }
        hl = t;
    }
    if (!hl) {
        easy_put(h, x);
        snprintf(msg, msglen, "out of memory for HTTP headers");
        return -ENOMEM;
    }
    r->hdrs = hl;
    r->http_code = 0;
    r->aborted = 0;
    r->coalesce = 0;
    r->psock = NULL;
    r->http = h;
    r->lport = 0;
    r->progress_ns = now_ns();
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    if (h->coalesce_us) {
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
        curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
    }
    if (r->on_header) {
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    }
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, h->connect_timeout_ms);
    if (h->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_file);
    /* Plain http to a local engine only: no redirects, no other protocols. */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    r->easy = x;
    r->prev = NULL;
    r->next = h->active;
    if (h->active)
        h->active->prev = r;
    h->active = r;
    h->n_active++;
    if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
        snprintf(msg, msglen, "curl_multi_add_handle failed");
        return -EIO;
    }
    return 0;
}

/* Starts waiting requests, oldest first, while fewer than max_active run. A request whose
 * deadline passed while it waited fails without being sent, saying so ("not sent"). */
static void start_waiting(httpc_t *h)
{
    while (h->wait_head && h->n_active < h->max_active) {
        httpc_req_t *r = h->wait_head;
        uint64_t waited_ms = (now_ns() - r->submit_ns) / 1000000u;
        char msg[700];
        int rc;

        h->wait_head = r->next;
        if (!h->wait_head)
            h->wait_tail = NULL;
        r->next = NULL;
        /* under 1 ms left: libcurl would time it out at once, perhaps before a byte went */
        if (r->timeout_ms > 0 && waited_ms + 1 >= (uint64_t)r->timeout_ms) {
            snprintf(msg, sizeof(msg),
                     "%s: not sent: waited %llu ms for a free connection to the engine (%zu "
                     "connections, all busy), over timeout_ms=%ld",
                     r->url, (unsigned long long)waited_ms, h->max_active, r->timeout_ms);
            finish(h, r, HTTPC_ETRANSFER, msg);
            continue;
        }
        rc = start(h, r, r->timeout_ms > 0 ? r->timeout_ms - (long)waited_ms : 0, msg, sizeof(msg));
        if (rc < 0)
            finish(h, r, rc == -ENOMEM ? rc : HTTPC_ETRANSFER, msg);
    }
}

/* ---- libcurl <-> libuv ---- */

static void on_sock_close(uv_handle_t *hd)
{
    free(hd->data);
}

/* ---- read coalescing ---- */

static void on_poll(uv_poll_t *p, int status, int events);

static void park(httpc_t *h, sockctx_t *s, httpc_req_t *r)
{
    if (httpc_rtick_add(&h->tick, s->fd, s, s->events & UV_WRITABLE) < 0)
        return; /* no timer or no room in the set: it stays watched */
    uv_poll_stop(&s->poll);
    s->parked = 1;
    s->req = r;
    r->psock = s;
    s->pprev = NULL;
    s->pnext = h->parked;
    if (h->parked)
        h->parked->pprev = s;
    h->parked = s;
    atomic_fetch_add_explicit(&h->parks, 1, memory_order_relaxed);
}

static void unpark(httpc_t *h, sockctx_t *s)
{
    if (!s->parked)
        return;
    CMN_DLIST_UNLINK(h->parked, s, pprev, pnext);
    httpc_rtick_del(&h->tick, s->fd);
    s->parked = 0;
    if (s->req)
        s->req->psock = NULL;
    s->req = NULL;
    if (!s->closing && s->events)
        uv_poll_start(&s->poll, s->events, on_poll);
}

/* Runs one socket's action; parks the socket if its transfer asked for it meanwhile. */
static void sock_action(httpc_t *h, sockctx_t *s, int flags)
{
    int running;

    s->want = NULL;
    h->cur_sock = s;
    curl_multi_socket_action(h->multi, s->fd, flags, &running);
    h->cur_sock = NULL;
    if (s->want && !s->closing && !s->parked && s->want->easy)
        park(h, s, s->want);
    s->want = NULL;
}

/* A parked socket the kernel has something for, on the tick: its action. */
static void tick_ready(void *who, uint32_t re, void *arg)
{
    sockctx_t *s = who;
    int flags = 0;

    if (!s->parked || s->closing)
        return;
    if (re & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        flags |= CURL_CSELECT_IN;
    if (re & EPOLLOUT)
        flags |= CURL_CSELECT_OUT;
    if (re & EPOLLERR)
        flags |= CURL_CSELECT_ERR;
    sock_action(arg, s, flags);
}

/* The coalescing tick (rtick.h). A socket that libcurl drops during an action is freed only by
 * the loop's close phase, after this callback: the pointers stay valid here. */
static void on_tick(uv_poll_t *p, int status, int events)
{
    httpc_t *h = p->data;

    (void)status;
    (void)events;
    httpc_rtick_run(&h->tick, tick_ready, h);
    check_done(h);
}

void httpc_coalesce(httpc_req_t *r)
{
    r->coalesce = 1;
}

void httpc_progress(httpc_req_t *r)
{
    r->progress_ns = now_ns();
}

/* ---- cancel and the idle deadline (loop thread) ---- */

/* Fails the requests httpc_cancel() picked: the waiting ones unsent, the running ones removed
 * from libcurl (which closes their connections). */
static void cancel_picked(httpc_t *h)
{
    static const char why[] = "cancelled (the sample's client is gone, or the node is stopping)";
    httpc_req_t *r, *next, *prev = NULL;
    int c;

    for (r = h->wait_head; r; r = next) {
        next = r->next;
        uv_mutex_lock(&h->lock);
        c = r->cancel;
        uv_mutex_unlock(&h->lock);
        if (!c) {
            prev = r;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            h->wait_head = next;
        if (h->wait_tail == r)
            h->wait_tail = prev;
        r->next = NULL;
        finish(h, r, HTTPC_ECANCEL, why);
    }
    for (r = h->active; r; r = next) {
        next = r->next;
        uv_mutex_lock(&h->lock);
        c = r->cancel;
        uv_mutex_unlock(&h->lock);
        if (c)
            finish(h, r, HTTPC_ECANCEL, why);
    }
}

static void on_idle_timer(uv_timer_t *t)
{
    httpc_t *h = t->data;
    const uint64_t now = now_ns(), limit = (uint64_t)h->idle_ms * 1000000u;
    httpc_req_t *r, *next;
    char msg[600];

    for (r = h->active; r; r = next) {
        next = r->next;
        if (now - r->progress_ns < limit)
            continue;
        snprintf(msg, sizeof(msg), "%s: nothing new for %llu ms, over the idle deadline of %ld ms",
                 r->url, (unsigned long long)((now - r->progress_ns) / 1000000u), h->idle_ms);
        finish(h, r, HTTPC_EIDLE, msg);
    }
    start_waiting(h); /* the failed ones freed connections */
}

uint64_t httpc_parks(httpc_t *h)
{
    return (uint64_t)atomic_load_explicit(&h->parks, memory_order_relaxed);
}

/* ---- libcurl <-> libuv ---- */

static void on_poll(uv_poll_t *p, int status, int events)
{
    sockctx_t *s = p->data;
    int flags = 0;

    /* libuv reports a socket error (POLLERR: the peer reset a kept-alive connection) as a status
     * with no events, and stops watching. Handing libcurl CURL_CSELECT_ERR fails the transfer at
     * once ("select/poll returned error"); letting it read and write instead, it meets the error
     * itself and, on a reused connection that had sent nothing back, sends the request again on a
     * new one, as it does under its own poll. */
    if (status < 0)
        flags = CURL_CSELECT_IN | CURL_CSELECT_OUT;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    sock_action(s->h, s, flags);
    check_done(s->h);
}

static int on_socket(CURL *e, curl_socket_t fd, int action, void *ud, void *sp)
{
    httpc_t *h = ud;
    sockctx_t *s = sp;
    int ev = 0;

    (void)e;
    if (action == CURL_POLL_REMOVE) {
        if (s) {
            s->closing = 1;
            unpark(h, s);
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, on_sock_close);
            curl_multi_assign(h->multi, fd, NULL);
        }
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            return -1;
        s->fd = fd;
        s->h = h;
        if (uv_poll_init_socket(&h->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        curl_multi_assign(h->multi, fd, s);
    }
    if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
        ev |= UV_READABLE;
    if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
        ev |= UV_WRITABLE;
    s->events = ev;
    if (!s->parked) /* a parked socket is read on the tick, with what it now asks for */
        uv_poll_start(&s->poll, ev, on_poll);
    else
        (void)httpc_rtick_mod(&h->tick, s->fd, s, ev & UV_WRITABLE);
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    httpc_t *h = t->data;
    int running;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(h);
}

static int on_timer_set(CURLM *m, long timeout_ms, void *ud)
{
    httpc_t *h = ud;
    (void)m;
    if (timeout_ms < 0)
        uv_timer_stop(&h->timer);
    else
        uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void check_done(httpc_t *h)
{
    CURLMsg *m;
    int left;

    while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
        httpc_req_t *r = NULL;
        CURLcode res = m->data.result;
        char msg[ERRBODY_MAX + 128];
        easy_t *x;
        int status = 0;

        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        x = r->easy;
        msg[0] = '\0';
        if (res == CURLE_OK) {
            if (r->http_code == 0)
                curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &r->http_code);
            if (r->http_code < 200 || r->http_code > 299) {
                status = HTTPC_ESTATUS;
                snprintf(msg, sizeof(msg), "HTTP %ld from %s: %s", r->http_code, r->url,
                         r->errbody ? r->errbody : "(no body)");
            }
        } else if (res == CURLE_WRITE_ERROR && r->aborted) {
            status = HTTPC_EABORT;
            snprintf(msg, sizeof(msg), "aborted by the stream's reader");
        } else {
            status = HTTPC_ETRANSFER;
            snprintf(msg, sizeof(msg), "%s: %s", r->url,
                     x->errbuf[0] ? x->errbuf : curl_easy_strerror(res));
        }
        finish(h, r, status, msg);
    }
    start_waiting(h); /* completions freed connections */
}

/* ---- submission and shutdown ---- */

static void fail_all(httpc_t *h, httpc_req_t *q)
{
    while (q) {
        httpc_req_t *n = q->next;
        finish(h, q, HTTPC_ESTOP, "the HTTP pool is shutting down");
        q = n;
    }
    while (h->active)
        finish(h, h->active, HTTPC_ESTOP, "the HTTP pool is shutting down");
}

static void close_any(uv_handle_t *hd, void *arg)
{
    httpc_t *h = arg;
    if (uv_is_closing(hd))
        return;
    if (hd == (uv_handle_t *)&h->tick.poll)
        httpc_rtick_close(&h->tick, NULL);
    else if (cmn_wake_owns(&h->wake, hd))
        cmn_wake_close(&h->wake, NULL);
    else
        uv_close(hd, hd->type == UV_POLL ? on_sock_close : NULL);
}

static void on_wake(cmn_wake_t *w)
{
    httpc_t *h = w->data;
    httpc_req_t *q;
    int stopping, cancel;

    uv_mutex_lock(&h->lock);
    q = h->queue_head;
    h->queue_head = h->queue_tail = NULL;
    stopping = h->stopping;
    cancel = h->cancel_pending;
    h->cancel_pending = 0;
    uv_mutex_unlock(&h->lock);
    if (stopping) {
        size_t i;
        fail_all(h, h->wait_head);
        h->wait_head = h->wait_tail = NULL;
        fail_all(h, q);
        curl_multi_cleanup(h->multi);
        h->multi = NULL;
        for (i = 0; i < h->n_free; i++) {
            curl_easy_cleanup(h->free_easy[i]->e);
            free(h->free_easy[i]);
        }
        h->n_free = 0;
        uv_walk(&h->loop, close_any, h);
        return;
    }
    if (q) {
        httpc_req_t *last = q;
        while (last->next)
            last = last->next;
        CMN_QUEUE_APPEND_CHAIN(h->wait_head, h->wait_tail, q, last, next);
    }
    if (cancel)
        cancel_picked(h);
    start_waiting(h);
}

static void loop_main(void *arg)
{
    httpc_t *h = arg;
    pthread_setname_np(pthread_self(), "oai-http"); /* for per-thread CPU figures (bench/) */
    uv_run(&h->loop, UV_RUN_DEFAULT);
}

int httpc_create(const httpc_cfg_t *cfg, httpc_t **out, char *err, size_t errlen)
{
    httpc_t *h;
    int rc;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "curl_global_init failed");
        return -EIO;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        goto fail_global;
    }
    h->connect_timeout_ms = cfg->connect_timeout_ms;
    if (cfg->ca_file && !(h->ca_file = strdup(cfg->ca_file))) {
        snprintf(err, errlen, "out of memory");
        free(h);
        goto fail_global;
    }
    h->max_active = cfg->max_conns ? cfg->max_conns : 1;
    h->coalesce_us = cfg->coalesce_us;
    h->idle_ms = cfg->idle_ms > 0 ? cfg->idle_ms : 0;
    h->tick.fd = -1;
    if ((rc = uv_loop_init(&h->loop)) != 0) {
        snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
        goto fail_alloc;
    }
    if (httpc_rtick_init(&h->tick, &h->loop, h->coalesce_us, on_tick, h, err, errlen) < 0)
        goto fail_loop;
    h->multi = curl_multi_init();
    if (!h->multi) {
        snprintf(err, errlen, "curl_multi_init failed");
        goto fail_loop;
    }
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    /* The pool itself runs at most max_active transfers (start_waiting), so libcurl never
     * queues one: no connection limits there, only the idle connections it keeps. */
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->max_active);
    uv_mutex_init(&h->lock);
    uv_timer_init(&h->loop, &h->timer);
    h->timer.data = h;
    uv_timer_init(&h->loop, &h->idle_timer);
    h->idle_timer.data = h;
    if (h->idle_ms) {
        uint64_t every = (uint64_t)h->idle_ms / 4;
        every = every < 10 ? 10 : every > 1000 ? 1000 : every;
        uv_timer_start(&h->idle_timer, on_idle_timer, every, every);
    }
    if ((rc = cmn_wake_init(&h->loop, &h->wake, on_wake)) < 0) {
        snprintf(err, errlen, "cannot make the HTTP thread's wake-up: %s", uv_strerror(rc));
        goto fail_timers;
    }
    h->wake.data = h;
    if ((rc = uv_thread_create(&h->thread, loop_main, h)) != 0) {
        snprintf(err, errlen, "cannot start the HTTP thread: %s", uv_strerror(rc));
        goto fail_handles;
    }
    *out = h;
    return 0;

fail_handles:
    cmn_wake_close(&h->wake, NULL);
fail_timers:
    uv_close((uv_handle_t *)&h->timer, NULL);
    uv_close((uv_handle_t *)&h->idle_timer, NULL);
    httpc_rtick_close(&h->tick, NULL);
    uv_run(&h->loop, UV_RUN_DEFAULT);
    uv_mutex_destroy(&h->lock);
    curl_multi_cleanup(h->multi);
fail_loop:
    if (h->tick.fd >= 0) {
        httpc_rtick_close(&h->tick, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(&h->loop);
fail_alloc:
    free(h->ca_file);
    free(h);
fail_global:
    curl_global_cleanup();
    return -EIO;
}

int httpc_submit(httpc_t *h, httpc_req_t *r)
{
    r->submit_ns = now_ns();
    r->next = r->prev = NULL;
    r->easy = NULL;
    r->hdrs = NULL;
    r->errbody = NULL;
    r->errbody_len = 0;
    r->cancel = 0;
    uv_mutex_lock(&h->lock);
    if (h->stopping) {
        uv_mutex_unlock(&h->lock);
        return HTTPC_ESTOP;
    }
    CMN_QUEUE_APPEND(h->queue_head, h->queue_tail, r, next);
    uv_mutex_unlock(&h->lock);
    cmn_wake_send(&h->wake);
    return 0;
}

void httpc_cancel(httpc_t *h, httpc_req_t *r)
{
    uv_mutex_lock(&h->lock);
    r->cancel = 1;
    h->cancel_pending = 1;
    uv_mutex_unlock(&h->lock);
    cmn_wake_send(&h->wake);
}

void httpc_destroy(httpc_t *h)
{
    if (!h)
        return;
    cmn_uv_loop_stop(&h->lock, &h->stopping, &h->wake, &h->thread);
    uv_loop_close(&h->loop);
    uv_mutex_destroy(&h->lock);
    free(h->free_easy); /* the tick closed with the loop's handles (close_any) */
    free(h->ca_file);
    free(h);
    curl_global_cleanup();
}
