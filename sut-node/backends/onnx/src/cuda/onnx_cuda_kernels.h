/* onnx_cuda_kernels.h: launchers of the CUDA engine's own kernels (onnx_cuda_kernels.cu), the
 * steps cuDNN and cuBLAS do not cover: broadcasting element-wise arithmetic, zero padding,
 * pooling cuDNN cannot express, ReLU, standalone batch normalisation, casts. Each launches one
 * kernel on |stream| (nothing for an empty tensor) and returns cudaGetLastError() of the launch
 * as an int (0: queued). The arithmetic is onnx_cuda_arith.h's. */
#ifndef ONNX_CUDA_KERNELS_H
#define ONNX_CUDA_KERNELS_H

#include "onnx_cuda_arith.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

int onnx_cuda_launch_binary(cudaStream_t stream, const onnx_cuda_binary_args_t *p, const float *a,
                            const float *b, float *y);
int onnx_cuda_launch_bcast(cudaStream_t stream, const onnx_cuda_bcast_args_t *p, const float *x,
                           float *y);
int onnx_cuda_launch_pad(cudaStream_t stream, const onnx_cuda_pad_args_t *p, const float *x,
                         float *y);
int onnx_cuda_launch_pool(cudaStream_t stream, const onnx_cuda_pool_args_t *p, const void *x,
                          void *y);
int onnx_cuda_launch_relu(cudaStream_t stream, int64_t count, const float *x, float *y);
int onnx_cuda_launch_batchnorm(cudaStream_t stream, const onnx_cuda_batchnorm_args_t *p,
                               const float *x, const float *scale, const float *shift,
                               const float *mean, const float *var, float *y);
int onnx_cuda_launch_cast(cudaStream_t stream, const onnx_cuda_cast_args_t *p, const void *x,
                          void *y);

#ifdef __cplusplus
}
#endif

#endif
