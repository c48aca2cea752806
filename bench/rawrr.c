/* rawrr: the physical reference for the benchmark suite. A plain-socket TCP request/response
 * program over loopback with the same sizes and in-flight depth as the harness runs, so each
 * harness figure can be divided by what the machine itself does in the same minute.
 *
 * A server process echoes a fixed-size response for every fixed-size request; the client keeps
 * --inflight requests outstanding on --connections connections, one write() per request (as a
 * sender that does not batch must), and measures each request's round trip.
 *
 *   rawrr --size 64 --inflight 1 --seconds 3           ping-pong latency (p50/p99 RTT)
 *   rawrr --size 150528 --inflight 4 --seconds 3        bulk requests (bytes/s)
 *   rawrr --size 150528 --inflight 4 --buffers 1024     ...sent from 1024 distinct buffers, as a
 *                                                       QSL holds distinct samples (not cache-hot)
 *
 * Output: one JSON object on stdout (requests/s, bytes/s, rtt percentiles in microseconds). */
#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One server process per connection: read a request, write a response, forever. */
static void serve(int fd, size_t req, size_t resp)
{
    uint8_t *in = malloc(req), *out = calloc(1, resp ? resp : 1);
    nodelay(fd);
    while (read_full(fd, in, req) == 0 && write_full(fd, out, resp) == 0) {
    }
    _exit(0);
}

static void pin(int cpu)
{
    cpu_set_t set;

    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        perror("rawrr: sched_setaffinity");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    printf(
        "Usage: rawrr [--size BYTES] [--resp-size BYTES] [--inflight N] [--connections N] "
        "[--seconds S]\n"
        "Plain-socket TCP request/response over loopback; prints one JSON object.\n"
        "  --size         request bytes (default 64)\n"
        "  --resp-size    response bytes (default 8)\n"
        "  --inflight     requests outstanding per connection (default 1)\n"
        "  --connections  connections (default 1)\n"
        "  --seconds      measured duration (default 3)\n"
        "  --buffers      distinct request buffers sent in turn (default 1: one cache-hot buffer;\n"
        "                 a QSL's samples are distinct, so compare a harness with as many)\n"
        "  --cpus C,S     pin the client to CPU C and the server to CPU S (default: unpinned;\n"
        "                 unpinned round trips vary 4x with whether both ends share a CPU)\n");
}

int main(int argc, char **argv)
{
    size_t req = 64, resp = 8, inflight = 1, conns = 1, nbufs = 1, next_buf = 0, i, k;
    int cpu_client = -1, cpu_server = -1;
    double seconds = 3;
    int lfd, fds[MAX_CONNS];
    pid_t kids[MAX_CONNS];
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    uint8_t *out, *in;
    uint64_t *sent_at, *rtt, n_rtt = 0, cap_rtt, done = 0, start, end;
    size_t *head, *tail;

    for (i = 1; i < (size_t)argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        }
        if (i + 1 >= (size_t)argc) {
            fprintf(stderr, "rawrr: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--size"))
            req = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--resp-size"))
            resp = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--inflight"))
            inflight = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--connections"))
            conns = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--buffers"))
            nbufs = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cpus")) {
            if (sscanf(argv[++i], "%d,%d", &cpu_client, &cpu_server) != 2) {
                fprintf(stderr, "rawrr: --cpus expects C,S\n");
                return 2;
            }
        } else {
            fprintf(stderr, "rawrr: unknown option %s (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!req || !inflight || !conns || !nbufs || conns > MAX_CONNS || seconds <= 0) {
        fprintf(
            stderr,
            "rawrr: sizes, in-flight depth and duration must be positive; at most %d connections\n",
            MAX_CONNS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, MAX_CONNS) ||
        getsockname(lfd, (struct sockaddr *)&a, &alen)) {
        perror("rawrr: listen");
        return 1;
    }
    for (i = 0; i < conns; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) != 0) {
            perror("rawrr: connect");
            return 1;
        }
        nodelay(fds[i]);
        kids[i] = fork();
        if (kids[i] == 0) {
            int s = accept(lfd, NULL, NULL);
            pin(cpu_server);
            serve(s, req, resp);
        }
    }
    /* Distinct buffers, touched once so they are real memory, like a loaded QSL. */
    pin(cpu_client);
    out = malloc(req * nbufs);
    if (!out) {
        fprintf(stderr, "rawrr: out of memory for %zu buffers of %zu bytes\n", nbufs, req);
        return 1;
    }
    for (i = 0; i < req * nbufs; i++)
        out[i] = (uint8_t)(i * 131u);
    in = malloc(resp ? resp : 1);
    sent_at = calloc(conns * inflight, sizeof(uint64_t));
    head = calloc(conns, sizeof(size_t));
    tail = calloc(conns, sizeof(size_t));
    cap_rtt = 1u << 20;
    rtt = malloc(cap_rtt * sizeof(uint64_t));

    /* Fill the pipeline, then replace every response with a new request. */
    for (i = 0; i < conns; i++)
        for (k = 0; k < inflight; k++) {
            sent_at[i * inflight + (head[i]++ % inflight)] = now_ns();
            if (write_full(fds[i], out + req * (next_buf++ % nbufs), req) < 0)
                return 1;
        }
    start = now_ns();
    end = start + (uint64_t)(seconds * 1e9);
    while (now_ns() < end) {
        struct pollfd p[MAX_CONNS];
        for (i = 0; i < conns; i++) {
            p[i].fd = fds[i];
            p[i].events = POLLIN;
        }
        if (conns > 1 && poll(p, (nfds_t)conns, 100) <= 0)
            continue;
        for (i = 0; i < conns; i++) {
            uint64_t t;
            if (conns > 1 && !(p[i].revents & POLLIN))
                continue;
            if (read_full(fds[i], in, resp) < 0)
                return 1;
            t = now_ns();
            if (n_rtt == cap_rtt) {
                cap_rtt *= 2;
                rtt = realloc(rtt, cap_rtt * sizeof(uint64_t));
            }
            rtt[n_rtt++] = t - sent_at[i * inflight + (tail[i]++ % inflight)];
            done++;
            sent_at[i * inflight + (head[i]++ % inflight)] = now_ns();
            if (write_full(fds[i], out + req * (next_buf++ % nbufs), req) < 0)
                return 1;
        }
    }
    end = now_ns();
    for (i = 0; i < conns; i++) {
        close(fds[i]);
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    qsort(rtt, n_rtt, sizeof(uint64_t), cmp_u64);
    {
        double secs = (double)(end - start) / 1e9;
        printf("{\"tool\": \"rawrr\", \"size\": %zu, \"resp_size\": %zu, \"inflight\": %zu, "
               "\"buffers\": %zu, "
               "\"cpus\": \"%d,%d\", \"connections\": %zu, "
               "\"requests\": %llu, \"seconds\": %.3f, \"req_per_s\": %.1f, \"bytes_per_s\": %.1f, "
               "\"rtt_p50_us\": %.2f, \"rtt_p99_us\": %.2f}\n",
               req, resp, inflight, nbufs, cpu_client, cpu_server, conns, (unsigned long long)done,
               secs, (double)done / secs, (double)done * (double)req / secs,
               n_rtt ? (double)rtt[n_rtt / 2] / 1e3 : 0.0,
               n_rtt ? (double)rtt[(size_t)((double)n_rtt * 0.99)] / 1e3 : 0.0);
    }
    return 0;
}
