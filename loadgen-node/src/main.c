/* loadgen-node: runs an MLPerf LoadGen test against the in-process null SUT or, through the QDL,
 * against sut-node daemons, and writes the official logs. See --help and README.md. */
#include "build_info.h"
#include "cmn/conf.h"
#include "cmn/err.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"
#include "lg/lg.h"
#include "lg/sut_null.h"
#ifdef LG_HAVE_QDL
#    include "lg/sut_qdl.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_VALID = 0, EXIT_INVALID = 1, EXIT_USAGE = 2, EXIT_FAILED = 3 };

static const char usage_text[] =
    "Usage: loadgen-node --scenario S [--model M] [--mlperf-conf PATH] [--user-conf PATH]\n"
    "                    (--qsl-npy PATH | --qsl-raw FILE --sample-size N |\n"
    "                     --qsl-synthetic N --sample-size N) [--sut null | --nodes H:P,...]\n"
    "\n"
    "Runs an MLPerf Inference LoadGen test (the official LoadGen 6.0.17 trace, metrics and logs)\n"
    "against sut-node daemons over the network (the QDL) or against an in-process null SUT, and\n"
    "writes mlperf_log_summary.txt, mlperf_log_detail.txt and mlperf_log_accuracy.json.\n"
    "Exit status: 0 for a VALID run (and accuracy runs without errors), 1 for an INVALID run or\n"
    "sample errors, 2 for bad arguments or configuration, 3 when the test could not run.\n"
    "\n"
    "Test:\n"
    "  --scenario S            SingleStream, MultiStream, Server or Offline (required)\n"
    "  --mode M                PerformanceOnly (default), AccuracyOnly, SubmissionRun (accuracy\n"
    "                          then performance) or FindPeakPerformance (Server only)\n"
    "  --model NAME            benchmark name as in mlperf.conf (resnet50, bert-99, llama2-70b,\n"
    "                          ...); selects the conf keys and the compression rules\n"
    "  --mlperf-conf PATH      the official mlperf.conf, read unchanged (seeds, per-model\n"
    "                          minimums); without it the TestSettings defaults apply (seeds 0)\n"
    "  --user-conf PATH        user.conf (target QPS, latencies...); a second one is logged as\n"
    "                          the official \"Multiple conf files are used\" error\n"
    "  --audit-config PATH     compliance audit.config (default: ./audit.config when present,\n"
    "                          as the official LoadGen; 'none' never reads one)\n"
    "  --set FIELD=VALUE       set a TestSettings field by its official name, after the conf\n"
    "                          files (e.g. --set min_duration_ms=1000); repeatable\n"
    "\n"
    "Query sample library (one of):\n"
    "  --qsl-npy PATH          a .npy file whose first axis is the samples, or a directory of\n"
    "                          one .npy per sample (taken in name order)\n"
    "  --qsl-raw FILE          back-to-back records of --sample-size bytes\n"
    "  --qsl-synthetic N       N generated samples of --sample-size bytes\n"
    "  --sample-size N         record or synthetic sample size (K, M, G suffixes allowed)\n"
    "  --synthetic-kind K      random (default), image (compressible, image-like bytes) or tokens\n"
    "                          (BERT-like padded int32 token ids, mask and segment ids)\n"
    "  --synthetic-seed N      seed of the synthetic bytes (default 1)\n"
    "  --performance-count N   the QSL's PerformanceSampleCount (default: all samples); the\n"
    "                          performance_sample_count_override of mlperf.conf takes precedence\n"
    "  --compress CODEC        none (default) or lz4: compress each sample at load time\n"
    "                          (untimed), only where the benchmark's rules allow it\n"
    "\n"
    "System under test:\n"
    "  --sut KIND              qdl (the default when --nodes is given) or null (in-process)\n"
    "  --nodes H:P,H:P         sut-node addresses for the QDL\n"
    "  --connections N         connections per node (QDL, default 1)\n"
    "  --policy P              least-outstanding (default), round-robin or weighted (QDL)\n"
    "  --result-codec CODEC    codec offered for responses: none (default) or lz4 (QDL)\n"
    "  --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-server-name NAME   TLS (QDL)\n"
    "  --null-threaded         null SUT: complete from a helper thread (default: inline)\n"
    "  --null-delay-us N       null SUT: complete N us after the issue (implies threaded)\n"
    "  --null-response-bytes N null SUT: response size (default 4)\n"
    "  --null-tokens N         null SUT: stream a first token and report N output tokens\n"
    "  --null-digest           null SUT: answer with the sample's digest (as the digest backend)\n"
    "  --sample-latencies      also write <prefix>sample_latencies.csv: sample_seq,scheduled_ns,\n"
    "                          latency_ns for every performance-run sample (for plots: see\n"
    "                          deploy/plot/latplot.py)\n"
    "  --latency-intervals MS  also write <prefix>latency_intervals.csv: per MS of scheduled\n"
    "                          time, the samples and their p50/p90/p99/p99.9/max latency\n"
    "  --verify-digest         check every response against its sample's digest (use with the\n"
    "                          sut-node digest backend); any mismatch makes the run fail\n"
    "\n"
    "Output and run control:\n"
    "  --output-dir DIR        where the logs go (created if missing; default .); refused when it\n"
    "                          already holds the logs of an earlier run\n"
    "  --log-prefix P          log file prefix (default mlperf_log_)\n"
    "  --log-suffix S          log file suffix (default none)\n"
    "  --prefix-datetime       put the date and time in the log file names\n"
    "  --quiet                 do not print the summary at the end\n"
    "  --progress WHEN         auto (default: a live line when stderr is a terminal), on, off\n"
    "  --drain-timeout-ms N    count samples still outstanding N ms after the last issue as lost\n"
    "                          (errors) instead of waiting forever (default 0: wait)\n"
    "  --spin-us N             Server: busy-wait the last N us before each scheduled issue\n"
    "                          (default 30), never more than a tenth of the mean gap between\n"
    "                          queries, so a high rate leaves the CPU to the network path\n"
    "  --log-level L           error, warn, info (default) or debug\n"
    "  --version               print the version and exit\n"
    "  -h, --help              this text\n";

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

static int mkdir_p(const char *dir, cmn_errbuf_t *eb)
{
    char path[4096], *p;
    struct stat st;

    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return cmn_errf(eb, -ENAMETOOLONG, "--output-dir: the path is too long");
    for (p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return cmn_errf(eb, -errno, "--output-dir: cannot create %s: %s", path,
                            strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return cmn_errf(eb, -errno, "--output-dir: cannot create %s: %s", path, strerror(errno));
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return cmn_errf(eb, -ENOTDIR, "--output-dir: %s is not a directory", path);
    return 0;
}

/* Refuses an output folder that already holds the logs of an earlier run with the same file
 * names: the new run would overwrite them without a word (names with --prefix-datetime differ). */
static int refuse_used_outdir(const char *dir, const lg_log_settings_t *ls, cmn_errbuf_t *eb)
{
    static const char *const kinds[] = {"summary", "detail"};
    char path[4200];
    size_t i;

    if (ls->prefix_with_datetime)
        return 0;
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s%s%s.txt", dir, ls->prefix, kinds[i], ls->suffix);
        if (access(path, F_OK) == 0)
            return cmn_errf(eb, CMN_ECONFIG,
                            "--output-dir: %s already holds the logs of an earlier run (%s); give "
                            "each run its own folder (e.g. results/Server/performance) or remove "
                            "them first",
                            dir, path);
    }
    return 0;
}

#define MAX_USER_CONFS 8
#define MAX_SETS 64
#define MAX_NODES 64

typedef struct {
    const char *scenario, *mode, *model, *mlperf_conf, *audit, *outdir;
    const char *user_conf[MAX_USER_CONFS];
    int n_user_conf;
    const char *sets[MAX_SETS];
    int n_sets;
    const char *qsl_npy, *qsl_raw, *synth_kind, *compress;
    uint64_t synth_n, sample_size, synth_seed, perf_count;
    int have_synth;
    const char *sut, *nodes, *policy, *result_codec;
    const char *tls_ca, *tls_cert, *tls_key, *tls_name;
    uint64_t connections;
    lg_null_config_t null;
    lg_log_settings_t log;
} opts_t;

enum {
    O_SCENARIO = 256,
    O_MODE,
    O_MODEL,
    O_MLPERF_CONF,
    O_USER_CONF,
    O_AUDIT,
    O_SET,
    O_QSL_NPY,
    O_QSL_RAW,
    O_QSL_SYNTH,
    O_SAMPLE_SIZE,
    O_SYNTH_KIND,
    O_SYNTH_SEED,
    O_PERF_COUNT,
    O_COMPRESS,
    O_SUT,
    O_NODES,
    O_CONNECTIONS,
    O_POLICY,
    O_RESULT_CODEC,
    O_TLS_CA,
    O_TLS_CERT,
    O_TLS_KEY,
    O_TLS_NAME,
    O_NULL_THREADED,
    O_NULL_DELAY,
    O_NULL_RESP,
    O_NULL_TOKENS,
    O_NULL_DIGEST,
    O_VERIFY,
    O_SAMPLE_LAT,
    O_LAT_INTERVALS,
    O_VERSION,
    O_OUTDIR,
    O_PREFIX,
    O_SUFFIX,
    O_DATETIME,
    O_QUIET,
    O_PROGRESS,
    O_DRAIN,
    O_SPIN,
    O_WAIT_SPIN,
    O_LOG_LEVEL,
};

static const struct option long_opts[] = {
    {"scenario", required_argument, NULL, O_SCENARIO},
    {"mode", required_argument, NULL, O_MODE},
    {"model", required_argument, NULL, O_MODEL},
    {"mlperf-conf", required_argument, NULL, O_MLPERF_CONF},
    {"user-conf", required_argument, NULL, O_USER_CONF},
    {"audit-config", required_argument, NULL, O_AUDIT},
    {"set", required_argument, NULL, O_SET},
    {"qsl-npy", required_argument, NULL, O_QSL_NPY},
    {"qsl-raw", required_argument, NULL, O_QSL_RAW},
    {"qsl-synthetic", required_argument, NULL, O_QSL_SYNTH},
    {"sample-size", required_argument, NULL, O_SAMPLE_SIZE},
    {"synthetic-kind", required_argument, NULL, O_SYNTH_KIND},
    {"synthetic-seed", required_argument, NULL, O_SYNTH_SEED},
    {"performance-count", required_argument, NULL, O_PERF_COUNT},
    {"compress", required_argument, NULL, O_COMPRESS},
    {"sut", required_argument, NULL, O_SUT},
    {"nodes", required_argument, NULL, O_NODES},
    {"connections", required_argument, NULL, O_CONNECTIONS},
    {"policy", required_argument, NULL, O_POLICY},
    {"result-codec", required_argument, NULL, O_RESULT_CODEC},
    {"tls-ca", required_argument, NULL, O_TLS_CA},
    {"tls-cert", required_argument, NULL, O_TLS_CERT},
    {"tls-key", required_argument, NULL, O_TLS_KEY},
    {"tls-server-name", required_argument, NULL, O_TLS_NAME},
    {"null-threaded", no_argument, NULL, O_NULL_THREADED},
    {"null-delay-us", required_argument, NULL, O_NULL_DELAY},
    {"null-response-bytes", required_argument, NULL, O_NULL_RESP},
    {"null-tokens", required_argument, NULL, O_NULL_TOKENS},
    {"null-digest", no_argument, NULL, O_NULL_DIGEST},
    {"verify-digest", no_argument, NULL, O_VERIFY},
    {"sample-latencies", no_argument, NULL, O_SAMPLE_LAT},
    {"latency-intervals", required_argument, NULL, O_LAT_INTERVALS},
    {"version", no_argument, NULL, O_VERSION},
    {"output-dir", required_argument, NULL, O_OUTDIR},
    {"log-prefix", required_argument, NULL, O_PREFIX},
    {"log-suffix", required_argument, NULL, O_SUFFIX},
    {"prefix-datetime", no_argument, NULL, O_DATETIME},
    {"quiet", no_argument, NULL, O_QUIET},
    {"progress", required_argument, NULL, O_PROGRESS},
    {"drain-timeout-ms", required_argument, NULL, O_DRAIN},
    {"spin-us", required_argument, NULL, O_SPIN},
    {"wait-spin-us", required_argument, NULL, O_WAIT_SPIN},
    {"log-level", required_argument, NULL, O_LOG_LEVEL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int need_u64(const char *flag, const char *v, uint64_t *out, cmn_errbuf_t *eb)
{
    if (cmn_parse_u64(v, out) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s: '%s' is not a non-negative integer", flag, v);
    return 0;
}

/* A spin longer than a second is a mistake, and a larger value would overflow in ns. */
#define SPIN_US_MAX 1000000u

static int need_spin_us(const char *flag, const char *v, uint64_t *ns, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = need_u64(flag, v, &u, eb);

    if (rc == 0 && u > SPIN_US_MAX)
        rc = cmn_errf(eb, CMN_ECONFIG, "%s: %" PRIu64 " us is more than the limit of %u us", flag,
                      u, SPIN_US_MAX);
    if (rc == 0)
        *ns = u * 1000u;
    return rc;
}

static int parse_args(int argc, char **argv, opts_t *o, cmn_errbuf_t *eb)
{
    int c, rc = 0;
    uint64_t u;
    cmn_log_level_t lvl;

    memset(o, 0, sizeof(*o));
    lg_null_config_init(&o->null);
    lg_log_settings_init(&o->log);
    o->outdir = ".";
    o->synth_seed = 1;
    o->connections = 1;
    o->log.copy_summary_to_stdout = true;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        switch (c) {
        case O_SCENARIO:
            o->scenario = optarg;
            break;
        case O_MODE:
            o->mode = optarg;
            break;
        case O_MODEL:
            o->model = optarg;
            break;
        case O_MLPERF_CONF:
            o->mlperf_conf = optarg;
            break;
        case O_USER_CONF:
            if (o->n_user_conf == MAX_USER_CONFS)
                return cmn_errf(eb, CMN_ECONFIG, "--user-conf: at most %d files", MAX_USER_CONFS);
            o->user_conf[o->n_user_conf++] = optarg;
            break;
        case O_AUDIT:
            o->audit = optarg;
            break;
        case O_SET:
            if (o->n_sets == MAX_SETS)
                return cmn_errf(eb, CMN_ECONFIG, "--set: at most %d fields", MAX_SETS);
            o->sets[o->n_sets++] = optarg;
            break;
        case O_QSL_NPY:
            o->qsl_npy = optarg;
            break;
        case O_QSL_RAW:
            o->qsl_raw = optarg;
            break;
        case O_QSL_SYNTH:
            rc = need_u64("--qsl-synthetic", optarg, &o->synth_n, eb);
            o->have_synth = 1;
            break;
        case O_SAMPLE_SIZE:
            if (cmn_parse_size(optarg, &o->sample_size) < 0)
                rc = cmn_errf(eb, CMN_ECONFIG, "--sample-size: '%s' is not a byte count", optarg);
            break;
        case O_SYNTH_KIND:
            o->synth_kind = optarg;
            break;
        case O_SYNTH_SEED:
            rc = need_u64("--synthetic-seed", optarg, &o->synth_seed, eb);
            break;
        case O_PERF_COUNT:
            rc = need_u64("--performance-count", optarg, &o->perf_count, eb);
            break;
        case O_COMPRESS:
            o->compress = optarg;
            break;
        case O_SUT:
            o->sut = optarg;
            break;
        case O_NODES:
            o->nodes = optarg;
            break;
        case O_CONNECTIONS:
            rc = need_u64("--connections", optarg, &o->connections, eb);
            break;
        case O_POLICY:
            o->policy = optarg;
            break;
        case O_RESULT_CODEC:
            o->result_codec = optarg;
            break;
        case O_TLS_CA:
            o->tls_ca = optarg;
            break;
        case O_TLS_CERT:
            o->tls_cert = optarg;
            break;
        case O_TLS_KEY:
            o->tls_key = optarg;
            break;
        case O_TLS_NAME:
            o->tls_name = optarg;
            break;
        case O_NULL_THREADED:
            o->null.threaded = 1;
            break;
        case O_NULL_DELAY:
            rc = need_u64("--null-delay-us", optarg, &u, eb);
            o->null.delay_ns = u * 1000u;
            o->null.threaded = 1;
            break;
        case O_NULL_RESP:
            rc = need_u64("--null-response-bytes", optarg, &u, eb);
            if (rc == 0 && u > 64)
                rc = cmn_errf(eb, CMN_ECONFIG, "--null-response-bytes: at most 64");
            o->null.response_size = (size_t)u;
            break;
        case O_NULL_TOKENS:
            rc = need_u64("--null-tokens", optarg, &u, eb);
            o->null.n_tokens = (int64_t)u;
            break;
        case O_NULL_DIGEST:
            o->null.digest = 1;
            break;
        case O_VERIFY:
            o->log.verify_digest = true;
            break;
        case O_SAMPLE_LAT:
            o->log.sample_latencies = true;
            break;
        case O_LAT_INTERVALS:
            rc = need_u64("--latency-intervals", optarg, &u, eb);
            if (rc == 0 && u == 0)
                rc = cmn_errf(eb, CMN_ECONFIG, "--latency-intervals: an interval of at least 1 ms");
            o->log.latency_interval_ms = u;
            break;
        case O_VERSION:
            printf("%s\ngit commit %s (%s), built %s\n", LG_VERSION_STRING, BUILD_GIT_COMMIT,
                   BUILD_GIT_COMMIT_DATE, BUILD_DATE_UTC);
            exit(0);
        case O_OUTDIR:
            o->outdir = optarg;
            break;
        case O_PREFIX:
            o->log.prefix = optarg;
            break;
        case O_SUFFIX:
            o->log.suffix = optarg;
            break;
        case O_DATETIME:
            o->log.prefix_with_datetime = true;
            break;
        case O_QUIET:
            o->log.copy_summary_to_stdout = false;
            break;
        case O_PROGRESS:
            if (strcmp(optarg, "auto") == 0)
                o->log.progress = LG_PROGRESS_AUTO;
            else if (strcmp(optarg, "on") == 0)
                o->log.progress = LG_PROGRESS_ON;
            else if (strcmp(optarg, "off") == 0)
                o->log.progress = LG_PROGRESS_OFF;
            else
                rc = cmn_errf(eb, CMN_ECONFIG, "--progress: '%s' is not auto, on or off", optarg);
            break;
        case O_DRAIN:
            rc = need_u64("--drain-timeout-ms", optarg, &o->log.drain_timeout_ms, eb);
            break;
        case O_SPIN:
            rc = need_spin_us("--spin-us", optarg, &o->log.spin_ns, eb);
            break;
        case O_WAIT_SPIN:
            rc = need_spin_us("--wait-spin-us", optarg, &o->log.wait_spin_ns, eb);
            break;
        case O_LOG_LEVEL:
            if (cmn_log_level_parse(optarg, &lvl) < 0)
                rc = cmn_errf(eb, CMN_ECONFIG,
                              "--log-level: '%s' is not error, warn, info or debug", optarg);
            else
                cmn_log_set_level(lvl);
            break;
        case 'h':
            fputs(usage_text, stdout);
            exit(EXIT_VALID);
        default:
            if (optopt)
                return cmn_errf(eb, CMN_ECONFIG, "unknown option or missing value: %s",
                                argv[optind - 1]);
            return cmn_errf(eb, CMN_ECONFIG, "unknown option %s (see --help)", argv[optind - 1]);
        }
    }
    if (rc < 0)
        return rc;
    if (optind < argc)
        return cmn_errf(eb, CMN_ECONFIG, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->scenario)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario is required (SingleStream, MultiStream, Server "
                        "or Offline)");
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
    if (o->audit && strcmp(o->audit, "none") == 0)
        o->log.audit_config = NULL;
    else if (o->audit)
        o->log.audit_config = o->audit;
    o->log.outdir = o->outdir;
    return 0;
}

static int load_settings(const opts_t *o, lg_test_settings_t *s, lg_msgs_t *msgs, cmn_errbuf_t *eb)
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
        if (rc < 0)
            return rc;
    }
    for (i = 0; i < o->n_user_conf; i++) {
        rc = lg_test_settings_from_config(s, o->user_conf[i], o->model, lg_scenario_name(sc),
                                          LG_CONF_USER, msgs, eb);
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
    return 0;
}

static int open_qsl(const opts_t *o, lg_qsl_t **q, cmn_errbuf_t *eb)
{
    lg_synth_kind_t kind = LG_SYNTH_RANDOM;
    int codec = CMPR_NONE, rc;

    if (o->compress && cmpr_codec_parse(o->compress, &codec) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--compress: '%s' is not none or lz4", o->compress);
    if (o->synth_kind) {
        if (strcmp(o->synth_kind, "image") == 0)
            kind = LG_SYNTH_IMAGE;
        else if (strcmp(o->synth_kind, "tokens") == 0)
            kind = LG_SYNTH_TOKENS;
        else if (strcmp(o->synth_kind, "random") != 0)
            return cmn_errf(eb, CMN_ECONFIG,
                            "--synthetic-kind: '%s' is not random, image or tokens", o->synth_kind);
    }
    if (o->qsl_npy)
        rc = lg_qsl_open_npy(o->qsl_npy, q, eb);
    else if (o->qsl_raw)
        rc = lg_qsl_open_raw(o->qsl_raw, (size_t)o->sample_size, q, eb);
    else
        rc = lg_qsl_open_synthetic((size_t)o->synth_n, (size_t)o->sample_size, kind, o->synth_seed,
                                   q, eb);
    if (rc < 0)
        return rc;
    if (o->perf_count)
        lg_qsl_set_performance_count(*q, (size_t)o->perf_count);
    if (codec != CMPR_NONE) {
        rc = lg_qsl_set_codec(*q, codec, o->model, eb);
        if (rc < 0) {
            lg_qsl_close(*q);
            *q = NULL;
        }
    }
    return rc;
}

#ifdef LG_HAVE_QDL
static int open_qdl(const opts_t *o, lg_sut_t **sut, cmn_errbuf_t *eb)
{
    char *list = strdup(o->nodes), *tok, *save = NULL;
    const char *nodes[MAX_NODES];
    qdl_config_t cfg;
    size_t n = 0;
    int rc, codec = CMPR_NONE;

    if (!list)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_NODES) {
            free(list);
            return cmn_errf(eb, CMN_ECONFIG, "--nodes: at most %d nodes", MAX_NODES);
        }
        nodes[n++] = tok;
    }
    if (n == 0) {
        free(list);
        return cmn_errf(eb, CMN_ECONFIG, "--nodes: no address given");
    }
    qdl_config_init(&cfg);
    cfg.nodes = nodes;
    cfg.n_nodes = n;
    cfg.connections_per_node = (unsigned)o->connections;
    if (o->policy) {
        if (strcmp(o->policy, "least-outstanding") == 0)
            cfg.policy = QDL_POLICY_LEAST_OUTSTANDING;
        else if (strcmp(o->policy, "round-robin") == 0)
            cfg.policy = QDL_POLICY_ROUND_ROBIN;
        else if (strcmp(o->policy, "weighted") == 0)
            cfg.policy = QDL_POLICY_WEIGHTED;
        else {
            free(list);
            return cmn_errf(eb, CMN_ECONFIG,
                            "--policy: '%s' is not least-outstanding, round-robin or weighted",
                            o->policy);
        }
    }
    if (o->result_codec && cmpr_codec_parse(o->result_codec, &codec) < 0) {
        free(list);
        return cmn_errf(eb, CMN_ECONFIG, "--result-codec: '%s' is not none or lz4",
                        o->result_codec);
    }
    cfg.result_codec = codec;
    cfg.tls_ca_file = o->tls_ca;
    cfg.tls_cert_file = o->tls_cert;
    cfg.tls_key_file = o->tls_key;
    cfg.tls_server_name = o->tls_name;
    rc = lg_sut_qdl_create(&cfg, sut, eb);
    free(list);
    return rc;
}
#endif

int main(int argc, char **argv)
{
    opts_t o;
    lg_test_settings_t settings;
    lg_msgs_t msgs = {0};
    lg_qsl_t *qsl = NULL;
    lg_sut_t *sut = NULL;
    lg_result_t res;
    cmn_errbuf_t eb = {{0}};
    int use_qdl, rc, code;
    size_t i;

    cmn_log_init("loadgen-node", CMN_LOG_INFO);
    /* A node closing mid-write must be an error code on that connection, not a signal that kills
     * the whole run. */
    signal(SIGPIPE, SIG_IGN);
    if (parse_args(argc, argv, &o, &eb) < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return EXIT_USAGE;
    }
    if (load_settings(&o, &settings, &msgs, &eb) < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return EXIT_USAGE;
    }
    for (i = 0; i < msgs.n; i++)
        cmn_log(msgs.m[i].is_error ? CMN_LOG_ERROR : CMN_LOG_WARN, "%s: %s", msgs.m[i].key,
                msgs.m[i].text);
    if (!o.mlperf_conf)
        cmn_log_warn("no --mlperf-conf: the TestSettings defaults apply (seeds 0 unless --set "
                     "gives them); not valid for a submission");
    o.log.msgs = &msgs;

    use_qdl = o.sut ? strcmp(o.sut, "qdl") == 0 : o.nodes != NULL;
    if (o.sut && !use_qdl && strcmp(o.sut, "null") != 0) {
        fprintf(stderr, "loadgen-node: --sut: '%s' is not null or qdl\n", o.sut);
        return EXIT_USAGE;
    }
    if (use_qdl && !o.nodes) {
        fprintf(stderr, "loadgen-node: --sut qdl needs --nodes host:port,...\n");
        return EXIT_USAGE;
    }
    if (!use_qdl && !o.sut) {
        fprintf(stderr, "loadgen-node: give --nodes host:port,... (the QDL) or --sut null\n");
        return EXIT_USAGE;
    }
#ifndef LG_HAVE_QDL
    if (use_qdl) {
        fprintf(stderr, "loadgen-node: this build has no QDL (the qdl library was not built); "
                        "only --sut null is available\n");
        return EXIT_USAGE;
    }
#endif
    rc = open_qsl(&o, &qsl, &eb);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return rc == CMN_EPOLICY || rc == CMN_ECONFIG ? EXIT_USAGE : EXIT_FAILED;
    }
    rc = refuse_used_outdir(o.outdir, &o.log, &eb);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        lg_qsl_close(qsl);
        return EXIT_USAGE;
    }
    rc = mkdir_p(o.outdir, &eb);
    if (rc < 0)
        goto fail;
#ifdef LG_HAVE_QDL
    if (use_qdl)
        rc = open_qdl(&o, &sut, &eb);
    else
#endif
        rc = lg_sut_null_create(&o.null, &sut, &eb);
    if (rc < 0)
        goto fail;

    rc = lg_start_test(sut, qsl, &settings, &o.log, &res, &eb);
#ifdef LG_HAVE_QDL
    if (use_qdl) {
        qdl_stats_print(lg_sut_qdl_handle(sut), stderr);
        lg_sut_qdl_destroy(sut);
    } else
#endif
        lg_sut_null_destroy(sut);
    lg_qsl_close(qsl);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return EXIT_FAILED;
    }
    /* A performance result counts by its validity (which sample failures already spoil); an
     * accuracy log is only usable when nothing went wrong while it was written. */
    code = EXIT_VALID;
    if (!res.performance_ran && !res.accuracy_ran)
        code = EXIT_INVALID;
    if (res.performance_ran && !res.performance_valid)
        code = EXIT_INVALID;
    if (res.accuracy_ran &&
        (res.num_errors || res.failed_samples || res.lost_samples || res.digest_mismatches))
        code = EXIT_INVALID;
    if (res.failed_samples || res.lost_samples || res.digest_mismatches)
        fprintf(stderr,
                "loadgen-node: %llu samples failed, %llu were lost, %llu responses did not match "
                "their digest (see %s)\n",
                (unsigned long long)res.failed_samples, (unsigned long long)res.lost_samples,
                (unsigned long long)res.digest_mismatches, o.outdir);
    else if (res.num_errors)
        fprintf(stderr, "loadgen-node: %llu errors were logged in %s/%sdetail%s.txt\n",
                (unsigned long long)res.num_errors, o.outdir, o.log.prefix, o.log.suffix);
    return code;

fail:
    fprintf(stderr, "loadgen-node: %s\n", eb.msg);
    lg_qsl_close(qsl);
    return EXIT_FAILED;
}
