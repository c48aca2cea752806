/* The CUDA engine's plans, on any machine: the steps and placement that onnx_cuda_plan.c computes
 * for small models and the Fashion-MNIST model, checked structurally (which cuDNN, cuBLAS or
 * kernel step each node becomes, in place or not) and numerically: the plan run by the CPU
 * emulator (cuda_emu.h) against the oneDNN engine through the ABI. The ONNX node vectors run
 * through the same emulator in test_node.c (cuda_plan_nodes). */
#include "cuda_emu.h"
#include "test_onnx.h"
#include "onnx_arena.h"
#include "onnx_backend.h"
#include "onnx_cuda_plan.h"
#include "onnx_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_B 8

typedef struct {
    onnx_graph_t *g;
    onnx_cuda_program_t *prog;
} prog_t;

/* The graph of |model| planned for batches 1, 2, 4, ... |max_batch| (1 when not batched). */
static void plan_open(prog_t *p, const char *model, size_t max_batch)
{
    size_t batches[16], n = 0, s;
    cmn_errbuf_t eb;
    eb.msg[0] = '\0';
    ck_assert_msg(onnx_graph_load(model, &p->g, &eb) == 0, "%s", eb.msg);
    if (!p->g->batched)
        max_batch = 1;
    for (s = 1; s < max_batch; s *= 2)
        batches[n++] = s;
    batches[n++] = max_batch;
    ck_assert_msg(onnx_cuda_program_build(p->g, batches, n, &p->prog, &eb) == 0, "%s", eb.msg);
    cuda_emu_check_plans(p->prog);
}

static void plan_close(prog_t *p)
{
    onnx_cuda_program_free(p->prog);
    onnx_graph_free(p->g);
}

static int count_steps(const onnx_cuda_plan_t *pl, onnx_cuda_step_kind_t k)
{
    int i, n = 0;
    for (i = 0; i < pl->n_steps; i++)
        n += pl->steps[i].kind == k;
    return n;
}

static const onnx_cuda_step_t *nth_step(const onnx_cuda_plan_t *pl, onnx_cuda_step_kind_t k,
                                        int nth)
{
    int i;
    for (i = 0; i < pl->n_steps; i++)
        if (pl->steps[i].kind == k && nth-- == 0)
            return &pl->steps[i];
    ck_abort_msg("no %s step number %d", onnx_cuda_step_name(k), nth);
    return NULL;
}

/* Random inputs (floats in [-1, 1), or bytes), the emulated plan against the CPU engine for
 * batches of 1 and |n| samples. */
static void emu_vs_cpu(const prog_t *p, const char *model, size_t n, float atol, float rtol)
{
    const onnx_graph_t *g = p->g;
    size_t in = g->input_size, out = g->output_size, k, sizes[2] = {1, n}, r;
    uint8_t *x = malloc(n * in + 4), *want = malloc(n * out + 4), *got = malloc(n * out + 4);
    tb_t t;
    int i;

    ck_assert(x && want && got);
    fill_rand((float *)(void *)x, n * in / 4, -1.0f, 1.0f, 77); /* malloc-aligned */
    for (i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].dtype != ONNX_DT_FLOAT)
            for (k = 0; k < n * in; k++)
                x[k] = (uint8_t)(k * 2654435761u >> 13);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), model, NULL, (uint32_t)n, 1), 0);
    for (r = 0; r < 2; r++) {
        size_t b = sizes[r];
        ck_assert_int_eq(tb_run(&t, x, b, want, out), 0);
        memset(got, 0, b * out);
        cuda_emu_run(p->prog, b, x, got);
        for (i = 0; i < g->n_outputs; i++) {
            const onnx_value_t *v = &g->values[g->outputs[i]];
            size_t s;
            for (s = 0; s < b; s++) {
                const uint8_t *w = want + s * out + p->prog->out_off[i];
                const uint8_t *o = got + s * out + p->prog->out_off[i];
                char what[96];
                snprintf(what, sizeof(what), "output %d of sample %zu of %zu", i, s, b);
                if (v->dtype == ONNX_DT_FLOAT)
                    /* float outputs start at 4-byte offsets of malloc-aligned buffers */
                    assert_close((const float *)(const void *)o, (const float *)(const void *)w,
                                 p->prog->out_size[i] / 4, atol, rtol, what);
                else
                    ck_assert_msg(memcmp(o, w, p->prog->out_size[i]) == 0, "%s differs", what);
            }
        }
    }
    tb_close(&t);
    free(x);
    free(want);
    free(got);
}

static void finish(char *model)
{
    unlink(model);
    free(model);
}

/* A ResNet basic block: Relu -> Conv+BN+Relu -> Conv+BN -> Add(., r0) -> Relu. The second Conv
 * is one fused cuDNN call that reads r0 where it is and writes a new tensor. */
START_TEST(test_residual_fused)
{
    enum { C = 8, H = 6, W = 6 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {C, C, 3, 3}, dc[] = {C};
    static const int64_t pads[] = {1, 1, 1, 1};
    float w1[C * C * 9], b1[C], bn[4 * C], w2[C * C * 9];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_conv_step_t *c1, *c2;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;
    int k;

    fill_rand(w1, C * C * 9, -0.3f, 0.3f, 1);
    fill_rand(b1, C, -0.5f, 0.5f, 2);
    fill_rand(w2, C * C * 9, -0.3f, 0.3f, 3);
    fill_rand(bn, 4 * C, 0.5f, 1.5f, 4);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 4, dx);
    mb_init(m, "w1", 1, 4, dw, w1);
    mb_init(m, "b1", 1, 1, dc, b1);
    mb_init(m, "w2", 1, 4, dw, w2);
    for (k = 0; k < 4; k++) {
        static const char *const names[4] = {"s", "h", "mu", "v"};
        mb_init(m, names[k], 1, 1, dc, bn + k * C);
    }
    mb_node(m, "Relu", "relu0", "x", "r0");
    nd = mb_node(m, "Conv", "conv1", "r0,w1,b1", "c1");
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "Relu", "relu1", "c1", "r1");
    nd = mb_node(m, "Conv", "conv2", "r1,w2", "c2");
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "BatchNormalization", "bn2", "c2,s,h,mu,v", "n2");
    mb_node(m, "Add", "add", "n2,r0", "a");
    mb_node(m, "Relu", "relu2", "a", "y");
    path = mb_write(m);
    plan_open(&p, path, 4);

    pl = &p.prog->plans[p.prog->n_plans - 1];
    ck_assert_uint_eq(pl->batch, 4);
    ck_assert_int_eq(pl->n_steps, 3); /* relu, conv, conv: no copy */
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_RELU), 1);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_CONV), 2);
    c1 = &nth_step(pl, ONNX_CUDA_STEP_CONV, 0)->u.conv;
    c2 = &nth_step(pl, ONNX_CUDA_STEP_CONV, 1)->u.conv;
    ck_assert(c1->fused && c1->relu && !c1->sum && c1->b >= 0 && c1->z < 0);
    ck_assert(c2->fused && c2->relu && c2->sum);
    ck_assert_int_ge(c2->b, 0); /* the bias that folding BN gave it */
    ck_assert_int_eq(pl->t[c2->z].slot.root,
                     pl->t[nth_step(pl, ONNX_CUDA_STEP_RELU, 0)->u.relu.y].slot.root); /* r0 */
    ck_assert_int_ne(pl->t[c2->y].slot.root, pl->t[c2->z].slot.root);
    ck_assert_int_eq(c1->nsp, 2);
    ck_assert_int_eq(c1->pad[0], 1);
    ck_assert_int_eq(c1->xdims[0], 4);
    ck_assert_int_eq(c1->wdims[1], C);
    emu_vs_cpu(&p, path, 4, 1e-4f, 1e-4f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* Conv + Add of an addend that dies there, no ReLU: cuDNN accumulates into the addend's own
 * storage (beta = 1), unfused, with no copy. */
START_TEST(test_residual_in_place)
{
    enum { C = 4, H = 5, W = 5 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {C, C, 3, 3}, db[] = {C};
    static const int64_t pads[] = {1, 1, 1, 1};
    float w[C * C * 9], b[C];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_conv_step_t *c;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(w, C * C * 9, -0.5f, 0.5f, 13);
    fill_rand(b, C, -1, 1, 14);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 4, dw, w);
    mb_init(m, "b", 1, 1, db, b);
    mb_node(m, "Relu", "r", "x", "a");
    mb_node(m, "Sub", "s", "x,a", "n"); /* x - relu(x): the negative part */
    nd = mb_node(m, "Conv", "conv", "n,w,b", "c");
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "Add", "add", "c,a", "y");
    path = mb_write(m);
    plan_open(&p, path, 4);
    pl = &p.prog->plans[2];
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_COPY), 0);
    c = &nth_step(pl, ONNX_CUDA_STEP_CONV, 0)->u.conv;
    ck_assert(c->sum && !c->fused && !c->relu && c->b >= 0);
    ck_assert_int_eq(c->z, c->y);
    ck_assert_int_eq(pl->t[c->y].slot.root,
                     pl->t[nth_step(pl, ONNX_CUDA_STEP_RELU, 0)->u.relu.y].slot.root);
    emu_vs_cpu(&p, path, 4, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* The residual operand is read again after the Add, and no ReLU follows: the Conv works on a
 * copy of the addend (a COPY step) with cuDNN's beta = 1, unfused, bias-free. */
START_TEST(test_residual_copy)
{
    enum { C = 4, H = 5, W = 5 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {C, C, 1, 1};
    float w[C * C];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_step_t *cp, *cv;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(w, C * C, -1, 1, 11);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 4, dx);
    mb_output(m, "z", 1, 4, dx);
    mb_init(m, "w", 1, 4, dw, w);
    mb_node(m, "Relu", "r", "x", "a");
    mb_node(m, "Conv", "conv", "a,w", "c");
    mb_node(m, "Add", "add", "a,c", "y");
    mb_node(m, "Mul", "square", "a,a", "z");
    path = mb_write(m);
    plan_open(&p, path, 4);
    pl = &p.prog->plans[0];
    cp = nth_step(pl, ONNX_CUDA_STEP_COPY, 0);
    cv = nth_step(pl, ONNX_CUDA_STEP_CONV, 0);
    ck_assert(cp < cv);
    ck_assert(!cv->u.conv.fused && cv->u.conv.sum && !cv->u.conv.relu);
    ck_assert_int_lt(cv->u.conv.b, 0);
    ck_assert_int_eq(cv->u.conv.z, cv->u.conv.y);
    ck_assert_int_eq(pl->t[cp->u.copy.y].slot.root, pl->t[cv->u.conv.y].slot.root);
    ck_assert_int_ne(pl->t[cp->u.copy.x].slot.root, pl->t[cv->u.conv.y].slot.root);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_BINARY), 1);
    emu_vs_cpu(&p, path, 3, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* Asymmetric padding (SAME_UPPER with an even kernel, and explicit pads): a zero-padding step,
 * then a convolution without padding. A 1-D convolution runs as 2-D of height 1. */
START_TEST(test_asymmetric_and_1d)
{
    static const int64_t dx[] = {-1, 3, 7, 6}, dw[] = {5, 3, 2, 2}, pads[] = {0, 1, 1, 0};
    static const int64_t dx1[] = {-1, 2, 9}, dw1[] = {4, 2, 3}, pads1[] = {2, 1}, dil1[] = {2};
    float w[5 * 3 * 4], w1[4 * 2 * 3];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_step_t *pd, *cv;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(w, 60, -1, 1, 21);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 4, dw, w);
    nd = mb_node(m, "Conv", "same", "x,w", "y");
    mb_attr_str(m, nd, "auto_pad", "SAME_UPPER");
    path = mb_write(m);
    plan_open(&p, path, 2);
    pl = &p.prog->plans[1];
    pd = nth_step(pl, ONNX_CUDA_STEP_PAD, 0);
    cv = nth_step(pl, ONNX_CUDA_STEP_CONV, 0);
    ck_assert(pd < cv);
    ck_assert_int_eq(pd->u.pad.k.out[2], 8); /* 7 + 0 + 1 */
    ck_assert_int_eq(pd->u.pad.k.out[3], 7);
    ck_assert_int_eq(cv->u.conv.pad[0], 0);
    ck_assert_int_eq(cv->u.conv.pad[1], 0);
    ck_assert_int_eq(cv->u.conv.x, pd->u.pad.y);
    emu_vs_cpu(&p, path, 2, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);

    m = mb_new(13);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 4, dw, w);
    nd = mb_node(m, "Conv", "pads", "x,w", "y");
    mb_attr_ints(m, nd, "pads", 4, pads);
    path = mb_write(m);
    plan_open(&p, path, 2);
    ck_assert_int_eq(count_steps(&p.prog->plans[0], ONNX_CUDA_STEP_PAD), 1);
    emu_vs_cpu(&p, path, 2, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);

    fill_rand(w1, 24, -1, 1, 22);
    m = mb_new(13);
    mb_input(m, "x", 1, 3, dx1);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 3, dw1, w1);
    nd = mb_node(m, "Conv", "c1d", "x,w", "y");
    mb_attr_ints(m, nd, "pads", 2, pads1);
    mb_attr_ints(m, nd, "dilations", 1, dil1);
    path = mb_write(m);
    plan_open(&p, path, 2);
    pl = &p.prog->plans[0];
    cv = nth_step(pl, ONNX_CUDA_STEP_CONV, 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_PAD), 1);
    ck_assert_int_eq(cv->u.conv.nsp, 2);
    ck_assert_int_eq(cv->u.conv.xdims[2], 1);
    ck_assert_int_eq(cv->u.conv.wdims[2], 1);
    ck_assert_int_eq(cv->u.conv.wdims[3], 3);
    ck_assert_int_eq(cv->u.conv.dil[0], 1);
    ck_assert_int_eq(cv->u.conv.dil[1], 2);
    emu_vs_cpu(&p, path, 2, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* Grouped, strided, dilated 2-D and a 3-D convolution with bias and ReLU (fused). */
START_TEST(test_grouped_and_3d)
{
    static const int64_t dx[] = {-1, 6, 9, 8}, dw[] = {4, 3, 3, 3}, db[] = {4};
    static const int64_t dil[] = {2, 1}, st[] = {1, 2}, pads[] = {1, 2, 1, 2};
    static const int64_t dx3[] = {-1, 2, 5, 4, 6}, dw3[] = {3, 2, 2, 3, 2}, db3[] = {3};
    float w[4 * 3 * 9], b[4], w3[3 * 2 * 12], b3[3];
    const onnx_cuda_conv_step_t *c;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(w, 108, -1, 1, 31);
    fill_rand(b, 4, -1, 1, 32);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 4, dw, w);
    mb_init(m, "b", 1, 1, db, b);
    nd = mb_node(m, "Conv", "grouped", "x,w,b", "c");
    mb_attr_int(m, nd, "group", 2);
    mb_attr_ints(m, nd, "dilations", 2, dil);
    mb_attr_ints(m, nd, "strides", 2, st);
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "Relu", "relu", "c", "y");
    path = mb_write(m);
    plan_open(&p, path, 4);
    c = &nth_step(&p.prog->plans[0], ONNX_CUDA_STEP_CONV, 0)->u.conv;
    ck_assert_int_eq(c->groups, 2);
    ck_assert(c->fused && c->relu);
    ck_assert_int_eq(c->dil[0], 2);
    ck_assert_int_eq(c->stride[1], 2);
    emu_vs_cpu(&p, path, 4, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);

    fill_rand(w3, 72, -1, 1, 33);
    fill_rand(b3, 3, -1, 1, 34);
    m = mb_new(13);
    mb_input(m, "x", 1, 5, dx3);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 5, dw3, w3);
    mb_init(m, "b", 1, 1, db3, b3);
    nd = mb_node(m, "Conv", "c3d", "x,w,b", "y");
    path = mb_write(m);
    plan_open(&p, path, 2);
    c = &nth_step(&p.prog->plans[0], ONNX_CUDA_STEP_CONV, 0)->u.conv;
    ck_assert_int_eq(c->nsp, 3);
    ck_assert(!c->fused && c->b >= 0);
    emu_vs_cpu(&p, path, 2, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* MatMul: batch dims that broadcast both ways become one strided batched call per outer index;
 * a per-sample activation times a shared matrix is one tall product. */
START_TEST(test_matmul_batches)
{
    static const int64_t da[] = {2, 1, 3, 4}, db[] = {1, 5, 4, 6};
    static const int64_t dx[] = {-1, 3, 4}, dw[] = {4, 5};
    float a[24], b[120], w[20];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_gemm_step_t *g;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(a, 24, -1, 1, 41);
    fill_rand(b, 120, -1, 1, 42);
    mb_input(m, "a", 1, 4, da);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "b", 1, 4, db, b);
    mb_node(m, "MatMul", "mm", "a,b", "y");
    path = mb_write(m);
    plan_open(&p, path, 1);
    pl = &p.prog->plans[0];
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_GEMM), 2);
    g = &nth_step(pl, ONNX_CUDA_STEP_GEMM, 1)->u.gemm;
    ck_assert_int_eq(g->count, 5);
    ck_assert_int_eq(g->stride_a, 24); /* the model's B moves on, */
    ck_assert_int_eq(g->stride_b, 0);  /* its A is shared by the 5 */
    ck_assert_int_eq(g->b_off, 12);
    ck_assert_int_eq(g->c_off, 5 * 18);
    emu_vs_cpu(&p, path, 1, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);

    fill_rand(w, 20, -1, 1, 43);
    m = mb_new(13);
    mb_input(m, "x", 1, 3, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 2, dw, w);
    mb_node(m, "MatMul", "mm", "x,w", "y");
    path = mb_write(m);
    plan_open(&p, path, 4);
    g = &nth_step(&p.prog->plans[2], ONNX_CUDA_STEP_GEMM, 0)->u.gemm;
    ck_assert_int_eq(count_steps(&p.prog->plans[2], ONNX_CUDA_STEP_GEMM), 1);
    ck_assert_int_eq(g->count, 1);
    ck_assert_int_eq(g->n, 4 * 3); /* 4 samples of 3 rows */
    ck_assert_int_eq(g->m, 5);
    emu_vs_cpu(&p, path, 4, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* Gemm with a bias vector, a residual sum in place and ReLU: the bias is broadcast into the
 * output on top of the addend, then cuBLAS accumulates (beta 1), then a ReLU step. */
START_TEST(test_gemm_sum_bias)
{
    static const int64_t dx[] = {-1, 8}, dw[] = {8, 8}, dw2[] = {8, 8}, dc[] = {8};
    float w[64], w2[64], c[8];
    const onnx_cuda_plan_t *pl;
    const onnx_cuda_step_t *bc, *gm, *re;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    prog_t p;
    char *path;

    fill_rand(w, 64, -1, 1, 51);
    fill_rand(w2, 64, -1, 1, 52);
    fill_rand(c, 8, -1, 1, 53);
    mb_input(m, "x", 1, 2, dx);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "w", 1, 2, dw, w);
    mb_init(m, "w2", 1, 2, dw2, w2);
    mb_init(m, "c", 1, 1, dc, c);
    mb_node(m, "Relu", "r", "x", "a");
    mb_node(m, "Gemm", "g1", "a,w", "h");
    mb_node(m, "Relu", "r1", "h", "h2");
    nd = mb_node(m, "Gemm", "g2", "h2,w2,c", "g");
    mb_attr_int(m, nd, "transB", 1);
    mb_attr_float(m, nd, "alpha", 0.5f);
    mb_attr_float(m, nd, "beta", 2.0f);
    mb_node(m, "Add", "add", "g,a", "s");
    mb_node(m, "Relu", "r2", "s", "y");
    path = mb_write(m);
    plan_open(&p, path, 4);
    pl = &p.prog->plans[2];
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_COPY), 0);
    bc = nth_step(pl, ONNX_CUDA_STEP_BCAST, 0);
    gm = nth_step(pl, ONNX_CUDA_STEP_GEMM, 1);
    re = nth_step(pl, ONNX_CUDA_STEP_RELU, 2);
    ck_assert(bc < gm && gm < re);
    ck_assert(bc->u.bcast.k.accumulate);
    ck_assert(bc->u.bcast.k.scale == 2.0f);
    ck_assert_int_eq(bc->u.bcast.k.sx[0], 0);
    ck_assert(gm->u.gemm.beta == 1.0f && gm->u.gemm.alpha == 0.5f);
    ck_assert(gm->u.gemm.trans_a && !gm->u.gemm.trans_b);
    ck_assert_int_eq(pl->t[gm->u.gemm.c].slot.root,
                     pl->t[nth_step(pl, ONNX_CUDA_STEP_RELU, 0)->u.relu.y].slot.root);
    emu_vs_cpu(&p, path, 4, 1e-5f, 1e-5f);
    plan_close(&p);
    finish(path);
}
END_TEST

/* Which pooling runs on cuDNN: float, symmetric, undilated, and unpadded for max. */
START_TEST(test_pool_paths)
{
    static const struct {
        const char *op;
        int64_t pads[4], dil, ceil;
        int cudnn;
    } cases[] = {
        {"MaxPool", {0, 0, 0, 0}, 1, 0, 1},           {"MaxPool", {1, 1, 1, 1}, 1, 0, 0},
        {"MaxPool", {0, 0, 0, 0}, 2, 0, 0},           {"AveragePool", {1, 1, 1, 1}, 1, 0, 1},
        {"AveragePool", {0, 0, 1, 1}, 1, 0, 0},       {"AveragePool", {0, 0, 0, 0}, 1, 1, 0},
        {"GlobalAveragePool", {0, 0, 0, 0}, 1, 0, 1},
    };
    static const int64_t dx[] = {-1, 3, 8, 7}, k2[] = {3, 3}, s2[] = {2, 2};
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const int64_t dil[] = {cases[i].dil, cases[i].dil};
        Onnx__NodeProto *nd;
        mb_t *m = mb_new(13);
        prog_t p;
        char *path;
        mb_input(m, "x", 1, 4, dx);
        mb_output(m, "y", 1, 0, NULL);
        nd = mb_node(m, cases[i].op, "pool", "x", "y");
        if (strcmp(cases[i].op, "GlobalAveragePool") != 0) {
            mb_attr_ints(m, nd, "kernel_shape", 2, k2);
            mb_attr_ints(m, nd, "strides", 2, s2);
            mb_attr_ints(m, nd, "pads", 4, cases[i].pads);
            if (cases[i].dil != 1)
                mb_attr_ints(m, nd, "dilations", 2, dil);
            if (cases[i].ceil)
                mb_attr_int(m, nd, "ceil_mode", 1);
        }
        path = mb_write(m);
        plan_open(&p, path, 2);
        ck_assert_msg(nth_step(&p.prog->plans[0], ONNX_CUDA_STEP_POOL, 0)->u.pool.cudnn ==
                          cases[i].cudnn,
                      "case %zu (%s)", i, cases[i].op);
        emu_vs_cpu(&p, path, 2, 1e-5f, 1e-5f);
        plan_close(&p);
        finish(path);
    }
}
END_TEST

/* The committed model: uint8 input, Cast with the folded 1/255, three fused Conv+BN+ReLU,
 * max pooling, Flatten as a view, two Gemms. Its activations share the arena (the largest plan
 * needs less than all its tensors together), and the emulated plan matches the CPU engine. */
START_TEST(test_fmnist_plan)
{
    const char *model = MODEL_DIR "/fashion_mnist_cnn.onnx";
    const onnx_cuda_plan_t *pl;
    size_t total = 0;
    prog_t p;
    int i;

    plan_open(&p, model, MAX_B);
    ck_assert_uint_eq(p.prog->n_plans, 4); /* 1, 2, 4, 8 */
    pl = &p.prog->plans[3];
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_CAST), 1);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_CONV), 3);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_GEMM), 2);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_COPY), 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_BATCHNORM), 0); /* folded */
    ck_assert(nth_step(pl, ONNX_CUDA_STEP_CAST, 0)->u.cast.k.scale < 0.01f);
    for (i = 0; i < 3; i++)
        ck_assert(nth_step(pl, ONNX_CUDA_STEP_CONV, i)->u.conv.fused);
    for (i = 0; i < pl->n_t; i++)
        if (pl->t[i].slot.root == i && pl->t[i].slot.store == ONNX_STORE_ARENA)
            total += pl->t[i].slot.bytes;
    ck_assert_uint_lt(pl->arena_size, total);
    ck_assert_uint_eq(p.prog->arena_size, pl->arena_size);
    ck_assert_uint_gt(p.prog->pool_size, 200000 * 4); /* the weights, uploaded once */
    emu_vs_cpu(&p, model, MAX_B, 1e-4f, 1e-4f);
    plan_close(&p);
}
END_TEST

/* Planning errors name the node. */
START_TEST(test_plan_errors)
{
    static const int64_t da[] = {5000, 1, 1, 2}, db[] = {1, 5000, 2, 2};
    float *b = calloc(5000 * 4, sizeof(float));
    cmn_errbuf_t eb;
    onnx_graph_t *g;
    onnx_cuda_program_t *prog;
    size_t one = 1;
    mb_t *m = mb_new(13);
    char *path;

    /* 5000 x 5000 broadcast batches: more separate products than the engine runs */
    mb_input(m, "a", 1, 4, da);
    mb_output(m, "y", 1, 0, NULL);
    mb_init(m, "b", 1, 4, db, b);
    mb_node(m, "MatMul", "wide", "a,b", "y");
    path = mb_write(m);
    ck_assert_int_eq(onnx_graph_load(path, &g, &eb), 0);
    ck_assert_int_eq(onnx_cuda_program_build(g, &one, 1, &prog, &eb), CMN_EBACKEND);
    ck_assert_msg(strstr(eb.msg, "node \"wide\" (MatMul)") && strstr(eb.msg, "separate products"),
                  "%s", eb.msg);
    onnx_graph_free(g);
    finish(path);
    free(b);
}
END_TEST

/* The arena placement both engines use: spans alive at the same time never overlap, spans that
 * are not share bytes, and the arena ends at the highest span. */
START_TEST(test_arena_place)
{
    /* size, first, last, id: a chain a -> b -> c with d alive throughout, e after all */
    onnx_span_t s[] = {
        {.size = 64, .first = 0, .last = 1, .id = 0},
        {.size = 128, .first = 1, .last = 2, .id = 1},
        {.size = 64, .first = 2, .last = 3, .id = 2},
        {.size = 32, .first = 0, .last = 3, .id = 3},
        {.size = 256, .first = 4, .last = 4, .id = 4},
    };
    size_t off[5], end = 0, arena;
    int n = 5, i, j;

    onnx_arena_place(s, n, &arena);
    ck_assert_uint_eq(s[0].size, 256); /* placed largest first */
    for (i = 0; i < n; i++) {
        off[s[i].id] = s[i].offset;
        if (s[i].offset + s[i].size > end)
            end = s[i].offset + s[i].size;
        for (j = 0; j < i; j++) {
            int live = !(s[i].last < s[j].first || s[j].last < s[i].first);
            int overlap =
                s[i].offset < s[j].offset + s[j].size && s[j].offset < s[i].offset + s[i].size;
            ck_assert_msg(!(live && overlap), "spans %d and %d overlap while both alive", s[i].id,
                          s[j].id);
        }
    }
    ck_assert_uint_eq(arena, end);
    ck_assert_uint_eq(arena, 256); /* e reuses everything, and the rest fits below it */
    ck_assert_uint_eq(off[4], 0);
    ck_assert_uint_eq(off[1], 0);   /* b, the largest of the chain, at the bottom */
    ck_assert_uint_eq(off[0], 128); /* a and c share bytes: never alive at once */
    ck_assert_uint_eq(off[2], 128);
    ck_assert_uint_eq(off[3], 192);
    onnx_arena_place(s, 0, &arena);
    ck_assert_uint_eq(arena, 0);
}
END_TEST

/* A whole ResNet-50 v1.5 (bench/onnx/resnet50_onnx, $ONNX_RESNET50): 53 convolutions, each
 * with its BatchNorm folded, every ReLU fused, every residual Add inside one fused cuDNN call that
 * reads the shortcut where it is (no copy anywhere), max pooling on the kernel (it pads), the
 * global average pooling on cuDNN, one product; activations reuse the arena. */
START_TEST(test_resnet50_plan)
{
    const char *model = getenv("ONNX_RESNET50");
    const onnx_cuda_plan_t *pl;
    size_t total = 0;
    int i, fused_sums = 0;
    prog_t p;

    ck_assert_msg(model != NULL, "ONNX_RESNET50 is not set (CTest sets it)");
    plan_open(&p, model, 8);
    pl = &p.prog->plans[p.prog->n_plans - 1];
    ck_assert_uint_eq(pl->batch, 8);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_CONV), 53);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_POOL), 2);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_GEMM), 1);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_COPY), 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_BATCHNORM), 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_BINARY), 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_RELU), 0);
    ck_assert_int_eq(count_steps(pl, ONNX_CUDA_STEP_BCAST),
                     1); /* the fully connected layer's bias */
    ck_assert_int_eq(pl->n_steps, 57);
    for (i = 0; i < 53; i++) {
        const onnx_cuda_conv_step_t *c = &nth_step(pl, ONNX_CUDA_STEP_CONV, i)->u.conv;
        ck_assert_int_ge(c->b, 0);
        if (c->sum) {
            ck_assert(c->fused && c->relu);
            ck_assert_int_ne(pl->t[c->z].slot.root, pl->t[c->y].slot.root);
            fused_sums++;
        }
    }
    ck_assert_int_eq(fused_sums, 16);
    ck_assert(!nth_step(pl, ONNX_CUDA_STEP_POOL, 0)->u.pool.cudnn); /* max pooling with padding */
    ck_assert(nth_step(pl, ONNX_CUDA_STEP_POOL, 1)->u.pool.cudnn);  /* global average */
    for (i = 0; i < pl->n_t; i++)
        if (pl->t[i].slot.root == i && pl->t[i].slot.store == ONNX_STORE_ARENA)
            total += pl->t[i].slot.bytes;
    ck_assert_uint_lt(pl->arena_size * 4, total);
    printf("ResNet-50 plan, batch 8: %d steps, arena %zu MB (%zu MB of tensors), weights %zu MB\n",
           pl->n_steps, pl->arena_size >> 20, total >> 20, p.prog->pool_size >> 20);
    /* The emulated numbers against the CPU engine take about a minute: on request only. */
    if (getenv("ONNX_RESNET50_EMU"))
        emu_vs_cpu(&p, model, 2, 1e-3f, 1e-3f);
    plan_close(&p);
}
END_TEST

TCase *tcase_cuda_plan_resnet50(void)
{
    TCase *tc = tcase_create("cuda_plan_resnet50");
    tcase_set_timeout(tc, getenv("ONNX_RESNET50_EMU") ? 1200 : 120);
    tcase_add_test(tc, test_resnet50_plan);
    return tc;
}

TCase *tcase_cuda_plan(void)
{
    TCase *tc = tcase_create("cuda_plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_arena_place);
    tcase_add_test(tc, test_residual_fused);
    tcase_add_test(tc, test_residual_in_place);
    tcase_add_test(tc, test_residual_copy);
    tcase_add_test(tc, test_asymmetric_and_1d);
    tcase_add_test(tc, test_grouped_and_3d);
    tcase_add_test(tc, test_matmul_batches);
    tcase_add_test(tc, test_gemm_sum_bias);
    tcase_add_test(tc, test_pool_paths);
    tcase_add_test(tc, test_fmnist_plan);
    tcase_add_test(tc, test_plan_errors);
    return tc;
}
