/* Arena placement shared by the oneDNN executor and the CUDA engine's plans: every
 * intermediate tensor gets an offset in one buffer, and tensors that are never alive at the
 * same time share bytes. */
#ifndef ONNX_ARENA_H
#define ONNX_ARENA_H

#include <stddef.h>

/* One buffer to place: alive from step |first| to step |last|, both inclusive. */
typedef struct {
    size_t size; /* bytes, already rounded up to the arena's alignment by the caller */
    int first, last;
    int id;        /* the caller's: which tensor this is */
    size_t offset; /* out: the place in the arena */
} onnx_span_t;

/* Places |n| spans greedily by size (the scheme of TFLite's arena planner): largest first, each
 * at the lowest offset free for its whole lifetime. Sets each offset and *arena_size (the end
 * of the highest span). Reorders |s|. */
void onnx_arena_place(onnx_span_t *s, int n, size_t *arena_size);

#endif
