/* device= and the CUDA engine's options, on any machine (with or without a GPU, with or without
 * the engine built): what is parsed, what is refused, and that asking for a device that is not
 * there fails create() cleanly with a message naming the device and the reason. */
#include "test_onnx.h"
#include "onnx_backend.h"

#include "cmn/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FMNIST_MODEL MODEL_DIR "/fashion_mnist_cnn.onnx"

static void expect_error(const char *const *kv, const char *device, int rc, const char *want)
{
    const char *keys[16], *values[16];
    sut_backend_config_t cfg;
    const sut_backend_ops_t *ops = sut_backend_onnx_ops();
    sut_backend_t *b = NULL;
    char err[1024] = "";
    size_t n = 0;
    int got;

    keys[n] = "model";
    values[n++] = FMNIST_MODEL;
    while (kv && kv[0]) {
        keys[n] = kv[0];
        values[n++] = kv[1];
        kv += 2;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = device;
    cfg.max_batch = 4;
    cfg.n_options = n;
    cfg.keys = keys;
    cfg.values = values;
    got = ops->create(&cfg, &b, err, sizeof(err));
    ck_assert_msg(got < 0, "create() succeeded; expected \"%s\"", want);
    ck_assert_ptr_null(b);
    if (rc)
        ck_assert_msg(got == rc, "rc %d (%s), expected %d (%s)", got, err, rc, want);
    ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" does not contain \"%s\"", err, want);
    ck_assert_msg(strncmp(err, "onnx backend: ", 14) == 0, "message \"%s\"", err);
}

START_TEST(test_device_syntax)
{
    static const char *const tpu[] = {"device", "tpu", NULL};
    static const char *const colon[] = {"device", "cuda:", NULL};
    static const char *const letters[] = {"device", "cuda:x", NULL};
    static const char *const big[] = {"device", "cuda:99999", NULL};
    static const char *const sign[] = {"device", "cuda:-1", NULL};
    static const char *const streams_cpu[] = {"device", "cpu", "streams", "2", NULL};
    static const char *const tf32_cpu[] = {"tf32", "1", NULL};
    static const char *const threads_gpu[] = {"device", "cuda:0", "threads", "2", NULL};
    static const char *const streams0[] = {"device", "cuda", "streams", "0", NULL};
    static const char *const streams_big[] = {"device", "cuda", "streams", "65", NULL};
    static const char *const ws_bad[] = {"device", "cuda", "workspace_mb", "lots", NULL};
    static const char *const algo_bad[] = {"device", "cuda", "conv_algo", "fastest", NULL};
    static const char *const tf32_bad[] = {"device", "cuda", "tf32", "yes", NULL};
    static const char *const sync_bad[] = {"device", "cuda", "debug_sync", "2", NULL};

    expect_error(tpu, "cpu", CMN_ECONFIG, "device=tpu: expected cpu, cuda or cuda:N");
    expect_error(colon, "cpu", CMN_ECONFIG, "device=cuda:: expected cpu, cuda or cuda:N");
    expect_error(letters, "cpu", CMN_ECONFIG, "device=cuda:x: expected");
    expect_error(big, "cpu", CMN_ECONFIG, "device=cuda:99999: expected");
    expect_error(sign, "cpu", CMN_ECONFIG, "device=cuda:-1: expected");
    /* the node's --device is the default when the option is absent */
    expect_error(NULL, "gpu0", CMN_ECONFIG, "--device gpu0: expected cpu, cuda or cuda:N");
    expect_error(streams_cpu, "cpu", CMN_ECONFIG, "streams=2 applies to device=cuda only");
    expect_error(tf32_cpu, "cpu", CMN_ECONFIG, "tf32=1 applies to device=cuda only");
    expect_error(threads_gpu, "cpu", CMN_ECONFIG, "threads=2 applies to device=cpu");
    expect_error(streams0, "cpu", CMN_ECONFIG, "streams=0: expected a count from 1 to 64");
    expect_error(streams_big, "cpu", CMN_ECONFIG, "streams=65: expected a count from 1 to 64");
    expect_error(ws_bad, "cpu", CMN_ECONFIG, "workspace_mb=lots: expected megabytes");
    expect_error(algo_bad, "cpu", CMN_ECONFIG, "conv_algo=fastest: expected find or heuristic");
    expect_error(tf32_bad, "cpu", CMN_ECONFIG, "tf32=yes: expected 0 or 1");
    expect_error(sync_bad, "cpu", CMN_ECONFIG, "debug_sync=2: expected 0 or 1");
}
END_TEST

/* Device 7 is not on this machine (the test hosts have at most one GPU): with no engine built,
 * no driver, no GPU or too few, create() fails and says which and why. */
START_TEST(test_device_missing)
{
    static const char *const nolib[] = {"device", "cuda:0", "cuda_lib", "/nonexistent/libx.so",
                                        NULL};
    static const char *const reasons[] = {
        "no such CUDA device: this host has", /* a GPU host with fewer than 8 */
        "no usable CUDA device",              /* no driver, or no GPU */
        "this build has no CUDA engine",      /* CMake found no toolkit */
        "cannot load the CUDA engine",        /* the engine is there, a CUDA library is not */
    };
    const char *keys[2] = {"model", "device"}, *values[2] = {FMNIST_MODEL, "cuda:7"};
    const sut_backend_ops_t *ops = sut_backend_onnx_ops();
    sut_backend_config_t cfg;
    sut_backend_t *b = NULL;
    char err[1024] = "";
    size_t i;
    int k, rc;

    /* the option, then the node's --device: both name the device and the reason; and an
     * ordinal no host has, in case this one has eight GPUs */
    for (k = 0; k < 3; k++) {
        char name[32];
        values[1] = k < 2 ? "cuda:7" : "cuda:1023";
        memset(&cfg, 0, sizeof(cfg));
        cfg.device = k == 1 ? values[1] : "cpu";
        cfg.max_batch = 4;
        cfg.n_options = k == 1 ? 1 : 2;
        cfg.keys = keys;
        cfg.values = values;
        rc = ops->create(&cfg, &b, err, sizeof(err));
        if (rc == 0 && k < 2) {
            printf("this host has a cuda:7\n");
            ops->destroy(b);
            b = NULL;
            continue;
        }
        ck_assert_int_lt(rc, 0);
        ck_assert_ptr_null(b);
        snprintf(name, sizeof(name), "device=%s: ", values[1]);
        ck_assert_msg(strstr(err, name) != NULL, "\"%s\" does not name the device", err);
        for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
            if (strstr(err, reasons[i]))
                break;
        ck_assert_msg(i < sizeof(reasons) / sizeof(reasons[0]), "\"%s\": no known reason", err);
        printf("%s here: %s\n", values[1], err);
    }
    expect_error(nolib, "cpu", CMN_ECONFIG, "/nonexistent/libx.so");
}
END_TEST

/* The CPU keeps plain malloc'd batch inputs (the node frees them through the same ops). */
START_TEST(test_cpu_inputs)
{
    tb_t t;
    uint8_t *p;
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), FMNIST_MODEL, NULL, 4, 1), 0);
    ck_assert_ptr_nonnull(t.ops->alloc_input);
    ck_assert_ptr_nonnull(t.ops->free_input);
    p = t.ops->alloc_input(t.b, 4 * 784);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, 4 * 784);
    t.ops->free_input(t.b, p, 4 * 784);
    tb_close(&t);
}
END_TEST

TCase *tcase_cuda_options(void)
{
    TCase *tc = tcase_create("cuda_options");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_device_syntax);
    tcase_add_test(tc, test_device_missing);
    tcase_add_test(tc, test_cpu_inputs);
    return tc;
}
