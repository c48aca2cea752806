/* onnx_graph.h: the backend's intermediate representation of an ONNX model.
 *
 * onnx_graph_load() parses a model file (protobuf-c code generated from Debian's onnx.proto),
 * checks every node against what the backend supports, infers every tensor's shape and type,
 * decides whether the first dimension is a batch axis, and runs the graph-level optimisations
 * (BatchNormalization folded into the preceding Conv, ReLU and residual Add fused into their
 * producer as post-ops). The result knows nothing about oneDNN or CUDA: an executor (onnx_dnnl.h,
 * cuda/onnx_cuda_plan.h, both through onnx_lower.h) turns it into something that runs.
 *
 * Shapes are stored for one sample: when the graph is batched (graph->batched), dims[0] of every
 * value with value->batched set is multiplied by the batch size at run time (it is 1 for the
 * inputs; a Flatten or Reshape can make it larger, as [3, 20] for three rows per sample). A graph
 * that cannot be batched (a fixed first dimension other than 1, or a node that mixes samples, such
 * as Softmax over axis 0) has batched = 0 and is run on whole tensors, one sample per batch.
 *
 * A graph is immutable after loading and may be read from any thread. */
#ifndef ONNX_GRAPH_H
#define ONNX_GRAPH_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

#define ONNX_MAX_RANK 8
#define ONNX_MAX_SPATIAL 3
#define ONNX_MAX_IN 8
#define ONNX_MAX_POST 4

/* Element types, numbered as onnx.TensorProto.DataType. */
typedef enum {
    ONNX_DT_FLOAT = 1,
    ONNX_DT_UINT8 = 2,
    ONNX_DT_INT8 = 3,
    ONNX_DT_INT32 = 6,
    ONNX_DT_INT64 = 7, /* constants only (Reshape shapes) */
} onnx_dtype_t;

typedef struct {
    char *name;
    onnx_dtype_t dtype;
    int rank;
    int64_t dims[ONNX_MAX_RANK]; /* for one sample when batched */
    int batched;                 /* dims[0] scales with the batch size */
    void *data;                  /* constants: row-major contents (owned); NULL at run time */
    int producer;                /* index of the live node that writes it, or -1 */
    int input;                   /* index in graph->inputs, or -1 */
    int output;                  /* 1 when it is a graph output */
    int uses;                    /* live consumers (inputs and post-op operands) */
} onnx_value_t;

typedef enum {
    ONNX_OP_CONV,
    ONNX_OP_RELU,
    ONNX_OP_MAXPOOL,
    ONNX_OP_AVGPOOL,
    ONNX_OP_GLOBALAVGPOOL,
    ONNX_OP_BATCHNORM,
    ONNX_OP_ADD,
    ONNX_OP_SUB,
    ONNX_OP_MUL,
    ONNX_OP_DIV,
    ONNX_OP_GEMM,
    ONNX_OP_MATMUL,
    ONNX_OP_RESHAPE, /* Reshape and Flatten: a new shape over the same row-major bytes */
    ONNX_OP_SOFTMAX,
    ONNX_OP_IDENTITY,
    ONNX_OP_CAST,
    ONNX_OP_CONVTRANSPOSE,
    ONNX_OP_INSTANCENORM,
    ONNX_OP_LEAKYRELU,
    ONNX_OP_CONCAT,
} onnx_op_t;

/* Work fused into a node's output, applied in order: dst = relu(dst) or dst += value. */
typedef enum { ONNX_POST_RELU, ONNX_POST_SUM } onnx_post_kind_t;

typedef struct {
    onnx_post_kind_t kind;
    int value; /* ONNX_POST_SUM: the value added (same shape and type as the output) */
} onnx_post_t;

typedef struct {
    onnx_op_t op;
    const char *op_type; /* as in the model, for messages */
    char *name;          /* the node's name, or "#<index>" when the model gives none */
    int n_in;
    int in[ONNX_MAX_IN]; /* value indices; -1 for an omitted optional input */
    int out;
    int dead; /* removed by an optimisation */
    int n_post;
    onnx_post_t post[ONNX_MAX_POST];

    /* Conv, ConvTranspose, pooling: one entry per spatial dimension. Pads are explicit here
     * (auto_pad and ceil_mode resolved); pad_r may exceed the model's pads where ceil_mode asks
     * for it. ConvTranspose: pad_r is the end pad less output_padding (negative where the
     * output grows past the last window), so out = (in - 1) * stride + eff - pad_l - pad_r. */
    int n_spatial;
    int64_t kernel[ONNX_MAX_SPATIAL];
    int64_t stride[ONNX_MAX_SPATIAL];
    int64_t dilation[ONNX_MAX_SPATIAL];
    int64_t pad_l[ONNX_MAX_SPATIAL];
    int64_t pad_r[ONNX_MAX_SPATIAL];
    int64_t group;         /* Conv, ConvTranspose */
    int count_include_pad; /* AveragePool */
    float alpha, beta;     /* Gemm; LeakyRelu: alpha, the slope below zero */
    int trans_a, trans_b;  /* Gemm */
    float epsilon;         /* BatchNormalization, InstanceNormalization */
    int axis;              /* Softmax, Concat: normalised to 0..rank-1 */
    int softmax_2d;        /* Softmax before opset 13: over all dims from axis on */
    onnx_dtype_t to;       /* Cast */
    float scale;           /* Cast: dst = src * scale (a folded Mul or Div by a constant) */
} onnx_node_t;

typedef struct {
    onnx_value_t *values;
    int n_values, cap_values;
    onnx_node_t *nodes; /* in execution (topological) order; skip the dead ones */
    int n_nodes, cap_nodes;
    int *inputs; /* runtime graph inputs, in model order: the sample bytes, back to back */
    int n_inputs;
    int *outputs; /* graph outputs, in model order: the result bytes, back to back */
    int n_outputs;
    int64_t opset;       /* of the default ("ai.onnx") domain */
    int batched;         /* dims[0] of every input and output is the batch axis */
    char unbatched[256]; /* why batched is 0, when the model's batch dim was symbolic or 1 */
    size_t input_size;   /* bytes per sample, all inputs */
    size_t output_size;  /* bytes per sample, all outputs */
} onnx_graph_t;

/* The loader (onnx_graph.c): loads and checks the model at |path|. Returns 0 and *out, or
 * CMN_EFORMAT (not a readable ONNX model, or an unsupported operator, attribute, type or shape:
 * |eb| names the node and op), a negated errno (the file cannot be read) or -ENOMEM. */
int onnx_graph_load(const char *path, onnx_graph_t **out, cmn_errbuf_t *eb);

/* Graph-level optimisations, run by onnx_graph_load() (onnx_opt.c). */
void onnx_graph_optimize(onnx_graph_t *g);

/* The IR itself (onnx_ir.c), which the loader and the optimisations build on. */
void onnx_graph_free(onnx_graph_t *g);

/* Appends an empty value named |name| (copied), with no producer. Returns its index or -ENOMEM.
 * The graph's values array may move. */
int onnx_graph_add_value(onnx_graph_t *g, const char *name);

/* Room for entry |n| of |arr|, an array of |size|-byte entries with room for *cap: when it is
 * full, the array reallocated to twice *cap (|first| when empty) and *cap updated. Returns the
 * array, moved or not, or NULL when out of memory (|arr| and *cap as they were). */
void *onnx_grow(void *arr, int n, int *cap, int first, size_t size);

size_t onnx_dtype_size(onnx_dtype_t t);
const char *onnx_dtype_name(int onnx_type);
/* The product of |rank| dims (1 for rank 0). */
int64_t onnx_dims_numel(const int64_t *dims, int rank);
/* Elements of |v| for one sample (or the whole tensor when not batched). */
size_t onnx_value_numel(const onnx_value_t *v);

/* Reads an onnx.TensorProto file (as the ONNX test vectors store them) into a row-major buffer
 * of its declared type; for tests and tools. Returns 0, or CMN_EFORMAT / a negated errno. */
typedef struct {
    onnx_dtype_t dtype;
    int rank;
    int64_t dims[ONNX_MAX_RANK];
    void *data;  /* malloc'd */
    size_t size; /* bytes */
} onnx_tensor_t;

int onnx_tensor_read(const char *path, onnx_tensor_t *t, cmn_errbuf_t *eb);

#endif
