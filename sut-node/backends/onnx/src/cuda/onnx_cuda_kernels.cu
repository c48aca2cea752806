/* The CUDA engine's own kernels: grid-stride loops over the output, each element computed by the
 * onnx_cuda_arith.h function that the test suite also runs on the CPU. None of them is on the hot
 * path of a convolutional network except the input cast and, where cuDNN cannot take it, a
 * pooling; they favour being obviously right over being fast. */
#include "onnx_cuda_kernels.h"

namespace
{

const int kThreads = 256;
const int64_t kMaxBlocks = 65535; /* the grid-stride loop covers the rest */

inline unsigned blocks_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

#define GRID_LOOP(i, n)                                                       \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

__global__ void k_binary(onnx_cuda_binary_args_t p, const float *a, const float *b, float *y)
{
    GRID_LOOP(i, p.count)
    y[i] = onnx_cuda_binary_at(&p, a, b, i);
}

__global__ void k_bcast(onnx_cuda_bcast_args_t p, const float *x, float *y)
{
    GRID_LOOP(i, p.count)
    y[i] = onnx_cuda_bcast_at(&p, x, y, i);
}

__global__ void k_pad(onnx_cuda_pad_args_t p, const float *x, float *y)
{
    GRID_LOOP(i, p.count)
    {
        int64_t src = onnx_cuda_pad_source(&p, i);
        y[i] = src < 0 ? 0.0f : x[src];
    }
}

__global__ void k_pool(onnx_cuda_pool_args_t p, const void *x, void *y)
{
    GRID_LOOP(i, p.count)
    onnx_cuda_store(y, p.dtype, i, onnx_cuda_pool_at(&p, x, i));
}

__global__ void k_relu(int64_t n, const float *x, float *y)
{
    GRID_LOOP(i, n)
    y[i] = onnx_cuda_relu(x[i]);
}

__global__ void k_bn(onnx_cuda_batchnorm_args_t p, const float *x, const float *scale,
                     const float *shift, const float *mean, const float *var, float *y)
{
    GRID_LOOP(i, p.count)
    y[i] = onnx_cuda_batchnorm_at(&p, x, scale, shift, mean, var, i);
}

__global__ void k_cast(onnx_cuda_cast_args_t p, const void *x, void *y)
{
    GRID_LOOP(i, p.count)
    onnx_cuda_store(y, p.to, i, onnx_cuda_load(x, p.from, i) * p.scale);
}

int launched()
{
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int onnx_cuda_launch_binary(cudaStream_t stream, const onnx_cuda_binary_args_t *p,
                                       const float *a, const float *b, float *y)
{
    if (p->count <= 0)
        return 0;
    k_binary<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, a, b, y);
    return launched();
}

extern "C" int onnx_cuda_launch_bcast(cudaStream_t stream, const onnx_cuda_bcast_args_t *p,
                                      const float *x, float *y)
{
    if (p->count <= 0)
        return 0;
    k_bcast<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, x, y);
    return launched();
}

extern "C" int onnx_cuda_launch_pad(cudaStream_t stream, const onnx_cuda_pad_args_t *p,
                                    const float *x, float *y)
{
    if (p->count <= 0)
        return 0;
    k_pad<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, x, y);
    return launched();
}

extern "C" int onnx_cuda_launch_pool(cudaStream_t stream, const onnx_cuda_pool_args_t *p,
                                     const void *x, void *y)
{
    if (p->count <= 0)
        return 0;
    k_pool<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, x, y);
    return launched();
}

extern "C" int onnx_cuda_launch_relu(cudaStream_t stream, int64_t count, const float *x, float *y)
{
    if (count <= 0)
        return 0;
    k_relu<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
    return launched();
}

extern "C" int onnx_cuda_launch_batchnorm(cudaStream_t stream, const onnx_cuda_batchnorm_args_t *p,
                                          const float *x, const float *scale, const float *shift,
                                          const float *mean, const float *var, float *y)
{
    if (p->count <= 0)
        return 0;
    k_bn<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, x, scale, shift, mean, var, y);
    return launched();
}

extern "C" int onnx_cuda_launch_cast(cudaStream_t stream, const onnx_cuda_cast_args_t *p,
                                     const void *x, void *y)
{
    if (p->count <= 0)
        return 0;
    k_cast<<<blocks_for(p->count), kThreads, 0, stream>>>(*p, x, y);
    return launched();
}
