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

/* A model in a new temporary file (path malloc'd); frees the builder. */
char *mb_write(mb_t *m)
{
    char *path = tmp_path(".onnx");
    ck_assert_int_eq(mb_save(m, path, NULL), 0);
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
