#include "../check_main.h"
#include "test_common.h"

CHECK_MAIN("common", tcase_frame_header, tcase_frame_decode, tcase_frame_split, tcase_frame_guards,
           tcase_frame_encode, tcase_msg_roundtrip, tcase_msg_validate, tcase_conn, tcase_core,
           tcase_xq, tcase_wake, tcase_conf, tcase_opts, tcase_net, tcase_err, tcase_clock,
           tcase_digest, tcase_vol, tcase_idmap, tcase_metrics, tcase_metrics_http,
           tcase_metrics_http_flood, tcase_metrics_http_limits, tcase_sbuf)
