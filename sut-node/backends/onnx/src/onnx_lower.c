/* The lowering both executors share: see onnx_lower.h. */
#include "onnx_lower.h"

#include "onnx_arena.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int onnx_lower_fail(onnx_lower_t *lw, int rc, const char *fmt, ...)
{
    size_t off = 0;
    va_list ap;
    if (!lw->eb)
        return rc;
    if (lw->cur)
        off = (size_t)snprintf(lw->eb->msg, sizeof(lw->eb->msg),
                               "node \"%s\" (%s): ", lw->cur->name, lw->cur->op_type);
    va_start(ap, fmt);
    if (off < sizeof(lw->eb->msg))
        vsnprintf(lw->eb->msg + off, sizeof(lw->eb->msg) - off, fmt, ap);
    va_end(ap);
    return rc;
}

void onnx_lower_sample_layout(const onnx_graph_t *g, int outputs, size_t *off, size_t *size)
{
    const int *vals = outputs ? g->outputs : g->inputs;
    int n = outputs ? g->n_outputs : g->n_inputs, k;
    size_t at = 0;
    for (k = 0; k < n; k++) {
        const onnx_value_t *v = &g->values[vals[k]];
        off[k] = at;
        size[k] = onnx_value_numel(v) * onnx_dtype_size(v->dtype);
        at += size[k];
    }
}

int onnx_lower_init(onnx_lower_t *lw, const onnx_graph_t *g, const onnx_lower_ops_t *ops, void *ctx,
                    size_t t_size, size_t align, cmn_errbuf_t *eb)
{
    int k, j;
    memset(lw, 0, sizeof(*lw));
    lw->g = g;
    lw->eb = eb;
    lw->ops = ops;
    lw->ctx = ctx;
    lw->t_size = t_size;
    lw->align = align;
    lw->last_use = malloc((size_t)g->n_values * sizeof(int) + 1);
    lw->val_t = malloc((size_t)g->n_values * sizeof(int) + 1);
    if (!lw->last_use || !lw->val_t)
        return onnx_lower_fail(lw, -ENOMEM, "out of memory");
    for (k = 0; k < g->n_values; k++)
        lw->last_use[k] = -1;
    for (k = 0; k < g->n_nodes; k++) {
        const onnx_node_t *n = &g->nodes[k];
        if (n->dead)
            continue;
        for (j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                lw->last_use[n->in[j]] = k;
        for (j = 0; j < n->n_post; j++)
            if (n->post[j].kind == ONNX_POST_SUM)
                lw->last_use[n->post[j].value] = k;
    }
    return 0;
}

static void drop_plan(onnx_lower_t *lw)
{
    free(lw->t);
    free(lw->in_t);
    free(lw->out_t);
    lw->t = NULL;
    lw->in_t = lw->out_t = NULL;
    lw->n_t = lw->cap_t = 0;
}

void onnx_lower_fini(onnx_lower_t *lw)
{
    drop_plan(lw);
    free(lw->last_use);
    free(lw->val_t);
    lw->last_use = lw->val_t = NULL;
}

void *onnx_lower_take(onnx_lower_t *lw, int **in_t, int **out_t)
{
    void *t = lw->t;
    *in_t = lw->in_t;
    *out_t = lw->out_t;
    lw->t = NULL;
    lw->in_t = lw->out_t = NULL;
    lw->n_t = lw->cap_t = 0;
    return t;
}

/* ---- tensors --------------------------------------------------------------------------------- */

static int grow(onnx_lower_t *lw)
{
    void *n = onnx_grow(lw->t, lw->n_t, &lw->cap_t, 64, lw->t_size);

    if (!n)
        return onnx_lower_fail(lw, -ENOMEM, "out of memory");
    lw->t = n;
    return 0;
}

int onnx_lower_new(onnx_lower_t *lw, onnx_store_t store, size_t bytes)
{
    onnx_slot_t *s;
    int rc;
    if ((rc = grow(lw)) < 0)
        return rc;
    memset(onnx_lower_tensor(lw, lw->n_t), 0, lw->t_size);
    s = onnx_lower_slot(lw, lw->n_t);
    s->root = lw->n_t;
    s->store = store;
    s->input = -1;
    s->bytes = bytes;
    s->first = INT_MAX;
    s->last = -1;
    return lw->n_t++;
}

int onnx_lower_alias(onnx_lower_t *lw, int of, size_t bytes)
{
    onnx_slot_t *s;
    int rc, root;
    if ((rc = grow(lw)) < 0)
        return rc;
    root = onnx_lower_slot(lw, of)->root;
    memcpy(onnx_lower_tensor(lw, lw->n_t), onnx_lower_tensor(lw, of), lw->t_size);
    s = onnx_lower_slot(lw, lw->n_t);
    *s = *onnx_lower_slot(lw, root);
    s->root = root;
    s->bytes = bytes;
    s->first = INT_MAX;
    s->last = -1;
    return lw->n_t++;
}

int onnx_lower_get(onnx_lower_t *lw, int v)
{
    const onnx_value_t *val = &lw->g->values[v];
    int t;
    if (lw->val_t[v] >= 0)
        return lw->val_t[v];
    if (!val->data)
        return onnx_lower_fail(lw, CMN_EBACKEND, "value \"%s\" is computed by no node", val->name);
    if ((t = lw->ops->constant(lw->ctx, v)) < 0)
        return t;
    lw->val_t[v] = t;
    return t;
}

int onnx_lower_dies_at(const onnx_lower_t *lw, int t, const onnx_node_t *n)
{
    const onnx_graph_t *g = lw->g;
    int root = onnx_lower_slot(lw, t)->root, at = (int)(n - g->nodes), v, j;
    const onnx_slot_t *r = onnx_lower_slot(lw, root);

    if (r->store != ONNX_STORE_ARENA || r->input >= 0)
        return 0;
    for (v = 0; v < g->n_values; v++) {
        int vt = lw->val_t[v];
        if (vt < 0 || onnx_lower_slot(lw, vt)->root != root)
            continue;
        if (g->values[v].output || lw->last_use[v] > at)
            return 0;
        for (j = 0; j < n->n_in; j++)
            if (n->in[j] == v)
                return 0;
    }
    return 1;
}

int onnx_lower_dims(const onnx_lower_t *lw, int v, int64_t *d)
{
    const onnx_value_t *val = &lw->g->values[v];
    int i;
    d[0] = 1; /* rank-0 values; and -O2 cannot see that the loop below sets it otherwise */
    if (val->rank <= 0)
        return 1;
    for (i = 0; i < val->rank; i++)
        d[i] = val->dims[i];
    if (val->batched)
        d[0] *= (int64_t)lw->batch;
    return val->rank;
}

void onnx_lower_align(const int64_t *d, int r, int rank, int64_t *al)
{
    int i;
    for (i = 0; i < rank; i++)
        al[i] = i < rank - r ? 1 : d[i - (rank - r)];
}

int onnx_lower_matmul_dims(const onnx_lower_t *lw, const onnx_node_t *n, int64_t *a, int64_t *b,
                           int64_t *full)
{
    int64_t d[2][ONNX_MAX_RANK], *al[2] = {a, b};
    int r[2], rank, k, i;

    for (k = 0; k < 2; k++) {
        r[k] = onnx_lower_dims(lw, n->in[k], d[k]);
        if (lw->g->values[n->in[k]].rank == 1) {
            if (k == 0) {
                d[0][1] = d[0][0];
                d[0][0] = 1;
            } else {
                d[1][1] = 1;
            }
            r[k] = 2;
        }
    }
    rank = r[0] > r[1] ? r[0] : r[1];
    for (k = 0; k < 2; k++)
        onnx_lower_align(d[k], r[k], rank, al[k]);
    for (i = 0; i < rank - 2; i++)
        full[i] = al[0][i] > al[1][i] ? al[0][i] : al[1][i];
    full[rank - 2] = al[0][rank - 2];
    full[rank - 1] = al[1][rank - 1];
    return rank;
}

/* ---- the walk, lifetimes and placement ---------------------------------------------------------
 */

static int walk(onnx_lower_t *lw)
{
    const onnx_graph_t *g = lw->g;
    int i, t, rc;

    for (i = 0; i < g->n_inputs; i++) {
        if ((t = lw->ops->input(lw->ctx, i)) < 0)
            return t;
        onnx_lower_slot(lw, t)->input = i;
        lw->in_t[i] = t;
        lw->val_t[g->inputs[i]] = t;
    }
    for (i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        lw->cur = &g->nodes[i];
        if ((rc = lw->ops->node(lw->ctx, lw->cur)) < 0)
            return rc;
    }
    lw->cur = NULL;
    for (i = 0; i < g->n_outputs; i++) {
        if ((t = lw->ops->output(lw->ctx, i)) < 0)
            return t;
        lw->out_t[i] = t;
    }
    return 0;
}

/* Each root lives from the first to the last step that touches it through any of its views; the
 * inputs are written before the first step, the outputs read after the last. */
static void lifetimes(onnx_lower_t *lw)
{
    int ts[ONNX_LOWER_MAX_ARGS], i, k, n;
    onnx_slot_t *r;

    lw->n_steps = lw->ops->n_steps(lw->ctx);
    for (i = 0; i < lw->n_steps; i++) {
        n = lw->ops->step_tensors(lw->ctx, i, ts);
        for (k = 0; k < n; k++) {
            r = onnx_lower_slot(lw, onnx_lower_slot(lw, ts[k])->root);
            if (i < r->first)
                r->first = i;
            if (i > r->last)
                r->last = i;
        }
    }
    for (i = 0; i < lw->g->n_inputs; i++) {
        r = onnx_lower_slot(lw, lw->in_t[i]);
        r->first = 0;
        if (r->last < 0)
            r->last = 0;
    }
    for (i = 0; i < lw->g->n_outputs; i++) {
        r = onnx_lower_slot(lw, onnx_lower_slot(lw, lw->out_t[i])->root);
        if (r->first > lw->n_steps)
            r->first = lw->n_steps;
        r->last = lw->n_steps;
    }
}

/* Places the arena roots that some step touches (onnx_arena_place); views take their root's
 * offset. */
static int place(onnx_lower_t *lw)
{
    onnx_span_t *s;
    int n = 0, i;

    if (!(s = malloc((size_t)lw->n_t * sizeof(*s) + 1)))
        return onnx_lower_fail(lw, -ENOMEM, "out of memory");
    for (i = 0; i < lw->n_t; i++) {
        const onnx_slot_t *t = onnx_lower_slot(lw, i);
        if (t->root == i && t->store == ONNX_STORE_ARENA && t->first <= t->last)
            s[n++] = (onnx_span_t){.size = (t->bytes + lw->align - 1) / lw->align * lw->align,
                                   .first = t->first,
                                   .last = t->last,
                                   .id = i};
    }
    onnx_arena_place(s, n, &lw->arena_size);
    for (i = 0; i < n; i++)
        onnx_lower_slot(lw, s[i].id)->offset = s[i].offset;
    free(s);
    for (i = 0; i < lw->n_t; i++) {
        onnx_slot_t *t = onnx_lower_slot(lw, i);
        if (t->root != i)
            t->offset = onnx_lower_slot(lw, t->root)->offset;
    }
    return 0;
}

int onnx_lower_plan(onnx_lower_t *lw, size_t batch)
{
    const onnx_graph_t *g = lw->g;
    int i, rc;

    drop_plan(lw);
    lw->batch = batch;
    lw->arena_size = 0;
    lw->n_steps = 0;
    for (i = 0; i < g->n_values; i++)
        lw->val_t[i] = -1;
    lw->in_t = calloc((size_t)g->n_inputs + 1, sizeof(int));
    lw->out_t = calloc((size_t)g->n_outputs + 1, sizeof(int));
    if (!lw->in_t || !lw->out_t)
        return onnx_lower_fail(lw, -ENOMEM, "out of memory");
    if ((rc = walk(lw)) < 0)
        return rc;
    lifetimes(lw);
    return place(lw);
}
