/* Serves a metrics registry at GET /metrics over HTTP/1.1, for a Prometheus server to scrape.
 *
 * libmicrohttpd runs the listener on a thread of its own, so a busy or stalled event loop of the
 * program never delays a scrape and a slow scraper never touches the program's loop. Each scrape
 * renders the registry (cmn_metrics_render). Other paths answer 404, other methods 405.
 * Connections are limited in number and time (CMN_METRICS_HTTP_MAX_CONN, ..._TIMEOUT_S).
 *
 * Lifecycle: cmn_metrics_http_start, then cmn_metrics_http_stop before the registry is freed.
 * Both are called from one thread (the program's main thread); the registry is read from the
 * server's thread meanwhile. Errors: CMN_ECONFIG (bad address), a negated errno of bind/listen
 * (-EADDRINUSE, -EACCES), -ENOMEM; each with a sentence in |eb|. */
#ifndef CMN_METRICS_HTTP_H
#define CMN_METRICS_HTTP_H

#include "cmn/err.h"
#include "cmn/metrics.h"

enum {
    CMN_METRICS_HTTP_MAX_CONN = 16,  /* concurrent scrapers */
    CMN_METRICS_HTTP_TIMEOUT_S = 10, /* an idle connection is closed after this */
};

typedef struct cmn_metrics_http cmn_metrics_http_t;

/* Listens on |addr| ("127.0.0.1:9400", "[::1]:0", "*:9400"; port 0 picks a free one, see
 * cmn_metrics_http_port) and serves |m|. */
int cmn_metrics_http_start(cmn_metrics_t *m, const char *addr, cmn_metrics_http_t **out,
                           cmn_errbuf_t *eb);

/* The port it listens on (the one the system chose when |addr| said 0). */
int cmn_metrics_http_port(const cmn_metrics_http_t *h);

/* The address it listens on, with that port: "127.0.0.1:41234" (valid until stop). */
const char *cmn_metrics_http_addr(const cmn_metrics_http_t *h);

/* Stops listening, ends the server's thread and frees |h|. NULL is a no-op. */
void cmn_metrics_http_stop(cmn_metrics_http_t *h);

#endif
