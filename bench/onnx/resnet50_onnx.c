/* resnet50_onnx: writes ResNet-50 v1.5 (torchvision's resnet50 layout: bottlenecks [3, 4, 6, 3],
 * the stride on the 3x3 convolution) as an ONNX model with seeded random weights, without Python.
 *
 *   resnet50_onnx OUT.onnx [--seed N]
 *
 * bench_onnx.py exports torchvision's own model when PyTorch is installed; this is for hosts
 * without it (a CUDA-only GPU machine, deploy/gpu/README.md), where the model is too large to
 * copy in (100 MB of weights). Same graph as the export before folding: Conv without bias, then
 * BatchNormalization and Relu, residual Add, MaxPool, GlobalAveragePool, Flatten, Gemm; opset 13;
 * input "input" float [batch, 3, 224, 224] with a symbolic batch, output "logits" [batch, 1000].
 * Weights are uniform in +-sqrt(6 / fan_in) (He), batch statistics near the identity, so the
 * activations stay finite through the 50 layers; the numbers mean nothing, the timing is real. */
#include "model_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Conv (no bias) -> BatchNormalization -> Relu when |relu|. Returns the output's name. */
static const char *conv_bn(gen_t *g, const char *x, int64_t cin, int64_t cout, int64_t k,
                           int64_t stride, int relu)
{
    const int64_t wd[4] = {cout, cin, k, k}, cd[1] = {cout};
    const int64_t pad = k / 2, pads[4] = {pad, pad, pad, pad}, st[2] = {stride, stride};
    const int64_t ks[2] = {k, k};
    float a = sqrtf(6.0f / (float)(cin * k * k));
    char ins[5 * 64 + 8], nm[4][64];
    Onnx__NodeProto *n;

    /* one statement each: the weights depend on the order the generator is drawn in */
    gen_init(g, "w", 4, wd, -a, a, nm[0]);
    snprintf(ins, sizeof(ins), "%s,%s", x, nm[0]);
    n = gen_node(g, "Conv", ins, "conv");
    mb_attr_ints(g->m, n, "kernel_shape", 2, ks);
    mb_attr_ints(g->m, n, "strides", 2, st);
    mb_attr_ints(g->m, n, "pads", 4, pads);
    gen_init(g, "bn_scale", 1, cd, 0.8f, 1.2f, nm[0]);
    gen_init(g, "bn_bias", 1, cd, -0.1f, 0.1f, nm[1]);
    gen_init(g, "bn_mean", 1, cd, -0.1f, 0.1f, nm[2]);
    gen_init(g, "bn_var", 1, cd, 0.8f, 1.2f, nm[3]);
    snprintf(ins, sizeof(ins), "%s,%s,%s,%s,%s", n->output[0], nm[0], nm[1], nm[2], nm[3]);
    n = gen_node(g, "BatchNormalization", ins, "bn");
    if (relu)
        n = gen_node(g, "Relu", n->output[0], "relu");
    return n->output[0];
}

/* A bottleneck: 1x1 (width), 3x3 (width, the stride), 1x1 (4 x width), plus the shortcut. */
static const char *bottleneck(gen_t *g, const char *x, int64_t cin, int64_t width, int64_t stride)
{
    const char *y, *sc;
    char ins[2 * 64 + 2];
    y = conv_bn(g, x, cin, width, 1, 1, 1);
    y = conv_bn(g, y, width, width, 3, stride, 1);
    y = conv_bn(g, y, width, 4 * width, 1, 1, 0);
    sc = stride != 1 || cin != 4 * width ? conv_bn(g, x, cin, 4 * width, 1, stride, 0) : x;
    snprintf(ins, sizeof(ins), "%s,%s", y, sc);
    return gen_node(g, "Relu", gen_node(g, "Add", ins, "add")->output[0], "relu")->output[0];
}

int main(int argc, char **argv)
{
    static const int blocks[4] = {3, 4, 6, 3};
    const int64_t in_dims[4] = {-1, 3, 224, 224}, out_dims[2] = {-1, 1000};
    const int64_t pk[2] = {3, 3}, ps[2] = {2, 2}, pp[4] = {1, 1, 1, 1};
    const int64_t fw[2] = {1000, 2048}, fb[1] = {1000};
    const float fa = sqrtf(6.0f / 2048.0f);
    char ins[3 * 64 + 3], n1[64], n2[64];
    Onnx__NodeProto *n;
    const char *x;
    gen_t g;
    int64_t cin = 64, width = 64;
    int layer, b, rc;
    size_t len;

    memset(&g, 0, sizeof(g));
    g.rng = 2463534242u;
    g.tool = "resnet50_onnx";
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: resnet50_onnx OUT.onnx [--seed N]\n"
               "Writes ResNet-50 v1.5 (torchvision's layout, opset 13) with seeded random weights\n"
               "as ONNX: input \"input\" float [batch, 3, 224, 224] (602 112 bytes per sample),\n"
               "output \"logits\" [batch, 1000]. For timing only: its answers mean nothing.\n");
        return 0;
    }
    if ((argc != 2 && !(argc == 4 && strcmp(argv[2], "--seed") == 0)) || argv[1][0] == '-') {
        fprintf(stderr, "usage: resnet50_onnx OUT.onnx [--seed N] (see --help)\n");
        return 2;
    }
    if (argc == 4)
        g.rng = gen_seed(strtoul(argv[3], NULL, 10));
    g.m = mb_new(13);
    mb_describe(g.m, "resnet50_v1_5", "resnet50_onnx (mlperf network harness bench)", "batch");
    mb_input(g.m, "input", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, in_dims);
    mb_output(g.m, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, out_dims);

    x = conv_bn(&g, "input", 3, 64, 7, 2, 1);
    n = gen_node(&g, "MaxPool", x, "pool");
    mb_attr_ints(g.m, n, "kernel_shape", 2, pk);
    mb_attr_ints(g.m, n, "strides", 2, ps);
    mb_attr_ints(g.m, n, "pads", 4, pp);
    x = n->output[0];
    for (layer = 0; layer < 4; layer++) {
        for (b = 0; b < blocks[layer]; b++) {
            x = bottleneck(&g, x, cin, width, layer > 0 && b == 0 ? 2 : 1);
            cin = 4 * width;
        }
        width *= 2;
    }
    x = gen_node(&g, "GlobalAveragePool", x, "gap")->output[0];
    n = gen_node(&g, "Flatten", x, "flat");
    mb_attr_int(g.m, n, "axis", 1);
    gen_init(&g, "fc_w", 2, fw, -fa, fa, n1);
    gen_init(&g, "fc_b", 1, fb, -0.01f, 0.01f, n2);
    snprintf(ins, sizeof(ins), "%s,%s,%s", n->output[0], n1, n2);
    n = gen_node_to(&g, "Gemm", ins, "gemm", "logits");
    mb_attr_int(g.m, n, "transB", 1);

    if ((rc = mb_save(g.m, argv[1], &len)) < 0) {
        fprintf(stderr, "resnet50_onnx: %s: %s\n", argv[1], strerror(-rc));
        return 1;
    }
    printf("%s: ResNet-50 v1.5, %zu nodes, %zu initializers, %zu bytes\n", argv[1], g.n_nodes,
           g.n_inits, len);
    return 0;
}
