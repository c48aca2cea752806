/* Serves a metrics registry at GET /metrics over HTTP/1.1, for a Prometheus server to scrape.
 *
 * libmicrohttpd runs the listener on a thread of its own, so a busy or stalled event loop of the
 * program never delays a scrape and a slow scraper never touches the program's loop. Each scrape
 * renders the registry (cmn_metrics_render). Other paths answer 404, other methods 405.
 *
 * The port may be reachable by anyone, so connections are bounded in number, time and size, and
 * a scrape always gets in (common/README.md, "The metrics endpoint under attack"): a new
 * connection beyond CMN_METRICS_HTTP_MAX_CONN, or CMN_METRICS_HTTP_MAX_CONN_PER_IP from its
 * address, closes another: the oldest holding part of a request head, silent or idle first, one
 * being answered or with a whole head waiting unread last; a request head must arrive whole within
 * CMN_METRICS_HTTP_HEADER_TIMEOUT_S of connecting however slowly it trickles; any connection is
 * closed after CMN_METRICS_HTTP_IDLE_TIMEOUT_S without a byte moving either way (each reply ends
 * its connection anyway: Connection: close); a request head larger than
 * CMN_METRICS_HTTP_CONN_MEMORY is refused (414 for the request line, 431 for the headers).
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
    /* Connections kept open at once. Prometheus holds one per target (two while a scrape
     * overlaps a slow one); the rest is room for curl and a second server. */
    CMN_METRICS_HTTP_MAX_CONN = 32,
    /* From one address: a single attacker cannot take all CMN_METRICS_HTTP_MAX_CONN. Scrapers
     * sharing one address (a NAT) get room for several. */
    CMN_METRICS_HTTP_MAX_CONN_PER_IP = 8,
    /* The whole request head, from connect: a scraper sends its ~300 bytes in one write, so 2 s
     * is a loaded host's worst case many times over. */
    CMN_METRICS_HTTP_HEADER_TIMEOUT_S = 2,
    /* Any connection's silence, a reply's included (a scraper that stopped reading); and a
     * keep-alive connection's wait for its next request, should replies ever keep connections
     * open (they end them now). Below Prometheus's usual interval (15 s). */
    CMN_METRICS_HTTP_IDLE_TIMEOUT_S = 10,
    /* libmicrohttpd's memory per connection, which the request head (line and headers) must fit
     * in: Prometheus sends ~300 bytes. With at most 96 connections (CMN_METRICS_HTTP_MAX_CONN
     * and the room to accept more while closing some, metrics_http.c) the endpoint's buffers
     * stay under 3 MiB however many connect. */
    CMN_METRICS_HTTP_CONN_MEMORY = 32 * 1024,
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
