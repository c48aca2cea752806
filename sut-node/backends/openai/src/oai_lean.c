/* The openai backend's lean transport: the h1 pool on a loop thread (oai_lean.h). */
#include "oai_lean.h" /* pthread_setname_np below: _GNU_SOURCE comes from the build */

#include "cmn/list.h"
#include "cmn/thread_stop.h"
#include "cmn/wake.h"
#include "httpc/httpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

struct oai_lean {
    uv_loop_t own_loop; /* run by |thread|, unless the loop is borrowed */
    uv_loop_t *loop;    /* &own_loop, or the caller's (oai_lean_open's |loop|) */
    int borrowed;
    cmn_wake_t wake;
    uv_timer_t tick;
    uv_thread_t thread;
    httpc_h1_pool_t *pool;
    char url[512];
    long timeout_ms, idle_ms;
    uint32_t max_conns;
    oai_lreq_t active; /* the loop's list head (circular) */
    /* under mu */
    uv_mutex_t mu;
    oai_lreq_t *queue, *queue_tail;
    int cancels, stopping;
};

static void link_active(oai_lean_t *l, oai_lreq_t *r)
{
    r->prev = l->active.prev;
    r->next = &l->active;
    l->active.prev->next = r;
    l->active.prev = r;
}

static void unlink_active(oai_lreq_t *r)
{
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->next = r->prev = r;
}

/* h1's end of a request: off the list, then the caller's. */
static void on_h1_done(httpc_h1_req_t *hr, int status, const char *msg)
{
    oai_lreq_t *r = (oai_lreq_t *)hr;

    unlink_active(r);
    r->on_done(r, status, msg);
}

/* Fails a running request here (the pool forgets it first). */
static void fail(oai_lean_t *l, oai_lreq_t *r, int status, const char *msg)
{
    httpc_h1_cancel(l->pool, &r->h1);
    unlink_active(r);
    r->on_done(r, status, msg);
}

/* A request onto the pool (on the loop thread); it fails at once when closing. */
static void start(oai_lean_t *l, oai_lreq_t *r, int stopping)
{
    r->start_ms = r->progress_ms = uv_now(l->loop);
    link_active(l, r);
    if (stopping || httpc_h1_send(l->pool, &r->h1) < 0) {
        char msg[600];
        unlink_active(r);
        snprintf(msg, sizeof(msg), "%s: the backend is closing", l->url);
        r->on_done(r, HTTPC_ESTOP, msg);
    }
}

/* The pool's end: the running requests end with HTTPC_ESTOP in here; the handles close. */
static void stop_now(oai_lean_t *l)
{
    httpc_h1_pool_close(l->pool);
    cmn_wake_close(&l->wake, NULL);
    uv_close((uv_handle_t *)&l->tick, NULL);
}

static void on_wake(cmn_wake_t *w)
{
    oai_lean_t *l = w->data;
    oai_lreq_t *q, *r, *next, *marked = NULL;
    int stopping, cancels;

    uv_mutex_lock(&l->mu);
    q = l->queue;
    l->queue = l->queue_tail = NULL;
    stopping = l->stopping;
    cancels = l->cancels;
    l->cancels = 0;
    uv_mutex_unlock(&l->mu);
    for (r = q; r; r = next) {
        next = r->next;
        start(l, r, stopping);
    }
    if (cancels) {
        /* The marked ones, taken off the list under the lock (a mark comes with a wake-up, so
         * one that lands after this walk is seen on the next). */
        uv_mutex_lock(&l->mu);
        for (r = l->active.next; r != &l->active; r = next) {
            next = r->next;
            if (r->cancel) {
                unlink_active(r);
                r->next = marked;
                marked = r;
            }
        }
        uv_mutex_unlock(&l->mu);
        while (marked) {
            char msg[600];
            r = marked;
            marked = r->next;
            r->next = r->prev = r;
            httpc_h1_cancel(l->pool, &r->h1);
            snprintf(msg, sizeof(msg), "%s: cancelled", l->url);
            r->on_done(r, HTTPC_ECANCEL, msg);
        }
    }
    if (stopping && !l->borrowed) /* a borrowed loop's end is oai_lean_detach's */
        stop_now(l);
}

/* The deadlines: timeout_ms from submission (the wait for a connection included), idle_ms
 * from when a connection took the request, then from its last token. The ones still queued go
 * first: failing a running one frees its connection for the next in the queue, which would
 * otherwise leave with its deadline already spent. */
static void on_tick(uv_timer_t *t)
{
    oai_lean_t *l = t->data;
    uint64_t now = uv_now(l->loop);
    oai_lreq_t *r, *next;
    char msg[700];

    for (r = l->active.next; r != &l->active; r = next) {
        next = r->next;
        if (!r->h1.sent_ms && now - r->start_ms >= (uint64_t)l->timeout_ms) {
            snprintf(msg, sizeof(msg),
                     "%s: not sent: waited %llu ms for a free connection to the engine (%u "
                     "connections, all busy), over timeout_ms=%ld",
                     l->url, (unsigned long long)(now - r->start_ms), l->max_conns, l->timeout_ms);
            fail(l, r, HTTPC_ETRANSFER, msg);
        }
    }
    for (r = l->active.next; r != &l->active; r = next) {
        uint64_t since = r->progress_ms > r->h1.sent_ms ? r->progress_ms : r->h1.sent_ms;
        next = r->next;
        if (!r->h1.sent_ms)
            continue;
        if (now - r->start_ms >= (uint64_t)l->timeout_ms) {
            snprintf(msg, sizeof(msg), "%s: no whole answer within %ld ms (timeout_ms)", l->url,
                     l->timeout_ms);
            fail(l, r, HTTPC_ETRANSFER, msg);
        } else if (l->idle_ms > 0 && now - since >= (uint64_t)l->idle_ms) {
            snprintf(msg, sizeof(msg),
                     "%s: nothing new for %llu ms, over the idle deadline of %ld ms", l->url,
                     (unsigned long long)(now - since), l->idle_ms);
            fail(l, r, HTTPC_EIDLE, msg);
        }
    }
}

static void run(void *arg)
{
    oai_lean_t *l = arg;

    pthread_setname_np(pthread_self(), "oai-http"); /* as libcurl's (per-thread CPU, bench/) */
    uv_run(l->loop, UV_RUN_DEFAULT);
}

/* HOST, PORT and PATH of http[s]://HOST[:PORT]/PATH ([v6] in brackets). */
static int split_url(const char *url, char *host, size_t hostlen, uint16_t *port, const char **path,
                     char *err, size_t errlen)
{
    int tls = strncmp(url, "https://", 8) == 0;
    const char *h = url + (tls ? 8 : 7), *slash = h + strcspn(h, "/"), *he, *pc = NULL;
    unsigned long pn = tls ? 443 : 80;

    if (*h == '[') {
        he = memchr(h, ']', (size_t)(slash - h));
        if (!he)
            goto bad;
        h++;
        if (he + 1 < slash) {
            if (he[1] != ':')
                goto bad;
            pc = he + 2;
        }
    } else {
        he = memchr(h, ':', (size_t)(slash - h));
        if (he)
            pc = he + 1;
        else
            he = slash;
    }
    if (pc) {
        char *stop;
        errno = 0;
        pn = strtoul(pc, &stop, 10);
        if (errno || stop != slash || pn == 0 || pn > 65535)
            goto bad;
    }
    if (he == h || (size_t)(he - h) >= hostlen || !*slash)
        goto bad;
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    *port = (uint16_t)pn;
    *path = slash;
    return 0;
bad:
    snprintf(err, errlen, "option url: %s is not http[s]://HOST[:PORT] (port 1..65535)", url);
    return -EINVAL;
}

static uint32_t ms32(long ms)
{
    return ms <= 0 ? 0 : ms > 86400000 ? 86400000u : (uint32_t)ms;
}

int oai_lean_open(const oai_lean_cfg_t *cfg, uv_loop_t *loop, oai_lean_t **out, char *err,
                  size_t errlen)
{
    oai_lean_t *l = calloc(1, sizeof(*l));
    httpc_h1_cfg_t c;
    char host[256];
    long limit, tick;
    int rc;

    if (!l)
        return -ENOMEM;
    memset(&c, 0, sizeof(c));
    snprintf(l->url, sizeof(l->url), "%s", cfg->url);
    if ((rc = split_url(cfg->url, host, sizeof(host), &c.port, &c.path, err, errlen)) < 0) {
        free(l);
        return rc;
    }
    l->timeout_ms = cfg->timeout_ms;
    l->idle_ms = cfg->idle_ms;
    l->max_conns = cfg->max_conns;
    l->active.next = l->active.prev = &l->active;
    c.host = host;
    c.tls = strncmp(cfg->url, "https://", 8) == 0;
    c.ca_file = cfg->ca_file;
    c.headers = cfg->headers;
    c.max_conns = cfg->max_conns;
    c.connect_ms = ms32(cfg->connect_ms);
    /* the pool's own byte deadlines stay behind the request's (ours, on the tick) */
    c.first_byte_ms = c.idle_ms = ms32(cfg->timeout_ms);
    c.coalesce_us = cfg->coalesce_us;
    l->borrowed = loop != NULL;
    l->loop = loop ? loop : &l->own_loop;
    if (!loop && (rc = uv_loop_init(&l->own_loop)) < 0) {
        snprintf(err, errlen, "the lean client's loop: %s", uv_strerror(rc));
        free(l);
        return rc;
    }
    if ((rc = uv_mutex_init(&l->mu)) < 0) {
        snprintf(err, errlen, "the lean client's mutex: %s", uv_strerror(rc));
        if (!loop)
            uv_loop_close(&l->own_loop);
        free(l);
        return rc;
    }
    rc = httpc_h1_pool_create(l->loop, &c, &l->pool, err, errlen);
    if (rc == 0 && (rc = cmn_wake_init(l->loop, &l->wake, on_wake)) < 0) {
        snprintf(err, errlen, "the lean client's wake-up: %s", uv_strerror(rc));
        httpc_h1_pool_close(l->pool);
    } else if (rc == 0) {
        uv_timer_init(l->loop, &l->tick);
        l->wake.data = l->tick.data = l;
        limit = l->idle_ms > 0 && l->idle_ms < l->timeout_ms ? l->idle_ms : l->timeout_ms;
        tick = limit / 4 < 10 ? 10 : limit / 4 > 1000 ? 1000 : limit / 4;
        uv_timer_start(&l->tick, on_tick, (uint64_t)tick, (uint64_t)tick);
        if (!loop && (rc = uv_thread_create(&l->thread, run, l)) < 0) {
            snprintf(err, errlen, "the lean client's thread: %s", uv_strerror(rc));
            stop_now(l);
        }
    }
    if (rc < 0) {
        /* What was opened closes on the loop; on a borrowed one that is only the pool, whose
         * handles hold nothing of |l|, so |l| goes now. Ours is run here to close them. */
        if (!loop) {
            uv_run(&l->own_loop, UV_RUN_DEFAULT);
            uv_loop_close(&l->own_loop);
        }
        uv_mutex_destroy(&l->mu);
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void oai_lean_detach(oai_lean_t *l)
{
    int stopping;

    if (!l || !l->borrowed)
        return;
    uv_mutex_lock(&l->mu);
    stopping = l->stopping;
    l->stopping = 1;
    uv_mutex_unlock(&l->mu);
    if (!stopping)
        stop_now(l);
}

void oai_lean_close(oai_lean_t *l)
{
    if (!l)
        return;
    if (l->borrowed) {
        oai_lean_detach(l); /* a no-op when the loop has already closed its handles */
    } else {
        cmn_uv_loop_stop(&l->mu, &l->stopping, &l->wake, &l->thread);
        uv_loop_close(&l->own_loop);
    }
    uv_mutex_destroy(&l->mu);
    free(l);
}

int oai_lean_submit(oai_lean_t *l, oai_lreq_t *r)
{
    int wake;

    r->l = l;
    r->cancel = 0;
    r->next = NULL;
    r->h1.on_done = on_h1_done;
    if (l->borrowed) {
        /* the caller is on the loop's thread: straight onto the pool, no hand-off */
        if (l->stopping)
            return HTTPC_ESTOP;
        start(l, r, 0);
        return 0;
    }
    uv_mutex_lock(&l->mu);
    if (l->stopping) {
        uv_mutex_unlock(&l->mu);
        return HTTPC_ESTOP;
    }
    wake = l->queue == NULL;
    CMN_QUEUE_APPEND(l->queue, l->queue_tail, r, next);
    uv_mutex_unlock(&l->mu);
    if (wake)
        cmn_wake_send(&l->wake);
    return 0;
}

void oai_lean_cancel(oai_lreq_t *r)
{
    oai_lean_t *l = r->l;
    int stopping;

    uv_mutex_lock(&l->mu);
    r->cancel = 1;
    l->cancels = 1;
    stopping = l->stopping; /* then every request ends anyway, and the wake-up may be closed */
    uv_mutex_unlock(&l->mu);
    if (!stopping)
        cmn_wake_send(&l->wake);
}

void oai_lean_progress(oai_lreq_t *r)
{
    r->progress_ms = uv_now(r->l->loop);
}

void oai_lean_coalesce(oai_lreq_t *r)
{
    httpc_h1_coalesce(r->l->pool, &r->h1);
}
