/* unet3d_onnx: writes MLCommons' 3D-UNet for KiTS19 (the network of MLPerf Inference's 3d-unet-99
 * and 3d-unet-99.9, MLCommons training's image_segmentation Unet3D) as an ONNX model with seeded
 * random weights, without Python.
 *
 *   unet3d_onnx OUT.onnx [--small] [--patch N] [--filters A,B,C,D,E] [--seed N]
 *
 * The graph is what the reference's unet_pytorch_to_onnx.py exports (opset 12): an input block
 * and four downsampling blocks, a bottleneck, five upsampling blocks and a 1x1x1 output Conv.
 * Each block is two Conv 3x3x3 (no bias, pads 1; the first of a downsampling block has stride 2)
 * each followed by InstanceNormalization (affine, epsilon 1e-5) and Relu; an upsampling block
 * starts with ConvTranspose 2x2x2 stride 2 (with bias) and a Concat of its output and the
 * encoder's skip on the channels. Filters 32, 64, 128, 256, 320; input "input" float
 * [batch, 1, N, N, N] with a symbolic batch, output "output" float [batch, 3, N, N, N] (logits of
 * background, kidney, tumour); N = 128, the reference's patch. --small writes the variant for
 * tests: filters 4, 8, 16, 32, 32 and N = 32 (--patch and --filters change either).
 * Weights are uniform in +-sqrt(6 / fan_in), InstanceNormalization's scale near 1 and its bias
 * near 0: the numbers mean nothing, the timing is real. */
#include "model_gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVELS 5
#define MAX_PATCH 1024

/* Conv 3x3x3 (no bias, pads 1, |stride|) -> InstanceNormalization -> Relu. */
static const char *conv_block(gen_t *g, const char *x, int64_t cin, int64_t cout, int64_t stride)
{
    const int64_t wd[5] = {cout, cin, 3, 3, 3}, cd[1] = {cout}, ks[3] = {3, 3, 3};
    const int64_t pads[6] = {1, 1, 1, 1, 1, 1}, st[3] = {stride, stride, stride};
    float a = sqrtf(6.0f / (float)(cin * 27));
    char ins[3 * 64 + 4], nm[2][64];
    Onnx__NodeProto *n;

    gen_init(g, "w", 5, wd, -a, a, nm[0]);
    snprintf(ins, sizeof(ins), "%s,%s", x, nm[0]);
    n = gen_node(g, "Conv", ins, "conv");
    mb_attr_ints(g->m, n, "kernel_shape", 3, ks);
    mb_attr_ints(g->m, n, "strides", 3, st);
    mb_attr_ints(g->m, n, "pads", 6, pads);
    gen_init(g, "in_scale", 1, cd, 0.8f, 1.2f, nm[0]);
    gen_init(g, "in_bias", 1, cd, -0.1f, 0.1f, nm[1]);
    snprintf(ins, sizeof(ins), "%s,%s,%s", n->output[0], nm[0], nm[1]);
    n = gen_node(g, "InstanceNormalization", ins, "in");
    mb_attr_float(g->m, n, "epsilon", 1e-5f);
    return gen_node(g, "Relu", n->output[0], "relu")->output[0];
}

/* ConvTranspose 2x2x2 stride 2 with bias, Concat with |skip|, two conv blocks. */
static const char *up_block(gen_t *g, const char *x, const char *skip, int64_t cin, int64_t cout)
{
    const int64_t wd[5] = {cin, cout, 2, 2, 2}, bd[1] = {cout}, ks[3] = {2, 2, 2};
    const int64_t st[3] = {2, 2, 2};
    float a = sqrtf(6.0f / (float)(cin * 8));
    char ins[3 * 64 + 4], nm[2][64];
    Onnx__NodeProto *n;

    gen_init(g, "up_w", 5, wd, -a, a, nm[0]);
    gen_init(g, "up_b", 1, bd, -0.1f, 0.1f, nm[1]);
    snprintf(ins, sizeof(ins), "%s,%s,%s", x, nm[0], nm[1]);
    n = gen_node(g, "ConvTranspose", ins, "up");
    mb_attr_ints(g->m, n, "kernel_shape", 3, ks);
    mb_attr_ints(g->m, n, "strides", 3, st);
    snprintf(ins, sizeof(ins), "%s,%s", n->output[0], skip);
    n = gen_node(g, "Concat", ins, "cat");
    mb_attr_int(g->m, n, "axis", 1);
    x = conv_block(g, n->output[0], 2 * cout, cout, 1);
    return conv_block(g, x, cout, cout, 1);
}

static int parse_filters(const char *s, int64_t *f)
{
    char *end;
    int i;
    for (i = 0; i < LEVELS; i++) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || (i < LEVELS - 1 ? *end != ',' : *end != '\0'))
            return -1;
        f[i] = v;
        s = end + 1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: unet3d_onnx OUT.onnx [--small] [--patch N] [--filters A,B,C,D,E] "
                    "[--seed N] (see --help)\n");
    return 2;
}

int main(int argc, char **argv)
{
    int64_t f[LEVELS] = {32, 64, 128, 256, 320}, patch = 128, dims[5] = {-1, 1, 0, 0, 0};
    int64_t out_dims[5] = {-1, 3, 0, 0, 0}, ow[5], ob[1] = {3};
    const char *skips[LEVELS], *x, *out = NULL;
    int small = 0, patch_set = 0, filters_set = 0, i, rc;
    char ins[3 * 64 + 4], nm[2][64];
    size_t len;
    float a;
    gen_t g;

    memset(&g, 0, sizeof(g));
    g.rng = 2463534242u;
    g.tool = "unet3d_onnx";
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf(
                "usage: unet3d_onnx OUT.onnx [--small] [--patch N] [--filters A,B,C,D,E] "
                "[--seed N]\n"
                "Writes MLCommons' 3D-UNet for KiTS19 (opset 12, as the reference exports it)\n"
                "with seeded random weights as ONNX: input \"input\" float [batch, 1, N, N, N],\n"
                "output \"output\" float [batch, 3, N, N, N] (logits). Defaults: filters\n"
                "32,64,128,256,320 and N = 128 (the reference's patch); --small: filters\n"
                "4,8,16,32,32 and N = 32. N must be a multiple of 32. For timing and pipeline\n"
                "tests only: its answers mean nothing.\n");
            return 0;
        } else if (strcmp(argv[i], "--small") == 0) {
            small = 1;
        } else if (strcmp(argv[i], "--patch") == 0 && i + 1 < argc) {
            char *end;
            patch = strtoll(argv[++i], &end, 10);
            if (*end || patch < 32 || patch > MAX_PATCH || patch % 32) {
                fprintf(stderr,
                        "unet3d_onnx: --patch %s: must be a multiple of 32 from 32 to %d "
                        "(five stride-2 levels)\n",
                        argv[i], MAX_PATCH);
                return 2;
            }
            patch_set = 1;
        } else if (strcmp(argv[i], "--filters") == 0 && i + 1 < argc) {
            if (parse_filters(argv[++i], f) < 0) {
                fprintf(stderr,
                        "unet3d_onnx: --filters %s: five counts from 1 to 4096, "
                        "comma-separated\n",
                        argv[i]);
                return 2;
            }
            filters_set = 1;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            g.rng = gen_seed(strtoul(argv[++i], NULL, 10));
        } else if (argv[i][0] != '-' && !out) {
            out = argv[i];
        } else {
            return usage();
        }
    }
    if (!out)
        return usage();
    if (small && !patch_set)
        patch = 32;
    if (small && !filters_set) {
        static const int64_t sf[LEVELS] = {4, 8, 16, 32, 32};
        memcpy(f, sf, sizeof(f));
    }
    for (i = 2; i < 5; i++)
        dims[i] = out_dims[i] = patch;

    g.m = mb_new(12);
    mb_describe(g.m, "unet3d_kits19", "unet3d_onnx (mlperf network harness bench)", "batch");
    mb_input(g.m, "input", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 5, dims);
    mb_output(g.m, "output", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 5, out_dims);

    x = conv_block(&g, "input", 1, f[0], 1);
    x = conv_block(&g, x, f[0], f[0], 1);
    skips[0] = x;
    for (i = 1; i < LEVELS; i++) {
        x = conv_block(&g, x, f[i - 1], f[i], 2);
        x = conv_block(&g, x, f[i], f[i], 1);
        skips[i] = x;
    }
    x = conv_block(&g, x, f[LEVELS - 1], f[LEVELS - 1], 2); /* the bottleneck */
    x = conv_block(&g, x, f[LEVELS - 1], f[LEVELS - 1], 1);
    x = up_block(&g, x, skips[LEVELS - 1], f[LEVELS - 1], f[LEVELS - 1]);
    for (i = LEVELS - 1; i > 0; i--)
        x = up_block(&g, x, skips[i - 1], f[i], f[i - 1]);

    ow[0] = 3;
    ow[1] = f[0];
    ow[2] = ow[3] = ow[4] = 1;
    a = sqrtf(6.0f / (float)f[0]);
    gen_init(&g, "out_w", 5, ow, -a, a, nm[0]);
    gen_init(&g, "out_b", 1, ob, -0.1f, 0.1f, nm[1]);
    snprintf(ins, sizeof(ins), "%s,%s,%s", x, nm[0], nm[1]);
    {
        const int64_t ks[3] = {1, 1, 1};
        Onnx__NodeProto *n = gen_node_to(&g, "Conv", ins, "conv", "output");
        mb_attr_ints(g.m, n, "kernel_shape", 3, ks);
    }

    if ((rc = mb_save(g.m, out, &len)) < 0) {
        fprintf(stderr, "unet3d_onnx: %s: %s\n", out, strerror(-rc));
        return 1;
    }
    printf("%s: 3D-UNet (filters %lld,%lld,%lld,%lld,%lld), patch %lld^3, %zu nodes, %zu "
           "initializers, %zu bytes; %lld bytes in and %lld out per sample\n",
           out, (long long)f[0], (long long)f[1], (long long)f[2], (long long)f[3], (long long)f[4],
           (long long)patch, g.n_nodes, g.n_inits, len, (long long)(patch * patch * patch * 4),
           (long long)(3 * patch * patch * patch * 4));
    return 0;
}
