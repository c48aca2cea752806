#include "../check_main.h"
#include "test_loadgen.h"

CHECK_MAIN("loadgen", tcase_rng, tcase_trace, tcase_trace_modes, tcase_conf, tcase_mlperf_conf,
           tcase_effective, tcase_early_stopping, tcase_metrics, tcase_logs, tcase_npy, tcase_qsl,
           tcase_sched, tcase_sched_faults, tcase_tokens, tcase_accuracy)
