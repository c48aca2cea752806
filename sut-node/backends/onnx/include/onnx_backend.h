/* onnx_backend.h: the "onnx" backend, which runs a standard ONNX model on the CPU with oneDNN.
 *
 * Built into sut-node (this header, library sut_backend_onnx) and also as the plugin
 * libsut_backend_onnx.so, which exports sut_backend_entry() for --backend-path.
 *
 * Options (--backend-opt KEY=VALUE):
 *   model=PATH         the .onnx file (required)
 *   threads=N          CPU threads for oneDNN (default: the node's --threads, else every CPU
 *                      this process may run on)
 *   output=raw|argmax  raw: each sample's outputs as the model computes them (float32 bytes for
 *                      a float model); argmax: the index of the largest output value as a
 *                      4-byte little-endian int32, for classifiers (SUT post-processing)
 *   batch_sizes=LIST   batch sizes to build plans for, e.g. "1,8,64" (default: 1, 2, 4, ... up
 *                      to the node's max batch, and the max batch); a batch runs on the smallest
 *                      plan that holds it
 *
 * A sample is the model's inputs for one batch entry, back to back in model order, each in the
 * model's declared type and row-major; describe() gives its size. The model's first input
 * dimension is the batch axis when it is symbolic or 1 and no node mixes samples; otherwise the
 * backend takes one whole-tensor sample per batch (max_batch 1).
 *
 * infer() completes every sample before it returns (inline, on the calling node worker thread).
 * Batches are run one at a time (describe() reports engines = 1); concurrent calls wait. */
#ifndef ONNX_BACKEND_H
#define ONNX_BACKEND_H

#include "sut/sut_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's ops table (static storage; thread-safe). */
const sut_backend_ops_t *sut_backend_onnx_ops(void);

#ifdef __cplusplus
}
#endif

#endif
