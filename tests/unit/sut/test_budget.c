/* The memory budget's accounting. (Histogram buckets are cmn_metrics', tested in common.) */
#include "test_sut.h"

#include "budget.h"
#include "cmn/err.h"

#include <uv.h>

START_TEST(budget_accounting)
{
    sut_budget_t b;

    sut__budget_init(&b, 1000);
    ck_assert_uint_eq(b.limit, 750); /* peers hold three quarters; the rest is the node's */
    ck_assert_int_eq(sut__budget_take(&b, 500), 0);
    ck_assert_int_eq(sut__budget_take(&b, 251), CMN_EOVERLOAD);
    ck_assert_uint_eq(sut__budget_used(&b), 500); /* a refused charge takes nothing */
    ck_assert_int_eq(sut__budget_take(&b, 250), 0);
    ck_assert_int_eq(sut__budget_take(&b, 1), CMN_EOVERLOAD);
    sut__budget_give(&b, 750);
    ck_assert_uint_eq(sut__budget_used(&b), 0);
    ck_assert_uint_eq(atomic_load(&b.peak), 750);
    ck_assert_uint_eq(atomic_load(&b.refused), 2);
    ck_assert_int_eq(sut__budget_take(&b, UINT64_MAX), CMN_EOVERLOAD);
    ck_assert_uint_ge(sut__budget_default(), 256ull << 20);
}
END_TEST

/* The fairness rules (budget.h): a greedy peer is refused while a share stays free, a peer within
 * its share is not; nobody holds more than half of the limit. */
START_TEST(budget_shares)
{
    const uint64_t M = 1ull << 20;
    sut_budget_t b;
    sut_peer_t greedy, good;

    atomic_init(&greedy.used, 0);
    atomic_init(&good.used, 0);
    sut__budget_init(&b, 128 * M); /* limit 96 MiB, a peer at most 48 */
    ck_assert_uint_eq(b.peer_max, 48 * M);
    sut__budget_join(&b);
    ck_assert_uint_eq(sut__budget_share(&b), 48 * M); /* one share kept for a newcomer */
    /* Alone, the greedy peer gets half of the limit and not a byte more. */
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 48 * M, 1), 0);
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 1, 1), CMN_EOVERLOAD);
    ck_assert_int_eq(sut__budget_attribute(&b, &greedy, 1, 0), CMN_EOVERLOAD);
    /* A second peer: shares of 32 MiB. The greedy one, over its share, may use the budget only
     * while 32 MiB stay free; the newcomer gets its whole share. */
    sut__budget_join(&b);
    ck_assert_uint_eq(sut__budget_share(&b), 32 * M);
    sut__budget_give(&b, 40 * M);
    sut__budget_unattribute(&greedy, 40 * M); /* it holds 8 MiB now, within its share */
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 24 * M, 1), 0); /* 32: its share */
    ck_assert_int_eq(sut__budget_take_for(&b, &good, 20 * M, 1), 0);   /* 52 in all */
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 12 * M + 1, 1), CMN_EOVERLOAD);
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 12 * M, 1), 0); /* 64 = 96 - 32 */
    ck_assert_int_eq(sut__budget_take_for(&b, &greedy, 1, 1), CMN_EOVERLOAD);
    ck_assert_int_eq(sut__budget_take_for(&b, &good, 12 * M, 1), 0); /* the victim's whole share */
    ck_assert_uint_eq(sut__budget_used(&b), 76 * M);
    ck_assert_uint_eq(sut__budget_peer_used(&good), 32 * M);
    ck_assert_uint_eq(sut__budget_peer_used(&greedy), 44 * M);
    /* Shared memory (a batch's input) asked for by the greedy peer sees where it stands. */
    ck_assert_uint_eq(sut__budget_room(&b, &greedy), 0);
    ck_assert_uint_eq(sut__budget_room(&b, &good), 20 * M);
    sut__budget_give(&b, 76 * M);
    sut__budget_unattribute(&good, 32 * M);
    sut__budget_unattribute(&greedy, 44 * M);
    ck_assert_uint_eq(sut__budget_room(&b, &greedy), 96 * M);
    sut__budget_leave(&b);
    sut__budget_leave(&b);
    ck_assert_uint_eq(sut__budget_share(&b), 96 * M);
}
END_TEST

/* The default: half of the memory, at least 256 MiB, at most 8/3 GiB, so that one peer (half of
 * three quarters) holds at most 1 GiB unless the operator raises --memory-budget. */
START_TEST(budget_default)
{
    uint64_t total = uv_get_total_memory(), cg = uv_get_constrained_memory();
    uint64_t avail = cg && cg < total ? cg : total, want = avail / 2;
    sut_budget_t b;

    if (want < (256ull << 20))
        want = 256ull << 20;
    if (want > (8ull << 30) / 3)
        want = (8ull << 30) / 3;
    ck_assert_uint_eq(sut__budget_default(), want);
    sut__budget_init(&b, sut__budget_default());
    ck_assert_uint_le(b.peer_max, 1ull << 30);
}
END_TEST

TCase *tc_budget(void)
{
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, budget_accounting);
    tcase_add_test(tc, budget_shares);
    tcase_add_test(tc, budget_default);
    return tc;
}
