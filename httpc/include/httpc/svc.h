/* httpc/svc.h: what a forwarding backend (sut-node's openai and kserve) opens towards its server
 * besides its own options: the base URL checked and trimmed, the readiness (health) URL from it,
 * and the pool with its cancel registry, opened and closed together. */
#ifndef HTTPC_SVC_H
#define HTTPC_SVC_H

#include "httpc/httpc.h"
#include "httpc/live.h"

#include <stddef.h>

/* 0 when |url| starts with http:// or https://, with its length less trailing slashes in *len;
 * else -EINVAL and "option url=URL: expected http://HOST:PORT" in err. */
int httpc_svc_base(const char *url, size_t *len, char *err, size_t errlen);

/* The first |len| bytes of |url| followed by |tail|, malloc'ed (NULL when out of memory). */
char *httpc_svc_url(const char *url, size_t len, const char *tail);

/* The readiness URL: NULL in *out for an empty |path| (ready at once); else |path| must start
 * with '/' and be printable ASCII without quotes or backslashes (-EINVAL and "option
 * health_path=PATH: expected a path from / (or empty)" in err), and *out is the base + path.
 * -ENOMEM when out of memory. */
int httpc_svc_health(const char *url, size_t len, const char *path, char **out, char *err,
                     size_t errlen);

/* Opens the cancel registry |lives| and the pool *http on |cfg|; on failure neither stays open,
 * and err names what failed (|what|: "request" or "stream", the registry's entries). */
int httpc_svc_open(const httpc_cfg_t *cfg, const char *what, httpc_t **http, httpc_lives_t *lives,
                   char *err, size_t errlen);
/* Closes what httpc_svc_open opened: the pool first (no on_done after it), then the registry.
 * Nothing when |http| is NULL (httpc_svc_open failed or did not run). */
void httpc_svc_close(httpc_t *http, httpc_lives_t *lives);

#endif
