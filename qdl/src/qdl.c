/* The QDL's public API: configuration, the loop thread, and the requests other threads hand it. */
#include "qdl_internal.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A query's sample records live in one block, freed when its last sample completes. The issue
 * request travels inside the same block, so issuing costs one allocation. */
typedef struct {
    qdl_req_t req;
    size_t n_left;
    qdl_srec_t recs[];
} qdl_qblock_t;

static void errfmt(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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
}

/* ---- the loop thread ------------------------------------------------------------------------- */

static void req_done(qdl_req_t *r, int rc)
{
    r->rc = rc;
    uv_sem_post(&r->done);
}

void qdl__srec_done(qdl_t *q, qdl_srec_t *s)
{
    /* container_of: the records array sits at a fixed offset in its block. */
    qdl_qblock_t *b =
        (qdl_qblock_t *)(void *)((char *)(s - s->index_in_block) - offsetof(qdl_qblock_t, recs));
    (void)q;
    if (--b->n_left == 0)
        free(b);
}

static void on_tick(uv_timer_t *t)
{
    qdl__tick(t->data);
}

static void close_loop_handles(qdl_t *q)
{
    uv_close((uv_handle_t *)&q->tick, NULL);
    cmn_xq_close(&q->reqs, NULL);
    cmn_ucx_close(q->ucx); /* once its last connection has closed */
    q->ucx = NULL;
}

static void handle_req(qdl_t *q, qdl_req_t *r)
{
    switch (r->kind) {
    case RQ_ISSUE: {
        qdl_qblock_t *b = (qdl_qblock_t *)r;
        if (q->stopping) {
            /* Issued after destroy began: fail at once, never silently drop. */
            qdl_response_t resp;
            size_t i;
            for (i = 0; i < b->req.n; i++) {
                memset(&resp, 0, sizeof(resp));
                resp.response_id = b->recs[i].s.response_id;
                resp.status = CMN_ECLOSED;
                q->cfg.on_complete(q->cfg.user, &resp, 1);
            }
            free(b);
            break;
        }
        qdl__enqueue(q, b->recs, b->req.n);
        break;
    }
    case RQ_FLUSH:
        /* Everything issued before the flush is on its way first. */
        qdl__dispatch(q);
        qdl__flush_nodes(q);
        free(r);
        break;
    case RQ_NAME:
        if (q->name_req) {
            r->link.next = NULL;
            if (!q->name_queue) {
                q->name_queue = r;
            } else {
                qdl_req_t *t = q->name_queue;
                while (t->link.next)
                    t = (qdl_req_t *)t->link.next;
                t->link.next = &r->link;
            }
            break;
        }
        if (qdl__name_start(q, r) < 0)
            req_done(r, r->rc);
        break;
    case RQ_STATS: {
        size_t i;
        for (i = 0; i < q->n_nodes && i < r->cap; i++) {
            qdl_node_t *nd = &q->nodes[i];
            r->stats[i] = nd->st;
            snprintf(r->stats[i].name, sizeof(r->stats[i].name), "%s",
                     nd->named ? nd->name : "(unknown)");
            snprintf(r->stats[i].address, sizeof(r->stats[i].address), "%s", nd->address);
            r->stats[i].inflight = nd->inflight;
            r->stats[i].up = 0;
            for (unsigned k = 0; k < q->cfg.connections_per_node; k++)
                r->stats[i].up |= nd->conns[k].state == QC_READY;
        }
        req_done(r, (int)q->n_nodes);
        break;
    }
    case RQ_START:
        q->start_req = r;
        r->start_ns = cmn_now_ns();
        qdl__connect_all(q);
        qdl__check_start(q);
        break;
    case RQ_STOP:
        q->stopping = 1;
        qdl__fail_all(q, CMN_ECLOSED);
        qdl__stop_nodes(q);
        close_loop_handles(q);
        req_done(r, 0);
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
        handle_req(q, r);
    }
    if (!q->stopping)
        qdl__dispatch(q);
}

static void loop_main(void *arg)
{
    qdl_t *q = arg;
    sigset_t pipe_only;

    /* Every socket write happens on this thread, and libuv writes without MSG_NOSIGNAL: with
     * SIGPIPE blocked here, a node closing mid-write is an EPIPE for this thread (the signal stays
     * pending on it, discarded when it exits), never a kill of the host program, whose own
     * signal dispositions the library leaves alone. */
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, NULL);
    uv_run(&q->loop, UV_RUN_DEFAULT);
}

/* Runs |r| on the loop thread and waits for it. */
static int sync_req(qdl_t *q, qdl_req_t *r)
{
    int rc = uv_sem_init(&r->done, 0);
    if (rc < 0)
        return rc;
    cmn_xq_push(&q->reqs, &r->link);
    uv_sem_wait(&r->done);
    uv_sem_destroy(&r->done);
    return r->rc;
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
    const char *strs[5] = {cfg->client_name, cfg->tls_ca_file, cfg->tls_cert_file,
                           cfg->tls_key_file, cfg->tls_server_name};
    char *cur;
    const char **nodes;

    for (i = 0; i < cfg->n_nodes; i++)
        bytes += strlen(cfg->nodes[i]) + 1;
    for (i = 0; i < 5; i++)
        bytes += strs[i] ? strlen(strs[i]) + 1 : 0;
    q->strings = malloc(bytes + cfg->n_nodes * sizeof(char *) + 1);
    if (!q->strings)
        return UV_ENOMEM;
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
    return 0;
}

static int check_config(const qdl_config_t *c, char *err, size_t errlen)
{
    if (!c->n_nodes || !c->nodes) {
        errfmt(err, errlen, "no sut-node address given");
        return CMN_ECONFIG;
    }
    if (!c->on_complete) {
        errfmt(err, errlen, "no completion callback");
        return CMN_ECONFIG;
    }
    if (c->connections_per_node < 1 || c->connections_per_node > 64) {
        errfmt(err, errlen, "connections per node %u: expected 1..64", c->connections_per_node);
        return CMN_ECONFIG;
    }
    if (c->policy != QDL_POLICY_LEAST_OUTSTANDING && c->policy != QDL_POLICY_ROUND_ROBIN &&
        c->policy != QDL_POLICY_WEIGHTED) {
        errfmt(err, errlen, "unknown dispatch policy %d", (int)c->policy);
        return CMN_ECONFIG;
    }
    if (c->result_codec != CMPR_NONE && c->result_codec != CMPR_LZ4) {
        errfmt(err, errlen, "unknown result codec %d", c->result_codec);
        return CMN_ECODEC;
    }
    if (c->max_frame_size < CMN_FRAME_PREAUTH_MAX || c->max_frame_size > CMN_FRAME_ABS_MAX) {
        errfmt(err, errlen, "max frame size %llu: expected 16 KiB .. 4 GiB - 1",
               (unsigned long long)c->max_frame_size);
        return CMN_ECONFIG;
    }
    if (c->max_part_samples < 1) {
        errfmt(err, errlen, "max part samples must be at least 1");
        return CMN_ECONFIG;
    }
    if (c->ping_interval_ms && c->ping_timeout_ms < c->ping_interval_ms) {
        errfmt(err, errlen, "ping timeout %llu ms is shorter than the ping interval %llu ms",
               (unsigned long long)c->ping_timeout_ms, (unsigned long long)c->ping_interval_ms);
        return CMN_ECONFIG;
    }
    return 0;
}

static void free_qdl(qdl_t *q)
{
    size_t i;

    if (q->nodes) {
        for (i = 0; i < q->n_nodes; i++) {
            unsigned k;
            if (!q->nodes[i].conns)
                continue;
            for (k = 0; k < q->cfg.connections_per_node; k++)
                cmn_idmap_free(&q->nodes[i].conns[k].inflight);
            free(q->nodes[i].conns);
        }
        free(q->nodes);
    }
    cmn_arena_free(&q->arena);
    cmn_pool_free(q->pool);
    cmn_tls_ctx_free(q->tls);
    free(q->scratch);
    free(q->resp);
    free(q->strings);
    free(q);
}

int qdl_create(const qdl_config_t *cfg, qdl_t **out, char *err, size_t errlen)
{
    qdl_t *q;
    qdl_req_t start;
    char host[64];
    int rc;

    rc = check_config(cfg, err, errlen);
    if (rc < 0)
        return rc;
    q = calloc(1, sizeof(*q));
    if (!q)
        return UV_ENOMEM;
    rc = copy_config(q, cfg);
    if (rc < 0)
        goto fail_config;
    if (q->cfg.client_name) {
        snprintf(q->client_name, sizeof(q->client_name), "%s", q->cfg.client_name);
    } else {
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "localhost");
        host[sizeof(host) - 1] = '\0';
        snprintf(q->client_name, sizeof(q->client_name), "qdl@%s:%d", host, (int)getpid());
    }
    q->next_wire_id = 1;
    q->next_query_id = 1;
    if (q->cfg.tls_ca_file || q->cfg.tls_cert_file || q->cfg.tls_key_file) {
        cmn_errbuf_t eb;
        rc = cmn_tls_client_ctx(q->cfg.tls_ca_file, q->cfg.tls_cert_file, q->cfg.tls_key_file,
                                &q->tls, &eb);
        if (rc < 0) {
            errfmt(err, errlen, "%s", eb.msg);
            free_qdl(q);
            return rc;
        }
    }
    cmn_arena_init(&q->arena, 64u * 1024u);
    q->pool = cmn_pool_new(64u << 20);
    if (!q->pool) {
        rc = UV_ENOMEM;
        goto fail_config;
    }
    rc = uv_loop_init(&q->loop);
    if (rc < 0)
        goto fail_config;
    rc = cmn_xq_init(&q->loop, &q->reqs, on_reqs);
    if (rc < 0)
        goto fail_loop;
    q->reqs.data = q;
    uv_timer_init(&q->loop, &q->tick);
    q->tick.data = q;
    rc = qdl__nodes_init(q, err, errlen);
    if (rc < 0) {
        close_loop_handles(q);
        uv_run(&q->loop, UV_RUN_DEFAULT);
        goto fail_loop;
    }
    uv_timer_start(&q->tick, on_tick, 50, 50);
    rc = uv_thread_create(&q->thread, loop_main, q);
    if (rc < 0) {
        errfmt(err, errlen, "cannot start the QDL thread: %s", cmn_strerror(rc));
        qdl__stop_nodes(q);
        close_loop_handles(q);
        uv_run(&q->loop, UV_RUN_DEFAULT);
        goto fail_loop;
    }

    memset(&start, 0, sizeof(start));
    start.kind = RQ_START;
    start.err = err;
    start.errlen = errlen;
    rc = sync_req(q, &start);
    if (rc < 0) {
        qdl_destroy(q);
        return rc;
    }
    *out = q;
    return 0;

fail_loop:
    uv_loop_close(&q->loop);
fail_config:
    if (rc == UV_ENOMEM)
        errfmt(err, errlen, "out of memory");
    free_qdl(q);
    return rc;
}

/* ---- calls from other threads ---------------------------------------------------------------- */

int qdl_issue_query(qdl_t *q, const qdl_sample_t *samples, size_t n)
{
    qdl_qblock_t *b;
    size_t i;

    if (n == 0)
        return 0;
    b = malloc(sizeof(*b) + n * sizeof(b->recs[0]));
    if (!b)
        return UV_ENOMEM;
    b->req.kind = RQ_ISSUE;
    b->req.n = n;
    b->n_left = n;
    for (i = 0; i < n; i++) {
        b->recs[i].s = samples[i];
        b->recs[i].index_in_block = i;
        b->recs[i].conn = NULL;
        b->recs[i].next = NULL;
    }
    cmn_xq_push(&q->reqs, &b->req.link);
    return 0;
}

int qdl_flush(qdl_t *q)
{
    qdl_req_t *r = calloc(1, sizeof(*r));

    if (!r)
        return UV_ENOMEM;
    r->kind = RQ_FLUSH;
    cmn_xq_push(&q->reqs, &r->link);
    return 0;
}

int qdl_name(qdl_t *q, char *buf, size_t len, uint64_t *duration_ns, char *err, size_t errlen)
{
    qdl_req_t r;
    int rc;

    memset(&r, 0, sizeof(r));
    r.kind = RQ_NAME;
    r.buf = buf;
    r.len = len;
    r.err = err;
    r.errlen = errlen;
    rc = sync_req(q, &r);
    if (duration_ns)
        *duration_ns = r.duration_ns;
    return rc;
}

int qdl_stats(qdl_t *q, qdl_node_stats_t *out, size_t cap)
{
    qdl_req_t r;

    memset(&r, 0, sizeof(r));
    r.kind = RQ_STATS;
    r.stats = out;
    r.cap = cap;
    return sync_req(q, &r);
}

void qdl_stats_print(qdl_t *q, void *file)
{
    FILE *f = file ? file : stderr;
    qdl_node_stats_t *st = calloc(q->n_nodes, sizeof(*st));
    size_t i;
    int n;

    if (!st)
        return;
    n = qdl_stats(q, st, q->n_nodes);
    fprintf(f, "%-24s %-22s %-4s %10s %10s %8s %8s %8s %6s %10s %10s %12s %12s\n", "node",
            "address", "up", "sent", "completed", "failed", "redisp", "errors", "recon",
            "rtt_min_us", "rtt_last_us", "bytes_out", "bytes_in");
    for (i = 0; i < (size_t)n && i < q->n_nodes; i++)
        fprintf(
            f,
            "%-24s %-22s %-4s %10llu %10llu %8llu %8llu %8llu %6llu %10.1f %10.1f %12llu %12llu\n",
            st[i].name, st[i].address, st[i].up ? "yes" : "no",
            (unsigned long long)st[i].samples_sent, (unsigned long long)st[i].samples_completed,
            (unsigned long long)st[i].samples_failed, (unsigned long long)st[i].redispatched,
            (unsigned long long)st[i].errors, (unsigned long long)st[i].reconnects,
            (double)st[i].rtt_ns_min / 1e3, (double)st[i].rtt_ns_last / 1e3,
            (unsigned long long)st[i].bytes_out, (unsigned long long)st[i].bytes_in);
    free(st);
}

void qdl_destroy(qdl_t *q)
{
    qdl_req_t r;

    if (!q)
        return;
    memset(&r, 0, sizeof(r));
    r.kind = RQ_STOP;
    sync_req(q, &r);
    uv_thread_join(&q->thread);
    if (uv_loop_close(&q->loop) != 0)
        cmn_log_warn("qdl: event loop closed with handles still open");
    free_qdl(q);
}
