#include "testnet.h"
#include "tnucx.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct sockaddr_in tn_loopback(int port)
{
    struct sockaddr_in a;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int tn_spawn(tn_proc_t *p, const char *exe, const char *const *args)
{
    return tn_spawn_port(p, exe, args, 0);
}

const char *tn_scheme(void)
{
    const char *t = getenv("NSUT_TEST_TRANSPORT");
    return t && strcmp(t, "ucx") == 0 ? "ucx://" : "";
}

int tn_ucx_busy_poll(void)
{
    const char *b = getenv("NSUT_TEST_UCX_BUSY_POLL");
    return b && strcmp(b, "1") == 0;
}

int tn_spawn_port(tn_proc_t *p, const char *exe, const char *const *args, int port)
{
    char port_path[128], listen[32];
    const char *argv[64];
    size_t n = 0, i;
    uint64_t deadline;

    memset(p, 0, sizeof(*p));
    snprintf(p->dir, sizeof(p->dir), "/tmp/tn_XXXXXX");
    if (!mkdtemp(p->dir)) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(port_path, sizeof(port_path), "%s/port", p->dir);
    snprintf(p->log_path, sizeof(p->log_path), "%s/log", p->dir);
    argv[n++] = exe;
    for (i = 0; args && args[i] && n < 57; i++)
        argv[n++] = args[i];
    snprintf(listen, sizeof(listen), "%s127.0.0.1:%d", tn_scheme(), port);
    argv[n++] = "--listen";
    argv[n++] = listen;
    argv[n++] = "--port-file";
    argv[n++] = port_path;
    if (tn_ucx_busy_poll())
        argv[n++] = "--ucx-busy-poll";
    if (tn_is_ucx())
        argv[n++] = "--ucx-trusted-fabric"; /* loopback: the tests' own fabric */
    argv[n] = NULL;
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        int fd;
        /* A test that fails dies with its process; its daemons must not outlive it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        FILE *f = fopen(port_path, "r");
        int status;
        if (f) {
            int ok = fscanf(f, "%d", &p->port) == 1;
            fclose(f);
            if (ok && p->port > 0)
                return 0;
        }
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            fprintf(stderr, "tn_spawn: %s exited early (status %d); log %s\n", exe, status,
                    p->log_path);
            p->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "tn_spawn: %s did not report its port\n", exe);
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    return -1;
}

int tn_wait(tn_proc_t *p, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int status;

    if (p->pid <= 0)
        return -1;
    while (now_ms() < deadline) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            if (WIFEXITED(status))
                return WEXITSTATUS(status);
            return 128 + WTERMSIG(status);
        }
        sleep_ms(5);
    }
    return -1;
}

int tn_stop(tn_proc_t *p, int sig, int timeout_ms)
{
    int rc;

    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    rc = tn_wait(p, timeout_ms);
    if (rc < 0 && p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
    }
    return rc;
}

int tn_log_contains(const tn_proc_t *p, const char *needle)
{
    FILE *f = fopen(p->log_path, "r");
    char line[4096];
    int found = 0;

    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int tn_wait_log(const tn_proc_t *p, const char *needle, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        if (tn_log_contains(p, needle))
            return 1;
        if (now_ms() >= deadline)
            return 0;
        sleep_ms(10);
    }
}

int tn_kill_hold(tn_proc_t *p)
{
    struct sockaddr_in a;
    uint64_t deadline = now_ms() + 2000;
    int one = 1, fd;

    if (p->pid > 0)
        tn_stop(p, SIGKILL, 5000);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* The dead node's accepted connections sit in TIME_WAIT on this port; a listener of another
     * process still makes bind() fail, which is what tells a taken port from a free one. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    a = tn_loopback(p->port);
    while (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (errno != EADDRINUSE || now_ms() >= deadline) {
            fprintf(stderr, "tn_kill_hold: cannot hold port %d of the killed node: %s\n", p->port,
                    strerror(errno));
            close(fd);
            return -1;
        }
        sleep_ms(5);
    }
    p->held = 1;
    p->hold_fd = fd;
    return 0;
}

void tn_cleanup(tn_proc_t *p)
{
    char path[160];

    if (p->held) {
        close(p->hold_fd);
        p->held = 0;
    }

    if (p->pid > 0)
        tn_stop(p, SIGKILL, 2000);
    snprintf(path, sizeof(path), "%s/port", p->dir);
    unlink(path);
    /* Keep the log when the test failed? The dir is small; remove it for a clean /tmp. */
    unlink(p->log_path);
    rmdir(p->dir);
}

int tn_connect(tn_client_t *c, int port)
{
    struct sockaddr_in a;
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    int one = 1;

    memset(c, 0, sizeof(*c));
    if (tn_is_ucx()) {
        c->fd = -1;
        c->ucx = tnucx_connect(port);
        if (!c->ucx)
            return -1;
        lim.max_frame = CMN_FRAME_ABS_MAX;
        cmn_frame_decoder_init(&c->dec, &lim);
        (void)one;
        (void)a;
        return 0;
    }
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return -1;
    a = tn_loopback(port);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    lim.max_frame = CMN_FRAME_ABS_MAX;
    cmn_frame_decoder_init(&c->dec, &lim);
    return 0;
}

int tn_is_ucx(void)
{
    return tn_scheme()[0] != '\0';
}

void tn_close(tn_client_t *c)
{
    tnucx_close(c->ucx);
    c->ucx = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    cmn_frame_decoder_free(&c->dec);
}

void tn_pump(tn_client_t *c, int ms)
{
    if (c->ucx)
        tnucx_pump(c->ucx, ms);
    else
        sleep_ms(ms > 0 ? (unsigned)ms : 0u);
}

void tn_stop_reading(tn_client_t *c)
{
    if (c->ucx)
        tnucx_stop_reading(c->ucx);
}

int tn_send_raw(tn_client_t *c, const void *data, size_t len)
{
    const uint8_t *p = data;

    if (c->ucx)
        return tnucx_send(c->ucx, data, len);
    while (len > 0) {
        ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int tn_send_ucx_msg(tn_client_t *c, const void *hdr, size_t hlen, const void *data, size_t dlen,
                    int reply)
{
    return c->ucx ? tnucx_send_msg(c->ucx, hdr, hlen, data, dlen, reply) : -1;
}

int tn_send(tn_client_t *c, unsigned type, const ProtobufCMessage *m, const struct iovec *payload,
            size_t n)
{
    struct iovec *iov = calloc(n + 1, sizeof(*iov));
    long k;
    size_t i;
    int rc = 0;

    if (!iov)
        return -1;
    k = cmn_frame_encode(type, m, payload, n, iov);
    if (k < 0) {
        free(iov);
        return -1;
    }
    if (c->ucx) { /* one frame, one active message */
        size_t total = 0, off = 0;
        uint8_t *b;
        for (i = 0; i < (size_t)k; i++)
            total += iov[i].iov_len;
        b = malloc(total ? total : 1);
        for (i = 0; b && i < (size_t)k; i++) {
            memcpy(b + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        rc = b ? tn_send_raw(c, b, total) : -1;
        free(b);
        k = 0;
    }
    for (i = 0; i < (size_t)k && rc == 0; i++)
        rc = tn_send_raw(c, iov[i].iov_base, iov[i].iov_len);
    free(iov[0].iov_base);
    free(iov);
    return rc;
}

int tn_recv(tn_client_t *c, int timeout_ms, unsigned *type, ProtobufCMessage **m, uint8_t **payload,
            size_t *plen)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    cmn_frame_t f;
    size_t used;
    int rc;

    for (;;) {
        while (c->off < c->have) {
            rc = cmn_frame_decode(&c->dec, c->buf + c->off, c->have - c->off, &used, &f);
            if (rc < 0)
                return rc;
            c->off += used;
            if (rc == CMN_FRAME_READY) {
                cmn_errbuf_t eb;
                *type = f.hdr.type;
                rc = cmn_msg_unpack(&f, &lim, NULL, m, &eb);
                if (rc < 0) {
                    fprintf(stderr, "tn_recv: %s\n", eb.msg);
                    return rc;
                }
                if (f.hdr.type == CMN_MSG_PING) {
                    /* A node's heartbeat: answer it, as the QDL does, and keep reading. A Pong
                     * that cannot leave (the node has said Goodbye and closed) ends nothing:
                     * the frames that arrived before the close (its Goodbye) are still to read,
                     * and the close is reported after them, as over TCP. */
                    Nsut__Pong pong = NSUT__PONG__INIT;
                    pong.seq = ((Nsut__Ping *)*m)->seq;
                    pong.sent_ns = ((Nsut__Ping *)*m)->sent_ns;
                    cmn_msg_free(*m, NULL);
                    *m = NULL;
                    c->pings++;
                    if (tn_send(c, CMN_MSG_PONG, &pong.base, NULL, 0) < 0)
                        c->pongs_lost++;
                    continue;
                }
                if (payload) {
                    *payload = malloc(f.hdr.payload_len ? f.hdr.payload_len : 1);
                    memcpy(*payload, f.payload, f.hdr.payload_len);
                    *plen = f.hdr.payload_len;
                }
                return 0;
            }
        }
        c->off = c->have = 0;
        if (c->ucx) {
            int64_t left = (int64_t)(deadline - now_ms());
            long r;
            if (left <= 0)
                return CMN_ETIMEOUT;
            r = tnucx_recv(c->ucx, c->buf, sizeof(c->buf), (int)left);
            if (r == 0)
                return CMN_ETIMEOUT;
            if (r < 0)
                return CMN_ECLOSED;
            c->have = (size_t)r;
            continue;
        }
        {
            struct pollfd pfd = {c->fd, POLLIN, 0};
            int64_t left = (int64_t)(deadline - now_ms());
            ssize_t r;
            if (left <= 0)
                return CMN_ETIMEOUT;
            rc = poll(&pfd, 1, (int)left);
            if (rc == 0)
                return CMN_ETIMEOUT;
            if (rc < 0 && errno != EINTR)
                return -errno;
            r = recv(c->fd, c->buf, sizeof(c->buf), 0);
            if (r == 0)
                return CMN_ECLOSED;
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                return errno == ECONNRESET ? CMN_ECLOSED : -errno;
            }
            c->have = (size_t)r;
        }
    }
}

Nsut__HelloAck *tn_handshake(tn_client_t *c, const int *codecs, size_t n_codecs)
{
    return tn_handshake_ms(c, codecs, n_codecs, 5000);
}

Nsut__HelloAck *tn_handshake_ms(tn_client_t *c, const int *codecs, size_t n_codecs, int timeout_ms)
{
    Nsut__Hello h = NSUT__HELLO__INIT;
    Nsut__Codec cs[8];
    ProtobufCMessage *m = NULL;
    unsigned type;
    size_t i;
    int rc;

    for (i = 0; i < n_codecs && i < 8; i++)
        cs[i] = (Nsut__Codec)codecs[i];
    h.version_min = h.version_max = CMN_PROTOCOL_VERSION;
    h.n_sample_codecs = h.n_result_codecs = i;
    h.sample_codecs = h.result_codecs = cs;
    h.client_name = (char *)"testnet";

    if (tn_send(c, CMN_MSG_HELLO, &h.base, NULL, 0) < 0) {
        fprintf(stderr, "tn_handshake: cannot send Hello\n");
        return NULL;
    }
    rc = tn_recv(c, timeout_ms, &type, &m, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "tn_handshake: no HelloAck within %d ms: %s\n", timeout_ms,
                cmn_strerror(rc));
        return NULL;
    }
    if (type != CMN_MSG_HELLO_ACK) {
        if (type == CMN_MSG_ERROR)
            fprintf(stderr, "tn_handshake: Error %d: %s\n", (int)((Nsut__Error *)m)->code,
                    ((Nsut__Error *)m)->message ? ((Nsut__Error *)m)->message : "");
        cmn_msg_free(m, NULL);
        return NULL;
    }
    return (Nsut__HelloAck *)m;
}

int tn_send_query(tn_client_t *c, uint64_t query_id, uint64_t first_id, size_t n,
                  const void *const *data, const size_t *wire, const size_t *raw, const int *codec)
{
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Sample *s = calloc(n, sizeof(*s));
    Nsut__Sample **sp = calloc(n, sizeof(*sp));
    struct iovec *iov = calloc(n, sizeof(*iov));
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        nsut__sample__init(&s[i]);
        s[i].id = first_id + i;
        s[i].codec = codec ? (Nsut__Codec)codec[i] : NSUT__CODEC__CODEC_NONE;
        s[i].wire_size = wire[i];
        s[i].raw_size = raw ? raw[i] : wire[i];
        sp[i] = &s[i];
        iov[i].iov_base = (void *)data[i];
        iov[i].iov_len = wire[i];
    }
    q.query_id = query_id;
    q.n_samples = n;
    q.samples = sp;
    q.parts = 1;
    rc = tn_send(c, CMN_MSG_QUERY, &q.base, iov, n);
    free(s);
    free(sp);
    free(iov);
    return rc;
}

int tn_expect_error(tn_client_t *c, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int code = -1, rc;

    for (;;) {
        ProtobufCMessage *m = NULL;
        unsigned type;
        int64_t left = (int64_t)(deadline - now_ms());
        if (left <= 0)
            return -1;
        rc = tn_recv(c, (int)left, &type, &m, NULL, NULL);
        if (rc == CMN_ECLOSED)
            return code;
        if (rc < 0)
            return code >= 0 ? code : -1;
        if (type == CMN_MSG_ERROR)
            code = (int)((Nsut__Error *)m)->code;
        cmn_msg_free(m, NULL);
    }
}

int tn_run(const char *exe, const char *const *args, const char *out)
{
    char cmd[2048];
    size_t i, n;

    n = (size_t)snprintf(cmd, sizeof(cmd), "%s", exe);
    for (i = 0; args[i]; i++)
        n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " '%s'", args[i]);
    snprintf(cmd + n, sizeof(cmd) - n, " >%s 2>&1", out);
    return WEXITSTATUS(system(cmd));
}

int tn_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char buf[65536];
    size_t n;

    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

long tn_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, strlen(field)) == 0)
            kb = strtol(line + strlen(field), NULL, 10);
    fclose(f);
    ck_assert_int_gt(kb, 0);
    return kb;
}

long tn_hwm_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");

    if (f) {
        fputs("5", f);
        fclose(f);
    }
    return tn_status_kb("VmRSS:");
}
