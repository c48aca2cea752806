/* The framing core (common/src/core.h) against an in-memory fake transport: no socket. The fake
 * records what the core asks of it (writes, read start/stop, shutdown, close) and completes
 * writes when the test says, so batching, the decoder feed, backpressure, the hold, the flush and
 * the close bookkeeping are checked turn by turn. */
#include "test_common.h"

#include "cmn/conn.h"
#include "cmn/err.h"
#include "cmn/msg.h"
#include "core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCHES 16
#define WIRE_CAP (1u << 20)

typedef struct {
    uv_loop_t loop;
    cmn_conn_t c;
    /* the fake transport */
    cmn__batch_t *batches[MAX_BATCHES]; /* written by the core, not yet completed */
    int nbatches, writes;
    uint8_t *wire; /* every byte of every batch, in order */
    size_t wire_len;
    int starts, read_starts, read_stops, shutdowns, closes;
    /* the owner's callbacks */
    uint64_t frame_ids[64];
    int frames;
    int decode_err;
    int closed, close_reason;
    int drains;
    int sent_ok, sent_cancelled;
    uint64_t cancelled[16]; /* the cancelled frames' seqs, in callback order */
    int reply;              /* on_frame answers each frame */
} fake_t;

static fake_t fk;

static int fake_start(cmn__core_t *k)
{
    (void)k;
    fk.starts++;
    return 0;
}

static void fake_write(cmn__core_t *k, cmn__batch_t *b)
{
    size_t i;

    (void)k;
    ck_assert_int_lt(fk.nbatches, MAX_BATCHES);
    for (i = 0; i < b->nbufs; i++) {
        ck_assert_uint_le(fk.wire_len + b->bufs[i].len, WIRE_CAP);
        memcpy(fk.wire + fk.wire_len, b->bufs[i].base, b->bufs[i].len);
        fk.wire_len += b->bufs[i].len;
    }
    fk.batches[fk.nbatches++] = b;
    fk.writes++;
}

static int fake_read_start(cmn__core_t *k)
{
    (void)k;
    fk.read_starts++;
    return 0;
}

static void fake_read_stop(cmn__core_t *k)
{
    (void)k;
    fk.read_stops++;
}

static void fake_shutdown(cmn__core_t *k)
{
    (void)k;
    fk.shutdowns++;
}

/* Completes the batches written so far with |status|, oldest first. */
static void fake_complete(int status)
{
    int i, n = fk.nbatches;

    fk.nbatches = 0;
    for (i = 0; i < n; i++)
        cmn__core_sent(cmn__core(&fk.c), fk.batches[i], status);
}

static void fake_close(cmn__core_t *k)
{
    fk.closes++;
    fake_complete(UV_ECANCELED); /* what the transport holds is cancelled */
    cmn__core_hold(k);           /* released by the test, as a socket's close callback would */
}

static void fake_describe(const cmn__core_t *k, char *buf, size_t len)
{
    (void)k;
    snprintf(buf, len, "fake");
}

static const cmn__ops_t fake_ops = {
    .name = "fake",
    .flags = 0,
    .start = fake_start,
    .send = cmn__core_queue,
    .write = fake_write,
    .turn_end = cmn__core_turn_end,
    .flush = cmn__core_flush,
    .read_start = fake_read_start,
    .read_stop = fake_read_stop,
    .shutdown = fake_shutdown,
    .close = fake_close,
    .describe = fake_describe,
    .peer_identity = NULL,
    .fileno = NULL,
};

static void on_sent(void *arg, int status)
{
    if (status == 0) {
        fk.sent_ok++;
    } else if (status == UV_ECANCELED) {
        ck_assert_int_lt(fk.sent_cancelled, 16);
        fk.cancelled[fk.sent_cancelled++] = (uint64_t)(uintptr_t)arg;
    } else
        ck_abort_msg("unexpected sent status %d", status);
}

/* A Ping frame (seq |id|), or with a payload a Query frame (query_id |id|, one sample). */
static void send_ping(cmn_conn_t *c, uint64_t id, const void *payload, size_t len)
{
    Nsut__Ping p = NSUT__PING__INIT;
    Nsut__Sample smp = NSUT__SAMPLE__INIT, *sp = &smp;
    Nsut__Query q = NSUT__QUERY__INIT;
    struct iovec pl = {(void *)payload, len};
    void *arg = (void *)(uintptr_t)id;

    if (!len) {
        p.seq = id;
        ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_PING, &p.base, NULL, 0, on_sent, arg), 0);
        return;
    }
    smp.id = id;
    smp.raw_size = smp.wire_size = len;
    q.query_id = id;
    q.n_samples = 1;
    q.samples = &sp;
    ck_assert_int_eq(cmn_conn_send(c, CMN_MSG_QUERY, &q.base, &pl, 1, on_sent, arg), 0);
}

/* A Ping frame's seq, a Query frame's query_id. */
static uint64_t frame_seq(const cmn_frame_t *f)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;
    uint64_t seq;

    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    if (f->hdr.type == CMN_MSG_PING)
        seq = ((Nsut__Ping *)m)->seq;
    else
        seq = ((Nsut__Query *)m)->query_id;
    cmn_msg_free(m, NULL);
    return seq;
}

static void on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    uint64_t seq = frame_seq(f);

    ck_assert_int_lt(fk.frames, 64);
    fk.frame_ids[fk.frames++] = seq;
    if (fk.reply)
        send_ping(c, seq + 1000, NULL, 0);
}

static void on_decode_error(cmn_conn_t *c, int err)
{
    (void)c;
    fk.decode_err = err;
}

static void on_close(cmn_conn_t *c, int reason)
{
    (void)c;
    fk.closed++;
    fk.close_reason = reason;
}

static void on_drain(cmn_conn_t *c)
{
    (void)c;
    fk.drains++;
}

static void open_fake(const cmn_conn_options_t *opt)
{
    cmn_conn_callbacks_t cb = {on_frame, on_decode_error, on_close, on_drain};
    cmn_frame_limits_t lim = cmn_frame_limits_default();

    ck_assert_int_eq(cmn_conn_init(&fk.loop, &fk.c, &cb, opt, &lim), 0);
    cmn__core_attach(cmn__core(&fk.c), &fake_ops, &fk);
    ck_assert_int_eq(cmn_conn_start(&fk.c), 0);
    ck_assert_int_eq(fk.starts, 1);
}

/* One loop turn: the core's check (end of turn) runs. */
static void turn(void)
{
    uv_run(&fk.loop, UV_RUN_NOWAIT);
}

/* Ends the connection and the loop: the fake's close is released, the core's handles close. */
static void close_fake(int reason)
{
    cmn_conn_close(&fk.c, reason);
    if (fk.closes == 1 && !fk.closed)
        cmn__core_released(cmn__core(&fk.c));
    uv_run(&fk.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fk.closed, 1);
}

static void setup(void)
{
    memset(&fk, 0, sizeof(fk));
    fk.wire = malloc(WIRE_CAP);
    ck_assert_ptr_nonnull(fk.wire);
    ck_assert_int_eq(uv_loop_init(&fk.loop), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(uv_loop_close(&fk.loop), 0);
    free(fk.wire);
}

/* The bytes of one Ping frame with |nonce|, appended to |out|. */
static size_t ping_bytes(uint64_t nonce, uint8_t *out, size_t cap)
{
    Nsut__Ping p = NSUT__PING__INIT;
    size_t hsize;
    long n;

    p.seq = nonce;
    hsize = cmn_frame_head_size(&p.base);
    ck_assert_uint_le(hsize, cap);
    n = cmn_frame_encode_head(CMN_MSG_PING, &p.base, 0, out, hsize);
    ck_assert_int_gt(n, 0);
    return (size_t)n;
}

/* Decodes the fake's wire into frames: their nonces in order. */
static int wire_nonces(uint64_t *nonces, int cap)
{
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_frame_decoder_t d;
    size_t off = 0, used;
    cmn_frame_t f;
    int n = 0, rc;

    cmn_frame_decoder_init(&d, &lim);
    while (off < fk.wire_len) {
        rc = cmn_frame_decode(&d, fk.wire + off, fk.wire_len - off, &used, &f);
        ck_assert_int_ge(rc, 0);
        off += used;
        if (rc == CMN_FRAME_READY) {
            ck_assert_int_lt(n, cap);
            nonces[n++] = frame_seq(&f);
        }
    }
    cmn_frame_decoder_free(&d);
    return n;
}

START_TEST(core_batches_a_turn)
{
    static uint8_t payload[3][100];
    uint64_t nonces[8];
    int i;

    open_fake(NULL);
    for (i = 0; i < 3; i++) {
        memset(payload[i], i + 1, sizeof(payload[i]));
        send_ping(&fk.c, (uint64_t)i + 1, payload[i], sizeof(payload[i]));
    }
    /* Queued, not written: the batch leaves at the end of the turn. */
    ck_assert_int_eq(fk.writes, 0);
    ck_assert_uint_gt(cmn_conn_backlog(&fk.c), 300);
    ck_assert_uint_eq(cmn_conn_stats(&fk.c)->frames_out, 3);
    turn();
    ck_assert_int_eq(fk.writes, 1); /* three frames, one write */
    ck_assert_uint_eq(fk.batches[0]->nbufs, 6);
    ck_assert_uint_eq(fk.batches[0]->bytes, fk.wire_len);
    ck_assert_int_eq(wire_nonces(nonces, 8), 3);
    for (i = 0; i < 3; i++)
        ck_assert_uint_eq(nonces[i], (uint64_t)i + 1);
    /* The backlog holds until the transport says the batch is written. */
    ck_assert_uint_eq(cmn_conn_backlog(&fk.c), fk.wire_len);
    ck_assert_int_eq(fk.sent_ok, 0);
    fake_complete(0);
    ck_assert_int_eq(fk.sent_ok, 3);
    ck_assert_uint_eq(cmn_conn_backlog(&fk.c), 0);
    ck_assert_uint_eq(cmn_conn_stats(&fk.c)->bytes_out, fk.wire_len);
    ck_assert_uint_eq(cmn_conn_stats(&fk.c)->batches_out, 1);
    /* A turn with nothing queued writes nothing. */
    turn();
    ck_assert_int_eq(fk.writes, 1);
    close_fake(0);
    ck_assert_int_eq(fk.close_reason, 0);
}
END_TEST

START_TEST(core_feeds_split_bytes)
{
    uint8_t in[256];
    size_t n = 0, i;

    open_fake(NULL);
    n += ping_bytes(7, in + n, sizeof(in) - n);
    n += ping_bytes(8, in + n, sizeof(in) - n);
    /* One byte per read: the decoder gathers each frame across reads. */
    for (i = 0; i < n; i++) {
        cmn__core_received(cmn__core(&fk.c), 1);
        ck_assert_int_eq(cmn__core_feed(cmn__core(&fk.c), in + i, 1), 0);
        cmn__core_read_done(cmn__core(&fk.c));
    }
    ck_assert_int_eq(fk.frames, 2);
    ck_assert_uint_eq(fk.frame_ids[0], 7);
    ck_assert_uint_eq(fk.frame_ids[1], 8);
    ck_assert_uint_eq(cmn_conn_stats(&fk.c)->frames_in, 2);
    ck_assert_uint_eq(cmn_conn_stats(&fk.c)->bytes_in, n);
    ck_assert_int_eq(fk.decode_err, 0);
    close_fake(0);
}
END_TEST

START_TEST(core_decode_error_stops_reading)
{
    uint8_t raw[CMN_FRAME_HEADER_SIZE];
    cmn_frame_header_t h = {1, CMN_MSG_PING, 1, 0, 0}; /* a reserved flag set */

    open_fake(NULL);
    cmn_frame_header_write(raw, &h);
    ck_assert_int_eq(cmn__core_feed(cmn__core(&fk.c), raw, sizeof(raw)), CMN_ECLOSED);
    ck_assert_int_lt(fk.decode_err, 0);
    ck_assert_int_eq(fk.read_stops, 1);
    ck_assert_int_eq(cmn__core_can_read(cmn__core(&fk.c)), 0);
    ck_assert_int_eq(fk.frames, 0);
    close_fake(fk.decode_err);
    ck_assert_int_eq(fk.close_reason, fk.decode_err);
}
END_TEST

START_TEST(core_backpressure_drains)
{
    cmn_conn_options_t opt = cmn_conn_options_default();
    static uint8_t big[4096];

    opt.write_high_water = 3000;
    opt.write_low_water = 1000;
    open_fake(&opt);
    send_ping(&fk.c, 1, big, 2000);
    ck_assert_int_eq(cmn_conn_congested(&fk.c), 0);
    send_ping(&fk.c, 2, big, 2000);
    ck_assert_int_eq(cmn_conn_congested(&fk.c), 1);
    turn();
    ck_assert_int_eq(fk.writes, 1);
    ck_assert_int_eq(cmn_conn_congested(&fk.c), 1); /* written by the core, not by the kernel */
    ck_assert_int_eq(fk.drains, 0);
    fake_complete(0);
    ck_assert_int_eq(fk.drains, 1);
    ck_assert_int_eq(cmn_conn_congested(&fk.c), 0);
    close_fake(0);
}
END_TEST

/* hold_ns: frames queued in a turn that read frames wait for the next turn's; a turn that reads
 * nothing writes them. */
START_TEST(core_hold_waits_while_the_peer_sends)
{
    cmn_conn_options_t opt = cmn_conn_options_default();
    uint8_t in[64];
    uint64_t nonces[8];
    size_t n;

    opt.hold_ns = 20ull * 1000 * 1000 * 1000; /* far beyond the test */
    open_fake(&opt);
    fk.reply = 1;
    n = ping_bytes(1, in, sizeof(in));
    ck_assert_int_eq(cmn__core_feed(cmn__core(&fk.c), in, n), 0);
    turn(); /* read a frame this turn: the answer is held */
    ck_assert_int_eq(fk.writes, 0);
    n = ping_bytes(2, in, sizeof(in));
    ck_assert_int_eq(cmn__core_feed(cmn__core(&fk.c), in, n), 0);
    turn(); /* again: both answers held */
    ck_assert_int_eq(fk.writes, 0);
    turn(); /* nothing read: both leave in one write */
    ck_assert_int_eq(fk.writes, 1);
    ck_assert_int_eq(wire_nonces(nonces, 8), 2);
    ck_assert_uint_eq(nonces[0], 1001);
    ck_assert_uint_eq(nonces[1], 1002);
    fake_complete(0);
    close_fake(0);
}
END_TEST

/* Without hold_ns the answer leaves at the end of the turn that read its query. */
START_TEST(core_no_hold_writes_every_turn)
{
    uint8_t in[64];
    size_t n;

    open_fake(NULL);
    fk.reply = 1;
    n = ping_bytes(1, in, sizeof(in));
    ck_assert_int_eq(cmn__core_feed(cmn__core(&fk.c), in, n), 0);
    turn();
    ck_assert_int_eq(fk.writes, 1);
    fake_complete(0);
    close_fake(0);
}
END_TEST

START_TEST(core_pause_resume_reach_the_transport)
{
    open_fake(NULL);
    ck_assert_int_eq(cmn__core_can_read(cmn__core(&fk.c)), 1);
    cmn_conn_read_pause(&fk.c);
    cmn_conn_read_pause(&fk.c); /* idempotent */
    ck_assert_int_eq(fk.read_stops, 1);
    ck_assert_int_eq(cmn_conn_read_paused(&fk.c), 1);
    ck_assert_int_eq(cmn__core_can_read(cmn__core(&fk.c)), 0);
    cmn_conn_read_resume(&fk.c);
    ck_assert_int_eq(fk.read_starts, 1);
    ck_assert_int_eq(cmn_conn_read_paused(&fk.c), 0);
    close_fake(0);
    /* Closed: pause and resume reach nothing any more. */
    cmn_conn_read_pause(&fk.c);
    ck_assert_int_eq(fk.read_stops, 1);
}
END_TEST

/* close: the transport's batches are cancelled first, then the turn's; on_close waits for every
 * resource the transport holds. */
START_TEST(core_close_cancels_in_order)
{
    open_fake(NULL);
    send_ping(&fk.c, 1, NULL, 0);
    turn(); /* with the transport */
    send_ping(&fk.c, 2, NULL, 0);
    send_ping(&fk.c, 3, NULL, 0); /* still in the turn's batch */
    cmn_conn_close(&fk.c, CMN_EPEER);
    ck_assert_int_eq(fk.closes, 1);
    ck_assert_int_eq(fk.sent_cancelled, 3);
    ck_assert_uint_eq(fk.cancelled[0], 1);
    ck_assert_uint_eq(fk.cancelled[1], 2);
    ck_assert_uint_eq(fk.cancelled[2], 3);
    ck_assert_uint_eq(cmn_conn_backlog(&fk.c), 0);
    ck_assert_int_eq(cmn_conn_closing(&fk.c), 2);
    ck_assert_int_eq(cmn_conn_send(&fk.c, CMN_MSG_PING, NULL, NULL, 0, NULL, NULL), CMN_ECLOSED);
    cmn_conn_close(&fk.c, 0); /* idempotent: the first reason stays */
    uv_run(&fk.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fk.closed, 0); /* the transport still holds its resource */
    cmn__core_released(cmn__core(&fk.c));
    ck_assert_int_eq(fk.closed, 1);
    ck_assert_int_eq(fk.close_reason, CMN_EPEER);
}
END_TEST

/* shutdown: reading stops, the queued frames go to the transport at once, then its shutdown; the
 * connection closes when the transport ends it, with the shutdown's reason. */
START_TEST(core_shutdown_flushes_first)
{
    open_fake(NULL);
    send_ping(&fk.c, 9, NULL, 0);
    cmn_conn_shutdown(&fk.c, CMN_ECLOSED);
    ck_assert_int_eq(fk.read_stops, 1);
    ck_assert_int_eq(fk.writes, 1);
    ck_assert_int_eq(fk.shutdowns, 1);
    ck_assert_int_eq(cmn_conn_closing(&fk.c), 1);
    ck_assert_int_eq(cmn_conn_send(&fk.c, CMN_MSG_PING, NULL, NULL, 0, NULL, NULL), CMN_ECLOSED);
    cmn_conn_shutdown(&fk.c, 0); /* idempotent */
    ck_assert_int_eq(fk.shutdowns, 1);
    fake_complete(0);
    ck_assert_int_eq(fk.sent_ok, 1);
    cmn__core_close(cmn__core(&fk.c), 0); /* the transport's FIN was answered */
    cmn__core_released(cmn__core(&fk.c));
    uv_run(&fk.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fk.closed, 1);
    ck_assert_int_eq(fk.close_reason, CMN_ECLOSED);
}
END_TEST

/* shutdown_timeout_ms: a transport that never finishes is closed by the core's deadline. */
START_TEST(core_shutdown_deadline)
{
    cmn_conn_options_t opt = cmn_conn_options_default();

    opt.shutdown_timeout_ms = 20;
    open_fake(&opt);
    cmn_conn_shutdown(&fk.c, CMN_ETIMEOUT);
    ck_assert_int_eq(fk.shutdowns, 1);
    while (!fk.closes)
        uv_run(&fk.loop, UV_RUN_ONCE);
    cmn__core_released(cmn__core(&fk.c));
    uv_run(&fk.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(fk.closed, 1);
    ck_assert_int_eq(fk.close_reason, CMN_ETIMEOUT);
}
END_TEST

TCase *tcase_core(void)
{
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, core_batches_a_turn);
    tcase_add_test(tc, core_feeds_split_bytes);
    tcase_add_test(tc, core_decode_error_stops_reading);
    tcase_add_test(tc, core_backpressure_drains);
    tcase_add_test(tc, core_hold_waits_while_the_peer_sends);
    tcase_add_test(tc, core_no_hold_writes_every_turn);
    tcase_add_test(tc, core_pause_resume_reach_the_transport);
    tcase_add_test(tc, core_close_cancels_in_order);
    tcase_add_test(tc, core_shutdown_flushes_first);
    tcase_add_test(tc, core_shutdown_deadline);
    tcase_set_timeout(tc, 30);
    return tc;
}
