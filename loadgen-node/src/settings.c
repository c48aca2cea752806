#include "lg/settings.h"

#include "cmn/conf.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const scenario_names[] = {"SingleStream", "MultiStream", "Server", "Offline"};
static const char *const mode_names[] = {"SubmissionRun", "AccuracyOnly", "PerformanceOnly",
                                         "FindPeakPerformance"};

const char *lg_scenario_name(lg_scenario_t s)
{
    return (unsigned)s < 4 ? scenario_names[s] : "InvalidScenario";
}

const char *lg_mode_name(lg_mode_t m)
{
    return (unsigned)m < 4 ? mode_names[m] : "InvalidMode";
}

int lg_scenario_parse(const char *s, lg_scenario_t *out)
{
    unsigned i;

    for (i = 0; i < 4; i++) {
        if (strcasecmp(s, scenario_names[i]) == 0) {
            *out = (lg_scenario_t)i;
            return 0;
        }
    }
    return CMN_ECONFIG;
}

int lg_mode_parse(const char *s, lg_mode_t *out)
{
    static const char *const short_names[] = {"submission", "accuracy", "performance", "findpeak"};
    unsigned i;

    for (i = 0; i < 4; i++) {
        if (strcasecmp(s, mode_names[i]) == 0 || strcasecmp(s, short_names[i]) == 0) {
            *out = (lg_mode_t)i;
            return 0;
        }
    }
    return CMN_ECONFIG;
}

void lg_test_settings_init(lg_test_settings_t *s)
{
    memset(s, 0, sizeof(*s));
    s->scenario = LG_SINGLE_STREAM;
    s->mode = LG_MODE_PERFORMANCE_ONLY;
    s->single_stream_expected_latency_ns = 1000000;
    s->single_stream_target_latency_percentile = 0.90;
    s->multi_stream_expected_latency_ns = 8000000;
    s->multi_stream_target_latency_percentile = 0.99;
    s->multi_stream_samples_per_query = 8;
    s->server_target_qps = 1;
    s->server_target_latency_ns = 100000000;
    s->server_target_latency_percentile = 0.99;
    s->server_find_peak_qps_decimals_of_precision = 1;
    s->server_find_peak_qps_boundary_step_size = 1;
    s->offline_expected_qps = 1;
    s->min_duration_ms = 10000;
    s->min_query_count = 100;
    s->server_ttft_latency = 100000000;
    s->server_tpot_latency = 100000000;
}

void lg_msgs_add(lg_msgs_t *l, int is_error, const char *key, const char *fmt, ...)
{
    va_list ap;
    lg_msg_t *m;

    if (!l)
        return;
    if (l->n >= LG_MSGS_MAX) {
        l->dropped++;
        return;
    }
    m = &l->m[l->n++];
    m->is_error = is_error;
    snprintf(m->key, sizeof(m->key), "%s", key);
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof(m->text), fmt, ap);
    va_end(ap);
}

size_t lg_msgs_errors(const lg_msgs_t *l)
{
    size_t i, n;

    if (!l)
        return 0;
    n = l->dropped;
    for (i = 0; i < l->n; i++)
        n += l->m[i].is_error ? 1u : 0u;
    return n;
}

/* ---- conf reader --------------------------------------------------------------------------- */

/* The file's key/value pairs; a later assignment to a key replaces the earlier one (std::map). */
typedef struct {
    char **keys, **vals;
    size_t n, cap;
} kv_t;

static void kv_free(kv_t *kv)
{
    size_t i;

    for (i = 0; i < kv->n; i++) {
        free(kv->keys[i]);
        free(kv->vals[i]);
    }
    free(kv->keys);
    free(kv->vals);
}

static int kv_set(kv_t *kv, const char *k, const char *v)
{
    size_t i;
    char *nv = strdup(v);

    if (!nv)
        return -ENOMEM;
    for (i = 0; i < kv->n; i++) {
        if (strcmp(kv->keys[i], k) == 0) {
            free(kv->vals[i]);
            kv->vals[i] = nv;
            return 0;
        }
    }
    if (kv->n == kv->cap) {
        size_t cap = kv->cap ? kv->cap * 2 : 64;
        char **nk = realloc(kv->keys, cap * sizeof(*nk)), **nvs;

        if (!nk)
            goto fail_nomem;
        kv->keys = nk;
        nvs = realloc(kv->vals, cap * sizeof(*nvs));
        if (!nvs)
            goto fail_nomem;
        kv->vals = nvs;
        kv->cap = cap;
    }
    kv->keys[kv->n] = strdup(k);
    if (!kv->keys[kv->n])
        goto fail_nomem;
    kv->vals[kv->n++] = nv;
    return 0;

fail_nomem:
    free(nv);
    return -ENOMEM;
}

static const char *kv_get(const kv_t *kv, const char *k)
{
    size_t i;

    for (i = 0; i < kv->n; i++)
        if (strcmp(kv->keys[i], k) == 0)
            return kv->vals[i];
    return NULL;
}

/* The official lookup order: exact, model wildcard, scenario wildcard, both wildcards. */
static const char *lookup(const kv_t *kv, const char *model, const char *scenario, const char *key)
{
    char name[512];
    const char *v;

    snprintf(name, sizeof(name), "%s.%s.%s", model, scenario, key);
    if ((v = kv_get(kv, name)))
        return v;
    snprintf(name, sizeof(name), "*.%s.%s", scenario, key);
    if ((v = kv_get(kv, name)))
        return v;
    snprintf(name, sizeof(name), "%s.*.%s", model, key);
    if ((v = kv_get(kv, name)))
        return v;
    snprintf(name, sizeof(name), "*.*.%s", key);
    return kv_get(kv, name);
}

/* lookupkv with an integer target: strtoull(value) times the integer part of the multiplier. */
static int get_u64(const kv_t *kv, const char *model, const char *scenario, const char *key,
                   uint64_t *out, uint64_t mult)
{
    const char *v = lookup(kv, model, scenario, key);

    if (!v)
        return 0;
    *out = strtoull(v, NULL, 0) * mult;
    return 1;
}

static int get_f64(const kv_t *kv, const char *model, const char *scenario, const char *key,
                   double *out, double mult)
{
    const char *v = lookup(kv, model, scenario, key);

    if (!v)
        return 0;
    *out = strtod(v, NULL) * mult;
    return 1;
}

static int is_number(const char *s)
{
    char *stop;
    size_t n = strlen(s);

    (void)strtoul(s, &stop, 0);
    if (stop == s + n)
        return 1;
    (void)strtod(s, &stop);
    return stop == s + n;
}

/* Tokenises like `std::istringstream >> std::string` in the C locale. */
static char *next_token(char **p)
{
    char *s = *p, *t;

    while (*s && isspace((unsigned char)*s))
        s++;
    if (!*s) {
        *p = s;
        return NULL;
    }
    t = s;
    while (*s && !isspace((unsigned char)*s))
        s++;
    if (*s)
        *s++ = '\0';
    *p = s;
    return t;
}

static int parse_file(FILE *f, const char *path, kv_t *kv, lg_msgs_t *msgs, cmn_errbuf_t *eb)
{
    char *line = NULL, *p, *tok, *key = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, errors = 0, rc = 0;

    while ((len = getline(&line, &cap, f)) >= 0) {
        int looking_for = 0; /* 0 key, 1 '=', 2 value */

        lineno++;
        p = line;
        while ((tok = next_token(&p))) {
            if (strcmp(tok, "#") == 0 && looking_for != 2)
                break;
            if (looking_for == 2) {
                if (is_number(tok)) {
                    rc = kv_set(kv, key, tok);
                    if (rc < 0)
                        goto out;
                    continue;
                }
                if (errors++ == 0)
                    cmn_errf(eb, CMN_ECONFIG,
                             "%s:%d: the value '%s' is not an integer or a double (a comment must "
                             "be on a line of its own)",
                             path, lineno, tok);
                lg_msgs_add(msgs, 1, "error_invalid_config",
                            "value needs to be integer or double, line=%d", lineno);
                break;
            }
            if (looking_for == 1 && strcmp(tok, "=") != 0) {
                if (errors++ == 0)
                    cmn_errf(eb, CMN_ECONFIG,
                             "%s:%d: expected 'key = value' with spaces around '=', got '%s' after "
                             "'%s'",
                             path, lineno, tok, key);
                lg_msgs_add(msgs, 1, "error_invalid_config", "expected 'key=value', line=%d",
                            lineno);
                break;
            }
            if (looking_for == 0) {
                free(key);
                key = strdup(tok);
                if (!key) {
                    rc = -ENOMEM;
                    goto out;
                }
            }
            looking_for++;
        }
    }
    if (ferror(f))
        rc = cmn_errf(eb, -EIO, "error reading %s", path);
    else if (errors)
        rc = CMN_ECONFIG;
out:
    free(key);
    free(line);
    return rc;
}

int lg_test_settings_from_config(lg_test_settings_t *s, const char *path, const char *model,
                                 const char *scenario, lg_conf_kind_t kind, lg_msgs_t *msgs,
                                 cmn_errbuf_t *eb)
{
    kv_t kv = {0};
    FILE *f;
    uint64_t val;
    int rc;

    if (kind == LG_CONF_USER && msgs) {
        if (msgs->user_confs > 0)
            lg_msgs_add(msgs, 1, "error_invalid_config",
                        "Multiple conf files are used. This is not valid for official submission.");
        msgs->user_confs++;
    }
    f = fopen(path, "r");
    if (!f) {
        rc = -errno;
        lg_msgs_add(msgs, 1, "error_invalid_config", "can't open file %s", path);
        return cmn_errf(eb, rc, "cannot open config file %s: %s", path, strerror(-rc));
    }
    rc = parse_file(f, path, &kv, msgs, eb);
    fclose(f);
    if (rc < 0)
        goto out;

    if (get_u64(&kv, model, scenario, "mode", &val, 1)) {
        if (val <= 3)
            s->mode = (lg_mode_t)val;
        else
            lg_msgs_add(msgs, 1, "error_invalid_config",
                        "Invalid value passed to Mode key in config.");
    }
    if (kind == LG_CONF_MLPERF) {
        get_u64(&kv, model, scenario, "qsl_rng_seed", &s->qsl_rng_seed, 1);
        get_u64(&kv, model, scenario, "sample_index_rng_seed", &s->sample_index_rng_seed, 1);
        get_u64(&kv, model, scenario, "schedule_rng_seed", &s->schedule_rng_seed, 1);
        get_f64(&kv, model, scenario, "accuracy_log_probability", &s->accuracy_log_probability,
                0.01);
        if (get_u64(&kv, model, scenario, "test05", &val, 1))
            s->test05 = val == 1;
        get_u64(&kv, model, scenario, "test05_qsl_rng_seed", &s->test05_qsl_rng_seed, 1);
        get_u64(&kv, model, scenario, "test05_sample_index_rng_seed",
                &s->test05_sample_index_rng_seed, 1);
        get_u64(&kv, model, scenario, "test05_schedule_rng_seed", &s->test05_schedule_rng_seed, 1);
    }

    if (get_u64(&kv, model, scenario, "use_token_latencies", &val, 1))
        s->use_token_latencies = val == 1;
    /* As officially, the token limits are read only when token latencies are on by now, which
     * may have been set by an earlier file. */
    if (s->use_token_latencies) {
        get_u64(&kv, model, "Server", "ttft_latency", &s->server_ttft_latency, 1000000);
        get_u64(&kv, model, "Server", "tpot_latency", &s->server_tpot_latency, 1000000);
    }
    if (get_u64(&kv, model, scenario, "infer_token_latencies", &val, 1))
        s->infer_token_latencies = val == 1;
    if (s->infer_token_latencies)
        get_u64(&kv, model, scenario, "token_latency_scaling_factor",
                &s->token_latency_scaling_factor, 1);

    get_f64(&kv, model, "SingleStream", "target_latency_percentile",
            &s->single_stream_target_latency_percentile, 0.01);
    get_f64(&kv, model, "MultiStream", "target_latency_percentile",
            &s->multi_stream_target_latency_percentile, 0.01);
    get_u64(&kv, model, "MultiStream", "samples_per_query", &s->multi_stream_samples_per_query, 1);
    get_f64(&kv, model, "Server", "target_latency_percentile", &s->server_target_latency_percentile,
            0.01);
    get_u64(&kv, model, "Server", "target_latency", &s->server_target_latency_ns, 1000000);

    if (get_u64(&kv, model, scenario, "performance_issue_unique", &val, 1))
        s->performance_issue_unique = val != 0;
    if (get_u64(&kv, model, scenario, "performance_issue_same", &val, 1))
        s->performance_issue_same = val != 0;
    get_u64(&kv, model, scenario, "performance_issue_same_index", &s->performance_issue_same_index,
            1);
    if (get_u64(&kv, model, scenario, "sample_concatenate_permutation", &val, 1))
        s->sample_concatenate_permutation = val == 1;
    if (get_u64(&kv, model, "Server", "coalesce_queries", &val, 1))
        s->server_coalesce_queries = val != 0;
    /* The official code stores int(val) into a uint64_t. */
    if (get_u64(&kv, model, "Server", "max_async_queries", &val, 1))
        s->server_max_async_queries = (uint64_t)(int64_t)(int)val;

    get_u64(&kv, model, scenario, "min_duration", &s->min_duration_ms, 1);
    get_u64(&kv, model, scenario, "max_duration", &s->max_duration_ms, 1);
    get_u64(&kv, model, scenario, "min_query_count", &s->min_query_count, 1);
    get_u64(&kv, model, scenario, "max_query_count", &s->max_query_count, 1);
    get_u64(&kv, model, scenario, "performance_sample_count_override",
            &s->performance_sample_count_override, 1);
    get_u64(&kv, model, scenario, "accuracy_sample_count_override",
            &s->accuracy_sample_count_override, 1);
    get_f64(&kv, model, "SingleStream", "target_latency", &s->single_stream_expected_latency_ns,
            1000000.0);
    get_f64(&kv, model, "MultiStream", "target_latency", &s->multi_stream_expected_latency_ns,
            1000000.0);
    get_f64(&kv, model, "Server", "target_qps", &s->server_target_qps, 1.0);
    get_f64(&kv, model, "Offline", "target_qps", &s->offline_expected_qps, 1.0);
    if (get_u64(&kv, model, scenario, "print_timestamps", &val, 1))
        s->print_timestamps = val != 0;
    get_u64(&kv, model, scenario, "accuracy_log_rng_seed", &s->accuracy_log_rng_seed, 1);
    get_u64(&kv, model, scenario, "accuracy_log_sampling_target", &s->accuracy_log_sampling_target,
            1);
out:
    kv_free(&kv);
    return rc;
}

/* ---- ranges (loadgen-node's own checks: values the scheduler cannot run with) -------------- */

/* A latency or duration beyond these is a mistake, and a larger one could wrap the ns arithmetic
 * (a day in ns is 8.64e13, far from INT64_MAX). A sample index has 31 bits. */
#define NS_MAX 8.64e13
#define MS_DAY 8.64e7
#define MS_WEEK 6.048e8
#define IDX_MAX 2147483647.0
#define U64_ALL 18446744073709551615.0

typedef enum { F_DOUBLE, F_U64, F_BOOL, F_INT } ftype_t;

/* A TestSettings field that --set can reach, by its official name, with the values it may take:
 * [lo, hi], or (lo, hi) on a side marked open. */
typedef struct {
    const char *name;
    ftype_t type;
    size_t off;
    double lo, hi;
    bool lo_open, hi_open;
    const char *unit;
    const char *conf; /* the conf key that also sets it, for the message */
} field_t;

#define FIELD(n, t, l, h, lopen, hopen, u, c)                                            \
    {                                                                                    \
        .name = #n, .type = t, .off = offsetof(lg_test_settings_t, n), .lo = l, .hi = h, \
        .lo_open = lopen, .hi_open = hopen, .unit = u, .conf = c                         \
    }
#define PCT(n, c) FIELD(n, F_DOUBLE, 0, 1, true, true, "", c " (in %)")
#define BOOLF(n, c) FIELD(n, F_BOOL, 0, 1, false, false, "", c)

static const field_t fields[] = {
    FIELD(single_stream_expected_latency_ns, F_DOUBLE, 1, NS_MAX, false, false, " ns",
          "SingleStream target_latency (in ms)"),
    PCT(single_stream_target_latency_percentile, "SingleStream target_latency_percentile"),
    FIELD(multi_stream_expected_latency_ns, F_DOUBLE, 1, NS_MAX, false, false, " ns",
          "MultiStream target_latency (in ms)"),
    PCT(multi_stream_target_latency_percentile, "MultiStream target_latency_percentile"),
    FIELD(multi_stream_samples_per_query, F_U64, 1, 1e6, false, false, "", "samples_per_query"),
    FIELD(server_target_qps, F_DOUBLE, 0, 1e9, true, false, "", "Server target_qps"),
    /* 0 in the official mlperf.conf for the models bound by ttft/tpot. */
    FIELD(server_target_latency_ns, F_U64, 0, NS_MAX, false, false, " ns",
          "Server target_latency (in ms)"),
    PCT(server_target_latency_percentile, "Server target_latency_percentile"),
    BOOLF(server_coalesce_queries, "coalesce_queries"),
    FIELD(server_find_peak_qps_decimals_of_precision, F_INT, 0, 10, false, false, "", NULL),
    FIELD(server_find_peak_qps_boundary_step_size, F_DOUBLE, 0, 1e9, true, false, "", NULL),
    FIELD(server_max_async_queries, F_U64, 0, 2147483647.0, false, false, "", "max_async_queries"),
    FIELD(offline_expected_qps, F_DOUBLE, 0, 1e9, true, false, "", "Offline target_qps"),
    BOOLF(sample_concatenate_permutation, "sample_concatenate_permutation"),
    FIELD(min_duration_ms, F_U64, 0, MS_WEEK, false, false, " ms", "min_duration"),
    FIELD(max_duration_ms, F_U64, 0, MS_WEEK, false, false, " ms", "max_duration"),
    FIELD(min_query_count, F_U64, 0, 1e9, false, false, "", "min_query_count"),
    FIELD(max_query_count, F_U64, 0, 1e12, false, false, "", "max_query_count"),
    FIELD(qsl_rng_seed, F_U64, 0, U64_ALL, false, false, "", "qsl_rng_seed"),
    FIELD(sample_index_rng_seed, F_U64, 0, U64_ALL, false, false, "", "sample_index_rng_seed"),
    FIELD(schedule_rng_seed, F_U64, 0, U64_ALL, false, false, "", "schedule_rng_seed"),
    FIELD(accuracy_log_rng_seed, F_U64, 0, U64_ALL, false, false, "", "accuracy_log_rng_seed"),
    FIELD(accuracy_log_probability, F_DOUBLE, 0, 1, false, false, "",
          "accuracy_log_probability (in %)"),
    FIELD(accuracy_log_sampling_target, F_U64, 0, 1e9, false, false, "",
          "accuracy_log_sampling_target"),
    BOOLF(print_timestamps, "print_timestamps"),
    BOOLF(performance_issue_unique, "performance_issue_unique"),
    BOOLF(performance_issue_same, "performance_issue_same"),
    FIELD(performance_issue_same_index, F_U64, 0, IDX_MAX, false, false, "",
          "performance_issue_same_index"),
    FIELD(performance_sample_count_override, F_U64, 0, IDX_MAX, false, false, "",
          "performance_sample_count_override"),
    FIELD(accuracy_sample_count_override, F_U64, 0, IDX_MAX, false, false, "",
          "accuracy_sample_count_override"),
    BOOLF(use_token_latencies, "use_token_latencies"),
    FIELD(server_ttft_latency, F_U64, 1, NS_MAX, false, false, " ns", "ttft_latency (in ms)"),
    FIELD(server_tpot_latency, F_U64, 1, NS_MAX, false, false, " ns", "tpot_latency (in ms)"),
    BOOLF(infer_token_latencies, "infer_token_latencies"),
    FIELD(token_latency_scaling_factor, F_U64, 0, 1e6, false, false, "",
          "token_latency_scaling_factor"),
};

#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/* A conf key with the values its line may hold, in the file's own units (ms, %). Integer keys
 * are read by the official reader with strtoull, double ones with strtod. */
typedef struct {
    const char *key;
    bool integer;
    double lo, hi;
    bool lo_open, hi_open;
    const char *unit;
} conf_range_t;

static const conf_range_t conf_ranges[] = {
    {"accuracy_log_probability", false, 0, 100, false, false, " %"},
    {"accuracy_log_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"accuracy_log_sampling_target", true, 0, 1e9, false, false, ""},
    {"accuracy_sample_count_override", true, 0, IDX_MAX, false, false, ""},
    {"coalesce_queries", true, 0, 1, false, false, ""},
    {"infer_token_latencies", true, 0, 1, false, false, ""},
    {"max_async_queries", true, 0, 2147483647.0, false, false, ""},
    {"max_duration", true, 0, MS_WEEK, false, false, " ms"},
    {"max_query_count", true, 0, 1e12, false, false, ""},
    {"min_duration", true, 0, MS_WEEK, false, false, " ms"},
    {"min_query_count", true, 0, 1e9, false, false, ""},
    {"mode", true, 0, 3, false, false, ""},
    {"performance_issue_same", true, 0, 1, false, false, ""},
    {"performance_issue_same_index", true, 0, IDX_MAX, false, false, ""},
    {"performance_issue_unique", true, 0, 1, false, false, ""},
    {"performance_sample_count_override", true, 0, IDX_MAX, false, false, ""},
    {"print_timestamps", true, 0, 1, false, false, ""},
    {"qsl_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"sample_concatenate_permutation", true, 0, 1, false, false, ""},
    {"sample_index_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"samples_per_query", true, 1, 1e6, false, false, ""},
    {"schedule_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"target_duration", true, 0, MS_WEEK, false, false, " ms"},
    /* 0 is Server's "no end-to-end bound" (mlperf.conf); SingleStream and MultiStream refuse it
     * in lg_test_settings_check, where the scenario is known. */
    {"target_latency", false, 0, MS_DAY, false, false, " ms"},
    {"target_latency_percentile", false, 0, 100, true, true, " %"},
    {"target_qps", false, 0, 1e9, true, false, ""},
    {"test05", true, 0, 1, false, false, ""},
    {"test05_qsl_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"test05_sample_index_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"test05_schedule_rng_seed", true, 0, U64_ALL, false, false, ""},
    {"token_latency_scaling_factor", true, 0, 1e6, false, false, ""},
    {"tpot_latency", true, 1, MS_DAY, false, false, " ms"},
    {"ttft_latency", true, 1, MS_DAY, false, false, " ms"},
    {"use_token_latencies", true, 0, 1, false, false, ""},
};

#define N_CONF_RANGES (sizeof(conf_ranges) / sizeof(conf_ranges[0]))

static bool in_range(double v, double lo, double hi, bool lo_open, bool hi_open)
{
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
}

/* "from 1 to 8.64e+13 ns", "greater than 0 and less than 1". */
static const char *range_text(char *buf, size_t n, double lo, double hi, bool lo_open, bool hi_open,
                              const char *unit)
{
    snprintf(buf, n, "%s %.17g %s %.17g%s", lo_open ? "greater than" : "from", lo,
             hi_open ? "and less than" : (lo_open ? "and at most" : "to"), hi, unit);
    return buf;
}

static const conf_range_t *conf_range(const char *key)
{
    size_t i;

    for (i = 0; i < N_CONF_RANGES; i++)
        if (strcmp(conf_ranges[i].key, key) == 0)
            return &conf_ranges[i];
    return NULL;
}

/* A conf line's value against its key's range. 0 or CMN_ECONFIG naming path:line, key, value. */
static int check_conf_value(const char *path, int lineno, const char *key, const char *value,
                            cmn_errbuf_t *eb)
{
    const conf_range_t *r = conf_range(key);
    char rt[128];
    uint64_t u;
    double d;
    bool ok;

    if (!r)
        return 0;
    if (r->integer && cmn_parse_u64(value, &u) == 0)
        ok = in_range((double)u, r->lo, r->hi, r->lo_open, r->hi_open) &&
             (r->hi >= U64_ALL || u <= (uint64_t)r->hi);
    else
        /* An integer key written as a double ("600000.0") is read by strtoull up to the point;
         * 2^64 and more do not fit any integer key. */
        ok = cmn_parse_double(value, &d) == 0 && d < 18446744073709551616.0 &&
             in_range(d, r->lo, r->hi, r->lo_open, r->hi_open);
    if (!ok)
        return cmn_errf(eb, CMN_ECONFIG, "%s:%d: %s = %s: not a number %s", path, lineno, key,
                        value,
                        range_text(rt, sizeof(rt), r->lo, r->hi, r->lo_open, r->hi_open, r->unit));
    return 0;
}

static const field_t *find_field(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < N_FIELDS; i++)
        if (strlen(fields[i].name) == len && strncmp(fields[i].name, name, len) == 0)
            return &fields[i];
    return NULL;
}

static double field_value(const lg_test_settings_t *s, const field_t *f)
{
    const char *p = (const char *)s + f->off;
    double d;
    uint64_t u;
    int i;
    bool b;

    switch (f->type) {
    case F_DOUBLE:
        memcpy(&d, p, sizeof(d));
        return d;
    case F_U64:
        memcpy(&u, p, sizeof(u));
        return (double)u;
    case F_INT:
        memcpy(&i, p, sizeof(i));
        return i;
    case F_BOOL:
        memcpy(&b, p, sizeof(b));
        return b;
    }
    return 0;
}

static int field_error(const field_t *f, const char *value, cmn_errbuf_t *eb)
{
    char rt[128];

    return cmn_errf(eb, CMN_ECONFIG, "%s = %s: not %s %s (--set %s%s%s)", f->name, value,
                    f->type == F_DOUBLE ? "a number" : "an integer",
                    range_text(rt, sizeof(rt), f->lo, f->hi, f->lo_open, f->hi_open, f->unit),
                    f->name, f->conf ? ", or the conf key " : "", f->conf ? f->conf : "");
}

int lg_test_settings_set(lg_test_settings_t *s, const char *kv, cmn_errbuf_t *eb)
{
    const char *eq = strchr(kv, '='), *v;
    const field_t *f;
    char *p;
    uint64_t u;
    double d;
    int b;

    if (!eq)
        return cmn_errf(eb, CMN_ECONFIG, "--set %s: expected FIELD=VALUE", kv);
    f = find_field(kv, (size_t)(eq - kv));
    if (!f)
        return cmn_errf(eb, CMN_ECONFIG, "--set %.*s: no TestSettings field of that name",
                        (int)(eq - kv), kv);
    v = eq + 1;
    p = (char *)s + f->off;
    switch (f->type) {
    case F_DOUBLE:
        /* The range is lg_test_settings_check's, on the values of every source. */
        if (cmn_parse_double(v, &d) < 0)
            return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not a number", f->name, v);
        memcpy(p, &d, sizeof(d));
        return 0;
    case F_U64:
    case F_INT:
        /* A sign, junk or an overflow here; an int out of range before it is truncated. */
        if (cmn_parse_u64(v, &u) < 0 || (f->type == F_INT && u > (uint64_t)f->hi))
            return field_error(f, v, eb);
        if (f->type == F_INT) {
            b = (int)u;
            memcpy(p, &b, sizeof(b));
        } else {
            memcpy(p, &u, sizeof(u));
        }
        return 0;
    case F_BOOL: {
        bool bv;

        if (cmn_parse_bool(v, &b) < 0)
            return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not a boolean (0/1)", f->name, v);
        bv = b != 0;
        memcpy(p, &bv, sizeof(bv));
        return 0;
    }
    }
    return 0;
}

void lg_settings_keys_print(FILE *out)
{
    size_t i;

    for (i = 0; i < N_FIELDS; i++)
        fprintf(out, "set %s %s\n", fields[i].name,
                fields[i].type == F_DOUBLE ? "double"
                : fields[i].type == F_BOOL ? "bool"
                                           : "int");
    for (i = 0; i < N_CONF_RANGES; i++)
        fprintf(out, "conf %s %s\n", conf_ranges[i].key, conf_ranges[i].integer ? "int" : "double");
}

/* ---- conf lint (loadgen-node's own checks, beyond the official reader) ------------------- */

/* Every key the official reader looks up (and target_duration, which mlperf.conf carries). */
static const char *const conf_keys[] = {
    "accuracy_log_probability",
    "accuracy_log_rng_seed",
    "accuracy_log_sampling_target",
    "accuracy_sample_count_override",
    "coalesce_queries",
    "infer_token_latencies",
    "max_async_queries",
    "max_duration",
    "max_query_count",
    "min_duration",
    "min_query_count",
    "mode",
    "performance_issue_same",
    "performance_issue_same_index",
    "performance_issue_unique",
    "performance_sample_count_override",
    "print_timestamps",
    "qsl_rng_seed",
    "sample_concatenate_permutation",
    "sample_index_rng_seed",
    "samples_per_query",
    "schedule_rng_seed",
    "target_duration",
    "target_latency",
    "target_latency_percentile",
    "target_qps",
    "test05",
    "test05_qsl_rng_seed",
    "test05_sample_index_rng_seed",
    "test05_schedule_rng_seed",
    "token_latency_scaling_factor",
    "tpot_latency",
    "ttft_latency",
    "use_token_latencies",
};

static int known_key(const char *k)
{
    size_t i;

    for (i = 0; i < sizeof(conf_keys) / sizeof(conf_keys[0]); i++)
        if (strcmp(conf_keys[i], k) == 0)
            return 1;
    return 0;
}

/* Checks one "model.scenario.key = value" line of a user.conf. 0 or CMN_ECONFIG. */
static int lint_line(const char *path, int lineno, char *key, const char *value, cmn_errbuf_t *eb)
{
    char *d1 = strchr(key, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    int sc, known = 0;

    if (!d1 || !d2 || strchr(d2 + 1, '.'))
        return cmn_errf(eb, CMN_ECONFIG, "%s:%d: '%s' is not model.scenario.key", path, lineno,
                        key);
    *d1 = *d2 = '\0';
    /* The official lookup is case-sensitive: "server" would never match. */
    for (sc = LG_SINGLE_STREAM; sc <= LG_OFFLINE; sc++)
        known |= strcmp(d1 + 1, lg_scenario_name((lg_scenario_t)sc)) == 0;
    if (strcmp(d1 + 1, "*") != 0 && !known)
        return cmn_errf(eb, CMN_ECONFIG,
                        "%s:%d: '%s' is not a scenario (SingleStream, MultiStream, Server, "
                        "Offline or *)",
                        path, lineno, d1 + 1);
    if (!known_key(d2 + 1))
        return cmn_errf(eb, CMN_ECONFIG,
                        "%s:%d: '%s' is not a key LoadGen reads (misspelt? the line would be "
                        "ignored)",
                        path, lineno, d2 + 1);
    if (value && value[0] == '-')
        return cmn_errf(eb, CMN_ECONFIG,
                        "%s:%d: %s = %s: a negative value (durations, counts, latencies and "
                        "rates are at least 0)",
                        path, lineno, d2 + 1, value);
    return check_conf_value(path, lineno, d2 + 1, value, eb);
}

int lg_conf_lint(const char *path, const char *model, lg_conf_kind_t kind, lg_msgs_t *msgs,
                 cmn_errbuf_t *eb)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, *p, models[256] = "";
    size_t cap = 0, mlen = 0;
    int lineno = 0, rc = 0, for_model = 0, for_others = 0;

    if (!f)
        return cmn_errf(eb, -errno, "cannot open config file %s: %s", path, strerror(errno));
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        char *key, *eq, *val, *dot;

        lineno++;
        p = line;
        key = next_token(&p);
        if (!key || key[0] == '#')
            continue;
        eq = next_token(&p);
        val = eq && strcmp(eq, "=") == 0 ? next_token(&p) : NULL;
        dot = strchr(key, '.');
        if (dot && (size_t)(dot - key) == strlen(model) && strncmp(key, model, strlen(model)) == 0)
            for_model = 1;
        else if (dot && !(dot == key + 1 && key[0] == '*')) {
            for_others = 1;
            if (mlen + (size_t)(dot - key) + 3 < sizeof(models) && !strstr(models, key)) {
                mlen += (size_t)snprintf(models + mlen, sizeof(models) - mlen, "%s%.*s",
                                         mlen ? ", " : "", (int)(dot - key), key);
            }
        }
        if (kind != LG_CONF_USER) {
            /* mlperf.conf is read unchanged, but a value out of its key's range is refused. */
            const char *k = strrchr(key, '.');

            if (val && k)
                rc = check_conf_value(path, lineno, k + 1, val, eb);
            continue;
        }
        if (!val)
            rc = cmn_errf(eb, CMN_ECONFIG,
                          "%s:%d: '%s' has no ' = value' (spaces around '=' are required; "
                          "the official reader ignores the line)",
                          path, lineno, key);
        else
            rc = lint_line(path, lineno, key, val, eb);
    }
    free(line);
    fclose(f);
    if (rc == 0 && !for_model && (kind == LG_CONF_MLPERF || for_others))
        lg_msgs_add(msgs, 0, "warning_generic_message",
                    "--model %s matches no line of %s%s%s%s; only its '*' lines apply", model, path,
                    for_others ? " (its lines are for " : "", for_others ? models : "",
                    for_others ? ")" : "");
    return rc;
}

/* The Server rate the run will use, with the messages it had before the ranges. */
static int check_server_qps(const lg_test_settings_t *s, cmn_errbuf_t *eb)
{
    double q = s->server_target_qps, n = s->min_query_count ? (double)s->min_query_count : 1;

    if (s->scenario != LG_SERVER || s->mode == LG_MODE_ACCURACY_ONLY)
        return 0;
    if (!(q > 0) || !isfinite(q))
        return cmn_errf(eb, CMN_ECONFIG, "server_target_qps = %g: must be a positive number", q);
    if (n / q > LG_MAX_EXPECTED_RUN_S)
        return cmn_errf(eb, CMN_ECONFIG,
                        "server_target_qps = %g: issuing min_query_count %.0f queries would take "
                        "%.3g s, more than the limit of %d s (7 days); raise the QPS",
                        q, n, n / q, LG_MAX_EXPECTED_RUN_S);
    return 0;
}

/* SingleStream and MultiStream generate queries for twice min_duration at one per expected
 * latency (the official loop, run to its end after the series): a latency of 1 ns over a week
 * would be 1.2e15 iterations. */
#define LG_MAX_GENERATED 1e9

static int check_generated(const lg_test_settings_t *s, cmn_errbuf_t *eb)
{
    int ss = s->scenario == LG_SINGLE_STREAM;
    double lat = ss ? s->single_stream_expected_latency_ns : s->multi_stream_expected_latency_ns;
    double n = 2.0 * (double)s->min_duration_ms * 1e6 / lat;

    /* Neither a duration nor a count: the performance run would issue nothing, INVALID. */
    if (s->mode != LG_MODE_ACCURACY_ONLY && !s->performance_issue_unique &&
        s->min_duration_ms == 0 && s->min_query_count == 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "min_duration_ms = 0 and min_query_count = 0: the performance run would "
                        "issue no query; give one of them (--set, or the conf keys min_duration "
                        "and min_query_count)");

    if (s->scenario != LG_SINGLE_STREAM && s->scenario != LG_MULTI_STREAM)
        return 0;
    if (n > LG_MAX_GENERATED)
        return cmn_errf(eb, CMN_ECONFIG,
                        "%s_stream_expected_latency_ns = %g with min_duration_ms = %" PRIu64
                        ": %.3g queries to generate, more than the limit of %.0f; raise the "
                        "expected latency (target_latency) or lower the duration",
                        ss ? "single" : "multi", lat, s->min_duration_ms, n, LG_MAX_GENERATED);
    return 0;
}

int lg_test_settings_check(const lg_test_settings_t *s, cmn_errbuf_t *eb)
{
    size_t i;
    int rc = check_server_qps(s, eb);

    for (i = 0; rc == 0 && i < N_FIELDS; i++) {
        const field_t *f = &fields[i];
        double v = field_value(s, f);
        char text[40];

        /* NaN fails every comparison, so it is out of every range. */
        if (!in_range(v, f->lo, f->hi, f->lo_open, f->hi_open)) {
            snprintf(text, sizeof(text), "%.17g", v);
            rc = field_error(f, text, eb);
        }
    }
    if (rc == 0)
        rc = check_generated(s, eb);
    return rc;
}

/* ---- effective settings -------------------------------------------------------------------- */

void lg_effective_settings(const lg_test_settings_t *r, uint64_t qsl_performance_count,
                           uint64_t qsl_total_count, lg_effective_settings_t *e, lg_msgs_t *msgs)
{
    memset(e, 0, sizeof(*e));
    e->requested = *r;
    e->scenario = r->scenario;
    e->mode = r->mode;
    e->samples_per_query = 1;
    e->target_qps = 1;
    e->target_duration_ms = r->min_duration_ms;
    e->min_duration_ms = r->min_duration_ms;
    e->max_duration_ms = r->max_duration_ms;
    e->min_query_count = r->min_query_count;
    e->max_query_count = r->max_query_count;
    e->qsl_rng_seed = r->qsl_rng_seed;
    e->sample_index_rng_seed = r->sample_index_rng_seed;
    e->schedule_rng_seed = r->schedule_rng_seed;
    e->accuracy_log_rng_seed = r->accuracy_log_rng_seed;
    e->accuracy_log_probability = r->accuracy_log_probability;
    e->accuracy_log_sampling_target = r->accuracy_log_sampling_target;
    e->print_timestamps = r->print_timestamps;
    e->performance_issue_unique = r->performance_issue_unique;
    e->performance_issue_same = r->performance_issue_same;
    e->performance_issue_same_index = r->performance_issue_same_index;
    e->use_token_latencies = r->use_token_latencies;
    e->server_ttft_latency = (int64_t)r->server_ttft_latency;
    e->server_tpot_latency = (int64_t)r->server_tpot_latency;
    e->infer_token_latencies = r->infer_token_latencies;
    e->token_latency_scaling_factor = (int64_t)r->token_latency_scaling_factor;

    switch (r->scenario) {
    case LG_SINGLE_STREAM:
        e->target_qps = 1e9 / r->single_stream_expected_latency_ns;
        e->max_async_queries = 1;
        e->target_latency_percentile = r->single_stream_target_latency_percentile;
        break;
    case LG_MULTI_STREAM:
        e->target_qps = 1e9 / r->multi_stream_expected_latency_ns;
        e->max_async_queries = 1;
        e->target_latency_percentile = r->multi_stream_target_latency_percentile;
        break;
    case LG_SERVER:
        if (r->server_target_qps >= 0.0)
            e->target_qps = r->server_target_qps;
        else
            lg_msgs_add(msgs, 1, "error_invalid_test_settings",
                        "Invalid value for server_target_qps requested. requested: %g using: %g",
                        r->server_target_qps, e->target_qps);
        e->target_latency_ns = (int64_t)r->server_target_latency_ns;
        e->target_latency_percentile = r->server_target_latency_percentile;
        e->max_async_queries = r->server_max_async_queries;
        break;
    case LG_OFFLINE:
        /* Unused in Offline; the official code sets it so that it is not garbage. */
        e->target_latency_percentile = 0.99;
        if (r->offline_expected_qps >= 0.0)
            e->target_qps = r->offline_expected_qps;
        else
            lg_msgs_add(msgs, 1, "error_invalid_test_settings",
                        "Invalid value for offline_expected_qps requested. requested: %g using: %g",
                        r->offline_expected_qps, e->target_qps);
        e->max_async_queries = 1;
        break;
    }

    e->performance_sample_count = r->performance_sample_count_override == 0
                                      ? qsl_performance_count
                                      : r->performance_sample_count_override;
    e->accuracy_sample_count = r->accuracy_sample_count_override == 0
                                   ? qsl_total_count
                                   : r->accuracy_sample_count_override;
    e->sample_concatenate_permutation = r->sample_concatenate_permutation;
    if (r->scenario == LG_MULTI_STREAM)
        e->samples_per_query = r->multi_stream_samples_per_query;

    if (r->scenario == LG_OFFLINE) {
        /* 10% slack so the SUT takes longer than the minimum duration. */
        uint64_t target_sample_count =
            (uint64_t)(1.1 * ((double)e->target_duration_ms / 1000.0) * e->target_qps);
        e->samples_per_query =
            r->performance_issue_unique
                ? e->performance_sample_count
                : (e->min_query_count > target_sample_count ? e->min_query_count
                                                            : target_sample_count);
        e->min_query_count = 1;
        e->target_duration_ms = 0;
    }

    /* Equal issue in SingleStream: a multiple of the QSL's own performance count (not the
     * override), adding a whole set even when the count already is a multiple. */
    if (e->sample_concatenate_permutation && r->scenario == LG_SINGLE_STREAM &&
        qsl_performance_count > 0) {
        uint64_t expected_queries =
            (uint64_t)(2.0 * ((double)e->target_duration_ms / 1000.0) * e->target_qps);

        if (expected_queries > e->min_query_count)
            e->min_query_count = expected_queries;
        e->min_query_count += qsl_performance_count - (e->min_query_count % qsl_performance_count);
    }

    e->min_sample_count = e->min_query_count * e->samples_per_query;

    if (r->performance_issue_same && r->performance_issue_same_index >= e->performance_sample_count)
        lg_msgs_add(msgs, 1, "error_invalid_test_settings",
                    "Sample Idx to be repeated in performance_issue_same mode cannot be greater "
                    "than loaded performance_sample_count. performance_issue_same_index: %llu "
                    "performance_sample_count: %llu",
                    (unsigned long long)r->performance_issue_same_index,
                    (unsigned long long)e->performance_sample_count);
    if (r->performance_issue_unique && r->performance_issue_same)
        lg_msgs_add(msgs, 1, "error_invalid_test_settings",
                    "Performance_issue_unique and performance_issue_same, both cannot be true at "
                    "the same time. performance_issue_unique: 1 performance_issue_same: 1");
}
