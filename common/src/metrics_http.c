/* GET /metrics over libmicrohttpd: its own polling thread, bounded connections and timeouts.
 *
 * libmicrohttpd alone cannot keep a scrape served while others hold connections: at its
 * connection limit it refuses the newcomer (the scrape), and its timeout counts from the last
 * byte, so a client trickling a request head lives on. This file tracks every connection (the
 * notify callbacks, on the server's one thread) and closes, by shutdown(2) of its socket so that
 * libmicrohttpd ends and frees it as if the peer had hung up: the oldest connection not serving a
 * request when a new one needs room (metrics_http.h's caps), and, from a watchdog thread, any
 * whose request head or keep-alive wait outlived its deadline. */
#include "cmn/metrics_http.h"
#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */

enum {
    /* libmicrohttpd's own limit sits this far above CMN_METRICS_HTTP_MAX_CONN: a connection
     * closed to make room is freed on the server's next turn, and meanwhile the listener must
     * still accept, or libmicrohttpd would close the newcomer itself (a scrape, maybe). A flood
     * of 1000 connects took at most 54 slots in the tests. */
    HTTP_LIMIT_SLACK = 64,
    HTTP_SLOTS = CMN_METRICS_HTTP_MAX_CONN + HTTP_LIMIT_SLACK,
    /* How often the watchdog looks for deadlines passed: a stalled head lives at most this much
     * longer than CMN_METRICS_HTTP_HEADER_TIMEOUT_S. */
    HTTP_WATCH_MS = 200,
    /* At most one warning per this many seconds about closed connections; the rest are counted
     * into the next one, so an attack does not flood the log. */
    HTTP_LOG_EVERY_S = 10,
    /* What slot_worth looks at of a connection's unread bytes: a scraper's whole request head
     * (Prometheus: ~300 bytes) fits. */
    HTTP_PEEK_BYTES = 2048,
    /* A connection this young with nothing sent yet is not taken for a stalled one: a scraper's
     * request follows its connect at once, but its thread may be descheduled in between. */
    HTTP_FRESH_MS = 100,
};

typedef enum {
    SLOT_FREE,
    SLOT_HEAD, /* connected, request head not complete */
    SLOT_BUSY, /* a request is being answered */
    SLOT_IDLE, /* keep-alive, between requests */
} slot_state_t;

typedef struct {
    slot_state_t state;
    bool closing;   /* shut down by us, libmicrohttpd has yet to free it */
    int fd;         /* valid while the slot is not free: closed only after NOTIFY_CLOSED */
    uint64_t since; /* connect (HEAD), last reply (IDLE) or request head (BUSY), ns */
    struct sockaddr_storage peer;
} slot_t;

struct cmn_metrics_http {
    struct MHD_Daemon *d;
    cmn_metrics_t *m;
    int port;
    char addr[64]; /* the bound address, "127.0.0.1:9400" */

    pthread_mutex_t mu; /* guards what follows: the server's thread and the watchdog */
    pthread_cond_t cv;
    bool stopping;
    pthread_t watchdog;
    slot_t slots[HTTP_SLOTS];
    uint64_t last_log;     /* ns of the last warning about closed connections, 0: none yet */
    unsigned closed_quiet; /* closed since then without a warning */
    char pending[320];     /* the latest unlogged reason, for the next warning */
    uint64_t mhd_last_log; /* the same for libmicrohttpd's own messages */
    unsigned mhd_quiet;
};

/* libmicrohttpd's messages, rate-limited like ours: under a flood it has one per connection. */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    cmn_metrics_http_t *h = cls;
    uint64_t now = cmn_now_ns();
    char line[256];
    size_t n;

    pthread_mutex_lock(&h->mu);
    if (h->mhd_last_log && now - h->mhd_last_log < (uint64_t)HTTP_LOG_EVERY_S * 1000000000u) {
        h->mhd_quiet++;
        pthread_mutex_unlock(&h->mu);
        return;
    }
    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    if (h->mhd_quiet)
        cmn_log_warn("metrics http %s: %s (and %u more of libmicrohttpd's messages since the last "
                     "one shown)",
                     h->addr, line, h->mhd_quiet);
    else
        cmn_log_warn("metrics http %s: %s", h->addr, line);
    h->mhd_quiet = 0;
    h->mhd_last_log = now;
    pthread_mutex_unlock(&h->mu);
}

/* ---- connection tracking (under h->mu) ------------------------------------------------------ */

static double secs_since(uint64_t then, uint64_t now)
{
    return (double)(now - then) / 1e9;
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return false;
}

static void log_closed(cmn_metrics_http_t *h, uint64_t now)
{
    if (h->closed_quiet == 1)
        cmn_log_warn("metrics http %s: closed %s", h->addr, h->pending);
    else
        cmn_log_warn("metrics http %s: closed %u connections since the last such message, the "
                     "latest %s",
                     h->addr, h->closed_quiet, h->pending);
    h->closed_quiet = 0;
    h->last_log = now;
}

/* Shuts |s|'s socket down: libmicrohttpd reads end of stream on its next turn, closes and frees
 * the connection (NOTIFY_CLOSED frees the slot). The reason goes to the log, rate-limited. */
__attribute__((format(printf, 3, 4))) static void slot_close(cmn_metrics_http_t *h, slot_t *s,
                                                             const char *fmt, ...)
{
    char peer[64], why[192];
    uint64_t now = cmn_now_ns();
    va_list ap;

    s->closing = true;
    shutdown(s->fd, SHUT_RDWR);
    cmn_addr_format((struct sockaddr *)&s->peer, peer, sizeof(peer));
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    snprintf(h->pending, sizeof(h->pending), "the connection from %s: %s", peer, why);
    h->closed_quiet++;
    if (!h->last_log || now - h->last_log >= (uint64_t)HTTP_LOG_EVERY_S * 1000000000u)
        log_closed(h, now);
}

/* What |s| was doing, for the log: "it had sent no complete request head in 0.3 s". */
static const char *slot_doing(const slot_t *s, uint64_t now, char *buf, size_t len)
{
    static const char *const what[] = {
        [SLOT_HEAD] = "it had sent no complete request head in",
        [SLOT_BUSY] = "its reply had been in progress for",
        [SLOT_IDLE] = "it had sent no new request since its last reply, for",
    };
    snprintf(buf, len, "%s %.1f s", what[s->state], secs_since(s->since, now));
    return buf;
}

/* How much |s| is worth keeping, from what waits unread in its socket (MSG_PEEK takes nothing)
 * and what it has sent at all (TCP_INFO): 2 a request being answered (BUSY) or a whole request
 * head not read yet (a scrape accepted a moment ago); 1 a connection younger than HTTP_FRESH_MS
 * that has sent nothing yet (a scraper between its connect and its write); 0 the rest: part of a
 * head (a client writes its head at once, so it stalled or trickles), nothing sent for
 * HTTP_FRESH_MS, an idle keep-alive. */
static int slot_worth(const slot_t *s, uint64_t now)
{
    char buf[HTTP_PEEK_BYTES];
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    ssize_t n;

    if (s->state == SLOT_BUSY)
        return 2;
    n = recv(s->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        for (ssize_t i = 0; i + 3 < n; i++)
            if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
                return 2;
        return 0;
    }
    if (s->state != SLOT_HEAD || now - s->since >= (uint64_t)HTTP_FRESH_MS * 1000000u)
        return 0;
    /* Nothing unread: has libmicrohttpd read part of a head already (a stalled one)? Kernels
     * before 4.1 do not say; the connection is then taken for one that has sent nothing. */
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
        tl >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) &&
        ti.tcpi_bytes_received > 0)
        return 0;
    return 1;
}

/* The connection to close to make room, among the open ones other than |except| (and from |ip|'s
 * address when not NULL): the least worth keeping (slot_worth), then the oldest. So a flood that
 * keeps reconnecting from a scraper's own address closes its own connections, not the scrape
 * that waits to be read. */
static slot_t *pick_victim(cmn_metrics_http_t *h, const slot_t *except,
                           const struct sockaddr_storage *ip)
{
    slot_t *best = NULL;
    int best_worth = 0;
    uint64_t now = cmn_now_ns();

    for (size_t i = 0; i < HTTP_SLOTS; i++) {
        slot_t *s = &h->slots[i];
        int worth;

        if (s->state == SLOT_FREE || s->closing || s == except || (ip && !same_ip(&s->peer, ip)))
            continue;
        worth = slot_worth(s, now);
        if (!best || worth < best_worth || (worth == best_worth && s->since < best->since)) {
            best = s;
            best_worth = worth;
        }
    }
    return best;
}

/* |s| has just connected: closes others while its address or the whole endpoint holds more than
 * the caps allow, so that a scrape always gets in. */
static void make_room(cmn_metrics_http_t *h, const slot_t *s)
{
    uint64_t now = cmn_now_ns();
    unsigned total = 0, same = 0;
    slot_t *v;
    char doing[96];

    for (size_t i = 0; i < HTTP_SLOTS; i++) {
        const slot_t *o = &h->slots[i];
        if (o->state == SLOT_FREE || o->closing)
            continue;
        total++;
        same += same_ip(&o->peer, &s->peer);
    }
    if (same > CMN_METRICS_HTTP_MAX_CONN_PER_IP && (v = pick_victim(h, s, &s->peer))) {
        slot_close(h, v,
                   "%s, and a new connection from its address needed room (limit %d per address)",
                   slot_doing(v, now, doing, sizeof(doing)), CMN_METRICS_HTTP_MAX_CONN_PER_IP);
        total--;
    }
    while (total > CMN_METRICS_HTTP_MAX_CONN && (v = pick_victim(h, s, NULL))) {
        slot_close(h, v, "%s, and a new connection needed room (limit %d open)",
                   slot_doing(v, now, doing, sizeof(doing)), CMN_METRICS_HTTP_MAX_CONN);
        total--;
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    cmn_metrics_http_t *h = cls;
    const union MHD_ConnectionInfo *fdi, *ai;
    slot_t *s = NULL;

    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        /* Before libmicrohttpd closes the socket: the watchdog never shuts down a reused fd. */
        pthread_mutex_lock(&h->mu);
        if (*socket_context)
            ((slot_t *)*socket_context)->state = SLOT_FREE;
        pthread_mutex_unlock(&h->mu);
        *socket_context = NULL;
        return;
    }
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    fdi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!fdi)
        return; /* not in 0.9.75's code: every connection has a socket */
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < HTTP_SLOTS && !s; i++)
        if (h->slots[i].state == SLOT_FREE)
            s = &h->slots[i];
    if (!s) {
        /* libmicrohttpd's limit is HTTP_SLOTS, so this does not happen; if it did, the
         * connection is not tracked, so it is not kept. */
        shutdown(fdi->connect_fd, SHUT_RDWR);
        pthread_mutex_unlock(&h->mu);
        return;
    }
    memset(s, 0, sizeof(*s));
    s->state = SLOT_HEAD;
    s->fd = fdi->connect_fd;
    s->since = cmn_now_ns();
    if (ai && ai->client_addr)
        memcpy(&s->peer, ai->client_addr,
               ai->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                      : sizeof(struct sockaddr_in));
    *socket_context = s;
    make_room(h, s);
    pthread_mutex_unlock(&h->mu);
}

static slot_t *conn_slot(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* A request has been answered (or abandoned): the connection waits for the next one. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cmn_metrics_http_t *h = cls;
    slot_t *s = conn_slot(c);

    if (!s)
        return;
    pthread_mutex_lock(&h->mu);
    if (s->state == SLOT_BUSY) {
        s->state = SLOT_IDLE;
        s->since = cmn_now_ns();
    }
    pthread_mutex_unlock(&h->mu);
}

/* Closes connections whose request head or keep-alive wait outlived its deadline (however
 * slowly they trickle bytes, which resets libmicrohttpd's own timeout), every HTTP_WATCH_MS. */
static void *watchdog_main(void *arg)
{
    cmn_metrics_http_t *h = arg;
    const uint64_t head_ns = (uint64_t)CMN_METRICS_HTTP_HEADER_TIMEOUT_S * 1000000000u;
    const uint64_t idle_ns = (uint64_t)CMN_METRICS_HTTP_IDLE_TIMEOUT_S * 1000000000u;

    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        uint64_t now = cmn_now_ns();
        struct timespec ts;

        for (size_t i = 0; i < HTTP_SLOTS; i++) {
            slot_t *s = &h->slots[i];

            if (s->closing)
                continue;
            if (s->state == SLOT_HEAD && now - s->since > head_ns)
                slot_close(h, s, "no complete request head %.1f s after connecting (limit %d s)",
                           secs_since(s->since, now), CMN_METRICS_HTTP_HEADER_TIMEOUT_S);
            else if (s->state == SLOT_IDLE && now - s->since > idle_ns)
                slot_close(h, s, "no new request %.1f s after its last reply (limit %d s)",
                           secs_since(s->since, now), CMN_METRICS_HTTP_IDLE_TIMEOUT_S);
        }
        if (h->closed_quiet && now - h->last_log >= (uint64_t)HTTP_LOG_EVERY_S * 1000000000u)
            log_closed(h, now);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += HTTP_WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- requests ------------------------------------------------------------------------------ */

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                        MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    cmn_metrics_http_t *h = cls;
    struct MHD_Response *r;
    enum MHD_Result ret;
    char *body;
    size_t len;
    slot_t *s = conn_slot(c);

    if (s) {
        pthread_mutex_lock(&h->mu);
        if (s->state != SLOT_BUSY && s->state != SLOT_FREE) {
            s->state = SLOT_BUSY;
            s->since = cmn_now_ns();
        }
        pthread_mutex_unlock(&h->mu);
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served\n");
    /* A GET carries no body; a client that sends one anyway gets it ignored, never buffered. */
    *upload_data_size = 0;
    if (strcmp(url, "/metrics") != 0)
        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    if (cmn_metrics_render(h->m, &body, &len) < 0)
        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CMN_METRICS_CONTENT_TYPE);
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int sync_init(cmn_metrics_http_t *h)
{
    pthread_condattr_t ca;
    int rc;

    rc = pthread_mutex_init(&h->mu, NULL);
    if (rc)
        return -rc;
    rc = pthread_condattr_init(&ca);
    if (!rc) {
        rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        if (!rc)
            rc = pthread_cond_init(&h->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (rc) {
        pthread_mutex_destroy(&h->mu);
        return -rc;
    }
    return 0;
}

static void sync_destroy(cmn_metrics_http_t *h)
{
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
}

int cmn_metrics_http_start(cmn_metrics_t *m, const char *addr, cmn_metrics_http_t **out,
                           cmn_errbuf_t *eb)
{
    struct sockaddr_storage ss;
    cmn_metrics_http_t *h;
    const union MHD_DaemonInfo *info;
    /* One internal thread (epoll on Linux): every callback below runs on it. */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    int rc;

    rc = cmn_addr_parse(addr, &ss, eb);
    if (rc < 0)
        return rc;
    h = calloc(1, sizeof(*h));
    if (!h)
        return cmn_errf(eb, -ENOMEM, "metrics listener %s: out of memory", addr);
    h->m = m;
    snprintf(h->addr, sizeof(h->addr), "%s", addr);
    rc = sync_init(h);
    if (rc < 0) {
        free(h);
        return cmn_errf(eb, rc, "metrics listener %s: cannot make a mutex: %s", addr,
                        strerror(-rc));
    }
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    errno = 0;
    /* The logger first: options before it would log through MHD's own stderr logger. Its own
     * timeout is the idle one (it counts from the last byte either way); the request head's
     * deadline and the caps are this file's. */
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)CMN_METRICS_HTTP_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CMN_METRICS_HTTP_CONN_MEMORY, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    if (!h->d) {
        int e = errno ? errno : EADDRNOTAVAIL;
        sync_destroy(h);
        free(h);
        return cmn_errf(eb, -e, "metrics listener %s: cannot listen: %s", addr, strerror(e));
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : cmn_addr_port((struct sockaddr *)&ss);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)h->port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)h->port);
    pthread_mutex_lock(&h->mu); /* the log lines of the server's thread read it */
    cmn_addr_format((struct sockaddr *)&ss, h->addr, sizeof(h->addr));
    pthread_mutex_unlock(&h->mu);
    rc = pthread_create(&h->watchdog, NULL, watchdog_main, h);
    if (rc) {
        MHD_stop_daemon(h->d);
        sync_destroy(h);
        free(h);
        return cmn_errf(eb, -rc, "metrics listener %s: cannot start its watchdog thread: %s", addr,
                        strerror(rc));
    }
    *out = h;
    return 0;
}

int cmn_metrics_http_port(const cmn_metrics_http_t *h)
{
    return h->port;
}

const char *cmn_metrics_http_addr(const cmn_metrics_http_t *h)
{
    return h->addr;
}

void cmn_metrics_http_stop(cmn_metrics_http_t *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->watchdog, NULL);
    MHD_stop_daemon(h->d);
    sync_destroy(h);
    free(h);
}
