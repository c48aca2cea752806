/* onnx_bench: samples/s of the onnx backend, driven through the plugin ABI as sut-node drives it.
 *
 *   onnx_bench --model M.onnx [--batch 1,64] [--threads N] [--runs 5] [--seconds 1.0]
 *              [--warmup 0.5] [--plugin libsut_backend_onnx.so]
 *
 * For each batch size: create the backend with that max batch (one plan), run batches for
 * --warmup seconds, then --runs timed runs of at least --seconds each; print every run and the
 * median. The last line per batch size is machine-readable:
 *   RESULT batch=64 samples_per_s=1234.5 runs=5
 * The input is one batch of pseudo-random bytes reused every time (the timing does not depend on
 * the values; each 4-byte word is a small float, so float models see no NaN or denormal). */
#include "onnx_backend.h"

#include "cmn/clock.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCHES 16
#define MAX_RUNS 64

static double now(void)
{
    return (double)cmn_now_ns() * 1e-9;
}

static size_t completed;

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    size_t i;
    (void)b;
    for (i = 0; i < n; i++)
        if (r[i].status != 0) {
            fprintf(stderr, "onnx_bench: sample %zu failed: %d\n", r[i].index, r[i].status);
            exit(1);
        }
    completed += n;
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

static void usage(void)
{
    fprintf(stderr, "usage: onnx_bench --model M.onnx [--batch 1,64] [--threads N] [--runs 5] "
                    "[--seconds 1.0] [--warmup 0.5] [--plugin PATH]\n");
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

int main(int argc, char **argv)
{
    const char *model = NULL, *plugin = NULL, *batch_list = "1,64", *threads = "0";
    size_t batches[MAX_BATCHES], n_batches = 0, bi;
    double seconds = 1.0, warmup = 0.5;
    int runs = 5, i;
    const sut_backend_ops_t *ops = sut_backend_onnx_ops();
    char list[128], *tok, *save;

    for (i = 1; i < argc; i++) {
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
        else
            usage();
        i++;
    }
    if (!model || runs < 1 || runs > MAX_RUNS || seconds <= 0 || strlen(batch_list) >= sizeof(list))
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
        size_t n = batches[bi], k;
        char nb[32];
        const char *keys[] = {"model", "batch_sizes", "threads"};
        const char *values[] = {model, nb, threads};
        sut_backend_config_t cfg;
        sut_backend_info_t info;
        sut_backend_t *b;
        sut_sample_t *samples;
        sut_batch_t batch;
        double rate[MAX_RUNS], t0, t1;
        uint8_t *input;
        uint32_t rng = 12345;
        char err[1024];

        snprintf(nb, sizeof(nb), "%zu", n);
        memset(&cfg, 0, sizeof(cfg));
        cfg.device = "cpu";
        cfg.max_batch = (uint32_t)n;
        cfg.n_options = strcmp(threads, "0") == 0 ? 2 : 3; /* 0: the backend's choice */
        cfg.keys = keys;
        cfg.values = values;
        cfg.log = log_cb;
        if (ops->create(&cfg, &b, err, sizeof(err)) != 0) {
            fprintf(stderr, "onnx_bench: %s\n", err);
            return 1;
        }
        ops->describe(b, &info);
        if (info.max_batch < n) {
            fprintf(stderr, "onnx_bench: the model takes batches of at most %u\n", info.max_batch);
            return 1;
        }
        input = malloc(n * info.input_size + 4);
        samples = calloc(n, sizeof(*samples));
        if (!input || !samples)
            return 1;
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
        memset(&batch, 0, sizeof(batch));
        batch.n = n;
        batch.samples = samples;
        batch.input = input;
        batch.input_size = n * info.input_size;
        batch.uniform = 1;
        batch.complete = on_complete;

        if (bi == 0)
            printf("model %s\ndevice %s\n", model, info.device);
        t0 = now();
        do
            run_batch(ops, b, &batch);
        while (now() - t0 < warmup);
        for (i = 0; i < runs; i++) {
            size_t iters = 0;
            completed = 0;
            t0 = now();
            do {
                run_batch(ops, b, &batch);
                iters++;
                t1 = now();
            } while (t1 - t0 < seconds);
            rate[i] = (double)completed / (t1 - t0);
            printf("batch %zu run %d: %zu batches in %.3f s, %.1f samples/s\n", n, i + 1, iters,
                   t1 - t0, rate[i]);
        }
        qsort(rate, (size_t)runs, sizeof(double), cmp_double);
        printf("RESULT batch=%zu samples_per_s=%.1f runs=%d\n", n, rate[runs / 2], runs);
        fflush(stdout);
        ops->destroy(b);
        free(input);
        free(samples);
    }
    return 0;
}
