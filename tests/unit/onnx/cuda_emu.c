/* The CPU emulation of CUDA-engine plans: see cuda_emu.h. */
#include "cuda_emu.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const onnx_cuda_program_t *p;
    const onnx_cuda_plan_t *pl;
    uint8_t *arena, *pool;
} emu_t;

static void *tp(const emu_t *e, int t)
{
    const onnx_cuda_tensor_t *x = &e->pl->t[t];
    ck_assert_int_ge(t, 0);
    ck_assert_int_lt(t, e->pl->n_t);
    if (x->slot.store == ONNX_STORE_CONST) {
        ck_assert_uint_le(x->slot.offset + x->slot.bytes, e->p->pool_size);
        return e->pool + x->slot.offset;
    }
    ck_assert_uint_le(x->slot.offset + x->slot.bytes, e->p->arena_size);
    return e->arena + x->slot.offset;
}

static int64_t numel(const onnx_cuda_tensor_t *t)
{
    return (int64_t)(t->slot.bytes / onnx_dtype_size(t->dtype));
}

/* cudnnConvolutionForward / cudnnConvolutionBiasActivationForward in CUDNN_CROSS_CORRELATION
 * mode, NCHW (or NCDHW) fully packed. */
static void run_conv(const emu_t *e, const onnx_cuda_conv_step_t *c)
{
    const float *x = tp(e, c->x), *w = tp(e, c->w), *b = c->b >= 0 ? tp(e, c->b) : NULL;
    const float *z = c->z >= 0 ? tp(e, c->z) : NULL;
    float *y = tp(e, c->y);
    int xs[3] = {1, 1, 1}, ws[3] = {1, 1, 1}, ys[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
    int st[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, s, off = 3 - c->nsp;
    int N = c->xdims[0], C = c->xdims[1], M = c->wdims[0], cpg = c->wdims[1], mpg;
    int nn, m, od, oh, ow, ci, kd, kh, kw;

    ck_assert(c->nsp == 2 || c->nsp == 3);
    ck_assert_int_eq(c->ydims[0], N);
    ck_assert_int_eq(c->ydims[1], M);
    ck_assert_int_eq(cpg * c->groups, C);
    ck_assert_int_eq(M % c->groups, 0);
    if (c->fused)
        ck_assert_msg(b != NULL, "a fused convolution needs a bias");
    if (c->fused && c->sum)
        ck_assert_msg(e->pl->t[c->z].slot.root != e->pl->t[c->y].slot.root,
                      "a fused convolution must not read its addend from its output");
    if (c->sum && !c->fused)
        ck_assert_msg(z == y, "an unfused residual sum must find its addend in the output");
    if (!c->sum)
        ck_assert(z == NULL);
    mpg = M / c->groups;
    for (s = 0; s < c->nsp; s++) {
        xs[off + s] = c->xdims[2 + s];
        ws[off + s] = c->wdims[2 + s];
        ys[off + s] = c->ydims[2 + s];
        pad[off + s] = c->pad[s];
        st[off + s] = c->stride[s];
        dil[off + s] = c->dil[s];
        /* cuDNN's own output size for these parameters must be the plan's */
        ck_assert_int_eq(ys[off + s],
                         (xs[off + s] + 2 * pad[off + s] - ((ws[off + s] - 1) * dil[off + s] + 1)) /
                                 st[off + s] +
                             1);
    }
    for (nn = 0; nn < N; nn++)
        for (m = 0; m < M; m++)
            for (od = 0; od < ys[0]; od++)
                for (oh = 0; oh < ys[1]; oh++)
                    for (ow = 0; ow < ys[2]; ow++) {
                        int g = m / mpg;
                        size_t yi = ((((size_t)nn * M + m) * ys[0] + od) * ys[1] + oh) * ys[2] + ow;
                        double acc = 0;
                        float v;
                        for (ci = 0; ci < cpg; ci++)
                            for (kd = 0; kd < ws[0]; kd++)
                                for (kh = 0; kh < ws[1]; kh++)
                                    for (kw = 0; kw < ws[2]; kw++) {
                                        int id = od * st[0] - pad[0] + kd * dil[0];
                                        int ih = oh * st[1] - pad[1] + kh * dil[1];
                                        int iw = ow * st[2] - pad[2] + kw * dil[2];
                                        if (id < 0 || id >= xs[0] || ih < 0 || ih >= xs[1] ||
                                            iw < 0 || iw >= xs[2])
                                            continue;
                                        acc +=
                                            (double)
                                                x[((((size_t)nn * C + g * cpg + ci) * xs[0] + id) *
                                                       xs[1] +
                                                   ih) *
                                                      xs[2] +
                                                  iw] *
                                            w[((((size_t)m * cpg + ci) * ws[0] + kd) * ws[1] + kh) *
                                                  ws[2] +
                                              kw];
                                    }
                        v = (float)acc;
                        if (b)
                            v += b[m];
                        if (c->sum)
                            v += z[yi];
                        if (c->relu)
                            v = v > 0 ? v : 0;
                        y[yi] = v;
                    }
}

/* cudnnPoolingForward (MAX, AVERAGE_COUNT_INCLUDE/EXCLUDE_PADDING) or the pooling kernel: both
 * compute onnx_cuda_pool_at; for the cuDNN path the plan must be within what cuDNN can express. */
static void run_pool(const emu_t *e, const onnx_cuda_pool_step_t *p)
{
    const void *x = tp(e, p->x);
    void *y = tp(e, p->y);
    int64_t i;
    int s;
    if (p->cudnn) {
        ck_assert_int_eq(p->k.dtype, ONNX_CUDA_F32);
        for (s = 0; s < p->k.nsp; s++) {
            ck_assert_int_eq(p->k.d[s], 1);
            ck_assert_int_eq(p->k.out[s],
                             (p->k.in[s] + 2 * p->k.pl[s] - p->k.k[s]) / p->k.s[s] + 1);
            if (p->k.max)
                ck_assert_int_eq(p->k.pl[s], 0);
        }
    }
    ck_assert_int_eq(p->k.count, numel(&e->pl->t[p->y]));
    for (i = 0; i < p->k.count; i++)
        onnx_cuda_store(y, p->k.dtype, i, onnx_cuda_pool_at(&p->k, x, i));
}

/* cudnnSoftmaxForward, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL on [outer, axis,
 * inner, 1]. */
static void run_softmax(const emu_t *e, const onnx_cuda_softmax_step_t *s)
{
    const float *x = tp(e, s->x);
    float *y = tp(e, s->y);
    int o, a, in;
    ck_assert_int_eq((int64_t)s->outer * s->axis * s->inner, numel(&e->pl->t[s->x]));
    for (o = 0; o < s->outer; o++)
        for (in = 0; in < s->inner; in++) {
            size_t base = (size_t)o * s->axis * s->inner + in;
            float mx = -INFINITY;
            double sum = 0;
            for (a = 0; a < s->axis; a++)
                mx = x[base + (size_t)a * s->inner] > mx ? x[base + (size_t)a * s->inner] : mx;
            for (a = 0; a < s->axis; a++)
                sum += exp((double)(x[base + (size_t)a * s->inner] - mx));
            for (a = 0; a < s->axis; a++)
                y[base + (size_t)a * s->inner] =
                    (float)(exp((double)(x[base + (size_t)a * s->inner] - mx)) / sum);
        }
}

/* cublasSgemmStridedBatched, column-major: C = alpha op(A) op(B) + beta C. */
static void run_gemm(const emu_t *e, const onnx_cuda_gemm_step_t *g)
{
    const float *a = tp(e, g->a), *b = tp(e, g->b);
    float *c = tp(e, g->c);
    int64_t na = numel(&e->pl->t[g->a]), nb = numel(&e->pl->t[g->b]), nc = numel(&e->pl->t[g->c]);
    int bi, i, j, l;

    ck_assert_int_ge(g->lda, (g->trans_a ? g->k : g->m));
    ck_assert_int_ge(g->ldb, (g->trans_b ? g->n : g->k));
    ck_assert_int_ge(g->ldc, g->m);
    ck_assert_int_ge(g->count, 1);
    for (bi = 0; bi < g->count; bi++) {
        const float *A = a + g->a_off + bi * g->stride_a, *B = b + g->b_off + bi * g->stride_b;
        float *Cm = c + g->c_off + bi * g->stride_c;
        /* every element touched lies inside its tensor */
        ck_assert_int_le(g->a_off + bi * g->stride_a +
                             (int64_t)g->lda * ((g->trans_a ? g->m : g->k) - 1) +
                             (g->trans_a ? g->k : g->m),
                         na);
        ck_assert_int_le(g->b_off + bi * g->stride_b +
                             (int64_t)g->ldb * ((g->trans_b ? g->k : g->n) - 1) +
                             (g->trans_b ? g->n : g->k),
                         nb);
        ck_assert_int_le(g->c_off + bi * g->stride_c + (int64_t)g->ldc * (g->n - 1) + g->m, nc);
        for (j = 0; j < g->n; j++)
            for (i = 0; i < g->m; i++) {
                double acc = 0;
                for (l = 0; l < g->k; l++) {
                    float av = g->trans_a ? A[l + (size_t)i * g->lda] : A[i + (size_t)l * g->lda];
                    float bv = g->trans_b ? B[j + (size_t)l * g->ldb] : B[l + (size_t)j * g->ldb];
                    acc += (double)av * bv;
                }
                Cm[i + (size_t)j * g->ldc] =
                    g->alpha * (float)acc +
                    (g->beta != 0.0f ? g->beta * Cm[i + (size_t)j * g->ldc] : 0.0f);
            }
    }
}

static void run_step(const emu_t *e, const onnx_cuda_step_t *s)
{
    int64_t i;
    switch (s->kind) {
    case ONNX_CUDA_STEP_CONV:
        run_conv(e, &s->u.conv);
        break;
    case ONNX_CUDA_STEP_POOL:
        run_pool(e, &s->u.pool);
        break;
    case ONNX_CUDA_STEP_SOFTMAX:
        run_softmax(e, &s->u.softmax);
        break;
    case ONNX_CUDA_STEP_GEMM:
        run_gemm(e, &s->u.gemm);
        break;
    case ONNX_CUDA_STEP_COPY:
        ck_assert_uint_le(s->u.copy.bytes, e->pl->t[s->u.copy.x].slot.bytes);
        ck_assert_uint_le(s->u.copy.bytes, e->pl->t[s->u.copy.y].slot.bytes);
        memmove(tp(e, s->u.copy.y), tp(e, s->u.copy.x), s->u.copy.bytes);
        break;
    case ONNX_CUDA_STEP_BCAST: {
        const float *x = tp(e, s->u.bcast.x);
        float *y = tp(e, s->u.bcast.y);
        ck_assert_int_eq(s->u.bcast.k.count, numel(&e->pl->t[s->u.bcast.y]));
        for (i = 0; i < s->u.bcast.k.count; i++)
            y[i] = onnx_cuda_bcast_at(&s->u.bcast.k, x, y, i);
        break;
    }
    case ONNX_CUDA_STEP_PAD: {
        const float *x = tp(e, s->u.pad.x);
        float *y = tp(e, s->u.pad.y);
        ck_assert_int_eq(s->u.pad.k.count, numel(&e->pl->t[s->u.pad.y]));
        for (i = 0; i < s->u.pad.k.count; i++) {
            int64_t src = onnx_cuda_pad_source(&s->u.pad.k, i);
            y[i] = src < 0 ? 0.0f : x[src];
        }
        break;
    }
    case ONNX_CUDA_STEP_BINARY: {
        const float *a = tp(e, s->u.binary.a), *b = tp(e, s->u.binary.b);
        float *y = tp(e, s->u.binary.y);
        ck_assert_int_eq(s->u.binary.k.count, numel(&e->pl->t[s->u.binary.y]));
        for (i = 0; i < s->u.binary.k.count; i++)
            y[i] = onnx_cuda_binary_at(&s->u.binary.k, a, b, i);
        break;
    }
    case ONNX_CUDA_STEP_RELU: {
        const float *x = tp(e, s->u.relu.x);
        float *y = tp(e, s->u.relu.y);
        for (i = 0; i < s->u.relu.count; i++)
            y[i] = onnx_cuda_relu(x[i]);
        break;
    }
    case ONNX_CUDA_STEP_BATCHNORM: {
        const onnx_cuda_batchnorm_step_t *b = &s->u.bn;
        const float *x = tp(e, b->x);
        float *y = tp(e, b->y);
        for (i = 0; i < b->k.count; i++)
            y[i] = onnx_cuda_batchnorm_at(&b->k, x, tp(e, b->scale), tp(e, b->shift),
                                          tp(e, b->mean), tp(e, b->var), i);
        break;
    }
    case ONNX_CUDA_STEP_CAST: {
        const void *x = tp(e, s->u.cast.x);
        void *y = tp(e, s->u.cast.y);
        for (i = 0; i < s->u.cast.k.count; i++)
            onnx_cuda_store(y, s->u.cast.k.to, i,
                            onnx_cuda_load(x, s->u.cast.k.from, i) * s->u.cast.k.scale);
        break;
    }
    }
}

void cuda_emu_run(const onnx_cuda_program_t *p, size_t n, const void *input, void *output)
{
    const onnx_graph_t *g = p->g;
    emu_t e;
    size_t s;
    int k;

    e.p = p;
    e.pl = onnx_cuda_program_plan(p, n);
    ck_assert_ptr_nonnull(e.pl);
    e.arena = malloc(p->arena_size + 1);
    e.pool = malloc(p->pool_size + 1);
    ck_assert(e.arena && e.pool);
    memset(e.arena, 0xff, p->arena_size); /* NaN floats: unfilled storage poisons the results */
    onnx_cuda_program_fill_pool(p, e.pool);
    /* The device stages each input contiguously, the padding samples zeroed. */
    for (k = 0; k < g->n_inputs; k++) {
        const onnx_cuda_tensor_t *t = &e.pl->t[e.pl->in_t[k]];
        ck_assert_uint_eq(t->slot.bytes, e.pl->batch * p->in_size[k]);
        for (s = 0; s < n; s++)
            memcpy(e.arena + t->slot.offset + s * p->in_size[k],
                   (const uint8_t *)input + s * g->input_size + p->in_off[k], p->in_size[k]);
        memset(e.arena + t->slot.offset + n * p->in_size[k], 0, (e.pl->batch - n) * p->in_size[k]);
    }
    for (k = 0; k < e.pl->n_steps; k++)
        run_step(&e, &e.pl->steps[k]);
    for (k = 0; k < g->n_outputs; k++) {
        const uint8_t *src = tp(&e, e.pl->out_t[k]);
        for (s = 0; s < n; s++)
            memcpy((uint8_t *)output + s * g->output_size + p->out_off[k], src + s * p->out_size[k],
                   p->out_size[k]);
    }
    free(e.arena);
    free(e.pool);
}

void cuda_emu_check_plans(const onnx_cuda_program_t *p)
{
    size_t i;
    int a, b;
    for (i = 0; i < p->n_plans; i++) {
        const onnx_cuda_plan_t *pl = &p->plans[i];
        ck_assert_uint_le(pl->arena_size, p->arena_size);
        for (a = 0; a < pl->n_t; a++) {
            const onnx_cuda_tensor_t *t = &pl->t[a];
            const onnx_cuda_tensor_t *r = &pl->t[t->slot.root];
            ck_assert_int_eq(r->slot.root, t->slot.root);
            ck_assert_int_eq(t->slot.store, r->slot.store);
            ck_assert_uint_eq(t->slot.offset, r->slot.offset);
            ck_assert_uint_le(t->slot.bytes, r->slot.bytes);
            ck_assert_uint_eq(t->slot.offset % ONNX_CUDA_ALIGN, 0);
            if (t->slot.store == ONNX_STORE_CONST) {
                ck_assert_int_ge(t->konst, 0);
                ck_assert_uint_le(t->slot.offset + t->slot.bytes, p->pool_size);
                continue;
            }
            if (t->slot.root != a || r->slot.first > r->slot.last)
                continue;
            ck_assert_uint_le(t->slot.offset + t->slot.bytes, pl->arena_size);
            for (b = 0; b < a; b++) {
                const onnx_cuda_tensor_t *o = &pl->t[b];
                if (o->slot.root != b || o->slot.store != ONNX_STORE_ARENA ||
                    o->slot.first > o->slot.last)
                    continue;
                if (o->slot.last < t->slot.first || t->slot.last < o->slot.first)
                    continue;
                ck_assert_msg(t->slot.offset + t->slot.bytes <= o->slot.offset ||
                                  o->slot.offset + o->slot.bytes <= t->slot.offset,
                              "plan %zu: tensors %d [%zu, +%zu) and %d [%zu, +%zu) overlap while "
                              "both live (steps %d..%d and %d..%d)",
                              pl->batch, a, t->slot.offset, t->slot.bytes, b, o->slot.offset,
                              o->slot.bytes, t->slot.first, t->slot.last, o->slot.first,
                              o->slot.last);
            }
        }
    }
}
