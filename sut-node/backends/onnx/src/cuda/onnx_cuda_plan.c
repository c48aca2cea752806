/* The CUDA engine's plans, built on the host (see onnx_cuda_plan.h). Vocabulary as in
 * onnx_lower.h: a tensor is a value as one plan stores it; a view (Reshape, Identity, an
 * in-place sum) shares its root's storage. Unlike oneDNN's, every layout here is plain row-major,
 * so views never need a reorder. */
#include "onnx_cuda_plan.h"

#include "onnx_lower.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Builder state for one program; the per-plan parts are reset for each plan. */
typedef struct {
    onnx_cuda_program_t *p;
    const onnx_graph_t *g;
    onnx_cuda_plan_t *pl;
    int *const_of; /* IR value -> its entry in p->consts, or -1 (shared by every plan) */
    onnx_lower_t lw;
} plan_builder_t;

#define fail(x, ...) onnx_lower_fail(&(x)->lw, __VA_ARGS__)
/* A value's dims in this plan. */
#define vdims(x, v, d) onnx_lower_dims(&(x)->lw, (v), (d))

/* cuDNN and cuBLAS take dimensions, counts and leading dimensions as int. */
static int check_int(plan_builder_t *x, int64_t v, const char *what)
{
    if (v < 0 || v > INT_MAX)
        return fail(x, CMN_EBACKEND, "%s of %lld is over the int range of cuDNN and cuBLAS", what,
                    (long long)v);
    return 0;
}

/* ---- tensors and steps ----------------------------------------------------------------------- */

/* The lowering's array may move with every new tensor: the plan follows it. Returns |i|. */
static int synced(plan_builder_t *x, int i)
{
    x->pl->t = x->lw.t;
    x->pl->n_t = x->lw.n_t;
    return i;
}

static void set_shape(onnx_cuda_tensor_t *t, onnx_dtype_t dt, int rank, const int64_t *dims)
{
    t->dtype = dt;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
}

static int new_t(plan_builder_t *x, onnx_store_t store, onnx_dtype_t dt, int rank,
                 const int64_t *dims)
{
    int i =
        onnx_lower_new(&x->lw, store, (size_t)onnx_dims_numel(dims, rank) * onnx_dtype_size(dt));
    if (i < 0)
        return i;
    synced(x, i);
    x->pl->t[i].konst = -1;
    set_shape(&x->pl->t[i], dt, rank, dims);
    return i;
}

/* Another view of |of|'s storage with new dims (the same number of elements or fewer). */
static int alias_t(plan_builder_t *x, int of, int rank, const int64_t *dims)
{
    onnx_dtype_t dt = x->pl->t[of].dtype;
    int i = onnx_lower_alias(&x->lw, of, (size_t)onnx_dims_numel(dims, rank) * onnx_dtype_size(dt));
    if (i < 0)
        return i;
    synced(x, i);
    set_shape(&x->pl->t[i], dt, rank, dims);
    return i;
}

static int add_const(plan_builder_t *x, int value, size_t bytes)
{
    onnx_cuda_program_t *p = x->p;
    onnx_cuda_const_t *n = onnx_grow(p->consts, p->n_consts, &p->cap_consts, 32, sizeof(*n));

    if (!n)
        return fail(x, -ENOMEM, "out of memory");
    p->consts = n;
    p->consts[p->n_consts].value = value;
    p->consts[p->n_consts].bytes = bytes;
    p->consts[p->n_consts].offset = 0;
    return p->n_consts++;
}

/* The tensor of IR value |v| in this plan (lower_constant() for a constant). */
static int get_t(plan_builder_t *x, int v)
{
    return synced(x, onnx_lower_get(&x->lw, v));
}

/* |n| floats of zeros in the pool (a bias for a fused convolution without one). */
static int zeros_t(plan_builder_t *x, int64_t n)
{
    size_t bytes = (size_t)n * sizeof(float);
    int c, t;
    for (c = 0; c < x->p->n_consts; c++)
        if (x->p->consts[c].value < 0 && x->p->consts[c].bytes == bytes)
            break;
    if (c == x->p->n_consts && (c = add_const(x, -1, bytes)) < 0)
        return c;
    if ((t = new_t(x, ONNX_STORE_CONST, ONNX_DT_FLOAT, 1, &n)) < 0)
        return t;
    x->pl->t[t].konst = c;
    return t;
}

static onnx_cuda_step_t *add_step(plan_builder_t *x, onnx_cuda_step_kind_t kind)
{
    onnx_cuda_plan_t *pl = x->pl;
    onnx_cuda_step_t *s = onnx_grow(pl->steps, pl->n_steps, &pl->cap_steps, 64, sizeof(*s));

    if (!s) {
        fail(x, -ENOMEM, "out of memory");
        return NULL;
    }
    pl->steps = s;
    s = &pl->steps[pl->n_steps++];
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->node = x->lw.cur ? (int)(x->lw.cur - x->g->nodes) : -1;
    return s;
}

static int add_copy(plan_builder_t *x, int src, int dst)
{
    onnx_cuda_step_t *s = add_step(x, ONNX_CUDA_STEP_COPY);
    if (!s)
        return -ENOMEM;
    s->u.copy.x = src;
    s->u.copy.y = dst;
    s->u.copy.bytes = x->pl->t[dst].slot.bytes;
    return 0;
}

/* The post-ops of |n| as the engine runs them: an optional residual sum first, then ReLU (any
 * number of them is one). Other orders do not come out of onnx_opt.c; refuse them anyway. */
static int posts(plan_builder_t *x, const onnx_node_t *n, int allow_sum, int *sum, int *relu)
{
    int k;
    *sum = -1;
    *relu = 0;
    for (k = 0; k < n->n_post; k++) {
        if (n->post[k].kind == ONNX_POST_RELU) {
            *relu = 1;
            continue;
        }
        if (!allow_sum || k != 0)
            return fail(x, CMN_EBACKEND,
                        "a residual sum in this position is not supported by "
                        "the CUDA engine");
        *sum = n->post[k].value;
    }
    return 0;
}

/* The output tensor of |n| (dims |d|) when a SUM post-op adds value |sum| to it, and in *z the
 * tensor the addend is read from.
 * |in_place| (an unfused convolution, a product: the call accumulates into its output, beta = 1):
 * the addend's own storage when it dies here, else a new tensor that a copy fills with it first.
 * Otherwise (the fused convolution, which reads the addend as its own operand z): always a new
 * tensor, the addend read where it is. cuDNN does not promise that z may alias y, and an algorithm
 * that writes y before it reads z would lose the addend; the extra arena space is cheap. */
static int sum_dst(plan_builder_t *x, const onnx_node_t *n, int sum, int rank, const int64_t *d,
                   int in_place, int *z)
{
    int zt, y, rc;
    if ((zt = get_t(x, sum)) < 0)
        return zt;
    if (in_place && onnx_lower_dies_at(&x->lw, zt, n) && x->pl->t[zt].dtype == ONNX_DT_FLOAT &&
        x->pl->t[zt].slot.bytes == (size_t)onnx_dims_numel(d, rank) * sizeof(float)) {
        if ((y = alias_t(x, zt, rank, d)) < 0)
            return y;
        *z = y;
        return y;
    }
    if ((y = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, d)) < 0)
        return y;
    if (in_place) {
        if ((rc = add_copy(x, zt, y)) < 0)
            return rc;
        *z = y;
    } else {
        *z = zt;
    }
    return y;
}

static int add_relu(plan_builder_t *x, int t)
{
    onnx_cuda_step_t *s = add_step(x, ONNX_CUDA_STEP_RELU);
    if (!s)
        return -ENOMEM;
    s->u.relu.x = t;
    s->u.relu.y = t;
    s->u.relu.count = (int64_t)(x->pl->t[t].slot.bytes / sizeof(float));
    return 0;
}

/* ---- one emitter per op ---------------------------------------------------------------------- */

static int emit_conv(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t xd[ONNX_MAX_RANK], wd[ONNX_MAX_RANK], yd[ONNX_MAX_RANK];
    int64_t pad[ONNX_MAX_SPATIAL];
    int rank, nsp = n->n_spatial, s, i, xt, wt = -1, bt = -1, yt, zt = -1, sum, relu, rc, asym = 0;
    onnx_cuda_step_t *st;
    onnx_cuda_conv_step_t *c;

    rank = vdims(x, n->in[0], xd);
    vdims(x, n->in[1], wd);
    vdims(x, n->out, yd);
    if ((rc = posts(x, n, 1, &sum, &relu)) < 0)
        return rc;
    if ((xt = get_t(x, n->in[0])) < 0 || (wt = get_t(x, n->in[1])) < 0)
        return xt < 0 ? xt : wt;
    for (s = 0; s < nsp; s++) {
        pad[s] = n->pad_l[s];
        if (n->pad_l[s] != n->pad_r[s])
            asym = 1;
    }
    if (asym) {
        /* cuDNN pads both sides alike: pad explicitly, then convolve without padding. */
        int64_t pd[ONNX_MAX_RANK];
        int xp;
        memcpy(pd, xd, sizeof(pd));
        for (s = 0; s < nsp; s++)
            pd[2 + s] += n->pad_l[s] + n->pad_r[s];
        if ((xp = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, pd)) < 0)
            return xp;
        if (!(st = add_step(x, ONNX_CUDA_STEP_PAD)))
            return -ENOMEM;
        st->u.pad.x = xt;
        st->u.pad.y = xp;
        st->u.pad.k.rank = rank;
        st->u.pad.k.count = onnx_dims_numel(pd, rank);
        for (i = 0; i < rank; i++) {
            st->u.pad.k.in[i] = xd[i];
            st->u.pad.k.out[i] = pd[i];
            st->u.pad.k.pl[i] = i >= 2 ? n->pad_l[i - 2] : 0;
        }
        xt = xp;
        memcpy(xd, pd, sizeof(pd));
        for (s = 0; s < nsp; s++)
            pad[s] = 0;
    }
    if (n->n_in > 2 && n->in[2] >= 0 && (bt = get_t(x, n->in[2])) < 0)
        return bt;
    if (relu && bt < 0 && (bt = zeros_t(x, wd[0])) < 0)
        return bt;
    if (sum >= 0) {
        if ((yt = sum_dst(x, n, sum, rank, yd, !relu, &zt)) < 0)
            return yt;
    } else if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, yd)) < 0) {
        return yt;
    }

    if (!(st = add_step(x, ONNX_CUDA_STEP_CONV)))
        return -ENOMEM;
    c = &st->u.conv;
    c->x = xt;
    c->w = wt;
    c->b = bt;
    c->y = yt;
    c->z = zt;
    c->sum = sum >= 0;
    c->relu = relu;
    c->fused = relu;
    c->groups = (int)n->group;
    c->nsp = nsp < 2 ? 2 : nsp;
    for (i = 0; i < 2; i++) {
        c->xdims[i] = (int)xd[i];
        c->wdims[i] = (int)wd[i];
        c->ydims[i] = (int)yd[i];
        if ((rc = check_int(x, xd[i], "a dimension")) < 0 ||
            (rc = check_int(x, wd[i], "a dimension")) < 0 ||
            (rc = check_int(x, yd[i], "a dimension")) < 0)
            return rc;
    }
    for (s = 0; s < c->nsp; s++) {
        /* 1-D: a leading spatial dim of 1 */
        int m = nsp == 1 ? s - 1 : s;
        int64_t xs = m < 0 ? 1 : xd[2 + m], ws = m < 0 ? 1 : wd[2 + m], ys = m < 0 ? 1 : yd[2 + m];
        if ((rc = check_int(x, xs, "a dimension")) < 0)
            return rc;
        c->xdims[2 + s] = (int)xs;
        c->wdims[2 + s] = (int)ws;
        c->ydims[2 + s] = (int)ys;
        c->pad[s] = m < 0 ? 0 : (int)pad[m];
        c->stride[s] = m < 0 ? 1 : (int)n->stride[m];
        c->dil[s] = m < 0 ? 1 : (int)n->dilation[m];
    }
    if ((rc = check_int(x, onnx_dims_numel(xd, rank), "an element count")) < 0 ||
        (rc = check_int(x, onnx_dims_numel(yd, rank), "an element count")) < 0)
        return rc;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_pool(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t xd[ONNX_MAX_RANK], yd[ONNX_MAX_RANK];
    int rank, s, xt, yt, sym = 1, nodil = 1, nopad = 1, rc, global = n->op == ONNX_OP_GLOBALAVGPOOL;
    onnx_cuda_step_t *st;
    onnx_cuda_pool_step_t *p;

    rank = vdims(x, n->in[0], xd);
    vdims(x, n->out, yd);
    if ((xt = get_t(x, n->in[0])) < 0)
        return xt;
    if ((yt = new_t(x, ONNX_STORE_ARENA, x->pl->t[xt].dtype, rank, yd)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_POOL)))
        return -ENOMEM;
    p = &st->u.pool;
    p->x = xt;
    p->y = yt;
    p->k.nsp = rank - 2;
    p->k.max = n->op == ONNX_OP_MAXPOOL;
    p->k.include_pad = n->op == ONNX_OP_AVGPOOL && n->count_include_pad;
    p->k.dtype = (int)x->pl->t[xt].dtype;
    p->k.count = onnx_dims_numel(yd, rank);
    for (s = 0; s < rank - 2; s++) {
        int64_t pl = global ? 0 : n->pad_l[s], pr = global ? 0 : n->pad_r[s];
        p->k.in[s] = xd[2 + s];
        p->k.out[s] = yd[2 + s];
        p->k.k[s] = global ? xd[2 + s] : n->kernel[s];
        p->k.s[s] = global ? 1 : n->stride[s];
        p->k.d[s] = global ? 1 : n->dilation[s];
        p->k.pl[s] = pl;
        if (pl != pr)
            sym = 0;
        if (pl || pr)
            nopad = 0;
        if (p->k.d[s] != 1)
            nodil = 0;
        if ((rc = check_int(x, p->k.in[s], "a dimension")) < 0 ||
            (rc = check_int(x, p->k.k[s], "a window")) < 0)
            return rc;
    }
    if ((rc = check_int(x, xd[0] * xd[1], "N * C")) < 0)
        return rc;
    /* cuDNN pads symmetrically and has no dilation; how its max pooling treats padding is not
     * specified, so padded max pooling (and everything else) runs on the kernel. */
    p->cudnn = p->k.dtype == ONNX_CUDA_F32 && sym && nodil && (!p->k.max || nopad);
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_softmax(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t d[ONNX_MAX_RANK], outer, ax, inner;
    int rank = vdims(x, n->in[0], d), xt, yt, rc;
    onnx_cuda_step_t *st;

    outer = onnx_dims_numel(d, n->axis);
    if (n->softmax_2d) {
        ax = onnx_dims_numel(d + n->axis, rank - n->axis);
        inner = 1;
    } else {
        ax = d[n->axis];
        inner = onnx_dims_numel(d + n->axis + 1, rank - n->axis - 1);
    }
    if ((rc = check_int(x, outer, "a dimension")) < 0 ||
        (rc = check_int(x, ax, "a dimension")) < 0 ||
        (rc = check_int(x, inner, "a dimension")) < 0 ||
        (rc = check_int(x, outer * ax * inner, "an element count")) < 0)
        return rc;
    if ((xt = get_t(x, n->in[0])) < 0)
        return xt;
    if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, d)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_SOFTMAX)))
        return -ENOMEM;
    st->u.softmax.x = xt;
    st->u.softmax.y = yt;
    st->u.softmax.outer = (int)outer;
    st->u.softmax.axis = (int)ax;
    st->u.softmax.inner = (int)inner;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

/* Row-major strides of |d| aligned to |rank| dims, 0 where the dim broadcasts. */
static void bcast_strides(int rank, const int64_t *al, const int64_t *out, int64_t *st)
{
    int64_t mul = 1;
    int i;
    for (i = rank - 1; i >= 0; i--) {
        st[i] = al[i] == 1 && out[i] != 1 ? 0 : mul;
        mul *= al[i];
    }
}

static int emit_binary(plan_builder_t *x, const onnx_node_t *n)
{
    const onnx_graph_t *g = x->g;
    int64_t od[ONNX_MAX_RANK], d[2][ONNX_MAX_RANK], al[ONNX_MAX_RANK];
    int nd, r, k, t[2], yt, sum, relu, rc;
    onnx_cuda_step_t *st;
    onnx_cuda_binary_args_t *b;

    if ((rc = posts(x, n, 0, &sum, &relu)) < 0)
        return rc;
    nd = vdims(x, n->out, od);
    for (k = 0; k < 2; k++)
        if ((t[k] = get_t(x, n->in[k])) < 0)
            return t[k];
    if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, nd, od)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_BINARY)))
        return -ENOMEM;
    b = &st->u.binary.k;
    st->u.binary.a = t[0];
    st->u.binary.b = t[1];
    st->u.binary.y = yt;
    b->rank = nd;
    b->relu = relu;
    b->count = onnx_dims_numel(od, nd);
    b->op = n->op == ONNX_OP_ADD   ? ONNX_CUDA_ADD
            : n->op == ONNX_OP_SUB ? ONNX_CUDA_SUB
            : n->op == ONNX_OP_MUL ? ONNX_CUDA_MUL
                                   : ONNX_CUDA_DIV;
    memcpy(b->dims, od, (size_t)nd * sizeof(int64_t));
    for (k = 0; k < 2; k++) {
        r = vdims(x, n->in[k], d[k]);
        if (g->values[n->in[k]].rank == 0)
            r = 0;
        onnx_lower_align(d[k], r, nd, al);
        bcast_strides(nd, al, od, k ? b->sb : b->sa);
    }
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_relu(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t d[ONNX_MAX_RANK];
    int rank = vdims(x, n->out, d), xt, yt;
    onnx_cuda_step_t *st;
    if ((xt = get_t(x, n->in[0])) < 0)
        return xt;
    if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, d)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_RELU)))
        return -ENOMEM;
    st->u.relu.x = xt;
    st->u.relu.y = yt;
    st->u.relu.count = onnx_dims_numel(d, rank);
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_batchnorm(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t d[ONNX_MAX_RANK];
    int rank = vdims(x, n->in[0], d), t[5], yt, k;
    onnx_cuda_step_t *st;
    for (k = 0; k < 5; k++)
        if ((t[k] = get_t(x, n->in[k])) < 0)
            return t[k];
    if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, rank, d)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_BATCHNORM)))
        return -ENOMEM;
    st->u.bn.x = t[0];
    st->u.bn.scale = t[1];
    st->u.bn.shift = t[2];
    st->u.bn.mean = t[3];
    st->u.bn.var = t[4];
    st->u.bn.y = yt;
    st->u.bn.k.count = onnx_dims_numel(d, rank);
    st->u.bn.k.channels = d[1];
    st->u.bn.k.inner = onnx_dims_numel(d + 2, rank - 2);
    st->u.bn.k.epsilon = n->epsilon;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

/* Gemm: Y = alpha * A' B' + beta * C (+ a residual sum), then ReLU. */
static int emit_gemm(plan_builder_t *x, const onnx_node_t *n)
{
    const onnx_graph_t *g = x->g;
    int64_t ad[ONNX_MAX_RANK], od[ONNX_MAX_RANK], m, nn, k;
    int at, bt = -1, yt, zt = -1, sum, relu, rc, has_c;
    onnx_cuda_step_t *st;
    onnx_cuda_gemm_step_t *gm;

    if ((rc = posts(x, n, 1, &sum, &relu)) < 0)
        return rc;
    vdims(x, n->in[0], ad);
    vdims(x, n->out, od);
    m = od[0];
    nn = od[1];
    k = n->trans_a ? ad[0] : ad[1];
    if ((rc = check_int(x, m, "a dimension")) < 0 || (rc = check_int(x, nn, "a dimension")) < 0 ||
        (rc = check_int(x, k, "a dimension")) < 0)
        return rc;
    if ((at = get_t(x, n->in[0])) < 0 || (bt = get_t(x, n->in[1])) < 0)
        return at < 0 ? at : bt;
    if (sum >= 0) {
        if ((yt = sum_dst(x, n, sum, 2, od, 1, &zt)) < 0)
            return yt;
    } else if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, 2, od)) < 0) {
        return yt;
    }
    has_c = n->n_in > 2 && n->in[2] >= 0 && n->beta != 0.0f;
    if (has_c) {
        const onnx_value_t *cv = &g->values[n->in[2]];
        int64_t c0 = cv->rank == 2 ? cv->dims[0] : 1;
        int64_t c1 = cv->rank >= 1 ? cv->dims[cv->rank - 1] : 1;
        int ct = get_t(x, n->in[2]);
        if (ct < 0)
            return ct;
        if (cv->batched)
            c0 = x->pl->t[ct].dims[0];
        if (!(st = add_step(x, ONNX_CUDA_STEP_BCAST)))
            return -ENOMEM;
        st->u.bcast.x = ct;
        st->u.bcast.y = yt;
        st->u.bcast.k.rank = 2;
        st->u.bcast.k.accumulate = sum >= 0;
        st->u.bcast.k.scale = n->beta;
        st->u.bcast.k.count = m * nn;
        st->u.bcast.k.dims[0] = m;
        st->u.bcast.k.dims[1] = nn;
        st->u.bcast.k.sx[0] = c0 == 1 ? 0 : c1;
        st->u.bcast.k.sx[1] = c1 == 1 ? 0 : 1;
    }
    if (!(st = add_step(x, ONNX_CUDA_STEP_GEMM)))
        return -ENOMEM;
    gm = &st->u.gemm;
    /* Row-major Y[M,N] = A'[M,K] B'[K,N] is column-major Y^T = B'^T A'^T: cuBLAS's A is the
     * model's B (N x K after op), its B the model's A (K x M after op). */
    gm->a = bt;
    gm->b = at;
    gm->c = yt;
    gm->trans_a = n->trans_b;
    gm->trans_b = n->trans_a;
    gm->m = (int)nn;
    gm->n = (int)m;
    gm->k = (int)k;
    gm->lda = (int)(n->trans_b ? k : nn);
    gm->ldb = (int)(n->trans_a ? m : k);
    gm->ldc = (int)nn;
    gm->count = 1;
    gm->alpha = n->alpha;
    gm->beta = has_c || sum >= 0 ? 1.0f : 0.0f;
    (void)zt;
    if (relu && (rc = add_relu(x, yt)) < 0)
        return rc;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

#define MAX_GEMM_STEPS 4096

/* MatMul with numpy semantics: vectors gain a unit dim, batch dims broadcast. The batch dims
 * run as strided batches where the operands allow it, else as several of them. */
static int emit_matmul(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t al[2][ONNX_MAX_RANK], ob[ONNX_MAX_RANK], od[ONNX_MAX_RANK];
    int64_t m, kk, nn, inner = 1, outer = 1, o, mat[2], stride[2], bst[2][ONNX_MAX_RANK];
    int rank, nb, split, k, i, t[2], yt, zt = -1, sum, relu, rc, on;
    onnx_cuda_step_t *st;

    if ((rc = posts(x, n, 1, &sum, &relu)) < 0)
        return rc;
    rank = onnx_lower_matmul_dims(&x->lw, n, al[0], al[1], ob);
    nb = rank - 2;
    m = al[0][rank - 2];
    kk = al[0][rank - 1];
    nn = al[1][rank - 1];
    if ((rc = check_int(x, m, "a dimension")) < 0 || (rc = check_int(x, kk, "a dimension")) < 0 ||
        (rc = check_int(x, nn, "a dimension")) < 0)
        return rc;
    mat[0] = m * kk;
    mat[1] = kk * nn;
    /* Each operand's element stride for each batch dim (0 where it broadcasts). */
    for (k = 0; k < 2; k++) {
        int64_t mul = mat[k];
        for (i = nb - 1; i >= 0; i--) {
            bst[k][i] = al[k][i] == 1 ? 0 : mul;
            mul *= al[k][i];
        }
    }
    /* The inner batch dims [split, nb) must be, for each operand, all equal to the output's or
     * all 1: then one strided batched call covers them. */
    for (split = 0; split < nb; split++) {
        int ok = 1;
        for (k = 0; k < 2 && ok; k++) {
            int eq = 1, one = 1;
            for (i = split; i < nb; i++) {
                eq &= al[k][i] == ob[i];
                one &= al[k][i] == 1;
            }
            ok = eq || one;
        }
        if (ok)
            break;
    }
    inner = onnx_dims_numel(ob + split, nb - split);
    outer = onnx_dims_numel(ob, split);
    if (outer > MAX_GEMM_STEPS)
        return fail(x, CMN_EBACKEND,
                    "batch dimensions that broadcast into %lld separate products "
                    "(the CUDA engine runs at most %d)",
                    (long long)outer, MAX_GEMM_STEPS);
    for (k = 0; k < 2; k++) {
        /* between inner batches an operand moves one matrix on, or stays (it broadcasts) */
        int eq = 1;
        for (i = split; i < nb; i++)
            eq &= al[k][i] == ob[i];
        stride[k] = inner > 1 && eq ? mat[k] : 0;
    }
    if ((rc = check_int(x, inner, "a batch count")) < 0)
        return rc;

    on = vdims(x, n->out, od);
    for (k = 0; k < 2; k++)
        if ((t[k] = get_t(x, n->in[k])) < 0)
            return t[k];
    if (sum >= 0) {
        if ((yt = sum_dst(x, n, sum, on, od, 1, &zt)) < 0)
            return yt;
    } else if ((yt = new_t(x, ONNX_STORE_ARENA, ONNX_DT_FLOAT, on, od)) < 0) {
        return yt;
    }
    (void)zt;
    for (o = 0; o < outer; o++) {
        int64_t off[2] = {0, 0}, rem = o;
        onnx_cuda_gemm_step_t *gm;
        for (i = split - 1; i >= 0; i--) {
            int64_t idx = rem % ob[i];
            rem /= ob[i];
            for (k = 0; k < 2; k++)
                off[k] += idx * bst[k][i];
        }
        if (!(st = add_step(x, ONNX_CUDA_STEP_GEMM)))
            return -ENOMEM;
        gm = &st->u.gemm;
        gm->a = t[1];
        gm->a_off = off[1];
        gm->b = t[0];
        gm->b_off = off[0];
        gm->c = yt;
        gm->c_off = o * inner * m * nn;
        gm->m = (int)nn;
        gm->n = (int)m;
        gm->k = (int)kk;
        gm->lda = (int)nn;
        gm->ldb = (int)kk;
        gm->ldc = (int)nn;
        gm->stride_a = stride[1];
        gm->stride_b = stride[0];
        gm->stride_c = m * nn;
        gm->count = (int)inner;
        gm->alpha = 1.0f;
        gm->beta = sum >= 0 ? 1.0f : 0.0f;
        if (gm->count > 1 && gm->stride_a == 0 && gm->stride_b == mat[0] && outer == 1 &&
            inner * m <= INT_MAX) {
            /* A shared B: the batches of A are one tall matrix, a single product. */
            gm->n = (int)(inner * m);
            gm->count = 1;
            gm->stride_b = gm->stride_c = 0;
        }
    }
    if (relu && (rc = add_relu(x, yt)) < 0)
        return rc;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_view(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t d[ONNX_MAX_RANK];
    int rank = vdims(x, n->out, d), xt, yt;
    if ((xt = get_t(x, n->in[0])) < 0)
        return xt;
    if ((yt = alias_t(x, xt, rank, d)) < 0)
        return yt;
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_cast(plan_builder_t *x, const onnx_node_t *n)
{
    int64_t d[ONNX_MAX_RANK];
    int rank = vdims(x, n->out, d), xt, yt;
    onnx_cuda_step_t *st;
    if ((xt = get_t(x, n->in[0])) < 0)
        return xt;
    if (x->pl->t[xt].dtype == n->to && n->scale == 1.0f)
        return emit_view(x, n);
    if ((yt = new_t(x, ONNX_STORE_ARENA, n->to, rank, d)) < 0)
        return yt;
    if (!(st = add_step(x, ONNX_CUDA_STEP_CAST)))
        return -ENOMEM;
    st->u.cast.x = xt;
    st->u.cast.y = yt;
    st->u.cast.k.from = (int)x->pl->t[xt].dtype;
    st->u.cast.k.to = (int)n->to;
    st->u.cast.k.scale = n->scale;
    st->u.cast.k.count = onnx_dims_numel(d, rank);
    onnx_lower_set_value(&x->lw, n->out, yt);
    return 0;
}

static int emit_node(plan_builder_t *x, const onnx_node_t *n)
{
    int sum, relu, rc;
    switch (n->op) {
    case ONNX_OP_CONV:
        return emit_conv(x, n);
    case ONNX_OP_GEMM:
        return emit_gemm(x, n);
    case ONNX_OP_MATMUL:
        return emit_matmul(x, n);
    case ONNX_OP_ADD:
    case ONNX_OP_SUB:
    case ONNX_OP_MUL:
    case ONNX_OP_DIV:
        return emit_binary(x, n);
    case ONNX_OP_CONVTRANSPOSE:
    case ONNX_OP_INSTANCENORM:
    case ONNX_OP_LEAKYRELU:
    case ONNX_OP_CONCAT:
        return fail(x, CMN_EBACKEND,
                    "operator not implemented by the CUDA engine (3-D U-Net "
                    "operators run on the CPU engine only)");
    default:
        break;
    }
    /* The rest take no post-ops (onnx_opt.c fuses none into them). */
    if ((rc = posts(x, n, 0, &sum, &relu)) < 0)
        return rc;
    if (relu)
        return fail(x, CMN_EBACKEND, "a fused ReLU here is not supported by the CUDA engine");
    switch (n->op) {
    case ONNX_OP_MAXPOOL:
    case ONNX_OP_AVGPOOL:
    case ONNX_OP_GLOBALAVGPOOL:
        return emit_pool(x, n);
    case ONNX_OP_SOFTMAX:
        return emit_softmax(x, n);
    case ONNX_OP_RELU:
        return emit_relu(x, n);
    case ONNX_OP_BATCHNORM:
        return emit_batchnorm(x, n);
    case ONNX_OP_RESHAPE:
    case ONNX_OP_IDENTITY:
        return emit_view(x, n);
    case ONNX_OP_CAST:
        return emit_cast(x, n);
    default:
        return fail(x, CMN_EBACKEND, "operator not implemented by the CUDA engine");
    }
}

/* ---- lifetimes and placement ----------------------------------------------------------------- */

int onnx_cuda_step_tensors(const onnx_cuda_step_t *s, int *t)
{
    int n = 0;
    switch (s->kind) {
    case ONNX_CUDA_STEP_CONV:
        t[n++] = s->u.conv.x;
        t[n++] = s->u.conv.w;
        t[n++] = s->u.conv.y;
        if (s->u.conv.b >= 0)
            t[n++] = s->u.conv.b;
        if (s->u.conv.z >= 0)
            t[n++] = s->u.conv.z;
        break;
    case ONNX_CUDA_STEP_POOL:
        t[n++] = s->u.pool.x;
        t[n++] = s->u.pool.y;
        break;
    case ONNX_CUDA_STEP_SOFTMAX:
        t[n++] = s->u.softmax.x;
        t[n++] = s->u.softmax.y;
        break;
    case ONNX_CUDA_STEP_GEMM:
        t[n++] = s->u.gemm.a;
        t[n++] = s->u.gemm.b;
        t[n++] = s->u.gemm.c;
        break;
    case ONNX_CUDA_STEP_COPY:
        t[n++] = s->u.copy.x;
        t[n++] = s->u.copy.y;
        break;
    case ONNX_CUDA_STEP_BCAST:
        t[n++] = s->u.bcast.x;
        t[n++] = s->u.bcast.y;
        break;
    case ONNX_CUDA_STEP_PAD:
        t[n++] = s->u.pad.x;
        t[n++] = s->u.pad.y;
        break;
    case ONNX_CUDA_STEP_BINARY:
        t[n++] = s->u.binary.a;
        t[n++] = s->u.binary.b;
        t[n++] = s->u.binary.y;
        break;
    case ONNX_CUDA_STEP_RELU:
        t[n++] = s->u.relu.x;
        t[n++] = s->u.relu.y;
        break;
    case ONNX_CUDA_STEP_BATCHNORM:
        t[n++] = s->u.bn.x;
        t[n++] = s->u.bn.scale;
        t[n++] = s->u.bn.shift;
        t[n++] = s->u.bn.mean;
        t[n++] = s->u.bn.var;
        t[n++] = s->u.bn.y;
        break;
    case ONNX_CUDA_STEP_CAST:
        t[n++] = s->u.cast.x;
        t[n++] = s->u.cast.y;
        break;
    }
    return n;
}

/* ---- the engine's part of the lowering (onnx_lower_ops_t) --------------------------------------
 */

static int lower_input(void *ctx, int i)
{
    plan_builder_t *x = ctx;
    int64_t d[ONNX_MAX_RANK];
    int v = x->g->inputs[i], rank = vdims(x, v, d);
    return new_t(x, ONNX_STORE_ARENA, x->g->values[v].dtype, rank, d);
}

/* A constant enters the pool the first time a plan reads it. */
static int lower_constant(void *ctx, int v)
{
    plan_builder_t *x = ctx;
    const onnx_value_t *val = &x->g->values[v];
    int64_t d[ONNX_MAX_RANK];
    int c, t, rank = vdims(x, v, d);

    if ((c = x->const_of[v]) < 0) {
        if ((c = add_const(x, v, (size_t)onnx_dims_numel(d, rank) * onnx_dtype_size(val->dtype))) <
            0)
            return c;
        x->const_of[v] = c;
    }
    if ((t = new_t(x, ONNX_STORE_CONST, val->dtype, rank, d)) < 0)
        return t;
    x->pl->t[t].konst = c;
    return t;
}

static int lower_node(void *ctx, const onnx_node_t *n)
{
    return emit_node(ctx, n);
}

static int lower_output(void *ctx, int i)
{
    plan_builder_t *x = ctx;
    const onnx_cuda_plan_t *pl = x->pl;
    int t = get_t(x, x->g->outputs[i]);
    if (t < 0)
        return t;
    if (pl->t[t].slot.bytes != pl->batch * x->p->out_size[i])
        return fail(x, CMN_EBACKEND,
                    "graph output \"%s\" has %zu bytes in a batch of %zu, not %zu per sample",
                    x->g->values[x->g->outputs[i]].name, pl->t[t].slot.bytes, pl->batch,
                    x->p->out_size[i]);
    return t;
}

static int lower_n_steps(void *ctx)
{
    return ((plan_builder_t *)ctx)->pl->n_steps;
}

static int lower_step_tensors(void *ctx, int s, int *t)
{
    return onnx_cuda_step_tensors(&((plan_builder_t *)ctx)->pl->steps[s], t);
}

static const onnx_lower_ops_t lower_ops = {
    .input = lower_input,
    .constant = lower_constant,
    .node = lower_node,
    .output = lower_output,
    .n_steps = lower_n_steps,
    .step_tensors = lower_step_tensors,
};

static int build_plan(plan_builder_t *x)
{
    onnx_cuda_plan_t *pl = x->pl;
    int rc;
    if ((rc = onnx_lower_plan(&x->lw, pl->batch)) < 0) {
        pl->t = NULL; /* the lowering's, freed with it */
        pl->n_t = 0;
        return rc;
    }
    pl->n_t = x->lw.n_t;
    pl->arena_size = x->lw.arena_size;
    pl->t = onnx_lower_take(&x->lw, &pl->in_t, &pl->out_t);
    return 0;
}

static void free_plan(onnx_cuda_plan_t *pl)
{
    free(pl->t);
    free(pl->steps);
    free(pl->in_t);
    free(pl->out_t);
}

/* ---- public API ------------------------------------------------------------------------------ */

int onnx_cuda_program_build(const onnx_graph_t *g, const size_t *batches, size_t n_batches,
                            onnx_cuda_program_t **out, cmn_errbuf_t *eb)
{
    onnx_cuda_program_t *p;
    plan_builder_t x;
    size_t i, off;
    int k, rc;

    memset(&x, 0, sizeof(x));
    x.g = g;
    p = calloc(1, sizeof(*p));
    if (!p)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    x.p = p;
    p->g = g;
    p->plans = calloc(n_batches ? n_batches : 1, sizeof(*p->plans));
    p->in_off = calloc((size_t)g->n_inputs + 1, sizeof(size_t));
    p->in_size = calloc((size_t)g->n_inputs + 1, sizeof(size_t));
    p->out_off = calloc((size_t)g->n_outputs + 1, sizeof(size_t));
    p->out_size = calloc((size_t)g->n_outputs + 1, sizeof(size_t));
    x.const_of = malloc((size_t)g->n_values * sizeof(int) + 1);
    if (!p->plans || !p->in_off || !p->in_size || !p->out_off || !p->out_size || !x.const_of) {
        rc = cmn_errf(eb, -ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = onnx_lower_init(&x.lw, g, &lower_ops, &x, sizeof(onnx_cuda_tensor_t), ONNX_CUDA_ALIGN,
                              eb)) < 0)
        goto fail;
    for (k = 0; k < g->n_values; k++)
        x.const_of[k] = -1;
    onnx_lower_sample_layout(g, 0, p->in_off, p->in_size);
    onnx_lower_sample_layout(g, 1, p->out_off, p->out_size);
    for (i = 0; i < n_batches; i++) {
        x.pl = &p->plans[i];
        x.pl->batch = batches[i];
        p->n_plans++;
        if ((rc = build_plan(&x)) < 0)
            goto fail;
        if (x.pl->arena_size > p->arena_size)
            p->arena_size = x.pl->arena_size;
    }
    for (off = 0, k = 0; k < p->n_consts; k++) {
        p->consts[k].offset = off;
        off += (p->consts[k].bytes + ONNX_CUDA_ALIGN - 1) / ONNX_CUDA_ALIGN * ONNX_CUDA_ALIGN;
    }
    p->pool_size = off;
    for (i = 0; i < p->n_plans; i++)
        for (k = 0; k < p->plans[i].n_t; k++) {
            onnx_cuda_tensor_t *t = &p->plans[i].t[k];
            if (t->slot.store == ONNX_STORE_CONST)
                t->slot.offset = p->consts[t->konst].offset;
        }
    onnx_lower_fini(&x.lw);
    free(x.const_of);
    *out = p;
    return 0;

fail:
    onnx_lower_fini(&x.lw);
    free(x.const_of);
    onnx_cuda_program_free(p);
    return rc;
}

void onnx_cuda_program_free(onnx_cuda_program_t *p)
{
    size_t i;
    if (!p)
        return;
    for (i = 0; i < p->n_plans; i++)
        free_plan(&p->plans[i]);
    free(p->plans);
    free(p->consts);
    free(p->in_off);
    free(p->in_size);
    free(p->out_off);
    free(p->out_size);
    free(p);
}

const onnx_cuda_plan_t *onnx_cuda_program_plan(const onnx_cuda_program_t *p, size_t n)
{
    size_t i;
    if (n == 0)
        return NULL;
    for (i = 0; i < p->n_plans; i++)
        if (p->plans[i].batch >= n)
            return &p->plans[i];
    return NULL;
}

void onnx_cuda_program_fill_pool(const onnx_cuda_program_t *p, void *pool)
{
    int k;
    memset(pool, 0, p->pool_size);
    for (k = 0; k < p->n_consts; k++)
        if (p->consts[k].value >= 0)
            memcpy((uint8_t *)pool + p->consts[k].offset, p->g->values[p->consts[k].value].data,
                   p->consts[k].bytes);
}
