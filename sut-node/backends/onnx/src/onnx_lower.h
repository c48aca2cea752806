/* onnx_lower.h: the lowering both executors share, from an onnx_graph_t to one plan per batch
 * size (onnx_dnnl.c for oneDNN on the CPU, cuda/onnx_cuda_plan.c for the CUDA engine).
 *
 * A plan holds tensors: each IR value a plan touches becomes one, and a view (Reshape,
 * Identity, another layout's descriptor of the same bytes, a residual sum accumulated in place)
 * shares the storage of the root tensor that owns it. Every tensor starts with an onnx_slot_t,
 * the part that both executors treat alike; each appends its own description behind it (a
 * oneDNN memory descriptor, or plain row-major dims) and gives the lowering the whole size.
 *
 * The lowering owns what does not depend on the executor: the walk over the graph (inputs,
 * live nodes, outputs), the map from IR values to tensors, errors that name the node being
 * lowered, a value's dims in a plan, which node reads each value last, whether a tensor's
 * storage dies at a node (so that a residual sum may accumulate in place), each root's lifetime
 * from the tensors every step touches, and the placement of the roots in one arena
 * (onnx_arena.h). The executor supplies, through onnx_lower_ops_t, what it makes of a graph
 * input, a constant, a node and a graph output, and which tensors each of its steps touches.
 *
 * Not thread-safe; one lowering per executor being built. */
#ifndef ONNX_LOWER_H
#define ONNX_LOWER_H

#include "onnx_graph.h"

#include <stddef.h>
#include <stdint.h>

/* Most tensors one step may touch. */
#define ONNX_LOWER_MAX_ARGS 16

/* Where a root's storage lives: the activation arena (intermediate tensors and the staged graph
 * inputs) or the executor's constants. */
typedef enum { ONNX_STORE_ARENA, ONNX_STORE_CONST } onnx_store_t;

typedef struct {
    int root;           /* the tensor that owns the storage (itself for a root) */
    onnx_store_t store; /* of the root */
    int input;          /* the graph input staged in this storage, or -1 */
    size_t bytes;       /* of this tensor as its executor lays it out */
    int first, last;    /* roots: the first and last step that touch the storage */
    size_t offset;      /* ONNX_STORE_ARENA: the place in the arena (a view has its root's) */
} onnx_slot_t;

typedef struct onnx_lower onnx_lower_t;

/* What an executor makes of the graph; |ctx| is its own state. Each returns a tensor index (or
 * 0 for node) or a negative code with the reason set through onnx_lower_fail(). */
typedef struct {
    int (*input)(void *ctx, int i);    /* graph input |i|: a new arena root */
    int (*constant)(void *ctx, int v); /* IR value |v|, a constant the plan reads first */
    int (*node)(void *ctx, const onnx_node_t *n);
    int (*output)(void *ctx, int i); /* graph output |i|, laid out as the caller reads it */
    /* Once every node is lowered: the steps, and the tensors step |s| touches (<= MAX_ARGS). */
    int (*n_steps)(void *ctx);
    int (*step_tensors)(void *ctx, int s, int *t);
} onnx_lower_ops_t;

struct onnx_lower {
    const onnx_graph_t *g;
    cmn_errbuf_t *eb;
    const onnx_node_t *cur; /* the node being lowered, named by onnx_lower_fail() */
    int *last_use;          /* per IR value: the last live node that reads it, or -1 */
    const onnx_lower_ops_t *ops;
    void *ctx;
    size_t align; /* of every root in the arena */

    /* the plan being lowered */
    size_t batch;
    void *t; /* tensors, t_size bytes each, each starting with an onnx_slot_t */
    size_t t_size;
    int n_t, cap_t;
    int *val_t; /* per IR value: its tensor in this plan, or -1 */
    int *in_t;  /* per graph input: its root */
    int *out_t; /* per graph output: the tensor holding it */
    int n_steps;
    size_t arena_size;
};

/* Prepares a lowering of |g| for tensors of |t_size| bytes (>= sizeof(onnx_slot_t), the slot
 * first) placed at multiples of |align|. Returns 0 or -ENOMEM (|eb| says so). */
int onnx_lower_init(onnx_lower_t *lw, const onnx_graph_t *g, const onnx_lower_ops_t *ops, void *ctx,
                    size_t t_size, size_t align, cmn_errbuf_t *eb);
/* Frees what the lowering holds, including a plan's tensors not taken with onnx_lower_take(). */
void onnx_lower_fini(onnx_lower_t *lw);

/* Lowers the plan for |batch| samples: the inputs, every live node and the outputs through the
 * executor's ops, then the lifetimes and the arena placement (lw->arena_size). Afterwards the
 * executor takes the plan's arrays with onnx_lower_take(). */
int onnx_lower_plan(onnx_lower_t *lw, size_t batch);

/* Hands the plan's tensors (lw->n_t of them), its per-input roots and per-output tensors to the
 * caller, who frees all three. */
void *onnx_lower_take(onnx_lower_t *lw, int **in_t, int **out_t);

/* Tensor |i| of the plan being lowered, and its slot; valid until the next new tensor. */
static inline void *onnx_lower_tensor(const onnx_lower_t *lw, int i)
{
    return (uint8_t *)lw->t + (size_t)i * lw->t_size;
}
static inline onnx_slot_t *onnx_lower_slot(const onnx_lower_t *lw, int i)
{
    return (onnx_slot_t *)onnx_lower_tensor(lw, i);
}

/* A new root of |bytes| in |store|, its executor part zeroed. Returns its index or -ENOMEM. */
int onnx_lower_new(onnx_lower_t *lw, onnx_store_t store, size_t bytes);
/* A new view of |of|'s storage, |bytes| long (at most the root's); its executor part is a copy
 * of |of|'s, for the caller to change. Returns its index or -ENOMEM. */
int onnx_lower_alias(onnx_lower_t *lw, int of, size_t bytes);

/* Records that IR value |v| (a node's output) is held by tensor |t| in this plan. */
static inline void onnx_lower_set_value(onnx_lower_t *lw, int v, int t)
{
    lw->val_t[v] = t;
}

/* The tensor of IR value |v| in this plan: the one a node wrote, or a constant entering the
 * plan through ops->constant(). */
int onnx_lower_get(onnx_lower_t *lw, int v);

/* Whether node |n| may overwrite the storage of tensor |t|: an arena activation (not a staged
 * input), where no graph output lives, no value stored there is read after |n|, and |n| does
 * not read it as an input. A residual sum accumulates in place exactly then. */
int onnx_lower_dies_at(const onnx_lower_t *lw, int t, const onnx_node_t *n);

/* IR value |v|'s dims in this plan (the batch applied); rank-0 values become [1]. Returns the
 * rank. */
int onnx_lower_dims(const onnx_lower_t *lw, int v, int64_t *d);

/* Numpy broadcasting: |d| (|r| dims) right-aligned to |rank| dims, leading dims 1, in |al|. */
void onnx_lower_align(const int64_t *d, int r, int rank, int64_t *al);

/* MatMul's shapes with numpy semantics (node |n| of this plan): a vector operand gains a unit
 * dim (a row for the left one, a column for the right one), both are aligned to one rank in
 * |a| and |b|, and |full| is the product's shape before the vectors' unit dims are dropped: the
 * batch dims broadcast, then [m, n]. Returns that rank. */
int onnx_lower_matmul_dims(const onnx_lower_t *lw, const onnx_node_t *n, int64_t *a, int64_t *b,
                           int64_t *full);

/* Sets |lw|'s error: "node "name" (Op): " and the message when a node is being lowered. Returns
 * |rc|. */
int onnx_lower_fail(onnx_lower_t *lw, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Where each graph input (outputs: 1, each graph output) sits in one sample's bytes, and how many
 * bytes it has there. */
void onnx_lower_sample_layout(const onnx_graph_t *g, int outputs, size_t *off, size_t *size);

#endif
