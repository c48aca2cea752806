/* The memory budget's accounting and the metrics' histogram buckets. */
#include "test_sut.h"

#include "budget.h"
#include "cmn/err.h"
#include "metrics.h"

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

START_TEST(metric_buckets)
{
    ck_assert_uint_eq(sut__batch_bucket(1), 0);
    ck_assert_uint_eq(sut__batch_bucket(2), 1);
    ck_assert_uint_eq(sut__batch_bucket(3), 2);
    ck_assert_uint_eq(sut__batch_bucket(1024), 10);
    ck_assert_uint_eq(sut__batch_bucket(1025), SUT_BATCH_BUCKETS); /* +Inf */
    ck_assert_uint_eq(sut__latency_bucket(50000), 0);              /* 50 us <= 100 us */
    ck_assert_uint_eq(sut__latency_bucket(100000), 0);             /* the bound is inclusive */
    ck_assert_uint_eq(sut__latency_bucket(1000001), 4);            /* just over 1 ms: <= 2.5 ms */
    ck_assert_uint_eq(sut__latency_bucket(20000000000ull), SUT_LATENCY_BUCKETS);
}
END_TEST

TCase *tc_budget(void)
{
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, budget_accounting);
    tcase_add_test(tc, metric_buckets);
    return tc;
}
