/* GET /metrics over libmicrohttpd: its own polling thread, bounded connections and timeouts. */
#include "cmn/metrics_http.h"
#include "cmn/log.h"
#include "cmn/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cmn_metrics_http {
    struct MHD_Daemon *d;
    cmn_metrics_t *m;
    int port;
    char addr[64]; /* the bound address, "127.0.0.1:9400" */
};

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    size_t n;

    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    cmn_log_warn("metrics http: %s", line);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                        MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    cmn_metrics_http_t *h = cls;
    struct MHD_Response *r;
    enum MHD_Result ret;
    char *body;
    size_t len;

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served\n");
    /* A GET carries no body; a client that sends one anyway gets it ignored, never buffered. */
    *upload_data_size = 0;
    if (strcmp(url, "/metrics") != 0)
        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    if (cmn_metrics_render(h->m, &body, &len) < 0)
        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CMN_METRICS_CONTENT_TYPE);
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int cmn_metrics_http_start(cmn_metrics_t *m, const char *addr, cmn_metrics_http_t **out,
                           cmn_errbuf_t *eb)
{
    struct sockaddr_storage ss;
    cmn_metrics_http_t *h;
    const union MHD_DaemonInfo *info;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    int rc;

    rc = cmn_addr_parse(addr, &ss, eb);
    if (rc < 0)
        return rc;
    h = calloc(1, sizeof(*h));
    if (!h)
        return cmn_errf(eb, -ENOMEM, "metrics listener %s: out of memory", addr);
    h->m = m;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    errno = 0;
    /* The logger first: options before it would log through MHD's own stderr logger. */
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)CMN_METRICS_HTTP_MAX_CONN,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CMN_METRICS_HTTP_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024, MHD_OPTION_END);
    if (!h->d) {
        int e = errno ? errno : EADDRNOTAVAIL;
        free(h);
        return cmn_errf(eb, -e, "metrics listener %s: cannot listen: %s", addr, strerror(e));
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : cmn_addr_port((struct sockaddr *)&ss);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)h->port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)h->port);
    cmn_addr_format((struct sockaddr *)&ss, h->addr, sizeof(h->addr));
    *out = h;
    return 0;
}

int cmn_metrics_http_port(const cmn_metrics_http_t *h)
{
    return h->port;
}

const char *cmn_metrics_http_addr(const cmn_metrics_http_t *h)
{
    return h->addr;
}

void cmn_metrics_http_stop(cmn_metrics_http_t *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
