/* onnx_dnnl.h: runs an onnx_graph_t on the CPU with oneDNN.
 *
 * At creation the executor builds one plan per batch size it is given: every node becomes a
 * oneDNN primitive (created once, with blocked layouts chosen by the convolutions and reorders
 * only where a layout must change), constants are reordered once into the layouts the
 * primitives want, and every intermediate tensor gets a fixed place in one arena shared by all
 * plans. A run then only executes primitives: no allocation, no primitive creation.
 *
 * A batch of n samples runs on the smallest plan of at least n (the remaining samples are zero
 * padding). Not thread-safe: one run at a time per executor (the backend holds a mutex). */
#ifndef ONNX_DNNL_H
#define ONNX_DNNL_H

#include "onnx_graph.h"

#include <stddef.h>

typedef struct onnx_dnnl onnx_dnnl_t;

/* Builds the plans for |batches| (ascending, each >= 1; {1} for a graph that is not batched).
 * |threads| is the number of CPU threads oneDNN uses. The graph must outlive the executor.
 * Returns 0, CMN_EBACKEND with |eb| naming the node that oneDNN cannot run, or -ENOMEM. */
int onnx_dnnl_create(const onnx_graph_t *g, int threads, const size_t *batches, size_t n_batches,
                     onnx_dnnl_t **out, cmn_errbuf_t *eb);
void onnx_dnnl_destroy(onnx_dnnl_t *x);

/* Runs |n| samples: |input| holds n * g->input_size bytes (the graph inputs of each sample back
 * to back). On success *output points at n * g->output_size bytes, valid until the next run or
 * destroy. Returns 0, CMN_EOVERLOAD (n is larger than the largest plan) or CMN_EBACKEND. */
int onnx_dnnl_run(onnx_dnnl_t *x, size_t n, const void *input, const void **output,
                  cmn_errbuf_t *eb);

/* Bytes of memory held: the activation arena, the scratchpad and reordered constants. */
size_t onnx_dnnl_memory(const onnx_dnnl_t *x);

/* "oneDNN 2.6.3 (avx512_core, OpenMP)": a static string. */
const char *onnx_dnnl_version(void);

#endif
