/* loadgen-node: runs an MLPerf LoadGen test against the in-process null SUT or, through the QDL,
 * against sut-node daemons, and writes the official logs. See --help and README.md. */
#include "cmn/err.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"
#include "args.h"
#include "lg/lg.h"
#include "lg/sut_null.h"
#include "metrics.h"
#ifdef LG_HAVE_QDL
#    include "lg/sut_qdl.h"
#endif
#ifdef LG_HAVE_OFFICIAL
#    include "official.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The exit status the README documents; 128 + the signal when interrupted. */
enum { EXIT_VALID = 0, EXIT_INVALID = 1, EXIT_USAGE = 2, EXIT_FAILED = 3, EXIT_NOT_READY = 4 };

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

static int open_qsl(const lg_args_t *o, lg_qsl_t **q, cmn_errbuf_t *eb)
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
    else if (o->qsl_kits)
        rc = lg_qsl_open_kits(o->qsl_kits, q, eb);
    else if (o->qsl_llm_json)
        rc =
            lg_qsl_open_llm_json(o->qsl_llm_json, o->llm_field ? o->llm_field : "tok_input", q, eb);
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

/* --loadgen official: the official LoadGen runs the test over the QDL that open_qdl configures. */
typedef struct {
#ifdef LG_HAVE_OFFICIAL
    lg_official_args_t args;
    lg_qsl_t *qsl;
#endif
    int code;
} official_call_t;

#ifdef LG_HAVE_QDL
/* --endpoint-api-key-file: the key on its first line (a trailing newline is not part of it). */
static int read_api_key(const char *path, char *key, size_t cap, cmn_errbuf_t *eb)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return cmn_errf(eb, CMN_ECONFIG, "--endpoint-api-key-file %s: cannot open it: %s", path,
                        strerror(errno));
    n = fread(key, 1, cap - 1, f);
    fclose(f);
    key[n] = '\0';
    key[strcspn(key, "\r\n")] = '\0';
    if (!key[0] || n == cap - 1)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--endpoint-api-key-file %s: expected one line of 1 to %zu bytes", path,
                        cap - 2);
    return 0;
}

static int open_qdl(const lg_args_t *o, official_call_t *off, lg_sut_t **sut, cmn_errbuf_t *eb)
{
    char *list = strdup(o->nodes), *tok, *save = NULL;
    const char *nodes[LG_ARGS_MAX_NODES];
    qdl_config_t cfg;
    size_t n = 0;
    int rc, codec = CMPR_NONE;
    char key[4096];

    if (!list)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == LG_ARGS_MAX_NODES) {
            free(list);
            return cmn_errf(eb, CMN_ECONFIG, "--nodes: at most %d nodes", LG_ARGS_MAX_NODES);
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
    if (o->have_write_thread_min)
        cfg.write_thread_min = o->write_thread_min;
    cfg.lend_write_thread = o->issue_write_thread;
    cfg.progress_timeout_ms = o->progress_timeout_ms;
    if (o->max_dispatches)
        cfg.max_dispatches = o->max_dispatches;
    if (o->node_memory_budget)
        cfg.node_memory_budget = o->node_memory_budget;
    cfg.wait_ready_ms = o->wait_for_nodes * 1000u;
    if (o->policy) {
        if (strcmp(o->policy, "least-outstanding") == 0)
            cfg.policy = QDL_POLICY_LEAST_OUTSTANDING;
        else if (strcmp(o->policy, "round-robin") == 0)
            cfg.policy = QDL_POLICY_ROUND_ROBIN;
        else if (strcmp(o->policy, "weighted") == 0)
            cfg.policy = QDL_POLICY_WEIGHTED;
        else if (strcmp(o->policy, "least-tokens") == 0)
            cfg.policy = QDL_POLICY_LEAST_TOKENS;
        else {
            free(list);
            return cmn_errf(eb, CMN_ECONFIG,
                            "--policy: '%s' is not least-outstanding, least-tokens, round-robin "
                            "or weighted",
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
    cfg.ucx_busy_poll = o->ucx_busy_poll;
    cfg.ucx_trusted_fabric = o->ucx_trusted_fabric;
    cfg.endpoint_dialect = o->ep_dialect;
    cfg.endpoint_model = o->ep_model;
    cfg.endpoint_max_tokens = (uint32_t)o->ep_max_tokens;
    cfg.endpoint_min_tokens = (uint32_t)o->ep_min_tokens;
    cfg.endpoint_max_inflight = (uint32_t)o->ep_max_inflight;
    cfg.endpoint_session_header = o->ep_session;
    cfg.endpoint_ca_file = o->ep_ca;
    if (o->ep_client && strcmp(o->ep_client, "lean") != 0 && strcmp(o->ep_client, "curl") != 0) {
        free(list);
        return cmn_errf(eb, CMN_ECONFIG, "--endpoint-client: '%s' is not lean or curl",
                        o->ep_client);
    }
    cfg.endpoint_curl = o->ep_client && strcmp(o->ep_client, "curl") == 0;
    if (o->ep_key_file) {
        if ((rc = read_api_key(o->ep_key_file, key, sizeof(key), eb)) < 0) {
            free(list);
            return rc;
        }
        cfg.endpoint_api_key = key;
    }
#    ifdef LG_HAVE_OFFICIAL
    if (off) {
        off->code = lg_official_run(&off->args, off->qsl, &cfg, &o->log, eb);
        free(list);
        return 0;
    }
#    endif
    (void)off;
    rc = lg_sut_qdl_create(&cfg, sut, eb);
    free(list);
    return rc;
}
#endif

/* No run on a node that cannot serve: exit 4 with the node, the engine's reason and the way out. */
static void not_ready(const lg_args_t *o, const char *why)
{
    fprintf(stderr, "loadgen-node: %s; no run started (%s)\n", why,
            o->wait_for_nodes ? "--wait-for-nodes ran out"
                              : "start the engine first, or wait for it with --wait-for-nodes "
                                "SECONDS");
}

/* SIGINT/SIGTERM: the run ends early with complete logs marked interrupted; a second signal
 * (SA_RESETHAND) kills the process as usual. */
static void on_signal(int signo)
{
    lg_interrupt(signo);
}

static void catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* A performance result counts by its validity (which sample failures already spoil); an accuracy
 * log is only usable when nothing went wrong while it was written. */
static int exit_code(const lg_args_t *o, const lg_result_t *res)
{
    int code = EXIT_VALID;

    if (res->interrupted) {
        fprintf(stderr,
                "loadgen-node: interrupted by %s after %llu samples; the logs in %s are complete "
                "and marked interrupted (the run is INVALID)\n",
                res->interrupted == SIGINT    ? "SIGINT"
                : res->interrupted == SIGTERM ? "SIGTERM"
                                              : "a signal",
                (unsigned long long)res->samples_issued, o->outdir);
        return 128 + res->interrupted;
    }
    if (!res->performance_ran && !res->accuracy_ran)
        code = EXIT_INVALID;
    if (res->performance_ran && !res->performance_valid)
        code = EXIT_INVALID;
    if (res->accuracy_ran &&
        (res->num_errors || res->failed_samples || res->lost_samples || res->digest_mismatches))
        code = EXIT_INVALID;
    if (res->failed_samples || res->lost_samples || res->digest_mismatches)
        fprintf(stderr,
                "loadgen-node: %llu samples failed, %llu were lost, %llu responses did not match "
                "their digest (see %s)\n",
                (unsigned long long)res->failed_samples, (unsigned long long)res->lost_samples,
                (unsigned long long)res->digest_mismatches, o->outdir);
    else if (res->num_errors)
        fprintf(stderr, "loadgen-node: %llu errors were logged in %s/%sdetail%s.txt\n",
                (unsigned long long)res->num_errors, o->outdir, o->log.prefix, o->log.suffix);
    return code;
}

/* --loadgen official (or a misspelt --loadgen): the official LoadGen runs the test over the QDL.
 * Takes |qsl| and closes it. Returns the exit status. */
static int run_official(const lg_args_t *o, const lg_test_settings_t *settings, int use_qdl,
                        lg_qsl_t *qsl)
{
    official_call_t off = {.code = EXIT_USAGE};
    cmn_errbuf_t eb = {{0}};

    (void)settings;
    (void)use_qdl;
    if (strcmp(o->loadgen, "official") != 0)
        snprintf(eb.msg, sizeof(eb.msg), "--loadgen: '%s' is not builtin or official", o->loadgen);
#if defined(LG_HAVE_OFFICIAL) && defined(LG_HAVE_QDL)
    else if (!use_qdl)
        snprintf(eb.msg, sizeof(eb.msg), "--loadgen official needs --nodes (the QDL)");
    else if (o->log.issue_cpu >= 0)
        snprintf(eb.msg, sizeof(eb.msg),
                 "--issue-cpu pins the builtin scheduler's issue thread; the official LoadGen "
                 "has its own threads (pin the whole process with taskset instead)");
    else {
        off.args = (lg_official_args_t){.model = o->model,
                                        .scenario = o->scenario,
                                        .mode = o->mode,
                                        .mlperf_conf = o->mlperf_conf,
                                        .user_conf = o->user_conf,
                                        .n_user_conf = o->n_user_conf,
                                        .sets = o->sets,
                                        .n_sets = o->n_sets,
                                        .parsed = settings,
                                        .audit_config = o->audit};
        off.qsl = qsl;
        if (open_qdl(o, &off, NULL, &eb) < 0)
            off.code = EXIT_USAGE;
    }
#else
    else
        snprintf(eb.msg, sizeof(eb.msg),
                 "--loadgen official: this build has no official LoadGen; build and install "
                 "it (loadgen/README_BUILD.md of mlcommons/inference) and configure with "
                 "-DMLPERF_LOADGEN_ROOT=PREFIX (see qdl/mlperf/README.md)");
#endif
    if (off.code == EXIT_NOT_READY)
        not_ready(o, eb.msg);
    else if (off.code >= EXIT_USAGE)
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
    lg_qsl_close(qsl);
    return off.code;
}

/* Opens the QSL, the output folder and the SUT, runs the test and closes them again. */
static int run(lg_args_t *o, const lg_test_settings_t *settings)
{
    int use_qdl = o->sut ? strcmp(o->sut, "qdl") == 0 : o->nodes != NULL;
    lg_qsl_t *qsl = NULL;
    lg_sut_t *sut = NULL;
    lg__metrics_t *metrics = NULL;
    cmn_errbuf_t eb = {{0}};
    lg_result_t res;
    int rc;

#ifndef LG_HAVE_QDL
    if (use_qdl) {
        fprintf(stderr, "loadgen-node: this build has no QDL (the qdl library was not built); "
                        "only --sut null is available\n");
        return EXIT_USAGE;
    }
#endif
    if (o->log.issue_cpu >= 0 && lg_issue_cpu_check(o->log.issue_cpu, &eb) < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return EXIT_USAGE;
    }
    rc = open_qsl(o, &qsl, &eb);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return rc == CMN_EPOLICY || rc == CMN_ECONFIG ? EXIT_USAGE : EXIT_FAILED;
    }
    rc = refuse_used_outdir(o->outdir, &o->log, &eb);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        lg_qsl_close(qsl);
        return EXIT_USAGE;
    }
    rc = mkdir_p(o->outdir, &eb);
    if (rc < 0)
        goto fail;
    if (o->loadgen && strcmp(o->loadgen, "builtin") != 0)
        return run_official(o, settings, use_qdl, qsl);
#ifdef LG_HAVE_QDL
    if (use_qdl)
        rc = open_qdl(o, NULL, &sut, &eb);
    else
#endif
        rc = lg_sut_null_create(&o->null, &sut, &eb);
    if (rc == CMN_ENOTREADY) {
        not_ready(o, eb.msg);
        lg_qsl_close(qsl);
        return EXIT_NOT_READY;
    }
    if (rc < 0)
        goto fail;

    if (o->metrics_listen || o->metrics_push) {
        lg__metrics_cfg_t mc = {o->metrics_listen, o->metrics_push, o->model, settings,
                                use_qdl ? sut : NULL};
        if ((rc = lg__metrics_start(&mc, &metrics, &eb)) < 0) {
#ifdef LG_HAVE_QDL
            if (use_qdl)
                lg_sut_qdl_destroy(sut);
            else
#endif
                lg_sut_null_destroy(sut);
            goto fail;
        }
        o->log.observe = lg__metrics_observe(metrics);
    }
    rc = lg_start_test(sut, qsl, settings, &o->log, &res, &eb);
    if (rc == 0)
        lg__metrics_result(metrics, &res);
#ifdef LG_HAVE_QDL
    if (use_qdl) {
        char path[4200];
        cmn_errbuf_t neb;

        /* The nodes' counters beside the logs: losses and re-dispatches stay on record. */
        snprintf(path, sizeof(path), "%s/%snodes%s.json", o->outdir, o->log.prefix, o->log.suffix);
        if (lg_sut_qdl_write_nodes(sut, path, &neb) < 0)
            cmn_log_warn("%s", neb.msg);
        qdl_stats_print(lg_sut_qdl_handle(sut), stderr);
        lg__metrics_stop(metrics, o->metrics_linger_ms);
        lg_sut_qdl_destroy(sut);
    } else
#endif
    {
        lg__metrics_stop(metrics, o->metrics_linger_ms);
        lg_sut_null_destroy(sut);
    }
    lg_qsl_close(qsl);
    if (rc < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        return EXIT_FAILED;
    }
    return exit_code(o, &res);

fail:
    fprintf(stderr, "loadgen-node: %s\n", eb.msg);
    lg_qsl_close(qsl);
    return EXIT_FAILED;
}

int main(int argc, char **argv)
{
    lg_args_t o;
    lg_test_settings_t settings;
    lg_msgs_t msgs = {0};
    cmn_errbuf_t eb = {{0}};
    int code;
    size_t i;

    cmn_log_init("loadgen-node", CMN_LOG_INFO);
    /* A node closing mid-write must be an error code on that connection, not a signal that kills
     * the whole run. */
    signal(SIGPIPE, SIG_IGN);
    catch_signals();
    if (lg_args_parse(argc, argv, &o, &eb) < 0 || lg_args_settings(&o, &settings, &msgs, &eb) < 0) {
        fprintf(stderr, "loadgen-node: %s\n", eb.msg);
        lg_args_free(&o);
        return EXIT_USAGE;
    }
    for (i = 0; i < msgs.n; i++)
        cmn_log(msgs.m[i].is_error ? CMN_LOG_ERROR : CMN_LOG_WARN, "%s: %s", msgs.m[i].key,
                msgs.m[i].text);
    if (!o.mlperf_conf && !(o.loadgen && strcmp(o.loadgen, "official") == 0))
        cmn_log_warn("no --mlperf-conf: the TestSettings defaults apply (seeds 0 unless --set "
                     "gives them); not valid for a submission");
    o.log.msgs = &msgs;
    code = run(&o, &settings);
    lg_args_free(&o);
    return code;
}
