/* httpc/opts.h over common's option engine (cmn/opts.h). */
#include "httpc/opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int httpc_opts_check(size_t n, const char *const *keys, const char *backend,
                     const httpc_optdef_t *known, size_t n_known, char *err, size_t errlen)
{
    long bad = cmn_opts_kv_unknown(known, n_known, n, keys);
    size_t k, len;

    if (bad < 0)
        return 0;
    len = (size_t)snprintf(err, errlen, "unknown option '%s' for the %s backend (known:", keys[bad],
                           backend);
    for (k = 0; k < n_known && len < errlen; k++)
        len += (size_t)snprintf(err + len, errlen - len, " %s", known[k].name);
    if (len < errlen)
        snprintf(err + len, errlen - len, ")");
    return -EINVAL;
}

const char *httpc_opts_get(size_t n, const char *const *keys, const char *const *values,
                           const httpc_optdef_t *known, size_t n_known, const char *key)
{
    return cmn_opts_kv_get(known, n_known, n, keys, values, key);
}

int httpc_opts_u(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
                 unsigned long long *out, char *err, size_t errlen)
{
    cmn_opt_t d = CMN_OPT_KV(key, NULL);
    cmn_errbuf_t eb;
    uint64_t u;

    d.num = CMN_OPT_INT;
    d.min = lo;
    d.max = hi;
    if (cmn_opts_num(&d, v, &u, &eb) < 0) {
        snprintf(err, errlen, "%s", eb.msg);
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
