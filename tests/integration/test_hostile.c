/* Hostile peers. A malicious node answers the QDL with results for ids it never received,
 * duplicates every result, and once sends garbage: every sample must still complete exactly once
 * with the right bytes. And thousands of half-open connections against sut-node: a good client is
 * served while they are open, and the node drops them all after its handshake deadline. And a
 * node's words: its not-ready reason reaches the caller made printable, a failure's reason only
 * when it is what a node must send (printable, at most 240 bytes).
 * (The sut-node bad-frame classes are in test_sut.c, cases bad_input and limits.) */
#include "../unit/check_main.h"
#include "qdlrun.h"
#include "testnet.h"
#include "tnlisten.h"

#include "cmn/clock.h"
#include "cmn/conn.h"
#include "cmn/digest.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a malicious node --------------------------------------------------------------------- */

typedef struct {
    uv_loop_t loop;
    tn_listener_t *server; /* tcp:// or ucx://, as the test runs */
    uv_async_t stop;
    uv_thread_t thread;
    int port;
    int garbage_sent;
    size_t queries;
} evil_t;

static evil_t evil;

static void free_sent(void *arg, int status)
{
    (void)status;
    free(arg);
}

static void send_results(cmn_conn_t *c, Nsut__Query *q, const uint8_t *payload, uint64_t id_offset)
{
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result *res = calloc(q->n_samples, sizeof(*res));
    Nsut__Result **rp = calloc(q->n_samples, sizeof(*rp));
    uint8_t *out = malloc(8 * q->n_samples);
    struct iovec iov = {out, 8 * q->n_samples};
    const uint8_t *p = payload;
    size_t i;

    for (i = 0; i < q->n_samples; i++) {
        nsut__result__init(&res[i]);
        res[i].id = q->samples[i]->id + id_offset;
        res[i].raw_size = res[i].wire_size = 8;
        rp[i] = &res[i];
        cmn_digest_put(out + 8 * i, id_offset ? 0 : cmn_digest64(p, q->samples[i]->wire_size));
        p += q->samples[i]->wire_size;
    }
    r.n_results = q->n_samples;
    r.results = rp;
    cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, &iov, 1, free_sent, out);
    free(res);
    free(rp);
}

static void evil_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_HELLO) {
        Nsut__HelloAck a = NSUT__HELLO_ACK__INIT;
        cmn_frame_limits_t dl = cmn_frame_limits_default();
        a.version = 1;
        a.node_name = (char *)"evil";
        cmn_conn_send(c, CMN_MSG_HELLO_ACK, &a.base, NULL, 0, NULL, NULL);
        cmn_conn_set_limits(c, &dl);
    } else if (f->hdr.type == CMN_MSG_QUERY) {
        Nsut__Query *q = (Nsut__Query *)m;
        evil.queries++;
        /* A result for ids nobody sent, the true result, then the same result again. */
        send_results(c, q, f->payload, 1000000000u);
        send_results(c, q, f->payload, 0);
        send_results(c, q, f->payload, 0);
        if (evil.queries == 50 && !evil.garbage_sent) {
            static const uint8_t junk[32] = "garbage where a frame should be";
            struct iovec iov = {(void *)junk, sizeof(junk)};
            Nsut__Response r = NSUT__RESPONSE__INIT;
            Nsut__Result x = NSUT__RESULT__INIT, *xp = &x;
            /* A Response whose sizes do not add up: the QDL must close, not trust it. */
            x.id = 1;
            x.raw_size = x.wire_size = 8;
            r.n_results = 1;
            r.results = &xp;
            cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, &iov, 1, NULL, NULL);
            evil.garbage_sent = 1;
        }
    } else if (f->hdr.type == CMN_MSG_PING) {
        Nsut__Pong p = NSUT__PONG__INIT;
        p.seq = ((Nsut__Ping *)m)->seq;
        cmn_conn_send(c, CMN_MSG_PONG, &p.base, NULL, 0, NULL, NULL);
    }
    cmn_msg_free(m, NULL);
}

static void evil_on_stop(uv_async_t *a)
{
    uv_close((uv_handle_t *)a, NULL);
    tn_listener_close(evil.server); /* and the connections */
}

static void evil_main(void *arg)
{
    (void)arg;
    uv_run(&evil.loop, UV_RUN_DEFAULT);
}

START_TEST(malicious_node_cannot_complete_twice)
{
    const char *good[] = {"--backend", "digest", "--name", "good", NULL};
    tn_listen_options_t lo = {.cb = {.on_frame = evil_on_frame},
                              .limits = cmn_frame_limits_preauth()};
    qdl_node_stats_t st[2];
    qdl_config_t cfg;
    tn_proc_t node;
    char addr0[32], addr1[32], err[256];
    const char *list[2] = {addr0, addr1};
    qdl_t *q = NULL;

    memset(&evil, 0, sizeof(evil));
    uv_loop_init(&evil.loop);
    uv_async_init(&evil.loop, &evil.stop, evil_on_stop);
    ck_assert_int_eq(tn_listen(&evil.loop, &lo, &evil.server), 0);
    evil.port = tn_listener_port(evil.server);
    uv_thread_create(&evil.thread, evil_main, NULL);
    ck_assert_int_eq(tn_spawn(&node, SUT_NODE_EXE, good), 0);

    run_init(3000, 512, 1);
    snprintf(addr0, sizeof(addr0), "%s127.0.0.1:%d", tn_scheme(), evil.port);
    snprintf(addr1, sizeof(addr1), "%s127.0.0.1:%d", tn_scheme(), node.port);
    qdl_config_init(&cfg);
    cfg.ucx_trusted_fabric = 1; /* loopback: the tests' own fabric */
    cfg.nodes = list;
    cfg.n_nodes = 2;
    cfg.on_complete = on_complete;
    cfg.policy = QDL_POLICY_ROUND_ROBIN;
    cfg.reconnect_max_ms = 200;
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    issue_paced(q, 0, 3000, 100);
    ck_assert_uint_eq(wait_done(3000, 30000), 3000);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    /* Destroying the QDL joins its thread: the check below then covers every result it ever
     * delivered, the late duplicates of the last queries included. */
    qdl_destroy(q);
    /* Exactly once, and the right bytes: stray and duplicate results never reached the caller. */
    expect_exactly_once(1);
    printf("malicious node: %llu stray or duplicate results dropped, %llu samples re-dispatched\n",
           (unsigned long long)st[0].errors, (unsigned long long)st[0].redispatched);
    ck_assert_uint_gt(st[0].errors, 1000);
    ck_assert_int_eq(evil.garbage_sent, 1);
    uv_async_send(&evil.stop);
    uv_thread_join(&evil.thread);
    uv_loop_close(&evil.loop);
    ck_assert_int_eq(tn_stop(&node, SIGTERM, 10000), 0);
    tn_cleanup(&node);
    run_free();
}
END_TEST

/* ---- thousands of half-open connections ----------------------------------------------------- */

#define HALF_OPEN 2000

/* One StatsRequest round trip on |c| (free the answer with cmn_msg_free). */
static Nsut__Stats *stats(tn_client_t *c)
{
    Nsut__StatsRequest sr = NSUT__STATS_REQUEST__INIT;
    ProtobufCMessage *m;
    unsigned type;

    ck_assert_int_eq(tn_send(c, CMN_MSG_STATS_REQUEST, &sr.base, NULL, 0), 0);
    ck_assert_int_eq(tn_recv(c, 10000, &type, &m, NULL, NULL), 0);
    ck_assert_uint_eq(type, CMN_MSG_STATS);
    return (Nsut__Stats *)m;
}

START_TEST(half_open_flood)
{
    const char *args[] = {"--backend",
                          "digest",
                          "--max-connections",
                          "4096",
                          "--max-conn-per-peer",
                          "4096",
                          "--handshake-timeout-ms",
                          "1500",
                          NULL};
    static int fds[HALF_OPEN];
    struct sockaddr_in a;
    tn_proc_t p;
    tn_client_t c;
    const int codecs[1] = {0};
    Nsut__HelloAck *ack;
    Nsut__Stats *st;
    uint64_t t0, served_ms, total, deadline;
    int i, open_now;

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    a = tn_loopback(p.port);
    t0 = cmn_now_ns();
    for (i = 0; i < HALF_OPEN; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&a, sizeof(a)), 0);
        if (i % 2) /* half of them also start a frame and stop */
            ck_assert_int_eq(write(fds[i], "NSUT\x01", 5), 5);
    }
    /* A good client is served while the flood is open. */
    ck_assert_int_eq(tn_connect(&c, p.port), 0);
    ack = tn_handshake(&c, codecs, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    st = stats(&c);
    served_ms = (cmn_now_ns() - t0) / 1000000u;
    open_now = (int)st->connections_open;
    total = st->connections_total;
    cmn_msg_free(&st->base, NULL);
    printf("half-open flood: %d connections open at the node while serving a good client "
           "(%llu accepted, %llu ms after the first)\n",
           open_now, (unsigned long long)total, (unsigned long long)served_ms);
    /* The node accepts in order: the good client comes after every half-open one. */
    ck_assert_uint_ge(total, HALF_OPEN + 1);
    /* None of them can have reached its 1500 ms deadline yet when the good client was served
     * sooner than that after the first connect; on a machine too busy for that, the count of
     * accepted connections above is what can be asserted. */
    if (served_ms < 1500)
        ck_assert_int_eq(open_now, HALF_OPEN + 1);
    /* Each half-open connection is closed at its handshake deadline: in the end only the good
     * client is left (polled, however busy the machine is). */
    deadline = cmn_now_ns() + 30000000000ull;
    for (;;) {
        st = stats(&c);
        open_now = (int)st->connections_open;
        cmn_msg_free(&st->base, NULL);
        if (open_now == 1 || cmn_now_ns() > deadline)
            break;
        usleep(50000);
    }
    ck_assert_int_eq(open_now, 1);
    ck_assert(tn_wait_log(&p, "no Hello within 1500 ms", 10000));
    for (i = 0; i < HALF_OPEN; i++)
        close(fds[i]);
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

/* ---- a node's words: reasons for failures and for not being ready ------------------------- */

/* Reasons a node may send with a failure: one as a node must send it (printable, at most 240
 * bytes), one with control bytes, one too long. Only the first reaches the caller. */
#define GOOD_REASON "HTTP 400: token id 9999 is outside the vocabulary (0..511)"

static atomic_int words_ready;  /* the fake node's next HelloAck says ready (loop thread) */
static char words_seen[3][300]; /* what on_complete got as error, per sample */
static int words_null[3];
static atomic_int words_done;

static void words_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_HELLO) {
        Nsut__HelloAck a = NSUT__HELLO_ACK__INIT;
        cmn_frame_limits_t dl = cmn_frame_limits_default();
        a.version = 1;
        a.node_name = (char *)"words";
        if (!atomic_load(&words_ready)) {
            a.not_ready = 1;
            a.not_ready_reason = (char *)"HTTP 503: Loading\x1b[31m model\n\"quoted\"";
        }
        cmn_conn_send(c, CMN_MSG_HELLO_ACK, &a.base, NULL, 0, NULL, NULL);
        cmn_conn_set_limits(c, &dl);
    } else if (f->hdr.type == CMN_MSG_QUERY) {
        Nsut__Query *q = (Nsut__Query *)m;
        Nsut__Response r = NSUT__RESPONSE__INIT;
        Nsut__Result res[8], *rp[8];
        static char longer[400];
        size_t i;

        memset(longer, 'x', sizeof(longer) - 1);
        for (i = 0; i < q->n_samples && i < 8; i++) {
            nsut__result__init(&res[i]);
            res[i].id = q->samples[i]->id;
            res[i].status = NSUT__STATUS__STATUS_BACKEND_ERROR;
            /* The QDL numbers wire ids from 1 in issue order: sample k has id k + 1. */
            res[i].error = q->samples[i]->id == 1   ? (char *)GOOD_REASON
                           : q->samples[i]->id == 2 ? (char *)"bad\x01\x7f reason"
                                                    : longer;
            rp[i] = &res[i];
        }
        r.n_results = i;
        r.results = rp;
        cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, NULL, 0, NULL, NULL);
    } else if (f->hdr.type == CMN_MSG_PING) {
        Nsut__Pong p = NSUT__PONG__INIT;
        p.seq = ((Nsut__Ping *)m)->seq;
        cmn_conn_send(c, CMN_MSG_PONG, &p.base, NULL, 0, NULL, NULL);
    }
    cmn_msg_free(m, NULL);
}

static void words_on_complete(void *user, const qdl_response_t *r, size_t n)
{
    size_t i;

    (void)user;
    for (i = 0; i < n; i++) {
        uint64_t k = r[i].response_id;
        ck_assert_uint_lt(k, 3);
        ck_assert_int_lt(r[i].status, 0);
        ck_assert_str_eq(r[i].node, "words");
        words_null[k] = r[i].error == NULL;
        snprintf(words_seen[k], sizeof(words_seen[k]), "%s", r[i].error ? r[i].error : "");
        atomic_fetch_add(&words_done, 1);
    }
}

START_TEST(node_words_are_checked)
{
    tn_listen_options_t lo = {.cb = {.on_frame = words_on_frame},
                              .limits = cmn_frame_limits_preauth()};
    static const uint8_t bytes[3][4] = {{1}, {2}, {3}};
    qdl_sample_t smp[3];
    qdl_config_t cfg;
    char addr[32], err[512];
    const char *list[1] = {addr};
    qdl_t *q = NULL;
    uint64_t end;
    size_t i;

    memset(&evil, 0, sizeof(evil));
    atomic_store(&words_ready, 0);
    atomic_store(&words_done, 0);
    uv_loop_init(&evil.loop);
    uv_async_init(&evil.loop, &evil.stop, evil_on_stop);
    ck_assert_int_eq(tn_listen(&evil.loop, &lo, &evil.server), 0);
    evil.port = tn_listener_port(evil.server);
    uv_thread_create(&evil.thread, evil_main, NULL);
    snprintf(addr, sizeof(addr), "%s127.0.0.1:%d", tn_scheme(), evil.port);
    qdl_config_init(&cfg);
    cfg.ucx_trusted_fabric = 1;
    cfg.nodes = list;
    cfg.n_nodes = 1;
    cfg.on_complete = words_on_complete;
    /* Not ready: refused at once, the node's reason made printable (no escape, no newline). */
    ck_assert_int_eq(qdl_create(&cfg, &q, err, sizeof(err)), CMN_ENOTREADY);
    ck_assert_msg(strstr(err, "(node 'words') is not ready: HTTP 503: Loading?[31m model??quoted?"),
                  "%s", err);
    /* Ready with the next handshake: its failures' reasons reach the caller only when they are
     * what a node must send. */
    atomic_store(&words_ready, 1); /* read by the fake node's loop when the next Hello comes */
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    for (i = 0; i < 3; i++)
        smp[i] = (qdl_sample_t){.response_id = i, .data = bytes[i], .size = 4, .raw_size = 4};
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(qdl_issue_query(q, &smp[i], 1), 0);
    end = cmn_now_ns() + 20000000000ull;
    while (atomic_load(&words_done) < 3 && cmn_now_ns() < end)
        usleep(10000);
    qdl_destroy(q);
    ck_assert_int_eq(atomic_load(&words_done), 3);
    ck_assert_str_eq(words_seen[0], GOOD_REASON);
    ck_assert_int_eq(words_null[1], 1);
    ck_assert_int_eq(words_null[2], 1);
    uv_async_send(&evil.stop);
    uv_thread_join(&evil.thread);
    uv_loop_close(&evil.loop);
}
END_TEST

CHECK_TCASE(tc_words, "node_words", 60, node_words_are_checked)

CHECK_TCASE(tc_evil, "malicious_node", 60, malicious_node_cannot_complete_twice)

CHECK_TCASE(tc_flood, "half_open", 60, half_open_flood)

CHECK_MAIN("hostile", tc_evil, tc_flood, tc_words)
