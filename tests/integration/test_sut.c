/* sut-node as a real process on loopback: handshake and name, every built-in backend, the digest
 * proof across sizes and codecs, every bad-input class (each followed by a good query on a second
 * connection), SIGTERM with work in flight, a dlopen'ed plugin, and the command line. */
#include "../unit/check_main.h"
#include "testnet.h"

#include "cmn/digest.h"
#include "cmpr/cmpr.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SUT_NODE_EXE
#    error "SUT_NODE_EXE must be the path of the sut-node binary"
#endif

static const int codecs_both[2] = {CMPR_NONE, CMPR_LZ4};

static uint64_t rng = 0x1234567887654321ull;

static uint8_t rnd8(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)rng;
}

static void start(tn_proc_t *p, const char *const *args)
{
    ck_assert_msg(tn_spawn(p, SUT_NODE_EXE, args) == 0, "sut-node did not start");
}

static void connect_ready(tn_client_t *c, const tn_proc_t *p)
{
    Nsut__HelloAck *ack;

    ck_assert_int_eq(tn_connect(c, p->port), 0);
    ack = tn_handshake(c, codecs_both, 2);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
}

/* Receives results until |n| ids are answered; checks each appears once. Returns the Response
 * results seen (status per id in |status|, payload bytes copied to |out| per id when given). */
static void collect(tn_client_t *c, uint64_t first_id, size_t n, int *status, uint8_t **out,
                    size_t *out_len, int64_t *tokens, int *first_tokens)
{
    size_t got = 0, i;

    for (i = 0; i < n; i++)
        status[i] = -1;
    while (got < n) {
        ProtobufCMessage *m = NULL;
        uint8_t *pl = NULL;
        size_t plen = 0, off = 0;
        unsigned type;
        int rc = tn_recv(c, 20000, &type, &m, &pl, &plen);

        ck_assert_msg(rc == 0, "waiting for results: %s (%zu of %zu)", cmn_strerror(rc), got, n);
        if (type == CMN_MSG_RESPONSE || type == CMN_MSG_FIRST_TOKEN) {
            Nsut__Result **r = type == CMN_MSG_RESPONSE ? ((Nsut__Response *)m)->results
                                                        : ((Nsut__FirstToken *)m)->results;
            size_t nr = type == CMN_MSG_RESPONSE ? ((Nsut__Response *)m)->n_results
                                                 : ((Nsut__FirstToken *)m)->n_results;
            for (i = 0; i < nr; i++) {
                uint64_t k = r[i]->id - first_id;
                ck_assert_uint_lt(k, n);
                if (type == CMN_MSG_FIRST_TOKEN) {
                    ck_assert_int_eq(status[k], -1); /* first token before the result */
                    if (first_tokens)
                        first_tokens[k]++;
                    off += r[i]->wire_size;
                    continue;
                }
                ck_assert_msg(status[k] == -1, "id %llu answered twice",
                              (unsigned long long)r[i]->id);
                status[k] = (int)r[i]->status;
                if (tokens)
                    tokens[k] = r[i]->n_tokens;
                if (out) {
                    out[k] = malloc(r[i]->raw_size + 1);
                    ck_assert_int_eq(cmpr_decompress((int)r[i]->codec, pl + off, r[i]->wire_size,
                                                     out[k], r[i]->raw_size),
                                     0);
                    out_len[k] = r[i]->raw_size;
                }
                off += r[i]->wire_size;
                got++;
            }
            ck_assert_uint_eq(off, plen);
        }
        cmn_msg_free(m, NULL);
        free(pl);
    }
}

/* A digest query of |n| samples on a fresh connection must come back right. */
static void good_query(const tn_proc_t *p)
{
    tn_client_t c;
    uint8_t data[3][300];
    const void *d[3] = {data[0], data[1], data[2]};
    size_t w[3] = {300, 17, 1}, i, len[3];
    uint8_t *out[3];
    int st[3];

    connect_ready(&c, p);
    for (i = 0; i < 3; i++)
        memset(data[i], (int)i + 1, sizeof(data[i]));
    ck_assert_int_eq(tn_send_query(&c, 1, 500, 3, d, w, NULL, NULL), 0);
    collect(&c, 500, 3, st, out, len, NULL, NULL);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(st[i], 0);
        ck_assert_uint_eq(len[i], 8);
        ck_assert_uint_eq(cmn_digest_get(out[i]), cmn_digest64(data[i], w[i]));
        free(out[i]);
    }
    tn_close(&c);
}

START_TEST(handshake_and_name)
{
    const char *args[] = {"--name", "node-A", "--backend", "digest", NULL};
    tn_proc_t p;
    tn_client_t c;
    Nsut__HelloAck *ack;
    Nsut__NameRequest nr = NSUT__NAME_REQUEST__INIT;
    Nsut__Ping ping = NSUT__PING__INIT;
    Nsut__StatsRequest sr = NSUT__STATS_REQUEST__INIT;
    ProtobufCMessage *m;
    unsigned type;

    start(&p, args);
    ck_assert_int_eq(tn_connect(&c, p.port), 0);
    ack = tn_handshake(&c, codecs_both, 2);
    ck_assert_ptr_nonnull(ack);
    ck_assert_uint_eq(ack->version, 1);
    ck_assert_str_eq(ack->node_name, "node-A");
    ck_assert_uint_eq(ack->n_sample_codecs, 2);
    ck_assert_ptr_nonnull(ack->caps);
    ck_assert_str_eq(ack->caps->backend, "digest");
    ck_assert_uint_eq(ack->caps->output_size, 8);
    ck_assert_uint_ge(ack->caps->max_batch, 1);
    cmn_msg_free(&ack->base, NULL);

    nr.request_id = 77;
    ck_assert_int_eq(tn_send(&c, CMN_MSG_NAME_REQUEST, &nr.base, NULL, 0), 0);
    ck_assert_int_eq(tn_recv(&c, 5000, &type, &m, NULL, NULL), 0);
    ck_assert_uint_eq(type, CMN_MSG_NAME_REPLY);
    ck_assert_uint_eq(((Nsut__NameReply *)m)->request_id, 77);
    ck_assert_str_eq(((Nsut__NameReply *)m)->node_name, "node-A");
    cmn_msg_free(m, NULL);

    ping.seq = 9;
    ping.sent_ns = 123;
    ck_assert_int_eq(tn_send(&c, CMN_MSG_PING, &ping.base, NULL, 0), 0);
    ck_assert_int_eq(tn_recv(&c, 5000, &type, &m, NULL, NULL), 0);
    ck_assert_uint_eq(type, CMN_MSG_PONG);
    ck_assert_uint_eq(((Nsut__Pong *)m)->seq, 9);
    ck_assert_uint_eq(((Nsut__Pong *)m)->sent_ns, 123);
    cmn_msg_free(m, NULL);

    good_query(&p);
    ck_assert_int_eq(tn_send(&c, CMN_MSG_STATS_REQUEST, &sr.base, NULL, 0), 0);
    ck_assert_int_eq(tn_recv(&c, 5000, &type, &m, NULL, NULL), 0);
    ck_assert_uint_eq(type, CMN_MSG_STATS);
    ck_assert_str_eq(((Nsut__Stats *)m)->node_name, "node-A");
    ck_assert_uint_eq(((Nsut__Stats *)m)->samples, 3);
    ck_assert_uint_ge(((Nsut__Stats *)m)->connections_total, 2);
    cmn_msg_free(m, NULL);
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

static void run_backend(const char *const *args, size_t n, size_t sample_size, size_t want_out,
                        int llm, int64_t want_tokens)
{
    tn_proc_t p;
    tn_client_t c;
    uint8_t *buf = malloc(n * sample_size + 1);
    const void **d = calloc(n, sizeof(*d));
    size_t *w = calloc(n, sizeof(*w)), *len = calloc(n, sizeof(*len)), i;
    uint8_t **out = calloc(n, sizeof(*out));
    int *st = calloc(n, sizeof(*st)), *ft = calloc(n, sizeof(*ft));
    int64_t *tok = calloc(n, sizeof(*tok));
    Nsut__Flush fl = NSUT__FLUSH__INIT;

    start(&p, args);
    connect_ready(&c, &p);
    for (i = 0; i < n; i++) {
        d[i] = buf + i * sample_size;
        w[i] = sample_size;
        memset(buf + i * sample_size, (int)i, sample_size);
    }
    ck_assert_int_eq(tn_send_query(&c, 1, 1000, n, d, w, NULL, NULL), 0);
    ck_assert_int_eq(tn_send(&c, CMN_MSG_FLUSH, &fl.base, NULL, 0), 0);
    collect(&c, 1000, n, st, out, len, tok, ft);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(st[i], 0);
        ck_assert_uint_eq(len[i], want_out);
        if (llm) {
            ck_assert_int_eq(ft[i], 1);
            ck_assert_int_eq(tok[i], want_tokens);
        }
        free(out[i]);
    }
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
    free(buf);
    free(d);
    free(w);
    free(len);
    free(out);
    free(st);
    free(ft);
    free(tok);
}

START_TEST(backend_null)
{
    const char *args[] = {"--backend", "null", "--backend-opt", "output_size=16", NULL};
    run_backend(args, 50, 64, 16, 0, 0);
}
END_TEST

START_TEST(backend_sim)
{
    const char *args[] = {
        "--backend", "sim",           "--backend-opt",  "engines=2",   "--backend-opt",
        "a_us=500",  "--backend-opt", "output_size=40", "--max-batch", "8",
        NULL};
    run_backend(args, 40, 784, 40, 0, 0);
}
END_TEST

START_TEST(backend_sim_llm)
{
    const char *args[] = {
        "--backend", "sim",           "--backend-opt", "llm=1",         "--backend-opt",
        "tokens=16", "--backend-opt", "ttft_us=2000",  "--backend-opt", "tpot_us=100",
        NULL};
    run_backend(args, 10, 1024, 16 * 4, 1, 16);
}
END_TEST

/* The digest of every sample, 1 B to 8 MiB, random and compressible, raw and LZ4. */
START_TEST(digest_proves_bytes)
{
    static const size_t sizes[] = {1, 31, 784, 4096, 150528, 1u << 20, 8u << 20};
    const char *args[] = {"--backend", "digest", NULL};
    const size_t ns = sizeof(sizes) / sizeof(sizes[0]);
    tn_proc_t p;
    tn_client_t c;
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    int round;

    start(&p, args);
    connect_ready(&c, &p);
    for (round = 0; round < 4; round++) {
        int compressible = round & 1, use_lz4 = round >> 1;
        uint8_t *raw[7], *wire[7], *out[7];
        const void *d[7];
        size_t w[7], r[7], len[7], i, j;
        int codec[7], st[7];

        for (i = 0; i < ns; i++) {
            raw[i] = malloc(sizes[i]);
            for (j = 0; j < sizes[i]; j++)
                raw[i][j] = compressible ? (uint8_t)((j % 28) > 8 ? j / 97 : 0) : rnd8();
            r[i] = sizes[i];
            codec[i] = CMPR_NONE;
            wire[i] = raw[i];
            w[i] = sizes[i];
            if (use_lz4) {
                size_t cap = cmpr_bound(CMPR_LZ4, sizes[i]);
                uint8_t *cb = malloc(cap);
                long n = cmpr_compress(ctx, CMPR_LZ4, raw[i], sizes[i], cb, cap);
                if (n > 0) {
                    wire[i] = cb;
                    w[i] = (size_t)n;
                    codec[i] = CMPR_LZ4;
                } else {
                    free(cb);
                }
            }
            d[i] = wire[i];
        }
        if (compressible && use_lz4)
            ck_assert_int_eq(codec[ns - 1], CMPR_LZ4); /* the test does exercise LZ4 */
        ck_assert_int_eq(
            tn_send_query(&c, (uint64_t)round, 100u * (uint64_t)round, ns, d, w, r, codec), 0);
        collect(&c, 100u * (uint64_t)round, ns, st, out, len, NULL, NULL);
        for (i = 0; i < ns; i++) {
            ck_assert_int_eq(st[i], 0);
            ck_assert_uint_eq(len[i], 8);
            ck_assert_msg(cmn_digest_get(out[i]) == cmn_digest64(raw[i], sizes[i]),
                          "digest of %zu bytes (%s)", sizes[i], cmpr_codec_name(codec[i]));
            free(out[i]);
            if (wire[i] != raw[i])
                free(wire[i]);
            free(raw[i]);
        }
    }
    tn_close(&c);
    cmpr_ctx_free(ctx);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

/* ---- bad input: each class gets an Error (or a close), a log line, and the node keeps serving */

static tn_proc_t bad_node;

/* The handshake deadline: short, so the silent client's test is quick; over ucx:// longer, as
 * the deadline runs from UCX's connection request, before the client's endpoint is wired up
 * (over shared memory under load that took over 400 ms). */
static const char *hs_timeout(void)
{
    return tn_is_ucx() ? "3000" : "400";
}

static void bad_setup(void)
{
    const char *args[] = {"--backend",
                          "digest",
                          "--handshake-timeout-ms",
                          hs_timeout(),
                          "--frame-timeout-ms",
                          "400",
                          "--max-frame",
                          "1M",
                          "--max-connections",
                          "8",
                          NULL};
    start(&bad_node, args);
}

static void bad_teardown(void)
{
    /* The node survived everything and still stops cleanly. */
    ck_assert_int_eq(tn_stop(&bad_node, SIGTERM, 10000), 0);
    tn_cleanup(&bad_node);
}

/* Sends raw bytes on a new connection (after a handshake when |handshake|), expects |want| as the
 * Error code and the close, then checks the log and a good query. */
static void bad_raw(int handshake, const void *bytes, size_t len, int want, const char *log_needle)
{
    tn_client_t c;
    int code;

    ck_assert_int_eq(tn_connect(&c, bad_node.port), 0);
    if (handshake) {
        Nsut__HelloAck *ack = tn_handshake(&c, codecs_both, 2);
        ck_assert_ptr_nonnull(ack);
        cmn_msg_free(&ack->base, NULL);
    }
    if (len)
        ck_assert_int_eq(tn_send_raw(&c, bytes, len), 0);
    code = tn_expect_error(&c, 5000);
    ck_assert_msg(code == want, "expected error %d, got %d", want, code);
    tn_close(&c);
    ck_assert_msg(tn_wait_log(&bad_node, log_needle, 10000), "log lacks '%s'", log_needle);
    good_query(&bad_node);
}

static size_t header(uint8_t *b, unsigned version, unsigned type, unsigned flags, uint32_t meta,
                     uint32_t payload)
{
    cmn_frame_header_t h;
    h.version = (uint8_t)version;
    h.type = (uint8_t)type;
    h.flags = (uint16_t)flags;
    h.meta_len = meta;
    h.payload_len = payload;
    cmn_frame_header_write(b, &h);
    return CMN_FRAME_HEADER_SIZE;
}

START_TEST(bad_frames)
{
    uint8_t b[64];
    static const uint8_t junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const uint8_t badpb[] = {0x12, 0x7f, 0x08};

    bad_raw(0, junk, sizeof(junk) - 1, NSUT__ERROR_CODE__ERROR_PROTOCOL, "bad frame magic");
    header(b, 2, CMN_MSG_HELLO, 0, 0, 0);
    bad_raw(0, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "unsupported protocol version");
    header(b, 1, 99, 0, 0, 0);
    bad_raw(1, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_PROTOCOL, "unknown message type");
    header(b, 1, CMN_MSG_PING, 4, 0, 0);
    bad_raw(1, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_PROTOCOL, "reserved frame flags");
    /* Oversized: after the handshake (limit 1M) and before it (16 KiB). */
    header(b, 1, CMN_MSG_QUERY, 0, 10, 2u << 20);
    bad_raw(1, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_TOO_LARGE,
            "over the limit of 1048576");
    header(b, 1, CMN_MSG_HELLO, 0, 20000, 0);
    bad_raw(0, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_TOO_LARGE, "before the handshake");
    /* Metadata past its own limit is named by that limit, not by the frame's (issue 34). */
    header(b, 1, CMN_MSG_QUERY, 0, (16u << 20) + 1, 0);
    bad_raw(1, b, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_TOO_LARGE,
            "frame of 16777217 metadata bytes over the metadata limit of ");
    /* Metadata that is not protobuf. */
    header(b, 1, CMN_MSG_QUERY, 0, sizeof(badpb), 0);
    memcpy(b + CMN_FRAME_HEADER_SIZE, badpb, sizeof(badpb));
    bad_raw(1, b, CMN_FRAME_HEADER_SIZE + sizeof(badpb), NSUT__ERROR_CODE__ERROR_BAD_MESSAGE,
            "do not unpack");
}
END_TEST

START_TEST(bad_truncated_and_stalled)
{
    uint8_t b[64];

    /* Half a frame, then nothing: dropped after the frame timeout. Over ucx:// a frame is one
     * active message, whole or absent: the half frame is a message whose lengths do not match
     * its header, refused at once. */
    header(b, 1, CMN_MSG_QUERY, 0, 10, 100);
    if (tn_is_ucx())
        bad_raw(1, b, CMN_FRAME_HEADER_SIZE + 4, NSUT__ERROR_CODE__ERROR_PROTOCOL,
                "does not match its frame header (10 metadata + 100 payload bytes)");
    else
        bad_raw(1, b, CMN_FRAME_HEADER_SIZE + 4, NSUT__ERROR_CODE__ERROR_TIMEOUT,
                "a frame half received");
    /* Connected and silent: dropped after the handshake timeout. */
    {
        char needle[64];
        snprintf(needle, sizeof(needle), "no Hello within %s ms", hs_timeout());
        bad_raw(0, NULL, 0, NSUT__ERROR_CODE__ERROR_TIMEOUT, needle);
    }
    /* A truncated frame followed by the peer closing: the node just closes its side. */
    {
        tn_client_t c;
        ck_assert_int_eq(tn_connect(&c, bad_node.port), 0);
        ck_assert_int_eq(tn_send_raw(&c, b, 7), 0);
        tn_close(&c);
        good_query(&bad_node);
    }
}
END_TEST

/* Sends one active message split as given (ucx://), expects |want| and the close, the log line,
 * and a good query after. */
static void bad_msg(const void *hdr, size_t hlen, const void *data, size_t dlen, int want,
                    const char *log_needle)
{
    tn_client_t c;
    int code;

    connect_ready(&c, &bad_node);
    /* A rendezvous the node refuses never completes at the sender (the endpoint closes): the
     * send may fail; the Error frame must arrive all the same. */
    (void)tn_send_ucx_msg(&c, hdr, hlen, data, dlen, 1);
    code = tn_expect_error(&c, 5000);
    ck_assert_msg(code == want, "expected error %d, got %d", want, code);
    tn_close(&c);
    ck_assert_msg(tn_wait_log(&bad_node, log_needle, 10000), "log lacks '%s'", log_needle);
    good_query(&bad_node);
}

/* ucx:// only: messages a TCP byte stream cannot express. A header split that disagrees with the
 * frame header either way, data longer or shorter than announced (eager and rendezvous sizes:
 * refused before a byte of a rendezvous payload moves), an oversized frame announced in a
 * rendezvous message, headers shorter than a frame header or of garbage, and a message without
 * its sender's endpoint (dropped and logged: the node cannot tell whom to answer). */
START_TEST(bad_ucx_messages)
{
    static uint8_t big[300 * 1024];
    uint8_t h[64];
    tn_client_t c;

    memset(h, 0, sizeof(h));
    /* Metadata announced as 10 bytes, 20 in the header. */
    header(h, 1, CMN_MSG_QUERY, 0, 10, 0);
    bad_msg(h, CMN_FRAME_HEADER_SIZE + 20, NULL, 0, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "36 header + 0 data bytes does not match");
    /* Payload announced as 100 bytes, 300 KiB sent (a rendezvous on every transport). */
    header(h, 1, CMN_MSG_QUERY, 0, 0, 100);
    bad_msg(h, CMN_FRAME_HEADER_SIZE, big, sizeof(big), NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "16 header + 307200 data bytes does not match");
    /* Payload announced as 300 KiB, 100 bytes sent. */
    header(h, 1, CMN_MSG_QUERY, 0, 0, sizeof(big));
    bad_msg(h, CMN_FRAME_HEADER_SIZE, big, 100, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "16 header + 100 data bytes does not match");
    /* 2 MiB against the node's 1 MiB frame limit, really sent: refused from the header. */
    {
        uint8_t *huge = calloc(1, 2u << 20);
        ck_assert_ptr_nonnull(huge);
        header(h, 1, CMN_MSG_QUERY, 0, 0, 2u << 20);
        bad_msg(h, CMN_FRAME_HEADER_SIZE, huge, 2u << 20, NSUT__ERROR_CODE__ERROR_TOO_LARGE,
                "over the limit of 1048576");
        free(huge);
    }
    /* Short and truncated frame headers, and a 16-byte header of garbage (issue 34). */
    header(h, 1, CMN_MSG_QUERY, 0, 0, 0);
    bad_msg(h, 8, NULL, 0, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "8 header + 0 data bytes: its header is shorter than a frame header (16 bytes)");
    bad_msg(h, 15, big, 100, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "15 header + 100 data bytes: its header is shorter");
    bad_msg(NULL, 0, h, CMN_FRAME_HEADER_SIZE, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "0 header + 16 data bytes: its header is shorter");
    memset(h, 0xa5, CMN_FRAME_HEADER_SIZE);
    bad_msg(h, CMN_FRAME_HEADER_SIZE, NULL, 0, NSUT__ERROR_CODE__ERROR_PROTOCOL,
            "frame header rejected: bad frame magic");
    /* Without the sender's endpoint: dropped, logged, and the connection still works. */
    connect_ready(&c, &bad_node);
    header(h, 1, CMN_MSG_PING, 0, 0, 0);
    ck_assert_int_eq(tn_send_ucx_msg(&c, h, CMN_FRAME_HEADER_SIZE, NULL, 0, 0), 0);
    ck_assert(tn_wait_log(&bad_node, "without its sender's endpoint", 10000));
    tn_close(&c);
    good_query(&bad_node);
}
END_TEST

START_TEST(bad_state_and_version)
{
    Nsut__Hello h = NSUT__HELLO__INIT;
    Nsut__Flush fl = NSUT__FLUSH__INIT;
    tn_client_t c;
    uint8_t b[256];
    long n;

    /* A Query-type message before Hello. */
    n = cmn_frame_encode_head(CMN_MSG_FLUSH, &fl.base, 0, b, sizeof(b));
    bad_raw(0, b, (size_t)n, NSUT__ERROR_CODE__ERROR_UNEXPECTED, "Flush before Hello");
    /* A Hello asking for protocol versions 2..3. */
    h.version_min = 2;
    h.version_max = 3;
    n = cmn_frame_encode_head(CMN_MSG_HELLO, &h.base, 0, b, sizeof(b));
    bad_raw(0, b, (size_t)n, NSUT__ERROR_CODE__ERROR_VERSION, "no common protocol version");
    /* A message only a node sends. */
    {
        Nsut__NameReply r = NSUT__NAME_REPLY__INIT;
        r.node_name = (char *)"me";
        n = cmn_frame_encode_head(CMN_MSG_NAME_REPLY, &r.base, 0, b, sizeof(b));
        bad_raw(1, b, (size_t)n, NSUT__ERROR_CODE__ERROR_UNEXPECTED,
                "is not a message a client sends");
    }
    (void)c;
}
END_TEST

START_TEST(bad_codec_and_compression)
{
    static uint8_t raw[4096], comp[8192];
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    const void *d[1] = {comp};
    size_t w[1], r[1];
    int codec[1] = {CMPR_LZ4};
    tn_client_t c;
    long n;
    int code;
    const int none_only[1] = {CMPR_NONE};
    Nsut__HelloAck *ack;

    memset(raw, 7, sizeof(raw));
    n = cmpr_compress(ctx, CMPR_LZ4, raw, sizeof(raw), comp, sizeof(comp));
    ck_assert_int_gt(n, 0);
    w[0] = (size_t)n;

    /* LZ4 after offering only uncompressed samples. */
    ck_assert_int_eq(tn_connect(&c, bad_node.port), 0);
    ack = tn_handshake(&c, none_only, 1);
    ck_assert_ptr_nonnull(ack);
    ck_assert_uint_eq(ack->n_sample_codecs, 1);
    cmn_msg_free(&ack->base, NULL);
    r[0] = sizeof(raw);
    ck_assert_int_eq(tn_send_query(&c, 1, 1, 1, d, w, r, codec), 0);
    code = tn_expect_error(&c, 5000);
    ck_assert_int_eq(code, NSUT__ERROR_CODE__ERROR_CODEC);
    tn_close(&c);
    ck_assert(tn_wait_log(&bad_node, "which was not negotiated", 10000));
    good_query(&bad_node);

    /* A size lie: the block decodes to 4096 bytes, the sample claims 5000. */
    connect_ready(&c, &bad_node);
    r[0] = 5000;
    ck_assert_int_eq(tn_send_query(&c, 1, 1, 1, d, w, r, codec), 0);
    ck_assert_int_eq(tn_expect_error(&c, 5000), NSUT__ERROR_CODE__ERROR_DECOMPRESS);
    tn_close(&c);
    ck_assert(tn_wait_log(&bad_node, "does not decode to its declared 5000 bytes", 10000));
    good_query(&bad_node);

    /* A bomb: 900 KB claimed from 3 bytes (rejected before any allocation or decoding). */
    connect_ready(&c, &bad_node);
    r[0] = 900000;
    w[0] = 3;
    ck_assert_int_eq(tn_send_query(&c, 1, 1, 1, d, w, r, codec), 0);
    ck_assert_int_eq(tn_expect_error(&c, 5000), NSUT__ERROR_CODE__ERROR_DECOMPRESS);
    tn_close(&c);
    ck_assert(tn_wait_log(&bad_node, "decompression bomb", 10000));
    good_query(&bad_node);

    /* Over the node's sample limit (1M frame): refused from the sizes alone. */
    connect_ready(&c, &bad_node);
    r[0] = 2u << 20;
    w[0] = (size_t)n;
    ck_assert_int_eq(tn_send_query(&c, 1, 1, 1, d, w, r, codec), 0);
    ck_assert_int_eq(tn_expect_error(&c, 5000), NSUT__ERROR_CODE__ERROR_TOO_LARGE);
    tn_close(&c);
    good_query(&bad_node);
    cmpr_ctx_free(ctx);
}
END_TEST

START_TEST(bad_duplicate_id_and_limits)
{
    const char *args[] = {"--backend", "sim", "--backend-opt", "a_us=300000", "--max-connections",
                          "2",         NULL};
    tn_proc_t p;
    tn_client_t c, c2, c3;
    uint8_t data[16] = {0};
    const void *d[1] = {data};
    size_t w[1] = {sizeof(data)};

    start(&p, args);
    /* The same id twice while the first is still in flight (300 ms batch). */
    connect_ready(&c, &p);
    ck_assert_int_eq(tn_send_query(&c, 1, 42, 1, d, w, NULL, NULL), 0);
    ck_assert_int_eq(tn_send_query(&c, 2, 42, 1, d, w, NULL, NULL), 0);
    ck_assert_int_eq(tn_expect_error(&c, 5000), NSUT__ERROR_CODE__ERROR_BAD_MESSAGE);
    tn_close(&c);
    ck_assert(tn_wait_log(&p, "already in flight", 10000));

    /* Connection limit: the third is refused with OVERLOAD. */
    connect_ready(&c, &p);
    connect_ready(&c2, &p);
    ck_assert_int_eq(tn_connect(&c3, p.port), 0);
    ck_assert_int_eq(tn_expect_error(&c3, 5000), NSUT__ERROR_CODE__ERROR_OVERLOAD);
    tn_close(&c3);
    ck_assert(tn_wait_log(&p, "over the limit of 2 connections", 10000));
    tn_close(&c2);
    /* The first still works. */
    {
        int st[1];
        ck_assert_int_eq(tn_send_query(&c, 3, 7, 1, d, w, NULL, NULL), 0);
        collect(&c, 7, 1, st, NULL, NULL, NULL, NULL);
        ck_assert_int_eq(st[0], 0);
    }
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

/* Counts the results of a Response frame (OK ones must be of query 1, ids 1-20; rejected ones of
 * query 2, ids from 100); returns whether the frame was the Goodbye. */
static int count_results(unsigned type, const ProtobufCMessage *m, size_t *got, size_t *ok,
                         size_t *rejected)
{
    size_t i;

    if (type == CMN_MSG_RESPONSE) {
        const Nsut__Response *r = (const Nsut__Response *)m;
        for (i = 0; i < r->n_results; i++) {
            (*got)++;
            if (r->results[i]->status == NSUT__STATUS__STATUS_REJECTED) {
                ck_assert_uint_ge(r->results[i]->id, 100);
                (*rejected)++;
            } else {
                ck_assert_int_eq(r->results[i]->status, NSUT__STATUS__STATUS_OK);
                ck_assert_uint_le(r->results[i]->id, 20);
                (*ok)++;
            }
        }
    }
    return type == CMN_MSG_GOODBYE;
}

/* SIGTERM while batches run: every result arrives, then Goodbye, then exit 0; samples sent during
 * the drain are rejected, not lost. Each step waits for its condition, not for a time: the query
 * is known to be read (a Stats round trip after it), the drain to have begun (its log line), and
 * 2.5 s of simulated batches keep the node draining however slowly this machine gets there. */
START_TEST(sigterm_loses_nothing)
{
    const char *args[] = {"--backend",
                          "sim",
                          "--backend-opt",
                          "a_us=500000",
                          "--backend-opt",
                          "engines=1",
                          "--max-batch",
                          "4",
                          NULL};
    Nsut__StatsRequest sr = NSUT__STATS_REQUEST__INIT;
    tn_proc_t p;
    tn_client_t c;
    uint8_t data[64] = {1};
    const void *d[20];
    size_t w[20], i, got = 0, rejected = 0, ok = 0;
    int goodbye = 0, stats_seen = 0;

    start(&p, args);
    connect_ready(&c, &p);
    for (i = 0; i < 20; i++) {
        d[i] = data;
        w[i] = sizeof(data);
    }
    ck_assert_int_eq(tn_send_query(&c, 1, 1, 20, d, w, NULL, NULL), 0);
    /* The node reads a connection's frames in order: once the Stats answer is here, query 1 is in
     * its batches. */
    ck_assert_int_eq(tn_send(&c, CMN_MSG_STATS_REQUEST, &sr.base, NULL, 0), 0);
    while (!stats_seen) {
        ProtobufCMessage *m = NULL;
        unsigned type;
        int rc = tn_recv(&c, 10000, &type, &m, NULL, NULL);
        ck_assert_msg(rc == 0, "no Stats answer: %s", cmn_strerror(rc));
        ck_assert(!count_results(type, m, &got, &ok, &rejected));
        stats_seen = type == CMN_MSG_STATS;
        cmn_msg_free(m, NULL);
    }
    kill(p.pid, SIGTERM);
    ck_assert_msg(tn_wait_log(&p, "SIGTERM: stop accepting", 10000), "no drain after SIGTERM");
    ck_assert_int_eq(tn_send_query(&c, 2, 100, 2, d, w, NULL, NULL), 0);
    while (!goodbye) {
        ProtobufCMessage *m = NULL;
        unsigned type;
        int rc = tn_recv(&c, 10000, &type, &m, NULL, NULL);
        ck_assert_msg(rc == 0, "lost the connection before Goodbye: %s", cmn_strerror(rc));
        goodbye = count_results(type, m, &got, &ok, &rejected);
        cmn_msg_free(m, NULL);
    }
    ck_assert_uint_eq(ok, 20);
    ck_assert_uint_eq(rejected, 2);
    ck_assert_uint_eq(got, 22);
    tn_close(&c);
    ck_assert_int_eq(tn_wait(&p, 10000), 0);
    ck_assert(tn_wait_log(&p, "drained", 10000));
    tn_cleanup(&p);
}
END_TEST

/* The Goodbye behind Pings the client has not read yet, the node gone: over ucx:// their Pongs
 * cannot leave any more (the endpoint has failed), over tcp:// the second meets a closed socket;
 * the Goodbye that arrived before the close is still read (sut.ucx_shm.sigterm lost it 1 loaded
 * run in 12-24: the client gave up on the failed Pong, with the Goodbye already in its queue).
 * Nothing races: the client takes the node's frames as they come (tn_pump) but decodes none
 * until the node has exited. */
START_TEST(sigterm_goodbye_behind_ping)
{
    const char *args[] = {"--backend", "sim", NULL};
    tn_proc_t p;
    tn_client_t c;
    int goodbye = 0, rc, waited;

    start(&p, args);
    connect_ready(&c, &p);
    /* A connection quiet for heartbeat_ms (1 s, checked on the node's 250 ms tick) gets a Ping:
     * 4 s unread leave some queued however late the ticks run here. */
    tn_pump(&c, 4000);
    kill(p.pid, SIGTERM);
    for (waited = 0; (rc = tn_wait(&p, 1)) == -1 && waited < 20000; waited += 25)
        tn_pump(&c, 25);
    ck_assert_msg(rc == 0, "sut-node after SIGTERM: exit %d (-1: still running after 20 s)", rc);
    ck_assert(tn_wait_log(&p, "drained", 10000));
    while (!goodbye) {
        ProtobufCMessage *m = NULL;
        unsigned type;
        rc = tn_recv(&c, 10000, &type, &m, NULL, NULL);
        ck_assert_msg(rc == 0,
                      "lost the connection before Goodbye: %s (%u Pings answered, %u of them lost)",
                      cmn_strerror(rc), c.pings, c.pongs_lost);
        goodbye = type == CMN_MSG_GOODBYE;
        cmn_msg_free(m, NULL);
    }
    ck_assert_msg(
        c.pings >= 1,
        "no Ping in 4 s of quiet (heartbeat 1 s): nothing was queued ahead of the Goodbye");
    tn_close(&c);
    tn_cleanup(&p);
}
END_TEST

/* Starts the example plugin with ARGS, checks one query's bytes come back XOR'ed with KEY, stops
 * the node with SIGTERM (exit 0) and leaves |p| for the caller to read the log and clean up. */
static void plugin_roundtrip(tn_proc_t *p, const char *const *args, uint8_t key)
{
    tn_client_t c;
    uint8_t data[2][100], *out[2];
    const void *d[2] = {data[0], data[1]};
    size_t w[2] = {100, 37}, len[2], i, j;
    int st[2];

    start(p, args);
    ck_assert(tn_wait_log(p, "backend example-xor", 10000));
    connect_ready(&c, p);
    for (i = 0; i < 2; i++)
        for (j = 0; j < 100; j++)
            data[i][j] = (uint8_t)(i * 100 + j);
    ck_assert_int_eq(tn_send_query(&c, 1, 10, 2, d, w, NULL, NULL), 0);
    collect(&c, 10, 2, st, out, len, NULL, NULL);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(st[i], 0);
        ck_assert_uint_eq(len[i], w[i]);
        for (j = 0; j < w[i]; j++)
            ck_assert_uint_eq(out[i][j], (uint8_t)(data[i][j] ^ key));
        free(out[i]);
    }
    tn_close(&c);
    ck_assert_int_eq(tn_stop(p, SIGTERM, 10000), 0);
}

START_TEST(plugin_via_dlopen)
{
    const char *args[] = {"--backend", SUT_PLUGIN_PATH, "--backend-opt", "xor=165", NULL};
    tn_proc_t p;

    plugin_roundtrip(&p, args, 165);
    tn_cleanup(&p);
}
END_TEST

/* ABI 1.3: the node offers its loop to an inline backend only, calls detach() at its stop only
 * when attach() took the loop, and never calls either for a table whose struct_size ends before
 * them (a plugin built before 1.3). The data path is the same in every case. */
START_TEST(plugin_loop_offer)
{
    static const struct {
        const char *inline_run, *attach, *abi_minor;
        int offered, taken;
    } cases[] = {
        {"1", "1", NULL, 1, 1}, /* inline, takes it: attach, then detach at the stop */
        {"1", "0", NULL, 1, 0}, /* inline, declines: attach only */
        {"0", "1", NULL, 0, 0}, /* not inline: never offered */
        {"1", "1", "2", 0, 0},  /* a 1.2 table: neither function is called */
    };

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char inl[16], att[16];
        const char *args[] = {"--backend",
                              SUT_PLUGIN_PATH,
                              "--backend-opt",
                              "xor=90",
                              "--backend-opt",
                              inl,
                              "--backend-opt",
                              att,
                              NULL};
        tn_proc_t p;

        snprintf(inl, sizeof(inl), "inline=%s", cases[k].inline_run);
        snprintf(att, sizeof(att), "attach=%s", cases[k].attach);
        if (cases[k].abi_minor)
            setenv("SUT_EXAMPLE_ABI_MINOR", cases[k].abi_minor, 1);
        else
            unsetenv("SUT_EXAMPLE_ABI_MINOR");
        plugin_roundtrip(&p, args, 90);
        ck_assert_msg(tn_file_contains(p.log_path, "example-xor: attach:") == cases[k].offered,
                      "case %zu: attach() %s", k, cases[k].offered ? "not called" : "called");
        ck_assert_msg(tn_file_contains(p.log_path, "attach: took the node's loop") ==
                          cases[k].taken,
                      "case %zu: the loop %s", k, cases[k].taken ? "not taken" : "taken");
        ck_assert_msg(tn_file_contains(p.log_path, "example-xor: detach") == cases[k].taken,
                      "case %zu: detach() %s", k, cases[k].taken ? "not called" : "called");
        tn_cleanup(&p);
    }
    unsetenv("SUT_EXAMPLE_ABI_MINOR");
}
END_TEST

/* Runs sut-node with |args| and returns its exit status; its stderr goes to |errfile|. */
static int run_cli(const char *const *args, const char *errfile)
{
    return tn_run(SUT_NODE_EXE, args, errfile);
}

#define file_contains tn_file_contains

START_TEST(command_line_and_config)
{
    static const char *const every_flag[] = {"--listen",
                                             "--name",
                                             "--backend",
                                             "--backend-opt",
                                             "--device",
                                             "--max-batch",
                                             "--max-batch-bytes",
                                             "--max-wait-us",
                                             "--workers",
                                             "--threads",
                                             "--result-codec",
                                             "--max-frame",
                                             "--max-connections",
                                             "--max-conn-per-peer",
                                             "--max-preauth",
                                             "--memory-budget",
                                             "--max-inflight",
                                             "--handshake-timeout-ms",
                                             "--frame-timeout-ms",
                                             "--idle-timeout-ms",
                                             "--write-timeout-ms",
                                             "--drain-timeout-ms",
                                             "--heartbeat-ms",
                                             "--seed",
                                             "--port-file",
                                             "--metrics-listen",
                                             "--stats",
                                             "--tls-cert",
                                             "--tls-key",
                                             "--tls-ca",
                                             "--tls-allow",
                                             "--log-level",
                                             "--config",
                                             "--version",
                                             "--help"};
    const char *help[] = {"--help", NULL};
    const char *badflag[] = {"--no-such-flag", NULL};
    const char *badval[] = {"--max-batch", "lots", NULL};
    const char *noconn[] = {"--max-connections", "0", NULL};
    const char *noframe[] = {"--frame-timeout-ms", "0", NULL};
    char conf[] = "/tmp/sutconf_XXXXXX", out[] = "/tmp/sutout_XXXXXX";
    const char *withconf[] = {"--config", conf, NULL};
    tn_proc_t p;
    tn_client_t c;
    Nsut__HelloAck *ack;
    FILE *f;
    size_t i;

    close(mkstemp(out));
    ck_assert_int_eq(run_cli(help, out), 0);
    for (i = 0; i < sizeof(every_flag) / sizeof(every_flag[0]); i++)
        ck_assert_msg(file_contains(out, every_flag[i]), "--help does not document %s",
                      every_flag[i]);
    ck_assert_int_eq(run_cli(badflag, out), 2);
    ck_assert(file_contains(out, "unknown option '--no-such-flag'"));
    ck_assert_int_eq(run_cli(badval, out), 2);
    ck_assert(file_contains(out, "--max-batch: 'lots' is not an integer from 1 to"));
    /* Values that would make the node useless are refused, saying why. */
    ck_assert_int_eq(run_cli(noconn, out), 2);
    ck_assert(file_contains(out, "--max-connections: '0' is not an integer from 1 to 65536 "
                                 "(0: the node would refuse every client)"));
    ck_assert_int_eq(run_cli(noframe, out), 2);
    ck_assert(file_contains(out, "--frame-timeout-ms: '0' is not an integer from 1 to 86400000 ms "
                                 "(0: every partly received frame"));

    close(mkstemp(conf));
    f = fopen(conf, "w");
    fprintf(f, "# a node\nname = from-config\nbackend = digest\nmax-batch = banana\n");
    fclose(f);
    ck_assert_int_eq(run_cli(withconf, out), 2);
    ck_assert(file_contains(out, ":4: --max-batch: 'banana' is not an integer"));
    f = fopen(conf, "w");
    fprintf(f, "name = from-config\nbackend = digest\n");
    fclose(f);
    start(&p, withconf);
    ck_assert_int_eq(tn_connect(&c, p.port), 0);
    ack = tn_handshake(&c, codecs_both, 2);
    ck_assert_ptr_nonnull(ack);
    ck_assert_str_eq(ack->node_name, "from-config");
    ck_assert_str_eq(ack->caps->backend, "digest");
    cmn_msg_free(&ack->base, NULL);
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGINT, 10000), 0);
    tn_cleanup(&p);
    unlink(conf);
    unlink(out);
}
END_TEST

CHECK_TCASE(tc_handshake, "handshake", 60, handshake_and_name)

CHECK_TCASE(tc_backends, "backends", 60, backend_null, backend_sim, backend_sim_llm)

CHECK_TCASE(tc_digest, "digest", 120, digest_proves_bytes)

static TCase *tc_bad_input(void)
{
    TCase *tc = tcase_create("bad_input");
    tcase_add_checked_fixture(tc, bad_setup, bad_teardown);
    tcase_add_test(tc, bad_frames);
    tcase_add_test(tc, bad_truncated_and_stalled);
    tcase_add_test(tc, bad_state_and_version);
    tcase_add_test(tc, bad_codec_and_compression);
    if (tn_is_ucx())
        tcase_add_test(tc, bad_ucx_messages);
    tcase_set_timeout(tc, 60);
    return tc;
}

CHECK_TCASE(tc_limits, "limits", 60, bad_duplicate_id_and_limits)

CHECK_TCASE(tc_sigterm, "sigterm", 60, sigterm_loses_nothing, sigterm_goodbye_behind_ping)

CHECK_TCASE(tc_plugin, "plugin", 60, plugin_via_dlopen, plugin_loop_offer)

CHECK_TCASE(tc_cli, "cli", 60, command_line_and_config)

CHECK_MAIN("sut", tc_handshake, tc_backends, tc_digest, tc_bad_input, tc_limits, tc_sigterm,
           tc_plugin, tc_cli)
