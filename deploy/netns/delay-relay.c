/* delay-relay: forwards TCP connections and holds every byte for a fixed one-way delay in each
 * direction. The fabric simulation (fabric.sh) runs one in each SUT namespace in front of the
 * sut-node when a delay is asked for, because this kernel has no netem: the relay accepts on the
 * node's fabric address and forwards to the sut-node on loopback, so the traffic still crosses the
 * emulated links (and their tc rate limits) and the round trip grows by twice the delay.
 *
 *   delay-relay --listen 10.77.0.11:7000 --connect 127.0.0.1:7001 --delay-us 500
 *
 * Each chunk read from one side is stamped with its arrival time and written to the other side no
 * earlier than arrival + delay, in order. A direction stops reading when --max-buffer bytes wait
 * in it (TCP back-pressure then reaches the sender, as a full switch buffer would not: a relay
 * never drops). An end-of-stream is passed on (shutdown of the write side) after the data before
 * it; a reset closes both sides at once. Single-threaded, poll-driven, with nanosecond timeouts
 * (ppoll) and a timer slack of 1 ns, so the delay holds to within tens of microseconds.
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on a start-up error, 2 for bad arguments. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 512
#define CHUNK_MAX (256 * 1024)

static const char usage_text[] =
    "Usage: delay-relay --listen ADDR:PORT --connect ADDR:PORT [--delay-us US] [OPTIONS]\n"
    "\n"
    "Forwards every TCP connection accepted on --listen to --connect and holds each byte for\n"
    "--delay-us microseconds in each direction (a fixed one-way delay; the round trip grows by\n"
    "twice that). Used by deploy/netns/fabric.sh where the kernel has no netem.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR:PORT     address to accept on (IPv6 as [ADDR]:PORT; port 0 picks one)\n"
    "  --connect ADDR:PORT    address to forward each connection to\n"
    "  --delay-us US          one-way delay in microseconds (default 0)\n"
    "  --max-buffer BYTES     bytes held per direction before reading pauses (default 67108864)\n"
    "  --port-file FILE       write the bound port here once listening\n"
    "  --quiet                do not log connections\n"
    "  --help                 this text\n";

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ns;
    size_t len, off;
    uint8_t data[];
} chunk_t;

/* One direction: bytes read from |src| wait here until due, then go to |dst|. */
typedef struct {
    int src, dst;
    chunk_t *head, *tail;
    size_t bytes;
    int eof;     /* src said end-of-stream; pass it on once the queue is empty */
    int shut;    /* dst's write side is shut down */
    int blocked; /* the last write to dst returned EAGAIN: wait for POLLOUT */
    uint64_t total;
} dir_t;

typedef struct {
    int used;
    int fd_a, fd_b; /* a: the accepted client, b: the upstream */
    dir_t ab, ba;
    char peer[NI_MAXHOST + NI_MAXSERV + 2];
} pair_t;

static pair_t pairs[MAX_PAIRS];
static volatile sig_atomic_t stop_flag;
static uint64_t delay_ns;
static size_t max_buffer = 64u * 1024 * 1024;
static int quiet;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    va_list ap;

    if (quiet)
        return;
    va_start(ap, fmt);
    fputs("delay-relay: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* Splits "host:port" or "[v6]:port" into its parts and resolves it (numeric or by name). */
static int resolve(const char *spec, int passive, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *colon, *port;
    struct addrinfo hints, *ai = NULL;
    size_t hl;
    int rc;

    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');
        if (!end || end[1] != ':')
            return -1;
        hl = (size_t)(end - spec - 1);
        if (hl >= sizeof(host))
            return -1;
        memcpy(host, spec + 1, hl);
        port = end + 2;
    } else {
        colon = strrchr(spec, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - spec);
        if (hl >= sizeof(host))
            return -1;
        memcpy(host, spec, hl);
        port = colon + 1;
    }
    host[hl] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    rc = getaddrinfo(hl ? host : NULL, port, &hints, &ai);
    if (rc != 0 || !ai)
        return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void set_nodelay(int fd)
{
    int one = 1;
    /* The harness disables Nagle on its sockets; the relay must too, or small frames would wait
     * for the previous segment's ACK on top of the delay asked for. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void dir_init(dir_t *d, int src, int dst)
{
    memset(d, 0, sizeof(*d));
    d->src = src;
    d->dst = dst;
}

static void dir_free(dir_t *d)
{
    chunk_t *c = d->head, *n;

    for (; c; c = n) {
        n = c->next;
        free(c);
    }
    d->head = d->tail = NULL;
    d->bytes = 0;
}

static void pair_close(pair_t *p, const char *why)
{
    logf_("%s: closed (%s; %llu bytes to the node, %llu back)", p->peer, why,
          (unsigned long long)p->ab.total, (unsigned long long)p->ba.total);
    dir_free(&p->ab);
    dir_free(&p->ba);
    close(p->fd_a);
    close(p->fd_b);
    p->used = 0;
}

/* Reads what is there into one stamped chunk. Returns 0, or -1 when the pair must close. */
static int dir_read(dir_t *d, uint64_t now)
{
    size_t room = max_buffer > d->bytes ? max_buffer - d->bytes : 0;
    size_t want = room < CHUNK_MAX ? room : CHUNK_MAX;
    chunk_t *c;
    ssize_t r;

    if (want == 0)
        return 0;
    c = malloc(sizeof(*c) + want);
    if (!c)
        return -1;
    r = read(d->src, c->data, want);
    if (r <= 0) {
        free(c);
        if (r == 0) {
            d->eof = 1;
            return 0;
        }
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    c->next = NULL;
    c->due_ns = now + delay_ns;
    c->len = (size_t)r;
    c->off = 0;
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->bytes += (size_t)r;
    return 0;
}

/* Writes every chunk that is due. Returns 0, or -1 when the pair must close. */
static int dir_flush(dir_t *d, uint64_t now)
{
    d->blocked = 0;
    while (d->head && d->head->due_ns <= now) {
        chunk_t *c = d->head;
        ssize_t w = send(d->dst, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                d->blocked = 1;
                return 0;
            }
            return -1;
        }
        c->off += (size_t)w;
        d->bytes -= (size_t)w;
        d->total += (uint64_t)w;
        if (c->off < c->len) {
            d->blocked = 1;
            return 0;
        }
        d->head = c->next;
        if (!d->head)
            d->tail = NULL;
        free(c);
    }
    if (d->eof && !d->head && !d->shut) {
        shutdown(d->dst, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

static void accept_one(int lfd, const struct sockaddr_storage *up, socklen_t uplen)
{
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int a, b, i;

    a = accept(lfd, (struct sockaddr *)&peer, &plen);
    if (a < 0)
        return;
    for (i = 0; i < MAX_PAIRS && pairs[i].used; i++) {
    }
    if (i == MAX_PAIRS) {
        logf_("refusing a connection: %d connections open", MAX_PAIRS);
        close(a);
        return;
    }
    /* The upstream is the sut-node on this host's loopback: a blocking connect is immediate. */
    b = socket(up->ss_family, SOCK_STREAM, 0);
    if (b < 0 || connect(b, (const struct sockaddr *)up, uplen) != 0) {
        logf_("cannot reach the upstream: %s", strerror(errno));
        if (b >= 0)
            close(b);
        close(a);
        return;
    }
    set_nonblock(a);
    set_nonblock(b);
    set_nodelay(a);
    set_nodelay(b);
    pairs[i].used = 1;
    pairs[i].fd_a = a;
    pairs[i].fd_b = b;
    dir_init(&pairs[i].ab, a, b);
    dir_init(&pairs[i].ba, b, a);
    if (getnameinfo((struct sockaddr *)&peer, plen, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(pairs[i].peer, sizeof(pairs[i].peer), "%s:%s", host, serv);
    else
        snprintf(pairs[i].peer, sizeof(pairs[i].peer), "peer");
    logf_("%s: connected", pairs[i].peer);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *listen_spec = NULL, *connect_spec = NULL, *port_file = NULL;
    struct sockaddr_storage lss, uss;
    socklen_t llen, ulen;
    struct pollfd pfd[1 + 2 * MAX_PAIRS];
    int map[1 + 2 * MAX_PAIRS];
    struct sigaction sa;
    uint64_t v;
    int lfd, one = 1, i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
            continue;
        }
        if (!val) {
            fprintf(stderr, "delay-relay: unknown option or missing value: %s (see --help)\n", a);
            return 2;
        }
        if (strcmp(a, "--listen") == 0) {
            listen_spec = val;
        } else if (strcmp(a, "--connect") == 0) {
            connect_spec = val;
        } else if (strcmp(a, "--port-file") == 0) {
            port_file = val;
        } else if (strcmp(a, "--delay-us") == 0) {
            if (parse_u64(val, &v) < 0 || v > 10000000u) {
                fprintf(stderr, "delay-relay: --delay-us %s: expected 0 to 10000000\n", val);
                return 2;
            }
            delay_ns = v * 1000u;
        } else if (strcmp(a, "--max-buffer") == 0) {
            if (parse_u64(val, &v) < 0 || v < 4096 || v > ((uint64_t)1 << 34)) {
                fprintf(stderr, "delay-relay: --max-buffer %s: expected 4096 to 2^34 bytes\n", val);
                return 2;
            }
            max_buffer = (size_t)v;
        } else {
            fprintf(stderr, "delay-relay: unknown option %s (see --help)\n", a);
            return 2;
        }
        i++;
    }
    if (!listen_spec || !connect_spec) {
        fprintf(stderr, "delay-relay: --listen and --connect are required (see --help)\n");
        return 2;
    }
    if (resolve(listen_spec, 1, &lss, &llen) < 0) {
        fprintf(stderr, "delay-relay: --listen %s: not an ADDR:PORT that resolves\n", listen_spec);
        return 2;
    }
    if (resolve(connect_spec, 0, &uss, &ulen) < 0) {
        fprintf(stderr, "delay-relay: --connect %s: not an ADDR:PORT that resolves\n",
                connect_spec);
        return 2;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Sleeps end when asked, not up to 50 us later (the default slack). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

    lfd = socket(lss.ss_family, SOCK_STREAM, 0);
    if (lfd < 0) {
        fprintf(stderr, "delay-relay: socket: %s\n", strerror(errno));
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&lss, llen) != 0 || listen(lfd, 128) != 0) {
        fprintf(stderr, "delay-relay: cannot listen on %s: %s\n", listen_spec, strerror(errno));
        close(lfd);
        return 1;
    }
    set_nonblock(lfd);
    if (port_file) {
        struct sockaddr_storage bound;
        socklen_t blen = sizeof(bound);
        char tmp[4096];
        FILE *f;
        int port;

        getsockname(lfd, (struct sockaddr *)&bound, &blen);
        port = bound.ss_family == AF_INET6
                   ? ntohs(((struct sockaddr_in6 *)(void *)&bound)->sin6_port)
                   : ntohs(((struct sockaddr_in *)(void *)&bound)->sin_port);
        /* Written to a temporary name and renamed, so a reader never sees half a number. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, port_file) != 0) {
            fprintf(stderr, "delay-relay: cannot write %s: %s\n", port_file, strerror(errno));
            close(lfd);
            return 1;
        }
    }
    logf_("listening on %s, forwarding to %s with %llu us one-way delay", listen_spec, connect_spec,
          (unsigned long long)(delay_ns / 1000u));

    while (!stop_flag) {
        uint64_t now = now_ns(), next = UINT64_MAX;
        struct timespec ts, *tsp = NULL;
        int n = 0, r;

        pfd[n].fd = lfd;
        pfd[n].events = POLLIN;
        map[n++] = -1;
        for (i = 0; i < MAX_PAIRS; i++) {
            pair_t *p = &pairs[i];
            dir_t *ds[2];
            int k;

            if (!p->used)
                continue;
            ds[0] = &p->ab;
            ds[1] = &p->ba;
            if (dir_flush(&p->ab, now) < 0 || dir_flush(&p->ba, now) < 0) {
                pair_close(p, "write failed");
                continue;
            }
            if (p->ab.eof && p->ba.eof && p->ab.shut && p->ba.shut) {
                pair_close(p, "both sides finished");
                continue;
            }
            /* fd_a reads for ab and writes for ba; fd_b the other way round. */
            pfd[n].fd = p->fd_a;
            pfd[n].events = (short)((!p->ab.eof && p->ab.bytes < max_buffer ? POLLIN : 0) |
                                    (p->ba.blocked ? POLLOUT : 0));
            map[n++] = i;
            pfd[n].fd = p->fd_b;
            pfd[n].events = (short)((!p->ba.eof && p->ba.bytes < max_buffer ? POLLIN : 0) |
                                    (p->ab.blocked ? POLLOUT : 0));
            map[n++] = i;
            for (k = 0; k < 2; k++)
                if (ds[k]->head && !ds[k]->blocked && ds[k]->head->due_ns < next)
                    next = ds[k]->head->due_ns;
        }
        if (next != UINT64_MAX) {
            uint64_t wait = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000u);
            ts.tv_nsec = (long)(wait % 1000000000u);
            tsp = &ts;
        }
        r = ppoll(pfd, (nfds_t)n, tsp, NULL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "delay-relay: poll: %s\n", strerror(errno));
            break;
        }
        now = now_ns();
        for (i = 0; i < n; i++) {
            pair_t *p;
            dir_t *in;

            if (!pfd[i].revents)
                continue;
            if (map[i] < 0) {
                accept_one(lfd, &uss, ulen);
                continue;
            }
            p = &pairs[map[i]];
            if (!p->used)
                continue;
            in = pfd[i].fd == p->fd_a ? &p->ab : &p->ba;
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (dir_read(in, now) < 0) {
                    pair_close(p, strerror(errno));
                    continue;
                }
            }
        }
    }

    for (i = 0; i < MAX_PAIRS; i++)
        if (pairs[i].used)
            pair_close(&pairs[i], "relay stopping");
    close(lfd);
    logf_("stopped");
    return 0;
}
