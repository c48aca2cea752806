/* onnx_cuda_plan.h: what the CUDA engine will run, computed on the host without a device.
 *
 * onnx_cuda_program_build() turns an onnx_graph_t into one plan per batch size: a list of steps,
 * each with every parameter its cuDNN, cuBLAS or kernel call needs already resolved (tensor dims
 * for the descriptors, cuBLAS operations, leading dimensions and strides, kernel parameter blocks),
 * and every tensor placed at a byte offset in one of two memories:
 *
 *   - the arena: activations and the staged graph inputs, one arena per CUDA stream, as large as
 *     the largest plan needs (placed by onnx_lower.h, the lowering the oneDNN executor shares);
 *   - the constant pool: the weights and other constants that steps read, uploaded once at load
 *     and shared by every plan and stream.
 *
 * All tensors are plain row-major (NCHW for images): Reshape, Flatten and Identity are views of
 * their input's storage and cost nothing; Gemm's transpositions are cuBLAS operations. A
 * Conv whose pads differ left and right gets a zero-padding step first (cuDNN pads symmetrically).
 * A residual sum (a SUM post-op) fused with ReLU into one cuDNN call reads the addend where it is
 * and writes a new tensor; one that cuDNN or cuBLAS accumulates (beta = 1) does so in place in
 * the addend's storage when nothing reads that later, else in a copy, as the oneDNN executor does.
 *
 * Nothing here touches a GPU, so the whole plan is tested on any machine: the test suite runs
 * the steps with a plain C emulation of each call's documented semantics and the shared kernel
 * arithmetic of onnx_cuda_arith.h, against the ONNX test vectors and the CPU engine.
 *
 * A program is immutable once built and may be read from any thread. */
#ifndef ONNX_CUDA_PLAN_H
#define ONNX_CUDA_PLAN_H

#include "onnx_cuda_arith.h"
#include "onnx_graph.h"
#include "onnx_lower.h"

#include <stddef.h>
#include <stdint.h>

#define ONNX_CUDA_ALIGN 256 /* bytes; every root tensor starts at a multiple (cuDNN wants 16) */

/* A tensor of one plan. slot.store is ONNX_STORE_ARENA (offset in the stream's arena) or
 * ONNX_STORE_CONST (offset in the constant pool); slot.bytes is of this view. */
typedef struct {
    onnx_slot_t slot; /* root, storage, bytes, lifetime and offset: onnx_lower.h */
    int konst;        /* ONNX_STORE_CONST: index in prog->consts */
    onnx_dtype_t dtype;
    int rank;
    int64_t dims[ONNX_MAX_RANK]; /* in this plan, the batch applied */
} onnx_cuda_tensor_t;

typedef struct {
    int value; /* the IR value whose data it holds, or -1 for zeros */
    size_t bytes, offset;
} onnx_cuda_const_t;

typedef enum {
    ONNX_CUDA_STEP_CONV,      /* cuDNN convolution (cross-correlation), bias, residual sum, ReLU */
    ONNX_CUDA_STEP_POOL,      /* cuDNN pooling, or the pooling kernel where cuDNN cannot */
    ONNX_CUDA_STEP_SOFTMAX,   /* cuDNN softmax over the channels of [outer, axis, inner, 1] */
    ONNX_CUDA_STEP_GEMM,      /* cuBLAS sgemm, strided batched */
    ONNX_CUDA_STEP_COPY,      /* device-to-device copy */
    ONNX_CUDA_STEP_BCAST,     /* kernel: broadcast a (scaled) tensor into the output */
    ONNX_CUDA_STEP_PAD,       /* kernel: zero padding */
    ONNX_CUDA_STEP_BINARY,    /* kernel: Add, Sub, Mul, Div with broadcasting, then ReLU */
    ONNX_CUDA_STEP_RELU,      /* kernel */
    ONNX_CUDA_STEP_BATCHNORM, /* kernel: inference batch normalisation */
    ONNX_CUDA_STEP_CAST,      /* kernel: element type conversion with a scale */
} onnx_cuda_step_kind_t;

/* y = relu?(conv(x, w) + bias + (sum ? z : 0)).
 * fused: one cudnnConvolutionBiasActivationForward (with ReLU; b is then always set, a zeros
 * constant when the model has no bias; z is read from its own storage, never y's).
 * Not fused: cudnnConvolutionForward with beta = sum (z == y: a COPY step or the in-place sum put
 * the addend there), then cudnnAddTensor of b when there is one. */
typedef struct {
    int x, w, b, y, z; /* tensors; b, z: -1 when absent */
    int nsp;           /* 2 or 3 (1-D convolutions run as 2-D ones of height 1) */
    int xdims[5], wdims[5], ydims[5];
    int pad[3], stride[3], dil[3];
    int groups, relu, sum, fused;
} onnx_cuda_conv_step_t;

typedef struct {
    int x, y;
    int cudnn;               /* float, symmetric padding, no dilation, and no padding for max */
    onnx_cuda_pool_args_t k; /* nsp 1 to 3; cuDNN runs 1-D pooling as 2-D of height 1 */
} onnx_cuda_pool_step_t;

typedef struct {
    int x, y;
    int outer, axis, inner;
} onnx_cuda_softmax_step_t;

/* Column-major, as cuBLAS: C = alpha * op(A) op(B) + beta * C for count matrices, each
 * A + i * stride_a and so on (offsets and strides in elements). For a row-major ONNX product
 * Y = A B, cuBLAS's A is the model's B and cuBLAS's B the model's A. */
typedef struct {
    int a, b, c;
    int64_t a_off, b_off, c_off;
    int trans_a, trans_b;
    int m, n, k, lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;
    int count;
    float alpha, beta;
} onnx_cuda_gemm_step_t;

typedef struct {
    int x, y;
    size_t bytes;
} onnx_cuda_copy_step_t;

typedef struct {
    int x, y;
    onnx_cuda_bcast_args_t k;
} onnx_cuda_bcast_step_t;

typedef struct {
    int x, y;
    onnx_cuda_pad_args_t k;
} onnx_cuda_pad_step_t;

typedef struct {
    int a, b, y;
    onnx_cuda_binary_args_t k;
} onnx_cuda_binary_step_t;

typedef struct {
    int x, y;
    int64_t count;
} onnx_cuda_relu_step_t;

typedef struct {
    int x, scale, shift, mean, var, y;
    onnx_cuda_batchnorm_args_t k;
} onnx_cuda_batchnorm_step_t;

typedef struct {
    int x, y;
    onnx_cuda_cast_args_t k;
} onnx_cuda_cast_step_t;

typedef struct {
    onnx_cuda_step_kind_t kind;
    int node; /* the IR node it comes from, for messages */
    union {
        onnx_cuda_conv_step_t conv;
        onnx_cuda_pool_step_t pool;
        onnx_cuda_softmax_step_t softmax;
        onnx_cuda_gemm_step_t gemm;
        onnx_cuda_copy_step_t copy;
        onnx_cuda_bcast_step_t bcast;
        onnx_cuda_pad_step_t pad;
        onnx_cuda_binary_step_t binary;
        onnx_cuda_relu_step_t relu;
        onnx_cuda_batchnorm_step_t bn;
        onnx_cuda_cast_step_t cast;
    } u;
} onnx_cuda_step_t;

typedef struct {
    size_t batch;
    onnx_cuda_tensor_t *t;
    int n_t;
    onnx_cuda_step_t *steps;
    int n_steps, cap_steps;
    int *in_t;  /* per graph input: its staging tensor in the arena */
    int *out_t; /* per graph output: the tensor holding it */
    size_t arena_size;
} onnx_cuda_plan_t;

typedef struct {
    const onnx_graph_t *g;
    onnx_cuda_plan_t *plans; /* ascending batch sizes */
    size_t n_plans;
    onnx_cuda_const_t *consts;
    int n_consts, cap_consts;
    size_t pool_size;           /* bytes of the constant pool */
    size_t arena_size;          /* the largest plan's */
    size_t *in_off, *in_size;   /* per graph input: place in a sample, bytes per sample */
    size_t *out_off, *out_size; /* per graph output: place in a result, bytes per sample */
} onnx_cuda_program_t;

/* Plans |g| for |batches| (ascending, each >= 1; {1} when the graph is not batched). The graph
 * must outlive the program. Returns 0, CMN_EBACKEND with |eb| naming the node that the engine
 * cannot run (a dimension over cuDNN's int range, a post-op order it does not fuse), or -ENOMEM. */
int onnx_cuda_program_build(const onnx_graph_t *g, const size_t *batches, size_t n_batches,
                            onnx_cuda_program_t **out, cmn_errbuf_t *eb);
void onnx_cuda_program_free(onnx_cuda_program_t *p);

/* The smallest plan for |n| samples, or NULL when n is 0 or over the largest. */
const onnx_cuda_plan_t *onnx_cuda_program_plan(const onnx_cuda_program_t *p, size_t n);

/* Copies the constants into |pool| (prog->pool_size bytes, laid out as the device pool is). */
void onnx_cuda_program_fill_pool(const onnx_cuda_program_t *p, void *pool);

/* "conv", "gemm", ...: for messages (inline: the CUDA engine library uses it too). */
static inline const char *onnx_cuda_step_name(onnx_cuda_step_kind_t k)
{
    static const char *const names[] = {"conv", "pool",   "softmax", "gemm",      "copy", "bcast",
                                        "pad",  "binary", "relu",    "batchnorm", "cast"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* The tensors a step reads and writes (at most 8), for lifetimes and checks. Returns the count. */
int onnx_cuda_step_tensors(const onnx_cuda_step_t *s, int *t);

#endif
