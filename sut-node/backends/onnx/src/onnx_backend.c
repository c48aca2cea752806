/* The onnx backend's side of the plugin ABI: options, describe(), infer() and the result
 * formats. The model itself is onnx_graph.c's business, running it onnx_dnnl.c's.
 *
 * Compiled twice from this one file: into the static library sut_backend_onnx (the built-in
 * backend, sut_backend_onnx_ops()) and, with SUT_BACKEND_ONNX_PLUGIN defined, into the dlopen-able
 * libsut_backend_onnx.so, which also exports sut_backend_entry(). */
#include "onnx_backend.h"

#include "cmn/conf.h"
#include "cmn/err.h"
#include "onnx_dnnl.h"
#include "onnx_graph.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PLANS 32
#define DEFAULT_MAX_BATCH 64

struct sut_backend {
    onnx_graph_t *g;
    onnx_dnnl_t *x;
    pthread_mutex_t lock; /* one batch at a time: the executor's buffers are shared */
    int argmax;
    uint32_t max_batch, preferred;
    char device[256];
    uint8_t *classes; /* argmax results, 4 bytes per sample */
    sut_result_t *results;
    void (*log)(int level, const char *msg);
};

static void blog(const sut_backend_t *b, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void blog(const sut_backend_t *b, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (!b->log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    b->log(level, msg);
}

/* A count from 1 to |max| (cmn_parse_u64's syntax). */
static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    uint64_t v;
    if (cmn_parse_u64(s, &v) < 0 || v == 0 || v > max)
        return -1;
    *out = (unsigned long)v;
    return 0;
}

/* "1,8,64" -> ascending unique sizes, each <= max. */
static int parse_batches(const char *s, uint32_t max, size_t *out, size_t *n)
{
    char buf[256], *tok, *save;
    size_t i, j;
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long v;
        if (parse_uint(tok, max, &v) < 0 || *n == MAX_PLANS)
            return -1;
        for (i = 0; i < *n && out[i] < v; i++)
            ;
        if (i < *n && out[i] == v)
            continue;
        for (j = *n; j > i; j--)
            out[j] = out[j - 1];
        out[i] = v;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* "AMD EPYC 9R14" from /proc/cpuinfo, or "CPU". */
static void cpu_name(char *buf, size_t len)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, len, "CPU");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && c) {
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(buf, len, "%s", c);
            break;
        }
    }
    fclose(f);
}

static const char *const known_opts[] = {"model", "threads", "output", "batch_sizes", NULL};

static int onnx_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                       size_t errlen)
{
    const char *model = sut_backend_opt(cfg, "model", NULL);
    const char *output = sut_backend_opt(cfg, "output", "raw");
    const char *threads_s = sut_backend_opt(cfg, "threads", NULL);
    const char *batches_s = sut_backend_opt(cfg, "batch_sizes", NULL);
    size_t batches[MAX_PLANS], n_batches = 0, i, k;
    unsigned long threads = cfg->threads;
    cmn_errbuf_t eb;
    sut_backend_t *b;
    char cpu[128];
    int rc;

    eb.msg[0] = '\0';
    for (i = 0; i < cfg->n_options; i++) {
        for (k = 0; known_opts[k] && strcmp(known_opts[k], cfg->keys[i]) != 0; k++)
            ;
        if (!known_opts[k]) {
            rc = cmn_errf(&eb, CMN_ECONFIG,
                          "unknown option \"%s\" (model, threads, output, "
                          "batch_sizes)",
                          cfg->keys[i]);
            goto fail_opts;
        }
    }
    if (!model || !model[0]) {
        rc = cmn_errf(&eb, CMN_ECONFIG, "option model=PATH (the .onnx file) is required");
        goto fail_opts;
    }
    if (strcmp(output, "raw") != 0 && strcmp(output, "argmax") != 0) {
        rc = cmn_errf(&eb, CMN_ECONFIG, "output=%s: expected raw or argmax", output);
        goto fail_opts;
    }
    if (threads_s && parse_uint(threads_s, 4096, &threads) < 0) {
        rc = cmn_errf(&eb, CMN_ECONFIG, "threads=%s: expected a count from 1 to 4096", threads_s);
        goto fail_opts;
    }
    if (threads == 0)
        threads = (unsigned long)cpus_allowed();

    b = calloc(1, sizeof(*b));
    if (!b) {
        rc = cmn_errf(&eb, -ENOMEM, "out of memory");
        goto fail_opts;
    }
    b->log = cfg->log;
    b->argmax = strcmp(output, "argmax") == 0;
    if ((rc = onnx_graph_load(model, &b->g, &eb)) < 0)
        goto fail_graph;
    if (b->argmax &&
        (b->g->n_outputs != 1 || b->g->values[b->g->outputs[0]].dtype != ONNX_DT_FLOAT)) {
        rc = cmn_errf(&eb, CMN_ECONFIG, "output=argmax needs a model with one float output");
        goto fail_exec;
    }

    b->max_batch = cfg->max_batch ? cfg->max_batch : DEFAULT_MAX_BATCH;
    if (!b->g->batched) {
        if (b->g->unbatched[0])
            blog(b, SUT_LOG_WARN, "onnx: %s", b->g->unbatched);
        b->max_batch = 1;
    }
    if (batches_s && b->g->batched) {
        if (parse_batches(batches_s, b->max_batch, batches, &n_batches) < 0) {
            rc = cmn_errf(&eb, CMN_ECONFIG,
                          "batch_sizes=%s: expected up to %d sizes from 1 to "
                          "%u, comma-separated",
                          batches_s, MAX_PLANS, b->max_batch);
            goto fail_exec;
        }
        if (batches[n_batches - 1] < b->max_batch)
            batches[n_batches++] = b->max_batch;
    } else {
        size_t s;
        for (s = 1; s < b->max_batch && n_batches < MAX_PLANS - 1; s *= 2)
            batches[n_batches++] = s;
        batches[n_batches++] = b->max_batch;
    }
    b->preferred = (uint32_t)batches[n_batches - 1];

    if ((rc = onnx_dnnl_create(b->g, (int)threads, batches, n_batches, &b->x, &eb)) < 0)
        goto fail_exec;
    b->results = calloc(b->max_batch, sizeof(*b->results));
    b->classes = calloc(b->max_batch, 4);
    if (!b->results || !b->classes) {
        rc = cmn_errf(&eb, -ENOMEM, "out of memory");
        goto fail_results;
    }
    if ((rc = pthread_mutex_init(&b->lock, NULL)) != 0) {
        rc = cmn_errf(&eb, -rc, "cannot create a mutex");
        goto fail_results;
    }
    cpu_name(cpu, sizeof(cpu));
    snprintf(b->device, sizeof(b->device), "%s, %lu of %d CPUs, %s", cpu, threads,
             (int)sysconf(_SC_NPROCESSORS_ONLN), onnx_dnnl_version());
    blog(b, SUT_LOG_INFO,
         "onnx: %s: %d inputs (%zu bytes/sample), %d outputs (%zu bytes/sample), batch %s up to "
         "%u, %zu plans, %zu MB of buffers; %s",
         model, b->g->n_inputs, b->g->input_size, b->g->n_outputs, b->g->output_size,
         b->g->batched ? "axis" : "1 only", b->max_batch, n_batches, onnx_dnnl_memory(b->x) >> 20,
         b->device);
    *out = b;
    return 0;

fail_results:
    free(b->results);
    free(b->classes);
    onnx_dnnl_destroy(b->x);
fail_exec:
    onnx_graph_free(b->g);
fail_graph:
    free(b);
fail_opts:
    if (err && errlen) {
        /* name the model, unless the message already does (file errors) or is about options */
        int name = model && rc != CMN_ECONFIG && !strstr(eb.msg, model);
        snprintf(err, errlen, "onnx backend: %s%s%s", name ? model : "", name ? ": " : "", eb.msg);
    }
    return rc;
}

static void onnx_destroy(sut_backend_t *b)
{
    if (!b)
        return;
    pthread_mutex_destroy(&b->lock);
    onnx_dnnl_destroy(b->x);
    onnx_graph_free(b->g);
    free(b->results);
    free(b->classes);
    free(b);
}

static int onnx_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->name = "onnx";
    info->device = b->device;
    info->preferred_batch = b->preferred;
    info->max_batch = b->max_batch;
    info->output_size = b->argmax ? 4 : b->g->output_size;
    info->input_size = b->g->input_size;
    info->engines = 1;
    info->weight = 1.0;
    info->flags = 0;
    return 0;
}

/* First index of the largest value (numpy.argmax). */
static int32_t argmax(const float *v, size_t n)
{
    size_t i, best = 0;
    for (i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

static int onnx_infer(sut_backend_t *b, sut_batch_t *batch)
{
    const onnx_graph_t *g = b->g;
    const uint8_t *out;
    cmn_errbuf_t eb;
    size_t i, n = batch->n;
    int rc;

    if (n == 0 || n > b->max_batch) {
        blog(b, SUT_LOG_ERROR, "onnx: a batch of %zu samples (1 to %u accepted)", n, b->max_batch);
        return CMN_EOVERLOAD;
    }
    /* The samples must be whole model inputs, back to back (the node's batch tensor). */
    for (i = 0; i < n; i++)
        if (batch->samples[i].size != g->input_size ||
            batch->samples[i].data != (const uint8_t *)batch->input + i * g->input_size)
            break;
    if (i < n || batch->input_size < n * g->input_size) {
        blog(b, SUT_LOG_ERROR,
             "onnx: sample %zu of the batch has %zu bytes at offset %td; the model takes %zu "
             "bytes per sample, back to back",
             i, i < n ? batch->samples[i].size : 0,
             i < n ? (const uint8_t *)batch->samples[i].data - (const uint8_t *)batch->input : 0,
             g->input_size);
        return CMN_EFIELD;
    }

    pthread_mutex_lock(&b->lock);
    rc = onnx_dnnl_run(b->x, n, batch->input, (const void **)&out, &eb);
    if (rc < 0) {
        pthread_mutex_unlock(&b->lock);
        blog(b, SUT_LOG_ERROR, "onnx: %s", eb.msg);
        return rc;
    }
    for (i = 0; i < n; i++) {
        sut_result_t *r = &b->results[i];
        r->index = i;
        r->status = 0;
        r->n_tokens = 0;
        if (b->argmax) {
            int32_t c =
                argmax((const float *)(out + i * g->output_size), g->output_size / sizeof(float));
            uint8_t *le = b->classes + 4 * i;
            le[0] = (uint8_t)c;
            le[1] = (uint8_t)(c >> 8);
            le[2] = (uint8_t)(c >> 16);
            le[3] = (uint8_t)(c >> 24);
            r->data = le;
            r->size = 4;
        } else {
            r->data = out + i * g->output_size;
            r->size = g->output_size;
        }
    }
    /* Inside the lock: the results point into buffers that the next batch overwrites, and the
     * node copies them before complete() returns. */
    batch->complete(batch, b->results, n);
    pthread_mutex_unlock(&b->lock);
    return 0;
}

static const sut_backend_ops_t onnx_ops = {
    .abi_version = SUT_BACKEND_ABI_VERSION,
    .struct_size = sizeof(sut_backend_ops_t),
    .name = "onnx",
    .create = onnx_create,
    .destroy = onnx_destroy,
    .describe = onnx_describe,
    .infer = onnx_infer,
    .alloc_input = NULL,
    .free_input = NULL,
};

const sut_backend_ops_t *sut_backend_onnx_ops(void)
{
    return &onnx_ops;
}

#ifdef SUT_BACKEND_ONNX_PLUGIN
__attribute__((visibility("default"))) const sut_backend_ops_t *sut_backend_entry(void);

const sut_backend_ops_t *sut_backend_entry(void)
{
    return &onnx_ops;
}
#endif
