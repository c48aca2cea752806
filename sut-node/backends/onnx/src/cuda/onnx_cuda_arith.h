/* onnx_cuda_arith.h: the per-element arithmetic of the CUDA engine's own kernels, shared by the
 * device code (onnx_cuda_kernels.cu, compiled by nvcc) and the host (the plan's CPU emulator in
 * the tests), so that the index and window arithmetic a GPU runs is tested on every machine.
 *
 * Everything here is plain data and static inline functions in the common subset of C11 and
 * CUDA C++: no allocation, no library calls beyond <math.h>. Element types are numbered as
 * onnx.TensorProto.DataType (1 float, 2 uint8, 3 int8, 6 int32), like onnx_dtype_t.
 *
 * Each kernel parameter block is passed to the device by value, so it has a fixed size. */
#ifndef ONNX_CUDA_ARITH_H
#define ONNX_CUDA_ARITH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#    define ONNX_CUDA_FN static __host__ __device__ inline
#else
#    define ONNX_CUDA_FN static inline
#endif

#define ONNX_CUDA_MAX_RANK 8
#define ONNX_CUDA_MAX_SPATIAL 3

enum { ONNX_CUDA_F32 = 1, ONNX_CUDA_U8 = 2, ONNX_CUDA_I8 = 3, ONNX_CUDA_I32 = 6 };
enum { ONNX_CUDA_ADD = 0, ONNX_CUDA_SUB = 1, ONNX_CUDA_MUL = 2, ONNX_CUDA_DIV = 3 };

/* y[i] = relu?(a[ia] op b[ib]) over the output's row-major index i; a stride of 0 broadcasts. */
typedef struct {
    int rank, op, relu;
    int64_t count;
    int64_t dims[ONNX_CUDA_MAX_RANK];
    int64_t sa[ONNX_CUDA_MAX_RANK], sb[ONNX_CUDA_MAX_RANK];
} onnx_cuda_binary_args_t;

/* y[i] = (accumulate ? y[i] : 0) + scale * x[ix]: Gemm's C broadcast into its output. */
typedef struct {
    int rank, accumulate;
    float scale;
    int64_t count;
    int64_t dims[ONNX_CUDA_MAX_RANK];
    int64_t sx[ONNX_CUDA_MAX_RANK];
} onnx_cuda_bcast_args_t;

/* Zero padding of a row-major tensor: y has dims out, x dims in, x sits at offset pl. */
typedef struct {
    int rank;
    int64_t count; /* of y */
    int64_t in[ONNX_CUDA_MAX_RANK], out[ONNX_CUDA_MAX_RANK], pl[ONNX_CUDA_MAX_RANK];
} onnx_cuda_pad_args_t;

/* Max or average pooling over 1 to 3 spatial dims of [planes, spatial...] row-major data. The
 * window of output o starts at o * stride - pad_l and has kernel positions dil apart; positions
 * outside the input are skipped (max, and average without include_pad) or counted (average with
 * include_pad, whose windows never pass the model's own padding: the loader refuses that). */
typedef struct {
    int nsp, max, include_pad, dtype;
    int64_t count; /* output elements */
    int64_t in[ONNX_CUDA_MAX_SPATIAL], out[ONNX_CUDA_MAX_SPATIAL];
    int64_t k[ONNX_CUDA_MAX_SPATIAL], s[ONNX_CUDA_MAX_SPATIAL], d[ONNX_CUDA_MAX_SPATIAL],
        pl[ONNX_CUDA_MAX_SPATIAL];
} onnx_cuda_pool_args_t;

/* Inference batch normalisation over dim 1 of [N, C, inner...]. */
typedef struct {
    int64_t count, channels, inner;
    float epsilon;
} onnx_cuda_batchnorm_args_t;

/* y = x * scale converted to another element type (Cast with a folded scale). */
typedef struct {
    int from, to;
    float scale;
    int64_t count;
} onnx_cuda_cast_args_t;

ONNX_CUDA_FN float onnx_cuda_load(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case ONNX_CUDA_U8:
        return (float)((const uint8_t *)p)[i];
    case ONNX_CUDA_I8:
        return (float)((const int8_t *)p)[i];
    case ONNX_CUDA_I32:
        return (float)((const int32_t *)p)[i];
    default:
        return ((const float *)p)[i];
    }
}

/* Stores |v|, which is exact for every integer type here (the loader allows only casts that
 * widen integers and pooling, which picks one of its inputs). */
ONNX_CUDA_FN void onnx_cuda_store(void *p, int dtype, int64_t i, float v)
{
    switch (dtype) {
    case ONNX_CUDA_U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case ONNX_CUDA_I8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case ONNX_CUDA_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    default:
        ((float *)p)[i] = v;
        break;
    }
}

/* The offset that strides |st| give to row-major index |i| of a tensor of |dims|. */
ONNX_CUDA_FN int64_t onnx_cuda_offset(int rank, const int64_t *dims, const int64_t *st, int64_t i)
{
    int64_t off = 0;
    int k;
    for (k = rank - 1; k >= 0; k--) {
        off += (i % dims[k]) * st[k];
        i /= dims[k];
    }
    return off;
}

ONNX_CUDA_FN float onnx_cuda_binary_op(int op, float a, float b)
{
    switch (op) {
    case ONNX_CUDA_SUB:
        return a - b;
    case ONNX_CUDA_MUL:
        return a * b;
    case ONNX_CUDA_DIV:
        return a / b;
    default:
        return a + b;
    }
}

ONNX_CUDA_FN float onnx_cuda_relu(float v)
{
    return v > 0.0f ? v : 0.0f;
}

ONNX_CUDA_FN float onnx_cuda_binary_at(const onnx_cuda_binary_args_t *p, const float *a,
                                       const float *b, int64_t i)
{
    float v = onnx_cuda_binary_op(p->op, a[onnx_cuda_offset(p->rank, p->dims, p->sa, i)],
                                  b[onnx_cuda_offset(p->rank, p->dims, p->sb, i)]);
    return p->relu ? onnx_cuda_relu(v) : v;
}

ONNX_CUDA_FN float onnx_cuda_bcast_at(const onnx_cuda_bcast_args_t *p, const float *x,
                                      const float *y, int64_t i)
{
    float v = p->scale * x[onnx_cuda_offset(p->rank, p->dims, p->sx, i)];
    return p->accumulate ? y[i] + v : v;
}

/* Where output element |i| of a padding reads from, or -1 for a zero. */
ONNX_CUDA_FN int64_t onnx_cuda_pad_source(const onnx_cuda_pad_args_t *p, int64_t i)
{
    int64_t src = 0, mul = 1;
    int k;
    for (k = p->rank - 1; k >= 0; k--) {
        int64_t o = i % p->out[k] - p->pl[k];
        i /= p->out[k];
        if (o < 0 || o >= p->in[k])
            return -1;
        src += o * mul;
        mul *= p->in[k];
    }
    return src;
}

ONNX_CUDA_FN float onnx_cuda_pool_at(const onnx_cuda_pool_args_t *p, const void *x, int64_t i)
{
    int64_t o[ONNX_CUDA_MAX_SPATIAL], plane, in_size = 1, window = 1, w, rem = i, cnt = 0;
    float acc = p->max ? -INFINITY : 0.0f;
    int s;

    for (s = p->nsp - 1; s >= 0; s--) {
        o[s] = rem % p->out[s];
        rem /= p->out[s];
        in_size *= p->in[s];
        window *= p->k[s];
    }
    plane = rem;
    for (w = 0; w < window; w++) {
        int64_t wr = w, off = 0, mul = 1;
        int inside = 1;
        for (s = p->nsp - 1; s >= 0; s--) {
            int64_t pos = o[s] * p->s[s] - p->pl[s] + (wr % p->k[s]) * p->d[s];
            wr /= p->k[s];
            if (pos < 0 || pos >= p->in[s])
                inside = 0;
            off += pos * mul;
            mul *= p->in[s];
        }
        if (!inside)
            continue;
        {
            float v = onnx_cuda_load(x, p->dtype, plane * in_size + off);
            if (p->max)
                acc = v > acc ? v : acc;
            else
                acc += v;
            cnt++;
        }
    }
    if (p->max)
        return acc;
    if (p->include_pad)
        cnt = window;
    return cnt ? acc / (float)cnt : 0.0f;
}

ONNX_CUDA_FN float onnx_cuda_batchnorm_at(const onnx_cuda_batchnorm_args_t *p, const float *x,
                                          const float *scale, const float *shift, const float *mean,
                                          const float *var, int64_t i)
{
    int64_t c = (i / p->inner) % p->channels;
    return (x[i] - mean[c]) * (scale[c] / sqrtf(var[c] + p->epsilon)) + shift[c];
}

#endif
