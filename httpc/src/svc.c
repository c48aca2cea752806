/* The base URL, the readiness URL and the pool of a forwarding backend (httpc/svc.h). */
#include "httpc/svc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int httpc_svc_base(const char *url, size_t *len, char *err, size_t errlen)
{
    size_t ul;

    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        snprintf(err, errlen, "option url=%s: expected http://HOST:PORT", url);
        return -EINVAL;
    }
    ul = strlen(url);
    while (ul && url[ul - 1] == '/')
        ul--;
    *len = ul;
    return 0;
}

char *httpc_svc_url(const char *url, size_t len, const char *tail)
{
    size_t tl = strlen(tail);
    char *s = malloc(len + tl + 1);

    if (!s)
        return NULL;
    memcpy(s, url, len);
    memcpy(s + len, tail, tl + 1);
    return s;
}

int httpc_svc_health(const char *url, size_t len, const char *path, char **out, char *err,
                     size_t errlen)
{
    const char *p;

    *out = NULL;
    if (!*path)
        return 0;
    for (p = path; *p && *p >= 0x20 && *p <= 0x7e && *p != '"' && *p != '\\'; p++)
        ;
    if (*path != '/' || *p) {
        snprintf(err, errlen, "option health_path=%s: expected a path from / (or empty)", path);
        return -EINVAL;
    }
    *out = httpc_svc_url(url, len, path);
    return *out ? 0 : -ENOMEM;
}

int httpc_svc_open(const httpc_cfg_t *cfg, const char *what, httpc_t **http, httpc_lives_t *lives,
                   char *err, size_t errlen)
{
    int rc = httpc_lives_init(lives);

    if (rc < 0) {
        snprintf(err, errlen, "the %s registry's mutex: %s", what, strerror(-rc));
        return rc;
    }
    rc = httpc_create(cfg, http, err, errlen);
    if (rc < 0)
        httpc_lives_destroy(lives);
    return rc;
}

void httpc_svc_close(httpc_t *http, httpc_lives_t *lives)
{
    if (!http)
        return;
    httpc_destroy(http);
    httpc_lives_destroy(lives);
}
