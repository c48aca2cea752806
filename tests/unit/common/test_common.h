#ifndef TEST_COMMON_H
#define TEST_COMMON_H

#include <check.h>

TCase *tcase_frame_header(void);
TCase *tcase_frame_decode(void);
TCase *tcase_frame_split(void);
TCase *tcase_frame_guards(void);
TCase *tcase_frame_encode(void);
TCase *tcase_msg_roundtrip(void);
TCase *tcase_msg_validate(void);
TCase *tcase_conn(void);
TCase *tcase_core(void);
TCase *tcase_xq(void);
TCase *tcase_wake(void);
TCase *tcase_conf(void);
TCase *tcase_opts(void);
TCase *tcase_sbuf(void);
TCase *tcase_net(void);
TCase *tcase_err(void);
TCase *tcase_clock(void);
TCase *tcase_digest(void);
TCase *tcase_vol(void);
TCase *tcase_idmap(void);
TCase *tcase_metrics(void);
TCase *tcase_metrics_http(void);
TCase *tcase_metrics_http_flood(void);
TCase *tcase_metrics_http_limits(void);

#endif
