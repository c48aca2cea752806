/* The ONNX project's own backend node tests (Debian's libonnx-testdata), run through the plugin
 * ABI: create -> describe -> infer -> complete, compared with output_N.pb.
 *
 * Every test vector of every operator the backend implements is listed, with what must happen:
 *   PASS    the model runs as shipped and matches the reference;
 *   BIND    the listed runtime inputs are first turned into initializers (the backend needs
 *           Reshape's target shape at load time; the unmodified model is refused, which
 *           reshape_runtime_shape asserts), then as PASS;
 *   REJECT  create() fails at load with a message that contains |detail| (an attribute variant
 *           or type the backend does not support, named in the message).
 * Batchable models are also run as a batch of three copies of the sample.
 *
 * Each vector runs on an engine: the CPU one (oneDNN, through the ABI), the CUDA engine's plan on
 * the CPU emulator (cuda_emu.h: every machine), or the CUDA engine itself on a GPU (device=cuda
 * through the ABI; test_onnx_cuda only). */
#include "../check_main.h"
#include "cuda_emu.h"
#include "test_onnx.h"
#include "onnx_backend.h"
#include "onnx_cuda_plan.h"
#include "onnx_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { PASS, BIND, REJECT } expect_t;
typedef enum { ENG_CPU, ENG_EMU, ENG_CUDA } node_engine_t;

typedef struct {
    const char *dir;
    expect_t expect;
    /* REJECT: part of the error message; BIND: input indices, "1"; PASS: NULL, or an absolute
     * tolerance other than the default 1e-5 ("1e-4") */
    const char *detail;
} node_case_t;

#define MAX_IO 8

/* The vectors' folder: as CMake found it, or $ONNX_NODE_DIR (a GPU host that got the data
 * package unpacked elsewhere: deploy/gpu/README.md). */
static const char *node_root; /* the node_3d vectors' folder, while they run */

static char *case_path(const char *dir, const char *file)
{
    const char *root = node_root                 ? node_root
                       : getenv("ONNX_NODE_DIR") ? getenv("ONNX_NODE_DIR")
                                                 : ONNX_NODE_DIR;
    size_t len = strlen(root) + strlen(dir) + strlen(file) + 3;
    char *p = malloc(len);
    ck_assert_ptr_nonnull(p);
    snprintf(p, len, "%s/%s/%s", root, dir, file);
    return p;
}

static int read_tensors(const char *dir, const char *kind, onnx_tensor_t *t, int max)
{
    char name[64];
    int n;
    for (n = 0; n < max; n++) {
        char *p;
        cmn_errbuf_t eb;
        int rc;
        snprintf(name, sizeof(name), "test_data_set_0/%s_%d.pb", kind, n);
        p = case_path(dir, name);
        if (access(p, R_OK) != 0) {
            free(p);
            break;
        }
        rc = onnx_tensor_read(p, &t[n], &eb);
        ck_assert_msg(rc == 0, "%s: %s", p, eb.msg);
        free(p);
    }
    return n;
}

/* The model of |dir| with the runtime inputs named in |which| ("1", "0,2") made initializers
 * holding their test data. Returns a temporary file. */
static char *bind_inputs(const char *dir, const char *which)
{
    char *model = case_path(dir, "model.onnx"), *out;
    Onnx__ModelProto *m;
    Onnx__GraphProto *g;
    Onnx__TensorProto **inits, *tps[MAX_IO];
    char *own_names[MAX_IO];
    Onnx__ValueInfoProto **kept;
    size_t len, i, n_kept = 0, n_bound = 0;
    uint8_t *buf = read_all(model, &len), *packed;

    ck_assert_ptr_nonnull(buf);
    m = onnx__model_proto__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(m);
    free(buf);
    g = m->graph;
    kept = calloc(g->n_input, sizeof(*kept));
    inits = calloc(g->n_initializer + g->n_input, sizeof(*inits));
    ck_assert(kept && inits);
    for (i = 0; i < g->n_initializer; i++)
        inits[i] = g->initializer[i];
    for (i = 0; i < g->n_input; i++) {
        char idx[24], name[64], *p;
        snprintf(idx, sizeof(idx), "%zu", i);
        if (!strstr(which, idx)) {
            kept[n_kept++] = g->input[i];
            continue;
        }
        snprintf(name, sizeof(name), "test_data_set_0/input_%zu.pb", i);
        p = case_path(dir, name);
        buf = read_all(p, &len);
        ck_assert_ptr_nonnull(buf);
        tps[n_bound] = onnx__tensor_proto__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(tps[n_bound]);
        free(buf);
        free(p);
        own_names[n_bound] = tps[n_bound]->name;
        tps[n_bound]->name = g->input[i]->name;
        inits[g->n_initializer + n_bound] = tps[n_bound];
        n_bound++;
    }
    {
        /* swap in the new lists just for packing */
        Onnx__ValueInfoProto **old_in = g->input;
        Onnx__TensorProto **old_init = g->initializer;
        size_t old_n_in = g->n_input, old_n_init = g->n_initializer;
        g->input = kept;
        g->n_input = n_kept;
        g->initializer = inits;
        g->n_initializer = old_n_init + n_bound;
        len = onnx__model_proto__get_packed_size(m);
        packed = malloc(len);
        ck_assert_ptr_nonnull(packed);
        onnx__model_proto__pack(m, packed);
        g->input = old_in;
        g->n_input = old_n_in;
        g->initializer = old_init;
        g->n_initializer = old_n_init;
    }
    for (i = 0; i < n_bound; i++) {
        tps[i]->name = own_names[i]; /* the model's was borrowed */
        onnx__tensor_proto__free_unpacked(tps[i], NULL);
    }
    out = tmp_path(".onnx");
    ck_assert_int_eq(write_all(out, packed, len), 0);
    free(packed);
    free(kept);
    free(inits);
    onnx__model_proto__free_unpacked(m, NULL);
    free(model);
    return out;
}

static void compare(const onnx_tensor_t *want, const uint8_t *got, float atol, const char *what)
{
    if (want->dtype == ONNX_DT_FLOAT)
        /* the tolerance of ONNX's own backend test runner (rtol 1e-3), atol for float noise */
        assert_close((const float *)(const void *)got /* malloc-aligned */, want->data,
                     want->size / 4, atol > 0 ? atol : 1e-5f, 1e-3f, what);
    else
        ck_assert_msg(memcmp(got, want->data, want->size) == 0, "%s differs", what);
}

/* One engine opened on one model, for the vectors. */
typedef struct {
    node_engine_t engine;
    tb_t t;          /* ENG_CPU, ENG_CUDA: the backend */
    onnx_graph_t *g; /* ENG_EMU: the graph and its CUDA plans */
    onnx_cuda_program_t *prog;
    size_t input_size, output_size;
    uint32_t max_batch;
    int rc;
    char err[1024];
} eng_t;

static void eng_open(eng_t *e, node_engine_t engine, const char *model)
{
    static const char *const cuda_kv[] = {"device", "cuda", NULL};
    memset(e, 0, sizeof(*e));
    e->engine = engine;
    if (engine == ENG_EMU) {
        /* as the backend does for device=cuda with a max batch of 4 */
        static const size_t batches[] = {1, 2, 4};
        cmn_errbuf_t eb;
        eb.msg[0] = '\0';
        e->rc = onnx_graph_load(model, &e->g, &eb);
        if (e->rc == 0)
            e->rc = onnx_cuda_program_build(e->g, batches, e->g->batched ? 3 : 1, &e->prog, &eb);
        snprintf(e->err, sizeof(e->err), "%s", eb.msg);
        if (e->rc < 0) {
            onnx_graph_free(e->g);
            e->g = NULL;
            return;
        }
        cuda_emu_check_plans(e->prog);
        e->input_size = e->g->input_size;
        e->output_size = e->g->output_size;
        e->max_batch = e->g->batched ? 4 : 1;
        return;
    }
    tb_open(&e->t, sut_backend_onnx_ops(), model, engine == ENG_CUDA ? cuda_kv : NULL, 4, 1);
    e->rc = e->t.rc;
    snprintf(e->err, sizeof(e->err), "%s", e->t.err);
    e->input_size = e->t.info.input_size;
    e->output_size = e->t.info.output_size;
    e->max_batch = e->t.info.max_batch;
}

static int eng_run(eng_t *e, const void *input, size_t n, void *out, size_t out_stride)
{
    if (e->engine != ENG_EMU)
        return tb_run(&e->t, input, n, out, out_stride);
    ck_assert_uint_eq(out_stride, e->output_size);
    cuda_emu_run(e->prog, n, input, out);
    return 0;
}

static void eng_close(eng_t *e)
{
    if (e->engine != ENG_EMU) {
        tb_close(&e->t);
        return;
    }
    onnx_cuda_program_free(e->prog);
    onnx_graph_free(e->g);
}

static void run_case_on(const node_case_t *c, node_engine_t engine)
{
    onnx_tensor_t in[MAX_IO], out[MAX_IO];
    int n_in, n_out, i, skip = 0;
    size_t in_size = 0, out_size = 0, off, k;
    char *model;
    uint8_t *sample, *result;
    eng_t t;

    if (c->expect == REJECT) {
        model = case_path(c->dir, "model.onnx");
        eng_open(&t, engine, model);
        ck_assert_msg(t.rc < 0, "%s: loaded, but should be refused (%s)", c->dir, c->detail);
        ck_assert_msg(strstr(t.err, c->detail) != NULL, "%s: error \"%s\" does not mention \"%s\"",
                      c->dir, t.err, c->detail);
        free(model);
        return;
    }
    model = c->expect == BIND ? bind_inputs(c->dir, c->detail) : case_path(c->dir, "model.onnx");
    n_in = read_tensors(c->dir, "input", in, MAX_IO);
    n_out = read_tensors(c->dir, "output", out, MAX_IO);
    ck_assert_int_gt(n_out, 0);
    eng_open(&t, engine, model);
    ck_assert_msg(t.rc == 0, "%s: %s", c->dir, t.err);

    for (i = 0; i < n_in; i++) {
        char idx[24];
        snprintf(idx, sizeof(idx), "%d", i);
        if (c->expect == BIND && strstr(c->detail, idx))
            continue;
        in_size += in[i].size;
    }
    for (i = 0; i < n_out; i++)
        out_size += out[i].size;
    ck_assert_uint_eq(t.input_size, in_size);
    ck_assert_uint_eq(t.output_size, out_size);

    /* a batch of one, then (when the model has a batch axis) three copies */
    sample = malloc(3 * in_size + 1);
    result = malloc(3 * out_size + 1);
    ck_assert(sample && result);
    for (off = 0, i = 0; i < n_in; i++) {
        char idx[24];
        snprintf(idx, sizeof(idx), "%d", i);
        if (c->expect == BIND && strstr(c->detail, idx))
            continue;
        memcpy(sample + off, in[i].data, in[i].size);
        off += in[i].size;
    }
    for (k = 1; k < 3; k++)
        memcpy(sample + k * in_size, sample, in_size);
    for (k = 1; k <= 3; k += 2) {
        if (k > t.max_batch) {
            skip = 1;
            break;
        }
        ck_assert_int_eq(eng_run(&t, sample, k, result, out_size), 0);
        for (off = 0, i = 0; i < n_out; i++) {
            size_t s;
            for (s = 0; s < k; s++) {
                char what[160];
                snprintf(what, sizeof(what), "%s output %d sample %zu of %zu", c->dir, i, s, k);
                compare(&out[i], result + s * out_size + off,
                        c->expect == PASS && c->detail ? strtof(c->detail, NULL) : 0.0f, what);
            }
            off += out[i].size;
        }
    }
    (void)skip;
    eng_close(&t);
    for (i = 0; i < n_in; i++)
        free(in[i].data);
    for (i = 0; i < n_out; i++)
        free(out[i].data);
    free(sample);
    free(result);
    if (c->expect == BIND)
        unlink(model);
    free(model);
}

#define NODE_TCASE(op, table)                                                                \
    START_TEST(test_node_##op)                                                               \
    {                                                                                        \
        run_case_on(&table[_i], ENG_CPU);                                                    \
    }                                                                                        \
    END_TEST                                                                                 \
    TCase *tcase_node_##op(void)                                                             \
    {                                                                                        \
        TCase *tc = tcase_create("node_" #op);                                               \
        tcase_set_timeout(tc, 60);                                                           \
        tcase_add_loop_test(tc, test_node_##op, 0, (int)(sizeof(table) / sizeof(table[0]))); \
        return tc;                                                                           \
    }

static const node_case_t conv_cases[] = {
    {"test_basic_conv_with_padding", PASS, NULL},
    {"test_basic_conv_without_padding", PASS, NULL},
    {"test_conv_with_autopad_same", PASS, NULL},
    {"test_conv_with_strides_and_asymmetric_padding", PASS, NULL},
    {"test_conv_with_strides_no_padding", PASS, NULL},
    {"test_conv_with_strides_padding", PASS, NULL},
};
NODE_TCASE(conv, conv_cases)

static const node_case_t relu_cases[] = {
    {"test_relu", PASS, NULL},
};
NODE_TCASE(relu, relu_cases)

static const node_case_t maxpool_cases[] = {
    {"test_maxpool_1d_default", PASS, NULL},
    {"test_maxpool_2d_ceil", PASS, NULL},
    {"test_maxpool_2d_default", PASS, NULL},
    {"test_maxpool_2d_dilations", PASS, NULL},
    {"test_maxpool_2d_pads", PASS, NULL},
    {"test_maxpool_2d_precomputed_pads", PASS, NULL},
    {"test_maxpool_2d_precomputed_same_upper", PASS, NULL},
    {"test_maxpool_2d_precomputed_strides", PASS, NULL},
    {"test_maxpool_2d_same_lower", PASS, NULL},
    {"test_maxpool_2d_same_upper", PASS, NULL},
    {"test_maxpool_2d_strides", PASS, NULL},
    {"test_maxpool_2d_uint8", PASS, NULL},
    {"test_maxpool_3d_default", PASS, NULL},
    /* the second output (argmax indices) is a training-time feature */
    {"test_maxpool_with_argmax_2d_precomputed_pads", REJECT, "Indices output is not supported"},
    {"test_maxpool_with_argmax_2d_precomputed_strides", REJECT, "Indices output is not supported"},
};
NODE_TCASE(maxpool, maxpool_cases)

static const node_case_t averagepool_cases[] = {
    {"test_averagepool_1d_default", PASS, NULL},
    {"test_averagepool_2d_ceil", PASS, NULL},
    {"test_averagepool_2d_default", PASS, NULL},
    {"test_averagepool_2d_pads", PASS, NULL},
    {"test_averagepool_2d_pads_count_include_pad", PASS, NULL},
    {"test_averagepool_2d_precomputed_pads", PASS, NULL},
    {"test_averagepool_2d_precomputed_pads_count_include_pad", PASS, NULL},
    {"test_averagepool_2d_precomputed_same_upper", PASS, NULL},
    {"test_averagepool_2d_precomputed_strides", PASS, NULL},
    {"test_averagepool_2d_same_lower", PASS, NULL},
    {"test_averagepool_2d_same_upper", PASS, NULL},
    {"test_averagepool_2d_strides", PASS, NULL},
    {"test_averagepool_3d_default", PASS, NULL},
};
NODE_TCASE(averagepool, averagepool_cases)

static const node_case_t globalaveragepool_cases[] = {
    {"test_globalaveragepool", PASS, NULL},
    {"test_globalaveragepool_precomputed", PASS, NULL},
};
NODE_TCASE(globalaveragepool, globalaveragepool_cases)

static const node_case_t batchnorm_cases[] = {
    {"test_batchnorm_epsilon", PASS, NULL},
    {"test_batchnorm_example", PASS, NULL},
    /* training mode updates running statistics: an inference backend has none */
    {"test_batchnorm_epsilon_training_mode", REJECT, "training mode is not supported"},
    {"test_batchnorm_example_training_mode", REJECT, "training mode is not supported"},
};
NODE_TCASE(batchnorm, batchnorm_cases)

/* Add, Sub, Mul, Div. Integer arithmetic is refused: ONNX wraps around (and Div truncates)
 * where oneDNN saturates and rounds. */
static const node_case_t elementwise_cases[] = {
    {"test_add", PASS, NULL},
    {"test_add_bcast", PASS, NULL},
    {"test_add_uint8", REJECT, "uint8 arithmetic is not supported"},
    {"test_sub", PASS, NULL},
    {"test_sub_bcast", PASS, NULL},
    {"test_sub_example", PASS, NULL},
    {"test_sub_uint8", REJECT, "uint8 arithmetic is not supported"},
    {"test_mul", PASS, NULL},
    {"test_mul_bcast", PASS, NULL},
    {"test_mul_example", PASS, NULL},
    {"test_mul_uint8", REJECT, "uint8 arithmetic is not supported"},
    {"test_div", PASS, NULL},
    {"test_div_bcast", PASS, NULL},
    {"test_div_example", PASS, NULL},
    {"test_div_uint8", REJECT, "uint8 arithmetic is not supported"},
};
NODE_TCASE(elementwise, elementwise_cases)

static const node_case_t gemm_cases[] = {
    {"test_gemm_all_attributes", PASS, NULL},
    {"test_gemm_alpha", PASS, NULL},
    {"test_gemm_beta", PASS, NULL},
    {"test_gemm_default_matrix_bias", PASS, NULL},
    {"test_gemm_default_no_bias", PASS, NULL},
    {"test_gemm_default_scalar_bias", PASS, NULL},
    {"test_gemm_default_single_elem_vector_bias", PASS, NULL},
    {"test_gemm_default_vector_bias", PASS, NULL},
    {"test_gemm_default_zero_bias", PASS, NULL},
    {"test_gemm_transposeA", PASS, NULL},
    {"test_gemm_transposeB", PASS, NULL},
};
NODE_TCASE(gemm, gemm_cases)

static const node_case_t matmul_cases[] = {
    {"test_matmul_2d", PASS, NULL},
    {"test_matmul_3d", PASS, NULL},
    {"test_matmul_4d", PASS, NULL},
};
NODE_TCASE(matmul, matmul_cases)

static const node_case_t flatten_cases[] = {
    {"test_flatten_axis0", PASS, NULL},          {"test_flatten_axis1", PASS, NULL},
    {"test_flatten_axis2", PASS, NULL},          {"test_flatten_axis3", PASS, NULL},
    {"test_flatten_default_axis", PASS, NULL},   {"test_flatten_negative_axis1", PASS, NULL},
    {"test_flatten_negative_axis2", PASS, NULL}, {"test_flatten_negative_axis3", PASS, NULL},
    {"test_flatten_negative_axis4", PASS, NULL},
};
NODE_TCASE(flatten, flatten_cases)

/* The target shape is a runtime input in these models; the backend needs it at load time. */
static const node_case_t reshape_cases[] = {
    {"test_reshape_extended_dims", BIND, "1"},
    {"test_reshape_negative_dim", BIND, "1"},
    {"test_reshape_negative_extended_dims", BIND, "1"},
    {"test_reshape_one_dim", BIND, "1"},
    {"test_reshape_reduced_dims", BIND, "1"},
    {"test_reshape_reordered_all_dims", BIND, "1"},
    {"test_reshape_reordered_last_dims", BIND, "1"},
    {"test_reshape_zero_and_negative_dim", BIND, "1"},
    {"test_reshape_zero_dim", BIND, "1"},
    /* an input with a 0-sized dimension (allowzero): empty tensors are not supported */
    {"test_reshape_allowzero_reordered", REJECT, "empty tensors are not supported"},
};
NODE_TCASE(reshape, reshape_cases)

/* The *_expanded variants spell Softmax with ReduceMax, Exp, ReduceSum: not implemented. */
static const node_case_t softmax_cases[] = {
    {"test_softmax_axis_0", PASS, NULL},
    {"test_softmax_axis_1", PASS, NULL},
    {"test_softmax_axis_2", PASS, NULL},
    {"test_softmax_default_axis", PASS, NULL},
    {"test_softmax_example", PASS, NULL},
    {"test_softmax_large_number", PASS, NULL},
    {"test_softmax_negative_axis", PASS, NULL},
    {"test_softmax_axis_0_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_axis_1_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_axis_2_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_default_axis_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_example_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_large_number_expanded", REJECT, "(ReduceMax): operator not supported"},
    {"test_softmax_negative_axis_expanded", REJECT, "(ReduceMax): operator not supported"},
};
NODE_TCASE(softmax, softmax_cases)

static const node_case_t identity_cases[] = {
    {"test_identity", PASS, NULL},
    /* optional and sequence values are not tensors */
    {"test_identity_opt", REJECT, "is not a tensor"},
    {"test_identity_sequence", REJECT, "is not a tensor"},
};
NODE_TCASE(identity, identity_cases)

static const node_case_t constant_cases[] = {
    {"test_constant", PASS, NULL},
};
NODE_TCASE(constant, constant_cases)

/* Every Cast vector involves float16, bfloat16, double or string, which the backend does not
 * carry; its own casts (uint8/int8 to float, exact integer widening) are tested in test_load.c. */
static const node_case_t cast_cases[] = {
    {"test_cast_BFLOAT16_to_FLOAT", REJECT, "has type bfloat16"},
    {"test_cast_DOUBLE_to_FLOAT", REJECT, "has type double"},
    {"test_cast_DOUBLE_to_FLOAT16", REJECT, "has type double"},
    {"test_cast_FLOAT16_to_DOUBLE", REJECT, "has type float16"},
    {"test_cast_FLOAT16_to_FLOAT", REJECT, "has type float16"},
    {"test_cast_FLOAT_to_BFLOAT16", REJECT, "cast from float to bfloat16 is not supported"},
    {"test_cast_FLOAT_to_DOUBLE", REJECT, "cast from float to double is not supported"},
    {"test_cast_FLOAT_to_FLOAT16", REJECT, "cast from float to float16 is not supported"},
    {"test_cast_FLOAT_to_STRING", REJECT, "cast from float to string is not supported"},
    {"test_cast_STRING_to_FLOAT", REJECT, "has type string"},
};
NODE_TCASE(cast, cast_cases)

/* The 3-D U-Net's operators. The CUDA engine does not have them (all_tables leaves them out). */
static const node_case_t convtranspose_cases[] = {
    {"test_convtranspose", PASS, NULL},
    {"test_convtranspose_1d", PASS, NULL},
    {"test_convtranspose_3d", PASS, NULL},
    {"test_convtranspose_dilations", PASS, NULL},
    {"test_convtranspose_kernel_shape", PASS, NULL},
    {"test_convtranspose_output_shape", PASS, NULL},
    {"test_convtranspose_pad", PASS, NULL},
    {"test_convtranspose_pads", PASS, NULL},
    {"test_convtranspose_with_kernel", PASS, NULL},
    {"test_convtranspose_autopad_same", REJECT, "auto_pad \"SAME_UPPER\" is not supported"},
};
NODE_TCASE(convtranspose, convtranspose_cases)

static const node_case_t instancenorm_cases[] = {
    {"test_instancenorm_epsilon", PASS, NULL},
    {"test_instancenorm_example", PASS, NULL},
};
NODE_TCASE(instancenorm, instancenorm_cases)

static const node_case_t leakyrelu_cases[] = {
    {"test_leakyrelu", PASS, NULL},
    {"test_leakyrelu_default", PASS, NULL},
    {"test_leakyrelu_example", PASS, NULL},
};
NODE_TCASE(leakyrelu, leakyrelu_cases)

static const node_case_t concat_cases[] = {
    {"test_concat_1d_axis_0", PASS, NULL},          {"test_concat_1d_axis_negative_1", PASS, NULL},
    {"test_concat_2d_axis_0", PASS, NULL},          {"test_concat_2d_axis_1", PASS, NULL},
    {"test_concat_2d_axis_negative_1", PASS, NULL}, {"test_concat_2d_axis_negative_2", PASS, NULL},
    {"test_concat_3d_axis_0", PASS, NULL},          {"test_concat_3d_axis_1", PASS, NULL},
    {"test_concat_3d_axis_2", PASS, NULL},          {"test_concat_3d_axis_negative_1", PASS, NULL},
    {"test_concat_3d_axis_negative_2", PASS, NULL}, {"test_concat_3d_axis_negative_3", PASS, NULL},
};
NODE_TCASE(concat, concat_cases)

/* The 3-D vectors that gen_vectors_3d.py writes into $ONNX_3D_DIR (a CTest fixture): expected
 * outputs from numpy straight from the operator definitions, and the whole --small 3D-UNet of
 * bench/onnx/unet3d_onnx. */
static const node_case_t node3d_cases[] = {
    {"conv3d_bias_pads", PASS, NULL},
    {"conv3d_stride2", PASS, NULL},
    {"conv3d_group_dilation_asym_pads", PASS, NULL},
    {"convtranspose3d_stride2_bias", PASS, NULL},
    {"convtranspose3d_pads_output_padding_group", PASS, NULL},
    {"instancenorm3d", PASS, NULL},
    {"instancenorm3d_runtime_scale", PASS, NULL},
    {"leakyrelu3d", PASS, NULL},
    {"concat3d_axis1", PASS, NULL},
    {"concat3d_axis_last", PASS, NULL},
    {"conv_instancenorm_relu3d_c32", PASS, NULL},
    {"conv_instancenorm_relu3d_c20", PASS, NULL},
    {"unet_up_block3d", PASS, NULL},
    /* 40 layers, logits up to 9: float32 sums in another order (the thread count changes it)
     * differ from numpy's float64 by up to 2e-5 near zero */
    {"unet3d_small", PASS, "1e-4"},
};

static void root_3d(void)
{
    node_root = getenv("ONNX_3D_DIR");
    ck_assert_msg(node_root != NULL, "ONNX_3D_DIR is not set (gen_vectors_3d.py writes it)");
}

static void root_default(void)
{
    node_root = NULL;
}

START_TEST(test_node_3d)
{
    run_case_on(&node3d_cases[_i], ENG_CPU);
}
END_TEST

TCase *tcase_node_3d(void)
{
    TCase *tc = tcase_create("node_3d");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, root_3d, root_default);
    tcase_add_loop_test(tc, test_node_3d, 0, (int)(sizeof(node3d_cases) / sizeof(node3d_cases[0])));
    return tc;
}

/* ---- every vector on the CUDA engine: its plans emulated on the CPU, or a real GPU ---- */

#define N_OF(t) (sizeof(t) / sizeof(t[0]))
static const struct {
    const node_case_t *cases;
    size_t n;
} all_tables[] = {
    {conv_cases, N_OF(conv_cases)},
    {relu_cases, N_OF(relu_cases)},
    {maxpool_cases, N_OF(maxpool_cases)},
    {averagepool_cases, N_OF(averagepool_cases)},
    {globalaveragepool_cases, N_OF(globalaveragepool_cases)},
    {batchnorm_cases, N_OF(batchnorm_cases)},
    {elementwise_cases, N_OF(elementwise_cases)},
    {gemm_cases, N_OF(gemm_cases)},
    {matmul_cases, N_OF(matmul_cases)},
    {flatten_cases, N_OF(flatten_cases)},
    {reshape_cases, N_OF(reshape_cases)},
    {softmax_cases, N_OF(softmax_cases)},
    {identity_cases, N_OF(identity_cases)},
    {constant_cases, N_OF(constant_cases)},
    {cast_cases, N_OF(cast_cases)},
};

static size_t all_cases(void)
{
    size_t i, n = 0;
    for (i = 0; i < sizeof(all_tables) / sizeof(all_tables[0]); i++)
        n += all_tables[i].n;
    return n;
}

static const node_case_t *nth_case(size_t k)
{
    size_t i;
    for (i = 0; i < sizeof(all_tables) / sizeof(all_tables[0]); i++) {
        if (k < all_tables[i].n)
            return &all_tables[i].cases[k];
        k -= all_tables[i].n;
    }
    return NULL;
}

static node_engine_t loop_engine; /* set by the TCase's fixture */

static void engine_emu(void)
{
    loop_engine = ENG_EMU;
}

static void engine_cuda(void)
{
    loop_engine = ENG_CUDA;
}

START_TEST(test_engine_nodes)
{
    run_case_on(nth_case((size_t)_i), loop_engine);
}
END_TEST

TCase *tcase_cuda_plan_nodes(void)
{
    TCase *tc = tcase_create("cuda_plan_nodes");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, engine_emu, NULL);
    tcase_add_loop_test(tc, test_engine_nodes, 0, (int)all_cases());
    return tc;
}

TCase *tcase_cuda_nodes(void)
{
    TCase *tc = tcase_create("cuda_nodes");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, engine_cuda, NULL);
    tcase_add_loop_test(tc, test_engine_nodes, 0, (int)all_cases());
    return tc;
}
