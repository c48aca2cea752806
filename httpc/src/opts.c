#include "httpc/opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int httpc_opts_check(size_t n, const char *const *keys, const char *backend,
                     const httpc_optdef_t *known, size_t n_known, char *err, size_t errlen)
{
    size_t i, k, len;

    for (i = 0; i < n; i++) {
        for (k = 0; k < n_known && strcmp(keys[i], known[k].key) != 0; k++)
            ;
        if (k < n_known)
            continue;
        len = (size_t)snprintf(err, errlen,
                               "unknown option '%s' for the %s backend (known:", keys[i], backend);
        for (k = 0; k < n_known && len < errlen; k++)
            len += (size_t)snprintf(err + len, errlen - len, " %s", known[k].key);
        if (len < errlen)
            snprintf(err + len, errlen - len, ")");
        return -EINVAL;
    }
    return 0;
}

const char *httpc_opts_get(size_t n, const char *const *keys, const char *const *values,
                           const httpc_optdef_t *known, size_t n_known, const char *key)
{
    size_t i, k;

    for (k = 0; k < n_known && strcmp(known[k].key, key) != 0; k++)
        ;
    if (k == n_known)
        return NULL;
    for (i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0)
            return values[i];
    return known[k].dflt;
}

int httpc_opts_u(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
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

void httpc_logf(void (*log)(int level, const char *msg), int level, const char *fmt, ...)
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
