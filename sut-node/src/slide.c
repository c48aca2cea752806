/* The sliding-window layer (slide.h): cuts each case into patches, runs them through the backend
 * below in batches that span cases, weights and sums the logits, answers the argmax. */
#include "slide.h"

#include "cmn/log.h"
#include "cmn/vol.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const sut_backend_ops_t *ops; /* the backend below */
    sut_backend_t *be;
    int (*ready)(sut_backend_t *b, char *why, size_t whylen); /* its ready() (ABI 1.2), or NULL */
    sut_backend_info_t inner;
    uint32_t patch, stride, batch;
    size_t pvox; /* P^3 */
    float *gauss;
    char name[96];
} slide_t;

/* One case of the node's batch. */
typedef struct {
    const uint8_t *vox; /* its first voxel, after the header (no alignment assumed) */
    uint32_t dim[3];
    uint32_t npos[3]; /* patch positions along each axis */
    size_t patches, issued, done;
    float *sum; /* [3][D x H x W], from its first patch on */
    int failed, answered;
} kase_t;

/* One backend call: the batch the backend sees (first member) and where its logits land. */
typedef struct {
    sut_batch_t b;
    sut_sample_t *samples;
    float *in;     /* [batch][P^3] */
    float *out;    /* [batch][3][P^3] */
    uint8_t *ok;   /* per patch: its logits arrived whole */
    size_t *owner; /* per patch: its case */
    size_t *pos;   /* per patch: its index in the case */
    size_t n, left, out_bytes;
    int in_from_backend;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} call_t;

void sut__slide_gaussian(uint32_t patch, float *out)
{
    double *g = malloc(patch * sizeof(*g)), max = 0, c = (patch - 1) / 2.0, sd = 0.125 * patch;
    size_t i, j, k, n = 0;

    if (!g)
        return;
    /* scipy.signal.gaussian(P, 0.125 P), then the cube root of its 3-D outer product. */
    for (i = 0; i < patch; i++)
        g[i] = exp(-((double)i - c) * ((double)i - c) / (2 * sd * sd));
    for (i = 0; i < patch; i++)
        for (j = 0; j < patch; j++)
            for (k = 0; k < patch; k++) {
                double v = cbrt(g[i] * g[j] * g[k]);
                if (v > max)
                    max = v;
            }
    for (i = 0; i < patch; i++)
        for (j = 0; j < patch; j++)
            for (k = 0; k < patch; k++)
                out[n++] = (float)(cbrt(g[i] * g[j] * g[k]) / max);
    free(g);
}

static slide_t *as_slide(sut_backend_t *b)
{
    return (slide_t *)(void *)b;
}

static int slide_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                        size_t errlen)
{
    (void)cfg;
    (void)out;
    snprintf(err, errlen, "the sliding window is a layer (--sliding-window), not a backend");
    return CMN_ECONFIG;
}

static void slide_destroy(sut_backend_t *b)
{
    slide_t *s = as_slide(b);

    s->ops->destroy(s->be);
    free(s->gauss);
    free(s);
}

static int slide_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    slide_t *s = as_slide(b);

    *info = s->inner;
    info->name = s->name;
    /* Cases per node batch: a few, so that a backend batch of patches can span them. */
    info->preferred_batch = 2;
    info->max_batch = 64;
    info->output_size = 0; /* labels of any case size */
    info->input_size = 0;
    info->flags = 0; /* blocks a worker until its cases are answered */
    return 0;
}

static void call_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    call_t *c = (call_t *)(void *)b;
    size_t i;

    pthread_mutex_lock(&c->mu);
    for (i = 0; i < n && c->left > 0; i++) {
        size_t x = r[i].index;

        if (x >= c->n)
            continue;
        if (r[i].status == 0 && r[i].size == c->out_bytes && r[i].data) {
            memcpy((uint8_t *)c->out + x * c->out_bytes, r[i].data, c->out_bytes);
            c->ok[x] = 1;
        }
        c->left--;
    }
    if (c->left == 0)
        pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void call_first_token(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    (void)b;
    (void)r;
    (void)n;
}

static void call_free(slide_t *s, call_t *c)
{
    if (c->in_from_backend)
        s->ops->free_input(s->be, c->in, s->batch * s->pvox * sizeof(float));
    else
        free(c->in);
    free(c->out);
    free(c->ok);
    free(c->owner);
    free(c->pos);
    free(c->samples);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static int call_init(slide_t *s, call_t *c)
{
    size_t in_bytes = s->batch * s->pvox * sizeof(float);
    int have_alloc = s->ops->struct_size >=
                         offsetof(sut_backend_ops_t, free_input) + sizeof(s->ops->free_input) &&
                     s->ops->alloc_input && s->ops->free_input;

    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->out_bytes = 3 * s->pvox * sizeof(float);
    c->in_from_backend = have_alloc;
    c->in = have_alloc ? s->ops->alloc_input(s->be, in_bytes) : malloc(in_bytes);
    c->out = malloc(s->batch * c->out_bytes);
    c->ok = calloc(s->batch, 1);
    c->owner = calloc(s->batch, sizeof(*c->owner));
    c->pos = calloc(s->batch, sizeof(*c->pos));
    c->samples = calloc(s->batch, sizeof(*c->samples));
    if (!c->in || !c->out || !c->ok || !c->owner || !c->pos || !c->samples) {
        if (!c->in)
            c->in_from_backend = 0;
        call_free(s, c);
        return CMN_EBACKEND;
    }
    return 0;
}

/* Runs the |c->n| patches staged in |c| through the backend and waits for every logit. */
static void call_run(slide_t *s, call_t *c)
{
    size_t i;

    for (i = 0; i < c->n; i++) {
        c->samples[i].data = c->in + i * s->pvox;
        c->samples[i].size = s->pvox * sizeof(float);
        c->ok[i] = 0;
    }
    c->b.n = c->n;
    c->b.samples = c->samples;
    c->b.input = c->in;
    c->b.input_size = c->n * s->pvox * sizeof(float);
    c->b.uniform = 1;
    c->b.backend_data = NULL;
    c->b.complete = call_complete;
    c->b.first_token = call_first_token;
    c->b.node_priv = NULL;
    c->left = c->n;
    if (s->ops->infer(s->be, &c->b) < 0)
        return; /* nothing was completed: every patch stays not ok */
    pthread_mutex_lock(&c->mu);
    while (c->left > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* The corner of patch |l| of |k|, in the reference's order (depth outermost). */
static void patch_corner(const slide_t *s, const kase_t *k, size_t l, size_t at[3])
{
    at[0] = l / ((size_t)k->npos[1] * k->npos[2]) * s->stride;
    at[1] = l / k->npos[2] % k->npos[1] * s->stride;
    at[2] = l % k->npos[2] * s->stride;
}

static void stage_patch(const slide_t *s, const kase_t *k, size_t l, float *dst)
{
    size_t at[3], z, y, P = s->patch, H = k->dim[1], W = k->dim[2];

    patch_corner(s, k, l, at);
    for (z = 0; z < P; z++)
        for (y = 0; y < P; y++)
            memcpy(dst + (z * P + y) * P,
                   k->vox + (((at[0] + z) * H + at[1] + y) * W + at[2]) * sizeof(float),
                   P * sizeof(float));
}

static void add_patch(const slide_t *s, kase_t *k, size_t l, const float *logits)
{
    size_t at[3], ch, z, y, x, P = s->patch, H = k->dim[1], W = k->dim[2];
    size_t V = (size_t)k->dim[0] * H * W;

    patch_corner(s, k, l, at);
    for (ch = 0; ch < 3; ch++)
        for (z = 0; z < P; z++)
            for (y = 0; y < P; y++) {
                float *dst = k->sum + ch * V + ((at[0] + z) * H + at[1] + y) * W + at[2];
                const float *src = logits + ch * s->pvox + (z * P + y) * P;
                const float *g = s->gauss + (z * P + y) * P;

                for (x = 0; x < P; x++)
                    dst[x] += src[x] * g[x];
            }
}

static void answer(sut_batch_t *batch, size_t index, int status, const void *data, size_t size)
{
    sut_result_t r;

    memset(&r, 0, sizeof(r));
    r.index = index;
    r.status = status;
    r.data = data;
    r.size = size;
    batch->complete(batch, &r, 1);
}

/* The labels of a case whose patches are all in; its sums go back. */
static void finish(sut_batch_t *batch, size_t index, kase_t *k)
{
    size_t V = (size_t)k->dim[0] * k->dim[1] * k->dim[2], v;
    uint8_t *lab = k->failed ? NULL : malloc(V);

    k->answered = 1;
    if (!lab) {
        free(k->sum);
        k->sum = NULL;
        answer(batch, index, CMN_EBACKEND, NULL, 0);
        return;
    }
    for (v = 0; v < V; v++) {
        float a = k->sum[v], b = k->sum[V + v], c = k->sum[2 * V + v];
        uint8_t best = 0;

        /* np.argmax: the first of equal maxima. */
        if (b > a) {
            best = 1;
            a = b;
        }
        if (c > a)
            best = 2;
        lab[v] = best;
    }
    free(k->sum);
    k->sum = NULL;
    answer(batch, index, 0, lab, V);
    free(lab);
}

/* Checks a case's header; fills |k| or returns a negative code (logged by the caller). */
static int open_case(const slide_t *s, const sut_sample_t *smp, kase_t *k, cmn_errbuf_t *eb)
{
    cmn_vol_t v;
    int rc = cmn_vol_decode(smp->data, smp->size, &v, eb), i;

    memset(k, 0, sizeof(*k));
    if (rc < 0)
        return rc;
    if (v.dtype != CMN_VOL_F32 || v.channels != 1)
        return cmn_errf(eb, CMN_EFORMAT, "a case must be 1 channel of float32 (got %u of dtype %u)",
                        v.channels, v.dtype);
    k->patches = 1;
    for (i = 0; i < 3; i++) {
        if (v.dims[i] < s->patch)
            return cmn_errf(eb, CMN_EFORMAT,
                            "case of %ux%ux%u voxels: each side must be at least the %u-voxel "
                            "patch (the reference's pre-processing pads to it)",
                            v.dims[0], v.dims[1], v.dims[2], s->patch);
        k->dim[i] = v.dims[i];
        k->npos[i] = (v.dims[i] - s->patch) / s->stride + 1;
        k->patches *= k->npos[i];
    }
    k->vox = (const uint8_t *)smp->data + CMN_VOL_HEADER_SIZE;
    return 0;
}

static int slide_infer(sut_backend_t *b, sut_batch_t *batch)
{
    slide_t *s = as_slide(b);
    const size_t n = batch->n; /* read once: the batch is the node's after its last answer */
    kase_t *ks = calloc(n, sizeof(*ks));
    size_t cur = 0, i, unanswered = n;
    call_t call;

    if (!ks)
        return CMN_EBACKEND;
    if (call_init(s, &call) < 0) {
        free(ks);
        return CMN_EBACKEND;
    }
    for (i = 0; i < n; i++) {
        cmn_errbuf_t eb = {{0}};

        if (open_case(s, &batch->samples[i], &ks[i], &eb) < 0) {
            cmn_log_warn("sliding window: sample %zu of a batch refused: %s", i, eb.msg);
            ks[i].failed = 1;
        }
    }
    for (;;) {
        size_t first = cur, last = cur, m;

        /* Stage up to one backend batch of patches, case after case. */
        call.n = 0;
        while (call.n < s->batch && cur < n) {
            kase_t *k = &ks[cur];

            if (k->failed || k->issued == k->patches) {
                cur++;
                continue;
            }
            if (!k->sum &&
                !(k->sum = calloc(3 * (size_t)k->dim[0] * k->dim[1] * k->dim[2], sizeof(float)))) {
                k->failed = 1;
                continue;
            }
            stage_patch(s, k, k->issued, call.in + call.n * s->pvox);
            call.owner[call.n] = cur;
            call.pos[call.n] = k->issued++;
            call.n++;
            last = cur;
        }
        if (call.n > 0)
            call_run(s, &call);
        for (m = 0; m < call.n; m++) {
            kase_t *k = &ks[call.owner[m]];

            if (!call.ok[m])
                k->failed = 1;
            else if (!k->failed)
                add_patch(s, k, call.pos[m], call.out + m * 3 * s->pvox);
            k->done++;
        }
        /* Answer every case that is complete or failed, up to the last one touched. */
        for (i = first < last ? first : last; i <= last && i < n; i++) {
            kase_t *k = &ks[i];

            if (k->answered || !(k->failed || k->done == k->patches))
                continue;
            unanswered--;
            if (k->failed) {
                k->answered = 1;
                free(k->sum);
                k->sum = NULL;
                answer(batch, i, CMN_EBACKEND, NULL, 0);
            } else {
                finish(batch, i, k);
            }
        }
        if (call.n == 0)
            break;
    }
    /* Cases that failed before their first patch, after the last case touched. */
    for (i = 0; i < n && unanswered > 0; i++) {
        if (!ks[i].answered) {
            ks[i].answered = 1;
            free(ks[i].sum);
            unanswered--;
            answer(batch, i, CMN_EBACKEND, NULL, 0);
        }
    }
    call_free(s, &call);
    free(ks);
    return 0;
}

/* The backend below answers for readiness: the window itself needs nothing. */
static int slide_ready(sut_backend_t *b, char *why, size_t whylen)
{
    slide_t *s = (slide_t *)(void *)b;

    return s->ready ? s->ready(s->be, why, whylen) : 1;
}

static const sut_backend_ops_t slide_ops = {
    SUT_BACKEND_ABI_VERSION,
    sizeof(sut_backend_ops_t),
    "sliding-window",
    slide_create,
    slide_destroy,
    slide_describe,
    slide_infer,
    NULL,
    NULL,
    NULL,
    slide_ready,
};

int sut__slide_wrap(sut_be_t *n, uint32_t patch, uint32_t batch, cmn_errbuf_t *eb)
{
    slide_t *s;
    uint64_t pvox = (uint64_t)patch * patch * patch;

    if (patch < 2 || patch % 2 || patch > 1024)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--sliding-window %u: the patch edge must be even, 2..1024", patch);
    if (n->info.input_size && n->info.input_size != pvox * sizeof(float))
        return cmn_errf(eb, CMN_ECONFIG,
                        "the %s backend takes samples of %llu bytes; a [1,%u,%u,%u] float32 patch "
                        "is %llu",
                        n->info.name, (unsigned long long)n->info.input_size, patch, patch, patch,
                        (unsigned long long)(pvox * sizeof(float)));
    if (n->info.flags & SUT_BACKEND_F_STREAMING)
        return cmn_errf(eb, CMN_ECONFIG,
                        "the %s backend streams tokens; the sliding window needs "
                        "a backend that returns logits",
                        n->info.name);
    s = calloc(1, sizeof(*s));
    if (!s || !(s->gauss = malloc(pvox * sizeof(float)))) {
        free(s);
        return cmn_errf(eb, CMN_EBACKEND, "out of memory for a %u^3 Gaussian map", patch);
    }
    s->ops = n->ops;
    s->be = n->be;
    s->ready = n->ready;
    s->inner = n->info;
    s->patch = patch;
    s->stride = patch / 2;
    s->pvox = (size_t)pvox;
    s->batch = batch ? batch : (n->info.preferred_batch ? n->info.preferred_batch : 1);
    if (n->info.max_batch && s->batch > n->info.max_batch)
        s->batch = n->info.max_batch;
    sut__slide_gaussian(patch, s->gauss);
    snprintf(s->name, sizeof(s->name), "%s+window%u", n->info.name ? n->info.name : "plugin",
             patch);
    n->ops = &slide_ops;
    n->be = (sut_backend_t *)(void *)s;
    n->cancel = NULL;
    n->ready = s->ready ? slide_ready : NULL;
    slide_describe(n->be, &n->info);
    return 0;
}
