/* `sut-node --stats` (statsq.h): a blocking client for one StatsRequest. */
#include "statsq.h"

#include "cmn/clock.h"
#include "cmn/msg.h"
#include "cmn/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int fd;
    const char *addr;
    uint64_t deadline_ns;
    cmn_frame_decoder_t dec;
    uint8_t buf[16384];
    size_t have, off;
} client_t;

/* Waits for |events| on the socket until the deadline. */
static int wait_fd(client_t *c, short events, cmn_errbuf_t *eb)
{
    struct pollfd pfd = {c->fd, events, 0};
    uint64_t now;
    int rc;

    for (;;) {
        now = cmn_now_ns();
        if (now >= c->deadline_ns)
            return cmn_errf(eb, CMN_ETIMEOUT, "%s: no answer in time", c->addr);
        rc = poll(&pfd, 1, (int)((c->deadline_ns - now) / 1000000u) + 1);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return cmn_errf(eb, -errno, "%s: poll: %s", c->addr, strerror(errno));
    }
}

static int connect_to(client_t *c, cmn_errbuf_t *eb)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc, err = 0;

    rc = cmn_addr_parse(c->addr, &ss, eb);
    if (rc < 0)
        return rc;
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return cmn_errf(eb, -errno, "%s: socket: %s", c->addr, strerror(errno));
    len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (connect(c->fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
        return cmn_errf(eb, -errno, "%s: cannot connect: %s", c->addr, strerror(errno));
    rc = wait_fd(c, POLLOUT, eb);
    if (rc < 0)
        return rc;
    len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err)
        return cmn_errf(eb, -err, "%s: cannot connect: %s", c->addr, strerror(err));
    return 0;
}

static int send_msg(client_t *c, unsigned type, const ProtobufCMessage *m, cmn_errbuf_t *eb)
{
    struct iovec iov[1];
    const uint8_t *p;
    size_t left;
    long k = cmn_frame_encode(type, m, NULL, 0, iov);
    int rc = 0;

    if (k < 0)
        return cmn_errf(eb, (int)k, "%s: cannot encode %s", c->addr, cmn_msg_type_name(type));
    p = iov[0].iov_base;
    left = iov[0].iov_len;
    while (left && rc == 0) {
        ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            left -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            rc = wait_fd(c, POLLOUT, eb);
        } else {
            rc = cmn_errf(eb, CMN_ECLOSED, "%s: connection lost while sending", c->addr);
        }
    }
    free(iov[0].iov_base);
    return rc;
}

/* The next frame other than Ping, unpacked; an Error frame becomes CMN_EPEER with its text. */
static int recv_msg(client_t *c, unsigned *type, ProtobufCMessage **m, cmn_errbuf_t *eb)
{
    const cmn_msg_limits_t lim = cmn_msg_limits_default();
    cmn_frame_t f;
    size_t used;
    int rc;

    for (;;) {
        while (c->off < c->have) {
            rc = cmn_frame_decode(&c->dec, c->buf + c->off, c->have - c->off, &used, &f);
            if (rc < 0)
                return cmn_errf(eb, rc, "%s: not a node's answer: %s", c->addr, cmn_strerror(rc));
            c->off += used;
            if (rc != CMN_FRAME_READY)
                continue;
            rc = cmn_msg_unpack(&f, &lim, NULL, m, eb);
            if (rc < 0)
                return rc;
            *type = f.hdr.type;
            if (*type == CMN_MSG_PING) {
                cmn_msg_free(*m, NULL);
                continue;
            }
            if (*type == CMN_MSG_ERROR) {
                const Nsut__Error *e = (const Nsut__Error *)*m;
                char txt[300];
                cmn_sanitize(e->message ? e->message : "", e->message ? strlen(e->message) : 0, txt,
                             sizeof(txt));
                cmn_msg_free(*m, NULL);
                return cmn_errf(eb, CMN_EPEER, "%s: the node answered with an error: %s", c->addr,
                                txt);
            }
            return 0;
        }
        c->off = c->have = 0;
        rc = wait_fd(c, POLLIN, eb);
        if (rc < 0)
            return rc;
        ssize_t r = recv(c->fd, c->buf, sizeof(c->buf), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return cmn_errf(eb, CMN_ECLOSED,
                            "%s: the connection closed before the answer (a node serving TLS "
                            "closes plaintext clients)",
                            c->addr);
        if (r > 0)
            c->have = (size_t)r;
    }
}

static int expect(client_t *c, unsigned want, ProtobufCMessage **m, cmn_errbuf_t *eb)
{
    unsigned type = 0;
    int rc;

    for (;;) {
        rc = recv_msg(c, &type, m, eb);
        if (rc < 0 || type == want)
            return rc;
        cmn_msg_free(*m, NULL); /* anything else (a Goodbye comes with a close) */
    }
}

static void print_stats(FILE *out, const Nsut__Stats *st)
{
    char name[300];

    cmn_sanitize(st->node_name ? st->node_name : "", st->node_name ? strlen(st->node_name) : 0,
                 name, sizeof(name));
    fprintf(out, "node_name %s\n", name);
    fprintf(out, "uptime_ns %llu\n", (unsigned long long)st->uptime_ns);
    fprintf(out, "connections_total %llu\n", (unsigned long long)st->connections_total);
    fprintf(out, "connections_open %u\n", st->connections_open);
    fprintf(out, "queries %llu\n", (unsigned long long)st->queries);
    fprintf(out, "samples %llu\n", (unsigned long long)st->samples);
    fprintf(out, "batches %llu\n", (unsigned long long)st->batches);
    fprintf(out, "bytes_in %llu\n", (unsigned long long)st->bytes_in);
    fprintf(out, "bytes_out %llu\n", (unsigned long long)st->bytes_out);
    fprintf(out, "decode_ns %llu\n", (unsigned long long)st->decode_ns);
    fprintf(out, "infer_ns %llu\n", (unsigned long long)st->infer_ns);
    fprintf(out, "encode_ns %llu\n", (unsigned long long)st->encode_ns);
    fprintf(out, "errors %llu\n", (unsigned long long)st->errors);
    fprintf(out, "samples_failed %llu\n", (unsigned long long)st->samples_failed);
    fprintf(out, "inflight_samples %u\n", st->inflight_samples);
}

int sut__stats_query(const char *addr, uint64_t timeout_ms, FILE *out, cmn_errbuf_t *eb)
{
    const cmn_frame_limits_t lim = cmn_frame_limits_preauth();
    Nsut__Codec none = NSUT__CODEC__CODEC_NONE;
    Nsut__Hello hello = NSUT__HELLO__INIT;
    Nsut__StatsRequest req = NSUT__STATS_REQUEST__INIT;
    Nsut__Goodbye bye = NSUT__GOODBYE__INIT;
    ProtobufCMessage *m = NULL;
    client_t c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.fd = -1;
    c.addr = addr;
    c.deadline_ns = cmn_now_ns() + timeout_ms * 1000000u;
    /* Every answer here is small: the pre-handshake frame limit holds for all of them. */
    cmn_frame_decoder_init(&c.dec, &lim);
    hello.version_min = hello.version_max = CMN_PROTOCOL_VERSION;
    hello.n_sample_codecs = hello.n_result_codecs = 1;
    hello.sample_codecs = hello.result_codecs = &none;
    hello.client_name = (char *)"sut-node --stats";
    hello.max_frame_size = lim.max_frame;
    rc = connect_to(&c, eb);
    if (rc == 0)
        rc = send_msg(&c, CMN_MSG_HELLO, &hello.base, eb);
    if (rc == 0)
        rc = expect(&c, CMN_MSG_HELLO_ACK, &m, eb);
    if (rc == 0) {
        cmn_msg_free(m, NULL);
        rc = send_msg(&c, CMN_MSG_STATS_REQUEST, &req.base, eb);
    }
    if (rc == 0)
        rc = expect(&c, CMN_MSG_STATS, &m, eb);
    if (rc == 0) {
        print_stats(out, (const Nsut__Stats *)m);
        cmn_msg_free(m, NULL);
        bye.reason = (char *)"stats read";
        (void)send_msg(&c, CMN_MSG_GOODBYE, &bye.base, eb);
    }
    if (c.fd >= 0)
        close(c.fd);
    cmn_frame_decoder_free(&c.dec);
    return rc;
}
