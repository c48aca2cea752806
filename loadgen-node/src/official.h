/* official.h: loadgen-node --loadgen official. The unaltered official MLCommons LoadGen schedules,
 * times and logs the test; the QDL (through the qdl/mlperf shim) carries the queries to the
 * sut-nodes; the QSL is loadgen-node's own (npy, raw, synthetic, LZ4). Built only when CMake is
 * given MLPERF_LOADGEN_ROOT (LG_HAVE_OFFICIAL is then defined for main.c). */
#ifndef LG_OFFICIAL_H
#define LG_OFFICIAL_H

#include "qdl/qdl.h"

/* The lg and cmn headers are C without C++ guards. */
#ifdef __cplusplus
extern "C" {
#endif

#include "cmn/err.h"
#include "lg/lg.h"
#include "lg/qsl.h"
#include "lg/settings.h"

/* What main.c parsed, as given on the command line. The official LoadGen reads the conf files
 * itself (TestSettings::FromConfig: user.conf, with its compiled-in mlperf.conf first) and
 * ./audit.config from the working directory, as it always does. */
typedef struct {
    const char *model;            /* conf key prefix (NULL: "*") */
    const char *scenario;         /* SingleStream, MultiStream, Server, Offline */
    const char *mode;             /* NULL: as the conf files say (PerformanceOnly default) */
    const char *mlperf_conf;      /* must equal the compiled-in one (official_conf.h) */
    const char *const *user_conf; /* read with FromConfig in order */
    int n_user_conf;
    const char *const *sets; /* --set FIELD=VALUE, applied after the conf files */
    int n_sets;
    const lg_test_settings_t *parsed; /* main.c's parse of the same flags: the --set values */
    const char *audit_config;         /* --audit-config as given (NULL: default) */
} lg_official_args_t;

/* Runs the test with the official LoadGen over a QDL made from |qdl_cfg| (its callbacks are
 * replaced by the shim's). |log| gives the output folder, prefix, suffix, datetime, summary copy
 * and progress line; the loadgen-node-only extras (sample latencies, digests, drain timeout) are
 * refused. Returns the loadgen-node exit status (0 VALID/accuracy done, 1 INVALID, 2 bad
 * arguments, 3 could not run) and fills |eb| when it is 2 or 3. */
int lg_official_run(const lg_official_args_t *args, lg_qsl_t *qsl, const qdl_config_t *qdl_cfg,
                    const lg_log_settings_t *log, cmn_errbuf_t *eb);

#ifdef __cplusplus
}
#endif

#endif
