/* Shared runner for the Check suites: each suite file provides its TCases, main() runs them.
 * CK_RUN_CASE (set by CTest per case) selects one; CK_FORK=no works too. */
#ifndef TEST_CHECK_MAIN_H
#define TEST_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define CHECK_MAIN(suite_name, ...)                                             \
    int main(void)                                                              \
    {                                                                           \
        TCase *(*makers[])(void) = {__VA_ARGS__};                               \
        Suite *s = suite_create(suite_name);                                    \
        SRunner *sr;                                                            \
        int failed;                                                             \
        size_t i;                                                               \
        for (i = 0; i < sizeof(makers) / sizeof(makers[0]); i++)                \
            suite_add_tcase(s, makers[i]());                                    \
        sr = srunner_create(s);                                                 \
        srunner_run_all(sr, CK_NORMAL);                                         \
        failed = srunner_ntests_failed(sr);                                     \
        if (srunner_ntests_run(sr) == 0) /* a CK_RUN_CASE that names no case */ \
            failed = 1;                                                         \
        srunner_free(sr);                                                       \
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                       \
    }

#endif
