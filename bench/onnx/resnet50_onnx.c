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
#include "onnx/onnx.pb-c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    void **allocs;
    size_t n_allocs, cap_allocs;
    uint32_t rng;
    int seq;
} gen_t;

static void die(const char *what)
{
    fprintf(stderr, "resnet50_onnx: %s\n", what);
    exit(1);
}

static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 64;
    p = realloc(p, *cap * elem);
    if (!p)
        die("out of memory");
    return p;
}

/* Memory that lives until the model is written. */
static void *keep(gen_t *g, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        die("out of memory");
    g->allocs = grow(g->allocs, &g->cap_allocs, g->n_allocs, sizeof(void *));
    g->allocs[g->n_allocs++] = p;
    return p;
}

static char *str(gen_t *g, const char *s)
{
    char *p = keep(g, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

static char *fresh(gen_t *g, const char *prefix)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s_%d", prefix, g->seq++);
    return str(g, buf);
}

static float uniform(gen_t *g, float lo, float hi)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 17;
    g->rng ^= g->rng << 5;
    return lo + (hi - lo) * (float)(g->rng >> 8) / 16777216.0f;
}

static const char *init(gen_t *g, const char *prefix, int rank, const int64_t *dims, float lo,
                        float hi)
{
    static const Onnx__TensorProto t_init = ONNX__TENSOR_PROTO__INIT;
    Onnx__TensorProto *t = keep(g, sizeof(*t));
    size_t n = 1, i;
    float *data;
    int k;
    *t = t_init;
    t->name = fresh(g, prefix);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = keep(g, (size_t)rank * sizeof(int64_t));
    for (k = 0; k < rank; k++) {
        t->dims[k] = dims[k];
        n *= (size_t)dims[k];
    }
    data = keep(g, n * sizeof(float));
    for (i = 0; i < n; i++)
        data[i] = uniform(g, lo, hi);
    t->has_raw_data = 1;
    t->raw_data.len = n * sizeof(float);
    t->raw_data.data = (uint8_t *)data;
    g->inits = grow(g->inits, &g->cap_inits, g->n_inits, sizeof(*g->inits));
    g->inits[g->n_inits++] = t;
    return t->name;
}

static Onnx__NodeProto *node(gen_t *g, const char *op, int n_in, const char *const *in,
                             const char *prefix)
{
    static const Onnx__NodeProto n_init = ONNX__NODE_PROTO__INIT;
    Onnx__NodeProto *n = keep(g, sizeof(*n));
    int k;
    *n = n_init;
    n->op_type = str(g, op);
    n->name = fresh(g, op);
    n->n_input = (size_t)n_in;
    n->input = keep(g, (size_t)n_in * sizeof(char *));
    for (k = 0; k < n_in; k++)
        n->input[k] = (char *)in[k];
    n->n_output = 1;
    n->output = keep(g, sizeof(char *));
    n->output[0] = fresh(g, prefix);
    n->attribute = keep(g, 8 * sizeof(*n->attribute));
    g->nodes = grow(g->nodes, &g->cap_nodes, g->n_nodes, sizeof(*g->nodes));
    g->nodes[g->n_nodes++] = n;
    return n;
}

static void attr_ints(gen_t *g, Onnx__NodeProto *n, const char *name, size_t count,
                      const int64_t *v)
{
    static const Onnx__AttributeProto a_init = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *a = keep(g, sizeof(*a));
    *a = a_init;
    a->name = str(g, name);
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = count;
    a->ints = keep(g, count * sizeof(int64_t));
    memcpy(a->ints, v, count * sizeof(int64_t));
    n->attribute[n->n_attribute++] = a;
}

static void attr_int(gen_t *g, Onnx__NodeProto *n, const char *name, int64_t v)
{
    static const Onnx__AttributeProto a_init = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *a = keep(g, sizeof(*a));
    *a = a_init;
    a->name = str(g, name);
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    n->attribute[n->n_attribute++] = a;
}

/* Conv (no bias) -> BatchNormalization -> Relu when |relu|. */
static const char *conv_bn(gen_t *g, const char *x, int64_t cin, int64_t cout, int64_t k,
                           int64_t stride, int relu)
{
    const int64_t wd[4] = {cout, cin, k, k}, cd[1] = {cout};
    const int64_t pad = k / 2, pads[4] = {pad, pad, pad, pad}, st[2] = {stride, stride};
    const int64_t ks[2] = {k, k};
    float a = sqrtf(6.0f / (float)(cin * k * k));
    const char *in[5];
    Onnx__NodeProto *n;

    in[0] = x;
    in[1] = init(g, "w", 4, wd, -a, a);
    n = node(g, "Conv", 2, in, "conv");
    attr_ints(g, n, "kernel_shape", 2, ks);
    attr_ints(g, n, "strides", 2, st);
    attr_ints(g, n, "pads", 4, pads);
    in[0] = n->output[0];
    in[1] = init(g, "bn_scale", 1, cd, 0.8f, 1.2f);
    in[2] = init(g, "bn_bias", 1, cd, -0.1f, 0.1f);
    in[3] = init(g, "bn_mean", 1, cd, -0.1f, 0.1f);
    in[4] = init(g, "bn_var", 1, cd, 0.8f, 1.2f);
    n = node(g, "BatchNormalization", 5, in, "bn");
    if (!relu)
        return n->output[0];
    in[0] = n->output[0];
    return node(g, "Relu", 1, in, "relu")->output[0];
}

/* A bottleneck: 1x1 (width), 3x3 (width, the stride), 1x1 (4 x width), plus the shortcut. */
static const char *bottleneck(gen_t *g, const char *x, int64_t cin, int64_t width, int64_t stride)
{
    const char *y, *sc, *in[2];
    y = conv_bn(g, x, cin, width, 1, 1, 1);
    y = conv_bn(g, y, width, width, 3, stride, 1);
    y = conv_bn(g, y, width, 4 * width, 1, 1, 0);
    sc = stride != 1 || cin != 4 * width ? conv_bn(g, x, cin, 4 * width, 1, stride, 0) : x;
    in[0] = y;
    in[1] = sc;
    in[0] = node(g, "Add", 2, in, "add")->output[0];
    return node(g, "Relu", 1, in, "relu")->output[0];
}

static Onnx__ValueInfoProto *value_info(gen_t *g, const char *name, int rank, const int64_t *dims)
{
    static const Onnx__ValueInfoProto vi_init = ONNX__VALUE_INFO_PROTO__INIT;
    static const Onnx__TypeProto tp_init = ONNX__TYPE_PROTO__INIT;
    static const Onnx__TypeProto__Tensor tt_init = ONNX__TYPE_PROTO__TENSOR__INIT;
    static const Onnx__TensorShapeProto sh_init = ONNX__TENSOR_SHAPE_PROTO__INIT;
    static const Onnx__TensorShapeProto__Dimension d_init =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__ValueInfoProto *vi = keep(g, sizeof(*vi));
    Onnx__TypeProto *tp = keep(g, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = keep(g, sizeof(*tt));
    Onnx__TensorShapeProto *sh = keep(g, sizeof(*sh));
    int k;
    *vi = vi_init;
    *tp = tp_init;
    *tt = tt_init;
    *sh = sh_init;
    vi->name = str(g, name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    sh->n_dim = (size_t)rank;
    sh->dim = keep(g, (size_t)rank * sizeof(*sh->dim));
    for (k = 0; k < rank; k++) {
        Onnx__TensorShapeProto__Dimension *d = keep(g, sizeof(*d));
        *d = d_init;
        if (dims[k] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = str(g, "batch");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[k];
        }
        sh->dim[k] = d;
    }
    return vi;
}

int main(int argc, char **argv)
{
    static const int blocks[4] = {3, 4, 6, 3};
    static const Onnx__ModelProto m_init = ONNX__MODEL_PROTO__INIT;
    static const Onnx__GraphProto g_init = ONNX__GRAPH_PROTO__INIT;
    static const Onnx__OperatorSetIdProto o_init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    const int64_t in_dims[4] = {-1, 3, 224, 224}, out_dims[2] = {-1, 1000};
    const int64_t pk[2] = {3, 3}, ps[2] = {2, 2}, pp[4] = {1, 1, 1, 1};
    const int64_t fw[2] = {1000, 2048}, fb[1] = {1000};
    Onnx__ModelProto model = m_init;
    Onnx__GraphProto graph = g_init;
    Onnx__OperatorSetIdProto opset = o_init, *opsets[1];
    Onnx__ValueInfoProto *inputs[1], *outputs[1];
    Onnx__NodeProto *n;
    const char *x, *in[3];
    gen_t g;
    int64_t cin = 64, width = 64;
    int layer, b;
    size_t len, i;
    uint8_t *buf;
    FILE *f;

    memset(&g, 0, sizeof(g));
    g.rng = 2463534242u;
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
        g.rng = (uint32_t)strtoul(argv[3], NULL, 10) * 2654435761u + 1;

    x = conv_bn(&g, "input", 3, 64, 7, 2, 1);
    in[0] = x;
    n = node(&g, "MaxPool", 1, in, "pool");
    attr_ints(&g, n, "kernel_shape", 2, pk);
    attr_ints(&g, n, "strides", 2, ps);
    attr_ints(&g, n, "pads", 4, pp);
    x = n->output[0];
    for (layer = 0; layer < 4; layer++) {
        for (b = 0; b < blocks[layer]; b++) {
            x = bottleneck(&g, x, cin, width, layer > 0 && b == 0 ? 2 : 1);
            cin = 4 * width;
        }
        width *= 2;
    }
    in[0] = x;
    in[0] = node(&g, "GlobalAveragePool", 1, in, "gap")->output[0];
    n = node(&g, "Flatten", 1, in, "flat");
    attr_int(&g, n, "axis", 1);
    in[0] = n->output[0];
    in[1] = init(&g, "fc_w", 2, fw, -sqrtf(6.0f / 2048.0f), sqrtf(6.0f / 2048.0f));
    in[2] = init(&g, "fc_b", 1, fb, -0.01f, 0.01f);
    n = node(&g, "Gemm", 3, in, "gemm");
    attr_int(&g, n, "transB", 1);
    n->output[0] = str(&g, "logits");

    inputs[0] = value_info(&g, "input", 4, in_dims);
    outputs[0] = value_info(&g, "logits", 2, out_dims);
    opset.domain = str(&g, "");
    opset.has_version = 1;
    opset.version = 13;
    opsets[0] = &opset;
    graph.name = str(&g, "resnet50_v1_5");
    graph.n_node = g.n_nodes;
    graph.node = g.nodes;
    graph.n_initializer = g.n_inits;
    graph.initializer = g.inits;
    graph.n_input = 1;
    graph.input = inputs;
    graph.n_output = 1;
    graph.output = outputs;
    model.has_ir_version = 1;
    model.ir_version = 7;
    model.producer_name = str(&g, "resnet50_onnx (mlperf network harness bench)");
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;

    len = onnx__model_proto__get_packed_size(&model);
    buf = malloc(len);
    if (!buf)
        die("out of memory");
    if (onnx__model_proto__pack(&model, buf) != len)
        die("packing failed");
    f = fopen(argv[1], "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("%s: ResNet-50 v1.5, %zu nodes, %zu initializers, %zu bytes\n", argv[1], g.n_nodes,
           g.n_inits, len);
    free(buf);
    for (i = 0; i < g.n_allocs; i++)
        free(g.allocs[i]);
    free(g.allocs);
    free(g.nodes);
    free(g.inits);
    return 0;
}
