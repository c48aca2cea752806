/* Writes the seed corpus for the fuzz targets (valid frames and messages of every type, LZ4
 * blocks, a decompression bomb). Run once by hand; its output is committed under corpus/:
 *
 *     build/tests/fuzz/gen_corpus tests/fuzz/corpus
 *
 * Inputs found later by fuzzing campaigns are added beside these (tests/fuzz/README.md). */
#include "cmn/frame.h"
#include "cmn/msg.h"
#include "cmn/vol.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;

static void put(const char *target, const char *name, const void *data, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* Message metadata with the two-byte payload-length prefix that fuzz_msg expects. */
static void put_msg(const char *target, const char *name, const ProtobufCMessage *m,
                    uint16_t payload)
{
    uint8_t buf[4096];
    size_t n = protobuf_c_message_pack(m, buf + 2);
    buf[0] = (uint8_t)payload;
    buf[1] = (uint8_t)(payload >> 8);
    put(target, name, buf, n + 2);
}

/* A whole frame, with the chunk-size byte that fuzz_frame expects in front. */
static size_t frame(uint8_t *out, unsigned type, const ProtobufCMessage *m, const uint8_t *payload,
                    size_t plen)
{
    long hl = cmn_frame_encode_head(type, m, plen, out, 4096);
    if (hl < 0)
        exit(2);
    memcpy(out + hl, payload, plen);
    return (size_t)hl + plen;
}

int main(int argc, char **argv)
{
    static uint8_t buf[1 << 16], data[8192], comp[16384];
    Nsut__Codec codecs[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};
    Nsut__Hello hello = NSUT__HELLO__INIT;
    Nsut__HelloAck ack = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    Nsut__NameRequest nreq = NSUT__NAME_REQUEST__INIT;
    Nsut__NameReply nrep = NSUT__NAME_REPLY__INIT;
    Nsut__Sample s[2] = {NSUT__SAMPLE__INIT, NSUT__SAMPLE__INIT}, *sp[2] = {&s[0], &s[1]};
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Result r = NSUT__RESULT__INIT, *rp = &r;
    Nsut__Response resp = NSUT__RESPONSE__INIT;
    Nsut__FirstToken ft = NSUT__FIRST_TOKEN__INIT;
    Nsut__Flush fl = NSUT__FLUSH__INIT;
    Nsut__Ping ping = NSUT__PING__INIT;
    Nsut__Pong pong = NSUT__PONG__INIT;
    Nsut__Error err = NSUT__ERROR__INIT;
    Nsut__StatsRequest sreq = NSUT__STATS_REQUEST__INIT;
    Nsut__Stats st = NSUT__STATS__INIT;
    Nsut__Goodbye bye = NSUT__GOODBYE__INIT;
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    size_t i, n, off;
    long c;

    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    for (i = 0; i < sizeof(data); i++)
        data[i] = (i % 28 > 6 && i % 28 < 22) ? (uint8_t)(100 + i % 50) : 0;

    hello.version_min = hello.version_max = 1;
    hello.n_sample_codecs = hello.n_result_codecs = 2;
    hello.sample_codecs = hello.result_codecs = codecs;
    hello.client_name = (char *)"qdl@host:1234";
    hello.max_frame_size = 1u << 28;
    caps.backend = (char *)"digest";
    caps.device = (char *)"cpu";
    caps.max_batch = caps.preferred_batch = 8;
    caps.weight = 1.0;
    ack.version = 1;
    ack.n_sample_codecs = 2;
    ack.sample_codecs = codecs;
    ack.result_codec = NSUT__CODEC__CODEC_LZ4;
    ack.node_name = (char *)"node-a";
    ack.caps = &caps;
    nreq.request_id = 7;
    nrep.request_id = 7;
    nrep.node_name = (char *)"node-a";
    s[0].id = 1;
    s[0].raw_size = s[0].wire_size = 64;
    c = cmpr_compress(ctx, CMPR_LZ4, data, 4096, comp, sizeof(comp));
    s[1].id = 2;
    s[1].codec = NSUT__CODEC__CODEC_LZ4;
    s[1].raw_size = 4096;
    s[1].wire_size = (uint64_t)c;
    q.query_id = 3;
    q.n_samples = 2;
    q.samples = sp;
    q.parts = 1;
    r.id = 1;
    r.raw_size = r.wire_size = 8;
    resp.n_results = 1;
    resp.results = &rp;
    ft.n_results = 1;
    ft.results = &rp;
    ping.seq = pong.seq = 1;
    ping.sent_ns = pong.sent_ns = 123456789;
    err.code = NSUT__ERROR_CODE__ERROR_TOO_LARGE;
    err.message = (char *)"frame of 300000000 bytes over the limit";
    err.id = 5;
    st.node_name = (char *)"node-a";
    st.samples = 1000;
    st.bytes_in = 1u << 20;
    bye.reason = (char *)"shutdown";

    put_msg("msg_hello", "hello", &hello.base, 0);
    put_msg("msg_hello_ack", "ack", &ack.base, 0);
    put_msg("msg_name_request", "nreq", &nreq.base, 0);
    put_msg("msg_name_reply", "nrep", &nrep.base, 0);
    put_msg("msg_query", "query", &q.base, (uint16_t)(64 + c));
    put_msg("msg_response", "response", &resp.base, 8);
    put_msg("msg_first_token", "first_token", &ft.base, 8);
    put_msg("msg_flush", "flush", &fl.base, 0);
    put_msg("msg_ping", "ping", &ping.base, 0);
    put_msg("msg_pong", "pong", &pong.base, 0);
    put_msg("msg_error", "error", &err.base, 0);
    put_msg("msg_stats_request", "sreq", &sreq.base, 0);
    put_msg("msg_stats", "stats", &st.base, 0);
    put_msg("msg_goodbye", "bye", &bye.base, 0);

    /* fuzz_frame: a chunk-size byte, then frames back to back. */
    buf[0] = 7;
    off = 1;
    off += frame(buf + off, CMN_MSG_HELLO, &hello.base, NULL, 0);
    put("frame", "hello", buf, off);
    memcpy(data + 64, comp, (size_t)c);
    buf[0] = 63;
    off = 1;
    off += frame(buf + off, CMN_MSG_QUERY, &q.base, data, 64 + (size_t)c);
    off += frame(buf + off, CMN_MSG_FLUSH, &fl.base, NULL, 0);
    off += frame(buf + off, CMN_MSG_PING, &ping.base, NULL, 0);
    put("frame", "query_flush_ping", buf, off);
    buf[0] = 0;
    off = 1;
    off += frame(buf + off, CMN_MSG_RESPONSE, &resp.base, data, 8);
    off += frame(buf + off, CMN_MSG_ERROR, &err.base, NULL, 0);
    off += frame(buf + off, CMN_MSG_GOODBYE, &bye.base, NULL, 0);
    put("frame", "response_error_goodbye", buf, off);

    /* fuzz_lz4: declared size, then a block; plus a bomb claim and a lie. */
    for (i = 0; i < 3; i++) {
        static const size_t sizes[3] = {100, 784, 4096};
        char name[32];
        n = sizes[i];
        for (size_t k = 0; k < n; k++)
            data[k] = (k % 28 > 6 && k % 28 < 22) ? (uint8_t)(100 + k % 50) : 0;
        c = cmpr_compress(ctx, CMPR_LZ4, data, n, buf + 4, sizeof(buf) - 4);
        buf[0] = (uint8_t)n;
        buf[1] = (uint8_t)(n >> 8);
        buf[2] = buf[3] = 0;
        snprintf(name, sizeof(name), "block_%zu", n);
        put("lz4", name, buf, 4 + (size_t)c);
        put("lz4_roundtrip", name, data, n);
    }
    buf[0] = 0x00;
    buf[1] = 0x00;
    buf[2] = 0x40; /* 4 MiB claimed from a handful of bytes */
    buf[3] = 0x00;
    put("lz4", "bomb", buf, 12);
    memset(data, 0x5a, 300);
    put("lz4_roundtrip", "repeated", data, 300);

    /* fuzz_vol: a 2x3x4 float32 case, a 4x4x4 uint8 one, and a header whose shape overflows. */
    {
        cmn_vol_t v = {CMN_VOL_F32, 1, {2, 3, 4}};

        memset(buf, 0, sizeof(buf));
        cmn_vol_encode(&v, buf);
        put("vol", "f32_2x3x4", buf, CMN_VOL_HEADER_SIZE + 96);
        v.dtype = CMN_VOL_U8;
        v.dims[0] = v.dims[1] = v.dims[2] = 4;
        cmn_vol_encode(&v, buf);
        put("vol", "u8_4x4x4", buf, CMN_VOL_HEADER_SIZE + 64);
        memset(buf + 12, 0xff, 16);
        put("vol", "overflow", buf, CMN_VOL_HEADER_SIZE);
    }
    cmpr_ctx_free(ctx);
    return 0;
}
