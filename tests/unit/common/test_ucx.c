/* cmn_conn over ucx://: two UCX workers (a server and a client cmn_ucx_t) on one loop, so UCX
 * carries the frames with whatever UCX_TLS allows (CTest runs this with tcp and with shared
 * memory). A probe first: where UCX reports no usable transport the process says why and exits
 * 77 (skipped). CMN_TEST_UCX_EXPECT names the UCX transport that must carry the connection. */
#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/msg.h"
#include "cmn/net.h"
#include "cmn/ucx.h"

#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (8u * 1024u * 1024u) /* rendezvous on every UCX transport */
#define SMALL_FRAMES 200

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    cmn_ucx_t *su, *cu; /* server and client workers */
    cmn_ucx_listener_t *lis;
    cmn_conn_t *srv;
    cmn_conn_t cli;
    cmn_frame_limits_t srv_limits;
    int port;
    int connected, connect_status;
    int responses, want;
    int errors_seen;
    int cli_closed, srv_closed, cli_reason;
    int decode_errors;
    int sink_used;
    int pause_server; /* the server pauses reading at once */
    int decode_err;
    uint8_t *big;
    uint8_t *sink_buf;
    int next_id;
    char desc[128];
} fixture_t;

static fixture_t fx;

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    ck_abort_msg("watchdog: responses %d of %d, connected %d", fx.responses, fx.want, fx.connected);
}

static void free_sent(void *arg, int status)
{
    (void)status;
    free(arg);
}

/* The server's payload sink: big Query payloads land in a buffer of the test's choosing. */
static uint8_t *srv_sink(void *arg, const cmn_frame_header_t *h, const uint8_t *meta)
{
    (void)arg;
    (void)meta;
    if (h->type != CMN_MSG_QUERY || h->payload_len != BIG)
        return NULL;
    fx.sink_used++;
    return fx.sink_buf;
}

/* Echo: a Query comes back as a Response with the same bytes. */
static void srv_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result res = NSUT__RESULT__INIT, *rp = &res;
    ProtobufCMessage *m;
    cmn_errbuf_t eb;
    struct iovec pl;
    uint8_t *copy;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_GOODBYE) {
        cmn_msg_free(m, NULL);
        cmn_conn_shutdown(c, CMN_ECLOSED);
        return;
    }
    ck_assert_uint_eq(f->hdr.type, CMN_MSG_QUERY);
    if (f->hdr.payload_len == BIG)
        ck_assert_ptr_eq(f->payload, fx.sink_buf); /* received in place, no copy */
    res.id = ((Nsut__Query *)m)->samples[0]->id;
    res.raw_size = res.wire_size = f->hdr.payload_len;
    r.n_results = 1;
    r.results = &rp;
    copy = malloc(f->hdr.payload_len ? f->hdr.payload_len : 1);
    memcpy(copy, f->payload, f->hdr.payload_len);
    pl.iov_base = copy;
    pl.iov_len = f->hdr.payload_len;
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, &pl, 1, free_sent, copy), 0);
    cmn_msg_free(m, NULL);
}

static void srv_on_decode_error(cmn_conn_t *c, int err)
{
    Nsut__Error e = NSUT__ERROR__INIT;

    fx.decode_errors++;
    fx.decode_err = err;
    ck_assert(err == CMN_ETOOBIG || (fx.pause_server && err == CMN_EOVERLOAD));
    e.code = NSUT__ERROR_CODE__ERROR_PROTOCOL;
    e.message = (char *)cmn_strerror(err);
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_ERROR, &e.base, NULL, 0, NULL, NULL), 0);
    cmn_conn_shutdown(c, err);
}

static void srv_on_close(cmn_conn_t *c, int reason)
{
    (void)reason;
    fx.srv_closed = 1;
    free(c);
    if (fx.lis) {
        cmn_ucx_listener_close(fx.lis);
        fx.lis = NULL;
    }
}

static void on_accept(cmn_ucx_listener_t *l, cmn_ucx_incoming_t *in, void *arg)
{
    static const cmn_conn_callbacks_t cb = {srv_on_frame, srv_on_decode_error, srv_on_close, NULL};
    cmn_conn_t *c = malloc(sizeof(*c));

    (void)l;
    (void)arg;
    ck_assert_int_eq(cmn_conn_init(&fx.loop, c, &cb, NULL, &fx.srv_limits), 0);
    cmn_conn_set_sink(c, srv_sink, NULL, 64 * 1024);
    ck_assert_int_eq(cmn_conn_accept_ucx(c, in), 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    if (fx.pause_server)
        cmn_conn_read_pause(c);
    fx.srv = c;
}

static void send_query(cmn_conn_t *c, int id, const struct iovec *pl, size_t n)
{
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Sample s = NSUT__SAMPLE__INIT, *sp = &s;
    size_t i, total = 0;

    for (i = 0; i < n; i++)
        total += pl[i].iov_len;
    s.id = (uint64_t)id;
    s.raw_size = s.wire_size = total;
    q.n_samples = 1;
    q.samples = &sp;
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_QUERY, &q.base, pl, n, NULL, NULL), 0);
}

static void cli_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;
    Nsut__Response *r;
    size_t i;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_ERROR) {
        fx.errors_seen++;
        cmn_msg_free(m, NULL);
        return;
    }
    ck_assert_uint_eq(f->hdr.type, CMN_MSG_RESPONSE);
    r = (Nsut__Response *)m;
    /* In order: the echo keeps the sending order, small frames and rendezvous alike. */
    ck_assert_uint_eq(r->results[0]->id, (uint64_t)fx.responses);
    if (f->hdr.payload_len == BIG) {
        ck_assert_mem_eq(f->payload, fx.big, BIG);
    } else {
        for (i = 0; i < f->hdr.payload_len; i++)
            ck_assert_uint_eq(f->payload[i], (uint8_t)(r->results[0]->id + i));
    }
    cmn_msg_free(m, NULL);
    if (++fx.responses == fx.want) {
        Nsut__Goodbye g = NSUT__GOODBYE__INIT;
        cmn_conn_describe(c, fx.desc, sizeof(fx.desc)); /* the lanes once traffic has flowed */
        ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_GOODBYE, &g.base, NULL, 0, NULL, NULL), 0);
    }
}

static void cli_on_close(cmn_conn_t *c, int reason)
{
    (void)c;
    fx.cli_closed = 1;
    fx.cli_reason = reason;
}

static void on_connected(cmn_conn_t *c, int status)
{
    fx.connect_status = status;
    if (status < 0) {
        cmn_conn_close(c, status);
        return;
    }
    fx.connected = 1;
    ck_assert_int_eq(cmn_conn_start(c), 0);
}

static void setup(void)
{
    cmn_errbuf_t eb;
    struct sockaddr_in a;
    size_t i;
    cmn_ucx_options_t uo = {0};

    memset(&fx, 0, sizeof(fx));
    uo.busy_poll = getenv("CMN_TEST_UCX_BUSY") != NULL; /* progress by spinning, not the fd */
    ck_assert_int_eq(uv_loop_init(&fx.loop), 0);
    ck_assert_msg(cmn_ucx_open(&fx.loop, &uo, &fx.su, &eb) == 0, "%s", eb.msg);
    ck_assert_msg(cmn_ucx_open(&fx.loop, &uo, &fx.cu, &eb) == 0, "%s", eb.msg);
    uv_ip4_addr("127.0.0.1", 0, &a);
    fx.srv_limits = cmn_frame_limits_default();
    ck_assert_msg(cmn_ucx_listen(fx.su, (struct sockaddr *)&a, on_accept, NULL, &fx.lis, &eb) == 0,
                  "%s", eb.msg);
    fx.port = cmn_ucx_listener_port(fx.lis);
    ck_assert_int_gt(fx.port, 0);
    fx.big = malloc(BIG);
    fx.sink_buf = malloc(BIG);
    for (i = 0; i < BIG; i++)
        fx.big[i] = (uint8_t)(i * 7u + 3u);
    uv_timer_init(&fx.loop, &fx.watchdog);
    uv_timer_start(&fx.watchdog, on_watchdog, 30000, 0);
}

static void teardown(void)
{
    if (fx.lis)
        cmn_ucx_listener_close(fx.lis);
    cmn_ucx_close(fx.su);
    cmn_ucx_close(fx.cu);
    uv_close((uv_handle_t *)&fx.watchdog, NULL);
    ck_assert_int_eq(uv_run(&fx.loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&fx.loop), 0);
    free(fx.big);
    free(fx.sink_buf);
}

static void cli_connect(void)
{
    static const cmn_conn_callbacks_t cb = {cli_on_frame, NULL, cli_on_close, NULL};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    struct sockaddr_in a;

    ck_assert_int_eq(cmn_conn_init(&fx.loop, &fx.cli, &cb, NULL, &lim), 0);
    uv_ip4_addr("127.0.0.1", fx.port, &a);
    ck_assert_int_eq(cmn_conn_connect_ucx(&fx.cli, fx.cu, (struct sockaddr *)&a, on_connected), 0);
}

/* Runs the loop until |flag| is set (the watchdog bounds it). */
static void run_until(const int *flag)
{
    while (!*flag)
        uv_run(&fx.loop, UV_RUN_ONCE);
}

START_TEST(ucx_echo)
{
    const char *expect = getenv("CMN_TEST_UCX_EXPECT");
    static uint8_t small[SMALL_FRAMES][300];
    struct iovec pl[3];
    int i, k;

    cli_connect();
    run_until(&fx.connected);
    ck_assert_int_eq(cmn_ucx_register(fx.cu, fx.big, BIG), 0);
    fx.want = SMALL_FRAMES + 2;
    for (i = 0; i < SMALL_FRAMES + 2; i++) {
        if (i == 50) { /* rendezvous from registered memory, in the middle of the small ones */
            pl[0].iov_base = fx.big;
            pl[0].iov_len = BIG;
            send_query(&fx.cli, i, pl, 1);
        } else if (i == 120) { /* rendezvous from three segments */
            pl[0].iov_base = fx.big;
            pl[0].iov_len = 1000;
            pl[1].iov_base = fx.big + 1000;
            pl[1].iov_len = BIG - 3000;
            pl[2].iov_base = fx.big + BIG - 2000;
            pl[2].iov_len = 2000;
            send_query(&fx.cli, i, pl, 3);
        } else {
            int j = i > 120 ? i - 2 : i > 50 ? i - 1 : i;
            for (k = 0; k < (int)sizeof(small[j]); k++)
                small[j][k] = (uint8_t)(i + k);
            pl[0].iov_base = small[j];
            pl[0].iov_len = (size_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 17 : 300);
            pl[1].iov_base = small[j] + pl[0].iov_len;
            pl[1].iov_len = 0;
            send_query(&fx.cli, i, pl, 2);
        }
    }
    run_until(&fx.cli_closed);
    run_until(&fx.srv_closed);
    ck_assert_msg(fx.responses == fx.want, "responses %d of %d; client: %s (%s)", fx.responses,
                  fx.want, cmn_strerror(fx.cli_reason), cmn_conn_last_error(&fx.cli));
    ck_assert_int_eq(fx.sink_used, 2);
    ck_assert_uint_eq(cmn_conn_stats(&fx.cli)->frames_in, (uint64_t)fx.want);
    ck_assert_msg(strncmp(fx.desc, "ucx", 3) == 0, "describe: %s", fx.desc);
    if (expect && *expect) {
        char alt[64], *tok, *save = NULL;
        int found = 0;
        snprintf(alt, sizeof(alt), "%s", expect);
        for (tok = strtok_r(alt, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
            found |= strstr(fx.desc, tok) != NULL;
        ck_assert_msg(found, "connection carried by '%s', expected one of '%s'", fx.desc, expect);
    }
    cmn_ucx_unregister(fx.cu, fx.big);
}
END_TEST

/* Before the handshake the server takes only small frames: a large rendezvous frame is refused
 * on its header (the payload never moves) and the client gets an Error, then the close. */
START_TEST(ucx_preauth_limit)
{
    struct iovec pl = {NULL, 64 * 1024};

    fx.srv_limits = cmn_frame_limits_preauth();
    cli_connect();
    run_until(&fx.connected);
    pl.iov_base = fx.big;
    fx.want = 1;
    send_query(&fx.cli, 0, &pl, 1);
    run_until(&fx.cli_closed);
    run_until(&fx.srv_closed);
    ck_assert_int_eq(fx.decode_errors, 1);
    ck_assert_int_eq(fx.errors_seen, 1);
    ck_assert_int_eq(fx.responses, 0);
    ck_assert_int_eq(fx.sink_used, 0);
    ck_assert_str_ne(cmn_conn_last_error(&fx.cli), "");
}
END_TEST

/* A peer that keeps sending while the server holds its frames (reading paused): UCX cannot push
 * back as TCP's window does, so the server ends the connection once the held frames pass twice
 * its frame limit plus 16 MiB, with an Error (OVERLOAD) and a message naming the limit; its
 * memory stays bounded by that. */
START_TEST(ucx_held_limit)
{
    static uint8_t chunk[1000];
    struct iovec pl = {chunk, sizeof(chunk)};
    int i;

    fx.pause_server = 1;
    fx.srv_limits.max_frame = 64 * 1024; /* held limit: 16 MiB + 128 KiB */
    cli_connect();
    run_until(&fx.connected);
    fx.want = 1;
    for (i = 0; i < 20000 && !fx.cli_closed && !fx.decode_errors; i++) {
        Nsut__Query q = NSUT__QUERY__INIT;
        Nsut__Sample smp = NSUT__SAMPLE__INIT, *sp = &smp;
        smp.id = (uint64_t)i;
        smp.raw_size = smp.wire_size = sizeof(chunk);
        q.n_samples = 1;
        q.samples = &sp;
        if (cmn_conn_send(&fx.cli, CMN_MSG_QUERY, &q.base, &pl, 1, NULL, NULL) < 0)
            break; /* the server's refusal reached the client first */
        if (i % 100 == 0)
            uv_run(&fx.loop, UV_RUN_NOWAIT);
    }
    run_until(&fx.srv_closed);
    ck_assert_int_eq(fx.decode_errors, 1);
    ck_assert_int_eq(fx.decode_err, CMN_EOVERLOAD);
    ck_assert_int_eq(fx.responses, 0);
    if (!fx.cli_closed)
        cmn_conn_close(&fx.cli, CMN_ECLOSED);
    run_until(&fx.cli_closed);
}
END_TEST

/* A closed server: the client's connect fails with a negative status, and closes cleanly. */
START_TEST(ucx_refused)
{
    cmn_ucx_listener_close(fx.lis);
    fx.lis = NULL;
    cli_connect();
    run_until(&fx.cli_closed);
    ck_assert_int_lt(fx.connect_status, 0);
    ck_assert_int_eq(fx.connected, 0);
}
END_TEST

/* The server closes abruptly: the client's connection closes by itself with a reason. */
static void kill_server(uv_timer_t *t)
{
    (void)t;
    cmn_conn_close(fx.srv, CMN_ECLOSED);
}

static uv_timer_t tm;

START_TEST(ucx_peer_close)
{

    cli_connect();
    run_until(&fx.connected);
    while (!fx.srv)
        uv_run(&fx.loop, UV_RUN_ONCE);
    uv_timer_init(&fx.loop, &tm);
    uv_timer_start(&tm, kill_server, 0, 0);
    run_until(&fx.cli_closed);
    run_until(&fx.srv_closed);
    ck_assert_int_lt(fx.cli_reason, 0);
    ck_assert_str_ne(cmn_conn_last_error(&fx.cli), "");
    uv_close((uv_handle_t *)&tm, NULL);
}
END_TEST

START_TEST(ucx_endpoint_parse)
{
    struct sockaddr_storage ss;
    cmn_transport_t t;
    cmn_errbuf_t eb;

    ck_assert_int_eq(cmn_endpoint_parse("ucx://127.0.0.1:7000", &t, &ss, &eb), 0);
    ck_assert_int_eq(t, CMN_TRANSPORT_UCX);
    ck_assert_int_eq(cmn_addr_port((struct sockaddr *)&ss), 7000);
    ck_assert_int_eq(cmn_endpoint_parse("tcp://[::1]:80", &t, &ss, &eb), 0);
    ck_assert_int_eq(t, CMN_TRANSPORT_TCP);
    ck_assert_int_eq(cmn_endpoint_parse("127.0.0.1:81", &t, &ss, &eb), 0);
    ck_assert_int_eq(t, CMN_TRANSPORT_TCP);
    ck_assert_int_eq(cmn_endpoint_parse("rdma://127.0.0.1:81", &t, &ss, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "rdma"));
    ck_assert_int_eq(cmn_endpoint_parse("ucx://nohost", &t, &ss, &eb), CMN_ECONFIG);
    ck_assert_str_eq(cmn_transport_name(CMN_TRANSPORT_UCX), "ucx");
}
END_TEST

/* Whether UCX can run here at all with this UCX_TLS; *why names the failure. */
static int ucx_usable(cmn_errbuf_t *eb)
{
    uv_loop_t loop;
    cmn_ucx_t *u;
    cmn_ucx_listener_t *l;
    struct sockaddr_in a;
    int rc;

    uv_loop_init(&loop);
    rc = cmn_ucx_open(&loop, NULL, &u, eb);
    if (rc == 0) {
        uv_ip4_addr("127.0.0.1", 0, &a);
        rc = cmn_ucx_listen(u, (struct sockaddr *)&a, NULL, NULL, &l, eb);
        if (rc == 0)
            cmn_ucx_listener_close(l);
        cmn_ucx_close(u);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
}

int main(void)
{
    Suite *s = suite_create("common_ucx");
    TCase *tc = tcase_create("ucx");
    cmn_errbuf_t eb;
    SRunner *sr;
    int failed;

    if (ucx_usable(&eb) < 0) {
        printf("SKIP: UCX has no usable transport here (UCX_TLS=%s): %s\n",
               getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)", eb.msg);
        return 77;
    }
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ucx_echo);
    tcase_add_test(tc, ucx_preauth_limit);
    tcase_add_test(tc, ucx_refused);
    tcase_add_test(tc, ucx_held_limit);
    tcase_add_test(tc, ucx_peer_close);
    tcase_add_test(tc, ucx_endpoint_parse);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
