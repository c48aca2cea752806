/* The QDL against nodes that try to make it hold memory, or work, without end (issue 34): a node
 * that floods Pings and never reads, Response metadata of 16 MiB of empty results (0a 00), a node
 * that rejects every sample and reconnects, a node that reports more time than the round trip.
 * Each asserts the test process's peak RSS (VmHWM, from /proc; the QDL and the fake nodes live in
 * it) stays under a bound, that the run ends, and the line the QDL writes about the node. */
#include "../unit/check_main.h"
#include "qdlrun.h"
#include "testnet.h"
#include "tnlisten.h"

#include "cmn/clock.h"
#include "cmn/conn.h"
#include "cmn/digest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Peak RSS growth allowed over a test (the attacks before issue 34: 1 to 4 GB). */
#define RSS_GROWTH_MAX_KB (256L * 1024)

/* ---- /proc and the QDL's log ----------------------------------------------------------------- */

static void expect_hwm_within(const char *what, long base_kb)
{
    long hwm = tn_status_kb("VmHWM:");

    printf("%s: peak RSS %ld MB, %ld MB over the %ld MB at the start\n", what, hwm / 1024,
           (hwm - base_kb) / 1024, base_kb / 1024);
    ck_assert_msg(hwm - base_kb < RSS_GROWTH_MAX_KB, "%s: peak RSS grew by %ld kB", what,
                  hwm - base_kb);
}

/* The QDL logs to stderr (one write per line): the test sends stderr to a file to read it. */
static char cap_path[64];
static int cap_saved = -1;

static void cap_begin(void)
{
    int fd;

    snprintf(cap_path, sizeof(cap_path), "/tmp/qdlmem_XXXXXX");
    fd = mkstemp(cap_path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    cap_saved = dup(2);
    ck_assert_int_ge(dup2(fd, 2), 0);
    close(fd);
}

/* What the QDL wrote so far (free it). */
static char *cap_read(void)
{
    FILE *f = fopen(cap_path, "r");
    char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;

    for (hay = strstr(hay, needle); hay; hay = strstr(hay + 1, needle))
        n++;
    return n;
}

/* Waits (up to |timeout_ms|) until the log holds |needle|; returns whether it does. */
static int cap_wait(const char *needle, int timeout_ms)
{
    uint64_t end = cmn_now_ns() + (uint64_t)timeout_ms * 1000000u;

    for (;;) {
        char *log = cap_read();
        int found = strstr(log, needle) != NULL;
        free(log);
        if (found || cmn_now_ns() > end)
            return found;
        usleep(20000);
    }
}

/* Puts stderr back, copies the captured lines to it, and returns them (free it). */
static char *cap_end(void)
{
    char *log = cap_read();

    dup2(cap_saved, 2);
    close(cap_saved);
    unlink(cap_path);
    fputs(log, stderr);
    return log;
}

/* ---- fake nodes on one loop thread (tcp:// or ucx://, tnlisten.c) ---------------------------- */

enum {
    M_PING_FLOOD, /* after the handshake: Pings as fast as it can send, never reading */
    M_REJECT,     /* rejects every sample, then closes; the QDL reconnects */
    M_TIMES,      /* digest results, reporting node times far past the round trip */
};

#define MAX_FLOOD 8
#define REJECT_CLOSE_MS 100

typedef struct {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    uv_timer_t tick;
    tn_listener_t *server;
    int port, mode;
    cmn_conn_t *flood[MAX_FLOOD]; /* M_PING_FLOOD: the connections it floods */
    cmn_conn_t *rejected_on;      /* M_REJECT: the connection to close (on_tick) */
    uint64_t rejected_ns;         /* when it first rejected */
    atomic_ullong pings_sent, samples_seen, handshakes;
} fake_t;

static fake_t F;

static void free_sent(void *arg, int status)
{
    (void)status;
    free(arg);
}

/* One result per sample of |q|: 8 bytes (M_TIMES) or REJECTED (M_REJECT). */
static void answer(cmn_conn_t *c, const Nsut__Query *q)
{
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result *res = calloc(q->n_samples, sizeof(*res));
    Nsut__Result **rp = calloc(q->n_samples, sizeof(*rp));
    uint8_t *out = malloc(8 * q->n_samples);
    struct iovec iov = {out, 0};
    size_t i;

    for (i = 0; i < q->n_samples; i++) {
        nsut__result__init(&res[i]);
        res[i].id = q->samples[i]->id;
        rp[i] = &res[i];
        if (F.mode == M_REJECT) {
            res[i].status = NSUT__STATUS__STATUS_REJECTED;
        } else {
            res[i].raw_size = res[i].wire_size = 8;
            res[i].node_queue_ns = 10000000000ull;
            res[i].node_backend_ns = UINT64_MAX - 5;
            cmn_digest_put(out + iov.iov_len, 0); /* not checked: wire bytes, not raw */
            iov.iov_len += 8;
        }
    }
    r.n_results = q->n_samples;
    r.results = rp;
    cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, iov.iov_len ? &iov : NULL, iov.iov_len ? 1 : 0,
                  free_sent, out);
    free(res);
    free(rp);
}

static void hello_ack(cmn_conn_t *c)
{
    Nsut__HelloAck a = NSUT__HELLO_ACK__INIT;
    Nsut__Codec codecs[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    size_t i;

    a.version = CMN_PROTOCOL_VERSION;
    a.n_sample_codecs = 2; /* the run's samples are partly LZ4 */
    a.sample_codecs = codecs;
    a.node_name = (char *)(F.mode == M_PING_FLOOD ? "flood"
                           : F.mode == M_REJECT   ? "rejecter"
                                                  : "liar");
    cmn_conn_send(c, CMN_MSG_HELLO_ACK, &a.base, NULL, 0, NULL, NULL);
    cmn_conn_set_limits(c, &lim);
    atomic_fetch_add(&F.handshakes, 1);
    if (F.mode != M_PING_FLOOD)
        return;
    /* From now on it never reads: what the QDL sends it stays in the QDL's queue. */
    cmn_conn_read_pause(c);
    for (i = 0; i < MAX_FLOOD; i++)
        if (!F.flood[i]) {
            F.flood[i] = c;
            break;
        }
}

static void fake_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;

    if (cmn_msg_unpack(f, &lim, NULL, &m, &eb) < 0)
        return;
    if (f->hdr.type == CMN_MSG_HELLO) {
        hello_ack(c);
    } else if (f->hdr.type == CMN_MSG_QUERY) {
        const Nsut__Query *q = (const Nsut__Query *)m;
        atomic_fetch_add(&F.samples_seen, q->n_samples);
        answer(c, q);
        /* The rejecter closes REJECT_CLOSE_MS after its first rejection, not at once: over
         * ucx:// shared memory a close just after the send can overtake the Response. */
        if (F.mode == M_REJECT && !F.rejected_on) {
            F.rejected_on = c;
            F.rejected_ns = cmn_now_ns();
        }
    } else if (f->hdr.type == CMN_MSG_PING) {
        Nsut__Pong p = NSUT__PONG__INIT;
        p.seq = ((Nsut__Ping *)m)->seq;
        p.sent_ns = ((Nsut__Ping *)m)->sent_ns;
        cmn_conn_send(c, CMN_MSG_PONG, &p.base, NULL, 0, NULL, NULL);
    }
    cmn_msg_free(m, NULL);
}

static void fake_on_close(cmn_conn_t *c, int reason)
{
    size_t i;
    (void)reason;

    if (F.rejected_on == c)
        F.rejected_on = NULL;
    for (i = 0; i < MAX_FLOOD; i++)
        if (F.flood[i] == c)
            F.flood[i] = NULL;
}

/* Every 2 ms: the rejecter's close when due; up to 64 Pings on each flooded connection while its
 * own queue is short (the fake lives in the test process: its memory must stay small too). */
static void on_tick(uv_timer_t *t)
{
    Nsut__Ping p = NSUT__PING__INIT;
    size_t i, k;
    (void)t;

    if (F.rejected_on && cmn_now_ns() - F.rejected_ns > REJECT_CLOSE_MS * 1000000ull) {
        cmn_conn_shutdown(F.rejected_on, CMN_ECLOSED);
        F.rejected_on = NULL;
    }
    for (i = 0; i < MAX_FLOOD; i++) {
        for (k = 0; F.flood[i] && k < 64 && cmn_conn_backlog(F.flood[i]) < 65536; k++) {
            p.seq = atomic_fetch_add(&F.pings_sent, 1) + 1;
            p.sent_ns = cmn_now_ns();
            cmn_conn_send(F.flood[i], CMN_MSG_PING, &p.base, NULL, 0, NULL, NULL);
        }
    }
}

static void on_stop(uv_async_t *a)
{
    uv_close((uv_handle_t *)a, NULL);
    uv_close((uv_handle_t *)&F.tick, NULL);
    tn_listener_close(F.server);
}

static void fake_main(void *arg)
{
    (void)arg;
    uv_run(&F.loop, UV_RUN_DEFAULT);
}

static void fake_start(int mode)
{
    tn_listen_options_t lo = {
        .cb = {.on_frame = fake_on_frame, .on_close = fake_on_close},
        .limits = cmn_frame_limits_preauth(),
    };

    memset(&F, 0, sizeof(F));
    F.mode = mode;
    ck_assert_int_eq(uv_loop_init(&F.loop), 0);
    uv_async_init(&F.loop, &F.stop, on_stop);
    uv_timer_init(&F.loop, &F.tick);
    uv_timer_start(&F.tick, on_tick, 2, 2);
    ck_assert_int_eq(tn_listen(&F.loop, &lo, &F.server), 0);
    F.port = tn_listener_port(F.server);
    ck_assert_int_eq(uv_thread_create(&F.thread, fake_main, NULL), 0);
}

static void fake_stop(void)
{
    uv_async_send(&F.stop);
    uv_thread_join(&F.thread);
    ck_assert_int_eq(uv_loop_close(&F.loop), 0);
}

/* A QDL config for the fake first and, with |good|, a digest sut-node second. */
static char addr_buf[2][40];

static void config(qdl_config_t *cfg, const char **list, int fake_port, const tn_proc_t *good)
{
    snprintf(addr_buf[0], sizeof(addr_buf[0]), "%s127.0.0.1:%d", tn_scheme(), fake_port);
    list[0] = addr_buf[0];
    if (good) {
        snprintf(addr_buf[1], sizeof(addr_buf[1]), "%s127.0.0.1:%d", tn_scheme(), good->port);
        list[1] = addr_buf[1];
    }
    qdl_config_init(cfg);
    cfg->nodes = list;
    cfg->n_nodes = good ? 2 : 1;
    cfg->on_complete = on_complete;
    cfg->reconnect_max_ms = 200;
    cfg->ucx_busy_poll = tn_ucx_busy_poll();
    cfg->ucx_trusted_fabric = 1; /* loopback: the tests' own fabric */
}

/* ---- a Ping flood from a node that never reads ----------------------------------------------- */

START_TEST(ping_flood_without_reading)
{
    /* The fake writes Pings to a connection the QDL has closed: EPIPE, not a signal. */
    ck_assert(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
    const char *args[] = {"--backend", "digest", "--name", "good", NULL};
    const char *list[2];
    qdl_config_t cfg;
    tn_proc_t good;
    qdl_t *q = NULL;
    char err[256], *log;
    long base;

    fake_start(M_PING_FLOOD);
    ck_assert_int_eq(tn_spawn(&good, SUT_NODE_EXE, args), 0);
    run_init(2000, 512, 1);
    config(&cfg, list, F.port, &good);
    cfg.policy = QDL_POLICY_ROUND_ROBIN;
    cfg.progress_timeout_ms = 2000;
    cap_begin();
    base = tn_hwm_reset();
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    issue_paced(q, 0, 2000, 1000);
    /* The run ends: the good node completes every sample, whatever the flood does. */
    ck_assert_uint_eq(wait_done(2000, 60000), 2000);
    ck_assert(cap_wait("qdl: node flood (connection 0): sent more than 100 Pings within one "
                       "second, over the limit of 100 (a node pings once per heartbeat): a "
                       "flood, node dropped",
                       20000));
    qdl_destroy(q);
    expect_hwm_within("ping flood", base);
    log = cap_end();
    printf("ping flood: %llu Pings sent, %llu handshakes, the node dropped %zu times\n",
           (unsigned long long)atomic_load(&F.pings_sent),
           (unsigned long long)atomic_load(&F.handshakes),
           count_of(log, "over the limit of 100 (a node pings"));
    free(log);
    expect_exactly_once(1);
    fake_stop();
    ck_assert_int_eq(tn_stop(&good, SIGTERM, 10000), 0);
    tn_cleanup(&good);
    run_free();
}
END_TEST

/* ---- a node that rejects every sample and reconnects ----------------------------------------- */

START_TEST(reject_and_reconnect_ends)
{
    enum { N = 20, MAX_DISPATCHES = 3 };
    const char *list[1];
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256], *log;
    long base;

    fake_start(M_REJECT);
    run_init(N, 256, 0);
    config(&cfg, list, F.port, NULL);
    cfg.max_dispatches = MAX_DISPATCHES;
    cfg.fail_timeout_ms = 60000; /* the samples must fail for their dispatches, not the outage */
    cap_begin();
    base = tn_hwm_reset();
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    issue_range(q, 0, N, 1);
    /* Before issue 34 one sample was sent 42 times in 90 s and the run never ended. */
    ck_assert_uint_eq(wait_done(N, 60000), N);
    qdl_destroy(q);
    expect_hwm_within("reject and reconnect", base);
    log = cap_end();
    ck_assert_uint_eq(expect_once_or_failed(), N);
    printf("reject and reconnect: %llu samples received by the node for %d samples, %llu "
           "handshakes\n",
           (unsigned long long)atomic_load(&F.samples_seen), N,
           (unsigned long long)atomic_load(&F.handshakes));
    ck_assert_uint_le(atomic_load(&F.samples_seen), (unsigned long long)N * MAX_DISPATCHES);
    ck_assert_msg(strstr(log, "qdl: node rejecter rejected a sample (response id ") != NULL &&
                      strstr(log, ") that was sent 3 times, the limit (max_dispatches): sample "
                                  "failed") != NULL,
                  "no line about a rejected sample's dispatches");
    free(log);
    fake_stop();
    run_free();
}
END_TEST

/* ---- a node that reports more time than the round trip took ---------------------------------- */

static atomic_ullong times_too_long, times_reported;

static void times_on_complete(void *user, const qdl_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns();
    size_t i;

    for (i = 0; i < n; i++) {
        if (r[i].status < 0)
            continue;
        atomic_fetch_add(&times_reported, r[i].node_queue_ns + r[i].node_backend_ns > 0);
        if (r[i].node_queue_ns + r[i].node_backend_ns > now - r[i].sent_ns ||
            r[i].node_queue_ns + r[i].node_backend_ns < r[i].node_queue_ns)
            atomic_fetch_add(&times_too_long, 1);
    }
    on_complete(user, r, n);
}

START_TEST(node_times_past_the_round_trip_are_clamped)
{
    const char *list[1];
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256], *log;

    atomic_store(&times_too_long, 0);
    atomic_store(&times_reported, 0);
    fake_start(M_TIMES);
    run_init(500, 256, 0);
    config(&cfg, list, F.port, NULL);
    cfg.on_complete = times_on_complete;
    cap_begin();
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    issue_range(q, 0, 500, 10);
    ck_assert_uint_eq(wait_done(500, 30000), 500);
    qdl_destroy(q);
    log = cap_end();
    expect_exactly_once(0);
    /* Clamped to the round trip, and not to nothing: the node's time fills it. */
    ck_assert_uint_eq(atomic_load(&times_too_long), 0);
    ck_assert_uint_eq(atomic_load(&times_reported), 500);
    /* One warning for the node, however many results lied. */
    ck_assert_uint_eq(count_of(log, "its times are clamped to the round trip"), 1);
    ck_assert_ptr_nonnull(strstr(log, "qdl: node liar reports 10000000000 ns queued + "
                                      "18446744073709551610 ns in its backend for id "));
    free(log);
    fake_stop();
    run_free();
}
END_TEST

/* ---- Response metadata of 16 MiB of empty results -------------------------------------------- */

/* A node on a plain blocking socket (tcp:// only: it writes a frame header that no cmn_conn would
 * write for the metadata it sends, which the ucx:// framing cannot carry): handshakes, then sends
 * one Response whose metadata is 16 MiB of 0a 00, 8 Mi empty results; then reads until the QDL
 * closes. Each connection the same, until the listening socket is shut down. */
typedef struct {
    int lfd, port;
    uint64_t window;      /* advertised max_inflight_samples (0: none) */
    uint32_t payload_len; /* non-zero: a Response of no results with this payload instead */
    uint8_t *meta;
    uv_thread_t thread;
    atomic_int connections;
} bomb_t;

#define BOMB_META (16u << 20)

static int read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n) {
        ssize_t k = read(fd, p, n);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_full(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;

    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void bomb_serve(bomb_t *b, int fd)
{
    cmn_frame_limits_t pre = cmn_frame_limits_preauth();
    Nsut__HelloAck a = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    cmn_frame_header_t h;
    uint8_t hb[CMN_FRAME_HEADER_SIZE], body[CMN_FRAME_PREAUTH_MAX], out[512];
    long n;

    if (read_full(fd, hb, sizeof(hb)) < 0 || cmn_frame_header_parse(hb, &pre, &h) < 0 ||
        read_full(fd, body, (size_t)h.meta_len + h.payload_len) < 0)
        return;
    a.version = CMN_PROTOCOL_VERSION;
    a.node_name = (char *)"bomb";
    if (b->window) {
        caps.max_inflight_samples = b->window;
        a.caps = &caps;
    }
    n = cmn_frame_encode_head(CMN_MSG_HELLO_ACK, &a.base, 0, out, sizeof(out));
    if (n <= 0 || send_full(fd, out, (size_t)n) < 0)
        return;
    memset(&h, 0, sizeof(h));
    h.version = CMN_PROTOCOL_VERSION;
    h.type = CMN_MSG_RESPONSE;
    h.meta_len = b->payload_len ? 2 : BOMB_META;
    h.payload_len = b->payload_len;
    cmn_frame_header_write(hb, &h);
    if (send_full(fd, hb, sizeof(hb)) < 0)
        return;
    /* The QDL may close before it has it all. */
    (void)send_full(fd, b->meta, (size_t)h.meta_len + h.payload_len);
    while (read(fd, body, sizeof(body)) > 0) {
    }
}

static void bomb_main(void *arg)
{
    bomb_t *b = arg;
    int fd;

    while ((fd = accept(b->lfd, NULL, NULL)) >= 0) {
        atomic_fetch_add(&b->connections, 1);
        bomb_serve(b, fd);
        close(fd);
    }
}

static void bomb_start(bomb_t *b, uint64_t window, uint32_t payload_len)
{
    struct sockaddr_in a = tn_loopback(0);
    socklen_t al = sizeof(a);
    size_t i;

    memset(b, 0, sizeof(*b));
    b->window = window;
    b->payload_len = payload_len;
    b->meta = malloc(BOMB_META);
    ck_assert_ptr_nonnull(b->meta);
    for (i = 0; i < BOMB_META; i += 2) {
        b->meta[i] = 0x0a; /* field 1 (results), length-delimited */
        b->meta[i + 1] = 0x00;
    }
    b->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(b->lfd, 0);
    ck_assert_int_eq(bind(b->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(b->lfd, 8), 0);
    ck_assert_int_eq(getsockname(b->lfd, (struct sockaddr *)&a, &al), 0);
    b->port = ntohs(a.sin_port);
    ck_assert_int_eq(uv_thread_create(&b->thread, bomb_main, b), 0);
}

static void bomb_stop(bomb_t *b)
{
    shutdown(b->lfd, SHUT_RDWR); /* accept() returns */
    uv_thread_join(&b->thread);
    close(b->lfd);
    free(b->meta);
}

/* |window| 0: the metadata is over the limit the window sets, refused by the frame header;
 * 1 Mi: the limit is the frame's 16 MiB, and the 8 Mi results are counted before unpacking. */
static void big_meta(const char *what, uint64_t window, uint32_t payload_len, uint64_t budget,
                     const char *line)
{
    const char *list[1];
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256], *log;
    bomb_t b;
    long base;

    bomb_start(&b, window, payload_len);
    snprintf(addr_buf[0], sizeof(addr_buf[0]), "127.0.0.1:%d", b.port);
    list[0] = addr_buf[0];
    qdl_config_init(&cfg);
    cfg.nodes = list;
    cfg.n_nodes = 1;
    cfg.on_complete = on_complete;
    if (budget)
        cfg.node_memory_budget = budget;
    cap_begin();
    base = tn_hwm_reset();
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(cap_wait(line, 20000), "no line '%s'", line);
    qdl_destroy(q);
    expect_hwm_within(what, base);
    log = cap_end();
    free(log);
    bomb_stop(&b);
}

START_TEST(big_metadata_refused_by_its_header)
{
    big_meta("16 MiB of empty results, window 64 Ki", 0, 0, 0,
             "qdl: node bomb (connection 0): frame rejected by its header: Response metadata "
             "of 16777216 bytes, over the limit of 5246976 (65536 results in flight at most)");
}
END_TEST

START_TEST(big_metadata_counted_before_unpacking)
{
    big_meta("16 MiB of empty results, window 1 Mi", 1u << 20, 0, 0,
             "qdl: node bomb (connection 0): bad Response frame: Response has 8388608 "
             "results, over the limit of 1048576");
}
END_TEST

/* ---- the node memory budget ------------------------------------------------------------------ */

/* A budget of 1 MiB for one node: the QDL advertises and accepts frames of 1 MiB at most, and a
 * Response of 2 MiB is refused by its header, naming the share. */
START_TEST(a_frame_over_the_nodes_share_is_refused)
{
    big_meta("2 MiB frame, 1 MiB budget", 0, 2u << 20, 1u << 20,
             "qdl: node bomb (connection 0): frame rejected by its header: Response of 2 metadata "
             "+ 2097152 payload bytes, over the limit of 1048576 (the connection's share of the "
             "node memory budget)");
}
END_TEST

/* Under 16 KiB per connection is refused at once, naming the budget and the connections. */
START_TEST(a_budget_too_small_is_refused)
{
    const char *list[2] = {"127.0.0.1:1", "127.0.0.1:2"};
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256] = "";

    qdl_config_init(&cfg);
    cfg.nodes = list;
    cfg.n_nodes = 2;
    cfg.connections_per_node = 2;
    cfg.on_complete = on_complete;
    cfg.node_memory_budget = 60u << 10;
    ck_assert_int_eq(qdl_create(&cfg, &q, err, sizeof(err)), CMN_ECONFIG);
    ck_assert_str_eq(err, "node memory budget of 61440 bytes: under 16 KiB for each of 4 "
                          "connections (2 nodes x 2)");
}
END_TEST

CHECK_TCASE(tc_node, "memory_node", 120, ping_flood_without_reading, reject_and_reconnect_ends,
            node_times_past_the_round_trip_are_clamped)

CHECK_TCASE(tc_meta, "memory_meta", 60, big_metadata_refused_by_its_header,
            big_metadata_counted_before_unpacking, a_frame_over_the_nodes_share_is_refused,
            a_budget_too_small_is_refused)

CHECK_MAIN("qdl memory", tc_node, tc_meta)
