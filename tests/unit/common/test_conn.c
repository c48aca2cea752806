/* cmn_conn over real loopback sockets: an echo server and a client on one loop, with a watchdog. */
#include "test_common.h"

#include "cmn/conn.h"
#include "cmn/msg.h"
#include "cmn/net.h"
#include "core.h"         /* white box: the core's backlog */
#include "tcp_internal.h" /* and the write thread's share of it */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_timer_t watchdog;
    cmn_conn_t *srv_conn;
    cmn_conn_t cli;
    int port;
    /* client side */
    int responses;
    int want_responses;
    int errors_seen;
    int client_closed;
    int server_closed;
    uint64_t bytes_checked;
    uint8_t *big;
    size_t big_len;
    int sent_done;
    int drained;
    /* write thread tests */
    uv_timer_t ticker;
    uv_prepare_t probe;
    int ticks;
    uint64_t next_id;
    size_t max_writer_bytes;
    int cancelled;
    int wt_handles; /* ticker and probe exist: close_all closes them */
    int srv_paused; /* the server stops reading at once */
    int srv_silent; /* the server answers nothing and closes at the client's FIN */
    uint64_t srv_bytes;
    /* hold_ns tests */
    uint64_t srv_hold_ns; /* the server's hold_ns */
    uint64_t srv_batches; /* its batches_out when it closed */
    uv_idle_t sender;     /* the client sends one query per loop turn */
    int sender_on;
    int sent;
    int send_max;         /* stop after this many */
    int stop_at_response; /* or at the first response */
} fixture_t;

static fixture_t fx;

static void close_all(void);

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    ck_abort_msg("watchdog: test did not finish in time (responses %d of %d)", fx.responses,
                 fx.want_responses);
}

static void srv_on_close(cmn_conn_t *c, int reason)
{
    (void)reason;
    fx.server_closed = 1;
    fx.srv_batches = cmn_conn_stats(c)->batches_out;
    free(c);
}

static void free_sent(void *arg, int status)
{
    (void)status;
    free(arg);
}

/* Echo: every Query comes back as a Response carrying the same bytes; garbage gets an Error. */
static void srv_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;
    Nsut__Query *q;
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result *res, **rp;
    struct iovec pl;
    uint8_t *copy;
    size_t i;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    ck_assert_uint_eq(f->hdr.type, CMN_MSG_QUERY);
    fx.srv_bytes += f->hdr.payload_len;
    if (fx.srv_silent) {
        cmn_msg_free(m, NULL);
        return;
    }
    q = (Nsut__Query *)m;
    res = calloc(q->n_samples, sizeof(*res));
    rp = calloc(q->n_samples, sizeof(*rp));
    for (i = 0; i < q->n_samples; i++) {
        nsut__result__init(&res[i]);
        res[i].id = q->samples[i]->id;
        res[i].raw_size = res[i].wire_size = q->samples[i]->wire_size;
        rp[i] = &res[i];
    }
    r.n_results = q->n_samples;
    r.results = rp;
    /* The frame is valid only during this call, so the echo sends a copy, freed when sent. */
    copy = malloc(f->hdr.payload_len ? f->hdr.payload_len : 1);
    memcpy(copy, f->payload, f->hdr.payload_len);
    pl.iov_base = copy;
    pl.iov_len = f->hdr.payload_len;
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_RESPONSE, &r.base, &pl, 1, free_sent, copy), 0);
    free(rp);
    free(res);
    cmn_msg_free(m, NULL);
}

static void srv_on_decode_error(cmn_conn_t *c, int err)
{
    Nsut__Error e = NSUT__ERROR__INIT;

    e.code = NSUT__ERROR_CODE__ERROR_PROTOCOL;
    e.message = (char *)cmn_strerror(err);
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_ERROR, &e.base, NULL, 0, NULL, NULL), 0);
    cmn_conn_shutdown(c, err);
}

static void on_connection(uv_stream_t *server, int status)
{
    static const cmn_conn_callbacks_t cb = {srv_on_frame, srv_on_decode_error, srv_on_close, NULL};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_conn_options_t opt = cmn_conn_options_default();
    cmn_conn_t *c = malloc(sizeof(*c));

    ck_assert_int_eq(status, 0);
    opt.hold_ns = fx.srv_hold_ns;
    ck_assert_int_eq(cmn_conn_init(server->loop, c, &cb, &opt, &lim), 0);
    ck_assert_int_eq(cmn_conn_accept(c, server), 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    if (fx.srv_paused)
        cmn_conn_read_pause(c);
    fx.srv_conn = c;
}

static void cli_on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m;
    cmn_errbuf_t eb;
    size_t i;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_ERROR) {
        fx.errors_seen++;
        cmn_msg_free(m, NULL);
        return;
    }
    ck_assert_uint_eq(f->hdr.type, CMN_MSG_RESPONSE);
    if (fx.next_id) {
        /* Frames never overtake each other, whichever path (loop or write thread) sent them. */
        ck_assert_uint_eq(((Nsut__Response *)m)->results[0]->id, fx.next_id);
        fx.next_id++;
    }
    if (f->hdr.payload_len == fx.big_len) {
        ck_assert_mem_eq(f->payload, fx.big, fx.big_len);
    } else {
        for (i = 0; i < f->hdr.payload_len; i++)
            ck_assert_uint_eq(f->payload[i], (uint8_t)(((Nsut__Response *)m)->results[0]->id));
    }
    fx.bytes_checked += f->hdr.payload_len;
    cmn_msg_free(m, NULL);
    if (++fx.responses == fx.want_responses)
        cmn_conn_close(c, 0);
}

static void cli_on_close(cmn_conn_t *c, int reason)
{
    (void)c;
    (void)reason;
    fx.client_closed = 1;
    close_all();
}

static void on_sent(void *arg, int status)
{
    (void)arg;
    ck_assert_int_eq(status, 0);
    fx.sent_done++;
}

static void on_drain(cmn_conn_t *c)
{
    (void)c;
    fx.drained++;
}

static void close_all(void)
{
    uv_close((uv_handle_t *)&fx.server, NULL);
    uv_close((uv_handle_t *)&fx.watchdog, NULL);
    if (fx.wt_handles) {
        uv_close((uv_handle_t *)&fx.ticker, NULL);
        uv_close((uv_handle_t *)&fx.probe, NULL);
    }
    if (fx.sender_on)
        uv_close((uv_handle_t *)&fx.sender, NULL);
    if (fx.srv_conn && !fx.server_closed && !fx.srv_silent)
        cmn_conn_close(fx.srv_conn, 0);
}

static void setup(void)
{
    struct sockaddr_storage ss;
    cmn_errbuf_t eb;
    int len = sizeof(ss);

    memset(&fx, 0, sizeof(fx));
    ck_assert_int_eq(uv_loop_init(&fx.loop), 0);
    ck_assert_int_eq(uv_tcp_init(&fx.loop, &fx.server), 0);
    ck_assert_int_eq(cmn_addr_parse("127.0.0.1:0", &ss, &eb), 0);
    ck_assert_int_eq(uv_tcp_bind(&fx.server, (struct sockaddr *)&ss, 0), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&fx.server, 16, on_connection), 0);
    ck_assert_int_eq(uv_tcp_getsockname(&fx.server, (struct sockaddr *)&ss, &len), 0);
    fx.port = cmn_addr_port((struct sockaddr *)&ss);
    ck_assert_int_gt(fx.port, 0);
    ck_assert_int_eq(uv_timer_init(&fx.loop, &fx.watchdog), 0);
    ck_assert_int_eq(uv_timer_start(&fx.watchdog, on_watchdog, 10000, 0), 0);
}

static void teardown(void)
{
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    /* Every handle closed: the loop closes cleanly (libuv's MAKE_VALGRIND_HAPPY). */
    ck_assert_int_eq(uv_loop_close(&fx.loop), 0);
    free(fx.big);
}

static void client_init(const cmn_conn_options_t *opt, void (*on_connect)(cmn_conn_t *, int))
{
    static cmn_conn_callbacks_t cb = {cli_on_frame, NULL, cli_on_close, on_drain};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    struct sockaddr_storage ss;
    cmn_errbuf_t eb;
    char addr[64];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", fx.port);
    ck_assert_int_eq(cmn_addr_parse(addr, &ss, &eb), 0);
    ck_assert_int_eq(cmn_conn_init(&fx.loop, &fx.cli, &cb, opt, &lim), 0);
    ck_assert_int_eq(cmn_conn_connect(&fx.cli, (struct sockaddr *)&ss, on_connect), 0);
}

static void send_query(cmn_conn_t *c, uint64_t id, const void *data, size_t len)
{
    Nsut__Sample s = NSUT__SAMPLE__INIT, *sp = &s;
    Nsut__Query q = NSUT__QUERY__INIT;
    struct iovec pl = {(void *)data, len};

    s.id = id;
    s.raw_size = s.wire_size = len;
    q.query_id = id;
    q.n_samples = 1;
    q.samples = &sp;
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_QUERY, &q.base, &pl, 1, on_sent, NULL), 0);
}

static uint8_t small[200][64];

static void on_connect_many(cmn_conn_t *c, int status)
{
    int i;

    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    /* 200 small frames queued in one turn leave in one gathered write. */
    for (i = 0; i < 200; i++) {
        memset(small[i], i, sizeof(small[i]));
        send_query(c, (uint64_t)i, small[i], sizeof(small[i]));
    }
    /* Nothing is written yet: the frames wait for the end of this loop turn, then go together. */
    ck_assert_uint_eq(cmn__core(c)->bytes_writing, 0);
    ck_assert_uint_gt(cmn_conn_backlog(c), 200 * (sizeof(small[0]) + CMN_FRAME_HEADER_SIZE));
    ck_assert_uint_eq(cmn_conn_stats(c)->frames_out, 200);
    fx.want_responses = 200;
}

START_TEST(echo_many_small)
{
    client_init(NULL, on_connect_many);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.responses, 200);
    ck_assert_int_eq(fx.sent_done, 200);
    ck_assert_int_eq(fx.client_closed, 1);
    ck_assert_uint_eq(fx.bytes_checked, 200 * 64);
}
END_TEST

/* A connected client starts reading and gets a |len|-byte patterned payload in fx.big. */
static void start_with_big(cmn_conn_t *c, int status, size_t len)
{
    size_t i;

    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    fx.big_len = len;
    fx.big = malloc(fx.big_len);
    ck_assert_ptr_nonnull(fx.big);
    for (i = 0; i < fx.big_len; i++)
        fx.big[i] = (uint8_t)(i * 2654435761u >> 13);
}

static void on_connect_big(cmn_conn_t *c, int status)
{
    start_with_big(c, status, 8u << 20);
    send_query(c, 1, fx.big, fx.big_len);
    send_query(c, 2, small[2], 0);
    fx.want_responses = 2;
}

START_TEST(echo_large_payload)
{
    client_init(NULL, on_connect_big);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.responses, 2);
    ck_assert_uint_eq(fx.bytes_checked, 8u << 20);
}
END_TEST

static void on_connect_backpressure(cmn_conn_t *c, int status)
{
    size_t i;

    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    fx.big_len = 4u << 20;
    fx.big = malloc(fx.big_len);
    memset(fx.big, 0x77, fx.big_len);
    for (i = 0; i < 8; i++)
        send_query(c, 1000 + i, fx.big, fx.big_len);
    /* 32 MiB queued against a 1 MiB high-water mark. */
    ck_assert(cmn_conn_congested(c));
    fx.want_responses = 8;
}

START_TEST(backpressure_drains)
{
    cmn_conn_options_t opt = cmn_conn_options_default();

    opt.write_high_water = 1u << 20;
    opt.write_low_water = 256u << 10;
    client_init(&opt, on_connect_backpressure);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.responses, 8);
    ck_assert_int_ge(fx.drained, 1);
}
END_TEST

static void on_connect_garbage(cmn_conn_t *c, int status)
{
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    /* A Ping frame with a reserved flag set: the server answers Error and shuts down. */
    {
        static uint8_t raw[CMN_FRAME_HEADER_SIZE];
        cmn_frame_header_t h = {1, CMN_MSG_PING, 1, 0, 0};
        cmn_frame_header_write(raw, &h);
        ck_assert_int_eq(write(cmn_conn_fileno(c), raw, sizeof(raw)), (int)sizeof(raw));
    }
}

START_TEST(decode_error_gets_error_frame)
{
    client_init(NULL, on_connect_garbage);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.errors_seen, 1);
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

static void on_connect_refused(cmn_conn_t *c, int status)
{
    ck_assert_int_eq(status, UV_ECONNREFUSED);
    cmn_conn_close(c, status);
}

START_TEST(connect_refused)
{
    /* Close the listener first so the port refuses. */
    uv_close((uv_handle_t *)&fx.server, NULL);
    uv_run(&fx.loop, UV_RUN_NOWAIT);
    uv_tcp_init(&fx.loop, &fx.server);
    client_init(NULL, on_connect_refused);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

/* ---- the write thread (write_thread_min) ------------------------------------------------------
 */

#define WT_MIN (64u * 1024u)
#define WT_BIG (256u * 1024u)
#define WT_FRAMES 40

/* After each loop turn's flush: how much the write thread held. */
static void on_probe(uv_prepare_t *h)
{
    (void)h;
    if (cmn__tcp_writer_bytes(cmn__core(&fx.cli)) > fx.max_writer_bytes)
        fx.max_writer_bytes = cmn__tcp_writer_bytes(cmn__core(&fx.cli));
}

/* One frame per tick, large and small in turn: a small frame queued while the thread still
 * writes a large one must follow it, not overtake it from the loop thread. */
static void on_tick(uv_timer_t *t)
{
    uint64_t id = (uint64_t)fx.ticks + 1;

    (void)t;
    if (id % 2)
        send_query(&fx.cli, id, fx.big, fx.big_len);
    else
        send_query(&fx.cli, id, small[id % 200], sizeof(small[0]));
    if (++fx.ticks == WT_FRAMES)
        uv_timer_stop(&fx.ticker);
}

static void on_connect_threaded(cmn_conn_t *c, int status)
{
    size_t i;

    start_with_big(c, status, WT_BIG);
    {
        char desc[64];
        cmn_conn_describe(c, desc, sizeof(desc));
        ck_assert_str_eq(desc, "tcp+write-thread");
    }
    for (i = 0; i < 200; i++)
        memset(small[i], (int)i, sizeof(small[i]));
    fx.next_id = 1;
    fx.want_responses = WT_FRAMES;
    ck_assert_int_eq(uv_timer_start(&fx.ticker, on_tick, 0, 1), 0);
}

static void threaded_client(void (*on_connect)(cmn_conn_t *, int))
{
    cmn_conn_options_t opt = cmn_conn_options_default();

    opt.write_thread_min = WT_MIN;
    ck_assert_int_eq(uv_timer_init(&fx.loop, &fx.ticker), 0);
    ck_assert_int_eq(uv_prepare_init(&fx.loop, &fx.probe), 0);
    ck_assert_int_eq(uv_prepare_start(&fx.probe, on_probe), 0);
    fx.wt_handles = 1;
    client_init(&opt, on_connect);
}

START_TEST(write_thread_keeps_order)
{
    threaded_client(on_connect_threaded);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.responses, WT_FRAMES);
    ck_assert_int_eq(fx.sent_done, WT_FRAMES);
    ck_assert_uint_eq(fx.bytes_checked, (WT_FRAMES / 2) * (WT_BIG + sizeof(small[0])));
    /* The large frames went through the thread. */
    ck_assert_uint_ge(fx.max_writer_bytes, WT_BIG);
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

static void on_sent_or_cancelled(void *arg, int status)
{
    (void)arg;
    if (status == UV_ECANCELED)
        fx.cancelled++;
    else
        ck_assert_int_eq(status, 0);
    fx.sent_done++;
}

static void on_close_timer(uv_timer_t *t)
{
    (void)t;
    /* The thread is waiting for room the paused server never makes: closing must not hang. */
    ck_assert_uint_gt(cmn__tcp_writer_bytes(cmn__core(&fx.cli)), 0);
    cmn_conn_close(&fx.cli, 0);
}

static void on_connect_stuck(cmn_conn_t *c, int status)
{
    Nsut__Sample s = NSUT__SAMPLE__INIT, *sp = &s;
    Nsut__Query q = NSUT__QUERY__INIT;
    struct iovec pl;
    size_t i;

    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    fx.big_len = 4u << 20;
    fx.big = calloc(1, fx.big_len);
    pl.iov_base = fx.big;
    pl.iov_len = fx.big_len;
    q.n_samples = 1;
    q.samples = &sp;
    s.raw_size = s.wire_size = fx.big_len;
    for (i = 0; i < 16; i++) { /* 64 MiB: far more than the socket buffers take */
        s.id = q.query_id = i + 1;
        ck_assert_int_eq(
            cmn_conn_send(c, CMN_MSG_QUERY, &q.base, &pl, 1, on_sent_or_cancelled, NULL), 0);
    }
    ck_assert_int_eq(uv_timer_start(&fx.ticker, on_close_timer, 300, 0), 0);
}

START_TEST(write_thread_close_while_stuck)
{
    fx.srv_paused = 1;
    threaded_client(on_connect_stuck);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    /* Every frame's callback ran once; the one on the wire and the rest were cancelled. */
    ck_assert_int_eq(fx.sent_done, 16);
    ck_assert_int_ge(fx.cancelled, 1);
    ck_assert_int_eq(fx.client_closed, 1);
    ck_assert_uint_eq(cmn__tcp_writer_bytes(cmn__core(&fx.cli)), 0);
}
END_TEST

static void on_connect_then_shutdown(cmn_conn_t *c, int status)
{
    start_with_big(c, status, 8u << 20);
    send_query(c, 1, fx.big, fx.big_len);
    /* The graceful close flushes through the thread before its FIN. */
    cmn_conn_shutdown(c, 0);
    ck_assert_int_eq(cmn_conn_closing(c), 1);
}

START_TEST(write_thread_shutdown_flushes)
{
    fx.srv_silent = 1; /* no reply left unread at the client, so its close is a FIN, not a RST */
    threaded_client(on_connect_then_shutdown);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fx.sent_done, 1);
    ck_assert_uint_eq(fx.srv_bytes, 8u << 20);
    ck_assert_int_eq(fx.client_closed, 1);
    ck_assert_int_eq(fx.server_closed, 1);
}
END_TEST

/* ---- hold_ns: a responder's writes merged across turns ----------------------------------------
 */

/* One query per loop turn (its frame leaves at the end of the turn), ids from 1, empty payloads,
 * until send_max, or until the first response when stop_at_response. */
static void on_send_turn(uv_idle_t *h)
{
    if (fx.sent == fx.send_max || (fx.stop_at_response && fx.responses > 0)) {
        uv_idle_stop(h);
        fx.want_responses = fx.sent;
        if (fx.responses == fx.want_responses)
            cmn_conn_close(&fx.cli, 0);
        return;
    }
    fx.sent++;
    send_query(&fx.cli, (uint64_t)fx.sent, NULL, 0);
}

static void on_connect_sender(cmn_conn_t *c, int status)
{
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(cmn_conn_start(c), 0);
    fx.next_id = 1;
    fx.big_len = SIZE_MAX;  /* no large payload: cli_on_frame checks the (empty) pattern */
    fx.want_responses = -1; /* known when the sender stops */
    ck_assert_int_eq(uv_idle_start(&fx.sender, on_send_turn), 0);
}

static void run_sender(uint64_t hold_ns, int send_max, int stop_at_response)
{
    fx.srv_hold_ns = hold_ns;
    fx.send_max = send_max;
    fx.stop_at_response = stop_at_response;
    ck_assert_int_eq(uv_idle_init(&fx.loop, &fx.sender), 0);
    fx.sender_on = 1;
    client_init(NULL, on_connect_sender);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
}

/* While the client sends in every turn, the server's responses wait for the next turn's and leave
 * together; when it stops, they leave at once, long before hold_ns. */
START_TEST(hold_merges_while_the_peer_sends)
{
    uint64_t t0 = uv_hrtime();

    run_sender(20ull * 1000000000u, 8, 0);
    ck_assert_int_eq(fx.responses, 8);    /* in order: cli_on_frame checks next_id */
    ck_assert_uint_le(fx.srv_batches, 2); /* 8 without hold_ns (no_hold_writes_every_turn) */
    ck_assert_uint_ge(fx.srv_batches, 1);
    ck_assert_uint_lt(uv_hrtime() - t0, 5ull * 1000000000u); /* the 20 s hold was not waited */
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

/* A client that never stops sending still gets its responses: the hold ends hold_ns after the
 * first held frame. */
START_TEST(hold_ends_after_hold_ns)
{
    run_sender(2000000u, 1000000, 1);
    ck_assert_int_gt(fx.responses, 0);
    ck_assert_int_lt(fx.sent, 1000000); /* the first response came while the client still sent */
    ck_assert_int_eq(fx.responses, fx.sent);
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

/* Without hold_ns a turn's responses leave at the end of that turn. */
START_TEST(no_hold_writes_every_turn)
{
    run_sender(0, 8, 0);
    ck_assert_int_eq(fx.responses, 8);
    /* One write per turn that read a query (the first two may share a turn while the server
     * accepts). */
    ck_assert_uint_ge(fx.srv_batches, 6);
    ck_assert_int_eq(fx.client_closed, 1);
}
END_TEST

TCase *tcase_conn(void)
{
    TCase *tc = tcase_create("conn");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, echo_many_small);
    tcase_add_test(tc, echo_large_payload);
    tcase_add_test(tc, backpressure_drains);
    tcase_add_test(tc, decode_error_gets_error_frame);
    tcase_add_test(tc, connect_refused);
    tcase_add_test(tc, write_thread_keeps_order);
    tcase_add_test(tc, write_thread_close_while_stuck);
    tcase_add_test(tc, write_thread_shutdown_flushes);
    tcase_add_test(tc, hold_merges_while_the_peer_sends);
    tcase_add_test(tc, hold_ends_after_hold_ns);
    tcase_add_test(tc, no_hold_writes_every_turn);
    tcase_set_timeout(tc, 30);
    return tc;
}
