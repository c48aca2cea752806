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
 *   ... --connections 2 --threads 2                      two sender threads, one connection each
 *   ... --sndbuf B --rcvbuf B / --zerocopy               socket buffer sizes / MSG_ZEROCOPY sends
 *
 * The options after --buffers are the experiments of issue 20 item 4 (bench/README.md, "Offline:
 * what spreads the copies"): what a sender could gain from them, measured without the harness.
 *
 * Output: one JSON object on stdout (requests/s, bytes/s, rtt percentiles in microseconds). */
#include <errno.h>
#include <pthread.h>
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/errqueue.h> /* after <time.h>: it uses struct timespec */

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

static int zerocopy; /* --zerocopy: send with MSG_ZEROCOPY (the buffers are never written) */

/* A MSG_ZEROCOPY send's completion is a notification on the socket's error queue; the buffers
 * here are read-only, so the notifications are only drained (they count against optmem, and a
 * full error queue makes later sends fail with ENOBUFS). copied counts those the kernel says it
 * copied after all (SO_EE_CODE_ZEROCOPY_COPIED: loopback delivers to a local socket so). */
static void drain_errqueue(int fd, uint64_t *notes, uint64_t *copied)
{
    char control[256];

    for (;;) {
        struct msghdr m;
        struct cmsghdr *c;
        memset(&m, 0, sizeof(m));
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
        for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            struct sock_extended_err se;
            if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                  (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)))
                continue;
            memcpy(&se, CMSG_DATA(c), sizeof(se));
            if (se.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                continue;
            (*notes)++;
            if (se.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
                (*copied)++;
        }
    }
}

/* Sends all |n| bytes with send(|flags|). With MSG_ZEROCOPY, a full error queue (ENOBUFS) is
 * drained into |notes| and |copied| and the send retried. */
static int send_full(int fd, const void *buf, size_t n, int flags, uint64_t *notes,
                     uint64_t *copied)
{
    const uint8_t *p = buf;

    while (n) {
        ssize_t w = send(fd, p, n, flags);
        if (w < 0 && errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
            struct pollfd pe = {.fd = fd, .events = 0};
            poll(&pe, 1, 10); /* wait for notifications to free optmem */
            drain_errqueue(fd, notes, copied);
            continue;
        }
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
    while (read_full(fd, in, req) == 0 && send_full(fd, out, resp, 0, NULL, NULL) == 0) {
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

/* One client thread: its own connections, its own slice of the buffers, its own samples. */
typedef struct {
    int *fds;
    size_t n_fds, inflight, req, resp, nbufs, next_buf;
    const uint8_t *out;
    uint64_t end, done, n_rtt, cap_rtt, zc_notes, zc_copied;
    uint64_t *rtt, *sent_at;
    size_t *head, *tail;
    int cpu, failed;
} worker_t;

/* Sends connection |i|'s next request, from the next of the buffers, and notes when. */
static int send_next(worker_t *w, size_t i)
{
    w->sent_at[i * w->inflight + (w->head[i]++ % w->inflight)] = now_ns();
    return send_full(w->fds[i], w->out + w->req * (w->next_buf++ % w->nbufs), w->req,
                     zerocopy ? MSG_ZEROCOPY : 0, &w->zc_notes, &w->zc_copied);
}

static void *client(void *arg)
{
    worker_t *w = arg;
    uint8_t *in = malloc(w->resp ? w->resp : 1);
    size_t i, k;

    pin(w->cpu);
    w->sent_at = calloc(w->n_fds * w->inflight, sizeof(uint64_t));
    w->head = calloc(w->n_fds, sizeof(size_t));
    w->tail = calloc(w->n_fds, sizeof(size_t));
    w->cap_rtt = 1u << 18;
    w->rtt = malloc(w->cap_rtt * sizeof(uint64_t));
    if (!in || !w->sent_at || !w->head || !w->tail || !w->rtt)
        goto fail;
    /* Fill the pipeline, then replace every response with a new request. */
    for (i = 0; i < w->n_fds; i++)
        for (k = 0; k < w->inflight; k++)
            if (send_next(w, i) < 0)
                goto fail;
    while (now_ns() < w->end) {
        struct pollfd p[MAX_CONNS];
        for (i = 0; i < w->n_fds; i++) {
            p[i].fd = w->fds[i];
            p[i].events = POLLIN;
        }
        if ((w->n_fds > 1 || zerocopy) && poll(p, (nfds_t)w->n_fds, 100) <= 0)
            continue;
        for (i = 0; i < w->n_fds; i++) {
            uint64_t t;
            if (zerocopy && (p[i].revents & POLLERR))
                drain_errqueue(w->fds[i], &w->zc_notes, &w->zc_copied);
            if ((w->n_fds > 1 || zerocopy) && !(p[i].revents & POLLIN))
                continue;
            if (read_full(w->fds[i], in, w->resp) < 0)
                goto fail;
            t = now_ns();
            if (w->n_rtt == w->cap_rtt) {
                uint64_t *r = realloc(w->rtt, 2 * w->cap_rtt * sizeof(uint64_t));
                if (!r)
                    goto fail;
                w->rtt = r;
                w->cap_rtt *= 2;
            }
            w->rtt[w->n_rtt++] = t - w->sent_at[i * w->inflight + (w->tail[i]++ % w->inflight)];
            w->done++;
            if (send_next(w, i) < 0)
                goto fail;
        }
    }
    free(in);
    return NULL;

fail: /* a connection lost or no memory: main reports it */
    w->failed = 1;
    free(in);
    return NULL;
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
        "                 unpinned round trips vary 4x with whether both ends share a CPU)\n"
        "  --threads N    client threads sending, the connections dealt among them (default 1)\n"
        "  --sndbuf B     SO_SNDBUF of the client's sockets (default: the kernel's autotuning)\n"
        "  --rcvbuf B     SO_RCVBUF of the server's sockets (default: the kernel's autotuning)\n"
        "  --zerocopy     send requests with MSG_ZEROCOPY (SO_ZEROCOPY); the JSON says how many\n"
        "                 completions the kernel reported as copied anyway\n");
}

static int parse_size(const char *opt, const char *v, size_t *out)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "rawrr: %s expects a non-negative integer, got '%s'\n", opt, v);
        return -1;
    }
    *out = (size_t)x;
    return 0;
}

int main(int argc, char **argv)
{
    size_t req = 64, resp = 8, inflight = 1, conns = 1, nbufs = 1, threads = 1, sndbuf = 0,
           rcvbuf = 0, i;
    int cpu_client = -1, cpu_server = -1;
    double seconds = 3;
    int lfd, fds[MAX_CONNS];
    pid_t kids[MAX_CONNS];
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    uint8_t *out;
    uint64_t *rtt, n_rtt = 0, done = 0, zc_notes = 0, zc_copied = 0, start, end;
    worker_t ws[MAX_CONNS];
    pthread_t tids[MAX_CONNS];

    for (i = 1; i < (size_t)argc; i++) {
        size_t *dst = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        }
        if (!strcmp(argv[i], "--zerocopy")) {
            zerocopy = 1;
            continue;
        }
        if (i + 1 >= (size_t)argc) {
            fprintf(stderr, "rawrr: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--size"))
            dst = &req;
        else if (!strcmp(argv[i], "--resp-size"))
            dst = &resp;
        else if (!strcmp(argv[i], "--inflight"))
            dst = &inflight;
        else if (!strcmp(argv[i], "--connections"))
            dst = &conns;
        else if (!strcmp(argv[i], "--buffers"))
            dst = &nbufs;
        else if (!strcmp(argv[i], "--threads"))
            dst = &threads;
        else if (!strcmp(argv[i], "--sndbuf"))
            dst = &sndbuf;
        else if (!strcmp(argv[i], "--rcvbuf"))
            dst = &rcvbuf;
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--cpus")) {
            if (sscanf(argv[++i], "%d,%d", &cpu_client, &cpu_server) != 2) {
                fprintf(stderr, "rawrr: --cpus expects C,S\n");
                return 2;
            }
        } else {
            fprintf(stderr, "rawrr: unknown option %s (see --help)\n", argv[i]);
            return 2;
        }
        if (dst && parse_size(argv[i], argv[i + 1], dst) != 0)
            return 2;
        if (dst)
            i++;
    }
    if (!req || !inflight || !conns || !nbufs || !threads || conns > MAX_CONNS || threads > conns ||
        seconds <= 0) {
        fprintf(stderr,
                "rawrr: sizes, in-flight depth, threads and duration must be positive; at most "
                "%d connections, and no more threads than connections\n",
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
        int one = 1, b;
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        b = (int)sndbuf;
        if (sndbuf && setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &b, sizeof(b)) != 0)
            perror("rawrr: SO_SNDBUF");
        if (zerocopy && setsockopt(fds[i], SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) {
            perror("rawrr: SO_ZEROCOPY");
            return 1;
        }
        if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) != 0) {
            perror("rawrr: connect");
            return 1;
        }
        nodelay(fds[i]);
        kids[i] = fork();
        if (kids[i] == 0) {
            int s = accept(lfd, NULL, NULL);
            b = (int)rcvbuf;
            if (rcvbuf && setsockopt(s, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b)) != 0)
                perror("rawrr: SO_RCVBUF");
            pin(cpu_server);
            serve(s, req, resp);
        }
    }
    /* Distinct buffers, touched once so they are real memory, like a loaded QSL. */
    out = malloc(req * nbufs);
    if (!out) {
        fprintf(stderr, "rawrr: out of memory for %zu buffers of %zu bytes\n", nbufs, req);
        return 1;
    }
    for (i = 0; i < req * nbufs; i++)
        out[i] = (uint8_t)(i * 131u);

    start = now_ns();
    end = start + (uint64_t)(seconds * 1e9);
    for (i = 0; i < threads; i++) {
        size_t lo = conns * i / threads, hi = conns * (i + 1) / threads;
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].fds = fds + lo;
        ws[i].n_fds = hi - lo;
        ws[i].inflight = inflight;
        ws[i].req = req;
        ws[i].resp = resp;
        ws[i].nbufs = nbufs;
        ws[i].next_buf = nbufs * i / threads; /* each thread starts in its own part of the QSL */
        ws[i].out = out;
        ws[i].end = end;
        ws[i].cpu = cpu_client;
        if (pthread_create(&tids[i], NULL, client, &ws[i]) != 0) {
            fprintf(stderr, "rawrr: cannot start client thread %zu\n", i);
            return 1;
        }
    }
    for (i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        if (ws[i].failed) {
            fprintf(stderr, "rawrr: client thread %zu failed (connection lost or no memory)\n", i);
            return 1;
        }
        n_rtt += ws[i].n_rtt;
        done += ws[i].done;
        zc_notes += ws[i].zc_notes;
        zc_copied += ws[i].zc_copied;
    }
    end = now_ns();
    rtt = malloc((n_rtt ? n_rtt : 1) * sizeof(uint64_t));
    if (!rtt) {
        fprintf(stderr, "rawrr: out of memory for %llu round trips\n", (unsigned long long)n_rtt);
        return 1;
    }
    n_rtt = 0;
    for (i = 0; i < threads; i++) {
        memcpy(rtt + n_rtt, ws[i].rtt, ws[i].n_rtt * sizeof(uint64_t));
        n_rtt += ws[i].n_rtt;
    }
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
               "\"cpus\": \"%d,%d\", \"connections\": %zu, \"threads\": %zu, \"sndbuf\": %zu, "
               "\"rcvbuf\": %zu, \"zerocopy\": %d, \"zerocopy_notes\": %llu, "
               "\"zerocopy_copied\": %llu, "
               "\"requests\": %llu, \"seconds\": %.3f, \"req_per_s\": %.1f, \"bytes_per_s\": %.1f, "
               "\"rtt_p50_us\": %.2f, \"rtt_p99_us\": %.2f}\n",
               req, resp, inflight, nbufs, cpu_client, cpu_server, conns, threads, sndbuf, rcvbuf,
               zerocopy, (unsigned long long)zc_notes, (unsigned long long)zc_copied,
               (unsigned long long)done, secs, (double)done / secs,
               (double)done * (double)req / secs, n_rtt ? (double)rtt[n_rtt / 2] / 1e3 : 0.0,
               n_rtt ? (double)rtt[(size_t)((double)n_rtt * 0.99)] / 1e3 : 0.0);
    }
    return 0;
}
