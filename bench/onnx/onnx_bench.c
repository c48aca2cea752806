/* onnx_bench: samples/s of the onnx backend, driven through the plugin ABI as sut-node drives it.
 *
 *   onnx_bench --model M.onnx [--batch 1,64] [--threads N] [--runs 5] [--seconds 1.0]
 *              [--warmup 0.5] [--plugin libsut_backend_onnx.so]
 *              [--device cpu|cuda[:N]] [--opt KEY=VALUE]... [--workers N]
 *
 * For each batch size: create the backend with that max batch (one plan), run batches for
 * --warmup seconds, then --runs timed runs of at least --seconds each; print every run and the
 * median. The last line per batch size is machine-readable:
 *   RESULT batch=64 samples_per_s=1234.5 runs=5
 * The input is one batch of pseudo-random bytes reused every time (the timing does not depend on
 * the values; each 4-byte word is a small float, so float models see no NaN or denormal).
 *
 * --workers threads call infer() at once, each with its own batch in memory from the backend's
 * alloc_input() (pinned for the GPU), as sut-node's worker threads do; the default is the
 * backend's engines (1 for the CPU, the streams for device=cuda). --opt passes backend options
 * (streams=3, tf32=1, ...). When the device cannot be used (no GPU, no driver, no CUDA engine in
 * the build) it prints "SKIP device=...: <why>" and exits 77. */
#include "onnx_backend.h"

#include "cmn/clock.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BATCHES 16
#define MAX_RUNS 64
#define MAX_OPTS 16
#define MAX_WORKERS 64
#define SKIP_CODE 77
/* Decimals for a rate: one, or five below 10/s (a 3D-UNet patch takes seconds). */
#define PREC(r) ((r) < 10.0 ? 5 : 1)

static double now(void)
{
    return (double)cmn_now_ns() * 1e-9;
}

static atomic_size_t completed;
static atomic_int stop;

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    size_t i;
    (void)b;
    for (i = 0; i < n; i++)
        if (r[i].status != 0) {
            fprintf(stderr, "onnx_bench: sample %zu failed: %d\n", r[i].index, r[i].status);
            exit(1);
        }
    atomic_fetch_add(&completed, n);
}

static void log_cb(int level, const char *msg)
{
    if (level <= SUT_LOG_WARN)
        fprintf(stderr, "onnx_bench: %s\n", msg);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
    fprintf(stderr, "usage: onnx_bench --model M.onnx [--batch 1,64] [--threads N] [--runs 5] "
                    "[--seconds 1.0] [--warmup 0.5] [--plugin PATH] [--device cpu|cuda[:N]] "
                    "[--opt KEY=VALUE]... [--workers N]\n");
    exit(2);
}

/* One infer() of |n| samples; exits on failure (a benchmark has nothing to recover). */
static void run_batch(const sut_backend_ops_t *ops, sut_backend_t *b, sut_batch_t *batch)
{
    int rc = ops->infer(b, batch);
    if (rc != 0) {
        fprintf(stderr, "onnx_bench: infer failed: %d\n", rc);
        exit(1);
    }
}

typedef struct {
    const sut_backend_ops_t *ops;
    sut_backend_t *b;
    sut_batch_t batch;
    pthread_t th;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    /* at least one batch: on a loaded machine a short run may end before the thread starts */
    do
        run_batch(w->ops, w->b, &w->batch);
    while (!atomic_load(&stop));
    return NULL;
}

/* All workers running batches for at least |seconds| (and one batch each); returns samples/s. */
static double timed(worker_t *w, int n_workers, double seconds, size_t *batches)
{
    double t0, t1;
    int k;
    atomic_store(&completed, 0);
    atomic_store(&stop, 0);
    t0 = now();
    for (k = 0; k < n_workers; k++)
        if (pthread_create(&w[k].th, NULL, worker_main, &w[k]) != 0) {
            fprintf(stderr, "onnx_bench: cannot start a worker thread\n");
            exit(1);
        }
    while (now() - t0 < seconds)
        usleep(1000);
    atomic_store(&stop, 1);
    for (k = 0; k < n_workers; k++)
        pthread_join(w[k].th, NULL);
    t1 = now();
    *batches = atomic_load(&completed) / w[0].batch.n;
    return (double)atomic_load(&completed) / (t1 - t0);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *plugin = NULL, *batch_list = "1,64", *threads = "0";
    const char *device = "cpu", *extra_k[MAX_OPTS], *extra_v[MAX_OPTS];
    size_t batches[MAX_BATCHES], n_batches = 0, bi, n_extra = 0;
    double seconds = 1.0, warmup = 0.5;
    int runs = 5, i, workers = 0;
    const sut_backend_ops_t *ops = sut_backend_onnx_ops();
    char list[128], *tok, *save;

    /* Every option takes a value: the pairs are (argv[i], argv[i + 1]). */
    for (i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--model") == 0)
            model = v;
        else if (strcmp(a, "--batch") == 0)
            batch_list = v;
        else if (strcmp(a, "--threads") == 0)
            threads = v;
        else if (strcmp(a, "--runs") == 0)
            runs = atoi(v);
        else if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(a, "--warmup") == 0)
            warmup = atof(v);
        else if (strcmp(a, "--plugin") == 0)
            plugin = v;
        else if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--workers") == 0)
            workers = atoi(v);
        else if (strcmp(a, "--opt") == 0) {
            const char *eq = strchr(v, '=');
            char *key;
            if (!eq || eq == v || n_extra == MAX_OPTS || !(key = strndup(v, (size_t)(eq - v))))
                usage();
            extra_k[n_extra] = key;
            extra_v[n_extra++] = eq + 1;
        } else
            usage();
    }
    if (!model || runs < 1 || runs > MAX_RUNS || seconds <= 0 || workers < 0 ||
        workers > MAX_WORKERS || strlen(batch_list) >= sizeof(list))
        usage();
    snprintf(list, sizeof(list), "%s", batch_list);
    for (tok = strtok_r(list, ",", &save); tok && n_batches < MAX_BATCHES;
         tok = strtok_r(NULL, ",", &save))
        if ((batches[n_batches++] = strtoul(tok, NULL, 10)) == 0)
            usage();
    if (plugin) {
        void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        sut_backend_entry_fn entry =
            h ? (sut_backend_entry_fn)dlsym(h, SUT_BACKEND_ENTRY_SYMBOL) : NULL;
        if (!entry) {
            fprintf(stderr, "onnx_bench: cannot load %s: %s\n", plugin, dlerror());
            return 1;
        }
        ops = entry();
    }

    for (bi = 0; bi < n_batches; bi++) {
        size_t n = batches[bi], k, nk = 0, iters;
        char nb[32];
        const char *keys[4 + MAX_OPTS], *values[4 + MAX_OPTS];
        sut_backend_config_t cfg;
        sut_backend_info_t info;
        sut_backend_t *b;
        worker_t w[MAX_WORKERS];
        double rate[MAX_RUNS];
        uint32_t rng = 12345;
        char err[1024];
        int n_workers;

        snprintf(nb, sizeof(nb), "%zu", n);
        keys[nk] = "model";
        values[nk++] = model;
        keys[nk] = "batch_sizes";
        values[nk++] = nb;
        keys[nk] = "device";
        values[nk++] = device;
        if (strcmp(threads, "0") != 0) { /* 0: the backend's choice */
            keys[nk] = "threads";
            values[nk++] = threads;
        }
        for (k = 0; k < n_extra; k++) {
            keys[nk] = extra_k[k];
            values[nk++] = extra_v[k];
        }
        memset(&cfg, 0, sizeof(cfg));
        cfg.device = "cpu";
        cfg.max_batch = (uint32_t)n;
        cfg.n_options = nk;
        cfg.keys = keys;
        cfg.values = values;
        cfg.log = log_cb;
        if (ops->create(&cfg, &b, err, sizeof(err)) != 0) {
            if (strcmp(device, "cpu") != 0 &&
                (strstr(err, "no usable CUDA device") || strstr(err, "no CUDA engine") ||
                 strstr(err, "cannot load the CUDA engine") ||
                 strstr(err, "no such CUDA device"))) {
                printf("SKIP device=%s: %s\n", device, err);
                return SKIP_CODE;
            }
            fprintf(stderr, "onnx_bench: %s\n", err);
            return 1;
        }
        ops->describe(b, &info);
        if (info.max_batch < n) {
            fprintf(stderr, "onnx_bench: the model takes batches of at most %u\n", info.max_batch);
            return 1;
        }
        n_workers = workers ? workers : (int)(info.engines ? info.engines : 1);
        if (n_workers > MAX_WORKERS)
            n_workers = MAX_WORKERS;
        for (i = 0; i < n_workers; i++) {
            sut_sample_t *samples = calloc(n, sizeof(*samples));
            uint8_t *input = ops->alloc_input ? ops->alloc_input(b, n * info.input_size + 4)
                                              : malloc(n * info.input_size + 4);
            if (!input || !samples) {
                fprintf(stderr, "onnx_bench: out of memory for the inputs\n");
                return 1;
            }
            for (k = 0; k + 4 <= n * info.input_size; k += 4) {
                float f;
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                f = (float)(rng >> 8) / 8388608.0f - 1.0f;
                memcpy(input + k, &f, 4);
            }
            for (k = 0; k < n; k++) {
                samples[k].data = input + k * info.input_size;
                samples[k].size = info.input_size;
            }
            memset(&w[i], 0, sizeof(w[i]));
            w[i].ops = ops;
            w[i].b = b;
            w[i].batch.n = n;
            w[i].batch.samples = samples;
            w[i].batch.input = input;
            w[i].batch.input_size = n * info.input_size;
            w[i].batch.uniform = 1;
            w[i].batch.complete = on_complete;
        }

        if (bi == 0)
            printf("model %s\ndevice %s\n", model, info.device);
        printf("batch %zu: %d worker thread(s), %u engine(s)\n", n, n_workers, info.engines);
        if (warmup > 0)
            timed(w, n_workers, warmup, &iters);
        for (i = 0; i < runs; i++) {
            rate[i] = timed(w, n_workers, seconds, &iters);
            printf("batch %zu run %d: %zu batches in >= %.3f s, %.*f samples/s\n", n, i + 1, iters,
                   seconds, PREC(rate[i]), rate[i]);
        }
        qsort(rate, (size_t)runs, sizeof(double), cmp_double);
        printf("RESULT batch=%zu samples_per_s=%.*f runs=%d\n", n, PREC(rate[runs / 2]),
               rate[runs / 2], runs);
        fflush(stdout);
        for (i = 0; i < n_workers; i++) {
            if (ops->free_input)
                ops->free_input(b, w[i].batch.input, n * info.input_size + 4);
            else
                free(w[i].batch.input);
            free((void *)w[i].batch.samples);
        }
        ops->destroy(b);
    }
    return 0;
}
