/* model_gen.h: what the model generators of bench/onnx (resnet50_onnx, unet3d_onnx) share on top
 * of onnx_model_builder.h: a seeded xorshift generator, fresh names, random float initializers
 * and nodes with generated names. Out of memory aborts with the generator's name. */
#ifndef MODEL_GEN_H
#define MODEL_GEN_H

#include "onnx_model_builder.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    mb_t *m;
    const char *tool; /* for messages */
    uint32_t rng;     /* nonzero */
    int seq;
    size_t n_nodes, n_inits;
} gen_t;

/* The seed given on a command line as the generator's state (never zero). */
uint32_t gen_seed(unsigned long seed);
float gen_uniform(gen_t *g, float lo, float hi);
/* A name not used before: "<prefix>_<n>", in |buf| (64 bytes). */
const char *gen_fresh(gen_t *g, const char *prefix, char *buf);
/* A float initializer of random values in [lo, hi); its name in |name| (64 bytes). */
const char *gen_init(gen_t *g, const char *prefix, int rank, const int64_t *dims, float lo,
                     float hi, char *name);
/* A node of |op| reading |ins| (comma-separated) into |out|, or into a fresh output named after
 * |prefix| when |out| is NULL. */
Onnx__NodeProto *gen_node_to(gen_t *g, const char *op, const char *ins, const char *prefix,
                             const char *out);
Onnx__NodeProto *gen_node(gen_t *g, const char *op, const char *ins, const char *prefix);

#endif
