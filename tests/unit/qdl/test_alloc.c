/* The failing-allocator hook: every out-of-memory branch completes samples with a status (never
 * loses one) and every `goto fail_*` of qdl_create unwinds without a leak (ASan checks). */
#include "test_qdl_unit.h"

#include <errno.h>
#include <string.h>

static long fail_after = -1; /* allocations left before they fail; -1: never */
static long calls;

static int fail_hook(size_t n)
{
    (void)n;
    calls++;
    if (fail_after < 0)
        return 0;
    if (fail_after == 0)
        return 1;
    fail_after--;
    return 0;
}

static void hook(long after)
{
    fail_after = after;
    calls = 0;
    qdl__alloc_fail = fail_hook;
}

static void unhook(void)
{
    qdl__alloc_fail = NULL;
}

START_TEST(out_of_memory_queueing_fails_the_query)
{
    qdl_t *q = fx_new(1, 1, 10);
    qdl_sample_t s[3];
    qdl_req_t *r;

    memset(s, 0, sizeof(s));
    s[1].response_id = 42;
    r = qdl__qblock_new(s, 3);
    ck_assert_ptr_nonnull(r);
    hook(0);
    qdl__pending_enqueue(q, qdl__qblock_recs(r), 3);
    unhook();
    ck_assert_uint_eq(fx_seen.n_done, 3); /* the one-at-a-time path: no memory for the array */
    ck_assert_uint_eq(fx_seen.n_calls, 3);
    ck_assert_int_eq(fx_seen.done[0].status, -ENOMEM);
    ck_assert_uint_eq(fx_seen.done[1].response_id, 42);
    hook(0);
    ck_assert_ptr_null(qdl__qblock_new(s, 3));
    unhook();
    fx_free(q);
}
END_TEST

START_TEST(out_of_memory_requeueing_fails_the_rest)
{
    qdl_t *q = fx_new(1, 1, 10);
    qdl_srec_t *a = fx_issue(q, 2, 10), *b = fx_issue(q, 2, 10), *mix[4];

    qdl__pending_take(q, qdl__pending_head(q), 2);
    qdl__pending_take(q, qdl__pending_head(q), 2);
    mix[0] = &a[0], mix[1] = &a[1], mix[2] = &b[0], mix[3] = &b[1];
    hook(1); /* a's queue entry, then nothing */
    qdl__pending_requeue(q, mix, 4);
    unhook();
    ck_assert_uint_eq(fx_seen.n_done, 2);
    ck_assert_uint_eq(fx_seen.done[0].response_id, 2000); /* b[0]; b's block is freed */
    ck_assert_uint_eq(qdl__pending_count(q), 2);
    fx_free(q);
    ck_assert_uint_eq(fx_seen.n_done, 4);
}
END_TEST

static void ignore(void *user, const qdl_response_t *r, size_t n)
{
    (void)user;
    (void)r;
    (void)n;
}

/* qdl_create against a port nothing listens on: it fails either way, and each allocation that
 * fails takes a different unwinding path; none may leak or crash. */
START_TEST(every_create_allocation_can_fail)
{
    const char *nodes[] = {"127.0.0.1:1", "127.0.0.1:2"};
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256];
    long total, k;
    int rc;

    qdl_config_init(&cfg);
    cfg.nodes = nodes;
    cfg.n_nodes = 2;
    cfg.on_complete = ignore;
    cfg.connect_timeout_ms = 1000;
    hook(-1);
    rc = qdl_create(&cfg, &q, err, sizeof(err));
    total = calls;
    unhook();
    ck_assert_int_lt(rc, 0);
    ck_assert_uint_gt(total, 2);
    for (k = 0; k < total; k++) {
        err[0] = '\0';
        hook(k);
        rc = qdl_create(&cfg, &q, err, sizeof(err));
        unhook();
        ck_assert_int_lt(rc, 0);
        ck_assert_msg(err[0] != '\0', "no reason when allocation %ld fails", k);
    }
}
END_TEST

TCase *tcase_alloc(void)
{
    TCase *c = tcase_create("unit_alloc");
    tcase_add_test(c, out_of_memory_queueing_fails_the_query);
    tcase_add_test(c, out_of_memory_requeueing_fails_the_rest);
    tcase_add_test(c, every_create_allocation_can_fail);
    return c;
}
