/* The oneDNN executor: plans built once per batch size, then runs that only execute primitives.
 *
 * Vocabulary: an "xval" is a tensor in one plan (onnx_lower.h), with the oneDNN memory
 * descriptor (layout) it has there. Several xvals can share storage: an alias (Reshape, a
 * grouped view of weights, a Conv that accumulates in place into its residual input) points at
 * a root xval that owns it. Roots are the activation tensors (placed in the arena), the graph
 * inputs (given by the caller, or staged in the arena) and the constants (reordered once, owned
 * by the executor). The walk over the graph, lifetimes and placement are onnx_lower.c's. */
#include "onnx_dnnl.h"

#include "onnx_lower.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS (ONNX_MAX_IN + 2)
#define ALIGN 64

typedef struct {
    onnx_slot_t slot; /* storage, lifetime and place: onnx_lower.h */
    dnnl_memory_desc_t md;
    void *data; /* constants: the contents, laid out as md */
    size_t off; /* bytes from the start of the root's storage (one sample of a batch) */
    dnnl_memory_t mem;
} xval_t;

typedef struct {
    dnnl_primitive_t prim;
    int n_args;
    int arg_id[MAX_ARGS];
    int arg_xv[MAX_ARGS];
    dnnl_memory_desc_t scratch_md;
    size_t scratch_size;
    dnnl_memory_t scratch;
    dnnl_exec_arg_t args[MAX_ARGS + 1];
} step_t;

typedef struct {
    size_t batch;
    xval_t *xv; /* while building: the lowering's array, refreshed by new_xv() and alias() */
    int n_xv;
    step_t *steps;
    int n_steps, cap_steps;
    int *in_xv;   /* per graph input: its root */
    int *out_xv;  /* per graph output: a plain xval holding it */
    int *in_refs; /* the xvals stored in an input, whose memory is re-pointed every run */
    int n_in_refs;
    size_t arena_size, scratch_size;
} plan_t;

/* A constant reordered into a layout (and maybe scaled): shared by every plan that wants it. */
typedef struct {
    const void *src;
    dnnl_memory_desc_t src_md, md;
    float scale;
    void *data;
} cconst_t;

struct onnx_dnnl {
    const onnx_graph_t *g;
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    int threads;
    plan_t *plans;
    size_t n_plans;
    uint8_t *arena;
    size_t arena_size;
    uint8_t *scratch;
    size_t scratch_size;
    cconst_t *consts;
    size_t n_consts, cap_consts, const_bytes;
    uint8_t *gather; /* several graph outputs, interleaved per sample */
    void **inp;      /* per graph input: where it is in the current run */
    size_t *in_off;  /* per graph input: offset in a sample, and size */
    size_t *in_size;
    /* while building */
    onnx_lower_t lw;
    plan_t *cur_plan;
};

/* ---- errors ---------------------------------------------------------------------------------- */

#define fail(x, ...) onnx_lower_fail(&(x)->lw, __VA_ARGS__)

static int dfail(onnx_dnnl_t *x, dnnl_status_t st, const char *what)
{
    if (st == dnnl_out_of_memory)
        return fail(x, -ENOMEM, "out of memory in oneDNN (%s)", what);
    if (st == dnnl_unimplemented)
        return fail(x, CMN_EBACKEND, "oneDNN has no %s for these shapes, types and attributes",
                    what);
    return fail(x, CMN_EBACKEND, "oneDNN %s failed: %s", what, dnnl_status2str(st));
}

#define CK(call, what)                  \
    do {                                \
        dnnl_status_t st_ = (call);     \
        if (st_ != dnnl_success)        \
            return dfail(x, st_, what); \
    } while (0)

/* ---- memory descriptors ---------------------------------------------------------------------- */

static dnnl_data_type_t dt_of(onnx_dtype_t t)
{
    switch (t) {
    case ONNX_DT_FLOAT:
        return dnnl_f32;
    case ONNX_DT_UINT8:
        return dnnl_u8;
    case ONNX_DT_INT8:
        return dnnl_s8;
    case ONNX_DT_INT32:
        return dnnl_s32;
    default:
        return dnnl_data_type_undef;
    }
}

/* Row-major ("plain") layout. */
static void md_plain(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t d, dnnl_data_type_t dt)
{
    dnnl_dims_t s;
    int i;
    s[nd - 1] = 1;
    for (i = nd - 2; i >= 0; i--)
        s[i] = s[i + 1] * d[i + 1];
    dnnl_memory_desc_init_by_strides(md, nd, d, dt, s);
}

static void md_any(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t d, dnnl_data_type_t dt)
{
    dnnl_memory_desc_init_by_tag(md, nd, d, dt, dnnl_format_tag_any);
}

static int md_eq(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
    return dnnl_memory_desc_equal(a, b) != 0;
}

/* ---- xvals and steps ------------------------------------------------------------------------- */

/* A value's dims in this plan, as oneDNN takes them. */
#define vdims(x, v, d) onnx_lower_dims(&(x)->lw, (v), (d))

/* The lowering's array may move with every new xval: |p| follows it. Returns |i|. */
static int synced(plan_t *p, const onnx_lower_t *lw, int i)
{
    p->xv = lw->t;
    p->n_xv = lw->n_t;
    return i;
}

/* Gives the xval |i| just made (or the negative code of its failure) the descriptor |m|: a copy,
 * as |md| of new_xv and alias may point into the array that a new xval moves. */
static int described(onnx_dnnl_t *x, plan_t *p, int i, const dnnl_memory_desc_t *m)
{
    if (i < 0)
        return i;
    synced(p, &x->lw, i);
    p->xv[i].md = *m;
    return i;
}

static int new_xv(onnx_dnnl_t *x, plan_t *p, onnx_store_t store, const dnnl_memory_desc_t *md)
{
    dnnl_memory_desc_t m = *md;

    return described(x, p, onnx_lower_new(&x->lw, store, dnnl_memory_desc_get_size(&m)), &m);
}

/* Another view of |of|'s storage (same bytes, another descriptor of at most the same size). */
static int alias(onnx_dnnl_t *x, plan_t *p, int of, const dnnl_memory_desc_t *md)
{
    dnnl_memory_desc_t m = *md;

    return described(x, p, onnx_lower_alias(&x->lw, of, dnnl_memory_desc_get_size(&m)), &m);
}

/* A view of |off| bytes further into |of|'s storage (one sample of a batched tensor). */
static int alias_at(onnx_dnnl_t *x, plan_t *p, int of, const dnnl_memory_desc_t *md, size_t off)
{
    int i = alias(x, p, of, md);
    if (i >= 0)
        p->xv[i].off += off;
    return i;
}

/* Appends a step that runs the primitive of |pd| (which it destroys) on the given arguments. */
static int add_step(onnx_dnnl_t *x, plan_t *p, dnnl_primitive_desc_t pd, int n, const int *ids,
                    const int *xvs)
{
    const dnnl_memory_desc_t *smd;
    step_t *s;
    dnnl_status_t st;
    int i;

    if (!(s = onnx_grow(p->steps, p->n_steps, &p->cap_steps, 64, sizeof(*s)))) {
        dnnl_primitive_desc_destroy(pd);
        return fail(x, -ENOMEM, "out of memory");
    }
    p->steps = s;
    s = &p->steps[p->n_steps];
    memset(s, 0, sizeof(*s));
    smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (smd && smd->ndims > 0) {
        s->scratch_md = *smd;
        s->scratch_size = dnnl_memory_desc_get_size(smd);
    }
    st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return dfail(x, st, "primitive");
    s->n_args = n;
    for (i = 0; i < n; i++) {
        s->arg_id[i] = ids[i];
        s->arg_xv[i] = xvs[i];
    }
    if (s->scratch_size > p->scratch_size)
        p->scratch_size = s->scratch_size;
    p->n_steps++;
    return 0;
}

/* Creates a primitive descriptor; always destroys |attr|. */
static int make_pd(onnx_dnnl_t *x, const void *desc, dnnl_primitive_attr_t attr,
                   dnnl_primitive_desc_t *pd, const char *what)
{
    dnnl_status_t st = dnnl_primitive_desc_create(pd, desc, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return dfail(x, st, what);
    return 0;
}

/* Attributes: user scratchpad (one buffer shared by every step), an output scale, and the node's
 * post-ops. */
static int make_attr(onnx_dnnl_t *x, const onnx_node_t *n, float oscale, dnnl_primitive_attr_t *out)
{
    dnnl_primitive_attr_t a;
    dnnl_post_ops_t po;
    dnnl_status_t st;
    int i;

    CK(dnnl_primitive_attr_create(&a), "attributes");
    st = dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && oscale != 1.0f)
        st = dnnl_primitive_attr_set_output_scales(a, 1, 0, &oscale);
    if (st == dnnl_success && n && n->n_post) {
        st = dnnl_post_ops_create(&po);
        for (i = 0; st == dnnl_success && i < n->n_post; i++)
            st = n->post[i].kind == ONNX_POST_SUM
                     ? dnnl_post_ops_append_sum(po, 1.0f)
                     : dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(a, po);
        dnnl_post_ops_destroy(po);
    }
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(a);
        return dfail(x, st, "attributes");
    }
    *out = a;
    return 0;
}

/* Runs a reorder now (while building): constants are converted once. */
static int reorder_now(onnx_dnnl_t *x, const dnnl_memory_desc_t *smd, void *src,
                       const dnnl_memory_desc_t *dmd, void *dst, float scale)
{
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t sm = NULL, dm = NULL;
    dnnl_exec_arg_t args[2];
    dnnl_status_t st;
    int rc;

    if ((rc = make_attr(x, NULL, scale, &attr)) < 0)
        return rc;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_library);
    st = dnnl_reorder_primitive_desc_create(&pd, smd, x->eng, dmd, x->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return dfail(x, st, "reorder of a constant");
    st = dnnl_primitive_create(&prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return dfail(x, st, "reorder of a constant");
    st = dnnl_memory_create(&sm, smd, x->eng, src);
    if (st == dnnl_success)
        st = dnnl_memory_create(&dm, dmd, x->eng, dst);
    if (st == dnnl_success) {
        args[0].arg = DNNL_ARG_FROM;
        args[0].memory = sm;
        args[1].arg = DNNL_ARG_TO;
        args[1].memory = dm;
        st = dnnl_primitive_execute(prim, x->stream, 2, args);
        if (st == dnnl_success)
            st = dnnl_stream_wait(x->stream);
    }
    dnnl_memory_destroy(sm);
    dnnl_memory_destroy(dm);
    dnnl_primitive_destroy(prim);
    if (st != dnnl_success)
        return dfail(x, st, "reorder of a constant");
    return 0;
}

/* The constant |src| (laid out as |smd|) in layout |md|, times |scale|: reordered once, shared. */
static int const_in(onnx_dnnl_t *x, plan_t *p, const void *src, const dnnl_memory_desc_t *smd,
                    const dnnl_memory_desc_t *md, float scale)
{
    cconst_t *c;
    size_t i, size;
    int rc, xv;

    for (i = 0; i < x->n_consts; i++) {
        c = &x->consts[i];
        if (c->src == src && c->scale == scale && md_eq(&c->src_md, smd) && md_eq(&c->md, md))
            goto found;
    }
    if (x->n_consts == x->cap_consts) {
        size_t cap = x->cap_consts ? x->cap_consts * 2 : 32;
        cconst_t *n = realloc(x->consts, cap * sizeof(*n));
        if (!n)
            return fail(x, -ENOMEM, "out of memory");
        x->consts = n;
        x->cap_consts = cap;
    }
    c = &x->consts[x->n_consts];
    size = dnnl_memory_desc_get_size(md);
    if (posix_memalign(&c->data, ALIGN, size ? size : ALIGN) != 0)
        return fail(x, -ENOMEM, "out of memory for a constant of %zu bytes", size);
    memset(c->data, 0, size); /* blocked layouts pad with zeros */
    if ((rc = reorder_now(x, smd, (void *)src, md, c->data, scale)) < 0) {
        free(c->data);
        return rc;
    }
    c->src = src;
    c->src_md = *smd;
    c->md = *md;
    c->scale = scale;
    x->const_bytes += size;
    x->n_consts++;
found:
    if ((xv = new_xv(x, p, ONNX_STORE_CONST, md)) < 0)
        return xv;
    p->xv[xv].data = c->data;
    return xv;
}

/* The xval holding IR value |v| in plan |p|; constants enter the plan in their plain layout
 * (lower_constant). */
static int get_xv(onnx_dnnl_t *x, plan_t *p, int v)
{
    return synced(p, &x->lw, onnx_lower_get(&x->lw, v));
}

/* Copies (and converts) |src| into the existing xval |dst| at run time. */
static int add_reorder(onnx_dnnl_t *x, plan_t *p, int src, int dst, float scale)
{
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_status_t st;
    const int ids[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    int xvs[2] = {src, dst}, rc;

    if ((rc = make_attr(x, NULL, scale, &attr)) < 0)
        return rc;
    st = dnnl_reorder_primitive_desc_create(&pd, &p->xv[src].md, x->eng, &p->xv[dst].md, x->eng,
                                            attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return dfail(x, st, "reorder");
    return add_step(x, p, pd, 2, ids, xvs);
}

/* |xv| in layout |md|: itself, a constant reordered now, or a reorder step into a new xval. */
static int ensure(onnx_dnnl_t *x, plan_t *p, int xv, const dnnl_memory_desc_t *md)
{
    int dst, rc;
    if (md_eq(&p->xv[xv].md, md))
        return xv;
    if (p->xv[xv].slot.store == ONNX_STORE_CONST)
        return const_in(x, p, p->xv[xv].data, &p->xv[xv].md, md, 1.0f);
    if ((dst = new_xv(x, p, ONNX_STORE_ARENA, md)) < 0)
        return dst;
    if ((rc = add_reorder(x, p, xv, dst, 1.0f)) < 0)
        return rc;
    return dst;
}

/* |xv| viewed as a plain tensor of |nd| dims |d| (same element count): reordered to plain first
 * when its layout is blocked. */
static int view(onnx_dnnl_t *x, plan_t *p, int xv, int nd, const dnnl_dims_t d)
{
    dnnl_memory_desc_t plain, md;
    int src;
    md_plain(&plain, p->xv[xv].md.ndims, p->xv[xv].md.dims, p->xv[xv].md.data_type);
    if ((src = ensure(x, p, xv, &plain)) < 0)
        return src;
    md_plain(&md, nd, d, plain.data_type);
    if (md_eq(&md, &plain))
        return src;
    return alias(x, p, src, &md);
}

/* The destination of node |n| in layout |md|. With a SUM post-op it must start out holding the
 * addend: in the addend's own buffer when nothing reads that buffer later (a ResNet block's
 * input, itself usually the previous block's accumulator), else in a copy. */
static int make_dst(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n, const dnnl_memory_desc_t *md)
{
    int k, o, ox, dst, rc;

    for (k = 0; k < n->n_post; k++) {
        if (n->post[k].kind != ONNX_POST_SUM)
            continue;
        o = n->post[k].value;
        if ((ox = get_xv(x, p, o)) < 0)
            return ox;
        if (md_eq(&p->xv[ox].md, md) && onnx_lower_dies_at(&x->lw, ox, n))
            return alias(x, p, ox, md); /* accumulate in place */
        if ((dst = new_xv(x, p, ONNX_STORE_ARENA, md)) < 0)
            return dst;
        if ((rc = add_reorder(x, p, ox, dst, 1.0f)) < 0)
            return rc;
        return dst;
    }
    return new_xv(x, p, ONNX_STORE_ARENA, md);
}

/* For the emitters: evaluate, and on a negative result jump to fail_pd (which destroys pd). */
#define TRY(var, expr)              \
    do {                            \
        if (((var) = (expr)) < 0) { \
            rc = (var);             \
            goto fail_pd;           \
        }                           \
    } while (0)

static const dnnl_memory_desc_t *pd_md(dnnl_primitive_desc_t pd, dnnl_query_t q)
{
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

/* ---- one emitter per op ---------------------------------------------------------------------- */

/* Row-major strides of the kernel dims wd[from..nd-1] into |st| (from |from| on); returns their
 * element count. */
static int64_t kernel_strides(const dnnl_dims_t wd, int from, int nd, dnnl_dims_t st)
{
    int64_t k = 1;
    int i;
    for (i = nd - 1; i >= from; i--) {
        st[i] = k;
        k *= wd[i];
    }
    return k;
}

/* The weights of a ConvTranspose as oneDNN's deconvolution reads them: ONNX stores W as
 * [C, M/g, k...] (input channels first); oneDNN's dims are [M, C, k...], or [g, M/g, C/g, k...],
 * so the plain view swaps the strides of the two channel dims instead of moving bytes. */
static void deconv_weights(const dnnl_dims_t wd, int nd, int64_t group, dnnl_memory_desc_t *any,
                           dnnl_memory_desc_t *view)
{
    dnnl_dims_t d, st;
    int64_t k, ocg = wd[1], icg = wd[0] / group;
    int i, o = group > 1;
    k = kernel_strides(wd, 2, nd, st);
    for (i = nd - 1; i >= 2; i--) { /* downwards: moves the kernel strides up by |o| */
        d[i + o] = wd[i];
        st[i + o] = st[i];
    }
    if (o) {
        d[0] = group;
        st[0] = icg * ocg * k;
    }
    d[o] = ocg;
    st[o] = k;
    d[o + 1] = icg;
    st[o + 1] = ocg * k;
    md_any(any, nd + o, d, dnnl_f32);
    dnnl_memory_desc_init_by_strides(view, nd + o, d, dnnl_f32, st);
}

/* Conv and ConvTranspose (oneDNN's convolution and deconvolution): the same arguments, weights
 * viewed differently. */
static int emit_conv(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_memory_desc_t src_md, w_md, b_md, dst_md, w_view;
    dnnl_dims_t sd, wd, od, bd, strides, dil, pl, pr;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_deconvolution_desc_t deconv;
    } cd;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    int ids[5], xvs[5], na = 0, nd, i, s, rc, src, w, b = -1, dst, has_bias;
    int transposed = n->op == ONNX_OP_CONVTRANSPOSE;
    const char *what = transposed ? "deconvolution" : "convolution";

    nd = vdims(x, n->in[0], sd);
    vdims(x, n->in[1], wd);
    vdims(x, n->out, od);
    has_bias = n->n_in > 2 && n->in[2] >= 0;
    for (s = 0; s < n->n_spatial; s++) {
        strides[s] = n->stride[s];
        dil[s] = n->dilation[s] - 1;
        pl[s] = n->pad_l[s];
        pr[s] = n->pad_r[s];
    }
    md_any(&src_md, nd, sd, dnnl_f32);
    md_any(&dst_md, nd, od, dnnl_f32);
    if (transposed) {
        deconv_weights(wd, nd, n->group, &w_md, &w_view);
    } else if (n->group > 1) {
        /* grouped weights: [g, M/g, C/g, k...] */
        dnnl_dims_t gd;
        gd[0] = n->group;
        gd[1] = wd[0] / n->group;
        for (i = 1; i < nd; i++)
            gd[i + 1] = wd[i];
        md_any(&w_md, nd + 1, gd, dnnl_f32);
        md_plain(&w_view, nd + 1, gd, dnnl_f32);
    } else {
        md_any(&w_md, nd, wd, dnnl_f32);
        md_plain(&w_view, nd, wd, dnnl_f32);
    }
    bd[0] = od[1];
    md_plain(&b_md, 1, bd, dnnl_f32);
    if (transposed)
        CK(dnnl_dilated_deconvolution_forward_desc_init(
               &cd.deconv, dnnl_forward_inference, dnnl_deconvolution_direct, &src_md, &w_md,
               has_bias ? &b_md : NULL, &dst_md, strides, dil, pl, pr),
           what);
    else
        CK(dnnl_dilated_convolution_forward_desc_init(
               &cd.conv, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &w_md,
               has_bias ? &b_md : NULL, &dst_md, strides, dil, pl, pr),
           what);
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 || (rc = make_pd(x, &cd, attr, &pd, what)) < 0)
        return rc;

    TRY(src, get_xv(x, p, n->in[0]));
    TRY(src, ensure(x, p, src, pd_md(pd, dnnl_query_src_md)));
    TRY(w, get_xv(x, p, n->in[1]));
    TRY(w, alias(x, p, w, &w_view));
    TRY(w, ensure(x, p, w, pd_md(pd, dnnl_query_weights_md)));
    if (has_bias) {
        TRY(b, get_xv(x, p, n->in[2]));
        TRY(b, ensure(x, p, b, &b_md));
    }
    TRY(dst, make_dst(x, p, n, pd_md(pd, dnnl_query_dst_md)));
    ids[na] = DNNL_ARG_SRC;
    xvs[na++] = src;
    ids[na] = DNNL_ARG_WEIGHTS;
    xvs[na++] = w;
    if (has_bias) {
        ids[na] = DNNL_ARG_BIAS;
        xvs[na++] = b;
    }
    ids[na] = DNNL_ARG_DST;
    xvs[na++] = dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return add_step(x, p, pd, na, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The tail of a one-input, one-output primitive: |src| in the layout |pd| wants, a new arena
 * xval for n's output, and the step. Owns |pd| (add_step does, or it is destroyed here). */
static int add_src_dst_step(onnx_dnnl_t *x, plan_t *p, dnnl_primitive_desc_t pd,
                            const onnx_node_t *n, int src)
{
    const int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int xvs[2], rc, dst;

    TRY(src, ensure(x, p, src, pd_md(pd, dnnl_query_src_md)));
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, pd_md(pd, dnnl_query_dst_md)));
    xvs[0] = src;
    xvs[1] = dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return add_step(x, p, pd, 2, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int emit_pool(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_memory_desc_t dst_md;
    dnnl_dims_t od, strides, kernel, dil, pl, pr;
    dnnl_pooling_v2_desc_t pdsc;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_alg_kind_t alg;
    int nd, s, rc, src;

    if ((src = get_xv(x, p, n->in[0])) < 0)
        return src;
    nd = vdims(x, n->out, od);
    for (s = 0; s < n->n_spatial; s++) {
        strides[s] = n->stride[s];
        kernel[s] = n->kernel[s];
        dil[s] = n->dilation[s] - 1;
        pl[s] = n->pad_l[s];
        pr[s] = n->pad_r[s];
    }
    if (n->op == ONNX_OP_MAXPOOL)
        alg = dnnl_pooling_max;
    else if (n->count_include_pad)
        alg = dnnl_pooling_avg_include_padding;
    else
        alg = dnnl_pooling_avg_exclude_padding;
    md_any(&dst_md, nd, od, p->xv[src].md.data_type);
    /* Pooling works in whatever layout the producer chose (blocked after a Conv). */
    CK(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &p->xv[src].md,
                                         &dst_md, strides, kernel, dil, pl, pr),
       "pooling");
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 ||
        (rc = make_pd(x, &pdsc, attr, &pd, "pooling")) < 0)
        return rc;
    return add_src_dst_step(x, p, pd, n, src);
}

static int emit_batchnorm(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_batch_normalization_desc_t bd;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_memory_desc_t stat_md;
    dnnl_dims_t c;
    /* ONNX input order: X, scale, B, mean, var */
    const int ids[6] = {DNNL_ARG_SRC,  DNNL_ARG_SCALE,    DNNL_ARG_SHIFT,
                        DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DST};
    int xvs[6], i, rc, src, dst;

    if ((src = get_xv(x, p, n->in[0])) < 0)
        return src;
    CK(dnnl_batch_normalization_forward_desc_init(
           &bd, dnnl_forward_inference, &p->xv[src].md, n->epsilon,
           dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift),
       "batch normalization");
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 ||
        (rc = make_pd(x, &bd, attr, &pd, "batch normalization")) < 0)
        return rc;
    c[0] = p->xv[src].md.dims[1];
    md_plain(&stat_md, 1, c, dnnl_f32);
    TRY(src, ensure(x, p, src, pd_md(pd, dnnl_query_src_md)));
    xvs[0] = src;
    for (i = 1; i < 5; i++) {
        TRY(xvs[i], get_xv(x, p, n->in[i]));
        TRY(xvs[i], ensure(x, p, xvs[i], &stat_md));
    }
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, pd_md(pd, dnnl_query_dst_md)));
    xvs[5] = dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return add_step(x, p, pd, 6, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* InstanceNormalization as oneDNN's batch normalization computing its own statistics, one step
 * per sample: each sample is a tensor [1, C, spatial] of the batch's layout at its own offset,
 * whose per-channel statistics are the instance's. The layout is the producer's when oneDNN's
 * normalization takes it (plain, channels-last as brgconv picks, or channel-blocked), else the
 * input is reordered to plain first. A fused ReLU becomes the primitive's fuse_norm_relu flag. */
static int emit_instancenorm(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    static const dnnl_format_tag_t tags[3][5] = {
        {dnnl_ncw, dnnl_nwc, dnnl_nCw16c, dnnl_nCw8c, dnnl_nCw4c},
        {dnnl_nchw, dnnl_nhwc, dnnl_nChw16c, dnnl_nChw8c, dnnl_nChw4c},
        {dnnl_ncdhw, dnnl_ndhwc, dnnl_nCdhw16c, dnnl_nCdhw8c, dnnl_nCdhw4c},
    };
    const int ids[6] = {DNNL_ARG_SRC,  DNNL_ARG_SCALE,    DNNL_ARG_SHIFT,
                        DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DST};
    dnnl_batch_normalization_desc_t bd;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd, one;
    dnnl_memory_desc_t md, smd, stat_md;
    dnnl_dims_t d, sd, cd;
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    int xvs[6], nd, k, rc, src, dst, scale, shift;
    int64_t s;
    size_t per;

    if (n->n_post > 1 || (n->n_post == 1 && n->post[0].kind != ONNX_POST_RELU))
        return fail(x, CMN_EBACKEND, "only a ReLU can be fused into InstanceNormalization");
    if (n->n_post)
        flags |= dnnl_fuse_norm_relu;
    nd = vdims(x, n->in[0], d);
    if (nd < 3 || nd > 5)
        return fail(x, CMN_EBACKEND, "rank %d; 1 to 3 spatial dims are supported", nd);
    if ((src = get_xv(x, p, n->in[0])) < 0)
        return src;
    for (k = 0; k < 5; k++) {
        dnnl_memory_desc_init_by_tag(&md, nd, d, dnnl_f32, tags[nd - 3][k]);
        if (md_eq(&md, &p->xv[src].md))
            break;
    }
    if (k == 5) { /* another layout: plain first */
        k = 0;
        dnnl_memory_desc_init_by_tag(&md, nd, d, dnnl_f32, tags[nd - 3][0]);
        if ((src = ensure(x, p, src, &md)) < 0)
            return src;
    }
    memcpy(sd, d, sizeof(sd));
    sd[0] = 1;
    dnnl_memory_desc_init_by_tag(&smd, nd, sd, dnnl_f32, tags[nd - 3][k]);
    per = dnnl_memory_desc_get_size(&smd); /* every tag above has the sample outermost */
    CK(dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &smd, n->epsilon,
                                                  flags),
       "instance normalization (batch normalization)");
    if ((rc = make_attr(x, NULL, 1.0f, &attr)) < 0 ||
        (rc = make_pd(x, &bd, attr, &pd, "instance normalization (batch normalization)")) < 0)
        return rc;
    cd[0] = d[1];
    md_plain(&stat_md, 1, cd, dnnl_f32);
    TRY(scale, get_xv(x, p, n->in[1]));
    TRY(scale, ensure(x, p, scale, &stat_md));
    TRY(shift, get_xv(x, p, n->in[2]));
    TRY(shift, ensure(x, p, shift, &stat_md));
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, &md));
    for (s = 0; s < d[0]; s++) {
        if (s + 1 < d[0]) {
            if (dnnl_primitive_desc_clone(&one, pd) != dnnl_success) {
                rc = dfail(x, dnnl_out_of_memory, "instance normalization");
                goto fail_pd;
            }
        } else {
            one = pd; /* the last step takes the original */
        }
        if ((xvs[0] = alias_at(x, p, src, &smd, (size_t)s * per)) < 0 ||
            (xvs[3] = new_xv(x, p, ONNX_STORE_ARENA, &stat_md)) < 0 ||
            (xvs[4] = new_xv(x, p, ONNX_STORE_ARENA, &stat_md)) < 0 ||
            (xvs[5] = alias_at(x, p, dst, &smd, (size_t)s * per)) < 0) {
            dnnl_primitive_desc_destroy(one);
            rc = -ENOMEM;
            goto fail_last;
        }
        xvs[1] = scale;
        xvs[2] = shift;
        if ((rc = add_step(x, p, one, 6, ids, xvs)) < 0)
            goto fail_last;
    }
    onnx_lower_set_value(&x->lw, n->out, dst);
    return 0;

fail_last:
    if (s + 1 < d[0])
        dnnl_primitive_desc_destroy(pd);
    return rc < 0 ? rc : fail(x, -ENOMEM, "out of memory");

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Concat in whatever layouts its inputs have; oneDNN picks the output's (blocked channels stay
 * blocked when every input's channel count is a multiple of the block). */
static int emit_concat(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_memory_desc_t mds[ONNX_MAX_IN], dst_md;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_status_t st;
    dnnl_dims_t od;
    int ids[ONNX_MAX_IN + 1], xvs[ONNX_MAX_IN + 1], i, nd, rc, dst;

    for (i = 0; i < n->n_in; i++) {
        if ((xvs[i] = get_xv(x, p, n->in[i])) < 0)
            return xvs[i];
        mds[i] = p->xv[xvs[i]].md;
        ids[i] = DNNL_ARG_MULTIPLE_SRC + i;
    }
    nd = vdims(x, n->out, od);
    md_any(&dst_md, nd, od, mds[0].data_type);
    if ((rc = make_attr(x, NULL, 1.0f, &attr)) < 0)
        return rc;
    st = dnnl_concat_primitive_desc_create(&pd, &dst_md, n->n_in, n->axis, mds, attr, x->eng);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return dfail(x, st, "concat");
    for (i = 0; i < n->n_in; i++)
        TRY(xvs[i], ensure(x, p, xvs[i], dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, i)));
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, pd_md(pd, dnnl_query_dst_md)));
    ids[n->n_in] = DNNL_ARG_DST;
    xvs[n->n_in] = dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return add_step(x, p, pd, n->n_in + 1, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int emit_relu(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    int rc, src;

    if ((src = get_xv(x, p, n->in[0])) < 0)
        return src;
    /* LeakyRelu is oneDNN's relu with a slope below zero */
    CK(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, dnnl_eltwise_relu,
                                      &p->xv[src].md, n->op == ONNX_OP_LEAKYRELU ? n->alpha : 0.0f,
                                      0.0f),
       "relu");
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 || (rc = make_pd(x, &ed, attr, &pd, "relu")) < 0)
        return rc;
    return add_src_dst_step(x, p, pd, n, src);
}

/* Add, Sub, Mul, Div with numpy broadcasting of the second operand (the loader swapped or
 * refused the other cases). */
static int emit_binary(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_dims_t od, d[2], al[2];
    dnnl_memory_desc_t dst_md, s1_md;
    dnnl_binary_desc_t bd;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    dnnl_alg_kind_t alg;
    int ids[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, xvs[3];
    int nd, r[2], k, s0, rc, xv[2], dst;

    nd = vdims(x, n->out, od);
    for (k = 0; k < 2; k++) {
        r[k] = vdims(x, n->in[k], d[k]);
        onnx_lower_align(d[k], r[k], nd, al[k]);
    }
    s0 = memcmp(al[0], od, (size_t)nd * sizeof(dnnl_dim_t)) == 0 ? 0 : 1;
    switch (n->op) {
    case ONNX_OP_ADD:
        alg = dnnl_binary_add;
        break;
    case ONNX_OP_SUB:
        alg = dnnl_binary_sub;
        break;
    case ONNX_OP_MUL:
        alg = dnnl_binary_mul;
        break;
    default:
        alg = dnnl_binary_div;
        break;
    }
    for (k = 0; k < 2; k++) {
        int v = n->in[k == 0 ? s0 : 1 - s0];
        if ((xv[k] = get_xv(x, p, v)) < 0)
            return xv[k];
        if (p->xv[xv[k]].md.ndims != nd &&
            (xv[k] = view(x, p, xv[k], nd, al[k == 0 ? s0 : 1 - s0])) < 0)
            return xv[k];
    }
    /* A full-size second operand follows the first one's layout; a broadcast one stays plain. */
    if (memcmp(al[1 - s0], od, (size_t)nd * sizeof(dnnl_dim_t)) == 0)
        s1_md = p->xv[xv[0]].md;
    else
        md_plain(&s1_md, nd, al[1 - s0], dnnl_f32);
    md_any(&dst_md, nd, od, dnnl_f32);
    CK(dnnl_binary_desc_init(&bd, alg, &p->xv[xv[0]].md, &s1_md, &dst_md), "binary op");
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 ||
        (rc = make_pd(x, &bd, attr, &pd, "binary op")) < 0)
        return rc;
    TRY(xvs[0], ensure(x, p, xv[0], pd_md(pd, dnnl_query_src_md)));
    TRY(xvs[1], ensure(x, p, xv[1], &s1_md));
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, pd_md(pd, dnnl_query_dst_md)));
    xvs[2] = dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return add_step(x, p, pd, 3, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* A matmul primitive for Gemm and MatMul. |a| and |b| are plain views (maybe transposed); a
 * constant |b| is reordered into the layout oneDNN prefers. |bias| is -1 or a plain xval. */
static int matmul_step(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n, int a, int b, int bias,
                       float oscale, const dnnl_memory_desc_t *dst_md_any, int *out)
{
    dnnl_memory_desc_t b_any;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    int ids[4], xvs[4], na = 0, rc, dst;
    int b_const = p->xv[b].slot.store == ONNX_STORE_CONST;

    if (b_const && p->xv[b].md.ndims == 2)
        md_any(&b_any, 2, p->xv[b].md.dims, dnnl_f32);
    else
        b_any = p->xv[b].md;
    CK(dnnl_matmul_desc_init(&md, &p->xv[a].md, &b_any, bias >= 0 ? &p->xv[bias].md : NULL,
                             dst_md_any),
       "matmul");
    if ((rc = make_attr(x, n, oscale, &attr)) < 0 ||
        (rc = make_pd(x, &md, attr, &pd, "matmul")) < 0)
        return rc;
    TRY(b, ensure(x, p, b, pd_md(pd, dnnl_query_weights_md)));
    TRY(dst, make_dst(x, p, n, pd_md(pd, dnnl_query_dst_md)));
    ids[na] = DNNL_ARG_SRC;
    xvs[na++] = a;
    ids[na] = DNNL_ARG_WEIGHTS;
    xvs[na++] = b;
    if (bias >= 0) {
        ids[na] = DNNL_ARG_BIAS;
        xvs[na++] = bias;
    }
    ids[na] = DNNL_ARG_DST;
    xvs[na++] = dst;
    *out = dst;
    return add_step(x, p, pd, na, ids, xvs);

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* A plain 2-D view of |xv| with dims |d| read through strides, so that a transposed operand
 * needs no copy. */
static int strided_view(onnx_dnnl_t *x, plan_t *p, int xv, const dnnl_dims_t d, int trans)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t pd, st;
    int src;
    pd[0] = trans ? d[1] : d[0];
    pd[1] = trans ? d[0] : d[1];
    if ((src = view(x, p, xv, 2, pd)) < 0)
        return src;
    if (!trans)
        return src;
    st[0] = 1;
    st[1] = d[0];
    dnnl_memory_desc_init_by_strides(&md, 2, d, dnnl_f32, st);
    return alias(x, p, src, &md);
}

/* Gemm: Y = alpha * A' B' + beta * C, computed as alpha * (A' B' + (beta / alpha) C) because
 * oneDNN scales after adding the bias. */
static int emit_gemm(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    const onnx_graph_t *g = x->g;
    dnnl_dims_t ad, bd, cd, md, od, vd;
    dnnl_memory_desc_t c_md, dst_md;
    int a, b, c = -1, dst, rc, cr;
    float cscale = n->beta / n->alpha;

    vdims(x, n->in[0], ad);
    vdims(x, n->in[1], bd);
    vdims(x, n->out, od);
    md[0] = n->trans_a ? ad[1] : ad[0];
    md[1] = n->trans_a ? ad[0] : ad[1];
    vd[0] = n->trans_b ? bd[1] : bd[0];
    vd[1] = n->trans_b ? bd[0] : bd[1];
    if ((a = get_xv(x, p, n->in[0])) < 0 || (a = strided_view(x, p, a, md, n->trans_a)) < 0)
        return a;
    if ((b = get_xv(x, p, n->in[1])) < 0 || (b = strided_view(x, p, b, vd, n->trans_b)) < 0)
        return b;
    if (n->n_in > 2 && n->in[2] >= 0 && n->beta != 0.0f) {
        cr = vdims(x, n->in[2], cd);
        if (g->values[n->in[2]].rank < 2) {
            cd[1] = g->values[n->in[2]].rank == 1 ? cd[0] : 1;
            cd[0] = 1;
        }
        md_plain(&c_md, 2, cd, dnnl_f32);
        if ((c = get_xv(x, p, n->in[2])) < 0)
            return c;
        if (p->xv[c].slot.store == ONNX_STORE_CONST) {
            if (cscale != 1.0f)
                c = const_in(x, p, p->xv[c].data, &p->xv[c].md, &p->xv[c].md, cscale);
            if (c >= 0 && cr != 2)
                c = alias(x, p, c, &c_md);
        } else {
            if ((c = view(x, p, c, 2, cd)) >= 0 && cscale != 1.0f) {
                int scaled = new_xv(x, p, ONNX_STORE_ARENA, &c_md);
                if (scaled < 0)
                    return scaled;
                if ((rc = add_reorder(x, p, c, scaled, cscale)) < 0)
                    return rc;
                c = scaled;
            }
        }
        if (c < 0)
            return c;
    }
    md_any(&dst_md, 2, od, dnnl_f32);
    if ((rc = matmul_step(x, p, n, a, b, c, n->alpha, &dst_md, &dst)) < 0)
        return rc;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return 0;
}

/* MatMul with numpy semantics: vectors gain a unit dim, batch dims broadcast. */
static int emit_matmul(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_dims_t al[2], od, full;
    dnnl_memory_desc_t dst_md;
    int rank = onnx_lower_matmul_dims(&x->lw, n, al[0], al[1], full), k, xv[2], dst, rc, on;

    for (k = 0; k < 2; k++)
        if ((xv[k] = get_xv(x, p, n->in[k])) < 0 || (xv[k] = view(x, p, xv[k], rank, al[k])) < 0)
            return xv[k];
    md_any(&dst_md, rank, full, dnnl_f32);
    if ((rc = matmul_step(x, p, n, xv[0], xv[1], -1, 1.0f, &dst_md, &dst)) < 0)
        return rc;
    on = vdims(x, n->out, od);
    if (on != rank || memcmp(od, full, (size_t)rank * sizeof(dnnl_dim_t)) != 0)
        if ((dst = view(x, p, dst, on, od)) < 0)
            return dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return 0;
}

static int emit_reshape(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_dims_t od;
    int nd = vdims(x, n->out, od), src;
    if ((src = get_xv(x, p, n->in[0])) < 0 || (src = view(x, p, src, nd, od)) < 0)
        return src;
    /* A new xval even when nothing changes, so an in-place SUM sees the extra reader. */
    if (src == onnx_lower_get(&x->lw, n->in[0]) && (src = alias(x, p, src, &p->xv[src].md)) < 0)
        return src;
    onnx_lower_set_value(&x->lw, n->out, src);
    return 0;
}

static int emit_softmax(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_dims_t d, v;
    dnnl_softmax_desc_t sd;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd;
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, xvs[2], nd, vn, axis = n->axis, i, rc, src, dst;

    nd = vdims(x, n->in[0], d);
    if (n->softmax_2d) {
        /* opset < 13: over all dims from axis on, as one row */
        v[0] = v[1] = 1;
        for (i = 0; i < nd; i++)
            v[i < axis ? 0 : 1] *= d[i];
        vn = 2;
        axis = 1;
    } else {
        memcpy(v, d, sizeof(v));
        vn = nd;
    }
    if ((src = get_xv(x, p, n->in[0])) < 0 || (src = view(x, p, src, vn, v)) < 0)
        return src;
    CK(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &p->xv[src].md, axis),
       "softmax");
    if ((rc = make_attr(x, n, 1.0f, &attr)) < 0 || (rc = make_pd(x, &sd, attr, &pd, "softmax")) < 0)
        return rc;
    TRY(dst, new_xv(x, p, ONNX_STORE_ARENA, pd_md(pd, dnnl_query_dst_md)));
    xvs[0] = src;
    xvs[1] = dst;
    if ((rc = add_step(x, p, pd, 2, ids, xvs)) < 0)
        return rc;
    if (vn != nd && (dst = view(x, p, dst, nd, d)) < 0)
        return dst;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return 0;

fail_pd:
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int emit_cast(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    dnnl_memory_desc_t md;
    int src, dst, rc;
    if ((src = get_xv(x, p, n->in[0])) < 0)
        return src;
    /* Plain in, plain out: a reorder converts (and applies a folded scale) in one pass. */
    md_plain(&md, p->xv[src].md.ndims, p->xv[src].md.dims, dt_of(n->to));
    if ((src = view(x, p, src, md.ndims, md.dims)) < 0)
        return src;
    if ((dst = new_xv(x, p, ONNX_STORE_ARENA, &md)) < 0)
        return dst;
    if ((rc = add_reorder(x, p, src, dst, n->scale)) < 0)
        return rc;
    onnx_lower_set_value(&x->lw, n->out, dst);
    return 0;
}

static int emit_node(onnx_dnnl_t *x, plan_t *p, const onnx_node_t *n)
{
    int src;
    switch (n->op) {
    case ONNX_OP_CONV:
    case ONNX_OP_CONVTRANSPOSE:
        return emit_conv(x, p, n);
    case ONNX_OP_INSTANCENORM:
        return emit_instancenorm(x, p, n);
    case ONNX_OP_CONCAT:
        return emit_concat(x, p, n);
    case ONNX_OP_MAXPOOL:
    case ONNX_OP_AVGPOOL:
    case ONNX_OP_GLOBALAVGPOOL:
        return emit_pool(x, p, n);
    case ONNX_OP_BATCHNORM:
        return emit_batchnorm(x, p, n);
    case ONNX_OP_RELU:
    case ONNX_OP_LEAKYRELU:
        return emit_relu(x, p, n);
    case ONNX_OP_ADD:
    case ONNX_OP_SUB:
    case ONNX_OP_MUL:
    case ONNX_OP_DIV:
        return emit_binary(x, p, n);
    case ONNX_OP_GEMM:
        return emit_gemm(x, p, n);
    case ONNX_OP_MATMUL:
        return emit_matmul(x, p, n);
    case ONNX_OP_RESHAPE:
        return emit_reshape(x, p, n);
    case ONNX_OP_SOFTMAX:
        return emit_softmax(x, p, n);
    case ONNX_OP_CAST:
        return emit_cast(x, p, n);
    case ONNX_OP_IDENTITY:
        if ((src = get_xv(x, p, n->in[0])) < 0 || (src = alias(x, p, src, &p->xv[src].md)) < 0)
            return src;
        onnx_lower_set_value(&x->lw, n->out, src);
        return 0;
    }
    return fail(x, CMN_EBACKEND, "operator not implemented by the oneDNN executor");
}

/* ---- the executor's part of the lowering (onnx_lower_ops_t) ------------------------------------
 */

static int lower_input(void *ctx, int i)
{
    onnx_dnnl_t *x = ctx;
    const onnx_value_t *v = &x->g->values[x->g->inputs[i]];
    dnnl_memory_desc_t md;
    dnnl_dims_t d;
    int nd = vdims(x, x->g->inputs[i], d);
    md_plain(&md, nd, d, dt_of(v->dtype));
    return new_xv(x, x->cur_plan, ONNX_STORE_ARENA, &md);
}

static int lower_constant(void *ctx, int v)
{
    onnx_dnnl_t *x = ctx;
    const onnx_value_t *val = &x->g->values[v];
    dnnl_memory_desc_t md;
    dnnl_dims_t d;
    int nd, i;

    if (dt_of(val->dtype) == dnnl_data_type_undef)
        return fail(x, CMN_EBACKEND, "%s value \"%s\" cannot be used as a tensor",
                    onnx_dtype_name(val->dtype), val->name);
    nd = vdims(x, v, d);
    md_plain(&md, nd, d, dt_of(val->dtype));
    if ((i = new_xv(x, x->cur_plan, ONNX_STORE_CONST, &md)) < 0)
        return i;
    x->cur_plan->xv[i].data = val->data;
    return i;
}

static int lower_node(void *ctx, const onnx_node_t *n)
{
    onnx_dnnl_t *x = ctx;
    return emit_node(x, x->cur_plan, n);
}

/* A graph output in the plain layout the caller reads. */
static int lower_output(void *ctx, int i)
{
    onnx_dnnl_t *x = ctx;
    plan_t *p = x->cur_plan;
    int v = x->g->outputs[i], xv, nd;
    dnnl_memory_desc_t md;
    dnnl_dims_t d;
    nd = vdims(x, v, d);
    md_plain(&md, nd, d, dt_of(x->g->values[v].dtype));
    if ((xv = get_xv(x, p, v)) < 0)
        return xv;
    return ensure(x, p, xv, &md);
}

static int lower_n_steps(void *ctx)
{
    return ((onnx_dnnl_t *)ctx)->cur_plan->n_steps;
}

static int lower_step_tensors(void *ctx, int s, int *t)
{
    const step_t *st = &((onnx_dnnl_t *)ctx)->cur_plan->steps[s];
    memcpy(t, st->arg_xv, (size_t)st->n_args * sizeof(int));
    return st->n_args;
}

static const onnx_lower_ops_t lower_ops = {
    .input = lower_input,
    .constant = lower_constant,
    .node = lower_node,
    .output = lower_output,
    .n_steps = lower_n_steps,
    .step_tensors = lower_step_tensors,
};

static int build_plan(onnx_dnnl_t *x, plan_t *p)
{
    int rc;
    x->cur_plan = p;
    if ((rc = onnx_lower_plan(&x->lw, p->batch)) < 0) {
        p->xv = NULL; /* the lowering's, freed with it */
        p->n_xv = 0;
        return rc;
    }
    p->n_xv = x->lw.n_t;
    p->arena_size = x->lw.arena_size;
    p->xv = onnx_lower_take(&x->lw, &p->in_xv, &p->out_xv);
    return 0;
}

/* Creates every memory object once the arena and scratchpad exist. */
static int bind_plan(onnx_dnnl_t *x, plan_t *p)
{
    int i, k;
    p->in_refs = malloc((size_t)p->n_xv * sizeof(int));
    if (!p->in_refs)
        return fail(x, -ENOMEM, "out of memory");
    for (i = 0; i < p->n_xv; i++) {
        xval_t *v = &p->xv[i];
        const xval_t *r = &p->xv[v->slot.root];
        uint8_t *h = r->slot.store == ONNX_STORE_CONST ? r->data : x->arena + r->slot.offset;
        h += v->off;
        CK(dnnl_memory_create(&v->mem, &v->md, x->eng, h), "memory");
        if (r->slot.input >= 0)
            p->in_refs[p->n_in_refs++] = i;
    }
    for (i = 0; i < p->n_steps; i++) {
        step_t *s = &p->steps[i];
        for (k = 0; k < s->n_args; k++) {
            s->args[k].arg = s->arg_id[k];
            s->args[k].memory = p->xv[s->arg_xv[k]].mem;
        }
        if (s->scratch_size) {
            CK(dnnl_memory_create(&s->scratch, &s->scratch_md, x->eng, x->scratch), "memory");
            s->args[k].arg = DNNL_ARG_SCRATCHPAD;
            s->args[k].memory = s->scratch;
        }
    }
    return 0;
}

static void free_plan(plan_t *p)
{
    int i;
    for (i = 0; i < p->n_xv; i++)
        if (p->xv[i].mem)
            dnnl_memory_destroy(p->xv[i].mem);
    for (i = 0; i < p->n_steps; i++) {
        dnnl_primitive_destroy(p->steps[i].prim);
        if (p->steps[i].scratch)
            dnnl_memory_destroy(p->steps[i].scratch);
    }
    free(p->xv);
    free(p->steps);
    free(p->in_xv);
    free(p->out_xv);
    free(p->in_refs);
}

/* ---- public API ------------------------------------------------------------------------------ */

int onnx_dnnl_create(const onnx_graph_t *g, int threads, const size_t *batches, size_t n_batches,
                     onnx_dnnl_t **out, cmn_errbuf_t *eb)
{
    onnx_dnnl_t *x;
    size_t i, gather = 0;
    int rc;

    x = calloc(1, sizeof(*x));
    if (!x)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    x->g = g;
    x->threads = threads > 0 ? threads : 1;
    omp_set_num_threads(x->threads);
    x->plans = calloc(n_batches, sizeof(*x->plans));
    x->in_off = calloc((size_t)g->n_inputs + 1, sizeof(size_t));
    x->in_size = calloc((size_t)g->n_inputs + 1, sizeof(size_t));
    x->inp = calloc((size_t)g->n_inputs + 1, sizeof(void *));
    if (!x->plans || !x->in_off || !x->in_size || !x->inp) {
        rc = cmn_errf(eb, -ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = onnx_lower_init(&x->lw, g, &lower_ops, x, sizeof(xval_t), ALIGN, eb)) < 0)
        goto fail;
    onnx_lower_sample_layout(g, 0, x->in_off, x->in_size);

    if (dnnl_engine_create(&x->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&x->stream, x->eng, dnnl_stream_default_flags) != dnnl_success) {
        rc = fail(x, CMN_EBACKEND, "cannot create the oneDNN CPU engine and stream");
        goto fail;
    }
    for (i = 0; i < n_batches; i++) {
        plan_t *p = &x->plans[i];
        p->batch = batches[i];
        x->n_plans++;
        if ((rc = build_plan(x, p)) < 0)
            goto fail;
        if (p->arena_size > x->arena_size)
            x->arena_size = p->arena_size;
        if (p->scratch_size > x->scratch_size)
            x->scratch_size = p->scratch_size;
        if (g->n_outputs > 1 && p->batch * g->output_size > gather)
            gather = p->batch * g->output_size;
    }
    if (posix_memalign((void **)&x->arena, ALIGN, x->arena_size ? x->arena_size : ALIGN) != 0 ||
        posix_memalign((void **)&x->scratch, ALIGN, x->scratch_size ? x->scratch_size : ALIGN) ||
        (gather && !(x->gather = malloc(gather)))) {
        rc = fail(x, -ENOMEM, "out of memory for %zu bytes of activations",
                  x->arena_size + x->scratch_size);
        goto fail;
    }
    /* Input staging is read before it is fully written when a batch is padded: start at zero. */
    memset(x->arena, 0, x->arena_size);
    for (i = 0; i < x->n_plans; i++)
        if ((rc = bind_plan(x, &x->plans[i])) < 0)
            goto fail;
    onnx_lower_fini(&x->lw);
    *out = x;
    return 0;

fail:
    onnx_dnnl_destroy(x);
    return rc;
}

void onnx_dnnl_destroy(onnx_dnnl_t *x)
{
    size_t i;
    if (!x)
        return;
    for (i = 0; i < x->n_plans; i++)
        free_plan(&x->plans[i]);
    for (i = 0; i < x->n_consts; i++)
        free(x->consts[i].data);
    if (x->stream)
        dnnl_stream_destroy(x->stream);
    if (x->eng)
        dnnl_engine_destroy(x->eng);
    free(x->plans);
    free(x->consts);
    free(x->arena);
    free(x->scratch);
    free(x->gather);
    free(x->in_off);
    free(x->in_size);
    free(x->inp);
    onnx_lower_fini(&x->lw);
    free(x);
}

/* Where the storage of xval |i| is in this run. */
static const uint8_t *xv_ptr(const onnx_dnnl_t *x, const plan_t *p, int i, void *const *in_ptr)
{
    const xval_t *r = &p->xv[p->xv[i].slot.root];
    size_t off = p->xv[i].off;
    if (r->slot.store == ONNX_STORE_CONST)
        return (const uint8_t *)r->data + off;
    if (r->slot.input >= 0)
        return (const uint8_t *)in_ptr[r->slot.input] + off;
    return x->arena + r->slot.offset + off;
}

int onnx_dnnl_run(onnx_dnnl_t *x, size_t n, const void *input, const void **output,
                  cmn_errbuf_t *eb)
{
    const onnx_graph_t *g = x->g;
    plan_t *p = NULL;
    void **inp = x->inp;
    size_t i, s;
    int k;
    dnnl_status_t st = dnnl_success;

    for (i = 0; i < x->n_plans; i++)
        if (x->plans[i].batch >= n) {
            p = &x->plans[i];
            break;
        }
    if (!p || n == 0)
        return cmn_errf(eb, CMN_EOVERLOAD,
                        "a batch of %zu samples; the onnx backend was built "
                        "for at most %zu",
                        n, x->n_plans ? x->plans[x->n_plans - 1].batch : 0);
    /* One input and a full batch: oneDNN reads the node's buffer directly. Otherwise each
     * input is gathered into its place in the arena, padding zeroed. */
    for (k = 0; k < g->n_inputs; k++) {
        uint8_t *stage = x->arena + p->xv[p->in_xv[k]].slot.offset;
        if (g->n_inputs == 1 && n == p->batch) {
            inp[k] = (void *)input;
        } else {
            for (s = 0; s < n; s++)
                memcpy(stage + s * x->in_size[k],
                       (const uint8_t *)input + s * g->input_size + x->in_off[k], x->in_size[k]);
            memset(stage + n * x->in_size[k], 0, (p->batch - n) * x->in_size[k]);
            inp[k] = stage;
        }
    }
    for (k = 0; k < p->n_in_refs; k++)
        dnnl_memory_set_data_handle(p->xv[p->in_refs[k]].mem,
                                    (void *)xv_ptr(x, p, p->in_refs[k], inp));
    omp_set_num_threads(x->threads);
    for (k = 0; k < p->n_steps && st == dnnl_success; k++)
        st = dnnl_primitive_execute(p->steps[k].prim, x->stream,
                                    p->steps[k].n_args + (p->steps[k].scratch != NULL),
                                    p->steps[k].args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(x->stream);
    if (st != dnnl_success)
        return cmn_errf(eb, CMN_EBACKEND, "oneDNN step %d of %d failed: %s", k, p->n_steps,
                        dnnl_status2str(st));
    if (g->n_outputs == 1) {
        *output = xv_ptr(x, p, p->out_xv[0], inp);
    } else {
        size_t off = 0;
        for (k = 0; k < g->n_outputs; k++) {
            const onnx_value_t *v = &g->values[g->outputs[k]];
            size_t sz = onnx_value_numel(v) * onnx_dtype_size(v->dtype);
            const uint8_t *src = xv_ptr(x, p, p->out_xv[k], inp);
            for (s = 0; s < n; s++)
                memcpy(x->gather + s * g->output_size + off, src + s * sz, sz);
            off += sz;
        }
        *output = x->gather;
    }
    return 0;
}

size_t onnx_dnnl_memory(const onnx_dnnl_t *x)
{
    return x->arena_size + x->scratch_size + x->const_bytes;
}

static char version_buf[96];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void)
{
    const dnnl_version_t *v = dnnl_version();
    const char *isa;
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
        isa = "sse41";
        break;
    case dnnl_cpu_isa_avx:
        isa = "avx";
        break;
    case dnnl_cpu_isa_avx2:
        isa = "avx2";
        break;
    case dnnl_cpu_isa_avx2_vnni:
        isa = "avx2_vnni";
        break;
    case dnnl_cpu_isa_avx512_core:
        isa = "avx512_core";
        break;
    case dnnl_cpu_isa_avx512_core_vnni:
        isa = "avx512_core_vnni";
        break;
    case dnnl_cpu_isa_avx512_core_bf16:
        isa = "avx512_core_bf16";
        break;
    case dnnl_cpu_isa_avx512_core_amx:
        isa = "avx512_core_amx";
        break;
    default:
        isa = "isa?";
        break;
    }
    snprintf(version_buf, sizeof(version_buf), "oneDNN %d.%d.%d (%s, %s)", v->major, v->minor,
             v->patch, isa, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "threads");
}

const char *onnx_dnnl_version(void)
{
    pthread_once(&version_once, version_init);
    return version_buf;
}
