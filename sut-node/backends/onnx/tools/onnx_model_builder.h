/* onnx_model_builder.h: writes small ONNX models from C, for the onnx tests
 * (tests/unit/onnx) and the ResNet-50 generator (bench/onnx/resnet50_onnx.c), so that neither
 * needs Python. Not part of the backend.
 *
 * A builder collects inputs, outputs, initializers and nodes (protobuf-c structures generated
 * from Debian's onnx.proto, with ir_version 7 and one default-domain opset), then mb_save()
 * serialises the model and frees everything. Names and data are copied. Running out of memory
 * is not an error a test or a generator can recover from: it prints why and aborts. */
#ifndef ONNX_MODEL_BUILDER_H
#define ONNX_MODEL_BUILDER_H

#include "onnx/onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mb mb_t;

/* An empty model of the default domain at |opset|, graph named "test". */
mb_t *mb_new(int64_t opset);
/* The graph's name, the model's producer_name (NULL: none) and the name given to symbolic
 * dimensions (default "N"). */
void mb_describe(mb_t *m, const char *graph, const char *producer, const char *dim_param);

/* dims: -1 marks a symbolic dimension. dtype as onnx.TensorProto.DataType (1 float, ...). */
void mb_input(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims);
void mb_output(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims);
/* A constant (raw_data, a copy of |data| in row-major order). */
void mb_init(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims, const void *data);
/* |ins| and |outs| are comma-separated names ("x,W,B"; an empty name is an omitted input). */
Onnx__NodeProto *mb_node(mb_t *m, const char *op, const char *name, const char *ins,
                         const char *outs);
/* At most MB_MAX_ATTRS attributes per node. */
#define MB_MAX_ATTRS 8
void mb_attr_int(mb_t *m, Onnx__NodeProto *n, const char *name, int64_t v);
void mb_attr_float(mb_t *m, Onnx__NodeProto *n, const char *name, float v);
void mb_attr_ints(mb_t *m, Onnx__NodeProto *n, const char *name, size_t count, const int64_t *v);
void mb_attr_str(mb_t *m, Onnx__NodeProto *n, const char *name, const char *v);

/* Writes the model to |path| and frees the builder, whatever happens. Returns 0 (with the file's
 * size in *bytes when |bytes| is not NULL) or a negated errno from opening or writing. */
int mb_save(mb_t *m, const char *path, size_t *bytes);

#endif
