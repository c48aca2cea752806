/* LoadGen test settings, the mlperf.conf / user.conf reader, and the effective settings.
 *
 * lg_test_settings_t has every field of the official mlperf::TestSettings (LoadGen 6.0.17) under
 * the same name with the same default, so a harness written for the official LoadGen ports field
 * by field. lg_test_settings_from_config() reads the official conf syntax with the official
 * semantics, quirks included (see the function). lg_effective_settings() is the official
 * TestSettingsInternal: it derives what the scheduler actually uses (target QPS from a latency
 * hint, the single Offline query's size, equal-issue padding) and the values the detail log
 * records as effective_*.
 *
 * Everything here is reentrant; nothing keeps global state (the official "config count" lives in
 * the caller's lg_msgs_t). */
#ifndef LG_SETTINGS_H
#define LG_SETTINGS_H

#include "cmn/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    LG_SINGLE_STREAM = 0,
    LG_MULTI_STREAM = 1,
    LG_SERVER = 2,
    LG_OFFLINE = 3,
} lg_scenario_t;

/* The numbers are the `mode` values of the conf files. */
typedef enum {
    LG_MODE_SUBMISSION_RUN = 0, /* accuracy, then performance */
    LG_MODE_ACCURACY_ONLY = 1,
    LG_MODE_PERFORMANCE_ONLY = 2,
    LG_MODE_FIND_PEAK_PERFORMANCE = 3, /* Server only */
} lg_mode_t;

/* "SingleStream", "MultiStream", "Server", "Offline" (as the logs and the conf keys spell them). */
const char *lg_scenario_name(lg_scenario_t s);
/* "SubmissionRun", "AccuracyOnly", "PerformanceOnly", "FindPeakPerformance". */
const char *lg_mode_name(lg_mode_t m);
/* Accept the names above, case-insensitively; modes also as "submission", "accuracy",
 * "performance", "findpeak". Return 0 or CMN_ECONFIG. */
int lg_scenario_parse(const char *s, lg_scenario_t *out);
int lg_mode_parse(const char *s, lg_mode_t *out);

typedef struct {
    lg_scenario_t scenario;
    lg_mode_t mode;
    double single_stream_expected_latency_ns;       /* 1000000: query pre-generation hint */
    double single_stream_target_latency_percentile; /* 0.90 */
    double multi_stream_expected_latency_ns;        /* 8000000 */
    double multi_stream_target_latency_percentile;  /* 0.99 */
    uint64_t multi_stream_samples_per_query;        /* 8 */
    double server_target_qps;                       /* 1: Poisson rate */
    uint64_t server_target_latency_ns;              /* 100000000 */
    double server_target_latency_percentile;        /* 0.99 */
    bool server_coalesce_queries;                   /* false */
    int server_find_peak_qps_decimals_of_precision; /* 1 */
    double server_find_peak_qps_boundary_step_size; /* 1 */
    uint64_t server_max_async_queries;              /* 0: no limit */
    uint64_t server_num_issue_query_threads;        /* 0 (only 0 is supported here) */
    double offline_expected_qps;                    /* 1 */
    bool sample_concatenate_permutation;            /* false: "equal issue" */
    uint64_t min_duration_ms;                       /* 10000 */
    uint64_t max_duration_ms;                       /* 0: no limit */
    uint64_t min_query_count;                       /* 100 */
    uint64_t max_query_count;                       /* 0: no limit */
    uint64_t qsl_rng_seed, sample_index_rng_seed, schedule_rng_seed, accuracy_log_rng_seed;
    double accuracy_log_probability;       /* 0 */
    uint64_t accuracy_log_sampling_target; /* 0 */
    bool test05;
    uint64_t test05_qsl_rng_seed, test05_sample_index_rng_seed, test05_schedule_rng_seed;
    bool print_timestamps;
    bool performance_issue_unique;
    bool performance_issue_same;
    uint64_t performance_issue_same_index;
    uint64_t performance_sample_count_override; /* 0: the QSL's count */
    uint64_t accuracy_sample_count_override;    /* 0: the QSL's total */
    bool use_token_latencies;
    uint64_t server_ttft_latency; /* 100000000 ns */
    uint64_t server_tpot_latency; /* 100000000 ns */
    bool infer_token_latencies;
    uint64_t token_latency_scaling_factor; /* uninitialised in the official struct; 0 here */
} lg_test_settings_t;

/* The official defaults. */
void lg_test_settings_init(lg_test_settings_t *s);

/* Messages LoadGen logs before or outside a run (conf errors, invalid settings). They are kept
 * here and written to the detail log when the test starts, where the official LoadGen would have
 * logged them, and they count in num_errors. */
#define LG_MSGS_MAX 32
typedef struct {
    int is_error; /* 1: error (is_error true), 0: warning */
    char key[40]; /* e.g. "error_invalid_config" */
    char text[400];
} lg_msg_t;

typedef struct {
    unsigned user_confs; /* user confs read so far ("Multiple conf files are used") */
    size_t n;
    size_t dropped; /* messages beyond LG_MSGS_MAX (still counted as errors) */
    lg_msg_t m[LG_MSGS_MAX];
} lg_msgs_t;

void lg_msgs_add(lg_msgs_t *l, int is_error, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Errors among the messages (the dropped ones included). */
size_t lg_msgs_errors(const lg_msgs_t *l);

/* Which file is read; the numbers are the official conf_type. */
typedef enum {
    LG_CONF_MLPERF = 0, /* mlperf.conf: the only source of the RNG seeds */
    LG_CONF_USER = 1,   /* user.conf; a second one logs "Multiple conf files are used" */
    LG_CONF_AUDIT = 2,  /* audit.config, read with model "*" by lg_start_test */
} lg_conf_kind_t;

/* loadgen-node's checks of a conf file before lg_test_settings_from_config() reads it, for
 * mistakes the official reader passes over in silence. LG_CONF_USER: every line must be
 * `model.scenario.key = value` with a scenario name or '*', a key LoadGen reads, and a value that
 * is not negative; any kind: a known key's value within its range in the file's units (ms, %);
 * otherwise CMN_ECONFIG with "path:line: reason" in |eb|. Any kind: when no line
 * names |model| (and, for a user.conf, some lines name other models), a warning goes into |msgs|,
 * since the run would silently use the '*' placeholders (Server target_qps 1.0). */
int lg_conf_lint(const char *path, const char *model, lg_conf_kind_t kind, lg_msgs_t *msgs,
                 cmn_errbuf_t *eb);

/* Refuses settings that would make a run wait for ever: for Server, a target QPS that is not
 * positive and finite, or so small that issuing max(min_query_count, 1) queries would take more
 * than LG_MAX_EXPECTED_RUN_S; and, in any scenario, a field outside its range (percentiles in
 * (0, 1), latencies from 1 ns to a day, durations to a week, counts that fit a sample index...:
 * the table in settings.c). CMN_ECONFIG with the key, its value and the range in |eb|. */
#define LG_MAX_EXPECTED_RUN_S (7 * 24 * 3600)
int lg_test_settings_check(const lg_test_settings_t *s, cmn_errbuf_t *eb);

/* --set FIELD=VALUE: sets a field by its official name. The value must parse as the field's type
 * (no sign for an integer, no overflow, nothing trailing); its range is checked by
 * lg_test_settings_check. 0 or CMN_ECONFIG naming the field, the value and the range. */
int lg_test_settings_set(lg_test_settings_t *s, const char *kv, cmn_errbuf_t *eb);

/* Prints "set FIELD TYPE" for every field lg_test_settings_set() takes and "conf KEY TYPE" for
 * every conf key with a range (TYPE: int, double or bool), for loadgen-node --list-options. */
void lg_settings_keys_print(FILE *out);

/* TestSettings::FromConfig. Reads |path| and applies the keys that match |model| and |scenario|
 * (the scenario's conf name, e.g. "Server"), with the official precedence model.scenario.key,
 * *.scenario.key, model.*.key, *.*.key.
 *
 * Syntax, exactly as the official parser: a line is whitespace-separated tokens `key = value`; a
 * standalone `#` token before the value ends the line; the value must parse completely as an
 * integer (strtoul base 0, so 0x.. works) or a double. `#text`, a value followed by a `# note`,
 * and a value that is not a number are parse errors: none of the file's keys is applied and
 * CMN_ECONFIG comes back with "path:line: reason" in |eb|. `key=value` without spaces is one token
 * and is silently ignored, as officially. Later lines override earlier ones.
 *
 * Seeds, accuracy_log_probability (percent) and the test05 keys are read only from
 * LG_CONF_MLPERF; scenario-specific keys (Server.target_qps, SingleStream.target_latency, ...)
 * are looked up under their literal scenario name whatever |scenario| is; units are converted as
 * officially (ms to ns, percent to fraction). Official error messages also go into |msgs| (may be
 * NULL). Returns 0, CMN_ECONFIG, or a negated errno when the file cannot be read. */
int lg_test_settings_from_config(lg_test_settings_t *s, const char *path, const char *model,
                                 const char *scenario, lg_conf_kind_t kind, lg_msgs_t *msgs,
                                 cmn_errbuf_t *eb);

/* TestSettingsInternal: what the scheduler uses. Durations in ms, latencies in ns. */
typedef struct {
    lg_test_settings_t requested;
    lg_scenario_t scenario;
    lg_mode_t mode;
    uint64_t samples_per_query;
    double target_qps;
    int64_t target_latency_ns;
    double target_latency_percentile;
    uint64_t max_async_queries;
    uint64_t target_duration_ms;
    uint64_t min_duration_ms;
    uint64_t max_duration_ms;
    uint64_t min_query_count;
    uint64_t max_query_count;
    uint64_t min_sample_count;
    uint64_t qsl_rng_seed, sample_index_rng_seed, schedule_rng_seed, accuracy_log_rng_seed;
    double accuracy_log_probability;
    uint64_t accuracy_log_sampling_target;
    bool print_timestamps;
    bool performance_issue_unique;
    bool performance_issue_same;
    uint64_t performance_issue_same_index;
    uint64_t performance_sample_count;
    uint64_t accuracy_sample_count;
    bool sample_concatenate_permutation;
    bool use_token_latencies;
    int64_t server_ttft_latency;
    int64_t server_tpot_latency;
    bool infer_token_latencies;
    int64_t token_latency_scaling_factor;
} lg_effective_settings_t;

/* Derives the effective settings from |req| and the QSL's counts, as the official constructor
 * does; the official "error_invalid_test_settings" messages go into |msgs| (may be NULL). */
void lg_effective_settings(const lg_test_settings_t *req, uint64_t qsl_performance_count,
                           uint64_t qsl_total_count, lg_effective_settings_t *out, lg_msgs_t *msgs);

#endif
