/* loadgen-node's options: the table below is the parser, the --help text and the --config keys. */
#include "args.h"

#include "build_info.h"

#include "cmn/conf.h"
#include "cmn/log.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How an option's value is stored: a string, a number, a flag (true when given), or a setter. */
typedef enum { K_STR, K_U64, K_FLAG, K_FN, K_SECTION } kind_t;

typedef int (*setter_t)(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);

typedef struct {
    const char *name; /* long option without "--"; the section title for K_SECTION */
    const char *arg;  /* the value's placeholder in --help; NULL: a flag without value */
    kind_t kind;
    size_t off; /* K_STR, K_U64, K_FLAG: the field in lg_args_t */
    setter_t set;
    const char *help; /* lines separated by '\n' */
} opt_t;

#define STR(n, a, f, h)                              \
    {                                                \
        n, a, K_STR, offsetof(lg_args_t, f), NULL, h \
    }
#define U64(n, a, f, h)                              \
    {                                                \
        n, a, K_U64, offsetof(lg_args_t, f), NULL, h \
    }
#define FLAG(n, f, h)                                    \
    {                                                    \
        n, NULL, K_FLAG, offsetof(lg_args_t, f), NULL, h \
    }
#define FN(n, a, fn, h)      \
    {                        \
        n, a, K_FN, 0, fn, h \
    }
#define SECTION(t)                        \
    {                                     \
        t, NULL, K_SECTION, 0, NULL, NULL \
    }

static int set_user_conf(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_set(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_synth(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_size(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_write_thread(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_node_budget(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_null(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_intervals(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_quiet(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_progress(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_issue_thread_io(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_spin(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_spin_budget(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_issue_cpu(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_qdl_limit(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_log_level(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_config(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);
static int set_exit(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb);

static const opt_t options[] = {
    SECTION("Test"),
    STR("scenario", "S", scenario, "SingleStream, MultiStream, Server or Offline (required)"),
    STR("mode", "M", mode,
        "PerformanceOnly (default), AccuracyOnly, SubmissionRun (accuracy\n"
        "then performance) or FindPeakPerformance (Server only)"),
    STR("model", "NAME", model,
        "benchmark name as in mlperf.conf (resnet50, bert-99, llama2-70b,\n"
        "...); selects the conf keys and the compression rules"),
    STR("mlperf-conf", "PATH", mlperf_conf,
        "the official mlperf.conf, read unchanged (seeds, per-model\n"
        "minimums); without it the TestSettings defaults apply (seeds 0)"),
    FN("user-conf", "PATH", set_user_conf,
       "user.conf (target QPS, latencies...); a second one is logged as\n"
       "the official \"Multiple conf files are used\" error"),
    STR("audit-config", "PATH", audit,
        "compliance audit.config (default: ./audit.config when present,\n"
        "as the official LoadGen; 'none' never reads one)"),
    FN("set", "FIELD=VALUE", set_set,
       "set a TestSettings field by its official name, after the conf\n"
       "files (e.g. --set min_duration_ms=1000); repeatable"),
    SECTION("Query sample library (one of)"),
    STR("qsl-npy", "PATH", qsl_npy,
        "a .npy file whose first axis is the samples, or a directory of\n"
        "one .npy per sample (taken in name order)"),
    STR("qsl-raw", "FILE", qsl_raw, "back-to-back records of --sample-size bytes"),
    FN("qsl-synthetic", "N", set_synth, "N generated samples of --sample-size bytes"),
    FN("sample-size", "N", set_size, "record or synthetic sample size (K, M, G suffixes allowed)"),
    STR("synthetic-kind", "K", synth_kind,
        "random (default), image (compressible, image-like bytes) or tokens\n"
        "(BERT-like padded int32 token ids, mask and segment ids)"),
    U64("synthetic-seed", "N", synth_seed, "seed of the synthetic bytes (default 1)"),
    U64("performance-count", "N", perf_count,
        "the QSL's PerformanceSampleCount (default: all samples); the\n"
        "performance_sample_count_override of mlperf.conf takes precedence"),
    STR("compress", "CODEC", compress,
        "none (default) or lz4: compress each sample at load time\n"
        "(untimed), only where the benchmark's rules allow it"),
    SECTION("System under test"),
    STR("sut", "KIND", sut, "qdl (the default when --nodes is given) or null (in-process)"),
    STR("nodes", "H:P,H:P", nodes, "sut-node addresses for the QDL (IPv6 as [ADDR]:PORT)"),
    U64("connections", "N", connections, "connections per node (QDL, default 1)"),
    FN("write-thread-min", "BYTES", set_write_thread,
       "a write thread per connection: frames of a loop turn making\n"
       "at least BYTES leave from it (QDL, tcp://, K and M suffixes;\n"
       "default 0: every write from the QDL loop; see qdl/README.md)"),
    FN("progress-timeout-ms", "N", set_qdl_limit,
       "a node holding samples without completing any for N ms is marked\n"
       "degraded and its samples go elsewhere (QDL; default 0: 10 s, 60 s\n"
       "when streaming, or 4 x the node's slowest completion if longer)"),
    FN("max-dispatches", "N", set_qdl_limit,
       "a sample sent N times without a result fails (QDL, 1-1000,\n"
       "default 3)"),
    FN("node-memory-budget", "BYTES", set_node_budget,
       "what nodes may make the QDL hold (frames, decoded results),\n"
       "shared by every connection; a node past its share is dropped\n"
       "(QDL, K M G suffixes, at least 16K per connection, default 1G)"),
    STR("policy", "P", policy, "least-outstanding (default), round-robin or weighted (QDL)"),
    STR("result-codec", "CODEC", result_codec,
        "codec offered for responses: none (default) or lz4 (QDL)"),
    STR("tls-ca", "FILE", tls_ca, "CA that signed the nodes' certificates (QDL, TLS 1.3)"),
    STR("tls-cert", "FILE", tls_cert, "client certificate for mutual TLS (QDL)"),
    STR("tls-key", "FILE", tls_key, "private key of --tls-cert (QDL)"),
    STR("tls-server-name", "NAME", tls_name, "name expected in the nodes' certificates (QDL)"),
    FLAG("ucx-busy-poll", ucx_busy_poll,
         "progress UCX on every QDL loop turn instead of sleeping on its\n"
         "event fd (ucx:// nodes): lowest latency, one core busy"),
    FN("null-threaded", NULL, set_null,
       "null SUT: complete from a helper thread (default: inline)"),
    FN("null-delay-us", "N", set_null,
       "null SUT: complete N us after the issue (implies threaded)"),
    FN("null-response-bytes", "N", set_null, "null SUT: response size (default 4, at most 64)"),
    FN("null-tokens", "N", set_null, "null SUT: stream a first token and report N output tokens"),
    FN("null-digest", NULL, set_null,
       "null SUT: answer with the sample's digest (as the digest backend)"),
    FLAG("verify-digest", log.verify_digest,
         "check every response against its sample's digest (use with the\n"
         "sut-node digest backend); any mismatch makes the run fail"),
    SECTION("Output and run control"),
    STR("output-dir", "DIR", outdir,
        "where the logs go (created if missing; default .); refused\n"
        "when it already holds the logs of an earlier run"),
    STR("metrics-listen", "ADDR:PORT", metrics_listen,
        "serve Prometheus metrics at http://ADDR:PORT/metrics during a QDL\n"
        "run (port 0: a free one, logged)"),
    U64("metrics-linger-ms", "MS", metrics_linger_ms,
        "keep serving them this long after the run, so a scraper sees the\n"
        "final counts (default 0)"),
    STR("log-prefix", "P", log.prefix, "log file prefix (default mlperf_log_)"),
    STR("log-suffix", "S", log.suffix, "log file suffix (default none)"),
    FLAG("prefix-datetime", log.prefix_with_datetime,
         "put the date and time in the log file names"),
    FN("quiet", NULL, set_quiet, "do not print the summary at the end"),
    FN("progress", "WHEN", set_progress,
       "auto (default: a live line when stderr is a terminal), on, off"),
    FLAG("sample-latencies", log.sample_latencies,
         "also write <prefix>sample_latencies.csv: sample_seq,scheduled_ns,\n"
         "latency_ns,...,ttft_ns,n_tokens,node_queue_ns,node_backend_ns,\n"
         "wire_return_ns,issue_late_cause for every performance-run\n"
         "sample (for plots: see deploy/plot/latplot.py)"),
    FN("latency-intervals", "MS", set_intervals,
       "also write <prefix>latency_intervals.csv: per MS of scheduled\n"
       "time, the samples and their p50/p90/p99/p99.9/max latency"),
    U64("drain-timeout-ms", "N", log.drain_timeout_ms,
        "count samples still outstanding N ms after the last issue as lost\n"
        "(errors) instead of waiting forever (default 0: wait)"),
    FN("spin-us", "N", set_spin,
       "Server: never sleep when less than the measured cost of a sleep\n"
       "plus N us remains before a scheduled issue; spin instead (default 30)"),
    FN("spin-budget", "PCT", set_spin_budget,
       "Server: spin at most PCT % of the run's wall time (1-100, default\n"
       "100: up to one core); past it short gaps are slept and issued late\n"
       "(the summary's harness block shows the spin share and the lateness)"),
    FN("issue-cpu", "N", set_issue_cpu,
       "while a series issues, the issue thread has CPU N alone: every other\n"
       "thread of loadgen-node (the QDL's included) is kept off it (default:\n"
       "none); on a host with few cores, pin a local sut-node off it too\n"
       "(taskset). The harness block shows it"),
    FN("issue-thread-io", "on|off", set_issue_thread_io,
       "Server through the QDL: the issue thread runs the QDL's network\n"
       "I/O between issues while the QDL's own thread sleeps (default on;\n"
       "off, and with --issue-cpu: every query handed to the QDL's thread)"),
    FN("wait-spin-us", "N", set_spin,
       "SingleStream/MultiStream: spin N us for a query's completion\n"
       "before sleeping (default 150)"),
    STR("loadgen", "L", loadgen,
        "builtin (default: this scheduler) or official: the unaltered\n"
        "official LoadGen over the QDL (only in builds given\n"
        "-DMLPERF_LOADGEN_ROOT; the one for official results)"),
    FN("log-level", "L", set_log_level, "error, warn, info (default) or debug"),
    FN("config", "FILE", set_config,
       "read options from FILE (key = value lines, keys as the long\n"
       "options; the command line wins)"),
    FN("version", NULL, set_exit, "print the version and exit"),
    FN("help", NULL, set_exit, "this text (also -h)"),
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static void usage(FILE *f)
{
    size_t i;

    fputs(
        "Usage: loadgen-node --scenario S [--model M] [--mlperf-conf PATH] [--user-conf PATH]\n"
        "                    (--qsl-npy PATH | --qsl-raw FILE --sample-size N |\n"
        "                     --qsl-synthetic N --sample-size N) [--sut null | --nodes H:P,...]\n"
        "\n"
        "Runs an MLPerf Inference LoadGen test (the official LoadGen 6.0.17 trace, metrics and\n"
        "logs) against sut-node daemons over the network (the QDL) or against an in-process null\n"
        "SUT, and writes mlperf_log_summary.txt, mlperf_log_detail.txt and\n"
        "mlperf_log_accuracy.json. Exit status: 0 for a VALID run (and accuracy runs without\n"
        "errors), 1 for an INVALID run or sample errors, 2 for bad arguments or configuration,\n"
        "3 when the test could not run, 130 when interrupted (SIGINT/SIGTERM).\n",
        f);
    for (i = 0; i < N_OPTIONS; i++) {
        const opt_t *d = &options[i];
        const char *h, *nl;
        char left[64];

        if (d->kind == K_SECTION) {
            fprintf(f, "\n%s:\n", d->name);
            continue;
        }
        snprintf(left, sizeof(left), "--%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
        /* A left column too wide for the help starts the help on the next line. */
        if (strlen(left) > 22)
            fprintf(f, "  %s\n  %-22s ", left, "");
        else
            fprintf(f, "  %-22s ", left);
        for (h = d->help; (nl = strchr(h, '\n')); h = nl + 1)
            fprintf(f, "%.*s\n  %-22s ", (int)(nl - h), h, "");
        fprintf(f, "%s\n", h);
    }
}

static int parse_u64(const char *name, const char *v, uint64_t *out, cmn_errbuf_t *eb)
{
    if (cmn_parse_u64(v, out) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not a non-negative integer", name, v);
    return 0;
}

static int set_user_conf(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (o->n_user_conf == LG_ARGS_MAX_USER_CONFS)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: at most %d files", name, LG_ARGS_MAX_USER_CONFS);
    o->user_conf[o->n_user_conf++] = v;
    return 0;
}

static int set_set(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (o->n_sets == LG_ARGS_MAX_SETS)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: at most %d fields", name, LG_ARGS_MAX_SETS);
    o->sets[o->n_sets++] = v;
    return 0;
}

static int set_synth(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    o->have_synth = 1;
    return parse_u64(name, v, &o->synth_n, eb);
}

static int set_size(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (cmn_parse_size(v, &o->sample_size) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not a byte count", name, v);
    return 0;
}

static int set_write_thread(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (cmn_parse_size(v, &o->write_thread_min) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not a byte count", name, v);
    o->have_write_thread_min = 1;
    return 0;
}

static int set_node_budget(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (cmn_parse_size(v, &o->node_memory_budget) < 0 || o->node_memory_budget == 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not a byte count above 0", name, v);
    return 0;
}

static int set_null(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u = 0;
    int rc = v ? parse_u64(name, v, &u, eb) : 0;

    if (rc < 0)
        return rc;
    if (strcmp(name, "null-threaded") == 0) {
        o->null.threaded = 1;
    } else if (strcmp(name, "null-delay-us") == 0) {
        if (u > UINT64_MAX / 1000u)
            return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " us is too long", name, u);
        o->null.delay_ns = u * 1000u;
        o->null.threaded = 1;
    } else if (strcmp(name, "null-response-bytes") == 0) {
        if (u > 64)
            return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " is more than the limit of 64", name,
                            u);
        o->null.response_size = (size_t)u;
    } else if (strcmp(name, "null-tokens") == 0) {
        if (u > INT64_MAX)
            return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " is too large", name, u);
        o->null.n_tokens = (int64_t)u;
    } else {
        o->null.digest = 1;
    }
    return 0;
}

static int set_intervals(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    int rc = parse_u64(name, v, &o->log.latency_interval_ms, eb);

    if (rc == 0 && o->log.latency_interval_ms == 0)
        rc = cmn_errf(eb, CMN_ECONFIG, "--%s: an interval of at least 1 ms", name);
    return rc;
}

static int set_quiet(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    (void)name, (void)v, (void)eb;
    o->log.copy_summary_to_stdout = false;
    return 0;
}

static int set_progress(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (strcmp(v, "auto") == 0)
        o->log.progress = LG_PROGRESS_AUTO;
    else if (strcmp(v, "on") == 0)
        o->log.progress = LG_PROGRESS_ON;
    else if (strcmp(v, "off") == 0)
        o->log.progress = LG_PROGRESS_OFF;
    else
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not auto, on or off", name, v);
    return 0;
}

static int set_issue_thread_io(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    if (strcmp(v, "on") == 0)
        o->log.issue_thread_io = true;
    else if (strcmp(v, "off") == 0)
        o->log.issue_thread_io = false;
    else
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not on or off", name, v);
    return 0;
}

/* A progress deadline beyond a day, or more than 1000 dispatches of one sample, is a mistake. */
#define PROGRESS_TIMEOUT_MS_MAX 86400000u
#define MAX_DISPATCHES_MAX 1000u

static int set_qdl_limit(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = parse_u64(name, v, &u, eb);

    if (rc < 0)
        return rc;
    if (strcmp(name, "progress-timeout-ms") == 0) {
        if (u > PROGRESS_TIMEOUT_MS_MAX)
            return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " ms is more than the limit of %u ms",
                            name, u, PROGRESS_TIMEOUT_MS_MAX);
        o->progress_timeout_ms = u;
    } else {
        if (u < 1 || u > MAX_DISPATCHES_MAX)
            return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " is not from 1 to %u", name, u,
                            MAX_DISPATCHES_MAX);
        o->max_dispatches = (uint32_t)u;
    }
    return 0;
}

/* A spin longer than a second is a mistake, and a larger value would overflow in ns. */
#define SPIN_US_MAX 1000000u

static int set_spin(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = parse_u64(name, v, &u, eb);

    if (rc < 0)
        return rc;
    if (u > SPIN_US_MAX)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " us is more than the limit of %u us",
                        name, u, SPIN_US_MAX);
    if (strcmp(name, "spin-us") == 0)
        o->log.spin_ns = u * 1000u;
    else
        o->log.wait_spin_ns = u * 1000u;
    return 0;
}

static int set_spin_budget(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = parse_u64(name, v, &u, eb);

    if (rc == 0 && (u < 1 || u > 100))
        rc = cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " is not a percentage from 1 to 100", name,
                      u);
    if (rc == 0)
        o->log.spin_budget_pct = (unsigned)u;
    return rc;
}

static int set_issue_cpu(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = parse_u64(name, v, &u, eb);

    if (rc == 0 && u >= CPU_SETSIZE)
        rc = cmn_errf(eb, CMN_ECONFIG, "--%s: %" PRIu64 " is not a CPU number below %d", name, u,
                      CPU_SETSIZE);
    if (rc == 0)
        o->log.issue_cpu = (int)u;
    return rc;
}

static int set_log_level(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    cmn_log_level_t lvl;

    (void)o;
    if (cmn_log_level_parse(v, &lvl) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not error, warn, info or debug", name, v);
    cmn_log_set_level(lvl);
    return 0;
}

/* --config, --help and --version act in the first pass (parse_argv); here they are no-ops. */
static int set_config(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    (void)o, (void)name, (void)v, (void)eb;
    return 0;
}

static int set_exit(lg_args_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    (void)o, (void)name, (void)v, (void)eb;
    return 0;
}

static const opt_t *find_option(const char *name)
{
    size_t i;

    for (i = 0; i < N_OPTIONS; i++)
        if (options[i].kind != K_SECTION && strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

static int apply(lg_args_t *o, const opt_t *d, const char *v, cmn_errbuf_t *eb)
{
    char *field = (char *)o + d->off;

    switch (d->kind) {
    case K_STR:
        memcpy(field, &v, sizeof(v));
        return 0;
    case K_U64: {
        uint64_t u;
        int rc = parse_u64(d->name, v, &u, eb);

        if (rc == 0)
            memcpy(field, &u, sizeof(u));
        return rc;
    }
    case K_FLAG: {
        bool b = true;

        memcpy(field, &b, sizeof(b));
        return 0;
    }
    case K_FN:
        return d->set(o, d->name, v, eb);
    case K_SECTION:
        break;
    }
    return 0;
}

static int conf_cb(void *arg, const char *key, const char *value, int line, cmn_errbuf_t *eb)
{
    lg_args_t *o = arg;
    const opt_t *d = find_option(key);
    char **owned, *v;

    cmn_errbuf_t inner;
    int rc;

    if (!d || strcmp(key, "config") == 0 || strcmp(key, "help") == 0 || strcmp(key, "version") == 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s:%d: '%s' is not an option a config file can set",
                        o->config_file, line, key);
    if (!d->arg) {
        int b;

        if (cmn_parse_bool(value, &b) < 0)
            return cmn_errf(eb, CMN_ECONFIG, "%s:%d: %s: '%s' is not a boolean (0/1)",
                            o->config_file, line, key, value);
        rc = b ? apply(o, d, NULL, &inner) : 0;
    } else {
        owned = realloc(o->owned, (o->n_owned + 1) * sizeof(*owned));
        if (!owned)
            return cmn_errf(eb, -ENOMEM, "%s:%d: out of memory", o->config_file, line);
        o->owned = owned;
        v = strdup(value);
        if (!v)
            return cmn_errf(eb, -ENOMEM, "%s:%d: out of memory", o->config_file, line);
        o->owned[o->n_owned++] = v;
        rc = apply(o, d, v, &inner);
    }
    if (rc < 0)
        return cmn_errf(eb, rc, "%s:%d: %s", o->config_file, line, inner.msg);
    return 0;
}

/* Two passes, as sut-node: --help, --version and --config first (the file sets defaults), then
 * the rest of the command line over them. */
static int parse_argv(int argc, char **argv, lg_args_t *o, int pass, cmn_errbuf_t *eb)
{
    int i, rc;

    for (i = 1; i < argc; i++) {
        const char *name, *val;
        const opt_t *d;
        cmn_conf_word_t w;

        rc = cmn_conf_word_split(strcmp(argv[i], "-h") == 0 ? "--help" : argv[i], &w, eb);
        if (rc < 0)
            return rc;
        name = w.key;
        d = find_option(name);
        if (!d)
            return cmn_errf(eb, CMN_ECONFIG, "unknown option '--%s' (see --help)", name);
        if (d->arg && (rc = cmn_conf_word_value(&w, d->arg, argc, argv, &i, eb)) < 0)
            return rc;
        if (!d->arg && w.value)
            return cmn_errf(eb, CMN_ECONFIG, "--%s takes no value", name);
        val = w.value;
        if (pass == 0) {
            if (strcmp(name, "help") == 0) {
                usage(stdout);
                exit(0);
            }
            if (strcmp(name, "version") == 0) {
                printf("%s\ngit commit %s (%s), built %s\n", LG_VERSION_STRING, BUILD_GIT_COMMIT,
                       BUILD_GIT_COMMIT_DATE, BUILD_DATE_UTC);
                exit(0);
            }
            if (strcmp(name, "config") == 0) {
                o->config_file = val;
                rc = cmn_conf_parse_file(val, conf_cb, o, eb);
                if (rc < 0)
                    return rc == -ENOMEM ? rc : CMN_ECONFIG;
            }
            continue;
        }
        rc = apply(o, d, val, eb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* [tcp://|ucx://]host:port, [v6]:port: the syntax the QDL accepts, checked here so that a typo is
 * a usage error (exit 2) naming the entry, not a failed run. */
static int check_node(const char *a, size_t len, cmn_errbuf_t *eb)
{
    const char *colon, *end = a + len, *whole = a;
    int wl = (int)len;
    char port[8];
    uint64_t p;
    size_t pl;

    if (len > 6 && (strncmp(a, "tcp://", 6) == 0 || strncmp(a, "ucx://", 6) == 0)) {
        a += 6; /* the transport (common/README.md) */
        len -= 6;
    }
    if (len == 0)
        return cmn_errf(eb, CMN_ECONFIG, "--nodes: an empty entry (two commas, or a trailing one)");
    if (a[0] == '[') {
        const char *rb = memchr(a, ']', len);

        if (!rb || rb == a + 1 || rb + 1 >= end || rb[1] != ':')
            return cmn_errf(eb, CMN_ECONFIG, "--nodes: '%.*s' is not [ADDR]:PORT", wl, whole);
        colon = rb + 1;
    } else {
        colon = NULL;
        for (const char *c = a; c < end; c++)
            if (*c == ':')
                colon = c;
        if (!colon || colon == a || memchr(a, ':', (size_t)(colon - a)))
            return cmn_errf(eb, CMN_ECONFIG,
                            "--nodes: '%.*s' is not HOST:PORT (IPv6 as [ADDR]:PORT)", wl, whole);
    }
    pl = (size_t)(end - colon - 1);
    if (pl == 0 || pl >= sizeof(port))
        return cmn_errf(eb, CMN_ECONFIG, "--nodes: '%.*s' has no port from 1 to 65535", wl, whole);
    memcpy(port, colon + 1, pl);
    port[pl] = '\0';
    if (cmn_parse_u64(port, &p) < 0 || p == 0 || p > 65535)
        return cmn_errf(eb, CMN_ECONFIG, "--nodes: '%.*s' has no port from 1 to 65535", wl, whole);
    return 0;
}

static int check_nodes(const char *list, cmn_errbuf_t *eb)
{
    const char *p = list;
    size_t n = 0;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int rc = check_node(p, len, eb);

        if (rc < 0)
            return rc;
        if (++n > LG_ARGS_MAX_NODES)
            return cmn_errf(eb, CMN_ECONFIG, "--nodes: at most %d nodes", LG_ARGS_MAX_NODES);
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int check_readable(const char *flag, const char *path, cmn_errbuf_t *eb)
{
    if (path && access(path, R_OK) != 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s %s: cannot read it: %s", flag, path, strerror(errno));
    return 0;
}

static int check_args(lg_args_t *o, cmn_errbuf_t *eb)
{
    int rc;

    if (!o->scenario)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario is required (SingleStream, MultiStream, Server or Offline)");
    if ((o->qsl_npy != NULL) + (o->qsl_raw != NULL) + o->have_synth != 1)
        return cmn_errf(eb, CMN_ECONFIG,
                        "exactly one of --qsl-npy, --qsl-raw and --qsl-synthetic is required");
    if ((o->qsl_raw || o->have_synth) && o->sample_size == 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s needs --sample-size",
                        o->qsl_raw ? "--qsl-raw" : "--qsl-synthetic");
    if ((o->mlperf_conf || o->n_user_conf || o->compress) && !o->model)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--model is required with conf files and --compress (it selects the keys "
                        "and the compression rules)");
    if (o->sut && strcmp(o->sut, "qdl") != 0 && strcmp(o->sut, "null") != 0)
        return cmn_errf(eb, CMN_ECONFIG, "--sut: '%s' is not null or qdl", o->sut);
    if (o->sut && strcmp(o->sut, "qdl") == 0 && !o->nodes)
        return cmn_errf(eb, CMN_ECONFIG, "--sut qdl needs --nodes host:port,...");
    if (!o->sut && !o->nodes)
        return cmn_errf(eb, CMN_ECONFIG, "give --nodes host:port,... (the QDL) or --sut null");
    if (o->nodes && (rc = check_nodes(o->nodes, eb)) < 0)
        return rc;
    if (o->metrics_listen && (!o->nodes || (o->sut && strcmp(o->sut, "null") == 0)))
        return cmn_errf(eb, CMN_ECONFIG,
                        "--metrics-listen reports the QDL's counters: it needs --nodes (not the "
                        "null SUT)");
    if ((rc = check_readable("--tls-ca", o->tls_ca, eb)) < 0 ||
        (rc = check_readable("--tls-cert", o->tls_cert, eb)) < 0 ||
        (rc = check_readable("--tls-key", o->tls_key, eb)) < 0)
        return rc;
    if (o->audit && strcmp(o->audit, "none") == 0)
        o->log.audit_config = NULL;
    else if (o->audit)
        o->log.audit_config = o->audit;
    o->log.outdir = o->outdir;
    return 0;
}

int lg_args_parse(int argc, char **argv, lg_args_t *o, cmn_errbuf_t *eb)
{
    int rc;

    memset(o, 0, sizeof(*o));
    lg_null_config_init(&o->null);
    lg_log_settings_init(&o->log);
    o->outdir = ".";
    o->synth_seed = 1;
    o->connections = 1;
    o->log.copy_summary_to_stdout = true;
    rc = parse_argv(argc, argv, o, 0, eb);
    if (rc == 0)
        rc = parse_argv(argc, argv, o, 1, eb);
    if (rc == 0)
        rc = check_args(o, eb);
    return rc;
}

void lg_args_free(lg_args_t *o)
{
    size_t i;

    for (i = 0; i < o->n_owned; i++)
        free(o->owned[i]);
    free(o->owned);
    o->owned = NULL;
    o->n_owned = 0;
}

/* TestSettings fields --set can reach, by their official names. */
typedef enum { F_DOUBLE, F_U64, F_BOOL, F_INT } ftype_t;
typedef struct {
    const char *name;
    ftype_t type;
    size_t off;
} field_t;

#define FIELD(n, t)                                                   \
    {                                                                 \
        .name = #n, .type = t, .off = offsetof(lg_test_settings_t, n) \
    }
static const field_t fields[] = {
    FIELD(single_stream_expected_latency_ns, F_DOUBLE),
    FIELD(single_stream_target_latency_percentile, F_DOUBLE),
    FIELD(multi_stream_expected_latency_ns, F_DOUBLE),
    FIELD(multi_stream_target_latency_percentile, F_DOUBLE),
    FIELD(multi_stream_samples_per_query, F_U64),
    FIELD(server_target_qps, F_DOUBLE),
    FIELD(server_target_latency_ns, F_U64),
    FIELD(server_target_latency_percentile, F_DOUBLE),
    FIELD(server_coalesce_queries, F_BOOL),
    FIELD(server_find_peak_qps_decimals_of_precision, F_INT),
    FIELD(server_find_peak_qps_boundary_step_size, F_DOUBLE),
    FIELD(server_max_async_queries, F_U64),
    FIELD(offline_expected_qps, F_DOUBLE),
    FIELD(sample_concatenate_permutation, F_BOOL),
    FIELD(min_duration_ms, F_U64),
    FIELD(max_duration_ms, F_U64),
    FIELD(min_query_count, F_U64),
    FIELD(max_query_count, F_U64),
    FIELD(qsl_rng_seed, F_U64),
    FIELD(sample_index_rng_seed, F_U64),
    FIELD(schedule_rng_seed, F_U64),
    FIELD(accuracy_log_rng_seed, F_U64),
    FIELD(accuracy_log_probability, F_DOUBLE),
    FIELD(accuracy_log_sampling_target, F_U64),
    FIELD(print_timestamps, F_BOOL),
    FIELD(performance_issue_unique, F_BOOL),
    FIELD(performance_issue_same, F_BOOL),
    FIELD(performance_issue_same_index, F_U64),
    FIELD(performance_sample_count_override, F_U64),
    FIELD(accuracy_sample_count_override, F_U64),
    FIELD(use_token_latencies, F_BOOL),
    FIELD(server_ttft_latency, F_U64),
    FIELD(server_tpot_latency, F_U64),
    FIELD(infer_token_latencies, F_BOOL),
    FIELD(token_latency_scaling_factor, F_U64),
};

static int set_field(lg_test_settings_t *s, const char *kv, cmn_errbuf_t *eb)
{
    const char *eq = strchr(kv, '=');
    size_t i, klen;

    if (!eq)
        return cmn_errf(eb, CMN_ECONFIG, "--set %s: expected FIELD=VALUE", kv);
    klen = (size_t)(eq - kv);
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        char *p = (char *)s + fields[i].off;
        uint64_t u;
        double d;
        int b;

        if (strlen(fields[i].name) != klen || strncmp(fields[i].name, kv, klen) != 0)
            continue;
        switch (fields[i].type) {
        case F_DOUBLE:
            if (cmn_parse_double(eq + 1, &d) < 0)
                return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not a number", fields[i].name,
                                eq + 1);
            memcpy(p, &d, sizeof(d));
            return 0;
        case F_U64:
            if (cmn_parse_u64(eq + 1, &u) < 0)
                return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not a non-negative integer",
                                fields[i].name, eq + 1);
            memcpy(p, &u, sizeof(u));
            return 0;
        case F_INT:
            if (cmn_parse_u64(eq + 1, &u) < 0 || u > 100)
                return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not an integer from 0 to 100",
                                fields[i].name, eq + 1);
            b = (int)u;
            memcpy(p, &b, sizeof(b));
            return 0;
        case F_BOOL: {
            bool v;

            if (cmn_parse_bool(eq + 1, &b) < 0)
                return cmn_errf(eb, CMN_ECONFIG, "--set %s: '%s' is not a boolean (0/1)",
                                fields[i].name, eq + 1);
            v = b != 0;
            memcpy(p, &v, sizeof(v));
            return 0;
        }
        }
    }
    return cmn_errf(eb, CMN_ECONFIG, "--set %.*s: no TestSettings field of that name", (int)klen,
                    kv);
}

int lg_args_settings(const lg_args_t *o, lg_test_settings_t *s, lg_msgs_t *msgs, cmn_errbuf_t *eb)
{
    lg_scenario_t sc;
    lg_mode_t mode;
    int i, rc;

    lg_test_settings_init(s);
    if (lg_scenario_parse(o->scenario, &sc) < 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario: '%s' is not SingleStream, MultiStream, Server or Offline",
                        o->scenario);
    s->scenario = sc;
    if (o->mlperf_conf) {
        rc = lg_test_settings_from_config(s, o->mlperf_conf, o->model, lg_scenario_name(sc),
                                          LG_CONF_MLPERF, msgs, eb);
        if (rc == 0)
            rc = lg_conf_lint(o->mlperf_conf, o->model, LG_CONF_MLPERF, msgs, eb);
        if (rc < 0)
            return rc;
    }
    for (i = 0; i < o->n_user_conf; i++) {
        rc = lg_test_settings_from_config(s, o->user_conf[i], o->model, lg_scenario_name(sc),
                                          LG_CONF_USER, msgs, eb);
        if (rc == 0)
            rc = lg_conf_lint(o->user_conf[i], o->model, LG_CONF_USER, msgs, eb);
        if (rc < 0)
            return rc;
    }
    if (o->mode) {
        if (lg_mode_parse(o->mode, &mode) < 0)
            return cmn_errf(eb, CMN_ECONFIG,
                            "--mode: '%s' is not PerformanceOnly, AccuracyOnly, SubmissionRun or "
                            "FindPeakPerformance",
                            o->mode);
        s->mode = mode;
    }
    for (i = 0; i < o->n_sets; i++) {
        rc = set_field(s, o->sets[i], eb);
        if (rc < 0)
            return rc;
    }
    if (s->mode == LG_MODE_FIND_PEAK_PERFORMANCE && sc != LG_SERVER)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--mode FindPeakPerformance works only with --scenario Server");
    return lg_test_settings_check(s, eb);
}
