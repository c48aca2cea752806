/* The backend's IR itself (onnx_graph.h): element types, the value table, freeing a graph.
 * The loader (onnx_graph.c) and the rewrites (onnx_opt.c) both build on it; neither calls the
 * other back. */
#include "onnx_graph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t onnx_dtype_size(onnx_dtype_t t)
{
    switch (t) {
    case ONNX_DT_FLOAT:
    case ONNX_DT_INT32:
        return 4;
    case ONNX_DT_UINT8:
    case ONNX_DT_INT8:
        return 1;
    case ONNX_DT_INT64:
        return 8;
    }
    return 0;
}

const char *onnx_dtype_name(int t)
{
    static const char *const names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                        "int16",      "int32",   "int64",  "string", "bool",
                                        "float16",    "double",  "uint32", "uint64", "complex64",
                                        "complex128", "bfloat16"};
    if (t >= 0 && (size_t)t < sizeof(names) / sizeof(names[0]))
        return names[t];
    return "unknown";
}

int64_t onnx_dims_numel(const int64_t *dims, int rank)
{
    int64_t n = 1;
    int i;
    for (i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

size_t onnx_value_numel(const onnx_value_t *v)
{
    return (size_t)onnx_dims_numel(v->dims, v->rank);
}

void *onnx_grow(void *arr, int n, int *cap, int first, size_t size)
{
    int want = *cap ? *cap * 2 : first;

    if (n < *cap)
        return arr;
    if (!(arr = realloc(arr, (size_t)want * size)))
        return NULL;
    *cap = want;
    return arr;
}

int onnx_graph_add_value(onnx_graph_t *g, const char *name)
{
    onnx_value_t *v = onnx_grow(g->values, g->n_values, &g->cap_values, 64, sizeof(*v));

    if (!v)
        return -ENOMEM;
    g->values = v;
    v = &g->values[g->n_values];
    memset(v, 0, sizeof(*v));
    v->name = strdup(name);
    if (!v->name)
        return -ENOMEM;
    v->producer = -1;
    v->input = -1;
    return g->n_values++;
}

void onnx_graph_free(onnx_graph_t *g)
{
    int i;
    if (!g)
        return;
    for (i = 0; i < g->n_values; i++) {
        free(g->values[i].name);
        free(g->values[i].data);
    }
    for (i = 0; i < g->n_nodes; i++)
        free(g->nodes[i].name);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g);
}
