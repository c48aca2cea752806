/* The sut-node unit suite: one TCase maker per group. */
#ifndef TEST_SUT_H
#define TEST_SUT_H

#include "../check_main.h"

TCase *tc_batch_max(void);
TCase *tc_batch_wait(void);
TCase *tc_batch_uniform(void);
TCase *tc_batch_busy(void);
TCase *tc_batch_alloc_fail(void);
TCase *tc_batch_sink_reuse(void);
TCase *tc_batch_response_charge(void);
TCase *tc_batch_response_wait(void);
TCase *tc_session_results(void);
TCase *tc_session_alloc_fail(void);
TCase *tc_result_over_budget_counted(void);
TCase *tc_accept_tls_fail(void);
TCase *tc_budget(void);
TCase *tc_plugin_lookup(void);
TCase *tc_slide(void);

#endif
