/* LZ4 and none codecs, the size checks that stop lies and bombs, and the rules table. */
#include "../check_main.h"

#include "cmpr/cmpr.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;

static uint64_t xorshift(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Kinds of test data: random bytes, zeros, an image-like 28x28 field with smooth gradients and a
 * dark background (as Fashion-MNIST), and padded token ids (as BERT). */
enum { DATA_RANDOM, DATA_ZERO, DATA_IMAGE, DATA_TOKENS };

static void fill(uint8_t *p, size_t n, int kind)
{
    size_t i;

    for (i = 0; i < n; i++) {
        switch (kind) {
        case DATA_RANDOM:
            p[i] = (uint8_t)xorshift();
            break;
        case DATA_ZERO:
            p[i] = 0;
            break;
        case DATA_IMAGE: {
            size_t x = i % 28, y = (i / 28) % 28;
            int inside = x > 6 && x < 22 && y > 3 && y < 25;
            p[i] = inside ? (uint8_t)(120 + (x * 3 + y * 2) % 90 + (xorshift() & 3)) : 0;
            break;
        }
        default: /* int32 token ids, the first 100 of every 384 used, the rest padding */
            p[i] = (i / 4) % 384 < 100 && i % 4 == 0 ? (uint8_t)(xorshift() % 200 + 1) : 0;
            break;
        }
    }
}

static void roundtrip(int kind, size_t n, int expect_shrink)
{
    uint8_t *src = malloc(n), *dst = malloc(cmpr_bound(CMPR_LZ4, n)), *back = malloc(n + 1);
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    long c;

    fill(src, n, kind);
    c = cmpr_compress(ctx, CMPR_LZ4, src, n, dst, cmpr_bound(CMPR_LZ4, n));
    ck_assert_int_ge(c, 0);
    if (expect_shrink) {
        ck_assert_int_gt(c, 0);
        ck_assert_uint_lt((size_t)c, n);
    }
    if (c > 0) {
        ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, n, (uint64_t)c, n, NULL), 0);
        ck_assert_int_eq(cmpr_decompress(CMPR_LZ4, dst, (size_t)c, back, n), 0);
        ck_assert_mem_eq(back, src, n);
    }
    cmpr_ctx_free(ctx);
    free(src);
    free(dst);
    free(back);
}

START_TEST(lz4_roundtrip)
{
    static const size_t sizes[] = {32, 100, 784, 4096, 150528, 602112, 3u << 20};
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        roundtrip(DATA_ZERO, sizes[i], 1);
        roundtrip(DATA_IMAGE, sizes[i], sizes[i] >= 784);
        roundtrip(DATA_TOKENS, sizes[i], sizes[i] >= 784);
        roundtrip(DATA_RANDOM, sizes[i], 0);
    }
}
END_TEST

START_TEST(lz4_raw_fallback)
{
    uint8_t src[4096], dst[8192];
    cmpr_ctx_t *ctx = cmpr_ctx_new();

    /* Random data does not shrink: the answer is "send raw" (0), never a larger block. */
    fill(src, sizeof(src), DATA_RANDOM);
    ck_assert_int_eq(cmpr_compress(ctx, CMPR_LZ4, src, sizeof(src), dst, sizeof(dst)), 0);
    /* Tiny samples travel raw. */
    memset(src, 0, sizeof(src));
    ck_assert_int_eq(cmpr_compress(ctx, CMPR_LZ4, src, CMPR_MIN_SIZE - 1, dst, sizeof(dst)), 0);
    ck_assert_int_eq(cmpr_compress(ctx, CMPR_NONE, src, sizeof(src), dst, sizeof(dst)), 0);
    ck_assert_int_eq(cmpr_compress(ctx, 9, src, sizeof(src), dst, sizeof(dst)), CMN_ECODEC);
    cmpr_ctx_free(ctx);
}
END_TEST

START_TEST(lz4_lies_rejected)
{
    uint8_t src[10000], comp[12000], out[20000];
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    long c;
    size_t i;

    fill(src, sizeof(src), DATA_IMAGE);
    c = cmpr_compress(ctx, CMPR_LZ4, src, sizeof(src), comp, sizeof(comp));
    ck_assert_int_gt(c, 0);
    /* A declared raw size smaller or larger than the truth. */
    ck_assert_int_eq(cmpr_decompress(CMPR_LZ4, comp, (size_t)c, out, sizeof(src) - 1),
                     CMN_EDECOMPRESS);
    ck_assert_int_eq(cmpr_decompress(CMPR_LZ4, comp, (size_t)c, out, sizeof(src) + 1),
                     CMN_EDECOMPRESS);
    /* Truncated input. */
    ck_assert_int_eq(cmpr_decompress(CMPR_LZ4, comp, (size_t)c - 1, out, sizeof(src)),
                     CMN_EDECOMPRESS);
    /* Garbage never writes past the declared size (ASan would see it) and is rejected. */
    for (i = 0; i < 200; i++) {
        uint8_t junk[64];
        size_t k;
        for (k = 0; k < sizeof(junk); k++)
            junk[k] = (uint8_t)xorshift();
        ck_assert_int_eq(cmpr_decompress(CMPR_LZ4, junk, sizeof(junk), out, 1000), CMN_EDECOMPRESS);
    }
    /* Codec none needs equal sizes. */
    ck_assert_int_eq(cmpr_decompress(CMPR_NONE, src, 10, out, 11), CMN_EDECOMPRESS);
    ck_assert_int_eq(cmpr_decompress(CMPR_NONE, src, 10, out, 10), 0);
    ck_assert_int_eq(cmpr_decompress(5, src, 10, out, 10), CMN_ECODEC);
    cmpr_ctx_free(ctx);
}
END_TEST

START_TEST(size_checks)
{
    cmn_errbuf_t eb;

    ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, 150528, 90000, 1u << 30, &eb), 0);
    /* A bomb: 1 GiB claimed from 100 bytes. */
    ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, 1u << 30, 100, 2u << 30, &eb), CMN_EDECOMPRESS);
    ck_assert_ptr_nonnull(strstr(eb.msg, "bomb"));
    ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, 1000, 0, 1u << 30, &eb), CMN_EDECOMPRESS);
    ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, 1000, 2000, 1u << 30, &eb), CMN_EDECOMPRESS);
    ck_assert_int_eq(cmpr_check_sizes(CMPR_LZ4, 5000, 100, 4096, &eb), CMN_ETOOBIG);
    ck_assert_int_eq(cmpr_check_sizes(CMPR_NONE, 5, 6, 4096, &eb), CMN_EDECOMPRESS);
    ck_assert_int_eq(cmpr_check_sizes(7, 5, 5, 4096, &eb), CMN_ECODEC);
}
END_TEST

START_TEST(codec_names)
{
    int c;

    ck_assert_int_eq(cmpr_codec_parse("lz4", &c), 0);
    ck_assert_int_eq(c, CMPR_LZ4);
    ck_assert_str_eq(cmpr_codec_name(c), "lz4");
    ck_assert_int_eq(cmpr_codec_parse("none", &c), 0);
    ck_assert_int_eq(c, CMPR_NONE);
    ck_assert_int_eq(cmpr_codec_parse("zstd", &c), CMN_ECODEC);
    ck_assert_uint_eq(cmpr_bound(CMPR_LZ4, 1000), 1000 + 1000 / 255 + 16);
}
END_TEST

START_TEST(policy_table)
{
    /* Exactly the rules' approvals for the Network division's Datacenter suite (6.2, 6.2.4). */
    static const char *const lossless[] = {"3d-unet", "3d-unet-99", "3d-unet-99.9", "dlrm-v3"};
    static const char *const forbidden[] = {
        "gptj",          "llama2-70b",   "llama2-70b-interactive",
        "llama3_1-405b", "mixtral-8x7b", "stable-diffusion-xl",
        "rgat",          "deepseek-r1",  "llama3_1-8b"};
    /* Lossless rows of 6.2.4 whose benchmarks the Datacenter suite no longer has, and the
     * project's Fashion-MNIST demo: no result, no compression. */
    static const char *const retired[] = {"resnet50",  "retinanet", "bert-99",
                                          "bert-99.9", "dlrm-v2",   "fashion-mnist"};
    cmn_errbuf_t eb;
    size_t i, n, approved = 0;
    const cmpr_policy_t *t = cmpr_policy_table(&n);

    ck_assert_uint_gt(n, 20);
    for (i = 0; i < n; i++)
        approved += (size_t)t[i].lossless;
    ck_assert_uint_eq(approved, sizeof(lossless) / sizeof(lossless[0]));
    for (i = 0; i < sizeof(lossless) / sizeof(lossless[0]); i++)
        ck_assert_msg(cmpr_policy_check(lossless[i], CMPR_LZ4, &eb) == 0, "%s should allow lz4",
                      lossless[i]);
    for (i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++) {
        ck_assert_int_eq(cmpr_policy_check(forbidden[i], CMPR_LZ4, &eb), CMN_EPOLICY);
        /* The refusal names the model and the rule. */
        ck_assert_ptr_nonnull(strstr(eb.msg, forbidden[i]));
        ck_assert_ptr_nonnull(strstr(eb.msg, "6.2.4"));
        ck_assert_int_eq(cmpr_policy_check(forbidden[i], CMPR_NONE, &eb), 0);
    }
    for (i = 0; i < sizeof(retired) / sizeof(retired[0]); i++) {
        ck_assert_int_eq(cmpr_policy_check(retired[i], CMPR_LZ4, &eb), CMN_EPOLICY);
        ck_assert_ptr_nonnull(strstr(eb.msg, retired[i]));
        ck_assert_ptr_nonnull(strstr(eb.msg, "only for 3d-unet-99, 3d-unet-99.9 and dlrm-v3"));
        ck_assert_int_eq(cmpr_policy_check(retired[i], CMPR_NONE, &eb), 0);
    }
    /* No row in the table: no compression option. */
    ck_assert_int_eq(cmpr_policy_check("whisper", CMPR_LZ4, &eb), CMN_EPOLICY);
    ck_assert_int_eq(cmpr_policy_check("gpt-oss-120b", CMPR_LZ4, &eb), CMN_EPOLICY);
    ck_assert_int_eq(cmpr_policy_check(NULL, CMPR_LZ4, &eb), CMN_EPOLICY);
    ck_assert_int_eq(cmpr_policy_find("dlrm-v3")->per_query_server, 1);
    ck_assert_int_eq(cmpr_policy_find("3d-unet-99")->per_query_server, 0);
    ck_assert_ptr_eq(cmpr_policy_find("3d-unet"), &t[0]);
    ck_assert_ptr_null(cmpr_policy_find("resnet50"));
}
END_TEST

CHECK_TCASE(tc_lz4, "lz4", 60, lz4_roundtrip, lz4_raw_fallback)

static TCase *tc_lies(void)
{
    TCase *tc = tcase_create("lz4_lies");
    tcase_add_test(tc, lz4_lies_rejected);
    tcase_add_test(tc, size_checks);
    return tc;
}

static TCase *tc_policy(void)
{
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, policy_table);
    tcase_add_test(tc, codec_names);
    return tc;
}

CHECK_MAIN("compression", tc_lz4, tc_lies, tc_policy)
