/* sse_flood: the floor of the endpoint comparison's capacity rows (issue 39, endpoint_bench.py):
 * the least a client can do per request with many in flight. --concurrency keep-alive
 * connections with TCP_NODELAY on one epoll loop; each carries one request at a time, written
 * with one write (the vLLM-dialect body loadgen-node's endpoint mode sends, built once), its
 * answer read with one read into a large buffer per readable event (a short read means the
 * socket is empty: no read until EAGAIN), nothing parsed but the chunked stream's last chunk;
 * the next request is written as soon as the answer has ended. The interest sets never change
 * (EPOLLIN only, registered once). What the kernel's loopback TCP costs a request's one write
 * and one read, plus a share of epoll_wait, is then most of its CPU time.
 *
 *   sse_flood --port P [--requests 100000] [--concurrency 64] [--prompt-tokens 100]
 *             [--max-tokens 8] [--pipeline K]
 *
 * --pipeline K (1 to 64; default 1) writes K requests back to back in each write (HTTP/1.1
 * pipelining, which delays every answer but the first behind the one before it) and waits for
 * their K answers: what pipelining could save a client's kernel at most.
 *
 * Output: one JSON line: requests, wall_s, cpu_s (its own user + system time, getrusage), and
 * its system calls per request (writes, reads, epoll_waits). Errors name the connection and what
 * failed; exit 1. A benchmark tool for a loopback engine it started itself (sse_source). */
#include "sse_req.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 65536u
#define CONC_MAX 4096

typedef struct {
    int fd;
    char tail[5]; /* the last bytes read, for an end split across reads */
    size_t tail_len;
    long due; /* answers still to come for its last write */
} conn_t;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1 when the bytes read so far end with the chunked stream's last chunk. */
static int at_end(conn_t *c, const char *p, size_t n)
{
    char last[10];
    size_t k = 0;

    if (n >= 5)
        return memcmp(p + n - 5, "0\r\n\r\n", 5) == 0;
    memcpy(last, c->tail, c->tail_len);
    memcpy(last + c->tail_len, p, n);
    k = c->tail_len + n;
    c->tail_len = k < 5 ? k : 5;
    memmove(c->tail, last + k - c->tail_len, c->tail_len);
    return k >= 5 && memcmp(c->tail, "0\r\n\r\n", 5) == 0;
}

/* --pipeline: how many answers end in the bytes read (the end "0\r\n\r\n" occurs nowhere else in
 * a chunked SSE stream), one split across reads included. */
static long ends_in(conn_t *c, const char *p, size_t n)
{
    static const char end[] = "0\r\n\r\n";
    char edge[8];
    size_t k = c->tail_len, m = n < 4 ? n : 4;
    long got = 0;

    memcpy(edge, c->tail, k); /* an end that starts in the bytes before */
    memcpy(edge + k, p, m);
    for (size_t i = 0; i < k && i + 5 <= k + m; i++)
        got += memcmp(edge + i, end, 5) == 0;
    for (const char *q = p; (q = memmem(q, n - (size_t)(q - p), end, 5)) != NULL; q += 5)
        got++;
    k = n >= 4 ? 4 : k + n > 4 ? 4 : k + n; /* the last four bytes for the next read */
    memmove(c->tail, n >= 4 ? p + n - 4 : edge + (c->tail_len + n - k), k);
    c->tail_len = k;
    return got;
}

/* The next write on |c|: one request, or with --pipeline up to K back to back. */
static int send_next(conn_t *c, const char *req, size_t req_len, long pipe, long requests,
                     long *sent, long *nwrite)
{
    long k = requests - *sent < pipe ? requests - *sent : pipe;
    size_t len = req_len * (size_t)k;

    if (write(c->fd, req, len) != (ssize_t)len) {
        fprintf(stderr, "sse_flood: a write of %ld requests was not taken whole: %s\n", k,
                strerror(errno));
        return -1;
    }
    c->due = k;
    *sent += k;
    (*nwrite)++;
    return 0;
}

int main(int argc, char **argv)
{
    long port = 0, requests = 100000, conc = 64, prompt_tokens = 100, max_tokens = 8, pipe = 1, i;
    long sent = 0, done = 0, nwrite = 0, nread = 0, nwait = 0;
    struct sockaddr_in a;
    struct rusage ru;
    conn_t *cs;
    char *req, *buf;
    size_t req_len;
    double t0, wall;
    int ep, one = 1;

    for (i = 1; i + 1 < argc; i += 2) {
        long *dst = !strcmp(argv[i], "--port")            ? &port
                    : !strcmp(argv[i], "--requests")      ? &requests
                    : !strcmp(argv[i], "--concurrency")   ? &conc
                    : !strcmp(argv[i], "--prompt-tokens") ? &prompt_tokens
                    : !strcmp(argv[i], "--max-tokens")    ? &max_tokens
                    : !strcmp(argv[i], "--pipeline")      ? &pipe
                                                          : NULL;
        if (!dst) {
            fprintf(stderr, "sse_flood: unknown option %s\n", argv[i]);
            return 2;
        }
        *dst = strtol(argv[i + 1], NULL, 10);
    }
    if (i != argc || port < 1 || port > 65535 || requests < 1 || conc < 1 || conc > CONC_MAX ||
        prompt_tokens < 1 || prompt_tokens > 100000 || max_tokens < 1 || pipe < 1 || pipe > 64) {
        fprintf(stderr,
                "usage: sse_flood --port P [--requests N >= 1] [--concurrency 1..%d] "
                "[--prompt-tokens 1..100000] [--max-tokens N >= 1] [--pipeline 1..64]\n",
                CONC_MAX);
        return 2;
    }
    /* IDs of ten digits: about the length of the synthetic QSL's random int32 ones */
    req = sse_req_build((unsigned)port, prompt_tokens, 1000000000, max_tokens, &req_len);
    if (req && pipe > 1) { /* --pipeline K: K requests back to back in one write */
        char *k = malloc(req_len * (size_t)pipe);
        for (i = 0; k && i < pipe; i++)
            memcpy(k + (size_t)i * req_len, req, req_len);
        free(req);
        req = k;
    }
    buf = malloc(RBUF);
    cs = calloc((size_t)conc, sizeof(*cs));
    ep = epoll_create1(0);
    if (!req || !buf || !cs || ep < 0) {
        fprintf(stderr, "sse_flood: out of memory or epoll: %s\n", strerror(errno));
        return 1;
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (i = 0; i < conc; i++) { /* blocking sockets: a read only when epoll says it has bytes */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        cs[i].fd = fd;
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            fprintf(stderr, "sse_flood: connection %ld to 127.0.0.1:%ld: %s\n", i, port,
                    strerror(errno));
            return 1;
        }
    }
    t0 = now_s();
    for (i = 0; i < conc && sent < requests; i++)
        if (send_next(&cs[i], req, req_len, pipe, requests, &sent, &nwrite) < 0)
            return 1;
    while (done < requests) {
        struct epoll_event evs[CONC_MAX];
        int n = epoll_wait(ep, evs, (int)conc, 10000);

        nwait++;
        if (n <= 0) {
            fprintf(stderr, "sse_flood: %s after %ld of %ld answers\n",
                    n == 0 ? "no answer for 10 s" : strerror(errno), done, requests);
            return 1;
        }
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            ssize_t r = read(c->fd, buf, RBUF);

            nread++;
            if (r <= 0) {
                fprintf(stderr, "sse_flood: connection %ld: %s after %ld answers\n", (long)(c - cs),
                        r == 0 ? "the engine closed it" : strerror(errno), done);
                return 1;
            }
            if (pipe == 1) { /* the floor: only the read's last bytes looked at */
                if (!at_end(c, buf, (size_t)r))
                    continue;
                c->tail_len = 0;
                c->due = 0;
                done++;
            } else {
                long got = ends_in(c, buf, (size_t)r);
                done += got;
                c->due -= got;
                if (c->due > 0)
                    continue;
            }
            if (sent < requests && send_next(c, req, req_len, pipe, requests, &sent, &nwrite) < 0)
                return 1;
        }
    }
    wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"client\": \"sse_flood\", \"requests\": %ld, \"wall_s\": %.6f, \"cpu_s\": %.6f, "
           "\"writes_per_req\": %.4f, \"reads_per_req\": %.4f, \"epoll_waits_per_req\": %.4f}\n",
           done, wall,
           (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
           (double)nwrite / (double)done, (double)nread / (double)done,
           (double)nwait / (double)done);
    for (i = 0; i < conc; i++)
        close(cs[i].fd);
    close(ep);
    free(cs);
    free(buf);
    free(req);
    return 0;
}
