/* loadgen-node's options: the table below is the parser, the --help text and the --config keys. */
#include "args.h"

#include "build_info.h"

#include "cmn/conf.h"
#include "cmn/log.h"
#include "cmn/opts.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The table's rows are common's option descriptors (cmn/opts.h): a numeric value (U64 and SIZE,
 * stored in a uint32_t or uint64_t field, and FNNUM) is parsed and checked against [min, max]
 * before it is stored or the setter sees it, so every bound lives in the table. */
#define STR(n, a, f, h) CMN_OPT_STR(lg_args_t, n, a, f, h)
#define U64(n, a, f, lo, hi, u, h) CMN_OPT_NUM(lg_args_t, n, a, f, CMN_OPT_INT, lo, hi, u, NULL, h)
#define SIZE(n, a, f, lo, hi, u, h) \
    CMN_OPT_NUM(lg_args_t, n, a, f, CMN_OPT_SIZE, lo, hi, u, NULL, h)
#define FNNUM(n, a, fn, nk, lo, hi, u, h) CMN_OPT_FNNUM(n, a, fn, nk, lo, hi, u, h)
#define FLAG(n, f, h) CMN_OPT_FLAG(lg_args_t, n, f, h)
#define FN(n, a, fn, h) CMN_OPT_FN(n, a, fn, h)
#define SECTION(t) CMN_OPT_SECTION(t)
#define N_INT CMN_OPT_INT
#define N_SIZE CMN_OPT_SIZE

static int set_user_conf(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_set(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_synth(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_write_thread(void *dst, const char *name, const char *v, uint64_t u,
                            cmn_errbuf_t *eb);
static int set_null(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_quiet(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_progress(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_issue_thread_io(void *dst, const char *name, const char *v, uint64_t u,
                               cmn_errbuf_t *eb);
static int set_spin(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_issue_cpu(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_log_level(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);

/* Bounds of the numeric options: a sample index has 31 bits (gen.h), a sample is at most a
 * frame (4 GiB - 1), and a time beyond a day is a mistake that ns arithmetic could wrap. */
#define LG_ARGS_MAX_SAMPLES 0x7fffffffu
#define LG_ARGS_MAX_SAMPLE_SIZE 0xffffffffu
#define LG_ARGS_MAX_MS 86400000u
/* What nodes may make the QDL hold: up to 1 TiB (the QDL checks at least 16 KiB a connection). */
#define LG_ARGS_MAX_NODE_BUDGET (1ull << 40)

static const cmn_opt_t options[] = {
    SECTION("Test"),
    STR("scenario", "S", scenario,
        "SingleStream, MultiStream, Server, Offline or Interactive (required;\n"
        "Interactive: the Server scenario with the settings of\n"
        "<--model>-interactive, as the references run it; the logs say Server)"),
    STR("mode", "M", mode,
        "PerformanceOnly (default), AccuracyOnly, SubmissionRun (accuracy\n"
        "then performance) or FindPeakPerformance (Server only)"),
    STR("model", "NAME", model,
        "benchmark name as in mlperf.conf (resnet50, bert-99, llama2-70b,\n"
        "llama3_1-8b, deepseek-r1, gpt-oss-120b...); selects the conf keys\n"
        "and the compression rules"),
    STR("mlperf-conf", "PATH", mlperf_conf,
        "the official mlperf.conf, read unchanged (seeds, per-model\n"
        "minimums); without it the TestSettings defaults apply (seeds 0).\n"
        "--loadgen official reads its compiled-in copy: a PATH whose keys\n"
        "differ from it is refused (exit 2)"),
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
    STR("qsl-kits", "DIR", qsl_kits,
        "3D-UNet: the KiTS19 cases kits_pickle_to_qsl.py converts, each\n"
        "sent with its shape (a 32-byte volume header)"),
    STR("qsl-llm-json", "FILE", qsl_llm_json,
        "an LLM data set as the references ship it in JSON (llama3.1-8b's\n"
        "cnn_eval.json): an array of objects, one per sample, the prompt's\n"
        "token IDs in --llm-field; each sample goes as int32 token IDs"),
    STR("llm-field", "NAME", llm_field,
        "the --qsl-llm-json field holding the token IDs (default tok_input)"),
    STR("qsl-raw", "FILE", qsl_raw, "back-to-back records of --sample-size bytes"),
    FNNUM("qsl-synthetic", "N", set_synth, N_INT, 1, LG_ARGS_MAX_SAMPLES, " samples",
          "N generated samples of --sample-size bytes"),
    SIZE("sample-size", "N", sample_size, 1, LG_ARGS_MAX_SAMPLE_SIZE, " bytes",
         "record or synthetic sample size (K, M, G suffixes allowed)"),
    STR("synthetic-kind", "K", synth_kind,
        "random (default), image (compressible, image-like bytes) or tokens\n"
        "(BERT-like padded int32 token ids, mask and segment ids)"),
    U64("synthetic-seed", "N", synth_seed, 0, UINT64_MAX, "",
        "seed of the synthetic bytes (default 1)"),
    U64("performance-count", "N", perf_count, 0, LG_ARGS_MAX_SAMPLES, " samples",
        "the QSL's PerformanceSampleCount (default: all samples); the\n"
        "performance_sample_count_override of mlperf.conf takes precedence"),
    STR("compress", "CODEC", compress,
        "none (default) or lz4: compress each sample at load time\n"
        "(untimed), only where the benchmark's rules allow it"),
    SECTION("System under test"),
    STR("sut", "KIND", sut, "qdl (the default when --nodes is given) or null (in-process)"),
    STR("nodes", "H:P,H:P", nodes,
        "sut-node addresses for the QDL (IPv6 as [ADDR]:PORT); an entry\n"
        "openai+http://H:P[/PATH][?dialect=D] (or openai+https://) is an\n"
        "OpenAI-compatible serving engine the QDL streams to itself"),
    STR("endpoint-dialect", "D", ep_dialect,
        "endpoints' dialect: vllm (default), trtllm, sglang or llamacpp"),
    STR("endpoint-model", "NAME", ep_model, "\"model\" of endpoint requests (default model)"),
    U64("endpoint-max-tokens", "N", ep_max_tokens, 1, 1000000, "",
        "output tokens asked of an endpoint per sample (default 1024)"),
    U64("endpoint-min-tokens", "N", ep_min_tokens, 0, 1000000, "",
        "minimum output tokens asked of an endpoint (default 0)"),
    U64("endpoint-max-inflight", "N", ep_max_inflight, 1, 65536, "",
        "streams in flight per endpoint (default 256)"),
    STR("endpoint-api-key-file", "FILE", ep_key_file,
        "a file holding the endpoints' API key (Authorization: Bearer)"),
    STR("endpoint-ca", "FILE", ep_ca,
        "CA that signed the openai+https:// endpoints' certificates\n"
        "(default: --tls-ca, else the system's CAs)"),
    STR("endpoint-client", "C", ep_client,
        "endpoints' HTTP client: lean (default: httpc's HTTP/1.1 client on\n"
        "the QDL's loop, its own TLS for openai+https://) or curl (libcurl)"),
    STR("endpoint-session-header", "NAME", ep_session,
        "a header naming each sample's session (e.g. X-Session-ID)"),
    U64("connections", "N", connections, 1, 64, "", "connections per node (QDL, default 1)"),
    FNNUM("write-thread-min", "BYTES", set_write_thread, N_SIZE, 0, 1u << 30, " bytes",
          "a write thread per connection: frames of a loop turn making\n"
          "at least BYTES leave from it (QDL, tcp://, K and M suffixes;\n"
          "default 0: every write from the QDL loop; see qdl/README.md)"),
    U64("progress-timeout-ms", "N", progress_timeout_ms, 0, LG_ARGS_MAX_MS, " ms",
        "a node holding samples without completing any for N ms is marked\n"
        "degraded and its samples go elsewhere (QDL; default 0: 10 s, 60 s\n"
        "when streaming, or 4 x the node's slowest completion if longer)"),
    U64("wait-for-nodes", "SECONDS", wait_for_nodes, 0, 86400, " s",
        "wait up to SECONDS for every node to be ready (its engine up,\n"
        "its port listening), asking again with each handshake; default 0:\n"
        "a node that is not ready stops the run at once (exit 4) (QDL)"),
    U64("max-dispatches", "N", max_dispatches, 1, 1000, "",
        "a sample sent N times without a result fails (QDL, 1-1000,\n"
        "default 3)"),
    SIZE("node-memory-budget", "BYTES", node_memory_budget, 16384, LG_ARGS_MAX_NODE_BUDGET,
         " bytes",
         "what nodes may make the QDL hold (frames, decoded results),\n"
         "shared by every connection; a node past its share is dropped\n"
         "(QDL, K M G suffixes, at least 16K per connection, default 1G)"),
    STR("policy", "P", policy,
        "least-outstanding (default: fewest requests pending), least-tokens\n"
        "(fewest prompt + expected output tokens), round-robin or weighted"),
    STR("result-codec", "CODEC", result_codec,
        "codec offered for responses: none (default) or lz4 (QDL)"),
    STR("tls-ca", "FILE", tls_ca,
        "CA that signed the nodes' certificates (QDL, TLS 1.3; and the\n"
        "openai+https:// endpoints' unless --endpoint-ca)"),
    STR("tls-cert", "FILE", tls_cert, "client certificate for mutual TLS (QDL)"),
    STR("tls-key", "FILE", tls_key, "private key of --tls-cert (QDL)"),
    STR("tls-server-name", "NAME", tls_name, "name expected in the nodes' certificates (QDL)"),
    FLAG("ucx-busy-poll", ucx_busy_poll,
         "progress UCX on every QDL loop turn instead of sleeping on its\n"
         "event fd (ucx:// nodes): lowest latency, one core busy"),
    FLAG("ucx-trusted-fabric", ucx_trusted_fabric,
         "required for ucx:// nodes: UCX 1.13 aborts the process on\n"
         "malformed connection bytes from any peer that reaches its ports,\n"
         "so ucx:// is for a fabric where every host is trusted"),
    FN("null-threaded", NULL, set_null,
       "null SUT: complete from a helper thread (default: inline)"),
    FNNUM("null-delay-us", "N", set_null, N_INT, 0, 60000000, " us",
          "null SUT: complete N us after the issue (implies threaded)"),
    FNNUM("null-response-bytes", "N", set_null, N_INT, 0, 64, " bytes",
          "null SUT: response size (default 4, at most 64)"),
    FNNUM("null-tokens", "N", set_null, N_INT, 0, 1000000, "",
          "null SUT: stream a first token and report N output tokens"),
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
        "serve Prometheus metrics at http://ADDR:PORT/metrics during the\n"
        "run (port 0: a free one, logged; README.md lists them)"),
    U64("metrics-linger-ms", "MS", metrics_linger_ms, 0, 3600000, " ms",
        "keep serving them this long after the run, so a scraper sees the\n"
        "final values and the result (default 0)"),
    STR("metrics-push", "URL", metrics_push,
        "at the end, PUT the final metrics to a Prometheus Pushgateway at\n"
        "URL/metrics/job/loadgen (a batch run's alternative to scraping)"),
    STR("log-prefix", "P", log.prefix, "log file prefix (default mlperf_log_)"),
    STR("log-suffix", "S", log.suffix, "log file suffix (default none)"),
    FLAG("prefix-datetime", log.prefix_with_datetime,
         "put the date and time in the log file names"),
    FN("quiet", NULL, set_quiet, "do not print the summary at the end"),
    FN("progress", "WHEN", set_progress,
       "auto (default: a live line when stderr is a terminal, else\n"
       "plain lines), on (the live line), lines, off"),
    U64("progress-interval-ms", "N", log.progress_interval_ms, 100, LG_ARGS_MAX_MS, " ms",
        "one plain progress line every N ms (default 10000)"),
    FLAG("sample-latencies", log.sample_latencies,
         "also write <prefix>sample_latencies.csv: sample_seq,scheduled_ns,\n"
         "latency_ns,...,ttft_ns,n_tokens,node_queue_ns,node_backend_ns,\n"
         "wire_return_ns,issue_late_cause for every performance-run\n"
         "sample (for plots: see deploy/plot/latplot.py)"),
    U64("latency-intervals", "MS", log.latency_interval_ms, 1, LG_ARGS_MAX_MS, " ms",
        "also write <prefix>latency_intervals.csv: per MS of scheduled\n"
        "time, the samples and their p50/p90/p99/p99.9/max latency"),
    U64("drain-timeout-ms", "N", log.drain_timeout_ms, 0, LG_ARGS_MAX_MS, " ms",
        "count samples still outstanding N ms after the last issue as lost\n"
        "(errors) instead of waiting forever (default 0: wait)"),
    FNNUM("spin-us", "N", set_spin, N_INT, 0, 1000000, " us",
          "Server: never sleep when less than the measured cost of a sleep\n"
          "plus N us remains before a scheduled issue; spin instead (default 30)"),
    U64("spin-budget", "PCT", log.spin_budget_pct, 1, 100, " %",
        "Server: spin at most PCT % of the run's wall time (1-100, default\n"
        "100: up to one core); past it short gaps are slept and issued late\n"
        "(the summary's harness block shows the spin share and the lateness)"),
    FNNUM("issue-cpu", "N", set_issue_cpu, N_INT, 0, CPU_SETSIZE - 1, "",
          "while a series issues, the issue thread has CPU N alone: every other\n"
          "thread of loadgen-node (the QDL's included) is kept off it (default:\n"
          "none); on a host with few cores, pin a local sut-node off it too\n"
          "(taskset). The harness block shows it"),
    FN("issue-thread-io", "on|off", set_issue_thread_io,
       "Server through the QDL: the issue thread runs the QDL's network\n"
       "I/O between issues while the QDL's own thread sleeps (default on;\n"
       "off, and with --issue-cpu: every query handed to the QDL's thread)"),
    FN("issue-write-thread", "on|off", set_issue_thread_io,
       "with the I/O on the issue thread, a write thread per tcp://\n"
       "connection writes the frames, so the issue thread never calls\n"
       "writev (default off; loadgen-node/README.md)"),
    FNNUM("wait-spin-us", "N", set_spin, N_INT, 0, 1000000, " us",
          "SingleStream/MultiStream: spin up to N us for a query's\n"
          "completion before sleeping (default 150)"),
    FN("wait-spin-adapt", "on|off", set_issue_thread_io,
       "stop that spin for a while when the thread keeps losing its\n"
       "CPU to others (a busy host: the spin would take the CPU the\n"
       "SUT's threads need; default on); off: always spin"),
    STR("loadgen", "L", loadgen,
        "builtin (default: this scheduler) or official: the unaltered\n"
        "official LoadGen over the QDL (only in builds given\n"
        "-DMLPERF_LOADGEN_ROOT; the one for official results)"),
    FN("log-level", "L", set_log_level, "error, warn, info (default) or debug"),
    CMN_OPT_ACT("config", "FILE",
                "read options from FILE (key = value lines, keys as the long\n"
                "options; the command line wins)"),
    CMN_OPT_ACT("version", NULL, "print the version and exit"),
    CMN_OPT_ACT("help", NULL, "this text (also -h)"),
    CMN_OPT_HIDDEN_ACT("list-options"),
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static void usage(FILE *f)
{
    fputs(
        "Usage: loadgen-node --scenario S [--model M] [--mlperf-conf PATH] [--user-conf PATH]\n"
        "                    (--qsl-npy PATH | --qsl-kits DIR | --qsl-llm-json FILE\n"
        "                     [--llm-field NAME] | --qsl-raw FILE --sample-size N |\n"
        "                     --qsl-synthetic N --sample-size N) [--sut null | --nodes H:P,...]\n"
        "\n"
        "Runs an MLPerf Inference LoadGen test (the official LoadGen 6.0.17 trace, metrics and\n"
        "logs) against sut-node daemons over the network (the QDL) or against an in-process null\n"
        "SUT, and writes mlperf_log_summary.txt, mlperf_log_detail.txt and\n"
        "mlperf_log_accuracy.json. Exit status: 0 for a VALID run (and accuracy runs without\n"
        "errors), 1 for an INVALID run or sample errors, 2 for bad arguments or configuration,\n"
        "3 when the test could not run, 4 when a node is not ready (see --wait-for-nodes),\n"
        "130 when interrupted (SIGINT/SIGTERM).\n",
        f);
    cmn_opts_help(f, options, N_OPTIONS, 22, 1);
}

static int set_user_conf(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)u;
    if (o->n_user_conf == LG_ARGS_MAX_USER_CONFS)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: at most %d files", name, LG_ARGS_MAX_USER_CONFS);
    o->user_conf[o->n_user_conf++] = v;
    return 0;
}

static int set_set(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)u;
    if (o->n_sets == LG_ARGS_MAX_SETS)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: at most %d fields", name, LG_ARGS_MAX_SETS);
    o->sets[o->n_sets++] = v;
    return 0;
}

static int set_synth(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)name, (void)v, (void)eb;
    o->have_synth = 1;
    o->synth_n = u;
    return 0;
}

static int set_write_thread(void *dst, const char *name, const char *v, uint64_t u,
                            cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)name, (void)v, (void)eb;
    o->write_thread_min = u;
    o->have_write_thread_min = 1;
    return 0;
}

static int set_null(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)v, (void)eb;
    if (strcmp(name, "null-threaded") == 0) {
        o->null.threaded = 1;
    } else if (strcmp(name, "null-delay-us") == 0) {
        o->null.delay_ns = u * 1000u; /* the table bounds u far below UINT64_MAX / 1000 */
        o->null.threaded = 1;
    } else if (strcmp(name, "null-response-bytes") == 0) {
        o->null.response_size = (size_t)u;
    } else if (strcmp(name, "null-tokens") == 0) {
        o->null.n_tokens = (int64_t)u;
    } else {
        o->null.digest = 1;
    }
    return 0;
}

static int set_quiet(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)name, (void)v, (void)u, (void)eb;
    o->log.copy_summary_to_stdout = false;
    return 0;
}

static int set_progress(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)u;
    if (strcmp(v, "auto") == 0)
        o->log.progress = LG_PROGRESS_AUTO;
    else if (strcmp(v, "on") == 0)
        o->log.progress = LG_PROGRESS_ON;
    else if (strcmp(v, "lines") == 0)
        o->log.progress = LG_PROGRESS_LINES;
    else if (strcmp(v, "off") == 0)
        o->log.progress = LG_PROGRESS_OFF;
    else
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not auto, on, lines or off", name, v);
    return 0;
}

static int set_issue_thread_io(void *dst, const char *name, const char *v, uint64_t u,
                               cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    bool *flag = strcmp(name, "wait-spin-adapt") == 0      ? &o->log.wait_spin_adapt
                 : strcmp(name, "issue-write-thread") == 0 ? &o->issue_write_thread
                                                           : &o->log.issue_thread_io;

    (void)u;
    if (strcmp(v, "on") == 0)
        *flag = true;
    else if (strcmp(v, "off") == 0)
        *flag = false;
    else
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not on or off", name, v);
    return 0;
}

static int set_spin(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)v, (void)eb;
    if (strcmp(name, "spin-us") == 0)
        o->log.spin_ns = u * 1000u;
    else
        o->log.wait_spin_ns = u * 1000u;
    return 0;
}

static int set_issue_cpu(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    (void)name, (void)v, (void)eb;
    o->log.issue_cpu = (int)u;
    return 0;
}

static int set_log_level(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;

    cmn_log_level_t lvl;

    (void)o, (void)u;
    if (cmn_log_level_parse(v, &lvl) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: '%s' is not error, warn, info or debug", name, v);
    cmn_log_set_level(lvl);
    return 0;
}

/* A config file's value lives as long as the options (lg_args_free). */
static int keep_conf(void *dst, char *s, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;
    char **owned = realloc(o->owned, (o->n_owned + 1) * sizeof(*owned));

    if (!owned) {
        free(s);
        return cmn_errf(eb, -ENOMEM, "out of memory");
    }
    o->owned = owned;
    o->owned[o->n_owned++] = s;
    return 0;
}

/* The first pass's options: --config reads its file (0, or its error); --help, --version and
 * --list-options (not in --help: for tests that walk every option: "option NAME KIND MIN MAX" a
 * line (cmn_opts_list), then the --set fields and the conf keys) print and exit. */
static int act(void *dst, const cmn_opt_t *d, const char *val, cmn_errbuf_t *eb)
{
    lg_args_t *o = dst;
    int rc;

    if (strcmp(d->name, "config") == 0) {
        o->config_file = val;
        rc = cmn_opts_conf_file(val, options, N_OPTIONS, o, keep_conf, eb);
        return rc < 0 && rc != -ENOMEM ? CMN_ECONFIG : rc;
    }
    if (strcmp(d->name, "help") == 0) {
        usage(stdout);
    } else if (strcmp(d->name, "list-options") == 0) {
        cmn_opts_list(stdout, options, N_OPTIONS);
        lg_settings_keys_print(stdout);
    } else {
        printf("%s\ngit commit %s (%s), built %s\n", LG_VERSION_STRING, BUILD_GIT_COMMIT,
               BUILD_GIT_COMMIT_DATE, BUILD_DATE_UTC);
    }
    exit(0);
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
    } else if (len > 14 && (strncmp(a, "openai+http://", 14) == 0 ||
                            (len > 15 && strncmp(a, "openai+https://", 15) == 0))) {
        /* an endpoint: HOST:PORT, then an optional /PATH and ?dialect=D (the QDL checks those) */
        const char *stop;
        a += a[11] == 's' ? 15 : 14;
        len = (size_t)(end - a);
        for (stop = a; stop < end && *stop != '/' && *stop != '?'; stop++)
            ;
        end = stop;
        len = (size_t)(end - a);
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

/* --scenario Interactive. The official LoadGen has no such scenario: the references run Server
 * with the settings mlperf.conf keys under "<model>-interactive" (tighter TTFT/TPOT bounds,
 * target_latency 0). Mapping it here gives both front ends the same model name and scenario, so
 * their logs are the official ones for such a run (scenario Server). */
static int map_interactive(lg_args_t *o, cmn_errbuf_t *eb)
{
    static const char sfx[] = "-interactive";
    size_t n, ns = sizeof(sfx) - 1;

    if (strcasecmp(o->scenario, "Interactive") != 0)
        return 0;
    if (!o->model)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario Interactive needs --model: its settings are those of "
                        "<model>-interactive in mlperf.conf (e.g. --model llama3_1-8b)");
    n = strlen(o->model);
    if (snprintf(o->interactive_model, sizeof(o->interactive_model), "%s%s", o->model,
                 n >= ns && strcmp(o->model + n - ns, sfx) == 0 ? "" : sfx) >=
        (int)sizeof(o->interactive_model))
        return cmn_errf(eb, CMN_ECONFIG, "--model: '%s' is too long (at most %zu characters)",
                        o->model, sizeof(o->interactive_model) - ns - 1);
    o->model = o->interactive_model;
    o->scenario = "Server";
    o->interactive = 1;
    return 0;
}

static int check_args(lg_args_t *o, cmn_errbuf_t *eb)
{
    int rc;

    if (!o->scenario)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario is required (SingleStream, MultiStream, Server, Offline or "
                        "Interactive)");
    if ((rc = map_interactive(o, eb)) < 0)
        return rc;
    if ((o->qsl_npy != NULL) + (o->qsl_kits != NULL) + (o->qsl_raw != NULL) +
            (o->qsl_llm_json != NULL) + o->have_synth !=
        1)
        return cmn_errf(eb, CMN_ECONFIG,
                        "exactly one of --qsl-npy, --qsl-kits, --qsl-llm-json, --qsl-raw and "
                        "--qsl-synthetic is required");
    if (o->llm_field && !o->qsl_llm_json)
        return cmn_errf(eb, CMN_ECONFIG, "--llm-field names a field of --qsl-llm-json's file");
    if (o->llm_field && !o->llm_field[0])
        return cmn_errf(eb, CMN_ECONFIG, "--llm-field: an empty name");
    if ((o->qsl_raw || o->have_synth) && o->sample_size == 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s needs --sample-size",
                        o->qsl_raw ? "--qsl-raw" : "--qsl-synthetic");
    if ((o->mlperf_conf || o->n_user_conf || o->compress) && !o->model)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--model is required with conf files and --compress (it selects the keys "
                        "and the compression rules)");
    /* Rules 6.2.4: the benchmark's row governs the QDL's decompression of results too. */
    if (o->result_codec && strcmp(o->result_codec, "none") != 0) {
        cmn_errbuf_t why = {{0}};

        if (cmpr_policy_check(o->model, CMPR_LZ4, &why) < 0)
            return cmn_errf(eb, CMN_ECONFIG, "--result-codec: %s", why.msg);
    }
    if (o->sut && strcmp(o->sut, "qdl") != 0 && strcmp(o->sut, "null") != 0)
        return cmn_errf(eb, CMN_ECONFIG, "--sut: '%s' is not null or qdl", o->sut);
    if (o->sut && strcmp(o->sut, "qdl") == 0 && !o->nodes)
        return cmn_errf(eb, CMN_ECONFIG, "--sut qdl needs --nodes host:port,...");
    if (!o->sut && !o->nodes)
        return cmn_errf(eb, CMN_ECONFIG, "give --nodes host:port,... (the QDL) or --sut null");
    if (o->nodes && (rc = check_nodes(o->nodes, eb)) < 0)
        return rc;
    if ((o->metrics_listen || o->metrics_push) && o->loadgen && strcmp(o->loadgen, "builtin") != 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--metrics-listen and --metrics-push report the built-in scheduler's run; "
                        "not with --loadgen %s",
                        o->loadgen);
    if (o->metrics_push && strncmp(o->metrics_push, "http://", 7) != 0 &&
        strncmp(o->metrics_push, "https://", 8) != 0)
        return cmn_errf(eb, CMN_ECONFIG, "--metrics-push: '%s' is not an http:// or https:// URL",
                        o->metrics_push);
#ifndef LG_HAVE_CURL
    if (o->metrics_push)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--metrics-push: this build has no libcurl (libcurl4-openssl-dev)");
#endif
    if ((rc = check_readable("--tls-ca", o->tls_ca, eb)) < 0 ||
        (rc = check_readable("--tls-cert", o->tls_cert, eb)) < 0 ||
        (rc = check_readable("--tls-key", o->tls_key, eb)) < 0 ||
        (rc = check_readable("--endpoint-ca", o->ep_ca, eb)) < 0 ||
        (rc = check_readable("--endpoint-api-key-file", o->ep_key_file, eb)) < 0)
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
    /* Two passes, as sut-node: --help, --version and --config first (the file sets defaults),
     * then the rest of the command line over them. */
    rc = cmn_opts_parse(argc, argv, CMN_OPTS_DASH_H | CMN_OPTS_NO_VALUE, options, N_OPTIONS, o, act,
                        eb);
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

int lg_args_settings(const lg_args_t *o, lg_test_settings_t *s, lg_msgs_t *msgs, cmn_errbuf_t *eb)
{
    lg_scenario_t sc;
    lg_mode_t mode;
    int i, rc;

    lg_test_settings_init(s);
    if (lg_scenario_parse(o->scenario, &sc) < 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario: '%s' is not SingleStream, MultiStream, Server, Offline or "
                        "Interactive",
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
        rc = lg_test_settings_set(s, o->sets[i], eb);
        if (rc < 0)
            return rc;
    }
    if (s->mode == LG_MODE_FIND_PEAK_PERFORMANCE && sc != LG_SERVER)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--mode FindPeakPerformance works only with --scenario Server");
    /* The official LoadGen reads its compiled-in mlperf.conf before a user.conf, which sets
     * use_token_latencies for every <model>-interactive: it decides there, not these settings. */
    if (o->interactive && !s->use_token_latencies &&
        !(o->loadgen && strcmp(o->loadgen, "official") == 0 && o->n_user_conf > 0))
        return cmn_errf(eb, CMN_ECONFIG,
                        "--scenario Interactive is judged on TTFT and TPOT, but the settings of "
                        "%s do not set use_token_latencies (give the official mlperf.conf, whose "
                        "%s.* lines set it and the bounds, or --set it)",
                        o->model, o->model);
    return lg_test_settings_check(s, eb);
}
