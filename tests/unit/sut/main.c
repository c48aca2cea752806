#include "../check_main.h"
#include "test_sut.h"

CHECK_MAIN("sut", tc_batch_max, tc_batch_wait, tc_batch_uniform, tc_batch_busy, tc_batch_alloc_fail,
           tc_batch_sink_reuse, tc_batch_response_charge, tc_session_results, tc_session_alloc_fail,
           tc_accept_tls_fail, tc_budget, tc_result_over_budget_counted, tc_batch_response_wait,
           tc_plugin_lookup, tc_slide)
