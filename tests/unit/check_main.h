/* Shared runner for the Check suites: each suite file provides its TCases, main() runs them.
 * CK_RUN_CASE (set by CTest per case) selects one; CK_FORK=no works too.
 * A maker that returns NULL skips its TCase (it prints why): when nothing else ran, the program
 * exits 77, which CTest shows as skipped (SKIP_RETURN_CODE, set by check_suite_tests). */
#ifndef TEST_CHECK_MAIN_H
#define TEST_CHECK_MAIN_H

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>

/* A TCase maker `tc_<test>` holding the one test |test|, named after it (CK_RUN_CASE=test). */
#define CHECK_ONE_TEST_TCASE(test)            \
    TCase *tc_##test(void)                    \
    {                                         \
        TCase *tc_one_ = tcase_create(#test); \
        tcase_add_test(tc_one_, test);        \
        return tc_one_;                       \
    }

/* A TCase |name| of the tests listed after |seconds| (START_TEST names, then NULL), each allowed
 * |seconds| (Check's default is 4 s; CK_TIMEOUT_MULTIPLIER scales it). */
static inline TCase *check_tcase(const char *name, int seconds, ...)
{
    TCase *tc = tcase_create(name);
    const TTest *t;
    va_list ap;

    va_start(ap, seconds);
    while ((t = va_arg(ap, const TTest *)) != NULL)
        tcase_add_test(tc, t);
    va_end(ap);
    tcase_set_timeout(tc, seconds);
    return tc;
}

/* A static TCase maker |maker| for check_tcase(|name|, |seconds|, the tests...): for CHECK_MAIN,
 * in a suite of one file. */
#define CHECK_TCASE(maker, name, seconds, ...)                            \
    static TCase *maker(void)                                             \
    {                                                                     \
        return check_tcase(name, seconds, __VA_ARGS__, (const TTest *)0); \
    }

/* CHECK_TCASE for the one test |test|, named after it (CK_RUN_CASE=test). */
#define CHECK_ONE_TEST_TCASE_TIMEOUT(test, seconds) CHECK_TCASE(tc_##test, #test, seconds, test)

#define CHECK_MAIN(suite_name, ...)                                              \
    int main(void)                                                               \
    {                                                                            \
        TCase *(*makers[])(void) = {__VA_ARGS__};                                \
        Suite *s = suite_create(suite_name);                                     \
        SRunner *sr;                                                             \
        int failed, skipped = 0;                                                 \
        size_t i;                                                                \
        for (i = 0; i < sizeof(makers) / sizeof(makers[0]); i++) {               \
            TCase *tc = makers[i]();                                             \
            if (tc)                                                              \
                suite_add_tcase(s, tc);                                          \
            else                                                                 \
                skipped++;                                                       \
        }                                                                        \
        sr = srunner_create(s);                                                  \
        srunner_run_all(sr, CK_NORMAL);                                          \
        failed = srunner_ntests_failed(sr);                                      \
        if (srunner_ntests_run(sr) == 0) { /* skipped, or no such CK_RUN_CASE */ \
            srunner_free(sr);                                                    \
            return skipped ? 77 : EXIT_FAILURE;                                  \
        }                                                                        \
        srunner_free(sr);                                                        \
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                        \
    }

#endif
