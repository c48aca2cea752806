/* Writing ONNX models from C: see onnx_model_builder.h. */
#include "onnx_model_builder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph; /* its arrays are the builder's, grown as it goes */
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    size_t cap_nodes, cap_inputs, cap_outputs, cap_inits;
    void **allocs; /* everything else, freed by mb_save() */
    size_t n_allocs, cap_allocs;
    const char *dim_param;
};

static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "onnx model builder: out of memory\n");
        abort();
    }
    return p;
}

/* |p| (|n| elements of |elem| bytes) with room for one more. */
static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 64;
    return must(realloc(p, *cap * elem));
}

/* Zeroed memory that lives until the model is saved. */
static void *mb_alloc(mb_t *m, size_t n)
{
    void *p = must(calloc(1, n ? n : 1));
    m->allocs = grow(m->allocs, &m->cap_allocs, m->n_allocs, sizeof(void *));
    m->allocs[m->n_allocs++] = p;
    return p;
}

static char *mb_str(mb_t *m, const char *s)
{
    char *p = mb_alloc(m, strlen(s) + 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

mb_t *mb_new(int64_t opset)
{
    static const Onnx__ModelProto model_init = ONNX__MODEL_PROTO__INIT;
    static const Onnx__GraphProto graph_init = ONNX__GRAPH_PROTO__INIT;
    static const Onnx__OperatorSetIdProto opset_init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    mb_t *m = must(calloc(1, sizeof(*m)));
    m->model = model_init;
    m->graph = graph_init;
    m->opset = opset_init;
    m->model.has_ir_version = 1;
    m->model.ir_version = 7;
    m->opset.domain = mb_str(m, "");
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.graph = &m->graph;
    m->graph.name = mb_str(m, "test");
    m->dim_param = "N";
    return m;
}

void mb_describe(mb_t *m, const char *graph, const char *producer, const char *dim_param)
{
    m->graph.name = mb_str(m, graph);
    m->model.producer_name = producer ? mb_str(m, producer) : NULL;
    m->dim_param = mb_str(m, dim_param);
}

static Onnx__ValueInfoProto *value_info(mb_t *m, const char *name, int dtype, int rank,
                                        const int64_t *dims)
{
    static const Onnx__ValueInfoProto vi_init = ONNX__VALUE_INFO_PROTO__INIT;
    static const Onnx__TypeProto tp_init = ONNX__TYPE_PROTO__INIT;
    static const Onnx__TypeProto__Tensor tt_init = ONNX__TYPE_PROTO__TENSOR__INIT;
    static const Onnx__TensorShapeProto sh_init = ONNX__TENSOR_SHAPE_PROTO__INIT;
    static const Onnx__TensorShapeProto__Dimension d_init =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__ValueInfoProto *vi = mb_alloc(m, sizeof(*vi));
    Onnx__TypeProto *tp = mb_alloc(m, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = mb_alloc(m, sizeof(*tt));
    Onnx__TensorShapeProto *sh = mb_alloc(m, sizeof(*sh));
    int i;

    *vi = vi_init;
    *tp = tp_init;
    *tt = tt_init;
    *sh = sh_init;
    vi->name = mb_str(m, name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = dtype;
    tt->shape = sh;
    sh->n_dim = (size_t)rank;
    sh->dim = mb_alloc(m, (size_t)rank * sizeof(*sh->dim));
    for (i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = mb_alloc(m, sizeof(*d));
        *d = d_init;
        if (dims[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)m->dim_param;
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        sh->dim[i] = d;
    }
    return vi;
}

void mb_input(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims)
{
    Onnx__GraphProto *g = &m->graph;
    g->input = grow(g->input, &m->cap_inputs, g->n_input, sizeof(*g->input));
    g->input[g->n_input++] = value_info(m, name, dtype, rank, dims);
}

void mb_output(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims)
{
    Onnx__GraphProto *g = &m->graph;
    g->output = grow(g->output, &m->cap_outputs, g->n_output, sizeof(*g->output));
    g->output[g->n_output++] = value_info(m, name, dtype, rank, dims);
}

void mb_init(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims, const void *data)
{
    static const Onnx__TensorProto t_init = ONNX__TENSOR_PROTO__INIT;
    Onnx__TensorProto *t = mb_alloc(m, sizeof(*t));
    size_t n = 1, esz = dtype == 1 || dtype == 6 ? 4 : dtype == 7 ? 8 : 1;
    int i;

    *t = t_init;
    t->name = mb_str(m, name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = mb_alloc(m, (size_t)rank * sizeof(int64_t));
    for (i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        n *= (size_t)dims[i];
    }
    t->has_raw_data = 1;
    t->raw_data.len = n * esz;
    t->raw_data.data = mb_alloc(m, n * esz);
    memcpy(t->raw_data.data, data, n * esz);
    m->graph.initializer = grow(m->graph.initializer, &m->cap_inits, m->graph.n_initializer,
                                sizeof(*m->graph.initializer));
    m->graph.initializer[m->graph.n_initializer++] = t;
}

/* Splits a comma-separated list, keeping empty fields (omitted optional inputs). */
static size_t split(mb_t *m, const char *list, char ***out)
{
    size_t n = 1, i = 0;
    const char *p;
    char *save, *tok;
    if (!list[0]) {
        *out = NULL;
        return 0;
    }
    for (p = list; *p; p++)
        n += *p == ',';
    *out = mb_alloc(m, n * sizeof(char *));
    save = mb_str(m, list);
    while ((tok = strsep(&save, ",")) != NULL)
        (*out)[i++] = tok;
    return i;
}

Onnx__NodeProto *mb_node(mb_t *m, const char *op, const char *name, const char *ins,
                         const char *outs)
{
    static const Onnx__NodeProto n_init = ONNX__NODE_PROTO__INIT;
    Onnx__NodeProto *n = mb_alloc(m, sizeof(*n));
    *n = n_init;
    n->op_type = mb_str(m, op);
    n->name = mb_str(m, name);
    n->n_input = split(m, ins, &n->input);
    n->n_output = split(m, outs, &n->output);
    n->attribute = mb_alloc(m, MB_MAX_ATTRS * sizeof(*n->attribute));
    m->graph.node = grow(m->graph.node, &m->cap_nodes, m->graph.n_node, sizeof(*m->graph.node));
    m->graph.node[m->graph.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *mb_attr(mb_t *m, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    static const Onnx__AttributeProto a_init = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *a = mb_alloc(m, sizeof(*a));
    if (n->n_attribute >= MB_MAX_ATTRS) {
        fprintf(stderr, "onnx model builder: node \"%s\": more than %d attributes\n", n->name,
                MB_MAX_ATTRS);
        abort();
    }
    *a = a_init;
    a->name = mb_str(m, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void mb_attr_int(mb_t *m, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = mb_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void mb_attr_float(mb_t *m, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = mb_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void mb_attr_ints(mb_t *m, Onnx__NodeProto *n, const char *name, size_t count, const int64_t *v)
{
    Onnx__AttributeProto *a = mb_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = mb_alloc(m, count * sizeof(int64_t));
    memcpy(a->ints, v, count * sizeof(int64_t));
}

void mb_attr_str(mb_t *m, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = mb_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(m, v);
    a->s.len = strlen(v);
}

static void mb_free(mb_t *m)
{
    size_t i;
    for (i = 0; i < m->n_allocs; i++)
        free(m->allocs[i]);
    free(m->allocs);
    free(m->graph.node);
    free(m->graph.input);
    free(m->graph.output);
    free(m->graph.initializer);
    free(m);
}

int mb_save(mb_t *m, const char *path, size_t *bytes)
{
    size_t len;
    uint8_t *buf;
    FILE *f;
    int rc = 0;

    len = onnx__model_proto__get_packed_size(&m->model);
    buf = must(malloc(len ? len : 1));
    if (onnx__model_proto__pack(&m->model, buf) != len) {
        fprintf(stderr, "onnx model builder: protobuf-c packed a different size than it said\n");
        abort();
    }
    mb_free(m);
    if (!(f = fopen(path, "wb")))
        rc = -errno;
    else if (fwrite(buf, 1, len, f) != len)
        rc = -(errno ? errno : EIO);
    if (f && fclose(f) != 0 && rc == 0)
        rc = -errno;
    free(buf);
    if (rc == 0 && bytes)
        *bytes = len;
    return rc;
}
