/* onnx_cuda.h: the CUDA engine of the onnx backend, as a table of functions.
 *
 * The engine is its own shared library, libsut_onnx_cuda.so (onnx_cuda_engine.c,
 * onnx_cuda_kernels.cu), built only where CMake finds the CUDA toolkit and cuDNN, and loaded with
 * dlopen by the onnx backend only when a model is loaded with device=cuda. So sut-node and the
 * backend plugin carry no link-time dependency on CUDA: the same binaries run on CPU-only hosts,
 * and a host whose CUDA libraries are missing gets a load error naming them, not a daemon that does
 * not start. The library exports one symbol, onnx_cuda_api() (ONNX_CUDA_ENTRY_SYMBOL).
 *
 * It runs the plans of onnx_cuda_plan.h, which the backend builds on the host: weights uploaded
 * once into a constant pool in device memory; per CUDA stream (a "slot") an activation arena,
 * a cuDNN workspace, a cuDNN and a cuBLAS handle and a pinned result buffer. run() takes a free
 * slot, so up to |streams| batches are in flight at once, each on its own stream: the copy of
 * one batch's input overlaps the kernels of another.
 *
 * Errors come back as negative codes (CMN_EBACKEND, CMN_ECONFIG, -ENOMEM) with a sentence in
 * |eb| that names the device, the call and the CUDA/cuDNN/cuBLAS error string. Nothing aborts.
 * An error that leaves the CUDA context unusable (an illegal address, a failed launch) makes
 * every later run fail at once with the same message. */
#ifndef ONNX_CUDA_H
#define ONNX_CUDA_H

#include "onnx_cuda_plan.h"

#include <stddef.h>
#include <stdint.h>

#define ONNX_CUDA_API_VERSION 1u
#define ONNX_CUDA_ENTRY_SYMBOL "onnx_cuda_api"
#define ONNX_CUDA_LIB_NAME "libsut_onnx_cuda.so"

typedef struct onnx_cuda onnx_cuda_t;

typedef struct {
    int device;       /* the CUDA device ordinal */
    int streams;      /* slots, >= 1 */
    size_t workspace; /* bytes of cuDNN workspace a convolution may use, per stream */
    int tf32;         /* allow TF32 tensor cores in convolutions and products */
    int find_algo;    /* 1: benchmark the convolution algorithms at load; 0: heuristics */
    int debug_sync;   /* synchronise after every step, to name the one that fails */
    size_t max_batch; /* the largest batch run() gets (sizes the result buffers) */
    const void *pool; /* the constant pool, filled by onnx_cuda_program_fill_pool() */
} onnx_cuda_opts_t;

typedef struct {
    uint32_t version;     /* ONNX_CUDA_API_VERSION */
    uint32_t struct_size; /* sizeof(onnx_cuda_api_t) */

    /* Describes |device| in |desc| ("NVIDIA H100 80GB HBM3 (cuda:0), 79.1 GiB, compute 9.0, ...")
     * or says why it cannot be used (no driver, no device, an ordinal past the last one). */
    int (*probe)(int device, char *desc, size_t len, cmn_errbuf_t *eb);

    /* Uploads the weights and prepares every plan of |prog| (which must outlive the engine). */
    int (*create)(const onnx_cuda_program_t *prog, const onnx_cuda_opts_t *o, onnx_cuda_t **out,
                  cmn_errbuf_t *eb);
    void (*destroy)(onnx_cuda_t *x);

    /* Runs |n| samples (n * g->input_size bytes at |input|, best in host_alloc() memory) on a
     * free stream, waiting for one if all are busy, and returns once the results are in host
     * memory: *output points at n * g->output_size bytes, valid until release(x, *slot).
     * Thread-safe. On failure nothing needs releasing. */
    int (*run)(onnx_cuda_t *x, size_t n, const void *input, const void **output, int *slot,
               cmn_errbuf_t *eb);
    void (*release)(onnx_cuda_t *x, int slot);

    /* Pinned (page-locked) host memory, for batch inputs; NULL when it cannot be had (the reason
     * in |eb|). Thread-safe. */
    void *(*host_alloc)(onnx_cuda_t *x, size_t size, cmn_errbuf_t *eb);
    void (*host_free)(onnx_cuda_t *x, void *p);

    /* Device bytes held: the pool, the arenas and workspaces. */
    size_t (*memory)(const onnx_cuda_t *x);
} onnx_cuda_api_t;

typedef const onnx_cuda_api_t *(*onnx_cuda_entry_fn)(void);

#endif
