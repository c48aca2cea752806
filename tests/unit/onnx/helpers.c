/* Helpers of the onnx suite: see test_onnx.h. */
#include "test_onnx.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the backend ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[8192];

static void test_log(int level, const char *msg)
{
    size_t len;
    pthread_mutex_lock(&log_lock);
    len = strlen(log_buf);
    snprintf(log_buf + len, sizeof(log_buf) - len, "%d %s\n", level, msg);
    pthread_mutex_unlock(&log_lock);
}

const char *tb_log(void)
{
    return log_buf;
}

int tb_open(tb_t *t, const sut_backend_ops_t *ops, const char *model, const char *const *kv,
            uint32_t max_batch, uint32_t threads)
{
    const char *keys[16], *values[16];
    sut_backend_config_t cfg;
    size_t n = 0;

    memset(t, 0, sizeof(*t));
    log_buf[0] = '\0';
    t->ops = ops;
    if (model) {
        keys[n] = "model";
        values[n++] = model;
    }
    while (kv && kv[0] && n < 16) {
        keys[n] = kv[0];
        values[n++] = kv[1];
        kv += 2;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = "cpu";
    cfg.max_batch = max_batch;
    cfg.threads = threads;
    cfg.n_options = n;
    cfg.keys = keys;
    cfg.values = values;
    cfg.log = test_log;
    t->rc = ops->create(&cfg, &t->b, t->err, sizeof(t->err));
    if (t->rc == 0)
        ck_assert_int_eq(ops->describe(t->b, &t->info), 0);
    return t->rc;
}

void tb_close(tb_t *t)
{
    if (t->b)
        t->ops->destroy(t->b);
    t->b = NULL;
}

typedef struct {
    uint8_t *out;
    size_t stride, n, completed;
    int *seen;
} run_ctx_t;

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    run_ctx_t *c = b->node_priv;
    size_t i;
    for (i = 0; i < n; i++) {
        ck_assert_uint_lt(r[i].index, c->n);
        ck_assert_int_eq(c->seen[r[i].index], 0);
        ck_assert_int_eq(r[i].status, 0);
        ck_assert_uint_eq(r[i].size, c->stride);
        c->seen[r[i].index] = 1;
        memcpy(c->out + r[i].index * c->stride, r[i].data, r[i].size);
        c->completed++;
    }
}

int tb_run(tb_t *t, const void *input, size_t n, void *out, size_t out_stride)
{
    sut_sample_t *samples = calloc(n ? n : 1, sizeof(*samples));
    size_t size = t->info.input_size, i;
    sut_batch_t batch;
    run_ctx_t c;
    int rc;

    ck_assert_ptr_nonnull(samples);
    memset(&c, 0, sizeof(c));
    c.out = out;
    c.stride = out_stride;
    c.n = n;
    c.seen = calloc(n ? n : 1, sizeof(int));
    ck_assert_ptr_nonnull(c.seen);
    for (i = 0; i < n; i++) {
        samples[i].data = (const uint8_t *)input + i * size;
        samples[i].size = size;
    }
    memset(&batch, 0, sizeof(batch));
    batch.n = n;
    batch.samples = samples;
    batch.input = (void *)input;
    batch.input_size = n * size;
    batch.uniform = 1;
    batch.complete = on_complete;
    batch.node_priv = &c;
    rc = t->ops->infer(t->b, &batch);
    if (rc == 0)
        ck_assert_uint_eq(c.completed, n); /* infer completes inline */
    else
        ck_assert_uint_eq(c.completed, 0);
    free(c.seen);
    free(samples);
    return rc;
}

/* ---- files ---- */

char *tmp_path(const char *suffix)
{
    const char *dir = getenv("TMPDIR");
    size_t len;
    char *p;
    int fd;

    if (!dir || !dir[0])
        dir = "/tmp";
    len = strlen(dir) + strlen(suffix) + 32;
    p = malloc(len);
    ck_assert_ptr_nonnull(p);
    snprintf(p, len, "%s/onnx_test_XXXXXX%s", dir, suffix);
    fd = mkstemps(p, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    close(fd);
    return p;
}

uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long size;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)size + 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return buf;
}

int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f)
        return -1;
    ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

/* ---- building models ---- */

#define MB_MAX_ATTRS 8

struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto *nodes[64];
    Onnx__ValueInfoProto *inputs[8], *outputs[8];
    Onnx__TensorProto *inits[32];
    void **allocs;
    size_t n_allocs, cap_allocs;
};

static void *mb_alloc(mb_t *m, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    ck_assert_ptr_nonnull(p);
    if (m->n_allocs == m->cap_allocs) {
        m->cap_allocs = m->cap_allocs ? m->cap_allocs * 2 : 64;
        m->allocs = realloc(m->allocs, m->cap_allocs * sizeof(void *));
        ck_assert_ptr_nonnull(m->allocs);
    }
    m->allocs[m->n_allocs++] = p;
    return p;
}

static char *mb_str(mb_t *m, const char *s)
{
    char *p = mb_alloc(m, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

mb_t *mb_new(int64_t opset)
{
    static const Onnx__ModelProto model_init = ONNX__MODEL_PROTO__INIT;
    static const Onnx__GraphProto graph_init = ONNX__GRAPH_PROTO__INIT;
    static const Onnx__OperatorSetIdProto opset_init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    mb_t *m = calloc(1, sizeof(*m));
    ck_assert_ptr_nonnull(m);
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
    m->graph.node = m->nodes;
    m->graph.input = m->inputs;
    m->graph.output = m->outputs;
    m->graph.initializer = m->inits;
    return m;
}

static Onnx__ValueInfoProto *mb_value_info(mb_t *m, const char *name, int dtype, int rank,
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
            d->dim_param = mb_str(m, "N");
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
    m->inputs[m->graph.n_input++] = mb_value_info(m, name, dtype, rank, dims);
}

void mb_output(mb_t *m, const char *name, int dtype, int rank, const int64_t *dims)
{
    m->outputs[m->graph.n_output++] = mb_value_info(m, name, dtype, rank, dims);
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
    m->inits[m->graph.n_initializer++] = t;
}

static size_t split(mb_t *m, const char *list, char ***out)
{
    size_t n = 1, i = 0;
    const char *p;
    char *copy, *save, *tok;
    if (!list[0]) {
        *out = NULL;
        return 0;
    }
    for (p = list; *p; p++)
        n += *p == ',';
    *out = mb_alloc(m, n * sizeof(char *));
    copy = mb_str(m, list);
    /* strsep keeps empty fields (omitted optional inputs) */
    save = copy;
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
    m->nodes[m->graph.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *mb_attr(mb_t *m, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    static const Onnx__AttributeProto a_init = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *a = mb_alloc(m, sizeof(*a));
    ck_assert_uint_lt(n->n_attribute, MB_MAX_ATTRS);
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

char *mb_write(mb_t *m)
{
    size_t len = onnx__model_proto__get_packed_size(&m->model), i;
    uint8_t *buf = malloc(len ? len : 1);
    char *path = tmp_path(".onnx");
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(onnx__model_proto__pack(&m->model, buf), len);
    ck_assert_int_eq(write_all(path, buf, len), 0);
    free(buf);
    for (i = 0; i < m->n_allocs; i++)
        free(m->allocs[i]);
    free(m->allocs);
    free(m);
    return path;
}

void fill_rand(float *p, size_t n, float lo, float hi, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    size_t i;
    for (i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.0f;
    }
}

void assert_close(const float *got, const float *want, size_t n, float atol, float rtol,
                  const char *what)
{
    size_t i;
    for (i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= atol + rtol * fabsf(want[i])) && !(isnan(got[i]) && isnan(want[i])))
            ck_abort_msg("%s: element %zu is %.8g, expected %.8g (of %zu)", what, i, (double)got[i],
                         (double)want[i], n);
    }
}
