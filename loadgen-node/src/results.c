#include "results.h"

#include "early.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void lg__perf_free(lg__perf_t *pr)
{
    free(pr->lat);
    free(pr->qlat);
    free(pr->ttft);
    free(pr->tpot);
    free(pr->ntok);
    memset(pr, 0, sizeof(*pr));
}

/* ---- sorting ------------------------------------------------------------------------------- */

static void insertion_sort(uint64_t *v, size_t n)
{
    size_t i, j;

    for (i = 1; i < n; i++) {
        uint64_t x = v[i];

        for (j = i; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* American flag sort on the byte at |shift|, then each bucket on the next byte. */
static void radix_sort(uint64_t *v, size_t n, int shift)
{
    size_t count[256] = {0}, head[256], tail[256], i, b;

    if (n < 64) {
        insertion_sort(v, n);
        return;
    }
    for (i = 0; i < n; i++)
        count[(v[i] >> shift) & 0xff]++;
    head[0] = 0;
    for (b = 0; b < 256; b++) {
        if (b)
            head[b] = head[b - 1] + count[b - 1];
        tail[b] = head[b] + count[b];
    }
    for (b = 0; b < 256; b++) {
        while (head[b] < tail[b]) {
            uint64_t x = v[head[b]];
            size_t d = (x >> shift) & 0xff;

            if (d == b) {
                head[b]++;
                continue;
            }
            /* Cycle x to its bucket until an element of bucket b comes back. */
            while (d != b) {
                uint64_t y = v[head[d]];

                v[head[d]++] = x;
                x = y;
                d = (x >> shift) & 0xff;
            }
            v[head[b]++] = x;
        }
    }
    if (shift == 0)
        return;
    for (b = 0, i = 0; b < 256; i += count[b], b++)
        if (count[b] > 1)
            radix_sort(v + i, count[b], shift - 8);
}

void lg__sort_i64(int64_t *v, size_t n)
{
    uint64_t *u = (uint64_t *)v, diff = 0;
    size_t i;
    int shift = 0;

    /* Order-preserving map of signed to unsigned: flip the sign bit. */
    for (i = 0; i < n; i++)
        u[i] ^= UINT64_C(1) << 63;
    for (i = 1; i < n; i++)
        diff |= u[i] ^ u[0];
    /* Skip the leading bytes every value shares. */
    while (shift < 56 && (diff >> (shift + 8)) != 0)
        shift += 8;
    if (diff)
        radix_sort(u, n, shift);
    for (i = 0; i < n; i++)
        u[i] ^= UINT64_C(1) << 63;
}

/* ---- PerformanceSummary -------------------------------------------------------------------- */

static const double pct_list[6] = {.50, .90, .95, .97, .99, .999};

typedef struct {
    const lg_effective_settings_t *s;
    lg__perf_t *pr;
    size_t sample_count, query_count;
    uint64_t overlatency_query_count;
    int64_t lat_min, lat_max, lat_mean, q_min, q_max, q_mean;
    int64_t target_lat, target_qlat, pct_lat[6], pct_qlat[6];
    int64_t es_ss, es_ms;
    uint64_t token_count;
    int64_t ft_min, ft_max, ft_mean, tpot_min, tpot_max, tpot_mean;
    int64_t ft_target, ft_pct[6], tpot_target, tpot_pct[6];
} summary_t;

static size_t pidx(size_t n, double p)
{
    size_t i = (size_t)((double)n * p);

    return i < n ? i : n - 1;
}

static void process_tokens(summary_t *m)
{
    lg__perf_t *pr = m->pr;
    int64_t acc = 0;
    size_t i, n = m->sample_count;
    double p = m->s->target_latency_percentile;

    m->token_count = 0;
    for (i = 0; i < pr->n; i++)
        m->token_count += pr->ntok[i] > 0 ? (uint64_t)pr->ntok[i] : 0u;
    if (n == 0)
        return;
    for (i = 0; i < n; i++)
        acc += pr->ttft[i];
    m->ft_mean = acc / (int64_t)n;
    acc = 0;
    for (i = 0; i < n; i++)
        acc += pr->tpot[i];
    m->tpot_mean = acc / (int64_t)n;
    lg__sort_i64(pr->ttft, n);
    lg__sort_i64(pr->tpot, n);
    m->ft_target = pr->ttft[pidx(n, p)];
    m->ft_min = pr->ttft[0];
    m->ft_max = pr->ttft[n - 1];
    m->tpot_target = pr->tpot[pidx(n, p)];
    m->tpot_min = pr->tpot[0];
    m->tpot_max = pr->tpot[n - 1];
    for (i = 0; i < 6; i++) {
        m->ft_pct[i] = pr->ttft[pidx(n, pct_list[i])];
        m->tpot_pct[i] = pr->tpot[pidx(n, pct_list[i])];
    }
}

/* ProcessLatencies. */
static void process(summary_t *m, const lg_effective_settings_t *s, lg__perf_t *pr)
{
    int64_t acc = 0;
    size_t i, n = pr->n;

    memset(m, 0, sizeof(*m));
    m->s = s;
    m->pr = pr;
    if (n == 0)
        return;
    m->sample_count = n;
    for (i = 0; i < n; i++)
        acc += pr->lat[i];
    m->lat_mean = acc / (int64_t)n;
    if (!pr->processed)
        lg__sort_i64(pr->lat, n);
    m->target_lat = pr->lat[pidx(n, s->target_latency_percentile)];
    m->lat_min = pr->lat[0];
    m->lat_max = pr->lat[n - 1];
    for (i = 0; i < 6; i++)
        m->pct_lat[i] = pr->lat[pidx(n, pct_list[i])];
    m->query_count = (size_t)pr->queries_issued;
    if (s->scenario == LG_SERVER) {
        for (i = n; i > 0 && pr->lat[i - 1] > s->target_latency_ns; i--) {
        }
        m->overlatency_query_count = n - i;
    }
    if (s->use_token_latencies && pr->ttft)
        process_tokens(m);
    if (s->scenario == LG_MULTI_STREAM && pr->nq > 0) {
        size_t nq = pr->nq;

        acc = 0;
        if (!pr->processed)
            lg__sort_i64(pr->qlat, nq);
        for (i = 0; i < nq; i++)
            acc += pr->qlat[i];
        m->q_mean = acc / (int64_t)nq;
        m->q_min = pr->qlat[0];
        m->q_max = pr->qlat[nq - 1];
        m->target_qlat = pr->qlat[pidx(nq, s->target_latency_percentile)];
        for (i = 0; i < 6; i++)
            m->pct_qlat[i] = pr->qlat[pidx(nq, pct_list[i])];
    }
    pr->processed = 1;
}

static void fixed(char *buf, size_t len, double v, int prec)
{
    lg__fmt_fixed(buf, len, v, prec);
}

/* arr[i], or 0 where the official code would read out of bounds (samples that never completed). */
static int64_t at(const int64_t *arr, size_t len, int64_t i)
{
    return arr && i >= 0 && (size_t)i < len ? arr[i] : 0;
}

/* PerformanceSummary::EarlyStopping with a fresh finder, on the sorted |lat| (sample latencies,
 * or a token array) and the sorted query latencies |qlat| (MultiStream). */
static int early_stopping(summary_t *m, char *rec, size_t len, int64_t queries_issued,
                          const int64_t *lat, const int64_t *qlat, int64_t target_latency)
{
    const lg_effective_settings_t *s = m->s;
    lg__es_finder_t f;
    const double confidence = 0.99, tolerance = 0.0;
    double p = s->target_latency_percentile;
    char p1[32];
    int ok = 1;
    int64_t t, h_min, h, i;

    rec[0] = '\0';
    lg__es_init(&f);
    switch (s->scenario) {
    case LG_SINGLE_STREAM:
    case LG_MULTI_STREAM: {
        const int64_t *arr = s->scenario == LG_SINGLE_STREAM ? lat : qlat;
        size_t alen = s->scenario == LG_SINGLE_STREAM ? m->sample_count : m->pr->nq;
        int64_t estimate;
        size_t used;

        fixed(p1, sizeof(p1), p * 100, 1);
        t = 1;
        h_min = lg__es_min_passing(&f, 1, p, tolerance, confidence);
        if (queries_issued < h_min + 1) {
            snprintf(rec, len,
                     " * Only processed %" PRId64 " queries.\n * Need to process at least %" PRId64
                     " queries for early stopping.",
                     queries_issued, h_min + 1);
            ok = 0;
            break;
        }
        for (i = 2; i < queries_issued + 1; ++i) {
            h = lg__es_min_passing(&f, i, p, tolerance, confidence);
            if (queries_issued < h + i) {
                t = i - 1;
                break;
            }
        }
        estimate = at(arr, alen, queries_issued - t);
        used = (size_t)snprintf(rec, len,
                                " * Processed at least %" PRId64 " queries (%" PRId64
                                ").\n * Would discard %" PRId64
                                " highest latency queries.\n * Early stopping %sth percentile "
                                "estimate: %" PRId64,
                                h_min + 1, queries_issued, t - 1, p1, estimate);
        if (s->scenario == LG_MULTI_STREAM) {
            m->es_ms = estimate;
            break;
        }
        m->es_ss = estimate;
        /* A 99th percentile estimate, used to infer MultiStream from SingleStream. */
        t = 1;
        h_min = lg__es_min_passing(&f, 1, 0.99, tolerance, confidence);
        if (used >= len)
            break;
        if (queries_issued < h_min + 1) {
            snprintf(rec + used, len - used,
                     "\n * Not enough queries processed for 99.0th percentile\n early stopping "
                     "estimate (would need to process at\n least %" PRId64 " total queries).",
                     h_min + 1);
        } else {
            for (i = 2; i < queries_issued + 1; ++i) {
                h = lg__es_min_passing(&f, i, 0.99, tolerance, confidence);
                if (queries_issued < h + i) {
                    t = i - 1;
                    break;
                }
            }
            estimate = at(arr, alen, queries_issued - t);
            snprintf(rec + used, len - used,
                     "\n * Early stopping 99.0th percentile estimate: %" PRId64, estimate);
            m->es_ms = estimate;
        }
        break;
    }
    case LG_SERVER: {
        int64_t over = 0;
        size_t k;

        for (k = 0; k < m->sample_count; k++)
            over += lat[k] > target_latency ? 1 : 0;
        t = over;
        h = lg__es_min_passing(&f, t, p, tolerance, confidence);
        if (queries_issued >= h + t) {
            snprintf(rec, len, " * Run successful.");
        } else {
            snprintf(rec, len,
                     " * Run unsuccessful.\n * Processed %" PRId64
                     " queries.\n * Would need to run at least %" PRId64
                     " more queries,\n with the run being successful if every additional\n query "
                     "were under latency.",
                     queries_issued, h + t - queries_issued);
            ok = 0;
        }
        break;
    }
    case LG_OFFLINE:
        break;
    }
    lg__es_free(&f);
    return ok;
}

static int min_duration_met(const summary_t *m, const char **rec)
{
    const lg_effective_settings_t *s = m->s;
    double min_duration = (double)s->min_duration_ms / 1000.0;
    int met = 0;

    switch (s->scenario) {
    case LG_OFFLINE:
        met = m->pr->max_latency >= min_duration;
        *rec = "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.";
        break;
    case LG_SERVER:
        met = m->pr->final_query_scheduled_time >= min_duration;
        *rec = "Increase the target QPS so the loadgen pre-generates more queries.";
        break;
    default:
        met = m->pr->final_query_issued_time >= min_duration;
        *rec = "Decrease the expected latency so the loadgen pre-generates more queries.";
        break;
    }
    return met;
}

static int perf_constraints(const summary_t *m, char *rec, size_t len)
{
    const lg_effective_settings_t *s = m->s;
    int met = 1;

    rec[0] = '\0';
    if (s->scenario != LG_SERVER)
        return 1;
    if (!s->use_token_latencies) {
        if (m->target_lat > s->target_latency_ns) {
            snprintf(rec, len, "Reduce target QPS to improve latency.");
            met = 0;
        }
        return met;
    }
    if (m->ft_target > s->server_ttft_latency) {
        snprintf(rec, len, "TTFT constrain not met: Reduce target QPS to improve latency.");
        met = 0;
    }
    if (m->tpot_target > s->server_tpot_latency) {
        size_t used = strlen(rec);

        snprintf(rec + used, len - used, "%s",
                 used ? "\n * TPOT constrain not met: Reduce target QPS to improve latency."
                      : "TPOT constrain not met: Reduce target QPS to improve latency.");
        met = 0;
    }
    return met;
}

int lg__perf_constraints_met(const lg_effective_settings_t *s, lg__perf_t *pr, char *rec,
                             size_t len)
{
    summary_t m;

    process(&m, s, pr);
    return perf_constraints(&m, rec, len);
}

void lg__settings_summary(const lg_effective_settings_t *s, FILE *f)
{
    char g[64];

    fprintf(f, "samples_per_query : %" PRIu64 "\n", s->samples_per_query);
    lg__fmt_g(g, sizeof(g), s->target_qps);
    fprintf(f, "target_qps : %s\n", g);
    if (!s->use_token_latencies) {
        fprintf(f, "target_latency (ns): %" PRId64 "\n", s->target_latency_ns);
    } else {
        fprintf(f, "ttft_latency (ns): %" PRId64 "\n", s->server_ttft_latency);
        fprintf(f, "tpot_latency (ns): %" PRId64 "\n", s->server_tpot_latency);
    }
    fprintf(f, "max_async_queries : %" PRIu64 "\n", s->max_async_queries);
    fprintf(f, "min_duration (ms): %" PRIu64 "\n", s->min_duration_ms);
    fprintf(f, "max_duration (ms): %" PRIu64 "\n", s->max_duration_ms);
    fprintf(f, "min_query_count : %" PRIu64 "\n", s->min_query_count);
    fprintf(f, "max_query_count : %" PRIu64 "\n", s->max_query_count);
    fprintf(f, "qsl_rng_seed : %" PRIu64 "\n", s->qsl_rng_seed);
    fprintf(f, "sample_index_rng_seed : %" PRIu64 "\n", s->sample_index_rng_seed);
    fprintf(f, "schedule_rng_seed : %" PRIu64 "\n", s->schedule_rng_seed);
    fprintf(f, "accuracy_log_rng_seed : %" PRIu64 "\n", s->accuracy_log_rng_seed);
    lg__fmt_g(g, sizeof(g), s->accuracy_log_probability);
    fprintf(f, "accuracy_log_probability : %s\n", g);
    fprintf(f, "accuracy_log_sampling_target : %" PRIu64 "\n", s->accuracy_log_sampling_target);
    fprintf(f, "print_timestamps : %d\n", s->print_timestamps ? 1 : 0);
    fprintf(f, "performance_issue_unique : %d\n", s->performance_issue_unique ? 1 : 0);
    fprintf(f, "performance_issue_same : %d\n", s->performance_issue_same ? 1 : 0);
    fprintf(f, "performance_issue_same_index : %" PRIu64 "\n", s->performance_issue_same_index);
    fprintf(f, "performance_sample_count : %" PRIu64 "\n", s->performance_sample_count);
    fprintf(f, "accuracy_sample_count : %" PRIu64 "\n", s->accuracy_sample_count);
    if (s->sample_concatenate_permutation)
        fputs("WARNING: sample_concatenate_permutation was set to true. \n"
              "Generated samples per query might be different as the one in the setting.\n"
              "Check the generated_samples_per_query line in the detailed log for the real\n"
              "samples_per_query value\n",
              f);
}

/* DoubleToString(p * 100) with its default precision 2, e.g. "99.90". */
static void pct_name(char *buf, size_t len, double p)
{
    fixed(buf, len, p * 100, 2);
}

/* The six percentile lines of a summary block, e.g. "99.90 percentile latency (ns)   : 123". */
static void print_percentiles(FILE *f, const char *label, const int64_t v[6])
{
    char p[32];
    int i;

    for (i = 0; i < 6; i++) {
        pct_name(p, sizeof(p), pct_list[i]);
        fprintf(f, "%s percentile %s: %" PRId64 "\n", p, label, v[i]);
    }
}

/* The six percentile keys of the detail log, e.g. result_99.90_percentile_latency_ns. */
static void log_percentiles(lg__dlog_t *d, const char *prefix, const char *suffix,
                            const int64_t v[6])
{
    char p[32], key[128];
    int i;

    for (i = 0; i < 6; i++) {
        pct_name(p, sizeof(p), pct_list[i]);
        snprintf(key, sizeof(key), "%s%s%s", prefix, p, suffix);
        LG_DI64(d, key, v[i]);
    }
}

static void replace_newlines(char *s)
{
    for (; *s; s++)
        if (*s == '\n')
            *s = ' ';
}

static double div0(double a, double b)
{
    return a / b;
}

static void write_summary(summary_t *m, const char *sut_name, FILE *f, int valid, int perf_met,
                          int dur_met, const char *dur_rec, int q_met, int es_met,
                          const char *perf_rec, const char *es_rec, const char *es_ttft,
                          const char *es_tpot)
{
    const lg_effective_settings_t *s = m->s;
    lg__perf_t *pr = m->pr;
    double n = (double)m->sample_count;
    char a[64];

    fputs("================================================\n"
          "MLPerf Results Summary\n"
          "================================================\n",
          f);
    fprintf(f, "SUT name : %s\n", sut_name);
    fprintf(f, "Scenario : %s\n", lg_scenario_name(s->scenario));
    fprintf(f, "Mode     : %s\n", lg_mode_name(s->mode));
    switch (s->scenario) {
    case LG_SINGLE_STREAM:
        fixed(a, sizeof(a), s->target_latency_percentile * 100, 1);
        fprintf(f, "%sth percentile latency (ns) : %" PRId64 "\n", a, m->target_lat);
        break;
    case LG_MULTI_STREAM:
        fixed(a, sizeof(a), s->target_latency_percentile * 100, 1);
        fprintf(f, "%sth percentile latency (ns) : %" PRId64 "\n", a, m->target_qlat);
        break;
    case LG_SERVER:
        fixed(a, sizeof(a), div0(n - 1, pr->final_query_all_samples_done_time), 2);
        fprintf(f, "Completed samples per second    : %s\n", a);
        break;
    case LG_OFFLINE:
        lg__fmt_g(a, sizeof(a), div0(n, pr->max_latency));
        fprintf(f, "Samples per second: %s\n", a);
        break;
    }
    if (s->use_token_latencies) {
        switch (s->scenario) {
        case LG_SINGLE_STREAM:
        case LG_MULTI_STREAM:
            fixed(a, sizeof(a), s->target_latency_percentile * 100, 1);
            fprintf(f, "%sth first token percentile latency (ns) : %" PRId64 "\n", a, m->ft_target);
            break;
        case LG_OFFLINE:
            lg__fmt_g(a, sizeof(a), div0((double)m->token_count, pr->max_latency));
            fprintf(f, "Tokens per second: %s\n", a);
            break;
        case LG_SERVER:
            fixed(a, sizeof(a), div0((double)m->token_count, pr->final_query_all_samples_done_time),
                  2);
            fprintf(f, "Completed tokens per second: %s\n", a);
            break;
        }
    }
    if (s->infer_token_latencies) {
        if (s->scenario == LG_OFFLINE) {
            lg__fmt_g(a, sizeof(a),
                      div0((double)s->token_latency_scaling_factor * n, pr->max_latency));
            fprintf(f, "Tokens per second (inferred): %s\n", a);
        } else if (s->scenario == LG_SERVER) {
            fixed(a, sizeof(a),
                  div0((double)s->token_latency_scaling_factor * (n - 1),
                       pr->final_query_all_samples_done_time),
                  2);
            fprintf(f, "Completed tokens per second (inferred): %s\n", a);
        }
    }
    fprintf(f, "Result is : %s\n", valid ? "VALID" : "INVALID");
    if (s->scenario == LG_SERVER)
        fprintf(f, "  Performance constraints satisfied : %s\n", perf_met ? "Yes" : "NO");
    fprintf(f, "  Min duration satisfied : %s\n", dur_met ? "Yes" : "NO");
    fprintf(f, "  Min queries satisfied : %s\n", q_met ? "Yes" : "NO");
    fprintf(f, "  Early stopping satisfied: %s\n", es_met ? "Yes" : "NO");
    if (!valid) {
        fputs("Recommendations:\n", f);
        if (!perf_met)
            fprintf(f, " * %s\n", perf_rec);
        if (!dur_met)
            fprintf(f, " * %s\n", dur_rec);
        if (!q_met)
            fputs(" * The test exited early, before enough queries were issued.\n"
                  "   See the detailed log for why this may have occurred.\n",
                  f);
        if (pr->failed || pr->lost || pr->digest_bad)
            fprintf(f,
                    " * %" PRIu64 " samples failed in the SUT, %" PRIu64
                    " never completed and %" PRIu64
                    " responses did not match their sample's digest.\n"
                    "   See the detailed log for the reasons.\n",
                    pr->failed, pr->lost, pr->digest_bad);
        if (pr->interrupted)
            fprintf(f,
                    " * The run was interrupted (signal %d) before it ended; the results cover "
                    "only the part that ran.\n",
                    pr->interrupted);
    }
    if (s->scenario != LG_OFFLINE) {
        if (!s->use_token_latencies) {
            fprintf(f, "Early Stopping Result:\n%s\n", es_rec);
        } else {
            fprintf(f, "TTFT Early Stopping Result:\n%s\n", es_ttft);
            fprintf(f, "TPOT Early Stopping Result:\n%s\n", es_tpot);
        }
    }
    fputs("\n================================================\n"
          "Additional Stats\n"
          "================================================\n",
          f);
    if (s->scenario == LG_SINGLE_STREAM) {
        fixed(a, sizeof(a), div0(n - 1, pr->final_query_issued_time), 2);
        fprintf(f, "QPS w/ loadgen overhead         : %s\n", a);
        fixed(a, sizeof(a), div0(1, (double)m->lat_mean / 1e9), 2);
        fprintf(f, "QPS w/o loadgen overhead        : %s\n\n", a);
    } else if (s->scenario == LG_SERVER) {
        fixed(a, sizeof(a), div0(n - 1, pr->final_query_scheduled_time), 2);
        fprintf(f, "Scheduled samples per second : %s\n", a);
    } else if (s->scenario == LG_MULTI_STREAM) {
        fputs("Per-query latency:  \n", f);
        fprintf(f, "Min latency (ns)                : %" PRId64 "\n", m->q_min);
        fprintf(f, "Max latency (ns)                : %" PRId64 "\n", m->q_max);
        fprintf(f, "Mean latency (ns)               : %" PRId64 "\n", m->q_mean);
        print_percentiles(f, "latency (ns)   ", m->pct_qlat);
    }
    if (s->scenario != LG_MULTI_STREAM) {
        fprintf(f, "Min latency (ns)                : %" PRId64 "\n", m->lat_min);
        fprintf(f, "Max latency (ns)                : %" PRId64 "\n", m->lat_max);
        fprintf(f, "Mean latency (ns)               : %" PRId64 "\n", m->lat_mean);
        print_percentiles(f, "latency (ns)   ", m->pct_lat);
    }
    if (s->use_token_latencies) {
        fputs("\n", f);
        if (s->scenario == LG_SINGLE_STREAM) {
            fixed(a, sizeof(a), div0((double)m->token_count, pr->final_query_issued_time), 2);
            fprintf(f, "TPS w/ loadgen overhead         : %s\n", a);
            fixed(a, sizeof(a), div0((double)m->token_count, ((double)m->lat_mean / 1e9) * n), 2);
            fprintf(f, "TPS w/o loadgen overhead        : %s\n", a);
        } else if (s->scenario == LG_SERVER) {
            fixed(a, sizeof(a), div0((double)m->token_count, pr->final_query_all_samples_done_time),
                  2);
            fprintf(f, "Completed tokens per second                 : %s\n", a);
        }
        if (s->scenario != LG_OFFLINE) {
            fprintf(f, "Min First Token latency (ns)                : %" PRId64 "\n", m->ft_min);
            fprintf(f, "Max First Token latency (ns)                : %" PRId64 "\n", m->ft_max);
            fprintf(f, "Mean First Token latency (ns)               : %" PRId64 "\n", m->ft_mean);
            print_percentiles(f, "first token latency (ns)   ", m->ft_pct);
            fputs("\n", f);
            fprintf(f, "Min Time per Output Token (ns)                : %" PRId64 "\n",
                    m->tpot_min);
            fprintf(f, "Max Time per Output Token (ns)                : %" PRId64 "\n",
                    m->tpot_max);
            fprintf(f, "Mean Time per Output Token (ns)               : %" PRId64 "\n",
                    m->tpot_mean);
            print_percentiles(f, "time to output token (ns)   ", m->tpot_pct);
        }
    }
    fputs("\n================================================\n"
          "Test Parameters Used\n"
          "================================================\n",
          f);
    lg__settings_summary(s, f);
}

static void write_detail(summary_t *m, lg__dlog_t *d, int valid, int perf_met, int dur_met,
                         const char *dur_rec, int q_met, int es_met, const char *perf_rec,
                         char *es_rec, char *es_ttft, char *es_tpot)
{
    const lg_effective_settings_t *s = m->s;
    lg__perf_t *pr = m->pr;
    double n = (double)m->sample_count;
    char reason[1024];

    LG_DSTR(d, "result_validity", valid ? "VALID" : "INVALID");
    if (s->scenario == LG_SERVER)
        LG_DBOOL(d, "result_perf_constraints_met", perf_met);
    LG_DBOOL(d, "result_min_duration_met", dur_met);
    LG_DBOOL(d, "result_min_queries_met", q_met);
    LG_DBOOL(d, "early_stopping_met", es_met);
    if (!valid) {
        size_t used = 0;

        reason[0] = '\0';
        if (!perf_met)
            used += (size_t)snprintf(reason + used, sizeof(reason) - used, "%s ", perf_rec);
        if (!dur_met && used < sizeof(reason))
            used += (size_t)snprintf(reason + used, sizeof(reason) - used, "%s ", dur_rec);
        if (!q_met && used < sizeof(reason))
            used += (size_t)snprintf(reason + used, sizeof(reason) - used,
                                     "The test exited early, before enough queries were issued.");
        if ((pr->failed || pr->lost || pr->digest_bad) && used < sizeof(reason))
            snprintf(
                reason + used, sizeof(reason) - used,
                "%s%" PRIu64 " samples failed in the SUT, %" PRIu64 " never completed and %" PRIu64
                " responses did not match their sample's digest.",
                used && reason[used - 1] != ' ' ? " " : "", pr->failed, pr->lost, pr->digest_bad);
        used = strlen(reason);
        if (pr->interrupted && used < sizeof(reason))
            snprintf(reason + used, sizeof(reason) - used, "%sThe run was interrupted (signal %d).",
                     used && reason[used - 1] != ' ' ? " " : "", pr->interrupted);
        replace_newlines(reason);
        LG_DSTR(d, "result_invalid_reason", reason);
    }
    replace_newlines(es_rec);
    if (!s->use_token_latencies) {
        LG_DSTR(d, "early_stopping_result", es_rec);
    } else {
        replace_newlines(es_ttft);
        replace_newlines(es_tpot);
        LG_DSTR(d, "early_stopping_ttft_result", es_ttft);
        LG_DSTR(d, "early_stopping_tpot_result", es_tpot);
    }
    LG_DU64(d, "result_query_count", m->query_count);
    if (s->scenario == LG_SERVER)
        LG_DU64(d, "result_overlatency_query_count", m->overlatency_query_count);

    switch (s->scenario) {
    case LG_SINGLE_STREAM:
        LG_DF64(d, "result_qps_with_loadgen_overhead", div0(n - 1, pr->final_query_issued_time));
        LG_DF64(d, "result_qps_without_loadgen_overhead", div0(1, (double)m->lat_mean / 1e9));
        LG_DI64(d, "early_stopping_latency_ss", m->es_ss);
        LG_DI64(d, "early_stopping_latency_ms", m->es_ms);
        break;
    case LG_MULTI_STREAM:
        LG_DI64(d, "result_min_query_latency_ns", m->q_min);
        LG_DI64(d, "result_max_query_latency_ns", m->q_max);
        LG_DI64(d, "result_mean_query_latency_ns", m->q_mean);
        log_percentiles(d, "result_", "_percentile_per_query_latency_ns", m->pct_qlat);
        LG_DI64(d, "early_stopping_latency_ms", m->es_ms);
        break;
    case LG_SERVER:
        LG_DF64(d, "result_scheduled_samples_per_sec", div0(n - 1, pr->final_query_scheduled_time));
        LG_DF64(d, "result_completed_samples_per_sec",
                div0(n - 1, pr->final_query_all_samples_done_time));
        break;
    case LG_OFFLINE:
        LG_DF64(d, "result_samples_per_second", div0(n, pr->max_latency));
        break;
    }
    LG_DI64(d, "result_min_latency_ns", m->lat_min);
    LG_DI64(d, "result_max_latency_ns", m->lat_max);
    LG_DI64(d, "result_mean_latency_ns", m->lat_mean);
    log_percentiles(d, "result_", "_percentile_latency_ns", m->pct_lat);
    if (s->use_token_latencies) {
        if (s->scenario != LG_OFFLINE) {
            LG_DI64(d, "result_first_token_min_latency_ns", m->ft_min);
            LG_DI64(d, "result_first_token_max_latency_ns", m->ft_max);
            LG_DI64(d, "result_first_token_mean_latency_ns", m->ft_mean);
            log_percentiles(d, "result_first_token_", "_percentile_latency_ns", m->ft_pct);
            LG_DF64(d, "result_token_throughput_with_loadgen_overhead",
                    div0((double)m->token_count, pr->final_query_issued_time));
            LG_DF64(d, "result_token_throughput",
                    div0((double)m->token_count, (double)m->lat_mean * n));
            log_percentiles(d, "result_time_per_output_token_", "_percentile_ns", m->tpot_pct);
            LG_DI64(d, "result_time_to_output_token_min", m->tpot_min);
            LG_DI64(d, "result_time_to_output_token_max", m->tpot_max);
            LG_DI64(d, "result_time_to_output_token_mean", m->tpot_mean);
            LG_DF64(d, "result_completed_tokens_per_second",
                    div0((double)m->token_count, pr->final_query_all_samples_done_time));
        } else {
            LG_DF64(d, "result_tokens_per_second", div0((double)m->token_count, pr->max_latency));
        }
    }
    if (s->infer_token_latencies) {
        if (s->scenario == LG_SERVER)
            LG_DF64(d, "result_inferred_completed_tokens_per_second",
                    div0((n - 1) * (double)s->token_latency_scaling_factor,
                         pr->final_query_all_samples_done_time));
        else if (s->scenario == LG_OFFLINE)
            LG_DF64(d, "result_inferred_tokens_per_second",
                    div0(n * (double)s->token_latency_scaling_factor, pr->max_latency));
    }
}

void lg__perf_report(const char *sut_name, const lg_effective_settings_t *s, lg__perf_t *pr,
                     lg__dlog_t *d, FILE *summary, int summary_stdout, lg_result_t *res)
{
    summary_t m;
    const char *dur_rec = "";
    char perf_rec[256], es_rec[1024] = "", es_ttft[1024] = "", es_tpot[1024] = "";
    int dur_met, q_met, perf_met, es_met, valid;
    char *text = NULL;
    size_t text_len = 0;
    FILE *mem;

    process(&m, s, pr);
    dur_met = min_duration_met(&m, &dur_rec);
    q_met = pr->queries_issued >= s->min_query_count && m.sample_count >= s->min_sample_count;
    if (!s->use_token_latencies) {
        es_met = early_stopping(&m, es_rec, sizeof(es_rec), (int64_t)pr->queries_issued, pr->lat,
                                pr->qlat, s->target_latency_ns);
    } else {
        /* TTFT is evaluated only when TPOT passes (the official && short-circuits). */
        es_met = early_stopping(&m, es_tpot, sizeof(es_tpot), (int64_t)pr->queries_issued, pr->tpot,
                                pr->qlat, s->server_tpot_latency) &&
                 early_stopping(&m, es_ttft, sizeof(es_ttft), (int64_t)pr->queries_issued, pr->ttft,
                                pr->qlat, s->server_ttft_latency);
    }
    perf_met = perf_constraints(&m, perf_rec, sizeof(perf_rec));
    valid = dur_met && q_met && perf_met && es_met && !pr->failed && !pr->lost && !pr->digest_bad &&
            !pr->interrupted;

    mem = open_memstream(&text, &text_len);
    if (mem) {
        write_summary(&m, sut_name, mem, valid, perf_met, dur_met, dur_rec, q_met, es_met, perf_rec,
                      es_rec, es_ttft, es_tpot);
        fclose(mem);
        if (summary)
            fwrite(text, 1, text_len, summary);
        if (summary_stdout)
            fwrite(text, 1, text_len, stdout);
        free(text);
    }
    write_detail(&m, d, valid, perf_met, dur_met, dur_rec, q_met, es_met, perf_rec, es_rec, es_ttft,
                 es_tpot);

    if (res) {
        double n = (double)m.sample_count;

        res->performance_ran = true;
        res->performance_valid = valid;
        switch (s->scenario) {
        case LG_SINGLE_STREAM:
            snprintf(res->metric_name, sizeof(res->metric_name), "early stopping latency (ns)");
            res->metric = (double)m.es_ss;
            break;
        case LG_MULTI_STREAM:
            snprintf(res->metric_name, sizeof(res->metric_name), "early stopping latency (ns)");
            res->metric = (double)m.es_ms;
            break;
        case LG_SERVER:
            snprintf(res->metric_name, sizeof(res->metric_name), "Completed samples per second");
            res->metric = div0(n - 1, pr->final_query_all_samples_done_time);
            break;
        case LG_OFFLINE:
            snprintf(res->metric_name, sizeof(res->metric_name), "Samples per second");
            res->metric = div0(n, pr->max_latency);
            break;
        }
    }
}
