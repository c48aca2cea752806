/* Built-in backends.
 *   null    a fixed-size response and no work: measures the harness itself.
 *   digest  the response is cmn_digest64 of the exact decoded sample bytes (8 bytes, little
 *           endian), so the LoadGen side can prove every byte arrived intact.
 *   sim     an accelerator model: N engines, batch latency a + b*batch us with seeded jitter, a
 *           configurable output size, and an LLM mode that streams a first token after a TTFT
 *           and completes after n_tokens x TPOT.
 *   unet-sim  3D-UNet logits for the sliding window (slide.h): [N,1,P,P,P] float32 patches in,
 *           [N,3,P,P,P] float32 logits out, labelling each voxel by the intensity bands of
 *           loadgen-node/tools/kits_synth.py (an oracle: the synthetic ground truth, DICE 1.0),
 *           or with perturb=1 labelling tumour as kidney (DICE below 1). */
#include "backend.h"

#include "cmn/clock.h"
#include "cmn/conf.h"
#include "cmn/digest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Option parsing shared by the built-ins: every key must be known, every value must parse. */
typedef struct {
    const char *key;
    int is_double;
    double dmin, dmax;
    uint64_t umin, umax;
    void *out;
} opt_spec_t;

static int parse_opts(const sut_backend_config_t *cfg, const char *backend, const opt_spec_t *spec,
                      size_t n, char *err, size_t errlen)
{
    size_t i, k;

    for (i = 0; i < cfg->n_options; i++) {
        for (k = 0; k < n; k++) {
            if (strcmp(cfg->keys[i], spec[k].key) == 0)
                break;
        }
        if (k == n) {
            size_t len = (size_t)snprintf(
                err, errlen, "unknown option '%s' for the %s backend (known:", cfg->keys[i],
                backend);
            for (k = 0; k < n && len < errlen; k++)
                len += (size_t)snprintf(err + len, errlen - len, " %s", spec[k].key);
            if (len < errlen)
                snprintf(err + len, errlen - len, ")");
            return CMN_ECONFIG;
        }
        if (spec[k].is_double) {
            double d;
            if (cmn_parse_double(cfg->values[i], &d) < 0 || d < spec[k].dmin || d > spec[k].dmax) {
                snprintf(err, errlen, "option %s=%s: expected a number in %g..%g", spec[k].key,
                         cfg->values[i], spec[k].dmin, spec[k].dmax);
                return CMN_ECONFIG;
            }
            *(double *)spec[k].out = d;
        } else {
            uint64_t u;
            if (cmn_parse_u64(cfg->values[i], &u) < 0 || u < spec[k].umin || u > spec[k].umax) {
                snprintf(err, errlen, "option %s=%s: expected an integer in %llu..%llu",
                         spec[k].key, cfg->values[i], (unsigned long long)spec[k].umin,
                         (unsigned long long)spec[k].umax);
                return CMN_ECONFIG;
            }
            *(uint64_t *)spec[k].out = u;
        }
    }
    return 0;
}

#define U_OPT(k, lo, hi, p)   \
    {                         \
        k, 0, 0, 0, lo, hi, p \
    }
#define D_OPT(k, lo, hi, p)   \
    {                         \
        k, 1, lo, hi, 0, 0, p \
    }

/* ---- null ------------------------------------------------------------------------------------ */

struct sut_backend {
    uint64_t output_size;
    uint64_t inline_run;
    uint64_t max_batch;
    uint64_t engines;
    uint8_t *zeros;
    /* sim */
    double a_us, b_us, jitter;
    uint64_t preferred, llm, tokens, seed;
    double ttft_us, tpot_us;
    /* unet-sim */
    uint64_t perturb, patch_us;
    _Atomic uint64_t batch_seq;
    char device[128];
};

static int null_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                       size_t errlen)
{
    sut_backend_t *b = calloc(1, sizeof(*b));
    opt_spec_t spec[] = {U_OPT("output_size", 0, 1u << 30, &b->output_size),
                         U_OPT("max_batch", 1, 1u << 16, &b->max_batch)};
    int rc;

    if (!b)
        return CMN_EBACKEND;
    b->output_size = 4;
    b->max_batch = 1024;
    rc = parse_opts(cfg, "null", spec, 2, err, errlen);
    if (rc == 0 && !(b->zeros = calloc(1, b->output_size ? b->output_size : 1)))
        rc = -ENOMEM;
    if (rc < 0) {
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

static void null_destroy(sut_backend_t *b)
{
    free(b->zeros);
    free(b);
}

static int null_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    info->name = "null";
    info->device = "none (no inference: harness overhead only)";
    info->preferred_batch = 1;
    info->max_batch = (uint32_t)b->max_batch;
    info->output_size = b->output_size;
    info->engines = 1;
    info->weight = 1.0;
    info->flags = SUT_BACKEND_F_INLINE;
    return 0;
}

/* Completes in chunks so a large batch needs no allocation. */
#define CHUNK 64

typedef void (*deliver_fn)(sut_batch_t *b, const sut_result_t *results, size_t n);

/* Adds sample |i|'s result (|data|, |size| bytes, |n_tokens|) to the chunk |r| of *k entries,
 * and hands the chunk over through |deliver| (complete or first_token) when it is full or |i| is
 * the last of the batch's |n|. */
static void chunk_add(sut_batch_t *batch, deliver_fn deliver, sut_result_t *r, size_t *k, size_t i,
                      size_t n, const void *data, size_t size, int64_t n_tokens)
{
    r[*k].index = i;
    r[*k].status = 0;
    r[*k].data = data;
    r[*k].size = size;
    r[*k].n_tokens = n_tokens;
    if (++*k == CHUNK || i + 1 == n) {
        deliver(batch, r, *k);
        *k = 0;
    }
}

static int null_infer(sut_backend_t *b, sut_batch_t *batch)
{
    /* Read once: after the last complete() the batch belongs to the node again. */
    const size_t n = batch->n;
    sut_result_t r[CHUNK];
    size_t i, k = 0;

    for (i = 0; i < n; i++)
        chunk_add(batch, batch->complete, r, &k, i, n, b->zeros, (size_t)b->output_size, 0);
    return 0;
}

static const sut_backend_ops_t null_ops = {SUT_BACKEND_ABI_VERSION,
                                           sizeof(sut_backend_ops_t),
                                           "null",
                                           null_create,
                                           null_destroy,
                                           null_describe,
                                           null_infer,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL};

const sut_backend_ops_t *sut_backend_null_ops(void)
{
    return &null_ops;
}

/* ---- digest ---------------------------------------------------------------------------------- */

static int digest_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                         size_t errlen)
{
    sut_backend_t *b = calloc(1, sizeof(*b));
    opt_spec_t spec[] = {U_OPT("inline", 0, 1, &b->inline_run),
                         U_OPT("engines", 1, 256, &b->engines),
                         U_OPT("max_batch", 1, 1u << 16, &b->max_batch)};
    int rc;

    if (!b)
        return CMN_EBACKEND;
    b->inline_run = 1;
    b->engines = 2;
    b->max_batch = 256;
    rc = parse_opts(cfg, "digest", spec, 3, err, errlen);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

static int digest_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    info->name = "digest";
    info->device = "cpu (64-bit digest of each sample)";
    info->preferred_batch = 1;
    info->max_batch = (uint32_t)b->max_batch;
    info->output_size = 8;
    info->engines = b->inline_run ? 1 : (uint32_t)b->engines;
    info->weight = 1.0;
    info->flags = b->inline_run ? SUT_BACKEND_F_INLINE : 0;
    return 0;
}

static int digest_infer(sut_backend_t *b, sut_batch_t *batch)
{
    const size_t n = batch->n; /* read once (see null_infer) */
    uint8_t out[CHUNK][8];
    sut_result_t r[CHUNK];
    size_t i, k = 0;

    (void)b;
    for (i = 0; i < n; i++) {
        cmn_digest_put(out[k], cmn_digest64(batch->samples[i].data, batch->samples[i].size));
        chunk_add(batch, batch->complete, r, &k, i, n, out[k], 8, 0);
    }
    return 0;
}

static const sut_backend_ops_t digest_ops = {SUT_BACKEND_ABI_VERSION,
                                             sizeof(sut_backend_ops_t),
                                             "digest",
                                             digest_create,
                                             null_destroy,
                                             digest_describe,
                                             digest_infer,
                                             NULL,
                                             NULL,
                                             NULL,
                                             NULL,
                                             NULL,
                                             NULL};

const sut_backend_ops_t *sut_backend_digest_ops(void)
{
    return &digest_ops;
}

/* ---- sim ------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int sim_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                      size_t errlen)
{
    sut_backend_t *b = calloc(1, sizeof(*b));
    opt_spec_t spec[] = {
        D_OPT("a_us", 0, 1e9, &b->a_us),
        D_OPT("b_us", 0, 1e9, &b->b_us),
        D_OPT("jitter", 0, 1, &b->jitter),
        U_OPT("output_size", 0, 1u << 30, &b->output_size),
        U_OPT("engines", 1, 256, &b->engines),
        U_OPT("max_batch", 1, 1u << 16, &b->max_batch),
        U_OPT("preferred_batch", 1, 1u << 16, &b->preferred),
        U_OPT("llm", 0, 1, &b->llm),
        D_OPT("ttft_us", 0, 1e9, &b->ttft_us),
        D_OPT("tpot_us", 0, 1e9, &b->tpot_us),
        U_OPT("tokens", 2, 1u << 20, &b->tokens),
        U_OPT("seed", 0, UINT64_MAX, &b->seed),
    };
    int rc;

    if (!b)
        return CMN_EBACKEND;
    b->a_us = 100;
    b->b_us = 10;
    b->jitter = 0.05;
    b->output_size = 4;
    b->engines = 1;
    b->max_batch = 64;
    b->preferred = 0;
    b->ttft_us = 2000;
    b->tpot_us = 100;
    b->tokens = 64;
    b->seed = cfg->seed;
    rc = parse_opts(cfg, "sim", spec, sizeof(spec) / sizeof(spec[0]), err, errlen);
    if (rc == 0 && b->preferred > b->max_batch) {
        snprintf(err, errlen, "preferred_batch %llu is over max_batch %llu",
                 (unsigned long long)b->preferred, (unsigned long long)b->max_batch);
        rc = CMN_ECONFIG;
    }
    if (rc == 0) {
        size_t zsize = b->llm ? (size_t)b->tokens * 4 : (size_t)b->output_size;
        b->zeros = calloc(1, zsize ? zsize : 1);
        if (!b->zeros)
            rc = -ENOMEM;
    }
    if (rc < 0) {
        free(b->zeros);
        free(b);
        return rc;
    }
    if (!b->preferred)
        b->preferred = b->max_batch;
    snprintf(
        b->device, sizeof(b->device), "simulated accelerator: %llu engines, %.0f + %.1f*batch us%s",
        (unsigned long long)b->engines, b->a_us, b->b_us, b->llm ? ", LLM token streaming" : "");
    *out = b;
    return 0;
}

static int sim_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    double per_batch_us = b->a_us + b->b_us * (double)b->preferred;

    info->name = "sim";
    info->device = b->device;
    info->preferred_batch = (uint32_t)b->preferred;
    info->max_batch = (uint32_t)b->max_batch;
    info->output_size = b->llm ? b->tokens * 4 : b->output_size;
    info->engines = (uint32_t)b->engines;
    /* Samples per second at the preferred batch: the weight for weighted dispatch. */
    info->weight =
        per_batch_us > 0 ? (double)b->engines * (double)b->preferred * 1e6 / per_batch_us : 1e9;
    info->flags = b->llm ? SUT_BACKEND_F_STREAMING : 0;
    return 0;
}

static void sleep_until(uint64_t deadline_ns)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
    ts.tv_nsec = (long)(deadline_ns % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* The jittered duration of |us|: uniform in [us*(1-j), us*(1+j)], seeded per batch. */
static uint64_t jittered_ns(const sut_backend_t *b, double us, uint64_t rnd)
{
    double u = (double)(rnd >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
    double v = us * (1.0 + b->jitter * u);
    return v > 0 ? (uint64_t)(v * 1000.0) : 0;
}

static int sim_infer(sut_backend_t *b, sut_batch_t *batch)
{
    uint64_t seq = atomic_fetch_add(&b->batch_seq, 1);
    uint64_t rnd = splitmix64(b->seed ^ splitmix64(seq));
    uint64_t start = cmn_now_ns();
    const size_t n = batch->n; /* read once (see null_infer) */
    sut_result_t r[CHUNK];
    size_t i, k;

    if (!b->llm) {
        sleep_until(start + jittered_ns(b, b->a_us + b->b_us * (double)n, rnd));
        for (i = 0, k = 0; i < n; i++)
            chunk_add(batch, batch->complete, r, &k, i, n, b->zeros, (size_t)b->output_size, 0);
        return 0;
    }
    /* LLM: the first token of every sample after the TTFT, the rest after n_tokens x TPOT. */
    sleep_until(start + jittered_ns(b, b->ttft_us, rnd));
    for (i = 0, k = 0; i < n; i++)
        chunk_add(batch, batch->first_token, r, &k, i, n, b->zeros, 4, 1);
    sleep_until(cmn_now_ns() +
                jittered_ns(b, b->tpot_us * (double)(b->tokens - 1), splitmix64(rnd)));
    for (i = 0, k = 0; i < n; i++)
        chunk_add(batch, batch->complete, r, &k, i, n, b->zeros, (size_t)b->tokens * 4,
                  (int64_t)b->tokens);
    return 0;
}

static const sut_backend_ops_t sim_ops = {SUT_BACKEND_ABI_VERSION,
                                          sizeof(sut_backend_ops_t),
                                          "sim",
                                          sim_create,
                                          null_destroy,
                                          sim_describe,
                                          sim_infer,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL};

const sut_backend_ops_t *sut_backend_sim_ops(void)
{
    return &sim_ops;
}

/* ---- unet-sim -------------------------------------------------------------------------------- */

/* kits_synth.py's bands in HU after the reference's normalisation (x - 101) / 76.9: body
 * -10..50, tumour 80..120, kidney 145..195; padding (-2.2) and clipped air (-79 HU) fall below. */
#define UNET_HU(v) ((double)(v)*76.9 + 101.0)
#define UNET_TUMOUR_FROM 65.0
#define UNET_KIDNEY_FROM 132.5

static int unet_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                       size_t errlen)
{
    sut_backend_t *b = calloc(1, sizeof(*b));
    opt_spec_t spec[] = {
        U_OPT("perturb", 0, 1, &b->perturb), U_OPT("patch_us", 0, 10000000, &b->patch_us),
        U_OPT("engines", 1, 256, &b->engines), U_OPT("max_batch", 1, 1024, &b->max_batch)};
    int rc;

    if (!b)
        return CMN_EBACKEND;
    b->engines = 1;
    b->max_batch = 8;
    rc = parse_opts(cfg, "unet-sim", spec, 4, err, errlen);
    if (rc < 0) {
        free(b);
        return rc;
    }
    snprintf(b->device, sizeof(b->device), "cpu (unet-sim: %s of the synthetic KiTS19 bands)",
             b->perturb ? "a perturbed oracle" : "an oracle");
    *out = b;
    return 0;
}

static int unet_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    info->name = "unet-sim";
    info->device = b->device;
    info->preferred_batch = (uint32_t)b->max_batch;
    info->max_batch = (uint32_t)b->max_batch;
    info->output_size = 0;
    info->input_size = 0;
    info->engines = (uint32_t)b->engines;
    info->weight = 1.0;
    info->flags = 0;
    return 0;
}

static int unet_infer(sut_backend_t *b, sut_batch_t *batch)
{
    const size_t n = batch->n;
    uint64_t start = cmn_now_ns();
    size_t i, v, cap = 0;
    float *out = NULL;

    for (i = 0; i < n; i++) {
        size_t V = batch->samples[i].size / sizeof(float);
        if (batch->samples[i].size % sizeof(float) == 0 && V > cap)
            cap = V;
    }
    if (cap && !(out = malloc(3 * cap * sizeof(float))))
        return CMN_EBACKEND;
    sleep_until(start + (uint64_t)n * b->patch_us * 1000u);
    for (i = 0; i < n; i++) {
        const uint8_t *in = batch->samples[i].data;
        size_t V = batch->samples[i].size / sizeof(float);
        sut_result_t r;

        memset(&r, 0, sizeof(r));
        r.index = i;
        if (V == 0 || batch->samples[i].size % sizeof(float)) {
            r.status = CMN_EBACKEND; /* not a float32 patch */
            batch->complete(batch, &r, 1);
            continue;
        }
        for (v = 0; v < V; v++) {
            float x;
            double hu;
            int label;

            memcpy(&x, in + v * sizeof(float), sizeof(float));
            hu = UNET_HU(x);
            label = hu >= UNET_KIDNEY_FROM ? 1 : hu >= UNET_TUMOUR_FROM ? 2 : 0;
            if (label == 2 && b->perturb)
                label = 1;
            out[v] = label == 0 ? 1.0f : 0.0f;
            out[V + v] = label == 1 ? 1.0f : 0.0f;
            out[2 * V + v] = label == 2 ? 1.0f : 0.0f;
        }
        r.data = out;
        r.size = 3 * V * sizeof(float);
        batch->complete(batch, &r, 1);
    }
    free(out);
    return 0;
}

static const sut_backend_ops_t unet_ops = {SUT_BACKEND_ABI_VERSION,
                                           sizeof(sut_backend_ops_t),
                                           "unet-sim",
                                           unet_create,
                                           null_destroy,
                                           unet_describe,
                                           unet_infer,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL};

const sut_backend_ops_t *sut_backend_unet_sim_ops(void)
{
    return &unet_ops;
}
