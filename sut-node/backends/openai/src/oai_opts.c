#include "oai_opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oai_opts_check(const sut_backend_config_t *cfg, const char *backend, const oai_optdef_t *known,
                   size_t n_known, char *err, size_t errlen)
{
    size_t i, k, len;

    for (i = 0; i < cfg->n_options; i++) {
        for (k = 0; k < n_known && strcmp(cfg->keys[i], known[k].key) != 0; k++)
            ;
        if (k < n_known)
            continue;
        len = (size_t)snprintf(
            err, errlen, "unknown option '%s' for the %s backend (known:", cfg->keys[i], backend);
        for (k = 0; k < n_known && len < errlen; k++)
            len += (size_t)snprintf(err + len, errlen - len, " %s", known[k].key);
        if (len < errlen)
            snprintf(err + len, errlen - len, ")");
        return -EINVAL;
    }
    return 0;
}

const char *oai_opts_get(const sut_backend_config_t *cfg, const oai_optdef_t *known, size_t n_known,
                         const char *key)
{
    size_t k;

    for (k = 0; k < n_known; k++)
        if (strcmp(known[k].key, key) == 0)
            return sut_backend_opt(cfg, key, known[k].dflt);
    return NULL;
}

int oai_opts_u(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
               unsigned long long *out, char *err, size_t errlen)
{
    char *end;
    unsigned long long u;

    errno = 0;
    u = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || u < lo || u > hi) {
        snprintf(err, errlen, "option %s=%s: expected an integer in %llu..%llu", key, v, lo, hi);
        return -EINVAL;
    }
    *out = u;
    return 0;
}

void oai_logf(void (*log)(int level, const char *msg), int level, const char *fmt, ...)
{
    char msg[600];
    va_list ap;

    if (!log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log(level, msg);
}
