/* The .npy header parser (versions 1 to 3, hostile headers) and the QSL sources, loading,
 * per-sample compression under the rules table, and digests. */
#include "test_loadgen.h"

#include "cmn/digest.h"
#include "cmn/vol.h"
#include "cmpr/cmpr.h"
#include "lg/qsl.h"
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A .npy image: magic, version, header length, the dict padded with spaces to a multiple of 64
 * bytes and a newline, then |data|. */
static uint8_t *make_npy(unsigned major, const char *dict, const void *data, size_t n,
                         size_t *out_len)
{
    size_t pre = major == 1 ? 10 : 12, dlen = strlen(dict), hlen = dlen + 1, total;
    uint8_t *b;

    while ((pre + hlen) % 64)
        hlen++;
    total = pre + hlen + n;
    b = malloc(total);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    if (major == 1) {
        b[8] = (uint8_t)hlen;
        b[9] = (uint8_t)(hlen >> 8);
    } else {
        b[8] = (uint8_t)hlen;
        b[9] = (uint8_t)(hlen >> 8);
        b[10] = (uint8_t)(hlen >> 16);
        b[11] = (uint8_t)(hlen >> 24);
    }
    memcpy(b + pre, dict, dlen);
    memset(b + pre + dlen, ' ', hlen - dlen - 1);
    b[pre + hlen - 1] = '\n';
    if (n)
        memcpy(b + pre + hlen, data, n);
    *out_len = total;
    return b;
}

static int parse(unsigned major, const char *dict, lg__npy_t *h, cmn_errbuf_t *eb)
{
    size_t len;
    uint8_t *b = make_npy(major, dict, NULL, 0, &len);
    int rc = lg__npy_parse(b, len, h, eb);

    free(b);
    return rc;
}

START_TEST(npy_headers)
{
    lg__npy_t h;
    cmn_errbuf_t eb;

    ck_assert_int_eq(
        parse(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3, 224, 224), }", &h, &eb),
        0);
    ck_assert_uint_eq(h.itemsize, 4);
    ck_assert_uint_eq(h.ndim, 4);
    ck_assert_uint_eq(h.shape[0], 10);
    ck_assert_uint_eq(lg__npy_count(&h, 1), 3 * 224 * 224);
    ck_assert_uint_eq(h.data_offset % 64, 0);
    ck_assert_str_eq(h.descr, "<f4");

    ck_assert_int_eq(
        parse(2, "{\"descr\": \"|u1\", \"shape\": (7,), \"fortran_order\": True}", &h, &eb), 0);
    ck_assert_uint_eq(h.itemsize, 1);
    ck_assert_uint_eq(h.ndim, 1);
    ck_assert(h.fortran_order);
    ck_assert_uint_eq(h.major, 2);
    ck_assert_int_eq(
        parse(3, "{'descr': '<U10', 'fortran_order': False, 'shape': (2, 3)}", &h, &eb), 0);
    ck_assert_uint_eq(h.itemsize, 40);
    ck_assert_int_eq(parse(1, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': ()}", &h, &eb),
                     0);
    ck_assert_uint_eq(h.itemsize, 8);
    ck_assert_uint_eq(h.ndim, 0);
    ck_assert_int_eq(
        parse(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3L, 4L)}", &h, &eb), 0);
    ck_assert_uint_eq(h.shape[1], 4);
    /* Structured: fields packed back to back, sub-array shapes multiplied. */
    ck_assert_int_eq(parse(1,
                           "{'descr': [('ids', '<i4', (384,)), ('mask', '|i1', (384,)), "
                           "(('title', 'seg'), '<f8')], 'fortran_order': False, 'shape': (5,)}",
                           &h, &eb),
                     0);
    ck_assert_uint_eq(h.itemsize, 384 * 4 + 384 + 8);
}
END_TEST

START_TEST(npy_hostile)
{
    lg__npy_t h;
    cmn_errbuf_t eb;
    uint8_t b[64];
    size_t len;
    uint8_t *p;

    ck_assert_int_eq(parse(1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", &h, &eb),
                     CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "object arrays"));
    ck_assert_int_eq(parse(1, "{'descr': '<q9', 'fortran_order': False, 'shape': (3,)}", &h, &eb),
                     CMN_EFORMAT);
    ck_assert_int_eq(parse(1, "{'descr': '<f4', 'fortran_order': False}", &h, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "'shape'"));
    ck_assert_int_eq(parse(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,)}", &h, &eb),
                     CMN_EFORMAT);
    ck_assert_int_eq(
        parse(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", &h,
              &eb),
        CMN_EFORMAT);
    ck_assert_int_eq(parse(1, "['descr']", &h, &eb), CMN_EFORMAT);
    /* A key given twice (two shapes would otherwise concatenate into a 2-D array). */
    ck_assert_int_eq(
        parse(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (4,)}", &h, &eb),
        CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "appears twice"));
    ck_assert_int_eq(
        parse(1, "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", &h,
              &eb),
        CMN_EFORMAT);
    ck_assert_int_eq(parse(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,", &h, &eb),
                     CMN_EFORMAT);

    memset(b, 0, sizeof(b));
    ck_assert_int_lt(lg__npy_header_size(b, 10, &eb), 0); /* no magic */
    memcpy(b, "\x93NUMPY\x04\x00", 8);
    ck_assert_int_lt(lg__npy_header_size(b, 10, &eb), 0); /* version 4 */
    ck_assert_ptr_nonnull(strstr(eb.msg, "version 4"));
    memcpy(b, "\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
    ck_assert_int_lt(lg__npy_header_size(b, 12, &eb), 0); /* 2 GB header */
    /* Truncated: the declared header is longer than the bytes given. */
    p = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", NULL, 0, &len);
    ck_assert_int_eq(lg__npy_parse(p, len - 10, &h, &eb), CMN_EFORMAT);
    /* Every prefix of a valid header fails cleanly, never reads beyond it. */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);

        memcpy(copy, p, cut);
        ck_assert_int_lt(lg__npy_parse(copy, cut, &h, &eb), 0);
        free(copy);
    }
    free(p);
}
END_TEST

static char *qdir;

static void qsl_setup(void)
{
    qdir = tl_mkdtemp();
}

static void qsl_teardown(void)
{
    tl_rmdir(qdir);
    free(qdir);
    qdir = NULL;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

START_TEST(qsl_npy_file)
{
    uint8_t data[5 * 6], *img;
    size_t len, i;
    char path[512];
    lg_qsl_t *q;
    lg_qsl_sample_t s;
    cmn_errbuf_t eb;
    const uint32_t idx[] = {0, 4, 4};

    for (i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)i;
    img = make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 2, 3), }", data,
                   sizeof(data), &len);
    snprintf(path, sizeof(path), "%s/set.npy", qdir);
    write_bytes(path, img, len);
    ck_assert_int_eq(lg_qsl_open_npy(path, &q, &eb), 0);
    ck_assert_uint_eq(lg_qsl_total_count(q), 5);
    ck_assert_uint_eq(lg_qsl_performance_count(q), 5);
    lg_qsl_set_performance_count(q, 2);
    ck_assert_uint_eq(lg_qsl_performance_count(q), 2);
    ck_assert_int_eq(lg_qsl_get(q, 4, &s), CMN_ESTATE); /* not loaded */
    ck_assert_int_eq(lg_qsl_load(q, idx, 3, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 4, &s), 0);
    ck_assert_uint_eq(s.size, 6);
    ck_assert_uint_eq(s.raw_size, 6);
    ck_assert_int_eq(s.codec, CMPR_NONE);
    ck_assert_mem_eq(s.data, data + 24, 6);
    /* Duplicates are reference counted, as in MultiStream's padded sets. */
    lg_qsl_unload(q, idx + 1, 1);
    ck_assert_int_eq(lg_qsl_get(q, 4, &s), 0);
    lg_qsl_unload(q, idx, 3);
    ck_assert_int_eq(lg_qsl_get(q, 4, &s), CMN_ESTATE);
    lg_qsl_close(q);
    free(img);

    /* Fewer data bytes than the shape promises. */
    img = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (50, 8), }", data,
                   sizeof(data), &len);
    write_bytes(path, img, len);
    ck_assert_int_eq(lg_qsl_open_npy(path, &q, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "set.npy"));
    free(img);
    /* Fortran order scatters a sample's bytes. */
    img = make_npy(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (5, 6), }", data,
                   sizeof(data), &len);
    write_bytes(path, img, len);
    ck_assert_int_eq(lg_qsl_open_npy(path, &q, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "Fortran"));
    free(img);
    ck_assert_int_lt(lg_qsl_open_npy("/nonexistent.npy", &q, &eb), 0);
}
END_TEST

START_TEST(qsl_npy_dir_and_raw)
{
    static const char *names[] = {"b.npy", "a.npy", "c.npy"};
    uint8_t data[40], *img;
    size_t len, i;
    char path[600];
    lg_qsl_t *q;
    lg_qsl_sample_t s;
    cmn_errbuf_t eb;
    const uint32_t idx[] = {0, 1, 2};

    for (i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(100 + i);
    /* Samples of different sizes; the order is by file name. */
    for (i = 0; i < 3; i++) {
        char dict[128];

        snprintf(dict, sizeof(dict), "{'descr': '<i2', 'fortran_order': False, 'shape': (%zu,), }",
                 i + 1);
        img = make_npy(i + 1, dict, data + i, 2 * (i + 1), &len);
        snprintf(path, sizeof(path), "%s/%s", qdir, names[i]);
        write_bytes(path, img, len);
        free(img);
    }
    snprintf(path, sizeof(path), "%s/notes.txt", qdir);
    write_bytes(path, "x", 1);
    ck_assert_int_eq(lg_qsl_open_npy(qdir, &q, &eb), 0);
    ck_assert_uint_eq(lg_qsl_total_count(q), 3);
    ck_assert_int_eq(lg_qsl_load(q, idx, 3, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 0, &s), 0); /* a.npy: 2 elements from data + 1 */
    ck_assert_uint_eq(s.size, 4);
    ck_assert_mem_eq(s.data, data + 1, 4);
    ck_assert_int_eq(lg_qsl_get(q, 1, &s), 0); /* b.npy */
    ck_assert_uint_eq(s.size, 2);
    ck_assert_int_eq(lg_qsl_get(q, 2, &s), 0); /* c.npy */
    ck_assert_uint_eq(s.size, 6);
    lg_qsl_close(q);

    /* Raw records. */
    snprintf(path, sizeof(path), "%s/records.bin", qdir);
    write_bytes(path, data, 40);
    ck_assert_int_eq(lg_qsl_open_raw(path, 8, &q, &eb), 0);
    ck_assert_uint_eq(lg_qsl_total_count(q), 5);
    ck_assert_int_eq(lg_qsl_load(q, idx + 2, 1, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 2, &s), 0);
    ck_assert_mem_eq(s.data, data + 16, 8);
    lg_qsl_close(q);
    ck_assert_int_eq(lg_qsl_open_raw(path, 7, &q, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "7-byte records"));
    ck_assert_int_eq(lg_qsl_open_raw(path, 0, &q, &eb), CMN_ECONFIG);
}
END_TEST

START_TEST(qsl_synthetic_compression_digest)
{
    lg_qsl_t *q, *q2;
    lg_qsl_sample_t s, s2;
    cmn_errbuf_t eb;
    const uint32_t idx[] = {0, 1, 2, 3};
    uint8_t *back;
    uint64_t raw, wire;
    size_t i;

    ck_assert_int_eq(lg_qsl_open_synthetic(4, 150528, LG_SYNTH_IMAGE, 7, &q, &eb), 0);
    ck_assert_int_eq(lg_qsl_open_synthetic(4, 150528, LG_SYNTH_IMAGE, 7, &q2, &eb), 0);
    /* The rules forbid compression for LLMs, allow lossless compression for vision. */
    ck_assert_int_eq(lg_qsl_set_codec(q, CMPR_LZ4, "llama2-70b", &eb), CMN_EPOLICY);
    ck_assert_ptr_nonnull(strstr(eb.msg, "llama2-70b"));
    ck_assert_int_eq(lg_qsl_set_codec(q, CMPR_LZ4, "3d-unet-99", &eb), 0);
    lg_qsl_keep_digests(q, 1);
    ck_assert_int_eq(lg_qsl_load(q, idx, 4, &eb), 0);
    ck_assert_int_eq(lg_qsl_load(q2, idx, 4, &eb), 0);
    back = malloc(150528);
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(lg_qsl_get(q, (uint32_t)i, &s), 0);
        ck_assert_int_eq(lg_qsl_get(q2, (uint32_t)i, &s2), 0);
        ck_assert_int_eq(s.codec, CMPR_LZ4);
        ck_assert_uint_lt(s.size, s.raw_size);
        ck_assert_uint_eq(s.raw_size, 150528);
        ck_assert_int_eq(s2.codec, CMPR_NONE);
        /* Deterministic bytes, which decompress to the uncompressed twin. */
        ck_assert_int_eq(cmpr_decompress(s.codec, s.data, s.size, back, s.raw_size), 0);
        ck_assert_mem_eq(back, s2.data, 150528);
        ck_assert_uint_eq(lg_qsl_digest(q, (uint32_t)i), cmn_digest64(s2.data, 150528));
    }
    ck_assert_uint_ne(lg_qsl_digest(q, 0), lg_qsl_digest(q, 1));
    ck_assert_uint_eq(lg_qsl_digest(q2, 0), 0); /* digests off */
    lg_qsl_loaded_bytes(q, &raw, &wire);
    ck_assert_uint_eq(raw, 4 * 150528);
    ck_assert_uint_lt(wire, raw);
    free(back);
    lg_qsl_close(q);
    lg_qsl_close(q2);

    /* Random bytes do not shrink and travel raw. */
    ck_assert_int_eq(lg_qsl_open_synthetic(2, 4096, LG_SYNTH_RANDOM, 1, &q, &eb), 0);
    ck_assert_int_eq(lg_qsl_set_codec(q, CMPR_LZ4, "3d-unet-99", &eb), 0);
    ck_assert_int_eq(lg_qsl_load(q, idx, 2, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 1, &s), 0);
    ck_assert_int_eq(s.codec, CMPR_NONE);
    ck_assert_uint_eq(s.size, 4096);
    ck_assert_int_eq(lg_qsl_load(q, (const uint32_t[]){9}, 1, &eb), CMN_ECONFIG);
    lg_qsl_close(q);
}
END_TEST

/* KiTS19 cases of different shapes: each sample is the volume header (its shape) and the voxels;
 * LZ4 round trips it; a case that is not float32 (1, D, H, W) is refused by name at load. */
START_TEST(qsl_kits_volumes)
{
    float vox[2 * 3 * 4];
    uint8_t *img, *back;
    size_t len, i;
    char path[600], dict[128];
    lg_qsl_t *q;
    lg_qsl_sample_t s;
    cmn_vol_t v;
    cmn_errbuf_t eb;
    const uint32_t idx[] = {0, 1};

    for (i = 0; i < 24; i++)
        vox[i] = i < 12 ? -2.2f : (float)i; /* padding, then tissue */
    snprintf(dict, sizeof(dict),
             "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3, 4), }");
    img = make_npy(1, dict, vox, sizeof(vox), &len);
    snprintf(path, sizeof(path), "%s/00000_case_00000.npy", qdir);
    write_bytes(path, img, len);
    free(img);
    snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2), }");
    img = make_npy(1, dict, vox, 8 * sizeof(float), &len);
    snprintf(path, sizeof(path), "%s/00001_case_00001.npy", qdir);
    write_bytes(path, img, len);
    free(img);
    ck_assert_int_eq(lg_qsl_open_kits(qdir, &q, &eb), 0);
    ck_assert_uint_eq(lg_qsl_total_count(q), 2);
    ck_assert_uint_eq(lg_qsl_performance_count(q), 2); /* mlperf.conf's override for 3d-unet is 0 */
    ck_assert_str_eq(lg_qsl_name(q), "KiTS19 volumes");
    ck_assert_int_eq(lg_qsl_load(q, idx, 2, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 0, &s), 0);
    ck_assert_uint_eq(s.size, CMN_VOL_HEADER_SIZE + sizeof(vox));
    ck_assert_int_eq(cmn_vol_decode(s.data, s.size, &v, &eb), 0);
    ck_assert_uint_eq(v.dtype, CMN_VOL_F32);
    ck_assert_uint_eq(v.dims[0], 2);
    ck_assert_uint_eq(v.dims[1], 3);
    ck_assert_uint_eq(v.dims[2], 4);
    ck_assert_mem_eq((const uint8_t *)s.data + CMN_VOL_HEADER_SIZE, vox, sizeof(vox));
    ck_assert_int_eq(lg_qsl_get(q, 1, &s), 0);
    ck_assert_int_eq(cmn_vol_decode(s.data, s.size, &v, &eb), 0);
    ck_assert_uint_eq(v.dims[0] * v.dims[1] * v.dims[2], 8);
    lg_qsl_close(q);

    /* LZ4 (3d-unet's row allows it): the header travels inside the compressed sample. */
    ck_assert_int_eq(lg_qsl_open_kits(qdir, &q, &eb), 0);
    ck_assert_int_eq(lg_qsl_set_codec(q, CMPR_LZ4, "3d-unet-99.9", &eb), 0);
    ck_assert_int_eq(lg_qsl_load(q, idx, 1, &eb), 0);
    ck_assert_int_eq(lg_qsl_get(q, 0, &s), 0);
    back = malloc(s.raw_size);
    ck_assert_int_eq(cmpr_decompress(s.codec, s.data, s.size, back, s.raw_size), 0);
    ck_assert_int_eq(cmn_vol_decode(back, s.raw_size, &v, &eb), 0);
    ck_assert_mem_eq(back + CMN_VOL_HEADER_SIZE, vox, sizeof(vox));
    free(back);
    lg_qsl_close(q);

    /* float64 and a batch axis of 2 are not KiTS19 cases. */
    snprintf(dict, sizeof(dict), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }");
    img = make_npy(1, dict, vox, 24, &len);
    snprintf(path, sizeof(path), "%s/00001_case_00001.npy", qdir);
    write_bytes(path, img, len);
    free(img);
    ck_assert_int_eq(lg_qsl_open_kits(qdir, &q, &eb), 0);
    ck_assert_int_eq(lg_qsl_load(q, idx + 1, 1, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "00001_case_00001.npy: dtype <f8"));
    lg_qsl_close(q);
    snprintf(dict, sizeof(dict),
             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 1, 2), }");
    img = make_npy(1, dict, vox, 16, &len);
    write_bytes(path, img, len);
    free(img);
    ck_assert_int_eq(lg_qsl_open_kits(qdir, &q, &eb), 0);
    ck_assert_int_eq(lg_qsl_load(q, idx + 1, 1, &eb), CMN_EFORMAT);
    ck_assert_ptr_nonnull(strstr(eb.msg, "(1, D, H, W)"));
    lg_qsl_close(q);
    ck_assert_int_eq(lg_qsl_open_kits(path, &q, &eb), CMN_EFORMAT); /* a file, not a folder */
    ck_assert_ptr_nonnull(strstr(eb.msg, "is not a directory"));
}
END_TEST

TCase *tcase_npy(void)
{
    TCase *tc = tcase_create("npy");

    tcase_add_test(tc, npy_headers);
    tcase_add_test(tc, npy_hostile);
    return tc;
}

TCase *tcase_qsl(void)
{
    TCase *tc = tcase_create("qsl");

    tcase_add_checked_fixture(tc, qsl_setup, qsl_teardown);
    tcase_add_test(tc, qsl_npy_file);
    tcase_add_test(tc, qsl_npy_dir_and_raw);
    tcase_add_test(tc, qsl_synthetic_compression_digest);
    tcase_add_test(tc, qsl_kits_volumes);
    return tc;
}
