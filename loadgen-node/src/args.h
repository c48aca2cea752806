/* loadgen-node's command line: one option table drives the parser, --help and the keys of a
 * --config file (key = value lines, keys as the long options; the command line wins). */
#ifndef LG_ARGS_H
#define LG_ARGS_H

#include "cmn/err.h"
#include "lg/lg.h"
#include "lg/sut_null.h"

#include <stdint.h>

#define LG_ARGS_MAX_USER_CONFS 8
#define LG_ARGS_MAX_SETS 64
#define LG_ARGS_MAX_NODES 64

typedef struct {
    const char *scenario, *mode, *model, *mlperf_conf, *audit, *outdir, *loadgen;
    /* --scenario Interactive: scenario becomes "Server" and model points at interactive_model,
     * "<--model>-interactive", the name mlperf.conf keys its Interactive settings by. */
    int interactive;
    char interactive_model[128];
    const char *user_conf[LG_ARGS_MAX_USER_CONFS];
    int n_user_conf;
    const char *sets[LG_ARGS_MAX_SETS];
    int n_sets;
    const char *qsl_npy, *qsl_kits, *qsl_raw, *synth_kind, *compress;
    const char *qsl_llm_json, *llm_field; /* --qsl-llm-json FILE [--llm-field NAME] */
    uint64_t synth_n, sample_size, synth_seed, perf_count;
    int have_synth;
    const char *sut, *nodes, *policy, *result_codec;
    const char *tls_ca, *tls_cert, *tls_key, *tls_name;
    /* Endpoint nodes (openai+http://, qdl/README.md "Endpoints"). */
    const char *ep_dialect, *ep_model, *ep_key_file, *ep_session, *ep_ca, *ep_client;
    uint64_t ep_max_tokens, ep_min_tokens, ep_max_inflight; /* 0: the QDL's default */
    int ucx_busy_poll;          /* --ucx-busy-poll: spin UCX progress on the QDL loop */
    int ucx_trusted_fabric;     /* --ucx-trusted-fabric: ucx:// nodes allowed */
    const char *metrics_listen; /* --metrics-listen */
    uint64_t metrics_linger_ms;
    const char *metrics_push; /* --metrics-push URL */
    uint64_t connections;
    uint64_t write_thread_min; /* --write-thread-min (QDL), when have_write_thread_min */
    int have_write_thread_min;
    bool issue_write_thread;      /* --issue-write-thread (QDL lend_write_thread) */
    uint64_t progress_timeout_ms; /* 0: the QDL's default */
    uint32_t max_dispatches;      /* 0: the QDL's default */
    uint64_t node_memory_budget;  /* --node-memory-budget; 0: the QDL's default */
    uint64_t wait_for_nodes;      /* --wait-for-nodes SECONDS; 0: refuse an unready node */
    lg_null_config_t null;
    lg_log_settings_t log;
    const char *config_file; /* the --config file being read, for its messages */
    /* Strings read from a --config file, owned until lg_args_free(). */
    char **owned;
    size_t n_owned;
} lg_args_t;

/* Parses argv into |o| (defaults first, then --config, then the command line) and checks what
 * can be checked without opening the QSL or the network: required options, --nodes syntax,
 * readable TLS files. --help and --version print and exit(0). Returns 0, or CMN_ECONFIG with a
 * message naming the option and the reason (the caller exits 2). */
int lg_args_parse(int argc, char **argv, lg_args_t *o, cmn_errbuf_t *eb);

/* Applies the conf files, --mode and every --set to |s|. 0 or CMN_ECONFIG (exit 2). */
int lg_args_settings(const lg_args_t *o, lg_test_settings_t *s, lg_msgs_t *msgs, cmn_errbuf_t *eb);

void lg_args_free(lg_args_t *o);

#endif
