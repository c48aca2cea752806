/* Frame codec: header, decoder (whole, split at every byte, direct reads), guards, encoder. */
#include "test_common.h"

#include "cmn/err.h"
#include "cmn/frame.h"
#include "cmn/msg.h"

#include <stdlib.h>
#include <string.h>

/* Builds a Query frame with |n| samples of the given sizes into a malloc'ed buffer. */
static uint8_t *make_query_frame(size_t n, const size_t *sizes, uint8_t fill, size_t *len)
{
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Sample *s = calloc(n, sizeof(*s));
    Nsut__Sample **sp = calloc(n, sizeof(*sp));
    struct iovec *pl = calloc(n, sizeof(*pl));
    struct iovec *iov = calloc(n + 1, sizeof(*iov));
    uint8_t *out, *p;
    size_t i, total = 0;
    long niov;

    for (i = 0; i < n; i++) {
        nsut__sample__init(&s[i]);
        s[i].id = 100 + i;
        s[i].raw_size = s[i].wire_size = sizes[i];
        sp[i] = &s[i];
        pl[i].iov_base = malloc(sizes[i] ? sizes[i] : 1);
        memset(pl[i].iov_base, fill + (int)i, sizes[i]);
        pl[i].iov_len = sizes[i];
    }
    q.query_id = 7;
    q.n_samples = n;
    q.samples = sp;
    q.parts = 1;
    niov = cmn_frame_encode(CMN_MSG_QUERY, &q.base, pl, n, iov);
    ck_assert_int_eq(niov, (long)n + 1);
    for (i = 0; i < (size_t)niov; i++)
        total += iov[i].iov_len;
    out = malloc(total);
    p = out;
    for (i = 0; i < (size_t)niov; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    free(iov[0].iov_base);
    for (i = 0; i < n; i++)
        free(pl[i].iov_base);
    free(pl);
    free(iov);
    free(sp);
    free(s);
    *len = total;
    return out;
}

static void check_query_frame(const cmn_frame_t *f, size_t n, const size_t *sizes, uint8_t fill)
{
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;
    Nsut__Query *q;
    const uint8_t *p;
    size_t i, j;

    ck_assert_uint_eq(f->hdr.type, CMN_MSG_QUERY);
    ck_assert_int_eq(cmn_msg_unpack(f, &lim, NULL, &m, &eb), 0);
    q = (Nsut__Query *)m;
    ck_assert_uint_eq(q->query_id, 7);
    ck_assert_uint_eq(q->n_samples, n);
    p = f->payload;
    for (i = 0; i < n; i++) {
        ck_assert_uint_eq(q->samples[i]->id, 100 + i);
        ck_assert_uint_eq(q->samples[i]->wire_size, sizes[i]);
        /* Find the first wrong byte with a plain loop, then assert once (fast under ASan). */
        for (j = 0; j < sizes[i] && p[j] == (uint8_t)(fill + i); j++) {
        }
        ck_assert_msg(j == sizes[i], "sample %zu byte %zu is 0x%02x", i, j,
                      j < sizes[i] ? p[j] : 0);
        p += sizes[i];
    }
    cmn_msg_free(m, NULL);
}

START_TEST(header_roundtrip)
{
    cmn_frame_header_t h = {1, CMN_MSG_RESPONSE, 0, 0x01020304u, 0x0A0B0C0Du}, g;
    cmn_frame_limits_t lim = {UINT32_MAX, UINT64_MAX};
    uint8_t b[CMN_FRAME_HEADER_SIZE];
    static const uint8_t want[CMN_FRAME_HEADER_SIZE] = {'N', 'S', 'U', 'T', 1,  6,  0,  0,
                                                        1,   2,   3,   4,   10, 11, 12, 13};

    cmn_frame_header_write(b, &h);
    /* The byte layout documented in proto/README.md. */
    ck_assert_mem_eq(b, want, sizeof(want));
    ck_assert_int_eq(cmn_frame_header_parse(b, &lim, &g), 0);
    ck_assert_uint_eq(g.type, CMN_MSG_RESPONSE);
    ck_assert_uint_eq(g.meta_len, 0x01020304u);
    ck_assert_uint_eq(g.payload_len, 0x0A0B0C0Du);
}
END_TEST

START_TEST(decode_whole_frame_is_a_view)
{
    size_t sizes[3] = {64, 0, 1000}, len, used;
    uint8_t *buf = make_query_frame(3, sizes, 0x40, &len);
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_frame_decoder_t d;
    cmn_frame_t f;

    cmn_frame_decoder_init(&d, &lim);
    ck_assert_int_eq(cmn_frame_decode(&d, buf, len, &used, &f), CMN_FRAME_READY);
    ck_assert_uint_eq(used, len);
    /* A frame entirely inside the input comes back as a view into it: no copy. */
    ck_assert_ptr_eq(f.meta, buf + CMN_FRAME_HEADER_SIZE);
    check_query_frame(&f, 3, sizes, 0x40);
    ck_assert_int_eq(cmn_frame_decoder_partial(&d), 0);
    cmn_frame_decoder_free(&d);
    free(buf);
}
END_TEST

START_TEST(decode_split_at_every_boundary)
{
    size_t sizes[2] = {33, 300}, len, cut, used;
    uint8_t *one = make_query_frame(2, sizes, 0x10, &len);
    uint8_t *stream = malloc(len * 3);
    cmn_frame_limits_t lim = cmn_frame_limits_default();

    /* Three frames back to back, split into two chunks at every possible byte. */
    memcpy(stream, one, len);
    memcpy(stream + len, one, len);
    memcpy(stream + 2 * len, one, len);
    for (cut = 0; cut <= 3 * len; cut++) {
        cmn_frame_decoder_t d;
        cmn_frame_t f;
        size_t off = 0, frames = 0;
        const uint8_t *chunk[2] = {stream, stream + cut};
        size_t clen[2] = {cut, 3 * len - cut};
        int k, rc;

        cmn_frame_decoder_init(&d, &lim);
        for (k = 0; k < 2; k++) {
            off = 0;
            while (off < clen[k]) {
                rc = cmn_frame_decode(&d, chunk[k] + off, clen[k] - off, &used, &f);
                ck_assert_int_ge(rc, 0);
                off += used;
                if (rc == CMN_FRAME_READY) {
                    check_query_frame(&f, 2, sizes, 0x10);
                    frames++;
                }
            }
        }
        ck_assert_uint_eq(frames, 3);
        ck_assert_int_eq(cmn_frame_decoder_partial(&d), 0);
        cmn_frame_decoder_free(&d);
    }
    free(stream);
    free(one);
}
END_TEST

START_TEST(decode_byte_by_byte)
{
    size_t sizes[1] = {77}, len, i, used, frames = 0;
    uint8_t *buf = make_query_frame(1, sizes, 0x33, &len);
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_frame_decoder_t d;
    cmn_frame_t f;
    int rc;

    cmn_frame_decoder_init(&d, &lim);
    for (i = 0; i < len; i++) {
        rc = cmn_frame_decode(&d, buf + i, 1, &used, &f);
        ck_assert_uint_eq(used, 1);
        if (i + 1 < len) {
            ck_assert_int_eq(rc, CMN_FRAME_NEED_MORE);
        } else {
            ck_assert_int_eq(rc, CMN_FRAME_READY);
            check_query_frame(&f, 1, sizes, 0x33);
            frames++;
        }
    }
    ck_assert_uint_eq(frames, 1);
    cmn_frame_decoder_free(&d);
    free(buf);
}
END_TEST

START_TEST(decode_direct_read_no_copy)
{
    size_t sizes[1] = {1 << 20}, len, used, got;
    uint8_t *buf = make_query_frame(1, sizes, 0x5a, &len);
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_frame_decoder_t d;
    cmn_frame_t f;
    uint8_t *region;
    size_t rlen;
    const size_t first = 100;

    cmn_frame_decoder_init(&d, &lim);
    ck_assert_int_eq(cmn_frame_decoder_direct(&d, &region, &rlen), 0);
    ck_assert_int_eq(cmn_frame_decode(&d, buf, first, &used, &f), CMN_FRAME_NEED_MORE);
    ck_assert_uint_eq(used, first);
    /* The rest of the body is read straight into the decoder's buffer, as a socket read would. */
    ck_assert_int_eq(cmn_frame_decoder_direct(&d, &region, &rlen), 1);
    ck_assert_uint_eq(rlen, len - first);
    got = rlen / 2;
    memcpy(region, buf + first, got);
    ck_assert_int_eq(cmn_frame_decode(&d, region, got, &used, &f), CMN_FRAME_NEED_MORE);
    ck_assert_int_eq(cmn_frame_decoder_direct(&d, &region, &rlen), 1);
    ck_assert_uint_eq(rlen, len - first - got);
    memcpy(region, buf + first + got, rlen);
    ck_assert_int_eq(cmn_frame_decode(&d, region, rlen, &used, &f), CMN_FRAME_READY);
    check_query_frame(&f, 1, sizes, 0x5a);
    cmn_frame_decoder_free(&d);
    free(buf);
}
END_TEST

/* A payload sink handing out one buffer, and counting how it was asked. */
static uint8_t sink_buf[1 << 20];
static int sink_calls, sink_decline;

static uint8_t *test_sink(void *arg, const cmn_frame_header_t *h, const uint8_t *meta)
{
    (void)arg;
    (void)meta;
    sink_calls++;
    ck_assert_uint_le(h->payload_len, sizeof(sink_buf));
    return sink_decline ? NULL : sink_buf;
}

START_TEST(sink_places_the_payload)
{
    size_t sizes[3] = {40000, 1, 90000}, len, cut, used;
    uint8_t *one = make_query_frame(3, sizes, 0x61, &len);
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    uint8_t *region;
    size_t rlen;

    /* Split at a few places, including inside the header and the metadata. */
    for (cut = 1; cut < len; cut += 7919) {
        cmn_frame_decoder_t d;
        cmn_frame_t f;
        size_t off = 0;
        int rc = CMN_FRAME_NEED_MORE;

        for (sink_decline = 0; sink_decline < 2; sink_decline++) {
            sink_calls = 0;
            cmn_frame_decoder_init(&d, &lim);
            cmn_frame_decoder_set_sink(&d, test_sink, NULL, 1024);
            ck_assert_int_eq(cmn_frame_decode(&d, one, cut, &used, &f), CMN_FRAME_NEED_MORE);
            off = used;
            /* The rest by "direct reads" wherever the decoder asks, as a socket would fill them. */
            while (off < len) {
                if (cmn_frame_decoder_direct(&d, &region, &rlen)) {
                    size_t n = len - off < rlen ? len - off : rlen;
                    memcpy(region, one + off, n);
                    rc = cmn_frame_decode(&d, region, n, &used, &f);
                } else {
                    rc = cmn_frame_decode(&d, one + off, 1, &used, &f);
                }
                ck_assert_int_ge(rc, 0);
                off += used;
            }
            ck_assert_int_eq(rc, CMN_FRAME_READY);
            ck_assert_int_eq(sink_calls, 1);
            if (!sink_decline)
                ck_assert_ptr_eq(f.payload, sink_buf); /* the payload landed in the sink */
            else
                ck_assert_ptr_ne(f.payload, sink_buf);
            check_query_frame(&f, 3, sizes, 0x61);
            cmn_frame_decoder_free(&d);
        }
    }
    free(one);
}
END_TEST

static int decode_all(const uint8_t *b, size_t len, const cmn_frame_limits_t *lim)
{
    cmn_frame_decoder_t d;
    cmn_frame_t f;
    size_t used, off = 0;
    int rc = CMN_FRAME_NEED_MORE;

    cmn_frame_decoder_init(&d, lim);
    while (off < len) {
        rc = cmn_frame_decode(&d, b + off, len - off, &used, &f);
        if (rc < 0)
            break;
        off += used;
    }
    cmn_frame_decoder_free(&d);
    return rc;
}

START_TEST(guards)
{
    cmn_frame_limits_t lim = cmn_frame_limits_default(), pre = cmn_frame_limits_preauth();
    cmn_frame_header_t h = {1, CMN_MSG_QUERY, 0, 10, 20};
    uint8_t b[CMN_FRAME_HEADER_SIZE + 64];

    memset(b, 0, sizeof(b));
    cmn_frame_header_write(b, &h);
    /* Truncated: a valid header with a missing body is "need more", never a frame. */
    ck_assert_int_eq(decode_all(b, CMN_FRAME_HEADER_SIZE + 5, &lim), CMN_FRAME_NEED_MORE);

    /* Garbage magic, caught as soon as the first byte differs. */
    ck_assert_int_eq(decode_all((const uint8_t *)"HTTP/1.1 200", 1, &lim), CMN_EMAGIC);
    ck_assert_int_eq(decode_all((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &lim), CMN_EMAGIC);

    b[4] = 2; /* version */
    ck_assert_int_eq(decode_all(b, sizeof(b), &lim), CMN_EVERSION);
    b[4] = 1;
    b[5] = 0; /* type 0 */
    ck_assert_int_eq(decode_all(b, sizeof(b), &lim), CMN_ETYPE);
    b[5] = CMN_MSG__MAX + 1;
    ck_assert_int_eq(decode_all(b, sizeof(b), &lim), CMN_ETYPE);
    b[5] = CMN_MSG_QUERY;
    b[7] = 1; /* flags */
    ck_assert_int_eq(decode_all(b, sizeof(b), &lim), CMN_EFLAGS);
    b[7] = 0;

    /* A payload on a type that carries none. */
    h.type = CMN_MSG_PING;
    cmn_frame_header_write(b, &h);
    ck_assert_int_eq(decode_all(b, sizeof(b), &lim), CMN_EPAYLOAD);

    /* Oversized lengths are refused from the header alone, before any allocation. */
    h.type = CMN_MSG_QUERY;
    h.meta_len = 10;
    h.payload_len = UINT32_MAX;
    cmn_frame_header_write(b, &h);
    ck_assert_int_eq(decode_all(b, CMN_FRAME_HEADER_SIZE, &lim), CMN_ETOOBIG);
    h.meta_len = CMN_FRAME_META_MAX + 1;
    h.payload_len = 0;
    cmn_frame_header_write(b, &h);
    ck_assert_int_eq(decode_all(b, CMN_FRAME_HEADER_SIZE, &lim), CMN_ETOOBIG);
    /* Before the handshake the limit is small. */
    h.meta_len = 100;
    h.payload_len = CMN_FRAME_PREAUTH_MAX;
    cmn_frame_header_write(b, &h);
    ck_assert_int_eq(decode_all(b, CMN_FRAME_HEADER_SIZE, &pre), CMN_ETOOBIG);
    ck_assert_int_eq(decode_all(b, CMN_FRAME_HEADER_SIZE, &lim), CMN_FRAME_NEED_MORE);
}
END_TEST

START_TEST(errors_are_sticky)
{
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    cmn_frame_decoder_t d;
    cmn_frame_t f;
    size_t used, len, sizes[1] = {8};
    uint8_t *good = make_query_frame(1, sizes, 1, &len);

    cmn_frame_decoder_init(&d, &lim);
    ck_assert_int_eq(cmn_frame_decode(&d, (const uint8_t *)"XXXX", 4, &used, &f), CMN_EMAGIC);
    /* A stream that lost framing cannot be trusted again, even with a good frame next. */
    ck_assert_int_eq(cmn_frame_decode(&d, good, len, &used, &f), CMN_EMAGIC);
    cmn_frame_decoder_free(&d);
    free(good);
}
END_TEST

START_TEST(encode_references_payload)
{
    static uint8_t a[1000], b2[5];
    struct iovec pl[2] = {{a, sizeof(a)}, {b2, sizeof(b2)}}, iov[3];
    Nsut__Response r = NSUT__RESPONSE__INIT;
    Nsut__Result x[2] = {NSUT__RESULT__INIT, NSUT__RESULT__INIT};
    Nsut__Result *xp[2] = {&x[0], &x[1]};
    cmn_frame_header_t h;
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    long n;

    x[0].id = 1;
    x[0].raw_size = x[0].wire_size = sizeof(a);
    x[1].id = 2;
    x[1].raw_size = x[1].wire_size = sizeof(b2);
    r.n_results = 2;
    r.results = xp;
    n = cmn_frame_encode(CMN_MSG_RESPONSE, &r.base, pl, 2, iov);
    ck_assert_int_eq(n, 3);
    /* The write list points at the caller's memory: the payload is never copied. */
    ck_assert_ptr_eq(iov[1].iov_base, a);
    ck_assert_uint_eq(iov[1].iov_len, sizeof(a));
    ck_assert_ptr_eq(iov[2].iov_base, b2);
    ck_assert_int_eq(cmn_frame_header_parse(iov[0].iov_base, &lim, &h), 0);
    ck_assert_uint_eq(h.payload_len, sizeof(a) + sizeof(b2));
    ck_assert_uint_eq(h.meta_len + CMN_FRAME_HEADER_SIZE, iov[0].iov_len);
    free(iov[0].iov_base);
}
END_TEST

START_TEST(encode_rejects)
{
    uint8_t buf[64];
    Nsut__Ping p = NSUT__PING__INIT;

    ck_assert_int_eq(cmn_frame_encode_head(0, NULL, 0, buf, sizeof(buf)), CMN_ETYPE);
    ck_assert_int_eq(cmn_frame_encode_head(CMN_MSG_PING, &p.base, 5, buf, sizeof(buf)),
                     CMN_EPAYLOAD);
    ck_assert_int_eq(cmn_frame_encode_head(CMN_MSG_PING, &p.base, 0, buf, 4), CMN_ETOOBIG);
    ck_assert_int_eq(
        cmn_frame_encode_head(CMN_MSG_QUERY, NULL, (uint64_t)UINT32_MAX + 1, buf, sizeof(buf)),
        CMN_ETOOBIG);
    ck_assert_int_eq(cmn_frame_encode_head(CMN_MSG_FLUSH, NULL, 0, buf, sizeof(buf)),
                     CMN_FRAME_HEADER_SIZE);
}
END_TEST

TCase *tcase_frame_header(void)
{
    TCase *tc = tcase_create("frame_header");
    tcase_add_test(tc, header_roundtrip);
    return tc;
}

TCase *tcase_frame_decode(void)
{
    TCase *tc = tcase_create("frame_decode");
    tcase_add_test(tc, decode_whole_frame_is_a_view);
    tcase_add_test(tc, decode_byte_by_byte);
    tcase_add_test(tc, decode_direct_read_no_copy);
    tcase_add_test(tc, sink_places_the_payload);
    return tc;
}

TCase *tcase_frame_split(void)
{
    TCase *tc = tcase_create("frame_split");
    tcase_add_test(tc, decode_split_at_every_boundary);
    tcase_set_timeout(tc, 60);
    return tc;
}

TCase *tcase_frame_guards(void)
{
    TCase *tc = tcase_create("frame_guards");
    tcase_add_test(tc, guards);
    tcase_add_test(tc, errors_are_sticky);
    return tc;
}

TCase *tcase_frame_encode(void)
{
    TCase *tc = tcase_create("frame_encode");
    tcase_add_test(tc, encode_references_payload);
    tcase_add_test(tc, encode_rejects);
    return tc;
}
