/* The memory budget's accounting. (Histogram buckets are cmn_metrics', tested in common.) */
#include "test_sut.h"

#include "budget.h"
#include "cmn/err.h"

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

TCase *tc_budget(void)
{
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, budget_accounting);
    return tc;
}
