/* onnx_cuda_kernels.h: launchers of the CUDA engine's own kernels (onnx_cuda_kernels.cu), the
 * steps cuDNN and cuBLAS do not cover: broadcasting element-wise arithmetic, zero padding,
 * pooling cuDNN cannot express, ReLU, standalone batch normalisation, casts. Each launches one
 * kernel on |stream| (nothing for an empty tensor) and returns cudaGetLastError() of the launch
 * as an int (0: queued). The arithmetic is onnx_cukern.h's. */
#ifndef ONNX_CUDA_KERNELS_H
#define ONNX_CUDA_KERNELS_H

#include "onnx_cukern.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

int onnx_cuk_binary(cudaStream_t stream, const cuk_binary_t *p, const float *a, const float *b,
                    float *y);
int onnx_cuk_bcast(cudaStream_t stream, const cuk_bcast_t *p, const float *x, float *y);
int onnx_cuk_pad(cudaStream_t stream, const cuk_pad_t *p, const float *x, float *y);
int onnx_cuk_pool(cudaStream_t stream, const cuk_pool_t *p, const void *x, void *y);
int onnx_cuk_relu(cudaStream_t stream, int64_t count, const float *x, float *y);
int onnx_cuk_bn(cudaStream_t stream, const cuk_bn_t *p, const float *x, const float *scale,
                const float *shift, const float *mean, const float *var, float *y);
int onnx_cuk_cast(cudaStream_t stream, const cuk_cast_t *p, const void *x, void *y);

#ifdef __cplusplus
}
#endif

#endif
