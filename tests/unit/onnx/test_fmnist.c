/* The committed Fashion-MNIST model on the 10 000 test images, through the ABI in batches of 64
 * (the last one padded), must reach 99 % of the PyTorch FP32 accuracy recorded beside it.
 *
 * ONNX_FMNIST_LIMIT=N runs the first N images only, for slow instrumented builds; the check is
 * then against the same 99 % of the reference, which a working backend still clears easily. */
#include "test_onnx.h"
#include "onnx_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MODEL MODEL_DIR "/fashion_mnist_cnn.onnx"
#define RECORD MODEL_DIR "/fashion_mnist_cnn.json"

/* Reads a gzip'd idx file with |ndim| dimensions; returns the data, *count = first dim. */
static uint8_t *read_idx(const char *path, int ndim, size_t per_item, size_t *count)
{
    gzFile f = gzopen(path, "rb");
    uint8_t hdr[16], *data;
    size_t n, i;
    int got;

    ck_assert_msg(f != NULL, "cannot open %s", path);
    got = gzread(f, hdr, (unsigned)(4 + 4 * ndim));
    ck_assert_int_eq(got, 4 + 4 * ndim);
    ck_assert_uint_eq(hdr[2], 0x08); /* unsigned bytes */
    ck_assert_uint_eq(hdr[3], (unsigned)ndim);
    n = (size_t)hdr[4] << 24 | (size_t)hdr[5] << 16 | (size_t)hdr[6] << 8 | hdr[7];
    for (i = 1; i < (size_t)ndim; i++)
        ck_assert_uint_eq((size_t)hdr[4 + 4 * i + 2] << 8 | hdr[4 + 4 * i + 3], 28);
    data = malloc(n * per_item);
    ck_assert_ptr_nonnull(data);
    ck_assert_int_eq(gzread(f, data, (unsigned)(n * per_item)), (int)(n * per_item));
    gzclose(f);
    *count = n;
    return data;
}

static double reference_accuracy(void)
{
    size_t len;
    char *json = (char *)read_all(RECORD, &len), *p;
    double acc;
    ck_assert_ptr_nonnull(json);
    json[len] = '\0';
    p = strstr(json, "\"pytorch_fp32_top1\":");
    ck_assert_ptr_nonnull(p);
    acc = strtod(p + strlen("\"pytorch_fp32_top1\":"), NULL);
    free(json);
    ck_assert(acc > 50.0 && acc <= 100.0);
    return acc;
}

START_TEST(test_fmnist_accuracy)
{
    static const char *const argmax[] = {"output", "argmax", NULL};
    size_t n_img, n_lab, i, good = 0, limit = 0;
    uint8_t *img = read_idx(FMNIST_DIR "/t10k-images-idx3-ubyte.gz", 3, 784, &n_img);
    uint8_t *lab = read_idx(FMNIST_DIR "/t10k-labels-idx1-ubyte.gz", 1, 1, &n_lab);
    double ref = reference_accuracy(), acc;
    const char *env = getenv("ONNX_FMNIST_LIMIT");
    int32_t cls[64];
    float logits[64 * 10];
    tb_t t, raw;

    ck_assert_uint_eq(n_img, 10000);
    ck_assert_uint_eq(n_lab, n_img);
    if (env && atoi(env) > 0 && (size_t)atoi(env) < n_img)
        limit = (size_t)atoi(env);
    n_img = limit ? limit : n_img;
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), MODEL, argmax, 64, 2), 0);
    ck_assert_uint_eq(t.info.output_size, 4);
    ck_assert_int_eq(tb_open(&raw, sut_backend_onnx_ops(), MODEL, NULL, 64, 2), 0);
    for (i = 0; i < n_img; i += 64) {
        size_t n = n_img - i < 64 ? n_img - i : 64, k;
        ck_assert_int_eq(tb_run(&t, img + i * 784, n, cls, 4), 0);
        for (k = 0; k < n; k++) {
            ck_assert(cls[k] >= 0 && cls[k] < 10);
            good += (size_t)cls[k] == lab[i + k];
        }
        if (i == 0) {
            /* argmax is the post-processing of exactly the raw logits */
            ck_assert_int_eq(tb_run(&raw, img, n, logits, 40), 0);
            for (k = 0; k < n; k++) {
                int c, best = 0;
                for (c = 1; c < 10; c++)
                    if (logits[k * 10 + c] > logits[k * 10 + best])
                        best = c;
                ck_assert_int_eq(cls[k], best);
            }
        }
    }
    tb_close(&raw);
    tb_close(&t);
    acc = 100.0 * (double)good / (double)n_img;
    printf("onnx backend Fashion-MNIST: accuracy=%.3f%%, good=%zu, total=%zu (PyTorch FP32 "
           "%.3f%%)\n",
           acc, good, n_img, ref);
    ck_assert_msg(acc >= 0.99 * ref, "accuracy %.3f%% is under 99%% of PyTorch's %.3f%%", acc, ref);
    free(img);
    free(lab);
}
END_TEST

TCase *tcase_fmnist_accuracy(void)
{
    TCase *tc = tcase_create("fmnist_accuracy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fmnist_accuracy);
    return tc;
}
