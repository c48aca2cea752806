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

typedef struct {
    const char *name;
    const char *arg; /* NULL: a flag without value */
    const char *help;
} opt_doc_t;

static const opt_doc_t options[] = {
    {"listen", "ADDR:PORT",
     "address to listen on; repeatable; IPv6 as [ADDR]:PORT (default 0.0.0.0:7000)"},
    {"name", "NAME", "node name, unique among the nodes of a SUT (default <hostname>:<port>)"},
    {"backend", "NAME|PATH",
     "null, digest, sim, unet-sim, onnx, a plugin's NAME (libsut_backend_NAME.so in the plugin "
     "folders, below) or its path (default null); 'unset' (the packaged config's value) refuses "
     "to start until one is chosen"},
    {"backend-opt", "KEY=VALUE", "option for the backend; repeatable (see sut-node/README.md)"},
    {"device", "DEV", "device for the backend: cpu, cuda:0, ... (default cpu)"},
    {"max-batch", "N", "largest batch the batcher forms (default: the backend's maximum)"},
    {"max-batch-bytes", "SIZE", "largest input bytes in one batch, K/M/G suffixes (default 64M)"},
    {"max-wait-us", "US",
     "how long a batch waits for more samples while an engine is idle (default 0)"},
    {"workers", "N", "backend worker threads (default: the backend's engine count)"},
    {"threads", "N", "CPU threads the backend may use (default: its own choice)"},
    {"sliding-window", "P",
     "3D-UNet: take whole KiTS19 cases, run P^3 patches (overlap 0.5, Gaussian weights) through "
     "the backend and answer the argmax labels (128 in the reference; default 0: off)"},
    {"window-batch", "N",
     "patches per backend call under --sliding-window (default: the "
     "backend's preferred batch)"},
    {"result-codec", "none|lz4", "compress results when the client accepts it (default none)"},
    {"max-frame", "SIZE", "largest frame accepted after the handshake (default 256M)"},
    {"max-connections", "N",
     "connections accepted at once (default 256); when full, a newcomer evicts the one idle "
     "longest (no Query for 2 s, none in flight)"},
    {"max-conn-per-peer", "N", "connections from one peer address (default 64)"},
    {"max-preauth", "N",
     "connections still before their Hello, all peers together; more are refused before any TLS "
     "work (default: half of --max-connections)"},
    {"memory-budget", "SIZE",
     "bytes all peers together can make the node hold: batch inputs, frames being received, "
     "queued results; peers hold 3/4 of it, one peer at most half of that (default: half of the "
     "machine's or cgroup's memory, at least 256M, at most 8/3 GiB: 1 GiB per peer)"},
    {"max-inflight", "N",
     "samples in flight per connection before reading pauses; clients keep at most this "
     "many outstanding (default: 4 x engines x max batch, at least 64)"},
    {"handshake-timeout-ms", "MS", "close a connection without Hello after this (default 5000)"},
    {"frame-timeout-ms", "MS",
     "grace from a frame's first byte; after it the frame must gain 256 KiB (or its rest) in "
     "every second, or the connection is closed (default 5000)"},
    {"idle-timeout-ms", "MS",
     "close a connection that sent no frame other than Pings and has no work for this long "
     "(default 60000)"},
    {"write-timeout-ms", "MS",
     "close a connection that takes none of its queued results for this long (default 10000)"},
    {"drain-timeout-ms", "MS",
     "on SIGTERM, wait this long for work in flight (default 30000); what still runs 1 s before "
     "is cancelled (backends with cancel)"},
    {"heartbeat-ms", "MS",
     "send a Ping on a connection idle this long, so clients see the node alive "
     "while it is busy (default 1000; 0 disables; keep it under the QDL's ping timeout)"},
    {"response-hold-us", "US",
     "tcp://: a turn's results wait up to this long to leave in one write with the next turn's, "
     "only while the client keeps sending (a turn that reads no query writes at once): fewer, "
     "larger writes on a busy node, no wait on an idle one (default 20; 0 writes every turn's "
     "results at once)"},
    {"ucx-busy-poll", NULL,
     "on ucx:// listeners, progress UCX on every loop turn instead of sleeping on its event "
     "fd: lowest latency, one core busy (config: 1 or 0)"},
    {"ucx-trusted-fabric", NULL,
     "required to listen on ucx://: UCX 1.13 aborts the process on malformed connection bytes "
     "from any peer that reaches its ports, so ucx:// is for a fabric where every host is "
     "trusted (config: 1 or 0)"},
    {"seed", "N", "seed for backends with randomness (sim) (default 0)"},
    {"port-file", "FILE",
     "write the bound port here (temp file + rename) once the backend is loaded and the node "
     "serves; removed at start, when the node stops listening and at exit"},
    {"metrics-listen", "ADDR:PORT",
     "serve Prometheus metrics at http://ADDR:PORT/metrics (port 0: a free one, logged)"},
    {"stats", "HOST:PORT",
     "ask the running node at HOST:PORT for its counters (StatsRequest, plaintext), print them "
     "and exit"},
    {"tls-cert", "FILE", "serve TLS 1.3 with this certificate (PEM); plaintext when absent"},
    {"tls-key", "FILE", "private key of --tls-cert"},
    {"tls-ca", "FILE", "require client certificates signed by this CA (mutual TLS)"},
    {"tls-allow", "NAMES", "comma-separated client certificate names allowed (with --tls-ca)"},
    {"log-level", "LEVEL", "error, warn, info or debug (default info)"},
    {"config", "FILE", "read options from FILE (key = value lines, keys as the long options)"},
    {"version", NULL, "print the version and exit"},
    {"list-backends", NULL, "print the built-in backends, the plugins found and their folders"},
    {"help", NULL, "print this help and exit"},
};

/* The numeric options: where each is stored, how it is written (an integer, or a byte count with
 * a K, M or G suffix) and the values it may take, so that one parser refuses junk, a sign,
 * trailing characters, overflow and values out of range alike, naming the option, the value and
 * the range (exit 2). A time beyond a day is a mistake, and ns arithmetic stays far from
 * wrapping; thread and connection counts stay below what a host can create. */
typedef struct {
    const char *name;
    size_t off;
    size_t width; /* sizeof the field: 4 or 8 */
    int size_suffix;
    uint64_t min, max;
    const char *unit; /* " ms", " us", " bytes" or "" */
    const char *why;  /* NULL, or what the smallest refused value would do */
} num_opt_t;

#define NUM(n, f, sz, lo, hi, u, w)                                                \
    {                                                                              \
        n, offsetof(sut_opts_t, f), sizeof(((sut_opts_t *)0)->f), sz, lo, hi, u, w \
    }
#define DAY_MS 86400000u
#define COUNT_MAX 65536u

static const num_opt_t num_opts[] = {
    NUM("max-batch", max_batch, 0, 1, COUNT_MAX, "", NULL),
    NUM("max-batch-bytes", max_batch_bytes, 1, 1, 1ull << 34, " bytes", NULL),
    NUM("max-wait-us", max_wait_us, 0, 0, 1000000u, " us", NULL),
    NUM("workers", workers, 0, 0, 1024, "", NULL),
    NUM("threads", threads, 0, 0, 1024, "", NULL),
    NUM("sliding-window", window, 0, 0, 1024, "", NULL),
    NUM("window-batch", window_batch, 0, 0, COUNT_MAX, "", NULL),
    NUM("max-frame", max_frame, 1, CMN_FRAME_PREAUTH_MAX, CMN_FRAME_ABS_MAX, " bytes", NULL),
    NUM("max-connections", max_connections, 0, 1, COUNT_MAX, "",
        "0: the node would refuse every client"),
    NUM("max-conn-per-peer", max_conn_per_peer, 0, 1, COUNT_MAX, "",
        "0: the node would refuse every client"),
    NUM("max-preauth", max_preauth, 0, 1, COUNT_MAX, "", "0: the node would refuse every client"),
    NUM("memory-budget", memory_budget, 1, 16u << 20, 1ull << 44, " bytes", NULL),
    NUM("max-inflight", max_inflight, 0, 1, 1u << 20, "", NULL),
    NUM("handshake-timeout-ms", handshake_timeout_ms, 0, 1, DAY_MS, " ms",
        "0: every connection would time out before its Hello"),
    NUM("frame-timeout-ms", frame_timeout_ms, 0, 1, DAY_MS, " ms",
        "0: every partly received frame would time out"),
    NUM("idle-timeout-ms", idle_timeout_ms, 0, 1, DAY_MS, " ms", NULL),
    NUM("write-timeout-ms", write_timeout_ms, 0, 1, DAY_MS, " ms", NULL),
    NUM("drain-timeout-ms", drain_timeout_ms, 0, 0, DAY_MS, " ms", NULL),
    NUM("heartbeat-ms", heartbeat_ms, 0, 0, DAY_MS, " ms", NULL),
    NUM("response-hold-us", response_hold_us, 0, 0, 1000000u, " us", NULL),
    NUM("seed", seed, 0, 0, UINT64_MAX, "", NULL),
};

static const num_opt_t *find_num(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++)
        if (strcmp(num_opts[i].name, name) == 0)
            return &num_opts[i];
    return NULL;
}

static int set_num(sut_opts_t *o, const num_opt_t *n, const char *v, cmn_errbuf_t *eb)
{
    uint64_t u;
    uint32_t u32;
    int rc =
        cmn_parse_option_num(n->name, v, n->size_suffix, n->min, n->max, n->unit, n->why, &u, eb);

    if (rc < 0)
        return rc;
    if (n->width == sizeof(u32)) {
        u32 = (uint32_t)u; /* every 4-byte field's max fits */
        memcpy((char *)o + n->off, &u32, sizeof(u32));
    } else {
        memcpy((char *)o + n->off, &u, sizeof(u));
    }
    return 0;
}

/* --list-options (not in --help: for tests that walk every option): "option NAME KIND MIN MAX" a
 * line, KIND int, size, flag or string. */
static void list_options(FILE *f)
{
    size_t i;

    for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        const num_opt_t *n = find_num(options[i].name);

        cmn_opts_list_row(f, options[i].name, n != NULL, n && n->size_suffix,
                          options[i].arg != NULL, n ? n->min : 0, n ? n->max : 0);
    }
}

static void list_backends(FILE *f)
{
    fprintf(f, "Backends built in: %s.\n", sut__backend_list());
    sut__plugins_print(f);
}

static void usage(FILE *f)
{
    size_t i;

    fprintf(
        f,
        "Usage: sut-node [OPTIONS]\n\n"
        "The SUT daemon of the MLPerf Inference Network-division harness: receives queries from\n"
        "the QDL over TCP, decodes, batches, runs a backend on the local device and streams the\n"
        "results back. Stops accepting on SIGTERM/SIGINT, finishes the work in flight, says\n"
        "Goodbye and exits 0; SIGHUP logs the counters.\n\nOptions:\n");
    for (i = 0; i < sizeof(options) / sizeof(options[0]); i++)
        cmn_opts_help_row(f, options[i].name, options[i].arg, options[i].help, 30, 0);
    fputc('\n', f);
    list_backends(f);
}

/* Strings from argv or the config file live until exit: the config file's are duplicated. */
static int apply(sut_opts_t *o, const char *name, const char *v, cmn_errbuf_t *eb)
{
    int rc = 0;
    cmn_log_level_t lvl;
    const num_opt_t *n = find_num(name);

    if (n)
        return set_num(o, n, v, eb);
    if (strcmp(name, "listen") == 0) {
        if (o->n_listen == SUT_MAX_LISTEN)
            return cmn_errf(eb, CMN_ECONFIG, "--listen: at most %d addresses", SUT_MAX_LISTEN);
        o->listen[o->n_listen++] = v;
    } else if (strcmp(name, "name") == 0) {
        if (!*v || strlen(v) > 255)
            return cmn_errf(eb, CMN_ECONFIG, "--name must have 1 to 255 bytes");
        o->name = v;
    } else if (strcmp(name, "backend") == 0) {
        o->backend = v;
    } else if (strcmp(name, "backend-opt") == 0) {
        const char *eq = strchr(v, '=');
        char *key;
        if (!eq || eq == v)
            return cmn_errf(eb, CMN_ECONFIG, "--backend-opt '%s': expected KEY=VALUE", v);
        if (o->n_opts == SUT_MAX_BACKEND_OPTS)
            return cmn_errf(eb, CMN_ECONFIG, "--backend-opt: at most %d options",
                            SUT_MAX_BACKEND_OPTS);
        key = sut__opts_own(o, strndup(v, (size_t)(eq - v)));
        if (!key)
            return cmn_errf(eb, -ENOMEM, "--backend-opt: out of memory");
        o->opt_keys[o->n_opts] = key;
        o->opt_values[o->n_opts++] = eq + 1;
    } else if (strcmp(name, "device") == 0) {
        o->device = v;
    } else if (strcmp(name, "result-codec") == 0) {
        rc = cmpr_codec_parse(v, &o->result_codec);
    } else if (strcmp(name, "ucx-busy-poll") == 0) {
        if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0)
            return cmn_errf(eb, CMN_ECONFIG, "ucx-busy-poll '%s': expected 1 or 0", v);
        o->ucx_busy_poll = v[0] == '1';
    } else if (strcmp(name, "ucx-trusted-fabric") == 0) {
        if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0)
            return cmn_errf(eb, CMN_ECONFIG, "ucx-trusted-fabric '%s': expected 1 or 0", v);
        o->ucx_trusted_fabric = v[0] == '1';
    } else if (strcmp(name, "metrics-listen") == 0) {
        o->metrics_listen = v;
    } else if (strcmp(name, "port-file") == 0) {
        o->port_file = v;
    } else if (strcmp(name, "tls-cert") == 0) {
        o->tls_cert = v;
    } else if (strcmp(name, "tls-key") == 0) {
        o->tls_key = v;
    } else if (strcmp(name, "tls-ca") == 0) {
        o->tls_ca = v;
    } else if (strcmp(name, "tls-allow") == 0) {
        o->tls_allow = v;
    } else if (strcmp(name, "log-level") == 0) {
        rc = cmn_log_level_parse(v, &lvl);
        if (rc == 0)
            cmn_log_set_level(lvl);
    } else {
        return cmn_errf(eb, CMN_ECONFIG, "unknown option '%s' (see --help)", name);
    }
    if (rc < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--%s: invalid value '%s'", name, v);
    return 0;
}

static int conf_cb(void *arg, const char *key, const char *value, int line, cmn_errbuf_t *eb)
{
    sut_opts_t *o = arg;
    cmn_errbuf_t inner;
    char *v;
    int rc;

    if (strcmp(key, "config") == 0)
        return cmn_errf(eb, CMN_ECONFIG, "%s:%d: 'config' cannot nest", o->config_file, line);
    v = sut__opts_own(o, strdup(value));
    if (!v)
        return cmn_errf(eb, -ENOMEM, "%s:%d: too many options", o->config_file, line);
    rc = apply(o, key, v, &inner);
    if (rc < 0)
        return cmn_errf(eb, rc, "%s:%d: %s", o->config_file, line, inner.msg);
    return 0;
}

static const opt_doc_t *find_option(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    }
    return NULL;
}

static const void *find_row(const char *name, const char **arg)
{
    const opt_doc_t *d = find_option(name);

    if (d)
        *arg = d->arg;
    return d;
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

/* Two passes: --config first (the file sets defaults), then the command line over it. */
static int parse_args(int argc, char **argv, sut_opts_t *o, cmn_errbuf_t *eb)
{
    int pass, i, rc;

    for (pass = 0; pass < 2; pass++) {
        for (i = 1; i < argc; i++) {
            const char *name, *val;
            const opt_doc_t *d;
            const void *row;
            cmn_conf_word_t w;

            if (strcmp(argv[i], "--list-options") == 0) {
                if (pass == 0) {
                    list_options(stdout);
                    sut__opts_free(o);
                    exit(0);
                }
                continue;
            }
            if ((rc = cmn_opts_word(argc, argv, &i, 0, find_row, &row, &w, eb)) < 0)
                return rc;
            d = row;
            name = w.key;
            val = w.value;
            if (pass == 0 && strcmp(name, "stats") == 0) {
                sut__opts_free(o);
                exit(stats_main(val));
            }
            if (!d->arg) {
                if (pass == 0 && strcmp(name, "help") == 0) {
                    usage(stdout);
                    sut__opts_free(o);
                    exit(0);
                }
                if (pass == 0 && strcmp(name, "list-backends") == 0) {
                    list_backends(stdout);
                    sut__opts_free(o);
                    exit(0);
                }
                if (pass == 0 && strcmp(name, "version") == 0) {
                    printf("sut-node %s (protocol %u, backend ABI %u)\ngit commit %s (%s), "
                           "built %s\n",
                           SUT_VERSION, CMN_PROTOCOL_VERSION, SUT_BACKEND_ABI_VERSION,
                           BUILD_GIT_COMMIT, BUILD_GIT_COMMIT_DATE, BUILD_DATE_UTC);
                    sut__opts_free(o);
                    exit(0);
                }
                if (pass == 1 && (rc = apply(o, name, val ? val : "1", eb)) < 0)
                    return rc;
                continue;
            }
            if (strcmp(name, "config") == 0) {
                if (pass == 0) {
                    o->config_file = val;
                    rc = cmn_conf_parse_file(val, conf_cb, o, eb);
                    if (rc < 0)
                        return rc;
                }
                continue;
            }
            if (pass == 1) {
                rc = apply(o, name, val, eb);
                if (rc < 0)
                    return rc;
            }
        }
    }
    return 0;
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
    rc = parse_args(argc, argv, &opt, &eb);
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
