/* The onnx backend's side of the plugin ABI: options, describe(), infer() and the result
 * formats. The model itself is onnx_graph.c's business; running it onnx_dnnl.c's on the CPU, or
 * for device=cuda the CUDA engine's (onnx_cuda_plan.c plans it here, libsut_onnx_cuda.so runs it;
 * see onnx_cuda.h for why it is loaded with dlopen).
 *
 * Compiled twice from this one file: into the static library sut_backend_onnx (the built-in
 * backend, sut_backend_onnx_ops()) and, with SUT_BACKEND_ONNX_PLUGIN defined, into the dlopen-able
 * libsut_backend_onnx.so, which also exports sut_backend_entry(). */
#include "onnx_backend.h"

#include "cmn/conf.h"
#include "cmn/err.h"
#include "cmn/opts.h"
#include "onnx_cuda.h"
#include "onnx_cuda_plan.h"
#include "onnx_dnnl.h"
#include "onnx_graph.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PLANS 32
#define DEFAULT_MAX_BATCH 64
#define DEFAULT_STREAMS 2
#define DEFAULT_WORKSPACE_MB 256
#define MAX_DEVICE 1023
#define IN_HDR 64 /* before each CUDA batch input: how it was allocated */

struct sut_backend {
    onnx_graph_t *g;
    onnx_dnnl_t *x;            /* device=cpu */
    pthread_mutex_t lock;      /* cpu: one batch at a time, the executor's buffers are shared */
    const onnx_cuda_api_t *cu; /* device=cuda: the engine library's functions */
    onnx_cuda_t *cx;
    onnx_cuda_program_t *prog;
    int cuda_dev;
    uint32_t engines; /* cpu 1; cuda: streams, each with its own results below */
    int argmax;
    uint32_t max_batch, preferred;
    char device[768];
    uint8_t *classes;      /* argmax results, 4 bytes per sample, per engine */
    sut_result_t *results; /* per engine */
    int pinned_warned;
    int locked; /* lock is initialised */
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

/* The options (cmn/opts.h's KEY=VALUE rows) and their defaults. */
static const cmn_opt_t onnx_opts[] = {
    CMN_OPT_KV("model", NULL),        CMN_OPT_KV("threads", NULL),     CMN_OPT_KV("output", "raw"),
    CMN_OPT_KV("batch_sizes", NULL),  CMN_OPT_KV("device", NULL),      CMN_OPT_KV("streams", NULL),
    CMN_OPT_KV("workspace_mb", NULL), CMN_OPT_KV("conv_algo", "find"), CMN_OPT_KV("tf32", "0"),
    CMN_OPT_KV("debug_sync", "0"),    CMN_OPT_KV("cuda_lib", NULL),
};
#define N_ONNX_OPTS (sizeof(onnx_opts) / sizeof(onnx_opts[0]))
/* The options that only the CUDA engine reads. */
static const char *const cuda_opts[] = {"streams",    "workspace_mb", "conv_algo", "tf32",
                                        "debug_sync", "cuda_lib",     NULL};

/* "cpu", "cuda" (device 0) or "cuda:N". Returns 0 with *dev = -1 for the CPU, else the ordinal. */
static int parse_device(const char *s, int *dev)
{
    unsigned long v = 0;
    const char *p;
    if (strcmp(s, "cpu") == 0) {
        *dev = -1;
        return 0;
    }
    if (strncmp(s, "cuda", 4) != 0)
        return -1;
    if (s[4] == '\0') {
        *dev = 0;
        return 0;
    }
    if (s[4] != ':' || !s[5])
        return -1;
    for (p = s + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > MAX_DEVICE)
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > MAX_DEVICE)
        return -1;
    *dev = (int)v;
    return 0;
}

static int parse_flag(const char *s, int *out)
{
    if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0) {
        *out = s[0] == '1';
        return 0;
    }
    return -1;
}

/* ---- the CUDA engine library ----------------------------------------------------------------- */

static pthread_mutex_t cuda_lib_lock = PTHREAD_MUTEX_INITIALIZER;
static const onnx_cuda_api_t *cuda_lib_api; /* loaded once, never unloaded (CUDA dislikes it) */

static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= len)
        n = 0;
    memcpy(dir, path, n);
    dir[n] = '\0';
}

/* Finds and loads libsut_onnx_cuda.so: the cuda_lib option alone when given, else next to the
 * code of this backend (the plugin's folder), next to the executable and in its ../lib/sut-node,
 * where this build put it, and the dynamic linker's own search (LD_LIBRARY_PATH). */
static int load_cuda_lib(const char *explicit_path, const onnx_cuda_api_t **api, cmn_errbuf_t *eb)
{
    char cand[6][PATH_MAX], dir[PATH_MAX - 64], exe[PATH_MAX], tried[1024] = "", why[512] = "";
    size_t n = 0, i, t = 0;
    onnx_cuda_entry_fn entry;
    Dl_info info;
    void *h = NULL;
    ssize_t len;
    int rc = 0;

    pthread_mutex_lock(&cuda_lib_lock);
    if (cuda_lib_api && !explicit_path) {
        *api = cuda_lib_api;
        pthread_mutex_unlock(&cuda_lib_lock);
        return 0;
    }
    if (explicit_path) {
        snprintf(cand[n++], PATH_MAX, "%s", explicit_path);
    } else {
        /* absolute for a plugin; the executable's own (relative) name is covered just below */
        if (dladdr((void *)&load_cuda_lib, &info) && info.dli_fname && info.dli_fname[0] == '/') {
            dir_of(info.dli_fname, dir, sizeof(dir));
            snprintf(cand[n++], PATH_MAX, "%s/%s", dir[0] ? dir : ".", ONNX_CUDA_LIB_NAME);
        }
        len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (len > 0) {
            exe[len] = '\0';
            dir_of(exe, dir, sizeof(dir));
            if (!n || strncmp(cand[0], dir, strlen(dir)) != 0 || cand[0][strlen(dir)] != '/')
                snprintf(cand[n++], PATH_MAX, "%s/%s", dir, ONNX_CUDA_LIB_NAME);
            snprintf(cand[n++], PATH_MAX, "%s/../lib/sut-node/%s", dir, ONNX_CUDA_LIB_NAME);
        }
#ifdef SUT_ONNX_CUDA_BUILD_PATH
        snprintf(cand[n++], PATH_MAX, "%s", SUT_ONNX_CUDA_BUILD_PATH);
#endif
        snprintf(cand[n++], PATH_MAX, "%s", ONNX_CUDA_LIB_NAME);
    }
    for (i = 0; i < n && !h; i++) {
        h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h)
            break;
        /* a library that exists but does not load (a missing libcudnn) says more than the rest */
        if (!why[0] && (!strchr(cand[i], '/') || access(cand[i], F_OK) == 0))
            snprintf(why, sizeof(why), "%s", dlerror());
        if (t < sizeof(tried))
            t += (size_t)snprintf(tried + t, sizeof(tried) - t, "%s%s", t ? ", " : "", cand[i]);
    }
    if (!h) {
#ifdef SUT_ONNX_CUDA_BUILD_PATH
        rc = cmn_errf(eb, CMN_ECONFIG, "cannot load the CUDA engine %s (tried %s): %s",
                      ONNX_CUDA_LIB_NAME, tried, why[0] ? why : "not found");
#else
        rc = cmn_errf(eb, CMN_ECONFIG,
                      "this build has no CUDA engine (CMake found no CUDA toolkit and cuDNN), and "
                      "no %s was found (tried %s; cuda_lib=PATH names one)%s%s",
                      ONNX_CUDA_LIB_NAME, tried, why[0] ? ": " : "", why);
#endif
        goto out;
    }
    *(void **)&entry = dlsym(h, ONNX_CUDA_ENTRY_SYMBOL);
    if (!entry || !(*api = entry())) {
        rc = cmn_errf(eb, CMN_ECONFIG, "%s: no %s() entry point", cand[i], ONNX_CUDA_ENTRY_SYMBOL);
        goto out;
    }
    if ((*api)->version != ONNX_CUDA_API_VERSION || (*api)->struct_size < sizeof(onnx_cuda_api_t)) {
        rc = cmn_errf(eb, CMN_EVERSION, "%s speaks engine API version %u; this backend %u", cand[i],
                      (*api)->version, ONNX_CUDA_API_VERSION);
        goto out;
    }
    if (!explicit_path)
        cuda_lib_api = *api;
out:
    pthread_mutex_unlock(&cuda_lib_lock);
    return rc;
}

/* The options of one create, read and checked by onnx_parse. */
typedef struct {
    const char *model, *batches, *cuda_lib;
    int argmax, dev, tf32, debug_sync, find_algo;
    unsigned long threads, streams, ws_mb;
} onnx_params_t;

static const char *opt(const sut_backend_config_t *cfg, const char *key)
{
    return cmn_opts_kv_get(onnx_opts, N_ONNX_OPTS, cfg->n_options, cfg->keys, cfg->values, key);
}

/* Parse, the device's options: the CUDA engine's tuning, each checked. */
static int parse_tuning(const sut_backend_config_t *cfg, onnx_params_t *p, cmn_errbuf_t *eb)
{
    const char *streams = opt(cfg, "streams"), *ws = opt(cfg, "workspace_mb");
    const char *algo = opt(cfg, "conv_algo"), *tf32 = opt(cfg, "tf32");
    const char *sync = opt(cfg, "debug_sync");

    p->streams = DEFAULT_STREAMS;
    p->ws_mb = DEFAULT_WORKSPACE_MB;
    if (streams && parse_uint(streams, 64, &p->streams) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "streams=%s: expected a count from 1 to 64", streams);
    if (ws && strcmp(ws, "0") != 0 && parse_uint(ws, 65536, &p->ws_mb) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "workspace_mb=%s: expected megabytes from 0 to 65536", ws);
    if (ws && strcmp(ws, "0") == 0)
        p->ws_mb = 0;
    if (strcmp(algo, "find") != 0 && strcmp(algo, "heuristic") != 0)
        return cmn_errf(eb, CMN_ECONFIG, "conv_algo=%s: expected find or heuristic", algo);
    p->find_algo = strcmp(algo, "find") == 0;
    if (parse_flag(tf32, &p->tf32) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "tf32=%s: expected 0 or 1", tf32);
    if (parse_flag(sync, &p->debug_sync) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "debug_sync=%s: expected 0 or 1", sync);
    return 0;
}

/* Parse: the options (onnx_opts), each checked, into |p|; nothing loaded yet. */
static int onnx_parse(const sut_backend_config_t *cfg, onnx_params_t *p, cmn_errbuf_t *eb)
{
    const char *output = opt(cfg, "output"), *threads = opt(cfg, "threads");
    const char *device_opt = opt(cfg, "device");
    const char *device = device_opt ? device_opt : cfg->device ? cfg->device : "cpu";
    long bad = cmn_opts_kv_unknown(onnx_opts, N_ONNX_OPTS, cfg->n_options, cfg->keys);
    size_t i, k;
    int rc;

    if (bad >= 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "unknown option \"%s\" (model, threads, output, batch_sizes, device; "
                        "for device=cuda: streams, workspace_mb, conv_algo, tf32, debug_sync, "
                        "cuda_lib)",
                        cfg->keys[bad]);
    p->model = opt(cfg, "model");
    p->batches = opt(cfg, "batch_sizes");
    p->cuda_lib = opt(cfg, "cuda_lib");
    if (!p->model || !p->model[0])
        return cmn_errf(eb, CMN_ECONFIG, "option model=PATH (the .onnx file) is required");
    if (strcmp(output, "raw") != 0 && strcmp(output, "argmax") != 0)
        return cmn_errf(eb, CMN_ECONFIG, "output=%s: expected raw or argmax", output);
    p->argmax = strcmp(output, "argmax") == 0;
    if (parse_device(device, &p->dev) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s%s: expected cpu, cuda or cuda:N (N up to %d)",
                        device_opt ? "device=" : "--device ", device, MAX_DEVICE);
    if (p->dev < 0) {
        /* A CUDA option on the CPU is a mistake to point out, not to ignore. */
        for (i = 0; i < cfg->n_options; i++)
            for (k = 0; cuda_opts[k]; k++)
                if (strcmp(cuda_opts[k], cfg->keys[i]) == 0)
                    return cmn_errf(eb, CMN_ECONFIG, "%s=%s applies to device=cuda only",
                                    cfg->keys[i], cfg->values[i]);
    } else if (threads) {
        return cmn_errf(eb, CMN_ECONFIG, "threads=%s applies to device=cpu (oneDNN) only", threads);
    }
    p->threads = cfg->threads;
    if (threads && parse_uint(threads, 4096, &p->threads) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "threads=%s: expected a count from 1 to 4096", threads);
    if ((rc = parse_tuning(cfg, p, eb)) < 0)
        return rc;
    if (p->threads == 0)
        p->threads = (unsigned long)cpus_allowed();
    return 0;
}

/* Probe: device=cuda's engine library and device, before the model is even read (a host without
 * it fails at once); |gpu| gets the device's description. */
static int onnx_probe(sut_backend_t *b, const onnx_params_t *p, char *gpu, size_t gpulen,
                      cmn_errbuf_t *eb)
{
    char why[sizeof(eb->msg)];
    const char *m;
    int rc;

    if (p->dev < 0)
        return 0;
    if ((rc = load_cuda_lib(p->cuda_lib, &b->cu, eb)) < 0 ||
        (rc = b->cu->probe(p->dev, gpu, gpulen, eb)) < 0) {
        /* "device=cuda:7: no such CUDA device: ..." (the engine's own "cuda:7: " dropped) */
        m = eb->msg;
        if (strncmp(m, "cuda:", 5) == 0 && strstr(m, ": "))
            m = strstr(m, ": ") + 2;
        snprintf(why, sizeof(why), "%s", m);
        return cmn_errf(eb, rc, "device=cuda:%d: %s", p->dev, why);
    }
    b->engines = (uint32_t)p->streams;
    return 0;
}

/* The batch sizes the engine plans for: batch_sizes (plus the largest), else the powers of two
 * up to the largest; a model without a batch axis runs batches of 1. */
static int plan_batches(sut_backend_t *b, const sut_backend_config_t *cfg, const onnx_params_t *p,
                        size_t *batches, size_t *n, cmn_errbuf_t *eb)
{
    size_t s;

    *n = 0;
    b->max_batch = cfg->max_batch ? cfg->max_batch : DEFAULT_MAX_BATCH;
    if (!b->g->batched) {
        if (b->g->unbatched[0])
            blog(b, SUT_LOG_WARN, "onnx: %s", b->g->unbatched);
        b->max_batch = 1;
    }
    if (p->batches && b->g->batched) {
        if (parse_batches(p->batches, b->max_batch, batches, n) < 0)
            return cmn_errf(eb, CMN_ECONFIG,
                            "batch_sizes=%s: expected up to %d sizes from 1 to "
                            "%u, comma-separated",
                            p->batches, MAX_PLANS, b->max_batch);
        if (batches[*n - 1] < b->max_batch)
            batches[(*n)++] = b->max_batch;
    } else {
        for (s = 1; s < b->max_batch && *n < MAX_PLANS - 1; s *= 2)
            batches[(*n)++] = s;
        batches[(*n)++] = b->max_batch;
    }
    b->preferred = (uint32_t)batches[*n - 1];
    return 0;
}

/* The CUDA engine on the planned program, its weights copied from one host pool. */
static int open_cuda(sut_backend_t *b, const onnx_params_t *p, const size_t *batches, size_t n,
                     cmn_errbuf_t *eb)
{
    onnx_cuda_opts_t co;
    void *pool;
    int rc;

    if ((rc = onnx_cuda_program_build(b->g, batches, n, &b->prog, eb)) < 0)
        return rc;
    if (!(pool = malloc(b->prog->pool_size + 1)))
        return cmn_errf(eb, -ENOMEM, "out of memory for %zu bytes of weights", b->prog->pool_size);
    onnx_cuda_program_fill_pool(b->prog, pool);
    memset(&co, 0, sizeof(co));
    co.device = p->dev;
    co.streams = (int)p->streams;
    co.workspace = (size_t)p->ws_mb << 20;
    co.tf32 = p->tf32;
    co.find_algo = p->find_algo;
    co.debug_sync = p->debug_sync;
    co.max_batch = b->max_batch;
    co.pool = pool;
    rc = b->cu->create(b->prog, &co, &b->cx, eb);
    free(pool);
    return rc;
}

/* Open: the model, its plans and the engine that runs them, the result buffers. */
static int onnx_open(sut_backend_t *b, const sut_backend_config_t *cfg, const onnx_params_t *p,
                     const char *gpu, cmn_errbuf_t *eb)
{
    size_t batches[MAX_PLANS], n;
    char cpu[128];
    int rc;

    if ((rc = onnx_graph_load(p->model, &b->g, eb)) < 0)
        return rc;
    if (b->argmax &&
        (b->g->n_outputs != 1 || b->g->values[b->g->outputs[0]].dtype != ONNX_DT_FLOAT))
        return cmn_errf(eb, CMN_ECONFIG, "output=argmax needs a model with one float output");
    if ((rc = plan_batches(b, cfg, p, batches, &n, eb)) < 0)
        return rc;
    if (p->dev < 0)
        rc = onnx_dnnl_create(b->g, (int)p->threads, batches, n, &b->x, eb);
    else
        rc = open_cuda(b, p, batches, n, eb);
    if (rc < 0)
        return rc;
    b->results = calloc((size_t)b->engines * b->max_batch, sizeof(*b->results));
    b->classes = calloc((size_t)b->engines * b->max_batch, 4);
    if (!b->results || !b->classes)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    if ((rc = pthread_mutex_init(&b->lock, NULL)) != 0)
        return cmn_errf(eb, -rc, "cannot create a mutex");
    b->locked = 1;
    if (p->dev < 0) {
        cpu_name(cpu, sizeof(cpu));
        snprintf(b->device, sizeof(b->device), "%s, %lu of %d CPUs, %s", cpu, p->threads,
                 (int)sysconf(_SC_NPROCESSORS_ONLN), onnx_dnnl_version());
    } else {
        snprintf(b->device, sizeof(b->device),
                 "%s; onnx CUDA engine: %lu streams, TF32 %s, convolution algorithms by %s", gpu,
                 p->streams, p->tf32 ? "on" : "off", p->find_algo ? "timing" : "heuristics");
    }
    blog(b, SUT_LOG_INFO,
         "onnx: %s: %d inputs (%zu bytes/sample), %d outputs (%zu bytes/sample), batch %s up to "
         "%u, %zu plans, %zu MB of %s buffers; %s",
         p->model, b->g->n_inputs, b->g->input_size, b->g->n_outputs, b->g->output_size,
         b->g->batched ? "axis" : "1 only", b->max_batch, n,
         (p->dev < 0 ? onnx_dnnl_memory(b->x) : b->cu->memory(b->cx)) >> 20,
         p->dev < 0 ? "host" : "device", b->device);
    return 0;
}

/* Also what a failed create leaves: each part only when it was made. */
static void onnx_destroy(sut_backend_t *b)
{
    if (!b)
        return;
    if (b->locked)
        pthread_mutex_destroy(&b->lock);
    onnx_dnnl_destroy(b->x);
    if (b->cx)
        b->cu->destroy(b->cx);
    onnx_cuda_program_free(b->prog);
    onnx_graph_free(b->g);
    free(b->results);
    free(b->classes);
    free(b);
}

static int onnx_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                       size_t errlen)
{
    onnx_params_t p;
    cmn_errbuf_t eb;
    sut_backend_t *b = NULL;
    char gpu[512] = "";
    int rc, name;

    eb.msg[0] = '\0';
    memset(&p, 0, sizeof(p));
    if ((rc = onnx_parse(cfg, &p, &eb)) == 0 && !(b = calloc(1, sizeof(*b))))
        rc = cmn_errf(&eb, -ENOMEM, "out of memory");
    if (rc == 0) {
        b->log = cfg->log;
        b->argmax = p.argmax;
        b->cuda_dev = p.dev;
        b->engines = 1;
        if ((rc = onnx_probe(b, &p, gpu, sizeof(gpu), &eb)) == 0)
            rc = onnx_open(b, cfg, &p, gpu, &eb);
    }
    if (rc == 0) {
        *out = b;
        return 0;
    }
    onnx_destroy(b);
    if (err && errlen) {
        /* name the model, unless the message already does (file errors) or is about options */
        name = p.model && rc != CMN_ECONFIG && !strstr(eb.msg, p.model) &&
               strncmp(eb.msg, "device=", 7) != 0;
        snprintf(err, errlen, "onnx backend: %s%s%s", name ? p.model : "", name ? ": " : "",
                 eb.msg);
    }
    return rc;
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
    info->engines = b->engines;
    info->weight = 1.0;
    info->flags = 0;
    return 0;
}

/* First index of the largest value (numpy.argmax). */
/* The index of the largest of |n| floats at |p| (the output buffer holds bytes: no alignment is
 * assumed). */
static int32_t argmax(const uint8_t *p, size_t n)
{
    size_t i, best = 0;
    float v, top;

    memcpy(&top, p, sizeof(top));
    for (i = 1; i < n; i++) {
        memcpy(&v, p + i * sizeof(v), sizeof(v));
        if (v > top) {
            top = v;
            best = i;
        }
    }
    return (int32_t)best;
}

/* The results of |n| samples at |out| in engine |e|'s arrays (raw bytes or argmax classes). */
static sut_result_t *fill_results(sut_backend_t *b, uint32_t e, size_t n, const uint8_t *out)
{
    const onnx_graph_t *g = b->g;
    sut_result_t *res = b->results + (size_t)e * b->max_batch;
    uint8_t *classes = b->classes + (size_t)e * b->max_batch * 4;
    size_t i;

    for (i = 0; i < n; i++) {
        sut_result_t *r = &res[i];
        r->index = i;
        r->status = 0;
        r->n_tokens = 0;
        if (b->argmax) {
            int32_t c = argmax(out + i * g->output_size, g->output_size / sizeof(float));
            uint8_t *le = classes + 4 * i;
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
    return res;
}

/* device=cuda: the engine picks a free stream; the results stay valid until it is released. A
 * device error fails each sample of the batch with CMN_EBACKEND on the response path, and the
 * log says which call failed and why. */
static int infer_cuda(sut_backend_t *b, sut_batch_t *batch)
{
    const uint8_t *out;
    cmn_errbuf_t eb;
    sut_result_t *res;
    size_t i, n = batch->n;
    int slot = 0, rc;

    rc = b->cu->run(b->cx, n, batch->input, (const void **)&out, &slot, &eb);
    if (rc < 0) {
        blog(b, SUT_LOG_ERROR, "onnx: a batch of %zu failed on the GPU: %s", n, eb.msg);
        /* the engine's arrays of slot 0 are not safe to share: complete one by one */
        for (i = 0; i < n; i++) {
            sut_result_t r;
            memset(&r, 0, sizeof(r));
            r.index = i;
            r.status = rc;
            batch->complete(batch, &r, 1);
        }
        return 0;
    }
    res = fill_results(b, (uint32_t)slot, n, out);
    batch->complete(batch, res, n);
    b->cu->release(b->cx, slot);
    return 0;
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

    if (b->cx)
        return infer_cuda(b, batch);
    pthread_mutex_lock(&b->lock);
    rc = onnx_dnnl_run(b->x, n, batch->input, (const void **)&out, &eb);
    if (rc < 0) {
        pthread_mutex_unlock(&b->lock);
        blog(b, SUT_LOG_ERROR, "onnx: %s", eb.msg);
        return rc;
    }
    /* Inside the lock: the results point into buffers that the next batch overwrites, and the
     * node copies them before complete() returns. */
    batch->complete(batch, fill_results(b, 0, n, out), n);
    pthread_mutex_unlock(&b->lock);
    return 0;
}

/* Batch inputs: plain malloc for the CPU. For the GPU pinned memory, so that the copy to the
 * device is one DMA with no staging; a header before the data says which allocator made it,
 * because where pinned memory runs out (RLIMIT_MEMLOCK in containers) pageable memory still
 * works, only slower, and the log says so once. */
static void *onnx_alloc_input(sut_backend_t *b, size_t size)
{
    cmn_errbuf_t eb;
    uint8_t *p;
    if (!b->cx)
        return malloc(size);
    p = b->cu->host_alloc(b->cx, size + IN_HDR, &eb);
    if (p) {
        p[0] = 1;
        return p + IN_HDR;
    }
    if (!b->pinned_warned) {
        b->pinned_warned = 1;
        blog(b, SUT_LOG_WARN, "onnx: %s; batch inputs fall back to pageable memory", eb.msg);
    }
    p = malloc(size + IN_HDR);
    if (!p)
        return NULL;
    p[0] = 0;
    return p + IN_HDR;
}

static void onnx_free_input(sut_backend_t *b, void *q, size_t size)
{
    uint8_t *p = q;
    (void)size;
    if (!b->cx || !p) {
        free(p);
        return;
    }
    p -= IN_HDR;
    if (p[0])
        b->cu->host_free(b->cx, p);
    else
        free(p);
}

static const sut_backend_ops_t onnx_ops = {
    .abi_version = SUT_BACKEND_ABI_VERSION,
    .struct_size = sizeof(sut_backend_ops_t),
    .name = "onnx",
    .create = onnx_create,
    .destroy = onnx_destroy,
    .describe = onnx_describe,
    .infer = onnx_infer,
    .alloc_input = onnx_alloc_input,
    .free_input = onnx_free_input,
    NULL,
    NULL,
};

const sut_backend_ops_t *sut_backend_onnx_ops(void)
{
    return &onnx_ops;
}

#ifdef SUT_BACKEND_ONNX_PLUGIN
SUT_BACKEND_ENTRY(onnx_ops);
#endif
