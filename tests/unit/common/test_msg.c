/* Messages: every type round-trips through a frame; malformed metadata and inconsistent fields are
 * rejected with the right code. */
#include "test_common.h"

#include "cmn/arena.h"
#include "cmn/msg.h"

#include <stdlib.h>
#include <string.h>

/* Encodes |m| as a frame of |type| with |payload_len| bytes of 0xAB payload into |buf| and returns
 * the decoded view. */
static cmn_frame_t frame_of(unsigned type, const ProtobufCMessage *m, size_t payload_len,
                            uint8_t *buf, size_t cap)
{
    cmn_frame_t f;
    long hl = cmn_frame_encode_head(type, m, payload_len, buf, cap);

    ck_assert_int_gt(hl, 0);
    ck_assert_uint_le((size_t)hl + payload_len, cap);
    memset(buf + hl, 0xAB, payload_len);
    ck_assert_int_eq(
        cmn_frame_header_parse(buf, &(cmn_frame_limits_t){UINT32_MAX, UINT64_MAX}, &f.hdr), 0);
    f.meta = buf + CMN_FRAME_HEADER_SIZE;
    f.payload = f.meta + f.hdr.meta_len;
    return f;
}

static int unpack_rc(unsigned type, const ProtobufCMessage *m, size_t payload_len)
{
    static uint8_t buf[1 << 16];
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    cmn_frame_t f = frame_of(type, m, payload_len, buf, sizeof(buf));
    ProtobufCMessage *out = NULL;
    cmn_errbuf_t eb = {{0}};
    int rc = cmn_msg_unpack(&f, &lim, NULL, &out, &eb);

    if (rc == 0) {
        ck_assert_ptr_nonnull(out);
        ck_assert_ptr_eq(out->descriptor, cmn_msg_descriptor(type));
        cmn_msg_free(out, NULL);
    } else {
        /* Every rejection says why. */
        ck_assert_msg(eb.msg[0] != '\0', "no reason for %s", cmn_err_name(rc));
    }
    return rc;
}

START_TEST(every_type_roundtrips)
{
    Nsut__Codec codecs[2] = {NSUT__CODEC__CODEC_NONE, NSUT__CODEC__CODEC_LZ4};
    Nsut__Hello hello = NSUT__HELLO__INIT;
    Nsut__HelloAck ack = NSUT__HELLO_ACK__INIT;
    Nsut__Capabilities caps = NSUT__CAPABILITIES__INIT;
    Nsut__NameRequest nreq = NSUT__NAME_REQUEST__INIT;
    Nsut__NameReply nrep = NSUT__NAME_REPLY__INIT;
    Nsut__Sample s = NSUT__SAMPLE__INIT, *sp = &s;
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

    hello.version_min = hello.version_max = 1;
    hello.n_sample_codecs = hello.n_result_codecs = 2;
    hello.sample_codecs = hello.result_codecs = codecs;
    hello.client_name = (char *)"qdl@host";
    ck_assert_int_eq(unpack_rc(CMN_MSG_HELLO, &hello.base, 0), 0);

    caps.backend = (char *)"digest";
    caps.device = (char *)"cpu";
    caps.weight = 1.0;
    ack.version = 1;
    ack.node_name = (char *)"node-a";
    ack.n_sample_codecs = 2;
    ack.sample_codecs = codecs;
    ack.caps = &caps;
    ck_assert_int_eq(unpack_rc(CMN_MSG_HELLO_ACK, &ack.base, 0), 0);

    nreq.request_id = 9;
    ck_assert_int_eq(unpack_rc(CMN_MSG_NAME_REQUEST, &nreq.base, 0), 0);
    nrep.request_id = 9;
    nrep.node_name = (char *)"node-a";
    ck_assert_int_eq(unpack_rc(CMN_MSG_NAME_REPLY, &nrep.base, 0), 0);

    s.id = 1;
    s.raw_size = s.wire_size = 300;
    q.n_samples = 1;
    q.samples = &sp;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 300), 0);

    r.id = 1;
    r.raw_size = r.wire_size = 8;
    resp.n_results = 1;
    resp.results = &rp;
    ck_assert_int_eq(unpack_rc(CMN_MSG_RESPONSE, &resp.base, 8), 0);
    ft.n_results = 1;
    ft.results = &rp;
    ck_assert_int_eq(unpack_rc(CMN_MSG_FIRST_TOKEN, &ft.base, 8), 0);

    ck_assert_int_eq(unpack_rc(CMN_MSG_FLUSH, &fl.base, 0), 0);
    ping.seq = 3;
    ping.sent_ns = 12345;
    ck_assert_int_eq(unpack_rc(CMN_MSG_PING, &ping.base, 0), 0);
    pong.seq = 3;
    ck_assert_int_eq(unpack_rc(CMN_MSG_PONG, &pong.base, 0), 0);
    err.code = NSUT__ERROR_CODE__ERROR_PROTOCOL;
    err.message = (char *)"bad";
    ck_assert_int_eq(unpack_rc(CMN_MSG_ERROR, &err.base, 0), 0);
    ck_assert_int_eq(unpack_rc(CMN_MSG_STATS_REQUEST, &sreq.base, 0), 0);
    st.node_name = (char *)"node-a";
    st.samples = 5;
    ck_assert_int_eq(unpack_rc(CMN_MSG_STATS, &st.base, 0), 0);
    bye.reason = (char *)"shutdown";
    ck_assert_int_eq(unpack_rc(CMN_MSG_GOODBYE, &bye.base, 0), 0);
}
END_TEST

START_TEST(bad_protobuf_rejected)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    /* Field 2 (samples) declared as length-delimited with a length past the end of the data. */
    static const uint8_t garbage[] = {0x12, 0x7f, 0x08, 0x01};
    cmn_frame_t f;
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;

    memset(&f, 0, sizeof(f));
    f.hdr.version = 1;
    f.hdr.type = CMN_MSG_QUERY;
    f.hdr.meta_len = sizeof(garbage);
    f.meta = garbage;
    f.payload = garbage + sizeof(garbage);
    ck_assert_int_eq(cmn_msg_unpack(&f, &lim, NULL, &m, &eb), CMN_EBADMSG);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(eb.msg, "Query"));
}
END_TEST

START_TEST(inconsistent_fields_rejected)
{
    Nsut__Sample s[2] = {NSUT__SAMPLE__INIT, NSUT__SAMPLE__INIT};
    Nsut__Sample *sp[2] = {&s[0], &s[1]};
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Result r = NSUT__RESULT__INIT, *rp = &r;
    Nsut__Response resp = NSUT__RESPONSE__INIT;
    Nsut__Hello hello = NSUT__HELLO__INIT;
    Nsut__HelloAck ack = NSUT__HELLO_ACK__INIT;
    char longname[400];

    q.n_samples = 2;
    q.samples = sp;
    s[0].raw_size = s[0].wire_size = 10;
    s[1].raw_size = s[1].wire_size = 20;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 30), 0);
    /* Wire sizes that do not add up to the payload. */
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 29), CMN_EFIELD);
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 31), CMN_EFIELD);
    /* An uncompressed sample whose wire and raw sizes differ. */
    s[1].raw_size = 21;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 30), CMN_EFIELD);
    /* A "compressed" sample that does not shrink. */
    s[1].codec = NSUT__CODEC__CODEC_LZ4;
    s[1].raw_size = 20;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 30), CMN_EFIELD);
    /* An unknown codec. */
    s[1].codec = (Nsut__Codec)7;
    s[1].raw_size = 100;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 30), CMN_ECODEC);
    /* No samples; a part index past the parts count. */
    q.n_samples = 0;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 0), CMN_EFIELD);
    q.n_samples = 1;
    q.part = 2;
    q.parts = 2;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 10), CMN_EFIELD);
    /* parts 0: cut on the fly, any index. */
    q.parts = 0;
    ck_assert_int_eq(unpack_rc(CMN_MSG_QUERY, &q.base, 10), 0);

    /* A failed result that still carries bytes; a negative token count. */
    resp.n_results = 1;
    resp.results = &rp;
    r.status = NSUT__STATUS__STATUS_BACKEND_ERROR;
    r.wire_size = 4;
    ck_assert_int_eq(unpack_rc(CMN_MSG_RESPONSE, &resp.base, 4), CMN_EFIELD);
    r.status = NSUT__STATUS__STATUS_OK;
    r.raw_size = 4;
    r.n_tokens = -1;
    ck_assert_int_eq(unpack_rc(CMN_MSG_RESPONSE, &resp.base, 4), CMN_EFIELD);
    r.n_tokens = 0;
    r.status = (Nsut__Status)9;
    ck_assert_int_eq(unpack_rc(CMN_MSG_RESPONSE, &resp.base, 4), CMN_EFIELD);

    /* Hello with an inverted version range; HelloAck without a name or with an oversized one. */
    hello.version_min = 2;
    hello.version_max = 1;
    ck_assert_int_eq(unpack_rc(CMN_MSG_HELLO, &hello.base, 0), CMN_EFIELD);
    ack.version = 1;
    ack.node_name = (char *)"";
    ck_assert_int_eq(unpack_rc(CMN_MSG_HELLO_ACK, &ack.base, 0), CMN_EFIELD);
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ack.node_name = longname;
    ck_assert_int_eq(unpack_rc(CMN_MSG_HELLO_ACK, &ack.base, 0), CMN_ETOOBIG);
}
END_TEST

START_TEST(limits_apply)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    Nsut__Sample s = NSUT__SAMPLE__INIT;
    Nsut__Sample *sp[3] = {&s, &s, &s};
    Nsut__Query q = NSUT__QUERY__INIT;
    cmn_errbuf_t eb;

    s.raw_size = s.wire_size = 100;
    q.n_samples = 3;
    q.samples = sp;
    lim.max_samples = 2;
    ck_assert_int_eq(cmn_msg_validate(CMN_MSG_QUERY, &q.base, 300, &lim, &eb), CMN_ETOOBIG);
    lim.max_samples = 3;
    lim.max_sample_size = 99;
    ck_assert_int_eq(cmn_msg_validate(CMN_MSG_QUERY, &q.base, 300, &lim, &eb), CMN_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "99"));
    lim.max_sample_size = 100;
    ck_assert_int_eq(cmn_msg_validate(CMN_MSG_QUERY, &q.base, 300, &lim, &eb), 0);
}
END_TEST

/* An allocator that counts: a count over its limit is refused before protobuf-c allocates. */
static size_t counted_allocs;

static void *counting_alloc(void *data, size_t size)
{
    (void)data;
    counted_allocs++;
    return malloc(size);
}

static void counting_free(void *data, void *p)
{
    (void)data;
    free(p);
}

START_TEST(counted_before_unpack)
{
    ProtobufCAllocator alloc = {counting_alloc, counting_free, NULL};
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    size_t n = 1u << 20, i;
    uint8_t *meta = malloc(2 * n);
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb = {{0}};
    cmn_frame_t f;

    /* 2 MiB of empty Result entries (field 1, length 0): a million results in two bytes each. */
    for (i = 0; i < n; i++) {
        meta[2 * i] = 0x0a;
        meta[2 * i + 1] = 0x00;
    }
    memset(&f, 0, sizeof(f));
    f.hdr.version = 1;
    f.hdr.type = CMN_MSG_RESPONSE;
    f.hdr.meta_len = (uint32_t)(2 * n);
    f.meta = meta;
    f.payload = meta + 2 * n;
    lim.max_samples = 1000;
    counted_allocs = 0;
    ck_assert_int_eq(cmn_msg_unpack(&f, &lim, &alloc, &m, &eb), CMN_ETOOBIG);
    ck_assert_str_eq(eb.msg, "Response has 1048576 results, over the limit of 1000");
    ck_assert_uint_eq(counted_allocs, 0);
    ck_assert_ptr_null(m);
    /* The same count of Query samples (field 2), and a truncated varint: refused unallocated. */
    for (i = 0; i < n; i++)
        meta[2 * i] = 0x12;
    f.hdr.type = CMN_MSG_QUERY;
    ck_assert_int_eq(cmn_msg_unpack(&f, &lim, &alloc, &m, &eb), CMN_ETOOBIG);
    ck_assert_str_eq(eb.msg, "Query has 1048576 samples, over the limit of 1000");
    meta[0] = 0x80;
    f.hdr.meta_len = 1;
    ck_assert_int_eq(cmn_msg_unpack(&f, &lim, &alloc, &m, &eb), CMN_EBADMSG);
    ck_assert_uint_eq(counted_allocs, 0);
    /* Under the limit, the count does not stand in the way. */
    f.hdr.type = CMN_MSG_RESPONSE;
    meta[0] = 0x0a;
    f.hdr.meta_len = 2 * 1000;
    for (i = 0; i < 1000; i++)
        meta[2 * i] = 0x0a;
    ck_assert_int_eq(cmn_msg_unpack(&f, &lim, &alloc, &m, &eb), 0);
    ck_assert_uint_eq(((Nsut__Response *)m)->n_results, 1000);
    cmn_msg_free(m, &alloc);
    free(meta);
}
END_TEST

START_TEST(arena_unpack)
{
    static uint8_t buf[4096];
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    Nsut__NameReply nrep = NSUT__NAME_REPLY__INIT;
    cmn_arena_t a;
    cmn_frame_t f;
    ProtobufCMessage *m;
    cmn_errbuf_t eb;
    int i;

    cmn_arena_init(&a, 1024);
    nrep.node_name = (char *)"node-with-a-name";
    f = frame_of(CMN_MSG_NAME_REPLY, &nrep.base, 0, buf, sizeof(buf));
    for (i = 0; i < 1000; i++) {
        ck_assert_int_eq(cmn_msg_unpack(&f, &lim, &a.pb, &m, &eb), 0);
        ck_assert_str_eq(((Nsut__NameReply *)m)->node_name, "node-with-a-name");
        cmn_msg_free(m, &a.pb);
        cmn_arena_reset(&a);
    }
    /* Oversized allocations get their own chunk and are released at reset. */
    ck_assert_ptr_nonnull(cmn_arena_alloc(&a, 10000));
    ck_assert_ptr_nonnull(cmn_arena_alloc(&a, 10));
    cmn_arena_reset(&a);
    ck_assert_uint_eq(cmn_arena_chunk_count(&a), 1);
    cmn_arena_free(&a);
}
END_TEST

START_TEST(sanitize)
{
    char out[16];
    ck_assert_str_eq(cmn_sanitize("ab\"c\n\x01", 6, out, sizeof(out)), "ab?c??");
    ck_assert_str_eq(cmn_sanitize("0123456789abcdefgh", 18, out, sizeof(out)), "0123456789abcde");
}
END_TEST

TCase *tcase_msg_roundtrip(void)
{
    TCase *tc = tcase_create("msg_roundtrip");
    tcase_add_test(tc, every_type_roundtrips);
    tcase_add_test(tc, arena_unpack);
    return tc;
}

TCase *tcase_msg_validate(void)
{
    TCase *tc = tcase_create("msg_validate");
    tcase_add_test(tc, bad_protobuf_rejected);
    tcase_add_test(tc, inconsistent_fields_rejected);
    tcase_add_test(tc, limits_apply);
    tcase_add_test(tc, counted_before_unpack);
    tcase_add_test(tc, sanitize);
    return tc;
}
