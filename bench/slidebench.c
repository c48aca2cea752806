/* slidebench: the 3D-UNet sliding window's own arithmetic (sut-node/src/slide.c), in process, with
 * no network: cases cut into patches, each patch's logits weighted by the Gaussian map and added
 * into the sums, the argmax to uint8. Prints MB/s of float32 case voxels taken in, the median of
 * --runs runs; nothing asserts a speed (bench/README.md, B9w).
 *
 *   slidebench [--backend free|unet-sim] [--patch P] [--shape DxHxW] [--cases N]
 *              [--window-batch B] [--runs R]
 *
 * free: a cost-free backend below the window (it answers every patch with the same one-hot
 * logits, made once), so the figure is the window's alone; unet-sim: the node's oracle backend
 * (its per-voxel labelling added), as bench B9 runs it. Defaults: B9's (patch 32, 3 cases of
 * 96x128x128, window batch 8). */
#include "backend.h"
#include "cmn/clock.h"
#include "cmn/vol.h"
#include "slide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CASES 16
#define MAX_RUNS 15

/* The cost-free backend: one-hot logits of a fixed pattern, the same for every patch. */
struct sut_backend {
    float *logits;
    size_t bytes;
};

static struct sut_backend free_be;

static int free_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err, size_t n)
{
    (void)cfg;
    (void)err;
    (void)n;
    *out = &free_be;
    return 0;
}

static void free_destroy(sut_backend_t *b)
{
    free(b->logits);
    b->logits = NULL;
}

static int free_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    (void)b;
    memset(info, 0, sizeof(*info));
    info->name = "free";
    info->preferred_batch = info->max_batch = 64;
    info->engines = 1;
    return 0;
}

static int free_infer(sut_backend_t *b, sut_batch_t *batch)
{
    const size_t n = batch->n;
    size_t i, v;

    for (i = 0; i < n; i++) {
        sut_result_t r = {i, 0, NULL, 3 * batch->samples[i].size, 0};

        if (r.size != b->bytes) {
            size_t V = batch->samples[i].size / sizeof(float);

            free(b->logits);
            b->bytes = 0;
            if (!(b->logits = calloc(3 * V, sizeof(float))))
                return CMN_EBACKEND;
            for (v = 0; v < V; v++)
                b->logits[(v * 7 / 5 % 3) * V + v] = 1.0f;
            b->bytes = r.size;
        }
        r.data = b->logits;
        batch->complete(batch, &r, 1);
    }
    return 0;
}

static const sut_backend_ops_t free_ops = {SUT_BACKEND_ABI_VERSION,
                                           sizeof(sut_backend_ops_t),
                                           "free",
                                           free_create,
                                           free_destroy,
                                           free_describe,
                                           free_infer,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL};

static size_t answered, failed;

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    size_t i;

    (void)b;
    for (i = 0; i < n; i++) {
        answered++;
        failed += r[i].status < 0;
    }
}

/* A case in the window's input format: the synthetic KiTS19 bands, normalised as the reference
 * does ((HU - 101) / 76.9): body, with a kidney and a tumour block inside. */
static uint8_t *make_case(const uint32_t dim[3], size_t *size)
{
    cmn_vol_t v = {CMN_VOL_F32, 1, {dim[0], dim[1], dim[2]}};
    size_t z, y, x, n = (size_t)dim[0] * dim[1] * dim[2];
    uint8_t *p = malloc(CMN_VOL_HEADER_SIZE + n * sizeof(float));
    float *f;

    if (!p || cmn_vol_encode(&v, p) < 0)
        return NULL;
    f = (float *)(void *)(p + CMN_VOL_HEADER_SIZE);
    for (z = 0; z < dim[0]; z++)
        for (y = 0; y < dim[1]; y++)
            for (x = 0; x < dim[2]; x++) {
                double hu = 20;

                if (y > dim[1] / 3 && y < dim[1] / 2 && x > dim[2] / 4 && x < dim[2] / 2)
                    hu = z < dim[0] / 2 ? 170 : 100;
                f[(z * dim[1] + y) * dim[2] + x] = (float)((hu - 101.0) / 76.9);
            }
    *size = CMN_VOL_HEADER_SIZE + n * sizeof(float);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int usage(void)
{
    fprintf(stderr, "usage: slidebench [--backend free|unet-sim] [--patch P] [--shape DxHxW] "
                    "[--cases N] [--window-batch B] [--runs R]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *backend = "free";
    uint32_t patch = 32, wbatch = 8, dim[3] = {96, 128, 128};
    int cases = 3, runs = 5, i, r;
    sut_sample_t smp[MAX_CASES];
    double mbs[MAX_RUNS], bytes = 0;
    sut_be_t n;
    cmn_errbuf_t eb = {{0}};
    char err[256] = "";
    sut_backend_config_t cfg;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--backend"))
            backend = argv[i + 1];
        else if (!strcmp(argv[i], "--patch"))
            patch = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shape")) {
            if (sscanf(argv[i + 1], "%ux%ux%u", &dim[0], &dim[1], &dim[2]) != 3)
                return usage();
        } else if (!strcmp(argv[i], "--cases"))
            cases = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--window-batch"))
            wbatch = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else
            return usage();
    }
    if (i != argc || cases < 1 || cases > MAX_CASES || runs < 1 || runs > MAX_RUNS)
        return usage();
    memset(&n, 0, sizeof(n));
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = "cpu";
    cfg.max_batch = 64;
    if (!strcmp(backend, "free"))
        n.ops = &free_ops;
    else if (!strcmp(backend, "unet-sim"))
        n.ops = sut_backend_unet_sim_ops();
    else
        return usage();
    if (n.ops->create(&cfg, &n.be, err, sizeof(err)) < 0 || n.ops->describe(n.be, &n.info) < 0) {
        fprintf(stderr, "slidebench: backend %s: %s\n", backend, err);
        return 1;
    }
    if (sut__slide_wrap(&n, patch, wbatch, &eb) < 0) {
        fprintf(stderr, "slidebench: %s\n", eb.msg);
        return 1;
    }
    for (i = 0; i < cases; i++) {
        smp[i].data = make_case(dim, &smp[i].size);
        if (!smp[i].data) {
            fprintf(stderr, "slidebench: out of memory for a %ux%ux%u case\n", dim[0], dim[1],
                    dim[2]);
            return 1;
        }
        bytes += (double)(smp[i].size - CMN_VOL_HEADER_SIZE);
    }
    for (r = 0; r < runs; r++) {
        sut_batch_t b;
        uint64_t t0;

        memset(&b, 0, sizeof(b));
        b.n = (size_t)cases;
        b.samples = smp;
        b.complete = on_complete;
        answered = failed = 0;
        t0 = cmn_now_ns();
        if (n.ops->infer(n.be, &b) < 0 || answered != (size_t)cases || failed) {
            fprintf(stderr, "slidebench: the window failed %zu of %d cases\n", failed, cases);
            return 1;
        }
        mbs[r] = bytes / 1e6 / ((double)(cmn_now_ns() - t0) / 1e9);
    }
    qsort(mbs, (size_t)runs, sizeof(mbs[0]), cmp_double);
    printf("slidebench backend=%s patch=%u shape=%ux%ux%u cases=%d window-batch=%u: "
           "%.1f MB/s [%.1f..%.1f] of float32 case voxels (median of %d)\n",
           backend, patch, dim[0], dim[1], dim[2], cases, wbatch, mbs[runs / 2], mbs[0],
           mbs[runs - 1], runs);
    n.ops->destroy(n.be);
    for (i = 0; i < cases; i++)
        free((void *)smp[i].data);
    return 0;
}
