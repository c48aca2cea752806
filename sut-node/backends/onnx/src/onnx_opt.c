/* Graph-level optimisations on the IR, independent of the executor.
 *
 * - BatchNormalization after a Conv is folded into the Conv's weights and bias: inference BN is
 *   a per-channel affine map, and so is the last step of a convolution.
 * - Mul or Div of a Cast's output by a scalar constant becomes the Cast's scale: uint8 pixels
 *   are converted and scaled in one pass.
 * - A residual Add of a Conv (or Gemm, MatMul) output and an earlier value becomes a SUM post-op
 *   of that Conv, which then accumulates into a buffer holding the other operand.
 * - ReLU after a Conv, Gemm, MatMul, element-wise or InstanceNormalization node becomes a RELU
 *   post-op of it.
 * Each rewrite keeps the graph's outputs and numerics (up to float rounding) unchanged. */
#include "onnx_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node that writes |v| when v has exactly one consumer and is no graph output, else NULL. */
static onnx_node_t *sole_producer(onnx_graph_t *g, int v)
{
    const onnx_value_t *val = &g->values[v];
    if (val->producer < 0 || val->uses != 1 || val->output)
        return NULL;
    return &g->nodes[val->producer];
}

/* Node |n| disappears; its output becomes |p|'s output. |mid| is the value between them. */
static void absorb(onnx_graph_t *g, onnx_node_t *p, onnx_node_t *n, int mid)
{
    int i;
    for (i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0)
            g->values[n->in[i]].uses--;
    g->values[mid].producer = -1;
    p->out = n->out;
    g->values[n->out].producer = (int)(p - g->nodes);
    n->dead = 1;
}

static int is_const(const onnx_graph_t *g, int v)
{
    return v >= 0 && g->values[v].data != NULL;
}

static void fold_batchnorm(onnx_graph_t *g, onnx_node_t *bn)
{
    onnx_node_t *conv = sole_producer(g, bn->in[0]);
    const float *scale, *shift, *mean, *var;
    float *w, *b;
    int64_t oc, per_oc, i;
    int k, bias;

    if (!conv || conv->op != ONNX_OP_CONV || conv->n_post)
        return;
    for (k = 1; k < 5; k++)
        if (!is_const(g, bn->in[k]))
            return;
    /* The weights are rewritten in place, so they must belong to this Conv alone. */
    if (!is_const(g, conv->in[1]) || g->values[conv->in[1]].uses != 1)
        return;
    if (conv->n_in > 2 && conv->in[2] >= 0 &&
        (!is_const(g, conv->in[2]) || g->values[conv->in[2]].uses != 1))
        return;

    if (conv->n_in < 3 || conv->in[2] < 0) {
        /* A bias-free Conv (PyTorch's conv before BN) gets one. */
        onnx_value_t *bv;
        size_t len = strlen(g->values[conv->out].name) + 16;
        char *name = malloc(len);
        if (!name)
            return;
        snprintf(name, len, "%s/bn_bias", g->values[conv->out].name);
        bias = onnx_graph_add_value(g, name);
        free(name);
        if (bias < 0)
            return;
        bv = &g->values[bias];
        bv->dtype = ONNX_DT_FLOAT;
        bv->rank = 1;
        bv->dims[0] = g->values[conv->in[1]].dims[0];
        bv->data = calloc((size_t)bv->dims[0], sizeof(float));
        if (!bv->data)
            return; /* the empty value stays unused */
        bv->uses = 1;
        conv->in[2] = bias;
        conv->n_in = 3;
    }

    scale = g->values[bn->in[1]].data;
    shift = g->values[bn->in[2]].data;
    mean = g->values[bn->in[3]].data;
    var = g->values[bn->in[4]].data;
    w = g->values[conv->in[1]].data;
    b = g->values[conv->in[2]].data;
    oc = g->values[conv->in[1]].dims[0];
    per_oc = (int64_t)onnx_value_numel(&g->values[conv->in[1]]) / oc;
    for (i = 0; i < oc; i++) {
        float s = scale[i] / sqrtf(var[i] + bn->epsilon);
        int64_t j;
        for (j = 0; j < per_oc; j++)
            w[i * per_oc + j] *= s;
        b[i] = (b[i] - mean[i]) * s + shift[i];
    }
    absorb(g, conv, bn, bn->in[0]);
}

/* Cast -> Mul/Div by a scalar constant: the Cast scales as it converts. */
static void fold_cast_scale(onnx_graph_t *g, onnx_node_t *n)
{
    onnx_node_t *cast;
    const onnx_value_t *c;
    float f;
    int data = 0;

    if (is_const(g, n->in[0]))
        data = 1;
    cast = sole_producer(g, n->in[data]);
    if (!cast || cast->op != ONNX_OP_CAST || cast->to != ONNX_DT_FLOAT || cast->n_post)
        return;
    if (n->op == ONNX_OP_DIV && data != 0)
        return; /* c / x is no scaling */
    c = &g->values[n->in[1 - data]];
    if (!c->data || c->dtype != ONNX_DT_FLOAT || onnx_value_numel(c) != 1 || c->rank > 1)
        return;
    /* The output keeps the Cast's shape: the scalar must not broadcast it to a higher rank. */
    f = *(const float *)c->data;
    if (n->op == ONNX_OP_DIV) {
        if (f == 0.0f)
            return;
        f = 1.0f / f;
    }
    cast->scale *= f;
    absorb(g, cast, n, n->in[data]);
}

/* Add(a, b) where a comes from a Conv, Gemm or MatMul computed after b: dst = conv(...) + b. */
static void fuse_sum(onnx_graph_t *g, onnx_node_t *add)
{
    const onnx_value_t *a = &g->values[add->in[0]], *b = &g->values[add->in[1]];
    onnx_node_t *best = NULL;
    int k, other = -1, mid = -1;

    if (add->in[0] == add->in[1] || a->dtype != ONNX_DT_FLOAT || a->rank != b->rank ||
        a->batched != b->batched || memcmp(a->dims, b->dims, (size_t)a->rank * sizeof(int64_t)))
        return;
    for (k = 0; k < 2; k++) {
        onnx_node_t *p = sole_producer(g, add->in[k]);
        int o = add->in[1 - k];
        int op = g->values[o].producer; /* must run before p */
        if (!p || p->n_post ||
            (p->op != ONNX_OP_CONV && p->op != ONNX_OP_GEMM && p->op != ONNX_OP_MATMUL))
            continue;
        if (op >= (int)(p - g->nodes))
            continue;
        if (!best || p > best) {
            best = p;
            other = o;
            mid = add->in[k];
        }
    }
    if (!best)
        return;
    best->post[best->n_post].kind = ONNX_POST_SUM;
    best->post[best->n_post].value = other;
    best->n_post++;
    g->values[other].uses++; /* the post-op reads it; absorb() drops the Add's use */
    absorb(g, best, add, mid);
}

static void fuse_relu(onnx_graph_t *g, onnx_node_t *relu)
{
    onnx_node_t *p = sole_producer(g, relu->in[0]);
    if (!p || p->n_post >= ONNX_MAX_POST)
        return;
    switch (p->op) {
    case ONNX_OP_CONV:
    case ONNX_OP_GEMM:
    case ONNX_OP_MATMUL:
    case ONNX_OP_ADD:
    case ONNX_OP_SUB:
    case ONNX_OP_MUL:
    case ONNX_OP_DIV:
    case ONNX_OP_INSTANCENORM:
        break;
    default:
        return;
    }
    p->post[p->n_post].kind = ONNX_POST_RELU;
    p->post[p->n_post].value = -1;
    p->n_post++;
    absorb(g, p, relu, relu->in[0]);
}

void onnx_graph_optimize(onnx_graph_t *g)
{
    int i;

    /* Node order is execution order, and each rewrite only looks back at producers, so one pass
     * sees Conv -> BN -> Add -> ReLU collapse step by step. */
    for (i = 0; i < g->n_nodes; i++) {
        onnx_node_t *n = &g->nodes[i];
        if (n->dead)
            continue;
        switch (n->op) {
        case ONNX_OP_BATCHNORM:
            fold_batchnorm(g, n);
            break;
        case ONNX_OP_MUL:
        case ONNX_OP_DIV:
            fold_cast_scale(g, n);
            break;
        case ONNX_OP_ADD:
            fuse_sum(g, n);
            break;
        case ONNX_OP_RELU:
            fuse_relu(g, n);
            break;
        default:
            break;
        }
    }
}
