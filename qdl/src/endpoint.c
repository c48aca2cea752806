/* Endpoint nodes: an OpenAI-compatible serving engine over HTTP/SSE instead of a sut-node
 * (issue 39; qdl/README.md, "Endpoints").
 *
 * Each sample (little-endian int32 token IDs, as LLM QSLs hold them) goes as one streaming
 * completion in the node's dialect (httpc/oai.h, the openai backend's one copy), read as it
 * arrives (httpc_oai_stream_t). Its first token and its end become a FirstToken and a Response
 * result of the request's "connection" and go through results.c like a sut-node's, so a sample
 * is completed at most once, passes at most one first token however often it is re-dispatched,
 * and a result of a connection closed meanwhile (its samples re-dispatched) is dropped: its wire
 * id is no longer in that connection's in-flight map.
 *
 * Transport: endpoint nodes use the lean HTTP/1.1 client (httpc/h1.h; openai+https:// with its
 * TLS), one keep-alive pool per node on the QDL's own loop, so a stream's bytes are parsed and
 * its results handled on the loop thread with no hand-over; with endpoint_curl they use the
 * libcurl pool (httpc/httpc.h) on a thread of its own, whose two events per request (first token,
 * end) reach the loop through a cmn_xq. Either reads a stream on a coalescing tick after its first
 * token (httpc's coalesce_us, HTTPC_COALESCE_US_DEFAULT), one read for the events that came since.
 *
 * Health: a stream that fails (the engine died mid-stream, answered an error status or an
 * error event, sent what does not parse) re-dispatches its own sample only (no second
 * FirstToken); the endpoint's other streams go on, and until one of them completes it is
 * degraded (dispatch.c: a new sample only when no healthy node has room, one at a time), so the
 * sample goes elsewhere. EP_FAIL_LIMIT failed streams in a row, or one that could not connect
 * (TLS included), close the endpoint's connection: every stream on it is cancelled, its
 * samples go to other nodes, and it comes back after the reconnect backoff on probation (one
 * sample at a time until one completes). A stream that completes resets the count. The progress
 * deadline (node_liveness.c) applies as to a streaming node. An endpoint has no pings: its liveness
 * is its streams; at start each one is probed once (GET /v1/models, by the client its streams
 * use), so an address that does not answer HTTP, or whose TLS handshake fails, fails qdl_create
 * naming it. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#ifdef QDL_HAVE_ENDPOINTS
#    include "httpc/h1.h"
#    include "httpc/httpc.h"
#    include "httpc/live.h"
#    include "httpc/oai.h"
#    include "httpc/probe.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EP_SCHEME "openai+"
#define EP_MAX_EVENT 65536u
#define EP_TIMEOUT_MS 600000L
#define EP_FAIL_LIMIT 3u /* failed streams in a row that close an endpoint's connection */
#define EP_PROBE_MS 5000L

int qdl__ep_address(const char *address)
{
    return strncmp(address, EP_SCHEME "http://", sizeof(EP_SCHEME "http://") - 1) == 0 ||
           strncmp(address, EP_SCHEME "https://", sizeof(EP_SCHEME "https://") - 1) == 0;
}

#ifndef QDL_HAVE_ENDPOINTS

int qdl__ep_node_init(qdl_t *q, qdl_node_t *nd, cmn_errbuf_t *eb)
{
    (void)q;
    return cmn_errf(eb, CMN_ECONFIG,
                    "node %s: this QDL was built without endpoint support (libcurl >= 7.85 and "
                    "yajl >= 2.1: libcurl4-openssl-dev, libyajl-dev)",
                    nd->address);
}

int qdl__ep_open(qdl_t *q, cmn_errbuf_t *eb)
{
    (void)q;
    (void)eb;
    return 0;
}

void qdl__ep_connect(qdl_conn_t *qc)
{
    (void)qc;
}

int qdl__ep_sample_ok(const qdl_srec_t *s)
{
    (void)s;
    return 0;
}

int qdl__ep_send(qdl_t *q, qdl_conn_t *qc, qdl_srec_t *s)
{
    (void)q;
    (void)qc;
    (void)s;
    return CMN_ECONFIG;
}

void qdl__ep_cancel(qdl_conn_t *qc)
{
    (void)qc;
}

void qdl__ep_stop(qdl_t *q)
{
    (void)q;
}

void qdl__ep_free(qdl_t *q)
{
    (void)q;
}

#else

/* One of a request's two events on the way to the loop. */
typedef struct {
    cmn_xq_node_t link; /* first: the queue hands back this pointer */
    struct qdl_ep_req *r;
    int done; /* 0: its first token; 1: its end */
} ep_event_t;

/* An endpoint node's own part. */
struct qdl_ep_node {
    char url[320];  /* the request URL: base + dialect path */
    char base[320]; /* scheme, authority, path prefix */
    char host[256]; /* openai+http://: the host (without brackets), port and path for h1 */
    uint16_t port;
    const char *path;
    int https;
    int curl; /* endpoint_curl: the libcurl pool */
    httpc_oai_gen_t gen;
    httpc_h1_pool_t *h1; /* the lean client's */
    uint32_t fails;      /* streams failed in a row */
};

/* The QDL's endpoint part: one pool for every endpoint node. */
struct qdl_ep {
    httpc_t *http;
    httpc_lives_t lives;
    int lives_ready;
    cmn_xq_t events;
    int events_open;
    char *auth;      /* "Authorization: Bearer KEY" or NULL */
    int curl;        /* some node uses the libcurl pool (endpoint_curl) */
    size_t requests; /* requests allocated and not yet freed */
};

typedef struct qdl_ep_req {
    httpc_req_t req;
    httpc_h1_req_t h1; /* openai+http:// */
    int in_cb;         /* h1: inside its on_data */
    int dead;          /* h1: cancelled from inside its on_data; freed there */
    httpc_live_t live;
    qdl_t *q;
    qdl_conn_t *qc;
    uint64_t wire_id;
    char *body;
    const char *headers[4];
    char session[96];
    char extra[100]; /* h1: the session header line */
    httpc_oai_stream_t st;
    /* Written on the pool's thread before the event that carries them is pushed. */
    int32_t first_tok;
    int first_pushed;
    int status;
    char msg[400];
    ep_event_t ev_first, ev_done;
    struct qdl_ep_req *next, *prev; /* the connection's list (loop thread) */
    int listed;
} ep_req_t;

/* ---- set-up ---------------------------------------------------------------------------------- */

/* The lean client's host, port (80, or 443 for https, when not given) and request path from
 * the node's URL. */
static int ep_host_port(qdl_node_t *nd, const char *auth, cmn_errbuf_t *eb)
{
    struct qdl_ep_node *e = nd->ep;
    const char *end = auth + strcspn(auth, "/?"), *colon, *h = auth, *he;
    unsigned long port = e->https ? 443 : 80;

    if (*h == '[') {
        he = memchr(h, ']', (size_t)(end - h));
        if (!he)
            return cmn_errf(eb, CMN_ECONFIG, "endpoint %s: '[' without ']' in the host",
                            nd->address);
        h++;
        colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        he = colon ? colon : end;
    }
    if (colon) {
        char *stop;
        port = strtoul(colon + 1, &stop, 10);
        if (stop != end || port == 0 || port > 65535)
            return cmn_errf(eb, CMN_ECONFIG, "endpoint %s: the port is not 1..65535", nd->address);
    }
    if (he == h || (size_t)(he - h) >= sizeof(e->host))
        return cmn_errf(eb, CMN_ECONFIG, "endpoint %s: no HOST:PORT after the scheme", nd->address);
    memcpy(e->host, h, (size_t)(he - h));
    e->host[he - h] = '\0';
    e->port = (uint16_t)port;
    e->path = strchr(strstr(e->url, "://") + 3, '/');
    return 0;
}

int qdl__ep_node_init(qdl_t *q, qdl_node_t *nd, cmn_errbuf_t *eb)
{
    const char *a = nd->address + sizeof(EP_SCHEME) - 1; /* "http://..." or "https://..." */
    const char *auth = strstr(a, "://") + 3, *path, *query;
    const char *dialect = q->cfg.endpoint_dialect ? q->cfg.endpoint_dialect : "vllm";
    char dname[32];
    size_t base_len;

    query = strchr(auth, '?');
    path = strchr(auth, '/');
    if (path && query && path > query)
        path = NULL;
    if ((path ? path : query ? query : auth + strlen(auth)) == auth)
        return cmn_errf(eb, CMN_ECONFIG, "endpoint %s: no HOST:PORT after the scheme", nd->address);
    if (query) {
        if (strncmp(query, "?dialect=", 9) != 0 || strlen(query + 9) >= sizeof(dname))
            return cmn_errf(eb, CMN_ECONFIG,
                            "endpoint %s: the only query it takes is ?dialect=vllm|trtllm|sglang|"
                            "llamacpp",
                            nd->address);
        snprintf(dname, sizeof(dname), "%s", query + 9);
        dialect = dname;
    }
    nd->ep = qdl__calloc(1, sizeof(*nd->ep));
    if (!nd->ep)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    if (httpc_oai_dialect_from_name(dialect, &nd->ep->gen.dialect) < 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "endpoint %s: dialect '%s' is not vllm, trtllm, sglang or llamacpp",
                        nd->address, dialect);
    nd->ep->gen.model = q->cfg.endpoint_model ? q->cfg.endpoint_model : "model";
    for (const char *c = nd->ep->gen.model; *c; c++)
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\')
            return cmn_errf(eb, CMN_ECONFIG,
                            "endpoint model '%s': only printable ASCII without quotes or "
                            "backslashes",
                            nd->ep->gen.model);
    nd->ep->gen.max_tokens = q->cfg.endpoint_max_tokens ? q->cfg.endpoint_max_tokens : 1024;
    nd->ep->gen.min_tokens = q->cfg.endpoint_min_tokens;
    if (nd->ep->gen.min_tokens > nd->ep->gen.max_tokens)
        return cmn_errf(eb, CMN_ECONFIG, "endpoint min tokens %u is over its max tokens %u",
                        nd->ep->gen.min_tokens, nd->ep->gen.max_tokens);
    /* base URL: scheme, authority and path (without a trailing '/'), then the dialect's path */
    base_len = (size_t)((query ? query : auth + strlen(auth)) - a);
    while (base_len > 0 && a[base_len - 1] == '/')
        base_len--;
    if (base_len + strlen(httpc_oai_dialect_path(nd->ep->gen.dialect)) >= sizeof(nd->ep->url))
        return cmn_errf(eb, CMN_ECONFIG, "endpoint %s: the URL is too long", nd->address);
    snprintf(nd->ep->url, sizeof(nd->ep->url), "%.*s%s", (int)base_len, a,
             httpc_oai_dialect_path(nd->ep->gen.dialect));
    snprintf(nd->ep->base, sizeof(nd->ep->base), "%.*s", (int)base_len, a);
    nd->ep->https = strncmp(a, "https://", 8) == 0;
    nd->ep->curl = q->cfg.endpoint_curl;
    if (!nd->ep->curl && ep_host_port(nd, auth, eb) < 0)
        return -1;
    snprintf(nd->name, sizeof(nd->name), "endpoint %s %.*s",
             httpc_oai_dialect_name(nd->ep->gen.dialect), (int)base_len, a);
    nd->named = 1;
    nd->endpoint = 1;
    nd->streaming = 1;
    nd->sample_codecs = 1u << 0; /* token IDs as they are: no codec */
    nd->window = q->cfg.endpoint_max_inflight ? q->cfg.endpoint_max_inflight : 256;
    return 0;
}

static void on_events(cmn_xq_t *x, cmn_xq_node_t *list);

/* The fixed headers of every request (Content-Type, the API key). */
static void ep_headers(const qdl_t *q, const char *hdrs[3])
{
    size_t h = 0;

    hdrs[h++] = "Content-Type: application/json";
    if (q->ep->auth)
        hdrs[h++] = q->ep->auth;
    hdrs[h] = NULL;
}

/* The CA openai+https:// endpoints are verified against: endpoint_ca_file, else tls_ca_file
 * (NULL: the system's). */
static const char *ep_ca(const qdl_t *q)
{
    return q->cfg.endpoint_ca_file ? q->cfg.endpoint_ca_file : q->cfg.tls_ca_file;
}

/* The lean client's pool for |nd| (its headers in |hdrs|, kept by the caller). */
static void ep_h1_cfg(const qdl_t *q, const qdl_node_t *nd, const char *hdrs[3], httpc_h1_cfg_t *c)
{
    ep_headers(q, hdrs);
    memset(c, 0, sizeof(*c));
    c->host = nd->ep->host;
    c->port = nd->ep->port;
    c->path = nd->ep->path;
    c->headers = hdrs;
    c->connect_ms = q->cfg.connect_timeout_ms ? (uint32_t)q->cfg.connect_timeout_ms : 0;
    c->tls = nd->ep->https;
    c->ca_file = ep_ca(q);
    c->coalesce_us = HTTPC_COALESCE_US_DEFAULT; /* the libcurl pool's (ep_open) */
}

/* Every endpoint answers HTTP before the run: GET BASE/v1/models (httpc/probe.h: 2xx, or 404, 405,
 * 501 from an engine without that route), through the client its streams will use (so a TLS
 * handshake that fails fails here, in the lean client's words). With wait_ready_ms the run may
 * start before an engine is up, so a failed probe is a warning there. */
static int ep_probe_all(qdl_t *q, cmn_errbuf_t *eb)
{
    const char *hdrs[3];
    char url[400], why[600], path[340];
    size_t i;
    long ms = q->cfg.connect_timeout_ms ? (long)q->cfg.connect_timeout_ms : EP_PROBE_MS;

    ep_headers(q, hdrs);
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        int rc;
        if (!nd->endpoint)
            continue;
        snprintf(url, sizeof(url), "%s/v1/models", nd->ep->base);
        why[0] = '\0';
        if (nd->ep->curl) {
            rc = httpc_probe_get_ca(url, hdrs, ep_ca(q), ms, why, sizeof(why));
        } else {
            httpc_h1_cfg_t c;
            const char *bp = strchr(strstr(nd->ep->base, "://") + 3, '/');
            ep_h1_cfg(q, nd, hdrs, &c);
            snprintf(path, sizeof(path), "%s/v1/models", bp ? bp : "");
            c.path = path;
            c.method = "GET";
            c.max_conns = 1;
            c.coalesce_us = 0; /* one answer, read at once */
            c.connect_ms = c.first_byte_ms = c.idle_ms = (uint32_t)ms;
            rc = httpc_probe_h1(&c, url, why, sizeof(why));
        }
        if (rc < 0)
            return cmn_errf(eb, rc, "endpoint %s: cannot probe it: %s", nd->address,
                            cmn_strerror(rc));
        if (rc == 0 && !q->cfg.wait_ready_ms)
            return cmn_errf(eb, CMN_ENOTREADY,
                            "endpoint %s does not answer as an OpenAI-compatible server: %s",
                            nd->address, why);
        if (rc == 0)
            cmn_log_warn("qdl: endpoint %s does not answer yet: %s", nd->address, why);
    }
    return 0;
}

/* The lean client: the node's keep-alive pool on the QDL's loop. */
static int ep_h1_open(qdl_t *q, qdl_node_t *nd, cmn_errbuf_t *eb)
{
    httpc_h1_cfg_t c;
    const char *hdrs[3];
    char err[400] = "";
    uint64_t conns = (uint64_t)nd->window * q->cfg.connections_per_node;
    int rc;

    ep_h1_cfg(q, nd, hdrs, &c);
    c.max_conns = conns > 65536 ? 65536 : (uint32_t)conns;
    c.first_byte_ms = c.idle_ms = (uint32_t)EP_TIMEOUT_MS;
    rc = httpc_h1_pool_create(&q->loop, &c, &nd->ep->h1, err, sizeof(err));
    if (rc < 0)
        return cmn_errf(eb, rc == -ENOENT || rc == -EINVAL ? CMN_ECONFIG : rc, "endpoint %s: %s",
                        nd->address, err);
    return 0;
}

int qdl__ep_open(qdl_t *q, cmn_errbuf_t *eb)
{
    httpc_cfg_t hc;
    char err[256] = "";
    size_t i;
    uint64_t conns = 0;
    int rc;

    for (i = 0; i < q->n_nodes; i++)
        if (q->nodes[i].endpoint)
            conns += q->nodes[i].window * q->cfg.connections_per_node;
    if (!conns)
        return 0;
    q->ep = qdl__calloc(1, sizeof(*q->ep));
    if (!q->ep)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    if (q->cfg.endpoint_api_key) {
        size_t n = strlen(q->cfg.endpoint_api_key);
        for (i = 0; i < n; i++)
            if ((unsigned char)q->cfg.endpoint_api_key[i] < 0x20 ||
                (unsigned char)q->cfg.endpoint_api_key[i] > 0x7e)
                return cmn_errf(eb, CMN_ECONFIG,
                                "the endpoint API key holds a byte that is not printable ASCII "
                                "(at %zu; a trailing newline in its file?)",
                                i);
        q->ep->auth = qdl__malloc(n + 32);
        if (!q->ep->auth)
            return cmn_errf(eb, -ENOMEM, "out of memory");
        snprintf(q->ep->auth, n + 32, "Authorization: Bearer %s", q->cfg.endpoint_api_key);
    }
    if (q->cfg.endpoint_session_header) {
        const char *h = q->cfg.endpoint_session_header;
        if (!h[0] || strlen(h) > 64 ||
            strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789-_") != strlen(h))
            return cmn_errf(eb, CMN_ECONFIG,
                            "endpoint session header '%s': expected a header name (letters, "
                            "digits, '-', '_'; at most 64)",
                            h);
    }
    rc = ep_probe_all(q, eb);
    if (rc < 0)
        return rc;
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        if (!nd->endpoint)
            continue;
        if (nd->ep->curl) {
            q->ep->curl = 1;
            continue;
        }
        rc = ep_h1_open(q, nd, eb);
        if (rc < 0)
            return rc;
    }
    if (!q->ep->curl)
        return 0;
    memset(&hc, 0, sizeof(hc));
    hc.max_conns = conns > 65536 ? 65536 : (uint32_t)conns;
    hc.connect_timeout_ms = (long)q->cfg.connect_timeout_ms;
    hc.coalesce_us = HTTPC_COALESCE_US_DEFAULT;
    hc.ca_file = ep_ca(q);
    rc = httpc_create(&hc, &q->ep->http, err, sizeof(err));
    if (rc < 0)
        return cmn_errf(eb, rc, "endpoints: cannot start the HTTP client: %s", err);
    rc = httpc_lives_init(&q->ep->lives);
    if (rc < 0)
        return cmn_errf(eb, rc, "endpoints: cannot create the stream registry");
    q->ep->lives_ready = 1;
    rc = cmn_xq_init(&q->loop, &q->ep->events, on_events);
    if (rc < 0)
        return cmn_errf(eb, rc, "endpoints: cannot create the event queue: %s", cmn_strerror(rc));
    q->ep->events.data = q;
    q->ep->events_open = 1;
    return 0;
}

void qdl__ep_connect(qdl_conn_t *qc)
{
    uint64_t now = cmn_now_ns();

    qc->open = 1;
    qc->draining = 0;
    qc->state = QC_READY;
    qc->state_ns = now;
    qc->last_rx_ns = now;
    qc->node->q->dispatch_due = 1;
    qdl__check_start(qc->node->q);
}

/* ---- the pool's thread ----------------------------------------------------------------------- */

static int on_data(httpc_req_t *hr, const char *p, size_t n)
{
    ep_req_t *r = hr->ctx;
    int progress = 0;

    if (httpc_oai_stream_feed(&r->st, p, n, &progress))
        return 1;
    if (progress)
        httpc_progress(hr);
    if (!r->first_pushed && r->st.out.n > 0 && !r->st.gen->oneshot) {
        r->first_tok = r->st.out.toks[0];
        r->first_pushed = 1;
        cmn_xq_push(&r->q->ep->events, &r->ev_first.link);
        httpc_coalesce(hr); /* the first token is in; the rest may wait for the read tick */
    }
    return 0;
}

/* A stream's end, from either client: its status (a stream that parsed badly or ended short is the
 * peer's fault, CMN_EPEER, with the parser's words) and the message kept for the failure. */
static int end_status(ep_req_t *r, int status, const char *msg)
{
    if (status == 0 && httpc_oai_stream_end(&r->st) < 0)
        status = CMN_EPEER;
    else if (status != 0 && r->st.failed)
        status = CMN_EPEER;
    r->status = status;
    if (status == CMN_EPEER)
        snprintf(r->msg, sizeof(r->msg), "%s", r->st.err);
    else if (status != 0)
        snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "failed");
    return status;
}

static void on_done(httpc_req_t *hr, int status, const char *msg)
{
    ep_req_t *r = hr->ctx;

    if (end_status(r, status, msg) == 0 && !r->first_pushed && r->st.out.n > 0) {
        /* oneshot, or tokens only at the end: the first token just before the end */
        r->first_tok = r->st.out.toks[0];
        r->first_pushed = 1;
        cmn_xq_push(&r->q->ep->events, &r->ev_first.link);
    }
    httpc_live_del(&r->q->ep->lives, &r->live);
    cmn_xq_push(&r->q->ep->events, &r->ev_done.link);
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void unlist(ep_req_t *r)
{
    if (!r->listed)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        r->qc->ep_reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->listed = 0;
}

static void req_free(qdl_t *q, ep_req_t *r)
{
    unlist(r);
    if (r->h1.resent) /* the lean client sent it twice: the engine saw both (stats: resent) */
        r->qc->node->st.resent++;
    httpc_oai_stream_free(&r->st);
    free(r->body);
    free(r);
    q->ep->requests--;
}

/* The request's sample is still in flight on its connection (not re-dispatched meanwhile). */
static int current(const ep_req_t *r)
{
    return r->qc->state == QC_READY && cmn_idmap_get(&r->qc->inflight, r->wire_id) != NULL;
}

static void deliver(qdl_t *q, ep_req_t *r, int first_token)
{
    Nsut__Result res = NSUT__RESULT__INIT;
    Nsut__Result *rp = &res;
    cmn_errbuf_t eb = {""};
    const uint8_t *payload;
    size_t bytes;

    if (first_token) {
        payload = (const uint8_t *)&r->first_tok;
        bytes = sizeof(int32_t);
        res.n_tokens = 1;
    } else {
        payload = (const uint8_t *)r->st.out.toks;
        bytes = r->st.out.n * sizeof(int32_t);
        res.n_tokens = (int64_t)r->st.out.n;
    }
    res.id = r->wire_id;
    res.status = NSUT__STATUS__STATUS_OK;
    res.codec = NSUT__CODEC__CODEC_NONE;
    res.raw_size = res.wire_size = bytes;
    r->qc->last_rx_ns = cmn_now_ns();
    r->qc->rx_frame_bytes = bytes;
    r->qc->node->st.bytes_in += bytes;
    if (qdl__results_handle(q, r->qc, first_token, &rp, 1, payload, &eb) < 0)
        qdl__conn_close(r->qc, CMN_EPEER, eb.msg);
}

/* ---- health --------------------------------------------------------------------------------- */

/* One failed stream's sample back to the queue (it keeps first_token_seen: no second
 * FirstToken), or failed once it has used up its dispatches. */
static void redispatch_one(qdl_t *q, qdl_conn_t *qc, uint64_t wire_id)
{
    qdl_node_t *nd = qc->node;
    qdl_srec_t *s = cmn_idmap_del(&qc->inflight, wire_id);

    if (!s)
        return;
    qc->n_inflight--;
    nd->inflight--;
    nd->tokens_out -= s->cost;
    if (s->dispatches >= q->cfg.max_dispatches) {
        cmn_log_error("qdl: a sample (response id %llu) fails: it was sent %u times "
                      "(max_dispatches) and every stream of it failed",
                      (unsigned long long)s->s.response_id, s->dispatches);
        nd->st.samples_failed++;
        s->next = NULL;
        qdl__fail_chain(q, s, CMN_ENONODE);
    } else {
        nd->st.redispatched++;
        qdl__pending_requeue(q, &s, 1);
    }
    q->dispatch_due = 1;
}

/* A stream's end on the loop (the request already off its connection's list): its result, or
 * its failure counted against the endpoint (EP_FAIL_LIMIT in a row, or |no_connect|, close the
 * endpoint's connection; else only its sample is re-dispatched). */
static void stream_end(qdl_t *q, ep_req_t *r, int no_connect)
{
    qdl_node_t *nd = r->qc->node;
    char why[700];
    unsigned long long rid;

    if (q->stopping || !current(r))
        return;
    if (r->status == 0) {
        nd->ep->fails = 0;
        deliver(q, r, 0);
        return;
    }
    nd->st.errors++;
    nd->ep->fails++;
    rid = (unsigned long long)((qdl_srec_t *)cmn_idmap_get(&r->qc->inflight, r->wire_id))
              ->s.response_id;
    if (no_connect || nd->ep->fails >= EP_FAIL_LIMIT) {
        if (no_connect)
            snprintf(why, sizeof(why), "stream for LoadGen response id %llu failed: %s", rid,
                     r->msg);
        else
            snprintf(why, sizeof(why),
                     "%u streams in a row failed, the last (LoadGen response id %llu): %s",
                     nd->ep->fails, rid, r->msg);
        nd->ep->fails = 0;
        qdl__conn_close(r->qc, r->status, why);
        return;
    }
    cmn_log_warn("qdl: node %s: stream for LoadGen response id %llu failed: %s; its sample is "
                 "re-dispatched (%u of %u failed streams in a row close the endpoint)",
                 qdl__node_label(nd), rid, r->msg, nd->ep->fails, EP_FAIL_LIMIT);
    /* Its other streams go on; until one of them completes (results.c clears it) the endpoint
     * gets a new sample only when no healthy node has room, so this one goes elsewhere. */
    nd->degraded = 1;
    redispatch_one(q, r->qc, r->wire_id);
}

static void on_event(qdl_t *q, ep_event_t *ev)
{
    ep_req_t *r = ev->r;

    if (!ev->done) {
        if (!q->stopping && current(r))
            deliver(q, r, 1);
        return;
    }
    unlist(r);
    stream_end(q, r, 0);
    req_free(q, r);
}

/* ---- openai+http://: the lean client's callbacks, on the loop ------------------------------- */

static int h1_on_data(httpc_h1_req_t *hr, const char *p, size_t n)
{
    ep_req_t *r = hr->ctx;
    qdl_t *q = r->q;
    int progress = 0;

    if (httpc_oai_stream_feed(&r->st, p, n, &progress))
        return 1;
    if (!r->first_pushed && r->st.out.n > 0 && !r->st.gen->oneshot) {
        r->first_tok = r->st.out.toks[0];
        r->first_pushed = 1;
        if (!q->stopping && current(r)) {
            r->in_cb = 1;
            deliver(q, r, 1);
            r->in_cb = 0;
            if (r->dead) { /* its connection closed in there (qdl__ep_cancel) */
                req_free(q, r);
                return 1;
            }
        }
        /* the first token is in; the rest may wait for the read tick (as with libcurl) */
        httpc_h1_coalesce(r->qc->node->ep->h1, hr);
    }
    return 0;
}

static void h1_on_done(httpc_h1_req_t *hr, int status, const char *msg)
{
    ep_req_t *r = hr->ctx;
    qdl_t *q = r->q;
    int no_connect = status == HTTPC_H1_ECONNECT;

    status = end_status(r, status, msg);
    unlist(r);
    if (status == 0 && !r->first_pushed && r->st.out.n > 0) {
        /* oneshot, or tokens only at the end: the first token just before the end */
        r->first_tok = r->st.out.toks[0];
        r->first_pushed = 1;
        if (!q->stopping && current(r))
            deliver(q, r, 1);
    }
    stream_end(q, r, no_connect);
    req_free(q, r);
}

static void on_events(cmn_xq_t *x, cmn_xq_node_t *list)
{
    qdl_t *q = x->data;

    while (list) {
        cmn_xq_node_t *next = list->next;
        on_event(q, (ep_event_t *)list);
        list = next;
    }
}

/* ---- sending --------------------------------------------------------------------------------- */

int qdl__ep_sample_ok(const qdl_srec_t *s)
{
    return s->s.size > 0 && s->s.size % 4 == 0 && s->s.codec == 0;
}

static ep_req_t *req_new(qdl_t *q, qdl_conn_t *qc, qdl_srec_t *s)
{
    qdl_node_t *nd = qc->node;
    ep_req_t *r;
    size_t blen, h = 0;

    r = qdl__calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    if (httpc_oai_dialect_body(&nd->ep->gen, s->s.data, s->s.size / 4, &r->body, &blen) < 0) {
        free(r);
        return NULL;
    }
    q->ep->requests++;
    r->q = q;
    r->qc = qc;
    httpc_oai_stream_init(&r->st, &nd->ep->gen, EP_MAX_EVENT);
    r->ev_first.r = r->ev_done.r = r;
    r->ev_done.done = 1;
    r->headers[h++] = "Content-Type: application/json";
    if (q->ep->auth)
        r->headers[h++] = q->ep->auth;
    if (q->cfg.endpoint_session_header) {
        snprintf(r->session, sizeof(r->session), "%s: %llu", q->cfg.endpoint_session_header,
                 (unsigned long long)s->s.response_id);
        r->headers[h++] = r->session;
    }
    r->headers[h] = NULL;
    if (nd->ep->h1) {
        r->h1.body = r->body;
        r->h1.body_len = blen;
        if (q->cfg.endpoint_session_header) {
            r->h1.extra = r->extra;
            r->h1.extra_len = (size_t)snprintf(r->extra, sizeof(r->extra), "%s\r\n", r->session);
        }
        r->h1.on_data = h1_on_data;
        r->h1.on_done = h1_on_done;
        r->h1.ctx = r;
        return r;
    }
    r->req.url = nd->ep->url;
    r->req.body = r->body;
    r->req.body_len = blen;
    r->req.headers = r->headers;
    r->req.timeout_ms = EP_TIMEOUT_MS;
    r->req.on_data = on_data;
    r->req.on_done = on_done;
    r->req.ctx = r;
    r->live.req = &r->req;
    r->live.batch = r;
    r->live.index = 0;
    return r;
}

int qdl__ep_send(qdl_t *q, qdl_conn_t *qc, qdl_srec_t *s)
{
    ep_req_t *r;

    if (!qc->node->ep->curl && !qc->node->ep->h1) {
        s->wire_id = q->next_wire_id++;
        return 0; /* only while stopping (its pool is closed): the sample fails with the rest */
    }
    r = req_new(q, qc, s);
    if (!r)
        return -ENOMEM;
    s->wire_id = q->next_wire_id++;
    r->wire_id = s->wire_id;
    r->next = qc->ep_reqs;
    r->prev = NULL;
    if (qc->ep_reqs)
        qc->ep_reqs->prev = r;
    qc->ep_reqs = r;
    r->listed = 1;
    if (qc->node->ep->h1) {
        if (httpc_h1_send(qc->node->ep->h1, &r->h1) < 0)
            req_free(q, r); /* only while stopping: the sample fails with the rest */
        return 0;
    }
    httpc_live_add(&q->ep->lives, &r->live);
    if (httpc_submit(q->ep->http, &r->req) < 0) {
        /* only while stopping: its end never comes; the sample fails with the rest */
        httpc_live_del(&q->ep->lives, &r->live);
        req_free(q, r);
    }
    return 0;
}

void qdl__ep_cancel(qdl_conn_t *qc)
{
    qdl_t *q = qc->node->q;
    const size_t zero = 0;

    while (qc->ep_reqs) {
        ep_req_t *r = qc->ep_reqs;
        if (qc->node->ep->h1) {
            /* No callback comes for it any more: freed here, or by its own on_data when it is
             * the one running (the close came from inside it). */
            httpc_h1_cancel(qc->node->ep->h1, &r->h1);
            unlist(r);
            if (r->in_cb)
                r->dead = 1;
            else
                req_free(q, r);
            continue;
        }
        /* Marks it unless its end already ran (then its end event waits in the queue). */
        (void)httpc_live_cancel(&q->ep->lives, q->ep->http, r, &zero, 1);
        unlist(r);
    }
}

void qdl__ep_stop(qdl_t *q)
{
    size_t i;

    if (!q->ep)
        return;
    for (i = 0; q->nodes && i < q->n_nodes; i++)
        if (q->nodes[i].ep && q->nodes[i].ep->h1) {
            /* every stream ends (h1_on_done frees it); the pool frees itself as the loop runs */
            httpc_h1_pool_close(q->nodes[i].ep->h1);
            q->nodes[i].ep->h1 = NULL;
        }
    if (!q->ep->http)
        return;
    httpc_destroy(q->ep->http); /* every stream ends: its end event is queued */
    q->ep->http = NULL;
    if (q->ep->events_open) {
        cmn_xq_drain(&q->ep->events);
        cmn_xq_close(&q->ep->events, NULL);
        q->ep->events_open = 0;
    }
}

void qdl__ep_free(qdl_t *q)
{
    size_t i;

    for (i = 0; q->nodes && i < q->n_nodes; i++) {
        free(q->nodes[i].ep);
        q->nodes[i].ep = NULL;
    }
    if (!q->ep)
        return;
    httpc_destroy(q->ep->http);
    q->ep->http = NULL;
    if (q->ep->lives_ready)
        httpc_lives_destroy(&q->ep->lives);
    q->ep->lives_ready = 0;
    free(q->ep->auth);
    free(q->ep);
    q->ep = NULL;
}

#endif

const qdl_ep_hooks_t qdl__ep_hooks = {qdl__ep_address, qdl__ep_node_init, qdl__ep_connect,
                                      qdl__ep_cancel};
