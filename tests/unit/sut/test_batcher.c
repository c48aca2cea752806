/* The batcher's rules (max batch, max wait, uniform, growth while engines are busy) and its
 * allocation failures, on a loop with a test backend that records every batch it is given. */
#include "test_sut.h"

#include "alloc.h"
#include "batcher.h"
#include "cmn/clock.h"
#include "cmpr/cmpr.h"
#include "workers.h"

#include <errno.h>
#include <string.h>

#define MAX_SEEN 64

typedef struct {
    int hold; /* keep batches until the test completes them */
    size_t n_seen;
    size_t sizes[MAX_SEEN];
    int uniform[MAX_SEEN];
    uint64_t at_ns[MAX_SEEN];
    sut_batch_t *held[MAX_SEEN];
    size_t n_held;
} rec_backend_t;

static rec_backend_t RB;

static void complete_all(sut_batch_t *b)
{
    sut_result_t r;
    size_t i, n = b->n;

    for (i = 0; i < n; i++) {
        memset(&r, 0, sizeof(r));
        r.index = i;
        b->complete(b, &r, 1);
    }
}

static int rb_infer(sut_backend_t *be, sut_batch_t *b)
{
    (void)be;
    ck_assert_uint_lt(RB.n_seen, MAX_SEEN);
    RB.sizes[RB.n_seen] = b->n;
    RB.uniform[RB.n_seen] = b->uniform;
    RB.at_ns[RB.n_seen++] = cmn_now_ns();
    if (RB.hold)
        RB.held[RB.n_held++] = b;
    else
        complete_all(b);
    return 0;
}

static const sut_backend_ops_t rb_ops = {
    .abi_version = SUT_BACKEND_ABI_VERSION,
    .struct_size = sizeof(sut_backend_ops_t),
    .name = "record",
    .infer = rb_infer,
    NULL,
    NULL,
};

typedef struct {
    uv_loop_t loop;
    cmn_xq_t q;
    cmn_pool_t *pool;
    sut_be_t be;
    sut_workers_t w;
    sut_batcher_t bt;
    sut_budget_t budget;
    size_t results;
} fixture_t;

static fixture_t F;

static void on_records(cmn_xq_t *q, cmn_xq_node_t *list)
{
    fixture_t *f = q->data;

    while (list) {
        sut_qhdr_t *h = (sut_qhdr_t *)list;
        list = list->next;
        if (h->kind == SUT_REC_BATCH_DONE) {
            sut__batcher_release(
                &f->bt, (sut_nbatch_t *)(void *)((char *)h - offsetof(sut_nbatch_t, done)));
            sut__batcher_kick(&f->bt);
        } else {
            sut_rec_t *r = (sut_rec_t *)h;
            f->results++;
            cmn_pool_put(f->pool, r->data);
            cmn_pool_put(f->pool, r);
        }
    }
}

/* A batcher over the recording backend, run inline on this thread. |busy_model|: the batcher
 * counts one engine that is busy while a batch is held, as with worker threads. */
static void setup(uint32_t max_batch, uint32_t preferred, uint64_t max_wait_us, int busy_model)
{
    sut_batcher_config_t cfg;
    cmn_errbuf_t eb;

    memset(&F, 0, sizeof(F));
    memset(&RB, 0, sizeof(RB));
    ck_assert_int_eq(uv_loop_init(&F.loop), 0);
    ck_assert_int_eq(cmn_xq_init(&F.loop, &F.q, on_records), 0);
    F.q.data = &F;
    F.pool = cmn_pool_new(1u << 20);
    ck_assert_ptr_nonnull(F.pool);
    F.be.ops = &rb_ops;
    F.be.info.name = "record";
    F.be.info.flags = SUT_BACKEND_F_INLINE;
    sut__budget_init(&F.budget, 64u << 20);
    ck_assert_int_eq(sut__workers_init(&F.w, &F.be, &F.q, F.pool, &F.budget, 0, &eb), 0);
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_batch = max_batch;
    cfg.preferred_batch = preferred;
    cfg.max_batch_bytes = 1u << 20;
    cfg.max_wait_us = max_wait_us;
    cfg.engines = 1;
    cfg.inline_run = !busy_model;
    sut__batcher_init(&F.bt, &F.loop, &cfg, &F.be, &F.w, &F.budget);
}

static void teardown(void)
{
    sut__batcher_close(&F.bt);
    cmn_xq_close(&F.q, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&F.loop), 0);
    sut__batcher_free(&F.bt);
    sut__workers_shutdown(&F.w);
    cmn_pool_free(F.pool);
    sut__alloc_fail_after(-1);
}

static int add(uint64_t id, size_t size)
{
    static uint8_t bytes[4096];
    sut_owner_t ow = {NULL, id, CMPR_NONE, 0, NULL, 0, 0, 0};
    cmn_errbuf_t eb;

    return sut__batcher_add(&F.bt, &ow, CMPR_NONE, bytes, size, size, &eb);
}

/* One turn of the node's loop: the results an inline backend queued without a wake-up are
 * handed over first (as node.c's on_turn does at the end of every turn), else the loop waits
 * for its next event (the batcher's timer). */
static void loop_once(void)
{
    if (!cmn_xq_drain(&F.q))
        uv_run(&F.loop, UV_RUN_ONCE);
}

/* Runs the loop until |n| batches were seen or 10 s passed. */
static void run_until_batches(size_t n)
{
    uint64_t end = cmn_now_ns() + 10000000000ull;

    while (RB.n_seen < n && cmn_now_ns() < end)
        loop_once();
    ck_assert_uint_eq(RB.n_seen, n);
}

/* A plugin backend's responses are charged to the budget from dispatch until the batch is back:
 * its declared output size per sample. */
START_TEST(batch_response_charge)
{
    static int plugin;
    uint64_t dispatched, completed;
    int i;

    setup(4, 4, 1000000, 0);
    RB.hold = 1;
    F.be.dl = &plugin; /* as if dlopen'ed */
    F.be.info.output_size = 1000;
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(add((uint64_t)i, 16), 0);
    ck_assert_uint_eq(RB.n_held, 1);
    dispatched = sut__budget_used(&F.budget);
    ck_assert_uint_ge(dispatched, 4 * 1000 + 4 * 16); /* the responses and the input */
    complete_all(RB.held[0]);
    completed = sut__budget_used(&F.budget); /* plus the result records */
    while (cmn_xq_drain(&F.q))
        ;
    ck_assert_uint_eq(completed - sut__budget_used(&F.budget), 4 * 1000);
    teardown();
}
END_TEST

/* A batch whose response charge the budget cannot cover waits, in order, until a running one
 * gives its charge back: the budget is never overshot while something runs. */
START_TEST(batch_response_wait)
{
    static int plugin;
    int i;

    setup(1, 1, 0, 0);
    RB.hold = 1;
    F.be.dl = &plugin;
    F.be.info.output_size = 20u << 20; /* the limit (48 MiB) covers two */
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(add((uint64_t)i, 16), 0);
    ck_assert_uint_eq(RB.n_seen, 2);
    ck_assert_uint_eq(F.bt.n_held, 2);
    ck_assert_uint_eq(F.bt.inflight, 4);
    ck_assert_uint_le(sut__budget_used(&F.budget), F.budget.limit);
    complete_all(RB.held[0]);
    while (cmn_xq_drain(&F.q))
        ;
    ck_assert_uint_eq(RB.n_seen, 3); /* the first held one went, the second still waits */
    ck_assert_uint_eq(F.bt.n_held, 1);
    ck_assert_uint_le(sut__budget_used(&F.budget), F.budget.limit);
    for (i = 1; i < 4; i++) {
        complete_all(RB.held[i]);
        while (cmn_xq_drain(&F.q))
            ;
    }
    ck_assert_uint_eq(RB.n_seen, 4);
    ck_assert_uint_eq(F.bt.n_held, 0);
    ck_assert(sut__batcher_idle(&F.bt));
    ck_assert_uint_lt(sut__budget_used(&F.budget), 1u << 20); /* every response charge is back */
    teardown();
}
END_TEST

START_TEST(batch_max)
{
    int i;

    setup(4, 4, 1000000, 0); /* a second's wait: only a full batch or Flush sends */
    for (i = 0; i < 10; i++)
        ck_assert_int_eq(add((uint64_t)i, 16), 0);
    ck_assert_uint_eq(RB.n_seen, 2); /* two full batches went at once */
    ck_assert_uint_eq(RB.sizes[0], 4);
    ck_assert_uint_eq(RB.sizes[1], 4);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 2); /* 2 < preferred and the wait has not passed */
    sut__batcher_flush(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 3);
    ck_assert_uint_eq(RB.sizes[2], 2);
    while (F.results < 10)
        loop_once();
    ck_assert(sut__batcher_idle(&F.bt));
    ck_assert_uint_eq(F.bt.st.batches, 3);
    teardown();
}
END_TEST

START_TEST(batch_wait)
{
    uint64_t t0;

    /* max_wait 0: an idle engine takes a single sample at once. */
    setup(8, 8, 0, 0);
    ck_assert_int_eq(add(1, 16), 0);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 1);
    ck_assert_uint_eq(RB.sizes[0], 1);
    run_until_batches(1);
    teardown();

    /* max_wait 30 ms: the sample waits for company, then goes alone (never before the wait). */
    setup(8, 8, 30000, 0);
    t0 = cmn_now_ns();
    ck_assert_int_eq(add(1, 16), 0);
    ck_assert_int_eq(add(2, 16), 0);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 0);
    run_until_batches(1);
    ck_assert_uint_eq(RB.sizes[0], 2);
    ck_assert_uint_ge(RB.at_ns[0] - t0, 30000000u);
    teardown();

    /* Reaching the preferred batch sends without waiting. */
    setup(8, 2, 10000000, 0);
    ck_assert_int_eq(add(1, 16), 0);
    ck_assert_int_eq(add(2, 16), 0);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 1);
    teardown();
}
END_TEST

START_TEST(batch_uniform)
{
    setup(8, 8, 1000000, 0);
    ck_assert_int_eq(add(1, 16), 0);
    ck_assert_int_eq(add(2, 16), 0);
    ck_assert_int_eq(add(3, 16), 0);
    sut__batcher_flush(&F.bt);
    ck_assert_int_eq(add(4, 16), 0);
    ck_assert_int_eq(add(5, 32), 0);
    sut__batcher_flush(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 2);
    ck_assert_int_eq(RB.uniform[0], 1);
    ck_assert_int_eq(RB.uniform[1], 0);
    teardown();
}
END_TEST

START_TEST(batch_busy)
{
    int i;

    /* One engine: the first sample goes at once; while it runs the open batch grows; when the
     * engine frees up the grown batch goes as one. */
    setup(16, 16, 0, 1);
    RB.hold = 1;
    ck_assert_int_eq(add(0, 16), 0);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 1);
    for (i = 1; i <= 5; i++)
        ck_assert_int_eq(add((uint64_t)i, 16), 0);
    sut__batcher_kick(&F.bt);
    ck_assert_uint_eq(RB.n_seen, 1); /* the engine is busy */
    RB.hold = 0;
    complete_all(RB.held[0]);
    run_until_batches(2);
    ck_assert_uint_eq(RB.sizes[1], 5);
    while (F.results < 6)
        loop_once();
    teardown();
}
END_TEST

/* Opens a zero-copy batch of |bytes| holding one sample, commits it (the recording backend keeps
 * it: RB.hold) and returns its input buffer, or NULL when it could not open. */
static uint8_t *sink_one(uint64_t id, size_t bytes)
{
    sut_owner_t ow = {NULL, id, CMPR_NONE, 0, NULL, 0, 0, 0};
    sut_nbatch_t *nb = sut__batcher_sink_open(&F.bt, bytes, NULL);
    uint8_t *input;

    if (!nb)
        return NULL;
    input = nb->input;
    sut__batcher_sink_add(nb, &ow, bytes);
    sut__batcher_sink_commit(&F.bt, nb);
    return input;
}

/* Completes every held batch and hands them back (node.c's turn does so). */
static void release_held(size_t results)
{
    size_t i;

    for (i = 0; i < RB.n_held; i++)
        complete_all(RB.held[i]);
    RB.n_held = 0;
    while (F.results < results)
        loop_once();
}

/* Zero-copy receive opens a batch per frame: idle ones are kept up to FREE_KEEP_BYTES of input (a
 * sixteenth of the limit here: 48 MiB / 16 = 3 MiB), and the next frames land in them with no
 * allocation at all, the one that fits first; beyond that bound, a burst's batches are freed. */
START_TEST(batch_sink_reuse)
{
    uint8_t *in[4], *again[3];
    size_t i, j, found;

    setup(16, 1, 0, 0);
    RB.hold = 1;
    for (i = 0; i < 4; i++) {
        in[i] = sink_one(i, 1u << 20);
        ck_assert_ptr_nonnull(in[i]);
    }
    ck_assert_uint_eq(RB.n_seen, 4);
    release_held(4);
    ck_assert_uint_eq(F.bt.n_free, 3);
    ck_assert_uint_eq(F.bt.free_bytes, 3u << 20);
    /* Three frames more, every allocation failing: each reuses a kept batch. */
    sut__alloc_fail_after(0);
    for (i = 0; i < 3; i++) {
        again[i] = sink_one(10 + i, 1u << 20);
        ck_assert_msg(again[i] != NULL, "frame %zu needed an allocation", i);
        for (found = 0, j = 0; j < 4; j++)
            found += again[i] == in[j];
        ck_assert_uint_eq(found, 1);
    }
    ck_assert_ptr_null(sink_one(20, 1u << 20)); /* the fourth was freed: it would allocate */
    ck_assert_int_ge(sut__alloc_fail_after(-1), 1);
    release_held(7);
    /* A small batch recycled last sits first on the list; a large frame takes the large one
     * behind it instead of reallocating the small one's input. */
    sut__batcher_trim(&F.bt);
    ck_assert_ptr_nonnull(sink_one(30, 1u << 20));
    ck_assert_ptr_nonnull(sink_one(31, 4096));
    release_held(9);
    ck_assert_uint_eq(F.bt.n_free, 2);
    sut__alloc_fail_after(0);
    ck_assert_ptr_nonnull(sink_one(32, 1u << 20));
    ck_assert_int_eq(sut__alloc_fail_after(-1), 0);
    release_held(10);
    teardown();
}
END_TEST

START_TEST(batch_alloc_fail)
{
    cmn_errbuf_t eb;
    sut_owner_t ow = {NULL, 7, CMPR_NONE, 0, NULL, 0, 0, 0};
    uint8_t junk[64];
    long k;

    /* Each allocation of a new batch in turn (the batch, its sample slots, its owners, its
     * input): the sample is refused with a reason, nothing leaks (ASan), and the next try works. */
    for (k = 0; k < 4; k++) {
        setup(4, 4, 1000000, 0);
        sut__alloc_fail_after(k);
        ck_assert_int_eq(add(1, 16), -ENOMEM);
        ck_assert_int_ge(sut__alloc_fail_after(-1), 1);
        ck_assert_int_eq(add(1, 16), 0);
        sut__batcher_flush(&F.bt);
        ck_assert_uint_eq(RB.n_seen, 1);
        teardown();
    }
    /* A sample that does not decode to its declared size. */
    setup(4, 4, 1000000, 0);
    memset(junk, 0xff, sizeof(junk));
    ck_assert_int_eq(sut__batcher_add(&F.bt, &ow, CMPR_LZ4, junk, sizeof(junk), 1000, &eb),
                     CMN_EDECOMPRESS);
    ck_assert_ptr_nonnull(strstr(eb.msg, "sample 7"));
    teardown();
}
END_TEST

CHECK_ONE_TEST_TCASE(batch_max)

CHECK_ONE_TEST_TCASE(batch_wait)

CHECK_ONE_TEST_TCASE(batch_uniform)

CHECK_ONE_TEST_TCASE(batch_busy)

CHECK_ONE_TEST_TCASE(batch_alloc_fail)

CHECK_ONE_TEST_TCASE(batch_sink_reuse)

CHECK_ONE_TEST_TCASE(batch_response_charge)

CHECK_ONE_TEST_TCASE(batch_response_wait)
