/* The sliding-window layer (slide.h): cuts each case into patches, runs them through the backend
 * below in batches that span cases, weights and sums the logits, answers the argmax. */
#include "slide.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/vol.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    const sut_backend_ops_t *ops; /* the backend below */
    sut_backend_t *be;
    int (*ready)(sut_backend_t *b, char *why, size_t whylen); /* its ready() (ABI 1.2), or NULL */
    sut_backend_info_t inner;
    uint32_t patch, stride, batch;
    size_t pvox; /* P^3 */
    float *gauss;
    char name[96];
    /* The node's memory budget, which the sums are charged to (NULL: none; sut__slide_budget),
     * and what the sums of every worker's cases hold of it; |cv| signals bytes given back. */
    sut_budget_t *budget;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t held;
} slide_t;

/* One case of the node's batch. */
typedef struct {
    const uint8_t *vox; /* its first voxel, after the header (no alignment assumed) */
    uint32_t dim[3];
    uint32_t npos[3]; /* patch positions along each axis */
    size_t patches, issued, done;
    float *sum;       /* [3][D x H x W], from its first patch on */
    uint64_t charged; /* what |sum| holds of the memory budget */
    int failed, answered;
    char why[SUT_BACKEND_ERROR_MAX]; /* a failure's reason for the client, or "" */
} kase_t;

/* One backend call: the batch the backend sees (first member); each patch's logits are weighted
 * and added into its case's sums as they arrive (no copy of them is kept). */
typedef struct {
    sut_batch_t b;
    const slide_t *s;
    kase_t *ks; /* the cases of the node's batch */
    sut_sample_t *samples;
    float *in;     /* [batch][P^3] */
    uint8_t *ok;   /* per patch: P_WAITING, P_ADDED, P_FAILED or P_HELD */
    uint8_t *held; /* [batch][3][P^3]: logits that came before their turn (made when one does) */
    size_t *owner; /* per patch: its case */
    size_t *pos;   /* per patch: its index in the case */
    size_t n, n_max, next, left, out_bytes;
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
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
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

/* The corner of patch |l| of |k|, in the reference's order (depth outermost). */
static void patch_corner(const slide_t *s, const kase_t *k, size_t l, size_t at[3])
{
    at[0] = l / ((size_t)k->npos[1] * k->npos[2]) * s->stride;
    at[1] = l / k->npos[2] % k->npos[1] * s->stride;
    at[2] = l % k->npos[2] * s->stride;
}

/* Four float lanes: GCC and Clang vector extensions, SSE2 (or NEON) at any -O, with no
 * per-voxel branch. Loads and stores go through memcpy: a backend's result bytes have no
 * alignment promised. No lane op contracts or reorders, so the sums are bit for bit those of the
 * scalar loop (the C11 build does not contract a * b + c). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* dst[x] += src[x] * g[x] for x < n, |src| read as float32 at any alignment. */
static void weigh_add(float *restrict dst, const uint8_t *restrict src, const float *restrict g,
                      size_t n)
{
    size_t x = 0;

    for (; x + 8 <= n; x += 8) {
        v4f d0, d1, s0, s1, g0, g1;

        memcpy(&d0, dst + x, sizeof(d0));
        memcpy(&d1, dst + x + 4, sizeof(d1));
        memcpy(&s0, src + x * sizeof(float), sizeof(s0));
        memcpy(&s1, src + (x + 4) * sizeof(float), sizeof(s1));
        memcpy(&g0, g + x, sizeof(g0));
        memcpy(&g1, g + x + 4, sizeof(g1));
        d0 += s0 * g0;
        d1 += s1 * g1;
        memcpy(dst + x, &d0, sizeof(d0));
        memcpy(dst + x + 4, &d1, sizeof(d1));
    }
    for (; x < n; x++) {
        float v;

        memcpy(&v, src + x * sizeof(float), sizeof(v));
        dst[x] += v * g[x];
    }
}

/* Weights patch |l|'s logits ([3][P^3] float32) and adds them into |k|'s sums, one row of P
 * voxels at a time, the three channels of a row together (their weights read once). */
static void add_patch(const slide_t *s, kase_t *k, size_t l, const uint8_t *logits)
{
    size_t at[3], ch, z, y, P = s->patch, H = k->dim[1], W = k->dim[2];
    size_t V = (size_t)k->dim[0] * H * W, chunk = s->pvox * sizeof(float);

    patch_corner(s, k, l, at);
    for (z = 0; z < P; z++)
        for (y = 0; y < P; y++) {
            size_t row = (z * P + y) * P, at_v = ((at[0] + z) * H + at[1] + y) * W + at[2];

            for (ch = 0; ch < 3; ch++)
                weigh_add(k->sum + ch * V + at_v, logits + ch * chunk + row * sizeof(float),
                          s->gauss + row, P);
        }
}

/* lab[v] = np.argmax(a[v], b[v], c[v]): the first of equal maxima; a NaN is never greater. */
static void argmax3(const float *restrict a, const float *restrict b, const float *restrict c,
                    uint8_t *restrict lab, size_t n)
{
    const v4i one = {1, 1, 1, 1}, two = {2, 2, 2, 2};
    size_t v = 0;

    for (; v + 4 <= n; v += 4) {
        v4f va, vb, vc, m;
        v4i gt1, gt2, l;

        memcpy(&va, a + v, sizeof(va));
        memcpy(&vb, b + v, sizeof(vb));
        memcpy(&vc, c + v, sizeof(vc));
        gt1 = vb > va;
        m = (v4f)(((v4i)vb & gt1) | ((v4i)va & ~gt1));
        gt2 = vc > m;
        l = (gt2 & two) | (~gt2 & gt1 & one);
        lab[v] = (uint8_t)l[0];
        lab[v + 1] = (uint8_t)l[1];
        lab[v + 2] = (uint8_t)l[2];
        lab[v + 3] = (uint8_t)l[3];
    }
    for (; v < n; v++) {
        float m = b[v] > a[v] ? b[v] : a[v];

        lab[v] = c[v] > m ? 2 : b[v] > a[v];
    }
}

/* A patch's state in its call. */
enum { P_WAITING = 0, P_ADDED = 1, P_FAILED = 2, P_HELD = 3 };

/* Adds the patches from c->next on that have arrived, in patch order. */
static void call_advance(call_t *c)
{
    for (; c->next < c->n && c->ok[c->next] != P_WAITING; c->next++) {
        size_t x = c->next;
        kase_t *k = &c->ks[c->owner[x]];

        if (c->ok[x] != P_HELD)
            continue;
        if (!k->failed)
            add_patch(c->s, k, c->pos[x], c->held + x * c->out_bytes);
        c->ok[x] = P_ADDED;
    }
}

/* Adds each patch's logits into its case's sums as they arrive, on the thread that completes
 * them, in patch order (the reference's, so the sums are bit for bit the same whatever order the
 * backend completes in): one that arrives before an earlier patch of its call is copied aside
 * until that one is in. The call's mutex keeps two completions from adding at once. */
static void call_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    call_t *c = (call_t *)(void *)b;
    size_t i;

    pthread_mutex_lock(&c->mu);
    for (i = 0; i < n && c->left > 0; i++) {
        size_t x = r[i].index;
        kase_t *k;
        int whole;

        if (x >= c->n || c->ok[x] != P_WAITING)
            continue; /* not one of this call's patches, or answered already */
        k = &c->ks[c->owner[x]];
        whole = r[i].status == 0 && r[i].size == c->out_bytes && r[i].data;
        c->left--;
        if (!whole) {
            c->ok[x] = P_FAILED;
        } else if (x == c->next) {
            if (!k->failed)
                add_patch(c->s, k, c->pos[x], r[i].data);
            c->ok[x] = P_ADDED;
        } else if (c->held || (c->held = malloc(c->n_max * c->out_bytes))) {
            memcpy(c->held + x * c->out_bytes, r[i].data, c->out_bytes);
            c->ok[x] = P_HELD;
        } else {
            c->ok[x] = P_FAILED; /* no memory to hold it until its turn */
        }
        call_advance(c);
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
    free(c->ok);
    free(c->held);
    free(c->owner);
    free(c->pos);
    free(c->samples);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static int call_init(slide_t *s, call_t *c, kase_t *ks)
{
    size_t in_bytes = s->batch * s->pvox * sizeof(float);
    int have_alloc = s->ops->struct_size >=
                         offsetof(sut_backend_ops_t, free_input) + sizeof(s->ops->free_input) &&
                     s->ops->alloc_input && s->ops->free_input;

    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->s = s;
    c->ks = ks;
    c->n_max = s->batch;
    c->out_bytes = 3 * s->pvox * sizeof(float);
    c->in_from_backend = have_alloc;
    c->in = have_alloc ? s->ops->alloc_input(s->be, in_bytes) : malloc(in_bytes);
    c->ok = calloc(s->batch, 1);
    c->owner = calloc(s->batch, sizeof(*c->owner));
    c->pos = calloc(s->batch, sizeof(*c->pos));
    c->samples = calloc(s->batch, sizeof(*c->samples));
    if (!c->in || !c->ok || !c->owner || !c->pos || !c->samples) {
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
    c->next = 0;
    if (s->ops->infer(s->be, &c->b) < 0)
        return; /* nothing was completed: every patch stays not ok */
    pthread_mutex_lock(&c->mu);
    while (c->left > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
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

/* Sums of 4 MiB and more are mapped on their own, 2 MiB aligned, and asked for transparent huge
 * pages: zeroed by the kernel 2 MiB at a time instead of two faults (read, then copy on write) on
 * each 4 KiB page as the first patches add into them. Smaller ones come from calloc. */
#define SUMS_HUGE (2ull << 20)

static float *sums_alloc(size_t bytes)
{
    uint8_t *p, *at;
    size_t len = bytes + SUMS_HUGE, head;

    if (bytes < 2 * SUMS_HUGE)
        return calloc(1, bytes);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    at = p + (SUMS_HUGE - (uintptr_t)p % SUMS_HUGE) % SUMS_HUGE;
    head = (size_t)(at - p);
    if (head)
        munmap(p, head);
    if (len - head > bytes)
        munmap(at + bytes, len - head - bytes);
    (void)madvise(at, bytes, MADV_HUGEPAGE); /* a hint: without THP, 4 KiB pages */
    return (float *)(void *)at;
}

static void sums_free(float *sum, size_t bytes)
{
    if (!sum || bytes < 2 * SUMS_HUGE)
        free(sum);
    else
        munmap(sum, bytes);
}

/* Frees |k|'s sums and gives their bytes back to the memory budget. */
static void sums_close(slide_t *s, kase_t *k)
{
    sums_free(k->sum, 3 * sizeof(float) * (size_t)k->dim[0] * k->dim[1] * k->dim[2]);
    k->sum = NULL;
    if (!k->charged)
        return;
    pthread_mutex_lock(&s->mu);
    sut__budget_give(s->budget, k->charged);
    s->held -= k->charged;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    k->charged = 0;
}

/* Fails case |k| with a reason for the client (and the node's log); returns CMN_EOVERLOAD. */
static int refuse_case(kase_t *k, size_t index, uint64_t bytes, const sut_budget_t *b,
                       const char *what)
{
    snprintf(k->why, sizeof(k->why),
             "sliding window: case of %ux%ux%u voxels: its sums (%llu bytes, 3 x 4 per voxel) %s "
             "(%llu of %llu bytes in use, --memory-budget %llu)",
             k->dim[0], k->dim[1], k->dim[2], (unsigned long long)bytes, what,
             (unsigned long long)sut__budget_used(b), (unsigned long long)b->limit,
             (unsigned long long)b->budget);
    cmn_log_warn("sample %zu of a batch refused: %s", index, k->why);
    k->failed = 1;
    return CMN_EOVERLOAD;
}

/* How long a case whose sums the budget cannot hold, with no other case's sums to wait for,
 * waits for the rest of the node's memory (results being sent, frames read) to be given back. */
#define SUMS_WAIT_NS (1000ull * 1000 * 1000)
enum { SUMS_LATER = 1 };

/* Takes |bytes| of the budget for a case's sums, under the rules of slide.h; |holding|: this
 * worker holds patches or sums of other cases (then it runs them before it waits). Returns 0,
 * SUMS_LATER, or CMN_EOVERLOAD with the reason in |k|. */
static int sums_charge(slide_t *s, kase_t *k, size_t index, uint64_t bytes, int holding)
{
    sut_budget_t *b = s->budget;
    uint64_t deadline = 0;
    int rc = 0;

    if (bytes > b->limit)
        return refuse_case(k, index, bytes, b, "are more than the memory budget lets peers hold");
    pthread_mutex_lock(&s->mu);
    while (sut__budget_take(b, bytes) < 0) {
        struct timespec ts;
        uint64_t now = cmn_now_ns();

        if (holding) {
            rc = SUMS_LATER;
            break;
        }
        /* Nothing else of the window runs: the node's own quarter may hold them, since only this
         * case (its sample admitted already) can make progress. */
        if (s->held == 0 && sut__budget_take_whole(b, bytes) == 0)
            break;
        if (s->held == 0 && !deadline)
            deadline = now + SUMS_WAIT_NS;
        if (s->held == 0 && now >= deadline) {
            rc = CMN_EOVERLOAD;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 10 * 1000 * 1000; /* other charges give back without a signal: look again */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    if (rc == 0) {
        s->held += bytes;
        k->charged = bytes;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == CMN_EOVERLOAD)
        return refuse_case(k, index, bytes, b,
                           "do not fit the memory budget, and no other case's sums were given "
                           "back within 1 s");
    return rc;
}

/* Gives |k| its zeroed sums, charged to the node's memory budget when there is one. Returns 0,
 * SUMS_LATER (sums_charge), or a negative code with |k| failed. */
static int sums_open(slide_t *s, kase_t *k, size_t index, int holding)
{
    uint64_t bytes = 3 * sizeof(float) * (uint64_t)k->dim[0] * k->dim[1] * k->dim[2];
    int rc = s->budget ? sums_charge(s, k, index, bytes, holding) : 0;

    if (rc != 0)
        return rc;
    if (!(k->sum = sums_alloc(bytes))) {
        sums_close(s, k);
        snprintf(k->why, sizeof(k->why), "sliding window: out of memory for the %llu-byte sums",
                 (unsigned long long)bytes);
        k->failed = 1;
        return CMN_EBACKEND;
    }
    return 0;
}

/* Answers case |index|: its labels when all its patches are in, else its failure; its sums go
 * back. */
static void finish(slide_t *s, sut_batch_t *batch, size_t index, kase_t *k)
{
    size_t V = (size_t)k->dim[0] * k->dim[1] * k->dim[2];
    uint8_t *lab = k->failed || !k->sum ? NULL : malloc(V);

    k->answered = 1;
    if (lab)
        argmax3(k->sum, k->sum + V, k->sum + 2 * V, lab, V);
    sums_close(s, k);
    if (lab)
        answer(batch, index, 0, lab, V);
    else
        answer(batch, index, CMN_EBACKEND, k->why[0] ? k->why : NULL, strlen(k->why));
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
    if (call_init(s, &call, ks) < 0) {
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
            if (!k->sum) {
                int rc = sums_open(s, k, cur, call.n > 0);

                if (rc == SUMS_LATER)
                    break; /* the cases staged first give their sums back */
                if (rc < 0)
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

            if (call.ok[m] != P_ADDED)
                k->failed = 1;
            k->done++;
        }
        /* Answer every case that is complete or failed, up to the last one touched. */
        for (i = first < last ? first : last; i <= last && i < n; i++) {
            kase_t *k = &ks[i];

            if (k->answered || !(k->failed || k->done == k->patches))
                continue;
            unanswered--;
            finish(s, batch, i, k);
        }
        if (call.n == 0)
            break;
    }
    /* Cases that failed before their first patch, after the last case touched. */
    for (i = 0; i < n && unanswered > 0; i++) {
        if (!ks[i].answered) {
            unanswered--;
            finish(s, batch, i, &ks[i]);
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
    NULL,
    NULL,
};

int sut__slide_wrap(sut_be_t *n, uint32_t patch, uint32_t batch, cmn_errbuf_t *eb)
{
    slide_t *s;
    uint64_t pvox = (uint64_t)patch * patch * patch;
    pthread_condattr_t ca;

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
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->mu, NULL);
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
    n->attach = NULL; /* the window runs the inner backend on its own threads */
    n->detach = NULL;
    n->ready = s->ready ? slide_ready : NULL;
    n->fail_text = 1; /* the window's table is ABI 1.2: a failed case carries its reason */
    slide_describe(n->be, &n->info);
    return 0;
}

void sut__slide_budget(sut_be_t *n, sut_budget_t *budget)
{
    if (n->ops == &slide_ops)
        as_slide(n->be)->budget = budget;
}
