/* Arena placement: see onnx_arena.h. */
#include "onnx_arena.h"

void onnx_arena_place(onnx_span_t *s, int n, size_t *arena_size)
{
    size_t end = 0;
    int i, j;

    /* insertion sort, largest first (a few hundred tensors) */
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && s[j].size > s[j - 1].size; j--) {
            onnx_span_t t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    for (i = 0; i < n; i++) {
        size_t off = 0;
        int moved = 1;
        while (moved) {
            moved = 0;
            for (j = 0; j < i; j++) {
                const onnx_span_t *o = &s[j];
                if (o->last < s[i].first || s[i].last < o->first)
                    continue; /* not alive at the same time */
                if (off < o->offset + o->size && o->offset < off + s[i].size) {
                    off = o->offset + o->size;
                    moved = 1;
                }
            }
        }
        s[i].offset = off;
        if (off + s[i].size > end)
            end = off + s[i].size;
    }
    *arena_size = end;
}
