#include "lg/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
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
    return 0;
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
        if (kind != LG_CONF_USER)
            continue;
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

int lg_test_settings_check(const lg_test_settings_t *s, cmn_errbuf_t *eb)
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
