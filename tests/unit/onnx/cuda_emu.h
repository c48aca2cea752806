/* cuda_emu: runs a CUDA-engine plan (onnx_cuda_plan.h) on the CPU, with a plain C version of what
 * each step's call is documented to compute (cuDNN cross-correlation with bias, residual and ReLU,
 * cuDNN pooling and softmax, column-major cuBLAS sgemm with its operations, leading dimensions
 * and batch strides) and, for the engine's own kernels, the very arithmetic of onnx_cuda_arith.h
 * that the GPU runs. The arena starts filled with NaNs, so a step that reads storage the plan
 * did not fill first (a placement or lifetime bug) shows up in the results.
 *
 * It also checks the preconditions the device layer relies on (a fused convolution has a bias,
 * an unfused residual sum finds its addend in the output already, every step's tensors fit their
 * memory, arena roots that live at the same time do not overlap) and fails the test when one
 * does not hold. */
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include "onnx_cuda_plan.h"

#include <stddef.h>

/* Runs |n| samples (|input|: n * g->input_size bytes) and writes n * g->output_size bytes of
 * results to |output|. Asserts (Check) on any inconsistency. */
void cuda_emu_run(const onnx_cuda_program_t *p, size_t n, const void *input, void *output);

/* Asserts the placement invariants of every plan of |p| (no overlap of live roots, alignment,
 * everything inside the arena or the pool). */
void cuda_emu_check_plans(const onnx_cuda_program_t *p);

#endif
