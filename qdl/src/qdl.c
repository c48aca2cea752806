/* The QDL's public API and its loop thread: configuration, the requests other threads hand it,
 * the timers, and the one place that dispatches (once per loop turn, when something below marked
 * dispatch due). */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICK_MS 50u

static void errfmt(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The one place the API's (err, errlen) pair is written. */
static void errfmt(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void qdl_config_init(qdl_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connections_per_node = 1;
    cfg->policy = QDL_POLICY_LEAST_OUTSTANDING;
    cfg->result_codec = CMPR_NONE;
    cfg->connect_timeout_ms = 5000;
    cfg->ping_interval_ms = 1000;
    cfg->ping_timeout_ms = 3000;
    cfg->name_timeout_ms = 2000;
    cfg->fail_timeout_ms = 10000;
    cfg->reconnect_max_ms = 2000;
    cfg->max_frame_size = CMN_FRAME_DEFAULT_MAX;
    cfg->max_part_samples = 1024;
    cfg->max_dispatches = 3;
    cfg->node_memory_budget = QDL_NODE_MEMORY_BUDGET_DEFAULT;
}

/* ---- the loop thread ------------------------------------------------------------------------- */

/* With no healthy node for fail_timeout_ms, waiting samples fail instead of waiting for ever, and
 * so do later ones until a node is back: a run against dead or stuck nodes ends. The clock is
 * the outage's, not the samples': an Offline backlog that waited minutes for busy nodes must not
 * fail at once because its only node blinked. */
static void expire_pending(qdl_t *q, uint64_t now)
{
    const uint64_t timeout = q->cfg.fail_timeout_ms * 1000000u;
    char what[160];

    if (qdl__ready_nodes(q) > 0) {
        q->no_node_since_ns = 0;
        return;
    }
    if (!q->no_node_since_ns)
        q->no_node_since_ns = now;
    if (!q->pending_head || now - q->no_node_since_ns <= timeout)
        return;
    snprintf(what, sizeof(what), "no healthy sut-node (all down, stuck or draining) for %llu ms",
             (unsigned long long)((now - q->no_node_since_ns) / 1000000u));
    qdl__pending_fail_all(q, CMN_ENONODE, what);
}

static void on_tick(uv_timer_t *t)
{
    qdl_t *q = t->data;
    uint64_t now = cmn_now_ns();

    qdl__name_tick(q, now);
    qdl__nodes_tick(q, now);
    expire_pending(q, now);
}

static void dispatch_if_due(qdl_t *q)
{
    if (q->dispatch_due && !q->stopping) {
        q->dispatch_due = 0;
        qdl__dispatch(q);
    }
}

/* After every loop turn's I/O: where dispatch runs (and in an issue on a polling thread). */
static void on_check(uv_check_t *c)
{
    dispatch_if_due(c->data);
}

static void close_loop_handles(qdl_t *q)
{
    uv_close((uv_handle_t *)&q->tick, NULL);
    uv_close((uv_handle_t *)&q->check, NULL);
    cmn_xq_close(&q->reqs, NULL);
    cmn_ucx_close(q->ucx); /* once its last connection has closed */
    q->ucx = NULL;
    qdl__ep_stop(q); /* every stream ends; then its event queue closes */
}

/* Issued after destroy began: fail at once, never silently drop. */
static void issue_after_stop(qdl_t *q, qdl_req_t *r)
{
    qdl_srec_t *recs = qdl__qblock_recs(r);
    qdl_response_t resp;
    size_t i;

    for (i = 0; i < r->n; i++) {
        memset(&resp, 0, sizeof(resp));
        resp.response_id = recs[i].s.response_id;
        resp.status = CMN_ECLOSED;
        q->cfg.on_complete(q->cfg.user, &resp, 1);
    }
    qdl__qblock_free(r);
}

static void name_req(qdl_t *q, qdl_req_t *r)
{
    qdl_req_t *t;

    if (!q->name_req) {
        (void)qdl__name_start(q, r);
        return;
    }
    /* One at a time: wait behind the others. */
    r->link.next = NULL;
    if (!q->name_queue) {
        q->name_queue = r;
        return;
    }
    for (t = q->name_queue; t->link.next; t = (qdl_req_t *)t->link.next)
        ;
    t->link.next = &r->link;
}

void qdl__handle_req(qdl_t *q, qdl_req_t *r)
{
    switch (r->kind) {
    case RQ_ISSUE:
        if (q->stopping)
            issue_after_stop(q, r);
        else
            qdl__pending_enqueue(q, qdl__qblock_recs(r), r->n);
        break;
    case RQ_FLUSH:
        /* Everything issued before the flush is on its way first. */
        q->dispatch_due = 0;
        qdl__dispatch(q);
        qdl__flush_nodes(q);
        free(r);
        break;
    case RQ_NAME:
        name_req(q, r);
        break;
    case RQ_STATS:
        qdl__stats_fill(q, r->stats, r->cap);
        qdl__req_done(r, (int)q->n_nodes);
        break;
    case RQ_START:
        q->start_req = r;
        r->start_ns = cmn_now_ns();
        qdl__connect_all(q);
        qdl__check_start(q);
        break;
    case RQ_PARK:
        /* uv_run() returns after this turn, and loop_main() lends the loop (poll.c). */
        if (q->stopping) {
            qdl__req_done(r, CMN_ECLOSED);
            break;
        }
        q->park_req = r;
        uv_stop(&q->loop);
        break;
    case RQ_STOP:
        q->stopping = 1;
        qdl__pending_fail_all(q, CMN_ECLOSED, NULL);
        qdl__nodes_fail_inflight(q, CMN_ECLOSED);
        qdl__name_fail_all(q);
        qdl__stop_nodes(q);
        close_loop_handles(q);
        qdl__req_done(r, 0);
        break;
    default:
        break;
    }
}

static void on_reqs(cmn_xq_t *x, cmn_xq_node_t *list)
{
    qdl_t *q = x->data;

    while (list) {
        qdl_req_t *r = (qdl_req_t *)list;
        list = list->next;
        qdl__handle_req(q, r);
    }
}

static void loop_main(void *arg)
{
    qdl_t *q = arg;

    /* Every socket write happens on this thread, and libuv writes without MSG_NOSIGNAL: with
     * SIGPIPE blocked here, a node closing mid-write is an EPIPE for this thread (the signal stays
     * pending on it, discarded when it exits), never a kill of the host program, whose own
     * signal dispositions the library leaves alone. */
    qdl__block_sigpipe(NULL);
    pthread_setname_np(pthread_self(), "qdl-loop"); /* for top -H and per-thread figures */
    for (;;) {
        uv_run(&q->loop, UV_RUN_DEFAULT);
        if (!q->park_req)
            break;
        qdl__park(q);
    }
}

/* ---- configuration --------------------------------------------------------------------------- */

static char *dup_str(char **pool_cursor, const char *s)
{
    size_t n;
    char *p = *pool_cursor;

    if (!s)
        return NULL;
    n = strlen(s) + 1;
    memcpy(p, s, n);
    *pool_cursor = p + n;
    return p;
}

static int copy_config(qdl_t *q, const qdl_config_t *cfg)
{
    size_t bytes = 0, i;
    const char *strs[10] = {
        cfg->client_name,     cfg->tls_ca_file,      cfg->tls_cert_file,
        cfg->tls_key_file,    cfg->tls_server_name,  cfg->endpoint_dialect,
        cfg->endpoint_model,  cfg->endpoint_api_key, cfg->endpoint_session_header,
        cfg->endpoint_ca_file};
    char *cur;
    const char **nodes;

    for (i = 0; i < cfg->n_nodes; i++)
        bytes += strlen(cfg->nodes[i]) + 1;
    for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        bytes += strs[i] ? strlen(strs[i]) + 1 : 0;
    q->strings = qdl__malloc(bytes + cfg->n_nodes * sizeof(char *) + 1);
    if (!q->strings)
        return -ENOMEM;
    nodes = (const char **)(void *)q->strings;
    cur = q->strings + cfg->n_nodes * sizeof(char *);
    q->cfg = *cfg;
    for (i = 0; i < cfg->n_nodes; i++)
        nodes[i] = dup_str(&cur, cfg->nodes[i]);
    q->cfg.nodes = nodes;
    q->cfg.client_name = dup_str(&cur, cfg->client_name);
    q->cfg.tls_ca_file = dup_str(&cur, cfg->tls_ca_file);
    q->cfg.tls_cert_file = dup_str(&cur, cfg->tls_cert_file);
    q->cfg.tls_key_file = dup_str(&cur, cfg->tls_key_file);
    q->cfg.tls_server_name = dup_str(&cur, cfg->tls_server_name);
    q->cfg.endpoint_dialect = dup_str(&cur, cfg->endpoint_dialect);
    q->cfg.endpoint_model = dup_str(&cur, cfg->endpoint_model);
    q->cfg.endpoint_api_key = dup_str(&cur, cfg->endpoint_api_key);
    q->cfg.endpoint_session_header = dup_str(&cur, cfg->endpoint_session_header);
    q->cfg.endpoint_ca_file = dup_str(&cur, cfg->endpoint_ca_file);
    if (!q->cfg.max_dispatches)
        q->cfg.max_dispatches = 3;
    if (!q->cfg.node_memory_budget)
        q->cfg.node_memory_budget = QDL_NODE_MEMORY_BUDGET_DEFAULT;
    q->conn_share = q->cfg.node_memory_budget / (cfg->n_nodes * cfg->connections_per_node);
    if (q->conn_share > q->cfg.max_frame_size)
        q->conn_share = q->cfg.max_frame_size;
    return 0;
}

static int check_config(const qdl_config_t *c, cmn_errbuf_t *eb)
{
    if (!c->n_nodes || !c->nodes)
        return cmn_errf(eb, CMN_ECONFIG, "no sut-node address given");
    if (!c->on_complete)
        return cmn_errf(eb, CMN_ECONFIG, "no completion callback");
    if (c->connections_per_node < 1 || c->connections_per_node > 64)
        return cmn_errf(eb, CMN_ECONFIG, "connections per node %u: expected 1..64",
                        c->connections_per_node);
    if (c->policy != QDL_POLICY_LEAST_OUTSTANDING && c->policy != QDL_POLICY_ROUND_ROBIN &&
        c->policy != QDL_POLICY_WEIGHTED && c->policy != QDL_POLICY_LEAST_TOKENS)
        return cmn_errf(eb, CMN_ECONFIG, "unknown dispatch policy %d", (int)c->policy);
    if (c->result_codec != CMPR_NONE && c->result_codec != CMPR_LZ4)
        return cmn_errf(eb, CMN_ECODEC, "unknown result codec %d", c->result_codec);
    if (c->max_frame_size < CMN_FRAME_PREAUTH_MAX || c->max_frame_size > CMN_FRAME_ABS_MAX)
        return cmn_errf(eb, CMN_ECONFIG, "max frame size %llu: expected 16 KiB .. 4 GiB - 1",
                        (unsigned long long)c->max_frame_size);
    if (c->node_memory_budget &&
        c->node_memory_budget / ((uint64_t)c->n_nodes * c->connections_per_node) <
            CMN_FRAME_PREAUTH_MAX)
        return cmn_errf(eb, CMN_ECONFIG,
                        "node memory budget of %llu bytes: under 16 KiB for each of %llu "
                        "connections (%zu nodes x %u)",
                        (unsigned long long)c->node_memory_budget,
                        (unsigned long long)c->n_nodes * c->connections_per_node, c->n_nodes,
                        c->connections_per_node);
    if (c->max_part_samples < 1)
        return cmn_errf(eb, CMN_ECONFIG, "max part samples must be at least 1");
    if (c->ping_interval_ms && c->ping_timeout_ms < c->ping_interval_ms)
        return cmn_errf(
            eb, CMN_ECONFIG, "ping timeout %llu ms is shorter than the ping interval %llu ms",
            (unsigned long long)c->ping_timeout_ms, (unsigned long long)c->ping_interval_ms);
    return 0;
}

static void free_qdl(qdl_t *q)
{
    if (q->park_ready) {
        uv_cond_destroy(&q->park_cv);
        uv_mutex_destroy(&q->park_mu);
    }
    qdl__ep_free(q);
    qdl__nodes_free(q);
    cmn_arena_free(&q->arena);
    cmn_tls_ctx_free(q->tls);
    free(q->scratch);
    free(q->unsent);
    free(q->resp);
    free(q->strings);
    free(q);
}

static void set_client_name(qdl_t *q)
{
    char host[64];

    if (q->cfg.client_name) {
        snprintf(q->client_name, sizeof(q->client_name), "%s", q->cfg.client_name);
        return;
    }
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(q->client_name, sizeof(q->client_name), "qdl@%s:%d", host, (int)getpid());
}

/* The loop, its handles and the nodes; on failure everything it made is undone. */
static int loop_init(qdl_t *q, cmn_errbuf_t *eb)
{
    int rc = uv_loop_init(&q->loop);

    if (rc < 0)
        return cmn_errf(eb, rc, "cannot create the event loop: %s", cmn_strerror(rc));
    rc = cmn_xq_init(&q->loop, &q->reqs, on_reqs);
    if (rc < 0) {
        uv_loop_close(&q->loop);
        return cmn_errf(eb, rc, "cannot create the request queue: %s", cmn_strerror(rc));
    }
    q->reqs.data = q;
    uv_timer_init(&q->loop, &q->tick);
    q->tick.data = q;
    uv_check_init(&q->loop, &q->check);
    q->check.data = q;
    rc = qdl__nodes_init(q, &qdl__node_events, &qdl__ep_hooks, eb);
    if (rc == 0)
        rc = qdl__ep_open(q, eb);
    if (rc == 0) {
        uv_timer_start(&q->tick, on_tick, TICK_MS, TICK_MS);
        uv_check_start(&q->check, on_check);
        rc = uv_thread_create(&q->thread, loop_main, q);
        if (rc < 0)
            cmn_errf(eb, rc, "cannot start the QDL thread: %s", cmn_strerror(rc));
    }
    if (rc < 0) {
        if (q->conns)
            qdl__stop_nodes(q);
        close_loop_handles(q);
        uv_run(&q->loop, UV_RUN_DEFAULT);
        uv_loop_close(&q->loop);
    }
    return rc;
}

int qdl_create(const qdl_config_t *cfg, qdl_t **out, char *err, size_t errlen)
{
    qdl_t *q;
    qdl_req_t start;
    cmn_errbuf_t eb = {""};
    int rc;

    rc = check_config(cfg, &eb);
    if (rc < 0)
        goto fail;
    q = qdl__calloc(1, sizeof(*q));
    if (!q) {
        rc = cmn_errf(&eb, -ENOMEM, "out of memory");
        goto fail;
    }
    rc = copy_config(q, cfg);
    if (rc < 0) {
        cmn_errf(&eb, rc, "out of memory");
        goto fail_q;
    }
    set_client_name(q);
    q->next_wire_id = 1;
    q->next_query_id = 1;
    if (q->cfg.tls_ca_file || q->cfg.tls_cert_file || q->cfg.tls_key_file) {
        rc = cmn_tls_client_ctx(q->cfg.tls_ca_file, q->cfg.tls_cert_file, q->cfg.tls_key_file,
                                &q->tls, &eb);
        if (rc < 0)
            goto fail_q;
    }
    cmn_arena_init(&q->arena, 64u * 1024u);
    if (uv_mutex_init(&q->park_mu) < 0) {
        rc = cmn_errf(&eb, -ENOMEM, "cannot create the QDL's lock");
        goto fail_q;
    }
    if (uv_cond_init(&q->park_cv) < 0) {
        uv_mutex_destroy(&q->park_mu);
        rc = cmn_errf(&eb, -ENOMEM, "cannot create the QDL's condition variable");
        goto fail_q;
    }
    q->park_ready = 1;
    rc = loop_init(q, &eb);
    if (rc < 0)
        goto fail_q;

    memset(&start, 0, sizeof(start));
    start.kind = RQ_START;
    start.eb = &eb;
    rc = qdl__sync_req(q, &start);
    if (rc < 0) {
        qdl_destroy(q);
        goto fail;
    }
    *out = q;
    return 0;

fail_q:
    free_qdl(q);
fail:
    errfmt(err, errlen, "%s", eb.msg);
    return rc;
}

/* ---- calls from other threads ---------------------------------------------------------------- */

int qdl_issue_query(qdl_t *q, const qdl_sample_t *samples, size_t n)
{
    qdl_req_t *r;
    uint64_t now = cmn_now_ns();
    qdl_srec_t *recs;
    size_t i;

    if (n == 0)
        return 0;
    r = qdl__qblock_new(samples, n);
    if (!r)
        return -ENOMEM;
    recs = qdl__qblock_recs(r);
    for (i = 0; i < n; i++)
        recs[i].issued_ns = now;
    if (qdl__is_poller(q)) {
        /* This thread runs the loop: no hand-off; the frames leave in its next qdl_poll(), which
         * stamps their sent_ns. */
        qdl__handle_req(q, r);
        dispatch_if_due(q);
        return 0;
    }
    cmn_xq_push(&q->reqs, &r->link);
    return 0;
}

int qdl_flush(qdl_t *q)
{
    qdl_req_t *r = qdl__calloc(1, sizeof(*r));

    if (!r)
        return -ENOMEM;
    r->kind = RQ_FLUSH;
    cmn_xq_push(&q->reqs, &r->link);
    return 0;
}

int qdl_name(qdl_t *q, char *buf, size_t len, uint64_t *duration_ns, char *err, size_t errlen)
{
    qdl_req_t r;
    cmn_errbuf_t eb = {""};
    int rc;

    memset(&r, 0, sizeof(r));
    r.kind = RQ_NAME;
    r.buf = buf;
    r.len = len;
    r.eb = &eb;
    rc = qdl__sync_req(q, &r);
    if (duration_ns)
        *duration_ns = r.duration_ns;
    if (rc < 0)
        errfmt(err, errlen, "%s", eb.msg);
    return rc;
}

int qdl_stats(qdl_t *q, qdl_node_stats_t *out, size_t cap)
{
    qdl_req_t r;

    memset(&r, 0, sizeof(r));
    r.kind = RQ_STATS;
    r.stats = out;
    r.cap = cap;
    return qdl__sync_req(q, &r);
}

/* Every node's counters, or NULL (out of memory). */
static qdl_node_stats_t *stats_all(qdl_t *q, size_t *n)
{
    qdl_node_stats_t *st = calloc(q->n_nodes, sizeof(*st));
    int got;

    if (!st)
        return NULL;
    got = qdl_stats(q, st, q->n_nodes);
    *n = got < 0 ? 0 : (size_t)got < q->n_nodes ? (size_t)got : q->n_nodes;
    return st;
}

void qdl_stats_print(qdl_t *q, void *file)
{
    FILE *f = file ? file : stderr;
    size_t i, n;
    qdl_node_stats_t *st = stats_all(q, &n);

    if (!st)
        return;
    fprintf(f, "%-24s %-22s %-4s %10s %10s %8s %8s %8s %6s %6s %6s %10s %10s %12s %12s\n", "node",
            "address", "up", "sent", "completed", "failed", "redisp", "errors", "recon", "lost",
            "stalls", "rtt_min_us", "rtt_last_us", "bytes_out", "bytes_in");
    for (i = 0; i < n; i++) {
        char rmin[24] = "-", rlast[24] = "-"; /* "-": no round trip measured yet */

        if (st[i].rtt_ns_min)
            snprintf(rmin, sizeof(rmin), "%.1f", (double)st[i].rtt_ns_min / 1e3);
        if (st[i].rtt_ns_last)
            snprintf(rlast, sizeof(rlast), "%.1f", (double)st[i].rtt_ns_last / 1e3);
        fprintf(f,
                "%-24s %-22s %-4s %10llu %10llu %8llu %8llu %8llu %6llu %6llu %6llu %10s "
                "%10s %12llu %12llu\n",
                st[i].name, st[i].address, st[i].up ? "yes" : "no",
                (unsigned long long)st[i].samples_sent, (unsigned long long)st[i].samples_completed,
                (unsigned long long)st[i].samples_failed, (unsigned long long)st[i].redispatched,
                (unsigned long long)st[i].errors, (unsigned long long)st[i].reconnects,
                (unsigned long long)st[i].losses, (unsigned long long)st[i].stalls, rmin, rlast,
                (unsigned long long)st[i].bytes_out, (unsigned long long)st[i].bytes_in);
    }
    free(st);
}

/* |s| as a JSON string body: quotes, backslashes and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* A round trip in us for JSON: null when none was measured (0 ns). */
static const char *rtt_json(char *buf, size_t len, uint64_t ns)
{
    if (!ns)
        return "null";
    snprintf(buf, len, "%.1f", (double)ns / 1e3);
    return buf;
}

int qdl_stats_write_json(qdl_t *q, void *file)
{
    FILE *f = file;
    size_t i, n;
    qdl_node_stats_t *st = stats_all(q, &n);

    if (!st)
        return -ENOMEM;
    fprintf(f, "{\"nodes\": [");
    for (i = 0; i < n; i++) {
        const qdl_node_stats_t *s = &st[i];
        char rlast[24], rmin[24];

        fprintf(f, "%s\n  {\"name\": \"", i ? "," : "");
        json_str(f, s->name);
        fprintf(f, "\", \"address\": \"");
        json_str(f, s->address);
        fprintf(f,
                "\", \"up\": %s, \"degraded\": %s, \"samples_sent\": %llu, "
                "\"samples_completed\": %llu, \"samples_failed\": %llu, \"redispatched\": %llu, "
                "\"errors\": %llu, \"reconnects\": %llu, \"losses\": %llu, \"stalls\": %llu, "
                "\"inflight\": %llu, \"bytes_out\": %llu, \"bytes_in\": %llu, \"resent\": %llu, "
                "\"rtt_us_last\": %s, \"rtt_us_min\": %s}",
                s->up ? "true" : "false", s->degraded ? "true" : "false",
                (unsigned long long)s->samples_sent, (unsigned long long)s->samples_completed,
                (unsigned long long)s->samples_failed, (unsigned long long)s->redispatched,
                (unsigned long long)s->errors, (unsigned long long)s->reconnects,
                (unsigned long long)s->losses, (unsigned long long)s->stalls,
                (unsigned long long)s->inflight, (unsigned long long)s->bytes_out,
                (unsigned long long)s->bytes_in, (unsigned long long)s->resent,
                rtt_json(rlast, sizeof(rlast), s->rtt_ns_last),
                rtt_json(rmin, sizeof(rmin), s->rtt_ns_min));
    }
    fprintf(f, "\n]}\n");
    free(st);
    return ferror(f) ? UV_EIO : 0;
}

/* q->ucx is set in qdl_create() and cleared in qdl_destroy() only, so any thread may read it. */
int qdl_register_memory(qdl_t *q, void *ptr, size_t len)
{
    return q->ucx ? cmn_ucx_register(q->ucx, ptr, len) : 0;
}

void qdl_unregister_memory(qdl_t *q, void *ptr)
{
    if (q->ucx)
        cmn_ucx_unregister(q->ucx, ptr);
}

void qdl_destroy(qdl_t *q)
{
    qdl_req_t r;

    if (!q)
        return;
    qdl_poll_end(q);
    memset(&r, 0, sizeof(r));
    r.kind = RQ_STOP;
    qdl__sync_req(q, &r);
    uv_thread_join(&q->thread);
    if (uv_loop_close(&q->loop) != 0)
        cmn_log_warn("qdl: event loop closed with handles still open");
    free_qdl(q);
}
