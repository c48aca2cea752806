/* Loading an ONNX model into the backend's IR: parse, check, infer shapes, find the batch axis.
 *
 * Everything that the backend cannot run is refused here, at load time, with the node's name and
 * op in the message, so that a model never fails half-way through a benchmark. */
#include "onnx_graph.h"

#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The newest opset whose semantics this file implements (ONNX 1.12). A newer opset may change an
 * operator we accept (AveragePool gains dilations in 19), so it is refused rather than guessed. */
#define ONNX_MAX_OPSET 17
/* Largest tensor we accept, in elements: far above any vision model, low enough that byte counts
 * cannot overflow. */
#define ONNX_MAX_NUMEL (INT64_C(1) << 40)

#define STR(s) ((s) ? (s) : "")

/* ---- small helpers --------------------------------------------------------------------------- */

static int dtype_known(int t)
{
    return t == ONNX_DT_FLOAT || t == ONNX_DT_UINT8 || t == ONNX_DT_INT8 || t == ONNX_DT_INT32 ||
           t == ONNX_DT_INT64;
}

static void shape_str(char *buf, size_t len, const int64_t *dims, int rank)
{
    size_t off = 0;
    int i;
    off += (size_t)snprintf(buf + off, len - off, "[");
    for (i = 0; i < rank && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

static int errv(cmn_errbuf_t *eb, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static int errv(cmn_errbuf_t *eb, const char *prefix, const char *fmt, va_list ap)
{
    size_t off;
    if (!eb)
        return CMN_EFORMAT;
    off = (size_t)snprintf(eb->msg, sizeof(eb->msg), "%s", prefix);
    if (off < sizeof(eb->msg))
        vsnprintf(eb->msg + off, sizeof(eb->msg) - off, fmt, ap);
    return CMN_EFORMAT;
}

static int bad(cmn_errbuf_t *eb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(cmn_errbuf_t *eb, const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = errv(eb, "", fmt, ap);
    va_end(ap);
    return rc;
}

/* A message about one node: node "name" (Op): what is wrong. */
static int node_bad(cmn_errbuf_t *eb, const onnx_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int node_bad(cmn_errbuf_t *eb, const onnx_node_t *n, const char *fmt, ...)
{
    char prefix[160];
    va_list ap;
    int rc;
    snprintf(prefix, sizeof(prefix), "node \"%s\" (%s): ", n->name, n->op_type);
    va_start(ap, fmt);
    rc = errv(eb, prefix, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- the value table ------------------------------------------------------------------------- */

static int find_value(const onnx_graph_t *g, const char *name)
{
    int i;
    for (i = g->n_values - 1; i >= 0; i--)
        if (strcmp(g->values[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- tensors --------------------------------------------------------------------------------- */

/* Converts a TensorProto into a row-major buffer. |what| names it in messages. */
static int tensor_from_proto(const Onnx__TensorProto *t, const char *what, onnx_dtype_t *dtype,
                             int *rank, int64_t *dims, void **data, cmn_errbuf_t *eb)
{
    int64_t n;
    size_t esz, i, bytes;
    void *p;

    if (!t->has_data_type || !dtype_known(t->data_type))
        return bad(eb, "%s: element type %s is not supported (float, uint8, int8, int32, int64)",
                   what, onnx_dtype_name(t->has_data_type ? t->data_type : 0));
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return bad(eb,
                   "%s: external tensor data is not supported (save the model with the "
                   "weights inside the .onnx file)",
                   what);
    if (t->segment)
        return bad(eb, "%s: segmented tensors are not supported", what);
    if (t->n_dims > ONNX_MAX_RANK)
        return bad(eb, "%s: rank %zu is over the limit of %d", what, t->n_dims, ONNX_MAX_RANK);
    n = 1;
    for (i = 0; i < t->n_dims; i++) {
        if (t->dims[i] <= 0 || t->dims[i] > ONNX_MAX_NUMEL || n * t->dims[i] > ONNX_MAX_NUMEL)
            return bad(eb, "%s: dimension %zu of %lld is not supported (empty or too large)", what,
                       i, (long long)t->dims[i]);
        n *= t->dims[i];
        dims[i] = t->dims[i];
    }
    *rank = (int)t->n_dims;
    *dtype = (onnx_dtype_t)t->data_type;
    esz = onnx_dtype_size(*dtype);
    bytes = (size_t)n * esz;
    p = malloc(bytes ? bytes : 1);
    if (!p)
        return -ENOMEM;

    if (t->has_raw_data) {
        if (t->raw_data.len != bytes) {
            free(p);
            return bad(eb, "%s: %zu bytes of raw data for %lld %s elements", what, t->raw_data.len,
                       (long long)n, onnx_dtype_name(*dtype));
        }
        memcpy(p, t->raw_data.data, bytes); /* little-endian, as on every host we build for */
    } else if (*dtype == ONNX_DT_FLOAT && t->n_float_data == (size_t)n) {
        memcpy(p, t->float_data, bytes);
    } else if (*dtype == ONNX_DT_INT64 && t->n_int64_data == (size_t)n) {
        memcpy(p, t->int64_data, bytes);
    } else if ((*dtype == ONNX_DT_INT32 || *dtype == ONNX_DT_UINT8 || *dtype == ONNX_DT_INT8) &&
               t->n_int32_data == (size_t)n) {
        /* The schema stores the small integer types widened to int32. */
        for (i = 0; i < (size_t)n; i++) {
            if (*dtype == ONNX_DT_INT32)
                ((int32_t *)p)[i] = t->int32_data[i];
            else if (*dtype == ONNX_DT_UINT8)
                ((uint8_t *)p)[i] = (uint8_t)t->int32_data[i];
            else
                ((int8_t *)p)[i] = (int8_t)t->int32_data[i];
        }
    } else {
        free(p);
        return bad(eb, "%s: the tensor holds no data for its %lld %s elements", what, (long long)n,
                   onnx_dtype_name(*dtype));
    }
    *data = p;
    return 0;
}

static int read_file(const char *path, uint8_t **out, size_t *len, cmn_errbuf_t *eb)
{
    struct stat st;
    uint8_t *buf;
    size_t off = 0;
    int fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        return cmn_errf(eb, rc, "cannot open %s: %s", path, strerror(-rc));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cmn_errf(eb, -EINVAL, "%s is not a regular file", path);
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return cmn_errf(eb, -ENOMEM, "no memory for the %lld bytes of %s", (long long)st.st_size,
                        path);
    }
    while (off < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + off, (size_t)st.st_size - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : -EIO;
            free(buf);
            close(fd);
            return cmn_errf(eb, rc, "cannot read %s: %s", path, strerror(-rc));
        }
        off += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = off;
    return 0;
}

int onnx_tensor_read(const char *path, onnx_tensor_t *t, cmn_errbuf_t *eb)
{
    Onnx__TensorProto *tp;
    uint8_t *buf;
    size_t len;
    int rc;

    memset(t, 0, sizeof(*t));
    rc = read_file(path, &buf, &len, eb);
    if (rc < 0)
        return rc;
    tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp)
        return bad(eb, "%s is not an onnx.TensorProto", path);
    rc = tensor_from_proto(tp, path, &t->dtype, &t->rank, t->dims, &t->data, eb);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    if (rc == 0)
        t->size = (size_t)onnx_dims_numel(t->dims, t->rank) * onnx_dtype_size(t->dtype);
    return rc;
}

/* ---- attributes ------------------------------------------------------------------------------ */

typedef struct {
    const Onnx__NodeProto *p;
    const onnx_node_t *n;
    cmn_errbuf_t *eb;
} ctx_t;

static const Onnx__AttributeProto *attr_find(const ctx_t *c, const char *name)
{
    size_t i;
    for (i = 0; i < c->p->n_attribute; i++)
        if (strcmp(STR(c->p->attribute[i]->name), name) == 0)
            return c->p->attribute[i];
    return NULL;
}

/* Every attribute of the node must be one we read: an unknown one may change the semantics. */
static int attrs_known(const ctx_t *c, const char *const *known)
{
    size_t i, k;
    for (i = 0; i < c->p->n_attribute; i++) {
        const char *name = STR(c->p->attribute[i]->name);
        for (k = 0; known[k]; k++)
            if (strcmp(name, known[k]) == 0)
                break;
        if (!known[k])
            return node_bad(c->eb, c->n, "attribute \"%s\" is not supported", name);
        if (c->p->attribute[i]->ref_attr_name && c->p->attribute[i]->ref_attr_name[0])
            return node_bad(c->eb, c->n, "attribute \"%s\" refers to a function attribute", name);
    }
    return 0;
}

/* The int or float attribute |name| into *out (NULL when absent); a code naming it when it has
 * another type or no value. */
static int attr_scalar(const ctx_t *c, const char *name, Onnx__AttributeProto__AttributeType type,
                       const char *what, const Onnx__AttributeProto **out)
{
    const Onnx__AttributeProto *a = attr_find(c, name);
    int has;

    *out = NULL;
    if (!a)
        return 0;
    has = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ? a->has_i : a->has_f;
    if (!has || (a->has_type && a->type != type))
        return node_bad(c->eb, c->n, "attribute \"%s\" must be %s", name, what);
    *out = a;
    return 0;
}

static int attr_int(const ctx_t *c, const char *name, int64_t dflt, int64_t *out)
{
    const Onnx__AttributeProto *a;
    int rc = attr_scalar(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an int", &a);

    *out = a ? a->i : dflt;
    return rc;
}

static int attr_float(const ctx_t *c, const char *name, float dflt, float *out)
{
    const Onnx__AttributeProto *a;
    int rc = attr_scalar(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "a float", &a);

    *out = a ? a->f : dflt;
    return rc;
}

/* Reads an ints attribute of exactly |want| entries (or any count when want < 0) into |out|;
 * *found is 0 when the attribute is absent. */
static int attr_ints(const ctx_t *c, const char *name, int want, int64_t *out, size_t cap,
                     size_t *count)
{
    const Onnx__AttributeProto *a = attr_find(c, name);
    *count = 0;
    if (!a)
        return 0;
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return node_bad(c->eb, c->n, "attribute \"%s\" must be a list of ints", name);
    if ((want >= 0 && a->n_ints != (size_t)want) || a->n_ints > cap)
        return node_bad(c->eb, c->n, "attribute \"%s\" has %zu entries, expected %d", name,
                        a->n_ints, want);
    memcpy(out, a->ints, a->n_ints * sizeof(int64_t));
    *count = a->n_ints;
    return 0;
}

static const char *attr_string(const ctx_t *c, const char *name, char *buf, size_t len)
{
    const Onnx__AttributeProto *a = attr_find(c, name);
    size_t n;
    if (!a || !a->has_s)
        return NULL;
    n = a->s.len < len - 1 ? a->s.len : len - 1;
    memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}

/* ---- per-op checks and shape inference ------------------------------------------------------- */

static int extra_outputs(const Onnx__NodeProto *p);

typedef struct {
    onnx_graph_t *g;
    onnx_node_t *n;
    const Onnx__NodeProto *p;
    cmn_errbuf_t *eb;
    onnx_value_t *out;  /* the output, to be filled: dtype, rank, dims, batched */
    const char *unsafe; /* set when the node mixes samples along the batch axis */
} infer_t;

static onnx_value_t *in_val(const infer_t *x, int i)
{
    return x->n->in[i] >= 0 ? &x->g->values[x->n->in[i]] : NULL;
}

static int need_float(const infer_t *x, int i)
{
    const onnx_value_t *v = in_val(x, i);
    if (v && v->dtype != ONNX_DT_FLOAT)
        return node_bad(x->eb, x->n, "input \"%s\" is %s; this op runs on float only", v->name,
                        onnx_dtype_name(v->dtype));
    return 0;
}

/* Inputs that are weights (Conv W, BatchNormalization statistics) must not be per-sample. */
static void not_batched(infer_t *x, int i, const char *why)
{
    const onnx_value_t *v = in_val(x, i);
    if (v && v->batched && !x->unsafe)
        x->unsafe = why;
}

/* Resolves strides, dilations, pads, auto_pad and ceil_mode into explicit left and right pads
 * and the output's spatial dims. *extended is set when ceil_mode adds right padding beyond the
 * model's own. */
static int spatial_attrs(infer_t *x, const onnx_value_t *in, const int64_t *kernel, int is_pool,
                         int *extended)
{
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    int64_t pads[2 * ONNX_MAX_SPATIAL], ceil_mode = 0;
    size_t cnt;
    char autopad[32];
    const char *ap;
    int s, ns = in->rank - 2, rc;

    n->n_spatial = ns;
    for (s = 0; s < ns; s++) {
        n->kernel[s] = kernel[s];
        n->stride[s] = 1;
        n->dilation[s] = 1;
        n->pad_l[s] = n->pad_r[s] = 0;
    }
    if ((rc = attr_ints(&c, "strides", ns, n->stride, ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    if ((rc = attr_ints(&c, "dilations", ns, n->dilation, ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    if ((rc = attr_ints(&c, "pads", 2 * ns, pads, 2 * ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    if (cnt)
        for (s = 0; s < ns; s++) {
            n->pad_l[s] = pads[s];
            n->pad_r[s] = pads[ns + s];
        }
    if (is_pool && (rc = attr_int(&c, "ceil_mode", 0, &ceil_mode)) < 0)
        return rc;
    ap = attr_string(&c, "auto_pad", autopad, sizeof(autopad));
    if (ap && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0 &&
        strcmp(ap, "SAME_UPPER") != 0 && strcmp(ap, "SAME_LOWER") != 0)
        return node_bad(x->eb, n,
                        "auto_pad \"%s\" is not one of NOTSET, SAME_UPPER, "
                        "SAME_LOWER, VALID",
                        ap);
    /* Exporters sometimes write zero pads next to auto_pad; only real pads conflict with it. */
    for (s = 0; ap && strcmp(ap, "NOTSET") != 0 && s < (int)cnt; s++)
        if (pads[s] != 0)
            return node_bad(x->eb, n, "pads and auto_pad %s are both given", ap);
    if (ap && strcmp(ap, "NOTSET") != 0)
        for (s = 0; s < ns; s++)
            n->pad_l[s] = n->pad_r[s] = 0;

    x->out->rank = in->rank;
    x->out->dims[0] = in->dims[0];
    for (s = 0; s < ns; s++) {
        int64_t size = in->dims[2 + s], eff, o;
        if (n->stride[s] < 1 || n->dilation[s] < 1 || n->kernel[s] < 1 || n->pad_l[s] < 0 ||
            n->pad_r[s] < 0)
            return node_bad(x->eb, n, "strides, dilations and kernel must be >= 1, pads >= 0");
        eff = (n->kernel[s] - 1) * n->dilation[s] + 1;
        if (ap && strncmp(ap, "SAME", 4) == 0) {
            int64_t total;
            o = (size + n->stride[s] - 1) / n->stride[s];
            total = (o - 1) * n->stride[s] + eff - size;
            if (total < 0)
                total = 0;
            if (strcmp(ap, "SAME_UPPER") == 0) {
                n->pad_l[s] = total / 2;
                n->pad_r[s] = total - total / 2;
            } else {
                n->pad_r[s] = total / 2;
                n->pad_l[s] = total - total / 2;
            }
        } else {
            int64_t span = size + n->pad_l[s] + n->pad_r[s] - eff;
            if (span < 0)
                return node_bad(x->eb, n,
                                "the kernel (%lld with dilation) is larger than the "
                                "padded input (%lld) in spatial dim %d",
                                (long long)eff, (long long)(size + n->pad_l[s] + n->pad_r[s]), s);
            if (ap && strcmp(ap, "VALID") == 0)
                n->pad_l[s] = n->pad_r[s] = 0;
            span = size + n->pad_l[s] + n->pad_r[s] - eff;
            o = span / n->stride[s] + 1;
            if (ceil_mode && span % n->stride[s]) {
                o++;
                /* As PyTorch and ONNX Runtime: the last window must start inside the input or
                 * its left padding, else it is dropped. */
                if ((o - 1) * n->stride[s] >= size + n->pad_l[s])
                    o--;
            }
            /* Windows beyond the explicit padding (ceil_mode) become extra right padding. */
            if ((o - 1) * n->stride[s] + eff > size + n->pad_l[s] + n->pad_r[s]) {
                n->pad_r[s] = (o - 1) * n->stride[s] + eff - size - n->pad_l[s];
                *extended = 1;
            }
        }
        if (o < 1)
            return node_bad(x->eb, n, "the output would be empty in spatial dim %d", s);
        x->out->dims[2 + s] = o;
        if (is_pool && n->pad_l[s] >= eff)
            return node_bad(x->eb, n, "padding (%lld) at least as large as the window (%lld)",
                            (long long)n->pad_l[s], (long long)eff);
    }
    return 0;
}

/* The node's output has the shape and the batching of |in| (element-wise operators). */
static void out_like(infer_t *x, const onnx_value_t *in)
{
    x->out->rank = in->rank;
    memcpy(x->out->dims, in->dims, sizeof(in->dims));
    x->out->batched = in->batched;
}

/* Conv and ConvTranspose: their attributes known, inputs X and W (and B) float, X with 1 to 3
 * spatial dims and W of its rank; their group attribute into *group. */
static int conv_inputs(infer_t *x, const char *const *known, int64_t *group)
{
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0), *w = in_val(x, 1);
    int rc;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if (!in || !w)
        return node_bad(x->eb, x->n, "needs inputs X and W");
    if ((rc = need_float(x, 0)) < 0 || (rc = need_float(x, 1)) < 0 || (rc = need_float(x, 2)) < 0)
        return rc;
    if (in->rank < 3 || in->rank > 2 + ONNX_MAX_SPATIAL)
        return node_bad(x->eb, x->n, "input of rank %d; 1 to 3 spatial dims are supported",
                        in->rank);
    if (w->rank != in->rank)
        return node_bad(x->eb, x->n, "W has rank %d, X rank %d", w->rank, in->rank);
    return attr_int(&c, "group", 1, group);
}

/* A kernel_shape attribute, when given, must be W's spatial dims. */
static int kernel_shape_of_w(infer_t *x, const onnx_value_t *w)
{
    ctx_t c = {x->p, x->n, x->eb};
    int64_t kshape[ONNX_MAX_SPATIAL];
    size_t cnt;
    int s, rc;

    if ((rc = attr_ints(&c, "kernel_shape", w->rank - 2, kshape, ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    for (s = 0; cnt && s < w->rank - 2; s++)
        if (kshape[s] != w->dims[2 + s])
            return node_bad(x->eb, x->n, "kernel_shape does not match W");
    return 0;
}

/* Weights and bias that differ per sample cannot run batched. */
static void conv_weights_not_batched(infer_t *x)
{
    not_batched(x, 1, "its weights are a per-sample input");
    not_batched(x, 2, "its bias is a per-sample input");
}

static int infer_conv(infer_t *x)
{
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                        "pads",     "strides",   NULL};
    onnx_node_t *n = x->n;
    const onnx_value_t *in = in_val(x, 0), *w = in_val(x, 1), *b = in_val(x, 2);
    int64_t group;
    int rc, extended = 0;

    if ((rc = conv_inputs(x, known, &group)) < 0)
        return rc;
    if (group < 1 || in->dims[1] % group || w->dims[0] % group || w->dims[1] * group != in->dims[1])
        return node_bad(x->eb, n, "group %lld does not fit %lld input channels and W [%lld,%lld]",
                        (long long)group, (long long)in->dims[1], (long long)w->dims[0],
                        (long long)w->dims[1]);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return node_bad(x->eb, n, "bias \"%s\" must be a vector of %lld", b->name,
                        (long long)w->dims[0]);
    if ((rc = kernel_shape_of_w(x, w)) < 0)
        return rc;
    n->group = group;
    if ((rc = spatial_attrs(x, in, w->dims + 2, 0, &extended)) < 0)
        return rc;
    x->out->dims[1] = w->dims[0];
    x->out->batched = in->batched;
    conv_weights_not_batched(x);
    return 0;
}

static int infer_pool(infer_t *x)
{
    static const char *const max_known[] = {"auto_pad",     "ceil_mode", "dilations",
                                            "kernel_shape", "pads",      "storage_order",
                                            "strides",      NULL};
    static const char *const avg_known[] = {
        "auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    const onnx_value_t *in = in_val(x, 0);
    int64_t kshape[ONNX_MAX_SPATIAL], cip = 0;
    size_t cnt;
    int rc, extended = 0;

    if ((rc = attrs_known(&c, n->op == ONNX_OP_MAXPOOL ? max_known : avg_known)) < 0)
        return rc;
    if (extra_outputs(x->p))
        return node_bad(x->eb, n, "the Indices output is not supported");
    if (!in || in->rank < 3 || in->rank > 2 + ONNX_MAX_SPATIAL)
        return node_bad(x->eb, n, "input must have 1 to 3 spatial dims");
    if (n->op == ONNX_OP_AVGPOOL && (rc = need_float(x, 0)) < 0)
        return rc;
    if (in->dtype != ONNX_DT_FLOAT && in->dtype != ONNX_DT_UINT8 && in->dtype != ONNX_DT_INT8)
        return node_bad(x->eb, n, "input type %s is not supported", onnx_dtype_name(in->dtype));
    if ((rc = attr_ints(&c, "kernel_shape", in->rank - 2, kshape, ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    if (!cnt)
        return node_bad(x->eb, n, "kernel_shape is required");
    if ((rc = attr_int(&c, "count_include_pad", 0, &cip)) < 0)
        return rc;
    n->count_include_pad = cip != 0;
    if ((rc = spatial_attrs(x, in, kshape, 1, &extended)) < 0)
        return rc;
    /* oneDNN would count the padding that ceil_mode adds too; ONNX counts only the model's. */
    if (n->count_include_pad && extended)
        return node_bad(x->eb, n,
                        "count_include_pad=1 with ceil_mode windows beyond the "
                        "padding is not supported");
    x->out->dtype = in->dtype;
    x->out->dims[1] = in->dims[1];
    x->out->batched = in->batched;
    return 0;
}

static int infer_global_pool(infer_t *x)
{
    static const char *const known[] = {NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int rc, s;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = need_float(x, 0)) < 0)
        return rc;
    if (!in || in->rank < 3 || in->rank > 2 + ONNX_MAX_SPATIAL)
        return node_bad(x->eb, x->n, "input must have 1 to 3 spatial dims");
    x->n->n_spatial = in->rank - 2;
    x->out->rank = in->rank;
    x->out->dims[0] = in->dims[0];
    x->out->dims[1] = in->dims[1];
    for (s = 0; s < in->rank - 2; s++) {
        x->n->kernel[s] = in->dims[2 + s];
        x->n->stride[s] = x->n->dilation[s] = 1;
        x->out->dims[2 + s] = 1;
    }
    x->out->batched = in->batched;
    return 0;
}

static int infer_batchnorm(infer_t *x)
{
    static const char *const known[] = {"epsilon",       "momentum", "spatial",
                                        "training_mode", "is_test",  NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int64_t training = 0, spatial = 1, is_test = 1;
    int rc, i;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if ((rc = attr_int(&c, "training_mode", 0, &training)) < 0 ||
        (rc = attr_int(&c, "spatial", 1, &spatial)) < 0 ||
        (rc = attr_int(&c, "is_test", 1, &is_test)) < 0 ||
        (rc = attr_float(&c, "epsilon", 1e-5f, &x->n->epsilon)) < 0)
        return rc;
    if (training || !is_test || extra_outputs(x->p))
        return node_bad(x->eb, x->n, "training mode is not supported (inference only)");
    if (!spatial)
        return node_bad(x->eb, x->n, "spatial=0 (per-element statistics) is not supported");
    if (x->n->n_in != 5 || !in || in->rank < 2)
        return node_bad(x->eb, x->n, "needs X (rank >= 2), scale, B, mean and var");
    for (i = 0; i < 5; i++) {
        const onnx_value_t *v = in_val(x, i);
        if (!v)
            return node_bad(x->eb, x->n, "input %d is missing", i);
        if ((rc = need_float(x, i)) < 0)
            return rc;
        if (i && (v->rank != 1 || v->dims[0] != in->dims[1]))
            return node_bad(x->eb, x->n, "\"%s\" must be a vector of %lld channels", v->name,
                            (long long)in->dims[1]);
        if (i)
            not_batched(x, i, "its statistics are a per-sample input");
    }
    out_like(x, in);
    return 0;
}

static int infer_unary(infer_t *x)
{
    static const char *const known[] = {NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int rc;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if (!in)
        return node_bad(x->eb, x->n, "needs one input");
    if (x->n->op == ONNX_OP_RELU && (rc = need_float(x, 0)) < 0)
        return rc;
    x->out->dtype = in->dtype;
    out_like(x, in);
    return 0;
}

static int infer_binary(infer_t *x)
{
    static const char *const known[] = {"broadcast", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    const onnx_value_t *a = in_val(x, 0), *b = in_val(x, 1);
    int64_t ad[ONNX_MAX_RANK], bd[ONNX_MAX_RANK];
    int rank, i, rc;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if (!a || !b)
        return node_bad(x->eb, n, "needs two inputs");
    if (a->dtype != b->dtype)
        return node_bad(x->eb, n, "inputs of different types (%s, %s)", onnx_dtype_name(a->dtype),
                        onnx_dtype_name(b->dtype));
    if (a->dtype != ONNX_DT_FLOAT)
        /* ONNX integer arithmetic wraps around (and Div truncates); oneDNN saturates and rounds,
         * so the results would differ exactly where it matters. */
        return node_bad(x->eb, n, "%s arithmetic is not supported (float only)",
                        onnx_dtype_name(a->dtype));
    rank = a->rank > b->rank ? a->rank : b->rank;
    for (i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        ad[i] = ia >= 0 ? a->dims[ia] : 1;
        bd[i] = ib >= 0 ? b->dims[ib] : 1;
        if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1) {
            char sa[96], sb[96];
            shape_str(sa, sizeof(sa), a->dims, a->rank);
            shape_str(sb, sizeof(sb), b->dims, b->rank);
            return node_bad(x->eb, n, "shapes %s and %s do not broadcast", sa, sb);
        }
        x->out->dims[i] = ad[i] > bd[i] ? ad[i] : bd[i];
    }
    x->out->rank = rank ? rank : 1;
    if (!rank)
        x->out->dims[0] = 1;
    /* oneDNN broadcasts the second operand only; Add and Mul can swap theirs. */
    if (memcmp(ad, x->out->dims, (size_t)rank * sizeof(int64_t)) != 0) {
        if (memcmp(bd, x->out->dims, (size_t)rank * sizeof(int64_t)) != 0)
            return node_bad(x->eb, n, "both inputs are broadcast; only one may be");
        if (n->op == ONNX_OP_SUB || n->op == ONNX_OP_DIV)
            return node_bad(x->eb, n, "broadcasting the first input is not supported");
    }
    x->out->dtype = a->dtype;
    x->out->batched = a->batched || b->batched;
    if (x->out->batched) {
        /* Each operand must either carry the batch axis itself or not touch dim 0. */
        if ((a->batched && a->rank != rank) || (b->batched && b->rank != rank) ||
            (!a->batched && ad[0] != 1) || (!b->batched && bd[0] != 1))
            if (!x->unsafe)
                x->unsafe = "it broadcasts across the batch axis";
    }
    return 0;
}

static int infer_gemm(infer_t *x)
{
    static const char *const known[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    const onnx_value_t *a = in_val(x, 0), *b = in_val(x, 1), *cv = in_val(x, 2);
    int64_t ta, tb, m, k, nn;
    int rc, i;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if ((rc = attr_float(&c, "alpha", 1.0f, &n->alpha)) < 0 ||
        (rc = attr_float(&c, "beta", 1.0f, &n->beta)) < 0 ||
        (rc = attr_int(&c, "transA", 0, &ta)) < 0 || (rc = attr_int(&c, "transB", 0, &tb)) < 0)
        return rc;
    if (!a || !b)
        return node_bad(x->eb, n, "needs inputs A and B");
    for (i = 0; i < 3; i++)
        if ((rc = need_float(x, i)) < 0)
            return rc;
    if (a->rank != 2 || b->rank != 2)
        return node_bad(x->eb, n, "A and B must be matrices");
    if (n->alpha == 0.0f)
        return node_bad(x->eb, n, "alpha=0 is not supported");
    n->trans_a = ta != 0;
    n->trans_b = tb != 0;
    m = ta ? a->dims[1] : a->dims[0];
    k = ta ? a->dims[0] : a->dims[1];
    nn = tb ? b->dims[0] : b->dims[1];
    if ((tb ? b->dims[1] : b->dims[0]) != k)
        return node_bad(x->eb, n, "A is %lldx%lld and B %lldx%lld after transposition",
                        (long long)m, (long long)k, (long long)(tb ? b->dims[1] : b->dims[0]),
                        (long long)nn);
    if (cv) {
        int64_t c0 = cv->rank == 2 ? cv->dims[0] : 1;
        int64_t c1 = cv->rank >= 1 ? cv->dims[cv->rank - 1] : 1;
        if (cv->rank > 2 || (c0 != 1 && c0 != m) || (c1 != 1 && c1 != nn))
            return node_bad(x->eb, n, "C does not broadcast to %lldx%lld", (long long)m,
                            (long long)nn);
        if (cv->batched || (a->batched && c0 != 1))
            x->unsafe = x->unsafe ? x->unsafe : "its C input differs per sample";
    }
    x->out->rank = 2;
    x->out->dims[0] = m;
    x->out->dims[1] = nn;
    x->out->batched = a->batched;
    if (a->batched && ta && !x->unsafe)
        x->unsafe = "transA mixes samples";
    not_batched(x, 1, "its B input is per sample");
    return 0;
}

static int infer_matmul(infer_t *x)
{
    static const char *const known[] = {NULL};
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    const onnx_value_t *a = in_val(x, 0), *b = in_val(x, 1);
    int64_t ad[ONNX_MAX_RANK], bd[ONNX_MAX_RANK];
    int ar, br, rank, i, rc;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if (!a || !b)
        return node_bad(x->eb, n, "needs two inputs");
    if ((rc = need_float(x, 0)) < 0 || (rc = need_float(x, 1)) < 0)
        return rc;
    /* numpy.matmul: a vector operand gains a unit dim that the result then drops. */
    ar = a->rank;
    br = b->rank;
    memcpy(ad, a->dims, sizeof(ad));
    memcpy(bd, b->dims, sizeof(bd));
    if (ar == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ar = 2;
    }
    if (br == 1) {
        bd[1] = 1;
        br = 2;
    }
    if (ad[ar - 1] != bd[br - 2])
        return node_bad(x->eb, n, "inner dimensions differ (%lld and %lld)", (long long)ad[ar - 1],
                        (long long)bd[br - 2]);
    rank = ar > br ? ar : br;
    for (i = 0; i < rank - 2; i++) {
        int ia = i - (rank - ar), ib = i - (rank - br);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return node_bad(x->eb, n, "batch dimensions do not broadcast");
        x->out->dims[i] = da > db ? da : db;
    }
    x->out->dims[rank - 2] = ad[ar - 2];
    x->out->dims[rank - 1] = bd[br - 1];
    x->out->rank = rank;
    if (a->rank == 1) {
        memmove(&x->out->dims[rank - 2], &x->out->dims[rank - 1], sizeof(int64_t));
        x->out->rank--;
    }
    if (b->rank == 1)
        x->out->rank--;
    if (x->out->rank == 0) {
        x->out->rank = 1;
        x->out->dims[0] = 1;
    }
    x->out->batched = a->batched;
    if (a->batched &&
        (a->rank < 2 || a->rank < b->rank || (a->rank >= 3 && b->rank == a->rank && bd[0] != 1)))
        x->unsafe = x->unsafe ? x->unsafe : "it broadcasts across the batch axis";
    not_batched(x, 1, "its B input is per sample");
    return 0;
}

/* A negative *axis counts from the end; it must then lie in [0, rank), or [0, rank] with
 * |end_ok| (Flatten's). */
static int axis_in_range(const infer_t *x, int64_t *axis, int rank, int end_ok)
{
    if (*axis < 0)
        *axis += rank;
    if (*axis < 0 || *axis > rank - (end_ok ? 0 : 1))
        return node_bad(x->eb, x->n, "axis out of range for rank %d", rank);
    return 0;
}

static int infer_flatten(infer_t *x)
{
    static const char *const known[] = {"axis", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int64_t axis;
    int rc;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = attr_int(&c, "axis", 1, &axis)) < 0)
        return rc;
    if (!in)
        return node_bad(x->eb, x->n, "needs one input");
    if ((rc = axis_in_range(x, &axis, in->rank, 1)) < 0)
        return rc;
    x->out->dtype = in->dtype;
    x->out->rank = 2;
    x->out->dims[0] = onnx_dims_numel(in->dims, (int)axis);
    x->out->dims[1] = onnx_dims_numel(in->dims + axis, in->rank - (int)axis);
    x->out->batched = in->batched;
    if (in->batched && axis == 0 && !x->unsafe)
        x->unsafe = "axis 0 merges the samples";
    return 0;
}

static int infer_reshape(infer_t *x)
{
    static const char *const known[] = {"allowzero", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0), *sh = in_val(x, 1);
    int64_t allowzero, known_prod = 1, total;
    const int64_t *s;
    int i, minus = -1, rc;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = attr_int(&c, "allowzero", 0, &allowzero)) < 0)
        return rc;
    if (!in || !sh)
        return node_bad(x->eb, x->n,
                        "needs data and shape inputs (Reshape-1 with a shape "
                        "attribute is not supported)");
    if (sh->dtype != ONNX_DT_INT64 || sh->rank != 1 || !sh->data)
        return node_bad(x->eb, x->n, "the shape \"%s\" must be a constant int64 vector (%s)",
                        sh->name,
                        sh->data ? "it is not an int64 vector" : "it is only known at run time");
    if (sh->dims[0] > ONNX_MAX_RANK)
        return node_bad(x->eb, x->n, "target rank %lld is over the limit of %d",
                        (long long)sh->dims[0], ONNX_MAX_RANK);
    s = sh->data;
    total = onnx_dims_numel(in->dims, in->rank);
    x->out->rank = (int)sh->dims[0];
    for (i = 0; i < x->out->rank; i++) {
        int64_t d = s[i];
        if (d == 0 && allowzero)
            return node_bad(x->eb, x->n,
                            "allowzero with a 0 in the shape would make an empty "
                            "tensor");
        if (d == 0) {
            if (i >= in->rank)
                return node_bad(x->eb, x->n, "shape copies dim %d of a rank-%d input", i, in->rank);
            d = in->dims[i];
        }
        if (d == -1) {
            if (minus >= 0)
                return node_bad(x->eb, x->n, "more than one -1 in the shape");
            minus = i;
            continue;
        }
        if (d < 1)
            return node_bad(x->eb, x->n, "shape entry %lld is not supported", (long long)d);
        x->out->dims[i] = d;
        known_prod *= d;
    }
    if (minus >= 0) {
        if (known_prod == 0 || total % known_prod)
            return node_bad(x->eb, x->n, "cannot infer the -1 dimension");
        x->out->dims[minus] = total / known_prod;
    } else if (known_prod != total) {
        char a[96], b[96];
        shape_str(a, sizeof(a), in->dims, in->rank);
        shape_str(b, sizeof(b), x->out->dims, x->out->rank);
        return node_bad(x->eb, x->n, "cannot reshape %s into %s", a, b);
    }
    x->out->dtype = in->dtype;
    x->out->batched = in->batched;
    /* Batch-safe when the first entry copies the batch dim (0) or is the -1 that absorbs it. */
    if (in->batched && !(x->out->rank >= 1 && (s[0] == 0 || s[0] == -1)))
        if (!x->unsafe)
            x->unsafe = "its shape fixes the batch dimension";
    return 0;
}

static int infer_softmax(infer_t *x)
{
    static const char *const known[] = {"axis", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int64_t axis;
    int rc;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = need_float(x, 0)) < 0)
        return rc;
    if (!in)
        return node_bad(x->eb, x->n, "needs one input");
    /* Before opset 13 Softmax flattens the input to 2-D at axis (default 1); from 13 on it works
     * along the one axis (default -1). */
    x->n->softmax_2d = x->g->opset < 13;
    if ((rc = attr_int(&c, "axis", x->n->softmax_2d ? 1 : -1, &axis)) < 0)
        return rc;
    if ((rc = axis_in_range(x, &axis, in->rank, 0)) < 0)
        return rc;
    x->n->axis = (int)axis;
    x->out->dtype = in->dtype;
    out_like(x, in);
    if (in->batched && axis == 0 && !x->unsafe)
        x->unsafe = "axis 0 normalises across the samples";
    return 0;
}

static int infer_cast(infer_t *x)
{
    static const char *const known[] = {"to", "saturate", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int64_t to;
    int rc;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = attr_int(&c, "to", 0, &to)) < 0)
        return rc;
    if (!in)
        return node_bad(x->eb, x->n, "needs one input");
    if (!dtype_known((int)to) || to == ONNX_DT_INT64 || in->dtype == ONNX_DT_INT64)
        return node_bad(x->eb, x->n,
                        "cast from %s to %s is not supported (float, uint8, int8, "
                        "int32)",
                        onnx_dtype_name(in->dtype), onnx_dtype_name((int)to));
    /* Exact casts only: oneDNN rounds to nearest and saturates where ONNX truncates and wraps. */
    if (to != ONNX_DT_FLOAT && to != (int64_t)in->dtype &&
        (in->dtype == ONNX_DT_FLOAT || to != ONNX_DT_INT32))
        return node_bad(x->eb, x->n,
                        "cast from %s to %s is not supported (only to float, or "
                        "widening integer casts to int32)",
                        onnx_dtype_name(in->dtype), onnx_dtype_name((int)to));
    x->n->to = (onnx_dtype_t)to;
    x->n->scale = 1.0f;
    x->out->dtype = (onnx_dtype_t)to;
    out_like(x, in);
    return 0;
}

/* ConvTranspose: X [N, C, in...], W [C, M/group, k...], B [M]. The output size follows the
 * model's pads and output_padding, or output_shape (which then decides the pads), as the ONNX
 * specification gives them. */
static int infer_convtranspose(infer_t *x)
{
    static const char *const known[] = {"auto_pad",     "dilations",      "group",
                                        "kernel_shape", "output_padding", "output_shape",
                                        "pads",         "strides",        NULL};
    ctx_t c = {x->p, x->n, x->eb};
    onnx_node_t *n = x->n;
    const onnx_value_t *in = in_val(x, 0), *w = in_val(x, 1), *b = in_val(x, 2);
    int64_t opad[ONNX_MAX_SPATIAL] = {0}, oshape[ONNX_MAX_SPATIAL + 2];
    int64_t pads[2 * ONNX_MAX_SPATIAL], group;
    size_t cnt, n_oshape;
    char autopad[32];
    const char *ap;
    int s, ns, rc;

    if ((rc = conv_inputs(x, known, &group)) < 0)
        return rc;
    ns = in->rank - 2;
    if (group < 1 || in->dims[1] % group || w->dims[0] != in->dims[1])
        return node_bad(x->eb, n, "group %lld does not fit %lld input channels and W [%lld,%lld]",
                        (long long)group, (long long)in->dims[1], (long long)w->dims[0],
                        (long long)w->dims[1]);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[1] * group))
        return node_bad(x->eb, n, "bias \"%s\" must be a vector of %lld", b->name,
                        (long long)(w->dims[1] * group));
    if ((rc = kernel_shape_of_w(x, w)) < 0)
        return rc;
    n->n_spatial = ns;
    n->group = group;
    for (s = 0; s < ns; s++) {
        n->kernel[s] = w->dims[2 + s];
        n->stride[s] = n->dilation[s] = 1;
        n->pad_l[s] = n->pad_r[s] = 0;
    }
    if ((rc = attr_ints(&c, "strides", ns, n->stride, ONNX_MAX_SPATIAL, &cnt)) < 0 ||
        (rc = attr_ints(&c, "dilations", ns, n->dilation, ONNX_MAX_SPATIAL, &cnt)) < 0 ||
        (rc = attr_ints(&c, "output_padding", ns, opad, ONNX_MAX_SPATIAL, &cnt)) < 0 ||
        (rc = attr_ints(&c, "output_shape", -1, oshape, ONNX_MAX_SPATIAL + 2, &n_oshape)) < 0)
        return rc;
    if ((rc = attr_ints(&c, "pads", 2 * ns, pads, 2 * ONNX_MAX_SPATIAL, &cnt)) < 0)
        return rc;
    for (s = 0; cnt && s < ns; s++) {
        n->pad_l[s] = pads[s];
        n->pad_r[s] = pads[ns + s];
    }
    if (n_oshape == (size_t)ns + 2) { /* the whole shape, as some exporters write it */
        memmove(oshape, oshape + 2, (size_t)ns * sizeof(int64_t));
        n_oshape = (size_t)ns;
    }
    if (n_oshape && n_oshape != (size_t)ns)
        return node_bad(x->eb, n, "output_shape has %zu entries for %d spatial dims", n_oshape, ns);
    ap = attr_string(&c, "auto_pad", autopad, sizeof(autopad));
    if (ap && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return node_bad(x->eb, n, "auto_pad \"%s\" is not supported (NOTSET and VALID are)", ap);
    if (ap && strcmp(ap, "VALID") == 0)
        for (s = 0; s < ns; s++)
            n->pad_l[s] = n->pad_r[s] = 0;
    x->out->rank = in->rank;
    x->out->dims[0] = in->dims[0];
    x->out->dims[1] = w->dims[1] * group;
    for (s = 0; s < ns; s++) {
        int64_t eff, full, o;
        if (n->stride[s] < 1 || n->dilation[s] < 1 || n->pad_l[s] < 0 || n->pad_r[s] < 0 ||
            opad[s] < 0 || (opad[s] >= n->stride[s] && opad[s] >= n->dilation[s]))
            return node_bad(x->eb, n,
                            "strides and dilations must be >= 1, pads >= 0, output_padding "
                            "below the stride or the dilation");
        eff = (n->kernel[s] - 1) * n->dilation[s] + 1;
        full = n->stride[s] * (in->dims[2 + s] - 1) + opad[s] + eff;
        if (n_oshape) {
            /* a larger output_shape grows the output at the end, as output_padding does */
            int64_t total = full - oshape[s];
            n->pad_l[s] = total < 0 ? 0 : total - total / 2;
            n->pad_r[s] = total < 0 ? total : total / 2;
        }
        o = full - n->pad_l[s] - n->pad_r[s];
        if (o < 1)
            return node_bad(x->eb, n, "the output would be empty in spatial dim %d", s);
        n->pad_r[s] -= opad[s]; /* the executors' relation: no output_padding */
        x->out->dims[2 + s] = o;
    }
    x->out->batched = in->batched;
    conv_weights_not_batched(x);
    return 0;
}

/* InstanceNormalization: each channel of each sample normalised over its spatial dims, then
 * scaled and shifted per channel. */
static int infer_instancenorm(infer_t *x)
{
    static const char *const known[] = {"epsilon", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int rc, i;

    if ((rc = attrs_known(&c, known)) < 0 ||
        (rc = attr_float(&c, "epsilon", 1e-5f, &x->n->epsilon)) < 0)
        return rc;
    for (i = 0; i < 3; i++)
        if ((rc = need_float(x, i)) < 0)
            return rc;
    if (in->rank < 3)
        return node_bad(x->eb, x->n, "input of rank %d; at least one spatial dim is needed",
                        in->rank);
    if (!(x->n->epsilon >= 0.0f))
        return node_bad(x->eb, x->n, "epsilon must be >= 0");
    for (i = 1; i < 3; i++) {
        const onnx_value_t *v = in_val(x, i);
        if (v->rank != 1 || v->dims[0] != in->dims[1])
            return node_bad(x->eb, x->n, "%s \"%s\" must be a vector of %lld",
                            i == 1 ? "scale" : "B", v->name, (long long)in->dims[1]);
        not_batched(x, i, "its scale or bias is a per-sample input");
    }
    out_like(x, in);
    return 0;
}

static int infer_leakyrelu(infer_t *x)
{
    static const char *const known[] = {"alpha", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int rc;

    if ((rc = attrs_known(&c, known)) < 0 || (rc = need_float(x, 0)) < 0 ||
        (rc = attr_float(&c, "alpha", 0.01f, &x->n->alpha)) < 0)
        return rc;
    out_like(x, in);
    return 0;
}

/* Concat: every input of one type and rank, the same dims but along |axis|. */
static int infer_concat(infer_t *x)
{
    static const char *const known[] = {"axis", NULL};
    ctx_t c = {x->p, x->n, x->eb};
    const onnx_value_t *in = in_val(x, 0);
    int64_t axis;
    int rc, i, d, batched = 0, fixed = 0;

    if ((rc = attrs_known(&c, known)) < 0)
        return rc;
    if (!attr_find(&c, "axis"))
        return node_bad(x->eb, x->n, "the axis attribute is required");
    if ((rc = attr_int(&c, "axis", 0, &axis)) < 0)
        return rc;
    if (in->rank < 1)
        return node_bad(x->eb, x->n, "scalars cannot be concatenated");
    if ((rc = axis_in_range(x, &axis, in->rank, 0)) < 0)
        return rc;
    if (in->dtype != ONNX_DT_FLOAT && in->dtype != ONNX_DT_UINT8 && in->dtype != ONNX_DT_INT8 &&
        in->dtype != ONNX_DT_INT32)
        return node_bad(x->eb, x->n, "input type %s is not supported", onnx_dtype_name(in->dtype));
    x->n->axis = (int)axis;
    x->out->dtype = in->dtype;
    x->out->rank = in->rank;
    memcpy(x->out->dims, in->dims, sizeof(in->dims));
    x->out->dims[axis] = 0;
    for (i = 0; i < x->n->n_in; i++) {
        const onnx_value_t *v = in_val(x, i);
        if (!v)
            return node_bad(x->eb, x->n, "input %d is omitted", i);
        if (v->dtype != in->dtype || v->rank != in->rank)
            return node_bad(x->eb, x->n, "input \"%s\" is %s of rank %d, the first %s of rank %d",
                            v->name, onnx_dtype_name(v->dtype), v->rank, onnx_dtype_name(in->dtype),
                            in->rank);
        for (d = 0; d < in->rank; d++)
            if (d != axis && v->dims[d] != in->dims[d])
                return node_bad(x->eb, x->n,
                                "input \"%s\" has %lld in dim %d where the first has %lld", v->name,
                                (long long)v->dims[d], d, (long long)in->dims[d]);
        x->out->dims[axis] += v->dims[axis];
        batched |= v->batched;
        fixed |= !v->batched;
    }
    x->out->batched = batched;
    if (batched && axis == 0 && !x->unsafe)
        x->unsafe = "it concatenates along the batch axis";
    if (batched && fixed && !x->unsafe)
        x->unsafe = "it joins a per-sample input with a constant one";
    return 0;
}

/* Optional outputs that the model actually names (MaxPool Indices, BatchNormalization's
 * training statistics). */
static int extra_outputs(const Onnx__NodeProto *p)
{
    size_t i;
    int n = 0;
    for (i = 1; i < p->n_output; i++)
        n += p->output[i] && p->output[i][0];
    return n;
}

typedef struct {
    const char *op_type;
    onnx_op_t op;
    int min_in, max_in;
    int (*infer)(infer_t *x);
} op_def_t;

static const op_def_t op_defs[] = {
    {"Conv", ONNX_OP_CONV, 2, 3, infer_conv},
    {"Relu", ONNX_OP_RELU, 1, 1, infer_unary},
    {"MaxPool", ONNX_OP_MAXPOOL, 1, 1, infer_pool},
    {"AveragePool", ONNX_OP_AVGPOOL, 1, 1, infer_pool},
    {"GlobalAveragePool", ONNX_OP_GLOBALAVGPOOL, 1, 1, infer_global_pool},
    {"BatchNormalization", ONNX_OP_BATCHNORM, 5, 5, infer_batchnorm},
    {"Add", ONNX_OP_ADD, 2, 2, infer_binary},
    {"Sub", ONNX_OP_SUB, 2, 2, infer_binary},
    {"Mul", ONNX_OP_MUL, 2, 2, infer_binary},
    {"Div", ONNX_OP_DIV, 2, 2, infer_binary},
    {"Gemm", ONNX_OP_GEMM, 2, 3, infer_gemm},
    {"MatMul", ONNX_OP_MATMUL, 2, 2, infer_matmul},
    {"Flatten", ONNX_OP_RESHAPE, 1, 1, infer_flatten},
    {"Reshape", ONNX_OP_RESHAPE, 2, 2, infer_reshape},
    {"Softmax", ONNX_OP_SOFTMAX, 1, 1, infer_softmax},
    {"Identity", ONNX_OP_IDENTITY, 1, 1, infer_unary},
    {"Cast", ONNX_OP_CAST, 1, 1, infer_cast},
    {"ConvTranspose", ONNX_OP_CONVTRANSPOSE, 2, 3, infer_convtranspose},
    {"InstanceNormalization", ONNX_OP_INSTANCENORM, 3, 3, infer_instancenorm},
    {"LeakyRelu", ONNX_OP_LEAKYRELU, 1, 1, infer_leakyrelu},
    {"Concat", ONNX_OP_CONCAT, 1, ONNX_MAX_IN, infer_concat},
};

/* ---- graph assembly -------------------------------------------------------------------------- */

static int add_node(onnx_graph_t *g, onnx_node_t **out)
{
    onnx_node_t *nn = onnx_grow(g->nodes, g->n_nodes, &g->cap_nodes, 64, sizeof(*nn));

    if (!nn)
        return -ENOMEM;
    g->nodes = nn;
    *out = &g->nodes[g->n_nodes++];
    memset(*out, 0, sizeof(**out));
    return 0;
}

/* A Constant node becomes a constant value: nothing runs for it. */
static int load_constant(onnx_graph_t *g, const Onnx__NodeProto *p, const onnx_node_t *n,
                         cmn_errbuf_t *eb)
{
    const Onnx__AttributeProto *a;
    const char *an;
    onnx_value_t *v;
    int idx;

    if (p->n_attribute != 1 || p->n_output != 1)
        return node_bad(eb, n, "needs exactly one value attribute and one output");
    a = p->attribute[0];
    an = STR(a->name);
    if ((idx = onnx_graph_add_value(g, STR(p->output[0]))) < 0)
        return idx;
    v = &g->values[idx];
    if (strcmp(an, "value") == 0 && a->t) {
        char what[200];
        snprintf(what, sizeof(what), "node \"%s\" (Constant)", n->name);
        return tensor_from_proto(a->t, what, &v->dtype, &v->rank, v->dims, &v->data, eb);
    }
    if (strcmp(an, "value_float") == 0 || strcmp(an, "value_int") == 0 ||
        strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0) {
        int is_float = strncmp(an, "value_float", 11) == 0;
        int is_list = strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0;
        size_t cnt = is_list ? (is_float ? a->n_floats : a->n_ints) : 1;
        if (cnt == 0)
            return node_bad(eb, n, "empty constant");
        v->dtype = is_float ? ONNX_DT_FLOAT : ONNX_DT_INT64;
        v->rank = is_list ? 1 : 0;
        v->dims[0] = (int64_t)cnt;
        v->data = malloc(cnt * onnx_dtype_size(v->dtype));
        if (!v->data)
            return -ENOMEM;
        if (is_float)
            memcpy(v->data, is_list ? a->floats : &a->f, cnt * sizeof(float));
        else
            memcpy(v->data, is_list ? a->ints : &a->i, cnt * sizeof(int64_t));
        return 0;
    }
    return node_bad(eb, n, "constant attribute \"%s\" is not supported", an);
}

static int load_node(onnx_graph_t *g, const Onnx__NodeProto *p, int index, const char **unsafe,
                     char *unsafe_node, size_t unsafe_len, cmn_errbuf_t *eb)
{
    const op_def_t *def = NULL;
    onnx_node_t *n, tmp;
    infer_t x;
    char namebuf[32];
    const char *name = STR(p->name);
    size_t i;
    int rc, out;

    memset(&tmp, 0, sizeof(tmp));
    if (!name[0]) {
        snprintf(namebuf, sizeof(namebuf), "#%d", index);
        name = namebuf;
    }
    tmp.name = (char *)name;
    tmp.op_type = STR(p->op_type);
    if (p->domain && p->domain[0] && strcmp(p->domain, "ai.onnx") != 0)
        return node_bad(eb, &tmp, "operators of domain \"%s\" are not supported", p->domain);
    if (strcmp(tmp.op_type, "Constant") == 0)
        return load_constant(g, p, &tmp, eb);
    for (i = 0; i < sizeof(op_defs) / sizeof(op_defs[0]); i++)
        if (strcmp(op_defs[i].op_type, tmp.op_type) == 0)
            def = &op_defs[i];
    if (!def)
        return node_bad(eb, &tmp, "operator not supported by the onnx backend");
    if (p->n_input < (size_t)def->min_in || p->n_input > (size_t)def->max_in)
        return node_bad(eb, &tmp, "%zu inputs; %d to %d expected", p->n_input, def->min_in,
                        def->max_in);
    if (p->n_output < 1 || !p->output[0][0])
        return node_bad(eb, &tmp, "no output");
    if (extra_outputs(p) && def->op != ONNX_OP_MAXPOOL && def->op != ONNX_OP_BATCHNORM)
        return node_bad(eb, &tmp, "%zu outputs; only one is supported", p->n_output);

    if ((rc = add_node(g, &n)) < 0)
        return rc;
    n->name = strdup(name);
    if (!n->name)
        return -ENOMEM;
    n->op = def->op;
    n->op_type = def->op_type;
    n->n_in = (int)p->n_input;
    n->out = -1;
    for (i = 0; i < ONNX_MAX_IN; i++)
        n->in[i] = -1;
    for (i = 0; i < p->n_input; i++) {
        const char *in = STR(p->input[i]);
        n->in[i] = in[0] ? find_value(g, in) : -1;
        if (in[0] && n->in[i] < 0)
            return node_bad(eb, n, "input \"%s\" is produced by no earlier node", in);
        if (i < (size_t)def->min_in && n->in[i] < 0)
            return node_bad(eb, n, "input %zu is required", i);
    }
    if ((out = onnx_graph_add_value(g, p->output[0])) < 0)
        return out;
    memset(&x, 0, sizeof(x));
    x.g = g;
    x.n = &g->nodes[g->n_nodes - 1];
    x.p = p;
    x.eb = eb;
    x.out = &g->values[out];
    x.out->dtype = ONNX_DT_FLOAT;
    if ((rc = def->infer(&x)) < 0)
        return rc;
    n = x.n;
    n->out = out;
    x.out->producer = g->n_nodes - 1;
    if (onnx_dims_numel(x.out->dims, x.out->rank) > ONNX_MAX_NUMEL)
        return node_bad(eb, n, "output too large");
    for (i = 0; i < (size_t)n->n_in; i++)
        if (n->in[i] >= 0)
            g->values[n->in[i]].uses++;
    if (x.unsafe && !*unsafe) {
        *unsafe = x.unsafe;
        snprintf(unsafe_node, unsafe_len, "node \"%s\" (%s)", n->name, n->op_type);
    }
    return 0;
}

static int load_io(onnx_graph_t *g, const Onnx__ValueInfoProto *vi, int is_input, int *first_dim,
                   cmn_errbuf_t *eb)
{
    const char *name = STR(vi->name);
    const Onnx__TypeProto__Tensor *tt;
    const Onnx__TensorShapeProto *sh;
    onnx_value_t *v;
    size_t i;
    int idx;

    if (first_dim)
        *first_dim = -1;
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type)
        return bad(eb,
                   "%s \"%s\" is not a tensor (sequences, maps and optionals are not "
                   "supported)",
                   is_input ? "input" : "output", name);
    tt = vi->type->tensor_type;
    if (!is_input) {
        idx = find_value(g, name);
        if (idx < 0)
            return bad(eb, "output \"%s\" is produced by no node", name);
        if (tt->has_elem_type && tt->elem_type && tt->elem_type != (int)g->values[idx].dtype)
            return bad(eb, "output \"%s\" is declared %s but computed as %s", name,
                       onnx_dtype_name(tt->elem_type), onnx_dtype_name(g->values[idx].dtype));
        return idx;
    }
    if (!tt->has_elem_type || (tt->elem_type != ONNX_DT_FLOAT && tt->elem_type != ONNX_DT_UINT8 &&
                               tt->elem_type != ONNX_DT_INT8 && tt->elem_type != ONNX_DT_INT32))
        return bad(eb, "input \"%s\" has type %s; float, uint8, int8 and int32 are supported%s",
                   name, onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0),
                   tt->elem_type == ONNX_DT_INT64
                       ? " (int64 only as constants, such as Reshape shapes)"
                       : "");
    sh = tt->shape;
    if (!sh || sh->n_dim > ONNX_MAX_RANK)
        return bad(eb, "input \"%s\" has no shape or a rank over %d", name, ONNX_MAX_RANK);
    if ((idx = onnx_graph_add_value(g, name)) < 0)
        return idx;
    v = &g->values[idx];
    v->dtype = (onnx_dtype_t)tt->elem_type;
    v->rank = (int)sh->n_dim;
    *first_dim = 2; /* a scalar has no batch axis */
    for (i = 0; i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        int fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (fixed && (d->dim_value < 1 || d->dim_value > ONNX_MAX_NUMEL))
            return bad(eb,
                       "input \"%s\": dimension %zu is %lld; empty tensors are not "
                       "supported",
                       name, i, (long long)d->dim_value);
        if (!fixed && i > 0)
            return bad(eb,
                       "input \"%s\": dimension %zu is symbolic (\"%s\"); only the first "
                       "(batch) dimension may be",
                       name, i,
                       d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                           ? STR(d->dim_param)
                           : "");
        v->dims[i] = fixed ? d->dim_value : 1;
        if (i == 0)
            *first_dim = fixed ? (int)(d->dim_value > 1 ? 2 : 1) : 0;
    }
    if (onnx_dims_numel(v->dims, v->rank) > ONNX_MAX_NUMEL)
        return bad(eb, "input \"%s\" is too large", name);
    return idx;
}

static int load_graph(onnx_graph_t *g, const Onnx__ModelProto *m, cmn_errbuf_t *eb)
{
    const Onnx__GraphProto *gp = m->graph;
    const char *unsafe = NULL;
    char unsafe_node[200] = "";
    size_t i, k;
    int rc;

    g->opset = 0;
    for (i = 0; i < m->n_opset_import; i++) {
        const char *d = STR(m->opset_import[i]->domain);
        if (d[0] == '\0' || strcmp(d, "ai.onnx") == 0)
            g->opset = m->opset_import[i]->version;
    }
    if (g->opset < 1)
        return bad(eb, "the model imports no ai.onnx opset");
    if (g->opset > ONNX_MAX_OPSET)
        return bad(eb, "opset %lld is newer than the onnx backend knows (%d)", (long long)g->opset,
                   ONNX_MAX_OPSET);
    if (!gp)
        return bad(eb, "the model has no graph");
    if (gp->n_sparse_initializer)
        return bad(eb, "sparse initializers are not supported");

    for (i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        char what[200];
        onnx_value_t *v;
        int idx = onnx_graph_add_value(g, STR(t->name));
        if (idx < 0)
            return idx;
        v = &g->values[idx];
        snprintf(what, sizeof(what), "initializer \"%s\"", STR(t->name));
        if ((rc = tensor_from_proto(t, what, &v->dtype, &v->rank, v->dims, &v->data, eb)) < 0)
            return rc;
    }

    g->inputs = calloc(gp->n_input ? gp->n_input : 1, sizeof(int));
    g->outputs = calloc(gp->n_output ? gp->n_output : 1, sizeof(int));
    if (!g->inputs || !g->outputs)
        return -ENOMEM;
    g->batched = 1;
    for (i = 0; i < gp->n_input; i++) {
        int first, idx;
        /* Older exporters list the initializers among the inputs too: those are weights. */
        for (k = 0; k < gp->n_initializer; k++)
            if (strcmp(STR(gp->input[i]->name), STR(gp->initializer[k]->name)) == 0)
                break;
        if (k < gp->n_initializer)
            continue;
        if ((idx = load_io(g, gp->input[i], 1, &first, eb)) < 0)
            return idx;
        g->values[idx].input = g->n_inputs;
        g->inputs[g->n_inputs++] = idx;
        if (first == 2)
            g->batched = 0; /* a fixed first dimension other than 1: not a batch axis */
    }
    if (g->n_inputs == 0)
        g->batched = 0;
    for (i = 0; i < (size_t)g->n_inputs; i++)
        g->values[g->inputs[i]].batched = g->batched;

    for (i = 0; i < gp->n_node; i++)
        if ((rc = load_node(g, gp->node[i], (int)i, &unsafe, unsafe_node, sizeof(unsafe_node),
                            eb)) < 0)
            return rc;

    if (gp->n_output == 0)
        return bad(eb, "the graph has no outputs");
    for (i = 0; i < gp->n_output; i++) {
        int idx = load_io(g, gp->output[i], 0, NULL, eb);
        if (idx < 0)
            return idx;
        g->values[idx].output = 1;
        g->outputs[g->n_outputs++] = idx;
        if (g->batched && !g->values[idx].batched && !unsafe) {
            unsafe = "it does not depend on the inputs";
            snprintf(unsafe_node, sizeof(unsafe_node), "output \"%s\"", g->values[idx].name);
        }
    }

    if (g->batched && unsafe) {
        g->batched = 0;
        snprintf(g->unbatched, sizeof(g->unbatched), "%s: %s; the model runs one sample per batch",
                 unsafe_node, unsafe);
    }
    if (!g->batched)
        for (i = 0; i < (size_t)g->n_values; i++)
            g->values[i].batched = 0;

    g->input_size = 0;
    for (i = 0; i < (size_t)g->n_inputs; i++) {
        const onnx_value_t *v = &g->values[g->inputs[i]];
        g->input_size += onnx_value_numel(v) * onnx_dtype_size(v->dtype);
    }
    g->output_size = 0;
    for (i = 0; i < (size_t)g->n_outputs; i++) {
        const onnx_value_t *v = &g->values[g->outputs[i]];
        g->output_size += onnx_value_numel(v) * onnx_dtype_size(v->dtype);
    }
    return 0;
}

int onnx_graph_load(const char *path, onnx_graph_t **out, cmn_errbuf_t *eb)
{
    Onnx__ModelProto *m;
    onnx_graph_t *g;
    uint8_t *buf;
    size_t len;
    int rc;

    rc = read_file(path, &buf, &len, eb);
    if (rc < 0)
        return rc;
    m = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!m)
        return bad(eb, "%s is not an ONNX model (it does not parse as onnx.ModelProto)", path);
    g = calloc(1, sizeof(*g));
    if (!g) {
        rc = -ENOMEM;
        goto fail_graph;
    }
    rc = load_graph(g, m, eb);
    if (rc < 0)
        goto fail_load;
    onnx__model_proto__free_unpacked(m, NULL);
    onnx_graph_optimize(g);
    *out = g;
    return 0;

fail_load:
    if (rc == -ENOMEM)
        cmn_errf(eb, rc, "out of memory loading %s", path);
    onnx_graph_free(g);
fail_graph:
    onnx__model_proto__free_unpacked(m, NULL);
    return rc;
}
