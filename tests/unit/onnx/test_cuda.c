/* The CUDA engine on a real GPU (test_onnx_cuda; cuda_main.c skips every case, exit status 77,
 * on a machine without one). Against the CPU engine through the same ABI: the Fashion-MNIST model
 * on the real test images at several batch sizes and its accuracy, a residual block, concurrent
 * batches on the streams, pinned batch inputs, describe(), the options that change how the
 * engine runs, and a device ordinal past the last one. The ONNX node vectors run in
 * test_node.c (cuda_nodes). */
#include "test_onnx.h"
#include "onnx_backend.h"

#include "cmn/err.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define MODEL MODEL_DIR "/fashion_mnist_cnn.onnx"
#define IMAGES 2048

static const char *const cuda_kv[] = {"device", "cuda", NULL};

#ifdef HAVE_FMNIST
/* A file of the Fashion-MNIST test set: where CMake found it, or under $FMNIST_DIR. */
static gzFile fmnist_open(const char *file)
{
    char path[1024];
    const char *dir = getenv("FMNIST_DIR") ? getenv("FMNIST_DIR") : FMNIST_DIR;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return gzopen(path, "rb");
}
#endif

/* The first |want| test images, or pseudo-random pixels without the data set. */
static uint8_t *images(size_t want)
{
    uint8_t *img = malloc(want * 784), hdr[16];
    size_t i;
#ifdef HAVE_FMNIST
    gzFile f = fmnist_open("t10k-images-idx3-ubyte.gz");
    ck_assert_ptr_nonnull(img);
    if (f && gzread(f, hdr, 16) == 16 &&
        gzread(f, img, (unsigned)(want * 784)) == (int)(want * 784)) {
        gzclose(f);
        return img;
    }
    if (f)
        gzclose(f);
#else
    (void)hdr;
#endif
    ck_assert_ptr_nonnull(img);
    for (i = 0; i < want * 784; i++)
        img[i] = (uint8_t)((i * 2654435761u) >> 24);
    return img;
}

/* The GPU's logits against the CPU engine's for |n| images in batches of |batch|. */
static void compare_fmnist(tb_t *gpu, tb_t *cpu, const uint8_t *img, size_t n, size_t batch)
{
    float *want = malloc(batch * 40), *got = malloc(batch * 40);
    size_t i, k, same = 0;
    ck_assert(want && got);
    for (i = 0; i < n; i += batch) {
        size_t b = n - i < batch ? n - i : batch;
        ck_assert_int_eq(tb_run(cpu, img + i * 784, b, want, 40), 0);
        ck_assert_int_eq(tb_run(gpu, img + i * 784, b, got, 40), 0);
        assert_close(got, want, b * 10, 1e-4f, 1e-3f, "GPU logits against the CPU engine");
        for (k = 0; k < b; k++) {
            int c, wa = 0, ga = 0;
            for (c = 1; c < 10; c++) {
                wa = want[k * 10 + c] > want[k * 10 + wa] ? c : wa;
                ga = got[k * 10 + c] > got[k * 10 + ga] ? c : ga;
            }
            same += wa == ga;
        }
    }
    /* exact ties aside, the classes agree */
    ck_assert_uint_ge(same, n - n / 1000);
    free(want);
    free(got);
}

START_TEST(test_fmnist_vs_cpu)
{
    static const size_t batches[] = {1, 7, 64};
    uint8_t *img = images(IMAGES);
    tb_t gpu, cpu;
    size_t i;

    ck_assert_int_eq(tb_open(&cpu, sut_backend_onnx_ops(), MODEL, NULL, 64, 2), 0);
    ck_assert_msg(tb_open(&gpu, sut_backend_onnx_ops(), MODEL, cuda_kv, 64, 0) == 0, "%s", gpu.err);
    printf("GPU: %s\n", gpu.info.device);
    for (i = 0; i < sizeof(batches) / sizeof(batches[0]); i++)
        compare_fmnist(&gpu, &cpu, img, batches[i] == 1 ? 256 : IMAGES, batches[i]);
    tb_close(&gpu);
    tb_close(&cpu);
    free(img);
}
END_TEST

/* The options that change how the engine runs give the same results: one stream, heuristics
 * instead of timing, no cuDNN workspace, TF32 (looser), a synchronisation after every step. */
START_TEST(test_engine_options)
{
    static const char *const opts[][12] = {
        {"device", "cuda:0", "streams", "1", NULL},
        {"device", "cuda", "conv_algo", "heuristic", "workspace_mb", "0", NULL},
        {"device", "cuda", "debug_sync", "1", "batch_sizes", "1,3", NULL},
        {"device", "cuda", "tf32", "1", NULL},
    };
    uint8_t *img = images(256);
    tb_t gpu, cpu;
    size_t i;

    ck_assert_int_eq(tb_open(&cpu, sut_backend_onnx_ops(), MODEL, NULL, 16, 2), 0);
    for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        ck_assert_msg(tb_open(&gpu, sut_backend_onnx_ops(), MODEL, opts[i], 16, 0) == 0,
                      "options %zu: %s", i, gpu.err);
        if (strcmp(opts[i][2], "tf32") == 0) {
            /* TF32 rounds inputs to 10 bits of mantissa: compare the classes only, loosely */
            float a[160], b[160];
            int k;
            ck_assert_int_eq(tb_run(&cpu, img, 16, a, 40), 0);
            ck_assert_int_eq(tb_run(&gpu, img, 16, b, 40), 0);
            for (k = 0; k < 160; k++)
                ck_assert_msg(fabsf(a[k] - b[k]) < 0.05f + 0.02f * fabsf(a[k]),
                              "TF32 logit %d: %g against %g", k, (double)b[k], (double)a[k]);
        } else {
            compare_fmnist(&gpu, &cpu, img, 256, i == 2 ? 3 : 16);
        }
        tb_close(&gpu);
    }
    tb_close(&cpu);
    free(img);
}
END_TEST

/* describe(): the device as sut-node sends it in HelloAck, and an engine per stream. */
START_TEST(test_describe)
{
    static const char *const kv[] = {"device", "cuda:0", "streams", "3", NULL};
    tb_t t;
    ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), MODEL, kv, 8, 0) == 0, "%s", t.err);
    ck_assert_uint_eq(t.info.engines, 3);
    ck_assert_ptr_nonnull(strstr(t.info.device, "(cuda:0, PCI "));
    ck_assert_ptr_nonnull(strstr(t.info.device, "GiB, compute capability "));
    ck_assert_ptr_nonnull(strstr(t.info.device, ", driver "));
    ck_assert_ptr_nonnull(strstr(t.info.device, ", runtime "));
    ck_assert_ptr_nonnull(strstr(t.info.device, "cuDNN 9."));
    ck_assert_ptr_nonnull(strstr(t.info.device, "3 streams"));
    ck_assert_ptr_nonnull(strstr(tb_log(), "MB of device buffers"));
    tb_close(&t);
}
END_TEST

typedef struct {
    tb_t *t;
    const uint8_t *x;
    const float *want;
    int rounds, ok;
} worker_t;

static void *infer_worker(void *arg)
{
    worker_t *w = arg;
    float out[8 * 10];
    int r, k;
    w->ok = 1;
    for (r = 0; r < w->rounds; r++) {
        if (tb_run(w->t, w->x, 8, out, 40) != 0)
            w->ok = 0;
        for (k = 0; k < 80; k++)
            if (fabsf(out[k] - w->want[k]) > 1e-4f + 1e-3f * fabsf(w->want[k]))
                w->ok = 0;
    }
    return NULL;
}

/* Four threads, two streams: batches run two at a time, each gets its own results, in pinned
 * inputs from alloc_input() as the node's batcher would use. */
START_TEST(test_streams_concurrent)
{
    enum { W = 4 };
    static const char *const kv[] = {"device", "cuda", "streams", "2", NULL};
    uint8_t *x[W], *img = images(W * 8);
    float want[W][80];
    pthread_t th[W];
    worker_t w[W];
    tb_t t, cpu;
    int k;

    ck_assert_int_eq(tb_open(&cpu, sut_backend_onnx_ops(), MODEL, NULL, 8, 2), 0);
    ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), MODEL, kv, 8, 0) == 0, "%s", t.err);
    ck_assert_uint_eq(t.info.engines, 2);
    for (k = 0; k < W; k++) {
        x[k] = t.ops->alloc_input(t.b, 8 * 784);
        ck_assert_ptr_nonnull(x[k]);
        memcpy(x[k], img + (size_t)k * 8 * 784, 8 * 784);
        ck_assert_int_eq(tb_run(&cpu, x[k], 8, want[k], 40), 0);
    }
    for (k = 0; k < W; k++) {
        w[k].t = &t;
        w[k].x = x[k];
        w[k].want = want[k];
        w[k].rounds = 50;
        ck_assert_int_eq(pthread_create(&th[k], NULL, infer_worker, &w[k]), 0);
    }
    for (k = 0; k < W; k++) {
        pthread_join(th[k], NULL);
        ck_assert_msg(w[k].ok, "worker %d got wrong results", k);
    }
    for (k = 0; k < W; k++)
        t.ops->free_input(t.b, x[k], 8 * 784);
    tb_close(&t);
    tb_close(&cpu);
    free(img);
}
END_TEST

/* The full test set through argmax on the GPU: the accuracy of the CPU engine and PyTorch. */
START_TEST(test_fmnist_accuracy_gpu)
{
#ifdef HAVE_FMNIST
    static const char *const kv[] = {"device", "cuda", "output", "argmax", NULL};
    uint8_t *img = malloc(10000 * 784), *lab = malloc(10000), hdr[16];
    gzFile fi = fmnist_open("t10k-images-idx3-ubyte.gz");
    gzFile fl = fmnist_open("t10k-labels-idx1-ubyte.gz");
    int32_t cls[64];
    size_t i, good = 0;
    tb_t t;

    ck_assert(img && lab && fi && fl);
    ck_assert_int_eq(gzread(fi, hdr, 16), 16);
    ck_assert_int_eq(gzread(fi, img, 10000 * 784), 10000 * 784);
    ck_assert_int_eq(gzread(fl, hdr, 8), 8);
    ck_assert_int_eq(gzread(fl, lab, 10000), 10000);
    gzclose(fi);
    gzclose(fl);
    ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), MODEL, kv, 64, 0) == 0, "%s", t.err);
    for (i = 0; i < 10000; i += 64) {
        size_t n = 10000 - i < 64 ? 10000 - i : 64, k;
        ck_assert_int_eq(tb_run(&t, img + i * 784, n, cls, 4), 0);
        for (k = 0; k < n; k++)
            good += (size_t)cls[k] == lab[i + k];
    }
    tb_close(&t);
    printf("onnx CUDA engine Fashion-MNIST: accuracy=%.3f%% (the CPU engine and PyTorch: "
           "92.670%%)\n",
           (double)good / 100.0);
    ck_assert_uint_ge(good, 9267 * 99 / 100);
    free(img);
    free(lab);
#else
    printf("no Fashion-MNIST test set (dataset-fashion-mnist): only the logits were compared\n");
#endif
}
END_TEST

/* An ordinal past the last device: a load error naming it and how many there are. */
START_TEST(test_bad_ordinal)
{
    static const char *const kv[] = {"device", "cuda:1023", NULL};
    tb_t t;
    tb_open(&t, sut_backend_onnx_ops(), MODEL, kv, 8, 0);
    ck_assert_int_lt(t.rc, 0);
    ck_assert_msg(strstr(t.err, "device=cuda:1023: no such CUDA device: this host has ") != NULL,
                  "%s", t.err);
}
END_TEST

TCase *tcase_cuda_engine(void)
{
    TCase *tc = tcase_create("cuda_engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fmnist_vs_cpu);
    tcase_add_test(tc, test_engine_options);
    tcase_add_test(tc, test_describe);
    tcase_add_test(tc, test_streams_concurrent);
    tcase_add_test(tc, test_fmnist_accuracy_gpu);
    tcase_add_test(tc, test_bad_ordinal);
    return tc;
}
