/* The /metrics endpoint under a connection flood (issue 34, item 10): 1000 connections (or what
 * the fd limit allows) that send half a request line and stall, send nothing, or trickle a
 * request head that never ends, refilled as the server closes them, from 63 addresses of
 * 127.0.1.0/24 (16 each: over the per-address cap) while scrapes come from 127.0.0.1 and from an
 * attacker's own address. Each scrape must get its 200 and the registry within SCRAPE_LIMIT_S;
 * once the attackers stop refilling, the server must have closed every one of their connections
 * within the request-head deadline plus a margin, before libmicrohttpd's own idle timeout could
 * have (so it is this endpoint's deadline that closed them, trickling ones included). */
#include "test_common.h"

#include "cmn/clock.h"
#include "cmn/metrics.h"
#include "cmn/metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

enum {
    FLOOD_WANT = 1000,   /* attacker connections held at once, fd limit permitting */
    FLOOD_PER_ADDR = 16, /* from each source address: twice CMN_METRICS_HTTP_MAX_CONN_PER_IP */
    FLOOD_SCRAPES = 12,
    SCRAPE_LIMIT_S = 5, /* per scrape: half Prometheus's default scrape_timeout (10 s) */
    CLOSE_MARGIN_S = 5, /* past the head deadline, for the last attacker to see its EOF */
    TRICKLE_EVERY_MS = 300,
};

typedef enum { ATK_HALF_LINE, ATK_SILENT, ATK_TRICKLE } atk_kind_t;

typedef struct {
    int n;   /* attacker slots */
    int *fd; /* -1: closed by the server (seen EOF) */
    atk_kind_t *kind;
    uint64_t *next_byte; /* ATK_TRICKLE: when to send the next byte */
    int port;
    atomic_bool refill;  /* reconnect each one the server closes */
    atomic_bool opened;  /* every slot has been connected once */
    atomic_int open_now; /* not yet seen closed */
    atomic_ulong closed; /* EOFs seen, refills included */
    atomic_ulong reconnects;
    int left_open;  /* after the drain: still open at the deadline */
    char fail[160]; /* a client-side failure (socket, bind, connect) */
} flood_t;

static int connect_from(const char *src, int port, bool nonblock)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in me = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    inet_pton(AF_INET, src, &me.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (nonblock)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static int atk_open(flood_t *f, int i)
{
    static const char half[] = "GET /metr";
    char src[32];
    int fd;

    snprintf(src, sizeof(src), "127.0.1.%d", 1 + (i / FLOOD_PER_ADDR) % 250);
    fd = connect_from(src, f->port, true);
    if (fd < 0) {
        snprintf(f->fail, sizeof(f->fail), "attacker %d from %s: connect: %s", i, src,
                 strerror(-fd));
        return fd;
    }
    if (f->kind[i] == ATK_HALF_LINE)
        (void)!write(fd, half, sizeof(half) - 1);
    else if (f->kind[i] == ATK_TRICKLE)
        (void)!write(fd, "GET /", 5);
    f->next_byte[i] = cmn_now_ns() + TRICKLE_EVERY_MS * 1000000ull;
    f->fd[i] = fd;
    atomic_fetch_add(&f->open_now, 1);
    return 0;
}

/* The attackers' loop: opens them all, then watches for the server's EOFs (reopening while
 * refill is on) and trickles; after refill goes off, waits for the last EOF until |drain_end|. */
static void *flood_main(void *arg)
{
    flood_t *f = arg;
    struct pollfd *pfd = calloc((size_t)f->n, sizeof(*pfd));
    uint64_t drain_end = 0;

    for (int i = 0; i < f->n; i++)
        if (atk_open(f, i) < 0)
            goto out;
    atomic_store(&f->opened, true);
    for (;;) {
        uint64_t now = cmn_now_ns();
        bool refill = atomic_load(&f->refill);

        if (!refill && !drain_end)
            drain_end = now + (uint64_t)(CMN_METRICS_HTTP_HEADER_TIMEOUT_S + CLOSE_MARGIN_S) *
                                  1000000000ull;
        if (drain_end && (atomic_load(&f->open_now) == 0 || now > drain_end))
            break;
        for (int i = 0; i < f->n; i++) {
            pfd[i].fd = f->fd[i];
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
            if (f->fd[i] >= 0 && f->kind[i] == ATK_TRICKLE && now >= f->next_byte[i]) {
                (void)!write(f->fd[i], "a", 1); /* a path that never ends */
                f->next_byte[i] = now + TRICKLE_EVERY_MS * 1000000ull;
            }
        }
        if (poll(pfd, (nfds_t)f->n, 50) < 0)
            continue;
        for (int i = 0; i < f->n; i++) {
            char buf[512];
            ssize_t r;

            if (f->fd[i] < 0 || !pfd[i].revents)
                continue;
            r = read(f->fd[i], buf, sizeof(buf));
            if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR)))
                continue; /* a reply (431 or so) before the close: wait for the EOF */
            close(f->fd[i]);
            f->fd[i] = -1;
            atomic_fetch_sub(&f->open_now, 1);
            atomic_fetch_add(&f->closed, 1);
            if (refill && atomic_load(&f->refill)) {
                if (atk_open(f, i) < 0)
                    goto out;
                atomic_fetch_add(&f->reconnects, 1);
            }
        }
    }
out:
    for (int i = 0; i < f->n; i++)
        if (f->fd[i] >= 0) {
            f->left_open++;
            close(f->fd[i]);
        }
    free(pfd);
    return NULL;
}

/* One scrape from |src| on a fresh connection: the whole reply into |buf|, or a negative errno
 * (of connect, write or read, a timeout included). */
static ssize_t scrape(const char *src, int port, char *buf, size_t cap)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: sut\r\nAccept: text/plain\r\n"
                              "Connection: close\r\n\r\n";
    struct timeval tv = {.tv_sec = SCRAPE_LIMIT_S};
    size_t got = 0;
    int fd = connect_from(src, port, false);

    if (fd < 0)
        return fd;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
        close(fd);
        return -EPIPE;
    }
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

/* The fd limit raised as far as allowed; the attackers that fit under it. */
static int flood_size(void)
{
    struct rlimit rl;
    rlim_t want = FLOOD_WANT + 256;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur >= want)
        return FLOOD_WANT;
    return rl.rlim_cur > 256 + 64 ? (int)rl.rlim_cur - 256 : 64;
}

START_TEST(http_scrapes_under_flood)
{
    static char buf[1 << 16];
    cmn_metrics_t *m;
    cmn_metric_t *c;
    cmn_series_t *s;
    cmn_metrics_http_t *h;
    cmn_errbuf_t eb;
    const cmn_metric_desc_t d = {
        .name = "x_flood_total", .help = "Test.", .type = CMN_METRIC_COUNTER};
    flood_t f = {.n = flood_size()};
    pthread_t th;
    uint64_t t0, worst = 0;
    int held_min = -1;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &c, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(c, NULL, &s), 0);
    cmn_series_add(s, 7);
    ck_assert_int_eq(cmn_metrics_http_start(m, "127.0.0.1:0", &h, &eb), 0);
    f.port = cmn_metrics_http_port(h);
    f.fd = malloc(sizeof(int) * (size_t)f.n);
    f.kind = malloc(sizeof(atk_kind_t) * (size_t)f.n);
    f.next_byte = calloc((size_t)f.n, sizeof(uint64_t));
    for (int i = 0; i < f.n; i++) {
        f.fd[i] = -1;
        f.kind[i] = i % 50 == 0 ? ATK_TRICKLE : i % 2 ? ATK_SILENT : ATK_HALF_LINE;
    }
    atomic_store(&f.refill, true);
    ck_assert_int_eq(pthread_create(&th, NULL, flood_main, &f), 0);
    t0 = cmn_now_ns();
    while (!atomic_load(&f.opened) && !f.fail[0] && cmn_now_ns() - t0 < 30000000000ull)
        usleep(10000);
    ck_assert_msg(atomic_load(&f.opened), "attackers not all connected: %s", f.fail);

    /* Scrapes while the flood holds (and refills) the endpoint's connections, half of them from
     * an attacker's own address. */
    for (int k = 0; k < FLOOD_SCRAPES; k++) {
        const char *src = k % 2 ? "127.0.1.1" : "127.0.0.1";
        int held = atomic_load(&f.open_now);
        uint64_t t = cmn_now_ns(), took;
        ssize_t n = scrape(src, f.port, buf, sizeof(buf));

        took = cmn_now_ns() - t;
        worst = took > worst ? took : worst;
        held_min = held_min < 0 || held < held_min ? held : held_min;
        ck_assert_msg(n > 0, "scrape %d from %s with %d attackers open: %s after %.2f s", k, src,
                      held, n == -EAGAIN ? "no reply" : strerror((int)-n), (double)took / 1e9);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "scrape %d: %.80s", k, buf);
        ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\n# HELP x_flood_total Test.\n"
                                          "# TYPE x_flood_total counter\nx_flood_total 7\n"));
        ck_assert_msg(took < (uint64_t)SCRAPE_LIMIT_S * 1000000000ull,
                      "scrape %d from %s took %.2f s (limit %d s)", k, src, (double)took / 1e9,
                      SCRAPE_LIMIT_S);
        usleep(100000);
    }
    ck_assert_msg(!f.fail[0], "%s", f.fail);

    /* Refill off: the server closes the rest by itself (stalled, silent and trickling alike). */
    atomic_store(&f.refill, false);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    fprintf(stderr,
            "metrics_http_flood: %d attackers, %d scrapes all 200 (slowest %.3f s) with %d+ "
            "attacker sockets open (client side); %lu closed by the server (%lu refilled), %d left "
            "open %d s "
            "after the refill stopped\n",
            f.n, FLOOD_SCRAPES, (double)worst / 1e9, held_min, atomic_load(&f.closed),
            atomic_load(&f.reconnects), f.left_open,
            CMN_METRICS_HTTP_HEADER_TIMEOUT_S + CLOSE_MARGIN_S);
    ck_assert_msg(!f.fail[0], "%s", f.fail);
    ck_assert_msg(f.left_open == 0,
                  "%d attacker connections still open %d s after the flood stopped (head "
                  "deadline %d s)",
                  f.left_open, CMN_METRICS_HTTP_HEADER_TIMEOUT_S + CLOSE_MARGIN_S,
                  CMN_METRICS_HTTP_HEADER_TIMEOUT_S);
    _Static_assert(CMN_METRICS_HTTP_HEADER_TIMEOUT_S + CLOSE_MARGIN_S <
                       CMN_METRICS_HTTP_IDLE_TIMEOUT_S,
                   "the drain must end before libmicrohttpd's idle timeout could close them");

    /* And served as before. */
    ck_assert_int_gt(scrape("127.0.0.1", f.port, buf, sizeof(buf)), 0);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "after the flood: %.80s", buf);
    cmn_metrics_http_stop(h);
    cmn_metrics_free(m);
    free(f.fd);
    free(f.kind);
    free(f.next_byte);
}
END_TEST

/* Reads from |fd| into |buf| until |want| appears or |limit_s| pass; the bytes read, or a negated
 * errno (-ETIMEDOUT, or what read said; 0 on EOF before |want|). */
static ssize_t read_until(int fd, char *buf, size_t cap, const char *want, int limit_s)
{
    uint64_t end = cmn_now_ns() + (uint64_t)limit_s * 1000000000ull;
    size_t got = 0;

    buf[0] = '\0';
    while (!strstr(buf, want)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = cmn_now_ns();
        ssize_t n;

        if (now >= end)
            return -ETIMEDOUT;
        if (poll(&p, 1, (int)((end - now) / 1000000u) + 1) <= 0)
            continue;
        n = read(fd, buf + got, cap - 1 - got);
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        got += (size_t)n;
        buf[got] = '\0';
    }
    return (ssize_t)got;
}

/* The request's size, one client each: a request line or headers past
 * CMN_METRICS_HTTP_CONN_MEMORY get 414 and 431; and a served request ends its connection. */
START_TEST(http_limits)
{
    static char buf[1 << 16], big[40000 + 64];
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: sut\r\n\r\n";
    cmn_metrics_t *m;
    cmn_metric_t *c;
    cmn_series_t *s;
    cmn_metrics_http_t *h;
    cmn_errbuf_t eb;
    const cmn_metric_desc_t d = {
        .name = "x_limits_total", .help = "Test.", .type = CMN_METRIC_COUNTER};
    ssize_t n;
    int fd, port;

    ck_assert_int_eq(cmn_metrics_new(&m), 0);
    ck_assert_int_eq(cmn_metrics_add(m, &d, &c, NULL), 0);
    ck_assert_int_eq(cmn_metric_series(c, NULL, &s), 0);
    cmn_series_add(s, 3);
    ck_assert_int_eq(cmn_metrics_http_start(m, "127.0.0.1:0", &h, &eb), 0);
    port = cmn_metrics_http_port(h);
    _Static_assert(sizeof(big) > CMN_METRICS_HTTP_CONN_MEMORY, "past the per-connection memory");

    /* A request line, then headers, larger than a connection's memory. */
    for (int k = 0; k < 2; k++) {
        const char *code = k == 0 ? "HTTP/1.1 414" : "HTTP/1.1 431";
        size_t len;

        if (k == 0) {
            memcpy(big, "GET /", 5);
            memset(big + 5, 'a', 40000);
            len = 5 + 40000;
            len += (size_t)snprintf(big + len, sizeof(big) - len, " HTTP/1.1\r\n\r\n");
        } else {
            len = (size_t)snprintf(big, sizeof(big), "GET /metrics HTTP/1.1\r\nX: ");
            memset(big + len, 'b', 40000);
            len += 40000;
            len += (size_t)snprintf(big + len, sizeof(big) - len, "\r\n\r\n");
        }
        fd = connect_from("127.0.0.1", port, false);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, big, len), (ssize_t)len);
        n = read_until(fd, buf, sizeof(buf), "\r\n", 10);
        ck_assert_msg(n > 0 && strncmp(buf, code, strlen(code)) == 0,
                      "oversized request %d: %zd, reply %.60s", k, n, buf);
        close(fd);
    }

    /* Every reply ends its connection (libmicrohttpd: the reply is queued before it knows the
     * request has no body), so no keep-alive connection lingers. */
    fd = connect_from("127.0.0.1", port, false);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, get, sizeof(get) - 1), (ssize_t)sizeof(get) - 1);
    n = read_until(fd, buf, sizeof(buf), "x_limits_total 3\n", 10);
    ck_assert_msg(n > 0 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "reply %.60s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "\r\nConnection: close\r\n"));
    n = read_until(fd, buf, sizeof(buf), "never", 10);
    ck_assert_msg(n == 0 || n == -ECONNRESET, "after the reply: %zd", n);
    close(fd);
    cmn_metrics_http_stop(h);
    cmn_metrics_free(m);
}
END_TEST

TCase *tcase_metrics_http_limits(void)
{
    TCase *tc = tcase_create("metrics_http_limits");
    tcase_add_test(tc, http_limits);
    tcase_set_timeout(tc, 60);
    return tc;
}

TCase *tcase_metrics_http_flood(void)
{
    TCase *tc = tcase_create("metrics_http_flood");
    tcase_add_test(tc, http_scrapes_under_flood);
    tcase_set_timeout(tc, 60);
    return tc;
}
