/* Option and log helpers the forwarding backends (openai, kserve) share: one table of known keys
 * with their defaults, one check that names every known key when a key is not, one integer
 * parser whose message names the option and its range, one printf-style logger. */
#ifndef OAI_OPTS_H
#define OAI_OPTS_H

#include "sut/sut_backend.h"

#include <stddef.h>

typedef struct {
    const char *key;
    const char *dflt; /* NULL: no default (absent means "not set") */
} oai_optdef_t;

/* 0 when every key in |cfg| is in |known|; else -EINVAL and "unknown option 'K' for the
 * |backend| backend (known: ...)" in err. */
int oai_opts_check(const sut_backend_config_t *cfg, const char *backend, const oai_optdef_t *known,
                   size_t n_known, char *err, size_t errlen);

/* The value of |key| in |cfg|, or its default from |known| (NULL for a key not in |known|). */
const char *oai_opts_get(const sut_backend_config_t *cfg, const oai_optdef_t *known, size_t n_known,
                         const char *key);

/* Parses |v| as a decimal integer in [lo, hi] into *out; -EINVAL and "option K=V: expected an
 * integer in lo..hi" in err otherwise. */
int oai_opts_u(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
               unsigned long long *out, char *err, size_t errlen);

/* Formats a line and hands it to the node's logger (nothing when |log| is NULL). */
void oai_logf(void (*log)(int level, const char *msg), int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
