/* The model generators' shared helpers (model_gen.h). */
#include "model_gen.h"

#include <stdio.h>
#include <stdlib.h>

uint32_t gen_seed(unsigned long seed)
{
    return (uint32_t)seed * 2654435761u + 1;
}

float gen_uniform(gen_t *g, float lo, float hi)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 17;
    g->rng ^= g->rng << 5;
    return lo + (hi - lo) * (float)(g->rng >> 8) / 16777216.0f;
}

const char *gen_fresh(gen_t *g, const char *prefix, char *buf)
{
    snprintf(buf, 64, "%s_%d", prefix, g->seq++);
    return buf;
}

const char *gen_init(gen_t *g, const char *prefix, int rank, const int64_t *dims, float lo,
                     float hi, char *name)
{
    size_t n = 1, i;
    float *data;
    int k;
    for (k = 0; k < rank; k++)
        n *= (size_t)dims[k];
    if (!(data = malloc(n * sizeof(float)))) {
        fprintf(stderr, "%s: out of memory\n", g->tool);
        exit(1);
    }
    for (i = 0; i < n; i++)
        data[i] = gen_uniform(g, lo, hi);
    mb_init(g->m, gen_fresh(g, prefix, name), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims,
            data);
    free(data);
    g->n_inits++;
    return name;
}

Onnx__NodeProto *gen_node_to(gen_t *g, const char *op, const char *ins, const char *prefix,
                             const char *out)
{
    char name[64], fresh_out[64];
    gen_fresh(g, op, name);
    gen_fresh(g, prefix, fresh_out);
    g->n_nodes++;
    return mb_node(g->m, op, name, ins, out ? out : fresh_out);
}

Onnx__NodeProto *gen_node(gen_t *g, const char *op, const char *ins, const char *prefix)
{
    return gen_node_to(g, op, ins, prefix, NULL);
}
