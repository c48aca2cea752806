/* Load-time errors (each names what failed and why), options, describe(), infer() guards and
 * the dlopen-able plugin. */
#include "test_onnx.h"
#include "onnx_backend.h"
#include "onnx_cuda_plan.h"
#include "onnx_graph.h"

#include "cmn/err.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FMNIST_MODEL MODEL_DIR "/fashion_mnist_cnn.onnx"

static const int64_t d_n3[] = {-1, 3};
static const int64_t d4_3d[] = {4}, d2x3[] = {2, 2, 2};

/* Opens |path| expecting failure with |rc| and a message containing |want|; unlinks |path|
 * when |tmp|. */
static void expect_error(char *path, int tmp, int rc, const char *want)
{
    tb_t t;
    tb_open(&t, sut_backend_onnx_ops(), path, NULL, 8, 1);
    ck_assert_msg(t.rc == rc, "%s: rc %d (%s), expected %d; message: %s", want, t.rc,
                  cmn_err_name(t.rc), rc, t.err);
    ck_assert_msg(strstr(t.err, want) != NULL, "message \"%s\" does not contain \"%s\"", t.err,
                  want);
    if (tmp) {
        unlink(path);
        free(path);
    }
}

/* x [N,3] -> op -> y, for the one-node error cases. */
static mb_t *one_node(const char *op, const char *name, Onnx__NodeProto **node)
{
    mb_t *m = mb_new(13);
    mb_input(m, "x", 1, 2, d_n3);
    mb_output(m, "y", 1, 2, d_n3);
    *node = mb_node(m, op, name, "x", "y");
    return m;
}

START_TEST(test_load_errors)
{
    Onnx__NodeProto *n;
    mb_t *m;
    char *p;
    static const int64_t d_x[] = {-1, 3, 5, 5}, d_w[] = {4, 3, 3, 3}, d_sym[] = {1, 3, -1};
    static const int64_t d4[] = {4}, d23[] = {2, 3}, d32[] = {3, 2}, d31[] = {3, 1}, d14[] = {1, 4};
    float w[4 * 3 * 3 * 3] = {0};

    /* the file */
    expect_error((char *)"/nonexistent/model.onnx", 0, -ENOENT,
                 "cannot open /nonexistent/model.onnx: No such file or directory");
    p = tmp_path(".onnx");
    {
        static const char junk[] = "\x0a\xff\xff\xff\xff\xff garbage";
        ck_assert_int_eq(write_all(p, junk, sizeof(junk) - 1), 0);
    }
    expect_error(p, 1, CMN_EFORMAT, "is not an ONNX model");

    /* operators and attributes */
    m = one_node("LSTM", "lstm_1", &n);
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"lstm_1\" (LSTM): operator not supported by the onnx backend");
    m = one_node("Relu", "r", &n);
    n->domain = (char *)"com.microsoft";
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"r\" (Relu): operators of domain \"com.microsoft\" are not supported");
    m = one_node("Relu", "r", &n);
    mb_attr_int(m, n, "alpha", 2);
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"r\" (Relu): attribute \"alpha\" is not "
                 "supported");
    m = one_node("Softmax", "", &n); /* unnamed nodes are named by their index */
    mb_attr_int(m, n, "axis", 5);
    expect_error(mb_write(m), 1, CMN_EFORMAT, "node \"#0\" (Softmax): axis out of range");
    m = one_node("Relu", "r", &n);
    n->input[0] = (char *)"nowhere";
    expect_error(mb_write(m), 1, CMN_EFORMAT, "input \"nowhere\" is produced by no earlier node");

    m = mb_new(13);
    mb_input(m, "x", 1, 4, d_x);
    mb_init(m, "W", 1, 4, d_w, w);
    mb_output(m, "y", 1, 4, d_x);
    n = mb_node(m, "Conv", "conv", "x,W", "y");
    mb_attr_str(m, n, "auto_pad", "BOGUS");
    expect_error(mb_write(m), 1, CMN_EFORMAT, "node \"conv\" (Conv): auto_pad \"BOGUS\"");
    {
        /* zero pads beside auto_pad are harmless; real ones conflict with it */
        static const int64_t zero[] = {0, 0, 0, 0}, one[] = {1, 1, 1, 1};
        tb_t t;
        m = mb_new(13);
        mb_input(m, "x", 1, 4, d_x);
        mb_init(m, "W", 1, 4, d_w, w);
        mb_output(m, "y", 1, 4, d_x);
        n = mb_node(m, "Conv", "conv", "x,W", "y");
        mb_attr_str(m, n, "auto_pad", "SAME_UPPER");
        mb_attr_ints(m, n, "pads", 4, zero);
        p = mb_write(m);
        ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 2, 1) == 0, "%s", t.err);
        ck_assert_uint_eq(t.info.output_size, 4 * 5 * 5 * sizeof(float)); /* SAME keeps 5x5 */
        tb_close(&t);
        unlink(p);
        free(p);
        m = mb_new(13);
        mb_input(m, "x", 1, 4, d_x);
        mb_init(m, "W", 1, 4, d_w, w);
        mb_output(m, "y", 1, 4, d_x);
        n = mb_node(m, "Conv", "conv", "x,W", "y");
        mb_attr_str(m, n, "auto_pad", "SAME_UPPER");
        mb_attr_ints(m, n, "pads", 4, one);
        expect_error(mb_write(m), 1, CMN_EFORMAT,
                     "node \"conv\" (Conv): pads and auto_pad SAME_UPPER are both given");
    }
    m = mb_new(13);
    mb_input(m, "x", 1, 4, d_x);
    mb_init(m, "W", 1, 4, d_w, w);
    mb_output(m, "y", 1, 4, d_x);
    n = mb_node(m, "Conv", "conv", "x,W", "y");
    mb_attr_int(m, n, "group", 2);
    expect_error(mb_write(m), 1, CMN_EFORMAT, "node \"conv\" (Conv): group 2 does not fit");

    /* shapes */
    m = mb_new(13);
    mb_input(m, "a", 1, 2, d23);
    mb_init(m, "b", 1, 1, d4, w);
    mb_output(m, "y", 1, 2, d23);
    mb_node(m, "Add", "add", "a,b", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"add\" (Add): shapes [2,3] and [4] do not "
                 "broadcast");
    m = mb_new(13);
    mb_input(m, "a", 1, 2, d31);
    mb_init(m, "b", 1, 2, d14, w);
    mb_output(m, "y", 1, 2, d14);
    mb_node(m, "Mul", "mul", "a,b", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT, "both inputs are broadcast");
    m = mb_new(13);
    mb_input(m, "a", 1, 2, d23);
    mb_init(m, "b", 1, 2, d23, w);
    mb_output(m, "y", 1, 2, d23);
    mb_node(m, "Gemm", "fc", "a,b", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT, "node \"fc\" (Gemm): A is 2x3 and B 2x3");
    (void)d32;
    m = mb_new(13);
    mb_input(m, "x", 1, 3, d_sym);
    mb_output(m, "y", 1, 3, d_sym);
    mb_node(m, "Relu", "r", "x", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "input \"x\": dimension 2 is symbolic (\"N\"); only the first (batch) "
                 "dimension may be");

    /* types and versions */
    m = mb_new(13);
    mb_input(m, "x", 11, 2, d_n3);
    mb_output(m, "y", 11, 2, d_n3);
    mb_node(m, "Relu", "r", "x", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT, "input \"x\" has type double");
    m = one_node("Cast", "c", &n);
    mb_attr_int(m, n, "to", 2);
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"c\" (Cast): cast from float to uint8 is not supported");
    m = mb_new(13);
    mb_input(m, "x", 1, 2, d_n3);
    mb_output(m, "y", 2, 2, d_n3);
    mb_node(m, "Relu", "r", "x", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "output \"y\" is declared uint8 but computed as "
                 "float");
    m = mb_new(18);
    mb_input(m, "x", 1, 2, d_n3);
    mb_output(m, "y", 1, 2, d_n3);
    mb_node(m, "Relu", "r", "x", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT, "opset 18 is newer than the onnx backend knows");
}
END_TEST

/* Reshape's target shape must be known at load time: ONNX's own vector, unmodified, and the
 * same with the shape produced by a node. */
START_TEST(test_reshape_runtime_shape)
{
    static const int64_t d[] = {-1, 4}, d2[] = {2};
    const int64_t shape[] = {0, 4};
    mb_t *m = mb_new(13);
    Onnx__NodeProto *n;

    expect_error((char *)ONNX_NODE_DIR "/test_reshape_negative_dim/model.onnx", 0, CMN_EFORMAT,
                 "input \"shape\" has type int64; float, uint8, int8 and int32 are supported "
                 "(int64 only as constants, such as Reshape shapes)");
    mb_input(m, "x", 1, 2, d);
    mb_init(m, "s", 7, 1, d2, shape);
    mb_output(m, "y", 1, 2, d);
    mb_node(m, "Identity", "id", "s", "s2");
    n = mb_node(m, "Reshape", "rs", "x,s2", "y");
    (void)n;
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"rs\" (Reshape): the shape \"s2\" must be a constant int64 vector (it "
                 "is only known at run time)");
}
END_TEST

/* The 3-D U-Net's operators: what the loader refuses (each message names the node and why), a
 * Concat along the batch axis making the model unbatched, and the CUDA engine's refusal. */
START_TEST(test_load_errors_3d)
{
    static const int64_t d_a[] = {-1, 3, 2, 2, 2}, d_b[] = {-1, 3, 2, 2, 3}, d3[] = {3};
    static const int64_t d_w[] = {4, 2, 2, 2, 2}, d_w3[] = {3, 2, 2, 2, 2};
    static const int64_t d_y[] = {-1, 6, 2, 2, 2};
    float v[64] = {0};
    Onnx__NodeProto *n;
    mb_t *m;
    tb_t t;
    char *p;

    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_input(m, "b", 1, 5, d_b);
    mb_output(m, "y", 1, 5, d_y);
    n = mb_node(m, "Concat", "cat", "a,b", "y");
    mb_attr_int(m, n, "axis", 1);
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"cat\" (Concat): input \"b\" has 3 in dim 4 where the first has 2");
    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_output(m, "y", 1, 5, d_y);
    mb_node(m, "Concat", "cat", "a,a", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"cat\" (Concat): the axis attribute is required");

    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_init(m, "s", 1, 1, d4_3d, v);
    mb_init(m, "b", 1, 1, d3, v);
    mb_output(m, "y", 1, 5, d_a);
    mb_node(m, "InstanceNormalization", "in", "a,s,b", "y");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"in\" (InstanceNormalization): scale \"s\" must be a vector of 3");

    /* W [4, 2, 2, 2, 2] needs 4 input channels; a has 3 */
    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_init(m, "w", 1, 5, d_w, v);
    mb_output(m, "y", 1, 5, d_y);
    n = mb_node(m, "ConvTranspose", "up", "a,w", "y");
    mb_attr_ints(m, n, "strides", 3, d2x3);
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"up\" (ConvTranspose): group 1 does not fit 3 input channels and W [4,2]");
    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_init(m, "w", 1, 5, d_w3, v);
    mb_output(m, "y", 1, 5, d_y);
    n = mb_node(m, "ConvTranspose", "up", "a,w", "y");
    mb_attr_str(m, n, "auto_pad", "SAME_LOWER");
    expect_error(mb_write(m), 1, CMN_EFORMAT,
                 "node \"up\" (ConvTranspose): auto_pad \"SAME_LOWER\" is not supported");

    /* Concat on axis 0 joins samples: one whole tensor per batch, and the log says why */
    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_output(m, "y", 1, 5, d_a);
    n = mb_node(m, "Concat", "cat0", "a,a", "y");
    mb_attr_int(m, n, "axis", 0);
    p = mb_write(m);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 8, 1), 0);
    ck_assert_uint_eq(t.info.max_batch, 1);
    ck_assert_uint_eq(t.info.output_size, 2 * 3 * 8 * sizeof(float));
    ck_assert_ptr_nonnull(strstr(tb_log(), "node \"cat0\" (Concat): it concatenates along the "
                                           "batch axis; the model runs one sample per batch"));
    tb_close(&t);
    unlink(p);
    free(p);

    /* the CUDA engine has none of the four yet: its plan building names the node */
    m = mb_new(12);
    mb_input(m, "a", 1, 5, d_a);
    mb_init(m, "s", 1, 1, d3, v);
    mb_init(m, "b", 1, 1, d3, v);
    mb_output(m, "y", 1, 5, d_a);
    mb_node(m, "InstanceNormalization", "in", "a,s,b", "y");
    p = mb_write(m);
    {
        onnx_cuda_program_t *prog;
        onnx_graph_t *g;
        cmn_errbuf_t eb;
        size_t one = 1;
        ck_assert_int_eq(onnx_graph_load(p, &g, &eb), 0);
        ck_assert_int_eq(onnx_cuda_program_build(g, &one, 1, &prog, &eb), CMN_EBACKEND);
        ck_assert_msg(strstr(eb.msg, "node \"in\" (InstanceNormalization): operator not "
                                     "implemented by the CUDA engine"),
                      "%s", eb.msg);
        onnx_graph_free(g);
    }
    unlink(p);
    free(p);
}
END_TEST

TCase *tcase_load_errors(void)
{
    TCase *tc = tcase_create("load_errors");
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_load_errors_3d);
    if (ONNX_NODE_DIR[0])
        tcase_add_test(tc, test_reshape_runtime_shape);
    return tc;
}

static void expect_config_error(const char *model, const char *const *kv, const char *want)
{
    tb_t t;
    tb_open(&t, sut_backend_onnx_ops(), model, kv, 8, 1);
    ck_assert_msg(t.rc == CMN_ECONFIG, "%s: rc %d (%s)", want, t.rc, t.err);
    ck_assert_msg(strstr(t.err, want) != NULL, "message \"%s\" does not contain \"%s\"", t.err,
                  want);
}

START_TEST(test_options)
{
    static const char *const typo[] = {"modle", "x.onnx", NULL};
    static const char *const out_json[] = {"output", "json", NULL};
    static const char *const threads0[] = {"threads", "0", NULL};
    static const char *const threads_x[] = {"threads", "2x", NULL};
    static const char *const batches_bad[] = {"batch_sizes", "1,0", NULL};
    static const char *const batches_big[] = {"batch_sizes", "1,99", NULL};
    static const char *const argmax[] = {"output", "argmax", NULL};
    static const char *const batches[] = {"batch_sizes", "8,1,8", "threads", "1", NULL};
    uint8_t in[2 * 784] = {0};
    uint8_t out[2 * 40];
    sut_batch_t bad;
    sut_sample_t s[2];
    tb_t t;

    expect_config_error(NULL, NULL, "option model=PATH (the .onnx file) is required");
    expect_config_error(FMNIST_MODEL, typo, "unknown option \"modle\"");
    expect_config_error(FMNIST_MODEL, out_json, "output=json: expected raw or argmax");
    expect_config_error(FMNIST_MODEL, threads0, "threads=0: expected a count");
    expect_config_error(FMNIST_MODEL, threads_x, "threads=2x: expected a count");
    expect_config_error(FMNIST_MODEL, batches_bad, "batch_sizes=1,0: expected");
    expect_config_error(FMNIST_MODEL, batches_big, "batch_sizes=1,99: expected");

    /* describe(): raw output */
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), FMNIST_MODEL, batches, 16, 0), 0);
    ck_assert_str_eq(t.info.name, "onnx");
    ck_assert_ptr_nonnull(strstr(t.info.device, "1 of "));
    ck_assert_ptr_nonnull(strstr(t.info.device, "oneDNN 2."));
    ck_assert_uint_eq(t.info.input_size, 784);
    ck_assert_uint_eq(t.info.output_size, 10 * sizeof(float));
    ck_assert_uint_eq(t.info.max_batch, 16);
    ck_assert_uint_eq(t.info.preferred_batch, 16); /* the largest plan: 1, 8 and the max */
    ck_assert_uint_eq(t.info.engines, 1);
    ck_assert(t.info.weight > 0);
    ck_assert_ptr_nonnull(strstr(tb_log(), "3 plans"));

    /* infer() refuses what it cannot run, completing nothing */
    memset(&bad, 0, sizeof(bad));
    s[0].data = in;
    s[0].size = 784;
    s[1].data = in + 700; /* overlapping: not the node's back-to-back batch tensor */
    s[1].size = 784;
    bad.n = 2;
    bad.samples = s;
    bad.input = in;
    bad.input_size = sizeof(in);
    bad.uniform = 1;
    ck_assert_int_eq(t.ops->infer(t.b, &bad), CMN_EFIELD);
    ck_assert_ptr_nonnull(strstr(tb_log(), "sample 1 of the batch has 784 bytes at offset 700"));
    s[1].size = 783;
    s[1].data = in + 784;
    ck_assert_int_eq(t.ops->infer(t.b, &bad), CMN_EFIELD);
    bad.n = 17;
    ck_assert_int_eq(t.ops->infer(t.b, &bad), CMN_EOVERLOAD);
    ck_assert_int_eq(tb_run(&t, in, 2, out, 40), 0);
    tb_close(&t);

    /* argmax: 4 bytes per sample */
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), FMNIST_MODEL, argmax, 4, 1), 0);
    ck_assert_uint_eq(t.info.output_size, 4);
    ck_assert_uint_eq(t.info.preferred_batch, 4);
    ck_assert_ptr_nonnull(strstr(tb_log(), "3 plans")); /* 1, 2, 4 */
    tb_close(&t);
}
END_TEST

/* A model whose first dimension is symbolic but that mixes samples runs one sample per batch,
 * and says why. */
START_TEST(test_unbatchable)
{
    static const int64_t d_out[] = {1, -1};
    Onnx__NodeProto *n;
    tb_t t;
    float in[3] = {1, 2, 3}, out[3];
    mb_t *m = mb_new(13);
    char *p;

    mb_input(m, "x", 1, 2, d_n3);
    mb_output(m, "y", 1, 2, d_out);
    n = mb_node(m, "Flatten", "flat0", "x", "y");
    mb_attr_int(m, n, "axis", 0);
    p = mb_write(m);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 8, 1), 0);
    ck_assert_uint_eq(t.info.max_batch, 1);
    ck_assert_uint_eq(t.info.input_size, 12);
    ck_assert_ptr_nonnull(strstr(tb_log(), "node \"flat0\" (Flatten): axis 0 merges the samples; "
                                           "the model runs one sample per batch"));
    ck_assert_int_eq(tb_run(&t, in, 1, out, sizeof(out)), 0);
    assert_close(out, in, 3, 0, 0, "flatten");
    tb_close(&t);

    /* an output that is a constant does not depend on the batch either */
    m = mb_new(13);
    {
        static const int64_t d3[] = {3};
        mb_input(m, "x", 1, 2, d_n3);
        mb_init(m, "c", 1, 1, d3, in);
        mb_output(m, "y", 1, 2, d_n3);
        mb_output(m, "k", 1, 1, d3);
        mb_node(m, "Relu", "r", "x", "y");
        mb_node(m, "Identity", "id", "c", "k");
    }
    unlink(p);
    free(p);
    p = mb_write(m);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 8, 1), 0);
    ck_assert_uint_eq(t.info.max_batch, 1);
    ck_assert_ptr_nonnull(strstr(tb_log(), "output \"k\": it does not depend on the inputs"));
    tb_close(&t);
    unlink(p);
    free(p);

    /* output=argmax needs one float output */
    m = mb_new(13);
    mb_input(m, "x", 1, 2, d_n3);
    mb_output(m, "y", 1, 2, d_n3);
    mb_output(m, "z", 1, 2, d_n3);
    mb_node(m, "Relu", "r", "x", "y");
    mb_node(m, "Identity", "i", "x", "z");
    {
        static const char *const argmax[] = {"output", "argmax", NULL};
        p = mb_write(m);
        expect_config_error(p, argmax, "output=argmax needs a model with one float output");
        unlink(p);
        free(p);
    }
}
END_TEST

TCase *tcase_options(void)
{
    TCase *tc = tcase_create("options");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_options);
    tcase_add_test(tc, test_unbatchable);
    return tc;
}

/* libsut_backend_onnx.so: loads with dlopen, exports only sut_backend_entry, and computes what
 * the built-in backend computes. */
START_TEST(test_plugin)
{
    void *h = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    sut_backend_entry_fn entry;
    const sut_backend_ops_t *ops;
    uint8_t in[3 * 784];
    float a[3 * 10], b[3 * 10];
    size_t i;
    tb_t t;

    ck_assert_msg(h != NULL, "dlopen %s: %s", PLUGIN_PATH, dlerror());
    entry = (sut_backend_entry_fn)dlsym(h, SUT_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    ck_assert_ptr_null(dlsym(h, "sut_backend_onnx_ops"));
    ck_assert_ptr_null(dlsym(h, "cmn_errf"));
    ops = entry();
    ck_assert_uint_eq(ops->abi_version, SUT_BACKEND_ABI_VERSION);
    ck_assert_uint_eq(ops->struct_size, sizeof(sut_backend_ops_t));
    ck_assert_str_eq(ops->name, "onnx");
    ck_assert_ptr_nonnull(ops->create);
    ck_assert_ptr_nonnull(ops->infer);

    for (i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i * 37 + (i >> 5));
    ck_assert_int_eq(tb_open(&t, ops, FMNIST_MODEL, NULL, 4, 1), 0);
    ck_assert_int_eq(tb_run(&t, in, 3, a, sizeof(float) * 10), 0);
    tb_close(&t);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), FMNIST_MODEL, NULL, 4, 1), 0);
    ck_assert_int_eq(tb_run(&t, in, 3, b, sizeof(float) * 10), 0);
    tb_close(&t);
    assert_close(a, b, 30, 0, 0, "plugin vs built-in");
    dlclose(h);
}
END_TEST

TCase *tcase_plugin(void)
{
    TCase *tc = tcase_create("plugin");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_plugin);
    return tc;
}
