/* The volume sample header (cmn/vol.h): round trip, the exact byte layout, and hostile headers
 * (wrong magic, version, dtype, reserved field, zero or overflowing shapes, sizes that do not
 * match the voxels). */
#include "test_common.h"

#include "cmn/vol.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(vol_roundtrip_and_layout)
{
    cmn_vol_t v = {CMN_VOL_F32, 1, {2, 3, 4}}, w;
    cmn_errbuf_t eb = {{0}};
    size_t n = CMN_VOL_HEADER_SIZE + 2 * 3 * 4 * 4;
    uint8_t *buf = calloc(1, n);
    static const uint8_t expect[CMN_VOL_HEADER_SIZE] = {'N', 'V', 'O', 'L', 1, 0, 0, 0, 1, 0, 0,
                                                        0,   1,   0,   0,   0, 2, 0, 0, 0, 3, 0,
                                                        0,   0,   4,   0,   0, 0, 0, 0, 0, 0};

    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(cmn_vol_encode(&v, buf), 0);
    ck_assert_mem_eq(buf, expect, CMN_VOL_HEADER_SIZE);
    ck_assert_int_eq(cmn_vol_decode(buf, n, &w, &eb), 0);
    ck_assert_uint_eq(w.dtype, CMN_VOL_F32);
    ck_assert_uint_eq(w.channels, 1);
    ck_assert_uint_eq(w.dims[0], 2);
    ck_assert_uint_eq(w.dims[1], 3);
    ck_assert_uint_eq(w.dims[2], 4);
    ck_assert_uint_eq(cmn_vol_elements(&w), 24);
    /* One byte short or long of the voxels the header promises. */
    ck_assert_int_eq(cmn_vol_decode(buf, n - 1, &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "needs 24 elements of 4 bytes, the sample holds 95"));
    ck_assert_int_eq(cmn_vol_decode(buf, n + 0, &w, &eb), 0);
    v.dtype = CMN_VOL_U8;
    ck_assert_int_eq(cmn_vol_encode(&v, buf), 0);
    ck_assert_int_eq(cmn_vol_decode(buf, CMN_VOL_HEADER_SIZE + 24, &w, &eb), 0);
    free(buf);
}
END_TEST

START_TEST(vol_hostile_headers)
{
    cmn_vol_t v = {CMN_VOL_F32, 1, {8, 8, 8}}, w;
    cmn_errbuf_t eb = {{0}};
    uint8_t h[CMN_VOL_HEADER_SIZE], bad[CMN_VOL_HEADER_SIZE];

    ck_assert_int_eq(cmn_vol_encode(&v, h), 0);
    ck_assert_int_eq(cmn_vol_decode(h, 10, &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "shorter than its 32-byte header"));
    memcpy(bad, h, sizeof(h));
    bad[0] = 'X';
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "no NVOL magic"));
    memcpy(bad, h, sizeof(h));
    bad[4] = 2;
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "version 2"));
    memcpy(bad, h, sizeof(h));
    bad[8] = 9;
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "unknown dtype 9"));
    memcpy(bad, h, sizeof(h));
    bad[31] = 1;
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "reserved"));
    memcpy(bad, h, sizeof(h));
    memset(bad + 16, 0, 4); /* depth 0 */
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "empty or overflows"));
    /* 2^32-1 on every axis overflows 64 bits; 65535 x 65535 x 8 does not, but can never match a
     * sample this small (no allocation follows a decode, and the check must not wrap). */
    memcpy(bad, h, sizeof(h));
    memset(bad + 12, 0xff, 16);
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    memcpy(bad, h, sizeof(h));
    memset(bad + 16, 0xff, 2);
    memset(bad + 20, 0xff, 2);
    ck_assert_int_eq(cmn_vol_decode(bad, sizeof(bad), &w, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "the sample holds 0 bytes"));
    v.dims[1] = 0;
    ck_assert_int_eq(cmn_vol_encode(&v, h), CMN_EFIELD);
}
END_TEST

TCase *tcase_vol(void)
{
    TCase *tc = tcase_create("vol");
    tcase_add_test(tc, vol_roundtrip_and_layout);
    tcase_add_test(tc, vol_hostile_headers);
    return tc;
}
