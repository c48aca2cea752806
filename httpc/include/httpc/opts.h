/* Option and log helpers of the HTTP clients (sut-node's openai and kserve backends, the QDL's
 * endpoints), on common's option engine (cmn/opts.h): a table of known keys with their defaults
 * (cmn_opt_t rows, HTTPC_OPT), one check that names every known key when a key is not, one
 * integer parser whose message names the option and its range, one printf-style logger. Options
 * are |n| KEY=VALUE pairs in two arrays (a backend passes its sut_backend_config_t's n_options,
 * keys and values). */
#ifndef HTTPC_OPTS_H
#define HTTPC_OPTS_H

#include "cmn/opts.h"

#include <stddef.h>

/* A known key and its default (NULL: no default, absent means "not set"). */
typedef cmn_opt_t httpc_optdef_t;
#define HTTPC_OPT(key, dflt) CMN_OPT_KV(key, dflt)

/* 0 when every key in keys[0..n) is in |known|; else -EINVAL and "unknown option 'K' for the
 * |backend| backend (known: ...)" in err. */
int httpc_opts_check(size_t n, const char *const *keys, const char *backend,
                     const httpc_optdef_t *known, size_t n_known, char *err, size_t errlen);

/* The value of |key| among the |n| pairs, or its default from |known| (NULL for a key not in
 * |known|). */
const char *httpc_opts_get(size_t n, const char *const *keys, const char *const *values,
                           const httpc_optdef_t *known, size_t n_known, const char *key);

/* Defines `static const char *NAME(const CFG *cfg, const char *key)`, httpc_opts_get over a
 * backend's config (its n_options, keys and values) and its table |known| (an array). */
#define HTTPC_OPTS_GETTER(NAME, CFG, known)                                  \
    static const char *NAME(const CFG *cfg, const char *key)                 \
    {                                                                        \
        return httpc_opts_get(cfg->n_options, cfg->keys, cfg->values, known, \
                              sizeof(known) / sizeof((known)[0]), key);      \
    }

/* Parses |v| as a decimal integer in [lo, hi] into *out; -EINVAL and "option K=V: expected an
 * integer in lo..hi" in err otherwise. */
int httpc_opts_u(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
                 unsigned long long *out, char *err, size_t errlen);

/* Formats a line and hands it to the node's logger (nothing when |log| is NULL). */
void httpc_logf(void (*log)(int level, const char *msg), int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
