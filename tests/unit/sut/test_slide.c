/* The 3D-UNet sliding window (sut-node/src/slide.h) over a recording backend: the reference's
 * Gaussian map, the patch order and coverage, backend batches that span cases, argmax labels
 * equal to a per-voxel labelling backend's, voxels no patch covers, cases refused or failed one
 * by one (each answered exactly once), and the sums charged to the node's memory budget. */
#include "test_sut.h"

#include "cmn/vol.h"
#include "slide.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The backend below the window: labels each voxel (int)x % 3 as one-hot logits, records the
 * size of every batch it gets, and fails every batch when |fail| is set. With |async| set it
 * completes from a thread of its own after infer() returned, as an accelerator backend does;
 * with |reverse|, the last patch of a batch first. */
struct sut_backend {
    size_t calls, sizes[16], patches;
    int fail, async, reverse, have_thread;
    pthread_t thread;
};

static struct sut_backend rec;

static int rec_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err, size_t len)
{
    (void)cfg;
    (void)err;
    (void)len;
    *out = &rec;
    return 0;
}

static void rec_destroy(sut_backend_t *b)
{
    (void)b;
}

static int rec_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    (void)b;
    memset(info, 0, sizeof(*info));
    info->name = "rec";
    info->preferred_batch = info->max_batch = 4;
    info->engines = 1;
    return 0;
}

static void rec_run(sut_backend_t *b, sut_batch_t *batch)
{
    const size_t n = batch->n;
    size_t i, v;

    for (i = 0; i < n; i++) {
        size_t at = b->reverse ? n - 1 - i : i;
        size_t V = batch->samples[at].size / sizeof(float);
        const float *in = batch->samples[at].data;
        float *out = calloc(3 * V, sizeof(float));
        sut_result_t r = {at, 0, out, 3 * V * sizeof(float), 0};

        for (v = 0; v < V; v++)
            out[((size_t)in[v] % 3) * V + v] = 2.0f;
        b->patches++;
        batch->complete(batch, &r, 1);
        free(out);
    }
}

static void *rec_thread(void *batch)
{
    rec_run(&rec, batch);
    return NULL;
}

static void rec_join(void)
{
    if (rec.have_thread)
        pthread_join(rec.thread, NULL);
    rec.have_thread = 0;
}

static int rec_infer(sut_backend_t *b, sut_batch_t *batch)
{
    if (b->calls < 16)
        b->sizes[b->calls] = batch->n;
    b->calls++;
    if (b->fail)
        return CMN_EBACKEND;
    if (!b->async) {
        rec_run(b, batch);
        return 0;
    }
    rec_join();
    ck_assert_int_eq(pthread_create(&b->thread, NULL, rec_thread, batch), 0);
    b->have_thread = 1;
    return 0;
}

static const sut_backend_ops_t rec_ops = {SUT_BACKEND_ABI_VERSION,
                                          sizeof(sut_backend_ops_t),
                                          "rec",
                                          rec_create,
                                          rec_destroy,
                                          rec_describe,
                                          rec_infer,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL};

/* What the window answers, per sample of the outer batch. */
#define MAXS 4
static int got_status[MAXS], got_count[MAXS];
static uint8_t *got_data[MAXS];
static size_t got_size[MAXS];

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    size_t i;

    (void)b;
    for (i = 0; i < n; i++) {
        ck_assert_uint_lt(r[i].index, MAXS);
        got_count[r[i].index]++;
        got_status[r[i].index] = r[i].status;
        got_size[r[i].index] = r[i].size;
        free(got_data[r[i].index]);
        got_data[r[i].index] = NULL;
        if (r[i].size) { /* with a NUL after it: a failure's text is read as a string */
            got_data[r[i].index] = calloc(1, r[i].size + 1);
            memcpy(got_data[r[i].index], r[i].data, r[i].size);
        }
    }
}

/* A case of D x H x W voxels whose value at (z, y, x) is z + 2y + 5x (so its label varies). */
static uint8_t *make_case(uint32_t d, uint32_t h, uint32_t w, size_t *size)
{
    cmn_vol_t v = {CMN_VOL_F32, 1, {d, h, w}};
    size_t n = (size_t)d * h * w, z, y, x;
    uint8_t *p = malloc(CMN_VOL_HEADER_SIZE + n * sizeof(float));
    float *f = (float *)(void *)(p + CMN_VOL_HEADER_SIZE);

    ck_assert_int_eq(cmn_vol_encode(&v, p), 0);
    for (z = 0; z < d; z++)
        for (y = 0; y < h; y++)
            for (x = 0; x < w; x++)
                f[(z * h + y) * w + x] = (float)(z + 2 * y + 5 * x);
    *size = CMN_VOL_HEADER_SIZE + n * sizeof(float);
    return p;
}

static void load(sut_be_t *n, uint32_t patch, uint32_t batch, int async)
{
    cmn_errbuf_t eb = {{0}};

    memset(n, 0, sizeof(*n));
    memset(&rec, 0, sizeof(rec));
    rec.async = async;
    n->ops = &rec_ops;
    ck_assert_int_eq(rec_ops.create(NULL, &n->be, NULL, 0), 0);
    rec_describe(n->be, &n->info);
    ck_assert_int_eq(sut__slide_wrap(n, patch, batch, &eb), 0);
    memset(got_count, 0, sizeof(got_count));
}

static void run(sut_be_t *n, uint8_t **cases, const size_t *sizes, size_t count)
{
    sut_sample_t smp[MAXS];
    sut_batch_t b;
    size_t i;

    memset(&b, 0, sizeof(b));
    for (i = 0; i < count; i++) {
        smp[i].data = cases[i];
        smp[i].size = sizes[i];
    }
    b.n = count;
    b.samples = smp;
    b.complete = on_complete;
    ck_assert_int_eq(n->ops->infer(n->be, &b), 0);
    for (i = 0; i < count; i++)
        ck_assert_int_eq(got_count[i], 1); /* each case answered exactly once */
}

START_TEST(slide_gaussian_is_the_reference)
{
    float *g = malloc(128 * 128 * 128 * sizeof(float));

    /* Pinned from inference_utils.gaussian_kernel (scipy.signal.gaussian, cbrt, / max). */
    sut__slide_gaussian(8, g);
    ck_assert_float_eq_tol(g[0], 0.0024787523f, 1e-8f);
    ck_assert_float_eq_tol(g[(3 * 8 + 3) * 8 + 3], 1.0f, 1e-7f);
    ck_assert_float_eq_tol(g[(0 * 8 + 3) * 8 + 7], 0.01831564f, 1e-8f);
    ck_assert_float_eq_tol(g[(1 * 8 + 2) * 8 + 5], 0.1888756f, 1e-7f);
    sut__slide_gaussian(128, g);
    ck_assert_float_eq_tol(g[0], 0.00038012897f, 1e-9f);
    ck_assert_float_eq_tol(g[(64 * 128 + 64) * 128 + 64], 1.0f, 1e-7f);
    ck_assert_float_eq_tol(g[(0 * 128 + 64) * 128 + 127], 0.0052475184f, 1e-9f);
    ck_assert_float_eq_tol(g[(10 * 128 + 20) * 128 + 30], 0.021807075f, 1e-8f);
    free(g);
}
END_TEST

START_TEST(slide_labels_and_batches_span_cases)
{
    sut_be_t n;
    uint8_t *cases[3];
    size_t sizes[3], c, z, y, x;
    static const uint32_t dims[3][3] = {{4, 4, 6}, {6, 4, 4}, {4, 4, 5}};

    /* loop 0: completes inside infer(); 1: from another thread; 2: the last patch first (held
     * until its turn: the same labels) */
    load(&n, 4, 3, _i == 1);
    rec.reverse = _i == 2;
    ck_assert_str_eq(n.info.name, "rec+window4");
    for (c = 0; c < 3; c++)
        cases[c] = make_case(dims[c][0], dims[c][1], dims[c][2], &sizes[c]);
    run(&n, cases, sizes, 3);
    /* 2 + 2 + 1 patches in backend batches of 3: the first holds both of case 0's and one of
     * case 1's. */
    ck_assert_uint_eq(rec.calls, 2);
    ck_assert_uint_eq(rec.sizes[0], 3);
    ck_assert_uint_eq(rec.sizes[1], 2);
    for (c = 0; c < 3; c++) {
        ck_assert_int_eq(got_status[c], 0);
        ck_assert_uint_eq(got_size[c], (size_t)dims[c][0] * dims[c][1] * dims[c][2]);
        for (z = 0; z < dims[c][0]; z++)
            for (y = 0; y < dims[c][1]; y++)
                for (x = 0; x < dims[c][2]; x++) {
                    uint8_t want = (uint8_t)((z + 2 * y + 5 * x) % 3);

                    /* Case 2's last column (x = 4) is past the last patch: label 0. */
                    if (c == 2 && x == 4)
                        want = 0;
                    ck_assert_uint_eq(got_data[c][(z * dims[c][1] + y) * dims[c][2] + x], want);
                }
        free(cases[c]);
    }
    rec_join();
    n.ops->destroy(n.be);
}
END_TEST

START_TEST(slide_refuses_and_fails_cases_one_by_one)
{
    sut_be_t n;
    uint8_t *cases[3];
    size_t sizes[3];
    cmn_errbuf_t eb = {{0}};

    load(&n, 4, 4, 0);
    cases[0] = make_case(4, 4, 4, &sizes[0]);
    cases[1] = make_case(4, 3, 4, &sizes[1]); /* a side under the patch */
    cases[2] = make_case(4, 4, 4, &sizes[2]);
    cases[2][0] = 'X'; /* no magic */
    run(&n, cases, sizes, 3);
    ck_assert_int_eq(got_status[0], 0);
    ck_assert_uint_eq(got_size[0], 64);
    ck_assert_int_lt(got_status[1], 0);
    ck_assert_int_lt(got_status[2], 0);
    ck_assert_uint_eq(rec.patches, 1);
    /* A backend that fails its batch fails the cases in it, each answered once. */
    rec.fail = 1;
    cases[2][0] = 'N';
    sizes[1] = sizes[0];
    free(cases[1]);
    cases[1] = make_case(4, 4, 4, &sizes[1]);
    memset(got_count, 0, sizeof(got_count));
    run(&n, cases, sizes, 3);
    ck_assert_int_lt(got_status[0], 0);
    ck_assert_int_lt(got_status[1], 0);
    ck_assert_int_lt(got_status[2], 0);
    n.ops->destroy(n.be);
    /* Patch edges the window cannot take; a backend that wants other sample sizes. */
    memset(&n, 0, sizeof(n));
    n.ops = &rec_ops;
    n.be = &rec;
    rec_describe(n.be, &n.info);
    ck_assert_int_eq(sut__slide_wrap(&n, 3, 0, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "must be even"));
    n.info.input_size = 100;
    ck_assert_int_eq(sut__slide_wrap(&n, 4, 0, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "takes samples of 100 bytes; a [1,4,4,4] float32 patch"));
    ck_assert_ptr_eq(n.ops, &rec_ops); /* unchanged on failure */
    for (size_t i = 0; i < 3; i++)
        free(cases[i]);
    for (size_t i = 0; i < MAXS; i++) {
        free(got_data[i]);
        got_data[i] = NULL;
    }
}
END_TEST

/* Gives |arg|'s 12000 bytes back once the window has been refused twice (it waits). */
static sut_budget_t *give_bud;
static void *give_back_later(void *arg)
{
    (void)arg;
    while (atomic_load(&give_bud->refused) < 2)
        usleep(1000);
    sut__budget_give(give_bud, 12000);
    return NULL;
}

/* The window's sums (12 bytes per voxel: 6144 for an 8x8x8 case) are charged to the node's
 * memory budget: refused when more than the limit; a second case waits for the first's; the
 * node's own quarter takes them when nothing else of the window runs; a case waits for other
 * memory to be given back, and is refused with the reason when none is. */
START_TEST(slide_sums_charged_to_the_budget)
{
    sut_be_t n;
    sut_budget_t bud;
    uint8_t *cases[2];
    size_t sizes[2], i;
    pthread_t th;

    load(&n, 4, 4, 0);
    cases[0] = make_case(8, 8, 8, &sizes[0]);
    cases[1] = make_case(8, 8, 8, &sizes[1]);
    /* Sums over the limit (3/4 of 4096): refused before any patch runs, with the reason. */
    sut__budget_init(&bud, 4096);
    sut__slide_budget(&n, &bud);
    run(&n, cases, sizes, 1);
    ck_assert_int_lt(got_status[0], 0);
    ck_assert_str_eq((char *)got_data[0],
                     "sliding window: case of 8x8x8 voxels: its sums (6144 bytes, 3 x 4 per voxel) "
                     "are more than the memory budget lets peers hold (0 of 3072 bytes in use, "
                     "--memory-budget 4096)");
    ck_assert_uint_eq(rec.patches, 0);
    ck_assert_uint_eq(sut__budget_used(&bud), 0);
    /* Two cases whose sums fit the limit (12288) one at a time beside 4000 bytes of other
     * memory: the second waits for the first's; both are answered, the budget is back at 4000
     * and never held both. */
    sut__budget_init(&bud, 16384);
    ck_assert_int_eq(sut__budget_take(&bud, 4000), 0);
    memset(got_count, 0, sizeof(got_count));
    run(&n, cases, sizes, 2);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(got_status[i], 0);
        ck_assert_uint_eq(got_size[i], 512);
        ck_assert_uint_eq(got_data[i][(3 * 8 + 2) * 8 + 1], (3 + 2 * 2 + 5 * 1) % 3);
    }
    ck_assert_uint_eq(sut__budget_used(&bud), 4000);
    ck_assert_uint_eq(atomic_load(&bud.peak), 4000 + 6144);
    /* 9000 bytes of other memory: the limit cannot take 6144 more, the whole budget can. */
    sut__budget_init(&bud, 16384);
    ck_assert_int_eq(sut__budget_take(&bud, 9000), 0);
    memset(got_count, 0, sizeof(got_count));
    run(&n, cases, sizes, 1);
    ck_assert_int_eq(got_status[0], 0);
    ck_assert_uint_eq(atomic_load(&bud.peak), 9000 + 6144);
    ck_assert_uint_eq(sut__budget_used(&bud), 9000);
    /* 12000: not even the whole budget; the case waits until the memory is given back. */
    sut__budget_init(&bud, 16384);
    ck_assert_int_eq(sut__budget_take(&bud, 12000), 0);
    give_bud = &bud;
    ck_assert_int_eq(pthread_create(&th, NULL, give_back_later, NULL), 0);
    memset(got_count, 0, sizeof(got_count));
    run(&n, cases, sizes, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(got_status[0], 0);
    ck_assert_uint_eq(sut__budget_used(&bud), 0);
    /* And when nothing is given back, refused after its wait, with the reason. */
    ck_assert_int_eq(sut__budget_take(&bud, 12000), 0);
    memset(got_count, 0, sizeof(got_count));
    run(&n, cases, sizes, 1);
    ck_assert_int_lt(got_status[0], 0);
    ck_assert_str_eq((char *)got_data[0],
                     "sliding window: case of 8x8x8 voxels: its sums (6144 bytes, 3 x 4 per voxel) "
                     "do not fit the memory budget, and no other case's sums were given back "
                     "within 1 s (12000 of 12288 bytes in use, --memory-budget 16384)");
    ck_assert_uint_eq(sut__budget_used(&bud), 12000);
    n.ops->destroy(n.be);
    for (i = 0; i < 2; i++)
        free(cases[i]);
    for (i = 0; i < MAXS; i++) {
        free(got_data[i]);
        got_data[i] = NULL;
    }
}
END_TEST

TCase *tc_slide(void)
{
    TCase *tc = tcase_create("slide");
    tcase_add_test(tc, slide_gaussian_is_the_reference);
    tcase_add_loop_test(tc, slide_labels_and_batches_span_cases, 0, 3);
    tcase_add_test(tc, slide_refuses_and_fails_cases_one_by_one);
    tcase_add_test(tc, slide_sums_charged_to_the_budget);
    return tc;
}
