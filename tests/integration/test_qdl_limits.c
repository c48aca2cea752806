/* The QDL against nodes that are stuck or break its limits (issue 16, the QDL's items): a fake
 * node that answers pings but never completes (Server with 3 nodes, SingleStream with and without
 * a good node), one that advertises a small frame limit, one that picks a result codec the QDL did
 * not offer, one whose results decode to more than the QDL accepts, one that streams a first
 * token and dies; and a plaintext QDL against a TLS node. Each asserts a deadline or a bound and
 * that every sample completes exactly once. */
#include "../unit/check_main.h"
#include "qdlrun.h"
#include "testnet.h"
#include "tnlisten.h"

#include "cmn/clock.h"
#include "cmn/conn.h"
#include "cmn/digest.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- fake nodes, all on one loop thread ------------------------------------------------------ */

enum {
    F_GOOD,        /* digest results at once */
    F_STUCK,       /* answers pings, never completes a sample */
    F_BAD_CODEC,   /* HelloAck picks LZ4 results although the QDL offered none */
    F_BOMB,        /* LZ4 results whose decoded sizes add up past the QDL's frame limit */
    F_STREAM,      /* a FirstToken, then the Response */
    F_STREAM_DIES, /* a FirstToken, then the connection closes */
};

#define MAX_FAKES 3

typedef struct {
    tn_listener_t *server; /* tcp:// or ucx://, as the test runs */
    int mode;
    int port;
    uint64_t max_frame;    /* advertised (0: none) */
    uint64_t largest;      /* largest Query frame received */
    uint64_t queries;      /* Query frames received */
    uint64_t frame_errors; /* frames its decoder rejected */
} fake_t;

typedef struct {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    fake_t f[MAX_FAKES];
    size_t n;
    uv_mutex_t mu;
} fakes_t;

static fakes_t F;

static void free_sent(void *arg, int status)
{
    (void)status;
    free(arg);
}

/* One result per sample of |q|: the digest of its wire bytes, as |type| (Response/FirstToken). */
static void send_digests(cmn_conn_t *c, unsigned type, const Nsut__Query *q, const uint8_t *payload)
{
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__FirstToken t = NSUT__FIRST_TOKEN__INIT;
    Nsut__Result *res = calloc(q->n_samples, sizeof(*res));
    Nsut__Result **rp = calloc(q->n_samples, sizeof(*rp));
    uint8_t *out = malloc(8 * q->n_samples);
    struct iovec iov = {out, 8 * q->n_samples};
    const uint8_t *p = payload;
    size_t i;

    for (i = 0; i < q->n_samples; i++) {
        nsut__result__init(&res[i]);
        res[i].id = q->samples[i]->id;
        res[i].raw_size = res[i].wire_size = 8;
        res[i].n_tokens = 1;
        rp[i] = &res[i];
        cmn_digest_put(out + 8 * i, cmn_digest64(p, q->samples[i]->wire_size));
        p += q->samples[i]->wire_size;
    }
    r.n_results = t.n_results = q->n_samples;
    r.results = t.results = rp;
    cmn_conn_send(c, type, type == CMN_MSG_RESPONSE ? &r.base : &t.base, &iov, 1, free_sent, out);
    free(res);
    free(rp);
}

/* LZ4 results that each claim 255 x their wire size: together far past the QDL's limit. */
static void send_bomb(cmn_conn_t *c, const Nsut__Query *q)
{
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result res[16], *rp[16];
    uint8_t *out = calloc(16, 1024);
    struct iovec iov = {out, 16 * 1024};
    size_t i, n = q->n_samples < 16 ? q->n_samples : 16;

    for (i = 0; i < n; i++) {
        nsut__result__init(&res[i]);
        res[i].id = q->samples[i]->id;
        res[i].codec = NSUT__CODEC__CODEC_LZ4;
        res[i].wire_size = 1024;
        res[i].raw_size = 255 * 1024;
        rp[i] = &res[i];
    }
    iov.iov_len = n * 1024;
    r.n_results = n;
    r.results = rp;
    cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, &iov, 1, free_sent, out);
}

static void hello_ack(fake_t *fk, cmn_conn_t *c)
{
    Nsut__HelloAck a = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    Nsut__Codec codecs[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    char name[32];

    snprintf(name, sizeof(name), "fake%d", fk->port);
    a.version = CMN_PROTOCOL_VERSION;
    a.node_name = name;
    a.n_sample_codecs = 2;
    a.sample_codecs = codecs;
    a.result_codec = fk->mode == F_BAD_CODEC || fk->mode == F_BOMB ? NSUT__CODEC__CODEC_LZ4
                                                                   : NSUT__CODEC__CODEC_NONE;
    caps.backend = (char *)"fake";
    caps.device = (char *)"none";
    caps.max_inflight_samples = 256;
    caps.streaming = fk->mode == F_STREAM || fk->mode == F_STREAM_DIES;
    if (fk->max_frame) {
        caps.max_frame_size = fk->max_frame;
        lim.max_frame = fk->max_frame;
    }
    a.caps = &caps;
    cmn_conn_send(c, CMN_MSG_HELLO_ACK, &a.base, NULL, 0, NULL, NULL);
    cmn_conn_set_limits(c, &lim);
}

static void on_query(fake_t *fk, cmn_conn_t *c, const Nsut__Query *q, const cmn_frame_t *f)
{
    uint64_t size = f->hdr.meta_len + (uint64_t)f->hdr.payload_len;

    uv_mutex_lock(&F.mu);
    fk->queries++;
    if (size > fk->largest)
        fk->largest = size;
    uv_mutex_unlock(&F.mu);
    switch (fk->mode) {
    case F_GOOD:
        send_digests(c, CMN_MSG_RESPONSE, q, f->payload);
        break;
    case F_BOMB:
        send_bomb(c, q);
        break;
    case F_STREAM:
        send_digests(c, CMN_MSG_FIRST_TOKEN, q, f->payload);
        send_digests(c, CMN_MSG_RESPONSE, q, f->payload);
        break;
    case F_STREAM_DIES:
        send_digests(c, CMN_MSG_FIRST_TOKEN, q, f->payload);
        cmn_conn_shutdown(c, CMN_ECLOSED);
        break;
    default: /* F_STUCK: holds it for ever */
        break;
    }
}

static void fake_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    fake_t *fk = c->data;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;

    if (cmn_msg_unpack(f, &lim, NULL, &m, &eb) < 0)
        return;
    if (f->hdr.type == CMN_MSG_HELLO) {
        hello_ack(fk, c);
    } else if (f->hdr.type == CMN_MSG_QUERY) {
        on_query(fk, c, (Nsut__Query *)m, f);
    } else if (f->hdr.type == CMN_MSG_PING) {
        Nsut__Pong p = NSUT__PONG__INIT;
        p.seq = ((Nsut__Ping *)m)->seq;
        p.sent_ns = ((Nsut__Ping *)m)->sent_ns;
        cmn_conn_send(c, CMN_MSG_PONG, &p.base, NULL, 0, NULL, NULL);
    } else if (f->hdr.type == CMN_MSG_NAME_REQUEST) {
        Nsut__NameReply r = NSUT__NAME_REPLY__INIT;
        char name[32];
        snprintf(name, sizeof(name), "fake%d", fk->port);
        r.request_id = ((Nsut__NameRequest *)m)->request_id;
        r.node_name = name;
        cmn_conn_send(c, CMN_MSG_NAME_REPLY, &r.base, NULL, 0, NULL, NULL);
    }
    cmn_msg_free(m, NULL);
}

static void fake_on_decode_error(cmn_conn_t *c, int err)
{
    fake_t *fk = c->data;

    uv_mutex_lock(&F.mu);
    fk->frame_errors++;
    uv_mutex_unlock(&F.mu);
    cmn_conn_close(c, err);
}

static void fakes_on_stop(uv_async_t *a)
{
    size_t i;

    uv_close((uv_handle_t *)a, NULL);
    for (i = 0; i < F.n; i++)
        tn_listener_close(F.f[i].server); /* and its connections */
}

static void fakes_main(void *arg)
{
    (void)arg;
    uv_run(&F.loop, UV_RUN_DEFAULT);
}

/* Starts |n| fake nodes with the given modes (max_frame 0: none advertised). */
static void fakes_start(size_t n, const int *modes, uint64_t max_frame)
{
    size_t i;

    memset(&F, 0, sizeof(F));
    uv_mutex_init(&F.mu);
    ck_assert_int_eq(uv_loop_init(&F.loop), 0);
    uv_async_init(&F.loop, &F.stop, fakes_on_stop);
    F.n = n;
    for (i = 0; i < n; i++) {
        fake_t *fk = &F.f[i];
        tn_listen_options_t lo = {
            .cb = {.on_frame = fake_on_frame, .on_decode_error = fake_on_decode_error},
            .limits = cmn_frame_limits_preauth(),
            .arg = fk};
        fk->mode = modes[i];
        fk->max_frame = max_frame;
        ck_assert_int_eq(tn_listen(&F.loop, &lo, &fk->server), 0);
        fk->port = tn_listener_port(fk->server);
    }
    ck_assert_int_eq(uv_thread_create(&F.thread, fakes_main, NULL), 0);
}

static void fakes_stop(void)
{
    uv_async_send(&F.stop);
    uv_thread_join(&F.thread);
    ck_assert_int_eq(uv_loop_close(&F.loop), 0);
    uv_mutex_destroy(&F.mu);
}

/* ---- helpers --------------------------------------------------------------------------------- */

static char addr_buf[MAX_FAKES + 2][32];

static const char *addr_of(int i, int port)
{
    snprintf(addr_buf[i], sizeof(addr_buf[i]), "%s127.0.0.1:%d", tn_scheme(), port);
    return addr_buf[i];
}

/* A config for |n| nodes with short deadlines, so the tests end quickly. */
static void config(qdl_config_t *cfg, const char **list, size_t n)
{
    qdl_config_init(cfg);
    cfg->ucx_trusted_fabric = 1; /* loopback: the tests' own fabric */
    cfg->nodes = list;
    cfg->n_nodes = n;
    cfg->on_complete = on_complete;
    cfg->ping_interval_ms = 200;
    cfg->ping_timeout_ms = 2000;
    cfg->progress_timeout_ms = 500;
    cfg->reconnect_max_ms = 400;
    cfg->fail_timeout_ms = 1000;
}

/* One test's set-up: |n_fakes| fake nodes, then |n_good| real digest nodes, in that order in the
 * QDL's node list; the config from config(), for the test to adjust before rig_create(). */
typedef struct {
    qdl_config_t cfg;
    const char *list[MAX_FAKES + 2];
    tn_proc_t good[2];
    size_t n_good;
    qdl_t *q;
} rig_t;

static void rig_start(rig_t *r, size_t n_fakes, const int *modes, uint64_t max_frame, size_t n_good)
{
    const char *args[] = {"--backend", "digest", NULL};
    size_t i;

    memset(r, 0, sizeof(*r));
    fakes_start(n_fakes, modes, max_frame);
    for (i = 0; i < n_fakes; i++)
        r->list[i] = addr_of((int)i, F.f[i].port);
    for (i = 0; i < n_good; i++) {
        ck_assert_int_eq(tn_spawn(&r->good[i], SUT_NODE_EXE, args), 0);
        r->list[n_fakes + i] = addr_of((int)(n_fakes + i), r->good[i].port);
    }
    r->n_good = n_good;
    config(&r->cfg, r->list, n_fakes + n_good);
}

static void rig_create(rig_t *r)
{
    char err[256];

    ck_assert_msg(qdl_create(&r->cfg, &r->q, err, sizeof(err)) == 0, "%s", err);
}

/* Destroys the QDL (if any), stops the fakes and the good nodes. */
static void rig_stop(rig_t *r)
{
    size_t i;

    if (r->q)
        qdl_destroy(r->q);
    r->q = NULL;
    fakes_stop();
    for (i = 0; i < r->n_good; i++) {
        ck_assert_int_eq(tn_stop(&r->good[i], SIGTERM, 10000), 0);
        tn_cleanup(&r->good[i]);
    }
}

static double seconds_since(uint64_t t0)
{
    return (double)(cmn_now_ns() - t0) / 1e9;
}

/* Issues samples [0, n) one at a time, each after the previous completed (SingleStream). */
static void single_stream(qdl_t *q, size_t n, int per_sample_ms)
{
    size_t i;

    for (i = 0; i < n; i++) {
        qdl_sample_t s = sample_of(i);
        ck_assert_int_eq(qdl_issue_query(q, &s, 1), 0);
        ck_assert_msg(wait_done(i + 1, per_sample_ms) == i + 1,
                      "SingleStream sample %zu did not complete within %d ms", i, per_sample_ms);
    }
}

/* qdl_stats_write_json writes one JSON object that holds |needle|. */
static void expect_stats_json(qdl_t *q, const char *needle)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(qdl_stats_write_json(q, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(strncmp(buf, "{\"nodes\": [", 11) == 0, "%s", buf);
    ck_assert_msg(strstr(buf, needle) != NULL, "no %s in %s", needle, buf);
    ck_assert_msg(strstr(buf, "\"samples_sent\": ") != NULL, "%s", buf);
    free(buf);
}

/* ---- stuck nodes ----------------------------------------------------------------------------- */

START_TEST(server_with_one_stuck_node_of_three)
{
    const int modes[1] = {F_STUCK};
    qdl_node_stats_t st[3];
    rig_t r;
    uint64_t t0;

    rig_start(&r, 1, modes, 0, 2);
    r.cfg.policy = QDL_POLICY_ROUND_ROBIN; /* the stuck node gets its share at once */
    run_init(3000, 512, 1);
    rig_create(&r);
    t0 = cmn_now_ns();
    issue_paced(r.q, 0, 3000, 300);
    /* Every sample held by the stuck node is moved after its 500 ms deadline. */
    ck_assert_uint_eq(wait_done(3000, 30000), 3000);
    printf("3 nodes, one stuck: 3000 samples in %.2f s\n", seconds_since(t0));
    expect_exactly_once(1);
    ck_assert_int_eq(qdl_stats(r.q, st, 3), 3);
    printf("stuck node: sent %llu, completed %llu, re-dispatched %llu, stalls %llu\n",
           (unsigned long long)st[0].samples_sent, (unsigned long long)st[0].samples_completed,
           (unsigned long long)st[0].redispatched, (unsigned long long)st[0].stalls);
    ck_assert_uint_gt(st[0].stalls, 0);
    ck_assert_uint_gt(st[0].redispatched, 0);
    ck_assert_uint_eq(st[0].samples_completed, 0);
    expect_stats_json(r.q, "\"degraded\": true");
    rig_stop(&r);
    run_free();
}
END_TEST

START_TEST(single_stream_with_a_stuck_node_ends)
{
    const int modes[1] = {F_STUCK};
    rig_t r;

    rig_start(&r, 1, modes, 0, 1);
    r.cfg.policy = QDL_POLICY_ROUND_ROBIN;
    run_init(20, 256, 1);
    rig_create(&r);
    /* A sample the stuck node holds completes after its deadline, through the good node. */
    single_stream(r.q, 20, 10000);
    expect_exactly_once(1);
    rig_stop(&r);
    run_free();
}
END_TEST

START_TEST(single_stream_with_only_a_stuck_node_fails_clearly)
{
    const int modes[1] = {F_STUCK};
    rig_t r;
    uint64_t t0;

    rig_start(&r, 1, modes, 0, 0);
    run_init(10, 256, 0);
    rig_create(&r);
    t0 = cmn_now_ns();
    /* The first sample fails after max_dispatches deadlines; later ones at once, while no
     * healthy node is up. */
    single_stream(r.q, 10, 10000);
    printf("SingleStream, only a stuck node: 10 samples ended in %.2f s\n", seconds_since(t0));
    ck_assert_uint_eq(expect_once_or_failed(), 10);
    uv_mutex_lock(&R.mu);
    ck_assert_int_eq(R.status[0], CMN_ENONODE);
    uv_mutex_unlock(&R.mu);
    rig_stop(&r);
    run_free();
}
END_TEST

/* ---- limits a node advertises ---------------------------------------------------------------- */

START_TEST(parts_fit_the_nodes_frame_limit)
{
    const int modes[1] = {F_GOOD};
    const uint64_t limit = 256 * 1024;
    rig_t r;

    rig_start(&r, 1, modes, limit, 0);
    run_init(400, 60000, 0);
    rig_create(&r);
    issue_range(r.q, 0, 400, 400); /* one Offline query of about 12 MB */
    ck_assert_uint_eq(wait_done(400, 20000), 400);
    expect_exactly_once(0);
    rig_stop(&r); /* the fakes' thread has ended: F is ours to read */
    printf("frame limit %llu: %llu Query frames, largest %llu bytes\n", (unsigned long long)limit,
           (unsigned long long)F.f[0].queries, (unsigned long long)F.f[0].largest);
    ck_assert_uint_le(F.f[0].largest, limit);
    ck_assert_uint_eq(F.f[0].frame_errors, 0);
    ck_assert_uint_gt(F.f[0].queries, 10); /* one 12 MB query in parts */
    run_free();
}
END_TEST

/* Written on the QDL thread, read by the test. */
static atomic_size_t big_failed;
static atomic_int big_status;

static void on_big(void *user, const qdl_response_t *r, size_t n)
{
    (void)user;
    for (size_t i = 0; i < n; i++) {
        big_failed += r[i].status != 0;
        big_status = r[i].status;
    }
}

START_TEST(a_sample_larger_than_the_node_accepts_fails_at_once)
{
    const int modes[1] = {F_GOOD};
    static uint8_t big[100000];
    qdl_sample_t s = {.response_id = 7, .data = big, .size = sizeof(big), .raw_size = sizeof(big)};
    rig_t r;
    uint64_t deadline;

    rig_start(&r, 1, modes, 64 * 1024, 0);
    r.cfg.on_complete = on_big;
    atomic_store(&big_failed, 0);
    rig_create(&r);
    ck_assert_int_eq(qdl_issue_query(r.q, &s, 1), 0);
    deadline = cmn_now_ns() + 5000000000ull;
    while (!atomic_load(&big_failed) && cmn_now_ns() < deadline)
        usleep(1000);
    ck_assert_uint_eq(atomic_load(&big_failed), 1);
    ck_assert_int_eq(atomic_load(&big_status), CMN_ETOOBIG);
    rig_stop(&r);
    ck_assert_uint_eq(F.f[0].queries, 0); /* never sent */
}
END_TEST

START_TEST(a_result_codec_not_offered_is_refused)
{
    const int modes[1] = {F_BAD_CODEC};
    rig_t r;
    char err[256] = "";

    rig_start(&r, 1, modes, 0, 0);
    ck_assert_int_eq(qdl_create(&r.cfg, &r.q, err, sizeof(err)), CMN_ECODEC);
    ck_assert_msg(strstr(err, "did not offer") != NULL, "%s", err);
    rig_stop(&r);
}
END_TEST

START_TEST(decoded_results_are_bounded)
{
    const int modes[1] = {F_BOMB};
    qdl_node_stats_t st[2];
    rig_t r;

    rig_start(&r, 1, modes, 0, 1);
    r.cfg.result_codec = 1; /* LZ4 offered, so only the sizes are wrong */
    r.cfg.max_frame_size = 1 << 20;
    r.cfg.policy = QDL_POLICY_ROUND_ROBIN;
    r.cfg.max_dispatches = 50;
    run_init(200, 256, 1);
    rig_create(&r);
    issue_range(r.q, 0, 200, 16);
    ck_assert_uint_eq(wait_done(200, 20000), 200);
    expect_exactly_once(1);
    ck_assert_int_eq(qdl_stats(r.q, st, 2), 2);
    ck_assert_uint_gt(st[0].errors, 0);
    ck_assert_uint_eq(st[0].samples_completed, 0);
    rig_stop(&r);
    run_free();
}
END_TEST

/* ---- one first token per sample -------------------------------------------------------------- */

static int first_tokens[64];

static void on_first(void *user, const qdl_response_t *r, size_t n)
{
    (void)user;
    uv_mutex_lock(&R.mu);
    for (size_t i = 0; i < n; i++)
        if (r[i].response_id < 64)
            first_tokens[r[i].response_id]++;
    uv_mutex_unlock(&R.mu);
}

START_TEST(one_first_token_per_sample_across_redispatch)
{
    const int modes[2] = {F_STREAM_DIES, F_STREAM};
    rig_t r;
    size_t i;

    rig_start(&r, 2, modes, 0, 0);
    r.cfg.on_first_token = on_first;
    r.cfg.policy = QDL_POLICY_ROUND_ROBIN;
    r.cfg.max_dispatches = 20;
    memset(first_tokens, 0, sizeof(first_tokens));
    run_init(64, 128, 0);
    rig_create(&r);
    issue_paced(r.q, 0, 64, 2000);
    ck_assert_uint_eq(wait_done(64, 20000), 64);
    expect_exactly_once(0);
    uv_mutex_lock(&R.mu);
    for (i = 0; i < 64; i++)
        ck_assert_msg(first_tokens[i] == 1, "sample %zu: %d first tokens", i, first_tokens[i]);
    uv_mutex_unlock(&R.mu);
    rig_stop(&r);
    run_free();
}
END_TEST

/* ---- a plaintext QDL against a TLS node ------------------------------------------------------ */

START_TEST(plaintext_qdl_against_a_tls_node_says_so)
{
    char certs[64], cmd[512], cert[160], key[160], err[700] = "";
    const char *args[] = {"--backend", "digest", "--tls-cert", cert, "--tls-key", key, NULL};
    const char *list[1];
    qdl_config_t cfg;
    qdl_t *q = NULL;
    tn_proc_t p;

    snprintf(certs, sizeof(certs), "/tmp/qdlcerts_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(certs));
    snprintf(cmd, sizeof(cmd), "%s %s >/dev/null", MAKE_CERTS, certs);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cert, sizeof(cert), "%s/node.pem", certs);
    snprintf(key, sizeof(key), "%s/node.key", certs);
    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    list[0] = addr_of(0, p.port);
    config(&cfg, list, 1);
    cfg.connect_timeout_ms = 3000;
    ck_assert_int_lt(qdl_create(&cfg, &q, err, sizeof(err)), 0);
    printf("plaintext QDL against a TLS node: %s\n", err);
    ck_assert_msg(strstr(err, "TLS") != NULL, "%s", err);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

CHECK_TCASE(tc_stuck, "stuck_node", 120, server_with_one_stuck_node_of_three,
            single_stream_with_a_stuck_node_ends,
            single_stream_with_only_a_stuck_node_fails_clearly)

CHECK_TCASE(tc_limits, "node_limits", 120, parts_fit_the_nodes_frame_limit,
            a_sample_larger_than_the_node_accepts_fails_at_once,
            a_result_codec_not_offered_is_refused, decoded_results_are_bounded,
            one_first_token_per_sample_across_redispatch)

CHECK_TCASE(tc_plaintext, "plaintext_vs_tls", 60, plaintext_qdl_against_a_tls_node_says_so)

CHECK_MAIN("qdl limits", tc_stuck, tc_limits, tc_plaintext)
