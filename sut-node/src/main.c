/* sut-node: the SUT daemon of one accelerator host. Every option can be given on the command line
 * (--key value) or in a configuration file (key = value, one per line, --config FILE); the
 * command line wins. The option table below is also the --help text. */
#include "backend.h"
#include "node.h"
#include "opts.h"
#include "plugins.h"
#include "statsq.h"

#include "build_info.h"
#include "cmn/conf.h"
#include "cmn/log.h"
#include "cmn/opts.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --stats waits this long for the whole exchange. */
#define STATS_TIMEOUT_MS 5000

/* The numeric options: where each is stored, how it is written (an integer, or a byte count with
 * a K, M or G suffix) and the values it may take, so that one parser refuses junk, a sign,
 * trailing characters, overflow and values out of range alike, naming the option, the value and
 * the range (exit 2). A time beyond a day is a mistake, and ns arithmetic stays far from
 * wrapping; thread and connection counts stay below what a host can create. */
#define NUM(n, a, f, nk, lo, hi, u, w, h) CMN_OPT_NUM(sut_opts_t, n, a, f, nk, lo, hi, u, w, h)
#define STR(n, a, f, h) CMN_OPT_STR(sut_opts_t, n, a, f, h)
#define SWITCH(n, f, h) CMN_OPT_SWITCH(sut_opts_t, n, f, h)
#define DAY_MS 86400000u
#define COUNT_MAX 65536u

static int set_listen(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_name(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);
static int set_backend_opt(void *dst, const char *name, const char *v, uint64_t u,
                           cmn_errbuf_t *eb);
static int set_result_codec(void *dst, const char *name, const char *v, uint64_t u,
                            cmn_errbuf_t *eb);
static int set_log_level(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb);

/* The option table: the parser, the --help text and the config-file keys. */
static const cmn_opt_t options[] = {
    CMN_OPT_FN("listen", "ADDR:PORT", set_listen,
               "address to listen on; repeatable; IPv6 as [ADDR]:PORT (default 0.0.0.0:7000)"),
    CMN_OPT_FN("name", "NAME", set_name,
               "node name, unique among the nodes of a SUT (default <hostname>:<port>)"),
    STR("backend", "NAME|PATH", backend,
        "null, digest, sim, unet-sim, onnx, a plugin's NAME (libsut_backend_NAME.so in the plugin "
        "folders, below) or its path (default null); 'unset' (the packaged config's value) refuses "
        "to start until one is chosen"),
    CMN_OPT_FN("backend-opt", "KEY=VALUE", set_backend_opt,
               "option for the backend; repeatable (see sut-node/README.md)"),
    STR("device", "DEV", device, "device for the backend: cpu, cuda:0, ... (default cpu)"),
    NUM("max-batch", "N", max_batch, CMN_OPT_INT, 1, COUNT_MAX, "", NULL,
        "largest batch the batcher forms (default: the backend's maximum)"),
    NUM("max-batch-bytes", "SIZE", max_batch_bytes, CMN_OPT_SIZE, 1, 1ull << 34, " bytes", NULL,
        "largest input bytes in one batch, K/M/G suffixes (default 64M)"),
    NUM("max-wait-us", "US", max_wait_us, CMN_OPT_INT, 0, 1000000u, " us", NULL,
        "how long a batch waits for more samples while an engine is idle (default 0)"),
    NUM("workers", "N", workers, CMN_OPT_INT, 0, 1024, "", NULL,
        "backend worker threads (default: the backend's engine count)"),
    NUM("threads", "N", threads, CMN_OPT_INT, 0, 1024, "", NULL,
        "CPU threads the backend may use (default: its own choice)"),
    NUM("sliding-window", "P", window, CMN_OPT_INT, 0, 1024, "", NULL,
        "3D-UNet: take whole KiTS19 cases, run P^3 patches (overlap 0.5, Gaussian weights) through "
        "the backend and answer the argmax labels (128 in the reference; default 0: off)"),
    NUM("window-batch", "N", window_batch, CMN_OPT_INT, 0, COUNT_MAX, "", NULL,
        "patches per backend call under --sliding-window (default: the "
        "backend's preferred batch)"),
    CMN_OPT_FN("result-codec", "none|lz4", set_result_codec,
               "compress results when the client accepts it (default none)"),
    NUM("max-frame", "SIZE", max_frame, CMN_OPT_SIZE, CMN_FRAME_PREAUTH_MAX, CMN_FRAME_ABS_MAX,
        " bytes", NULL, "largest frame accepted after the handshake (default 256M)"),
    NUM("max-connections", "N", max_connections, CMN_OPT_INT, 1, COUNT_MAX, "",
        "0: the node would refuse every client",
        "connections accepted at once (default 256); when full, a newcomer evicts the one idle "
        "longest (no Query for 2 s, none in flight)"),
    NUM("max-conn-per-peer", "N", max_conn_per_peer, CMN_OPT_INT, 1, COUNT_MAX, "",
        "0: the node would refuse every client", "connections from one peer address (default 64)"),
    NUM("max-preauth", "N", max_preauth, CMN_OPT_INT, 1, COUNT_MAX, "",
        "0: the node would refuse every client",
        "connections still before their Hello, all peers together; more are refused before any TLS "
        "work (default: half of --max-connections)"),
    NUM("memory-budget", "SIZE", memory_budget, CMN_OPT_SIZE, 16u << 20, 1ull << 44, " bytes", NULL,
        "bytes all peers together can make the node hold: batch inputs, frames being received, "
        "queued results; peers hold 3/4 of it, one peer at most half of that (default: half of the "
        "machine's or cgroup's memory, at least 256M, at most 8/3 GiB: 1 GiB per peer)"),
    NUM("max-inflight", "N", max_inflight, CMN_OPT_INT, 1, 1u << 20, "", NULL,
        "samples in flight per connection before reading pauses; clients keep at most this "
        "many outstanding (default: 4 x engines x max batch, at least 64)"),
    NUM("handshake-timeout-ms", "MS", handshake_timeout_ms, CMN_OPT_INT, 1, DAY_MS, " ms",
        "0: every connection would time out before its Hello",
        "close a connection without Hello after this (default 5000)"),
    NUM("frame-timeout-ms", "MS", frame_timeout_ms, CMN_OPT_INT, 1, DAY_MS, " ms",
        "0: every partly received frame would time out",
        "grace from a frame's first byte; after it the frame must gain 256 KiB (or its rest) in "
        "every second, or the connection is closed (default 5000)"),
    NUM("idle-timeout-ms", "MS", idle_timeout_ms, CMN_OPT_INT, 1, DAY_MS, " ms", NULL,
        "close a connection that sent no frame other than Pings and has no work for this long "
        "(default 60000)"),
    NUM("write-timeout-ms", "MS", write_timeout_ms, CMN_OPT_INT, 1, DAY_MS, " ms", NULL,
        "close a connection that takes none of its queued results for this long (default 10000)"),
    NUM("drain-timeout-ms", "MS", drain_timeout_ms, CMN_OPT_INT, 0, DAY_MS, " ms", NULL,
        "on SIGTERM, wait this long for work in flight (default 30000); what still runs 1 s before "
        "is cancelled (backends with cancel)"),
    NUM("heartbeat-ms", "MS", heartbeat_ms, CMN_OPT_INT, 0, DAY_MS, " ms", NULL,
        "send a Ping on a connection idle this long, so clients see the node alive "
        "while it is busy (default 1000; 0 disables; keep it under the QDL's ping timeout)"),
    NUM("response-hold-us", "US", response_hold_us, CMN_OPT_INT, 0, 1000000u, " us", NULL,
        "tcp://: a turn's results wait up to this long to leave in one write with the next turn's, "
        "only while the client keeps sending (a turn that reads no query writes at once): fewer, "
        "larger writes on a busy node, no wait on an idle one (default 20; 0 writes every turn's "
        "results at once)"),
    SWITCH("ucx-busy-poll", ucx_busy_poll,
           "on ucx:// listeners, progress UCX on every loop turn instead of sleeping on its event "
           "fd: lowest latency, one core busy (config: 1 or 0)"),
    SWITCH(
        "ucx-trusted-fabric", ucx_trusted_fabric,
        "required to listen on ucx://: UCX 1.13 aborts the process on malformed connection bytes "
        "from any peer that reaches its ports, so ucx:// is for a fabric where every host is "
        "trusted (config: 1 or 0)"),
    NUM("seed", "N", seed, CMN_OPT_INT, 0, UINT64_MAX, "", NULL,
        "seed for backends with randomness (sim) (default 0)"),
    STR("port-file", "FILE", port_file,
        "write the bound port here (temp file + rename) once the backend is loaded and the node "
        "serves; removed at start, when the node stops listening and at exit"),
    STR("metrics-listen", "ADDR:PORT", metrics_listen,
        "serve Prometheus metrics at http://ADDR:PORT/metrics (port 0: a free one, logged)"),
    CMN_OPT_ACT(
        "stats", "HOST:PORT",
        "ask the running node at HOST:PORT for its counters (StatsRequest, plaintext), print them "
        "and exit"),
    STR("tls-cert", "FILE", tls_cert,
        "serve TLS 1.3 with this certificate (PEM); plaintext when absent"),
    STR("tls-key", "FILE", tls_key, "private key of --tls-cert"),
    STR("tls-ca", "FILE", tls_ca, "require client certificates signed by this CA (mutual TLS)"),
    STR("tls-allow", "NAMES", tls_allow,
        "comma-separated client certificate names allowed (with --tls-ca)"),
    CMN_OPT_FN("log-level", "LEVEL", set_log_level, "error, warn, info or debug (default info)"),
    CMN_OPT_ACT("config", "FILE",
                "read options from FILE (key = value lines, keys as the long options)"),
    CMN_OPT_ACT("version", NULL, "print the version and exit"),
    CMN_OPT_ACT("list-backends", NULL,
                "print the built-in backends, the plugins found and their folders"),
    CMN_OPT_ACT("help", NULL, "print this help and exit"),
    CMN_OPT_HIDDEN_ACT("list-options"),
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* The setters of the options the table cannot store by itself. Strings from argv or the config
 * file live until exit: the config file's are duplicated (keep_conf). */
static int set_listen(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    sut_opts_t *o = dst;

    (void)name, (void)u;
    if (o->n_listen == SUT_MAX_LISTEN)
        return cmn_errf(eb, CMN_ECONFIG, "--listen: at most %d addresses", SUT_MAX_LISTEN);
    o->listen[o->n_listen++] = v;
    return 0;
}

static int set_name(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    (void)name, (void)u;
    if (!*v || strlen(v) > 255)
        return cmn_errf(eb, CMN_ECONFIG, "--name must have 1 to 255 bytes");
    ((sut_opts_t *)dst)->name = v;
    return 0;
}

static int set_backend_opt(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    sut_opts_t *o = dst;
    const char *eq = strchr(v, '=');
    char *key;

    (void)name, (void)u;
    if (!eq || eq == v)
        return cmn_errf(eb, CMN_ECONFIG, "--backend-opt '%s': expected KEY=VALUE", v);
    if (o->n_opts == SUT_MAX_BACKEND_OPTS)
        return cmn_errf(eb, CMN_ECONFIG, "--backend-opt: at most %d options", SUT_MAX_BACKEND_OPTS);
    key = sut__opts_own(o, strndup(v, (size_t)(eq - v)));
    if (!key)
        return cmn_errf(eb, -ENOMEM, "--backend-opt: out of memory");
    o->opt_keys[o->n_opts] = key;
    o->opt_values[o->n_opts++] = eq + 1;
    return 0;
}

static int set_result_codec(void *dst, const char *name, const char *v, uint64_t u,
                            cmn_errbuf_t *eb)
{
    (void)u;
    if (cmpr_codec_parse(v, &((sut_opts_t *)dst)->result_codec) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: invalid value '%s'", name, v);
    return 0;
}

static int set_log_level(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    cmn_log_level_t lvl;

    (void)dst, (void)u;
    if (cmn_log_level_parse(v, &lvl) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: invalid value '%s'", name, v);
    cmn_log_set_level(lvl);
    return 0;
}

static void list_backends(FILE *f)
{
    fprintf(f, "Backends built in: %s.\n", sut__backend_list());
    sut__plugins_print(f);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: sut-node [OPTIONS]\n\n"
        "The SUT daemon of the MLPerf Inference Network-division harness: receives queries from\n"
        "the QDL over TCP, decodes, batches, runs a backend on the local device and streams the\n"
        "results back. Stops accepting on SIGTERM/SIGINT, finishes the work in flight, says\n"
        "Goodbye and exits 0; SIGHUP logs the counters.\n\nOptions:\n");
    cmn_opts_help(f, options, N_OPTIONS, 30, 0);
    fputc('\n', f);
    list_backends(f);
}

/* A config file's value lives as long as the options. */
static int keep_conf(void *dst, char *s, cmn_errbuf_t *eb)
{
    if (!sut__opts_own(dst, s))
        return cmn_errf(eb, -ENOMEM, "too many options");
    return 0;
}

/* --stats: the counters of a running node on stdout; 0, or 1 with the reason on stderr. */
static int stats_main(const char *addr)
{
    cmn_errbuf_t eb = {{0}};

    if (sut__stats_query(addr, STATS_TIMEOUT_MS, stdout, &eb) < 0) {
        fprintf(stderr, "sut-node: --stats: %s\n", eb.msg);
        return 1;
    }
    return 0;
}

/* The first pass's options: --config reads its file (0, or its error); --stats, --help,
 * --list-backends, --version and --list-options (not in --help: for tests that walk every
 * option, "option NAME KIND MIN MAX" lines: cmn_opts_list) do their work and exit. */
static int act(void *dst, const cmn_opt_t *d, const char *val, cmn_errbuf_t *eb)
{
    sut_opts_t *o = dst;

    if (strcmp(d->name, "config") == 0) {
        o->config_file = val;
        return cmn_opts_conf_file(val, options, N_OPTIONS, o, keep_conf, eb);
    }
    sut__opts_free(o);
    if (strcmp(d->name, "stats") == 0)
        exit(stats_main(val));
    if (strcmp(d->name, "help") == 0)
        usage(stdout);
    else if (strcmp(d->name, "list-backends") == 0)
        list_backends(stdout);
    else if (strcmp(d->name, "list-options") == 0)
        cmn_opts_list(stdout, options, N_OPTIONS);
    else
        printf("sut-node %s (protocol %u, backend ABI %u)\ngit commit %s (%s), built %s\n",
               SUT_VERSION, CMN_PROTOCOL_VERSION, SUT_BACKEND_ABI_VERSION, BUILD_GIT_COMMIT,
               BUILD_GIT_COMMIT_DATE, BUILD_DATE_UTC);
    exit(0);
}

int main(int argc, char **argv)
{
    sut_opts_t opt;
    sut_node_t *node;
    uv_loop_t loop;
    cmn_errbuf_t eb = {{0}};
    int rc;

    /* A node restarted on its port must listen on ucx:// while its old connections are in
     * TIME_WAIT, as its tcp:// listener does (libuv sets SO_REUSEADDR); UCX's TCP connection
     * manager does not by default and reads the setting only from the environment
     * (ucp_config_modify does not reach it in UCX 1.13). Set first, while the process is one
     * thread; an explicit UCX_TCP_CM_REUSEADDR wins. */
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    cmn_log_init("sut-node", CMN_LOG_INFO);
    sut__opts_defaults(&opt);
    /* Two passes: --config first (the file sets defaults), then the command line over it. */
    rc = cmn_opts_parse(argc, argv, 0, options, N_OPTIONS, &opt, act, &eb);
    if (rc < 0) {
        fprintf(stderr, "sut-node: %s\n", eb.msg);
        sut__opts_free(&opt);
        return 2;
    }
    if (opt.n_listen == 0)
        opt.listen[opt.n_listen++] = "0.0.0.0:7000";
    /* A port file left by an earlier run must not point a script at a port nobody serves. */
    sut__node_remove_port_file(&opt);
    if (strcmp(opt.backend, SUT_BACKEND_UNSET) == 0) {
        fprintf(stderr,
                "sut-node: no backend chosen: set 'backend = ' in %s (null, digest, sim, onnx, or "
                "the path of a plugin such as the openai or kserve forwarding backends; see "
                "sut-node/README.md) or pass --backend; the packaged configuration ships without "
                "one so that an enabled unit serves nothing until it is configured\n",
                opt.config_file ? opt.config_file : "the configuration file");
        sut__opts_free(&opt);
        return 2;
    }
    /* A peer closing mid-write must be an error code, not a signal that kills the daemon. */
    signal(SIGPIPE, SIG_IGN);

    node = calloc(1, sizeof(*node));
    if (!node || uv_loop_init(&loop) != 0) {
        fprintf(stderr, "sut-node: out of memory\n");
        free(node);
        sut__opts_free(&opt);
        return 1;
    }
    rc = sut__node_init(node, &loop, &opt, &eb);
    if (rc == 0)
        rc = sut__node_listen(node, &eb);
    if (rc < 0) {
        cmn_log_error("%s", eb.msg);
        /* A configuration the node cannot start with (a backend option out of its range, a
         * port file it cannot write) is a usage error, as the options' own checks. */
        node->exit_code = rc == CMN_ECONFIG ? 2 : 1;
        /* Close whatever was opened, so the loop and the threads end cleanly. */
        sut__node_stop(node);
    } else {
        cmn_log_info("sut-node %s: node '%s', backend %s on %s, max batch %u, %u engine(s), result "
                     "codec %s, "
                     "tls %s",
                     SUT_VERSION, node->name, node->be.info.name, node->be.info.device,
                     node->max_batch, node->engines, cmpr_codec_name(opt.result_codec),
                     !opt.tls_cert   ? "off (plaintext: a trusted fabric only)"
                     : opt.tls_allow ? "on (TLS 1.3, client certificates required, names pinned)"
                     : opt.tls_ca    ? "on (TLS 1.3, client certificates required)"
                                     : "on (TLS 1.3)");
    }
    uv_run(&loop, UV_RUN_DEFAULT);

    rc = node->exit_code;
    sut__node_remove_port_file(&opt);
    if (uv_loop_close(&loop) != 0)
        cmn_log_warn("event loop closed with handles still open");
    sut__node_free(node);
    free(node);
    sut__opts_free(&opt);
    return rc;
}
