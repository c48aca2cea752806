/* The node (node.h): listeners, ticks, signals, the completion queue, drain and set-up. */
#include "node.h"
#include "slide.h"

#include "cmn/clock.h"
#include "cmn/log.h"
#include "cmn/net.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICK_MS 250u

static void node_check_drained(sut_node_t *n)
{
    if (!n->draining || n->stopping || !sut__batcher_idle(&n->batcher))
        return;
    /* Every result is out: say goodbye on each connection, then stop. */
    sut__sessions_goodbye(&n->sessions, "node shutting down");
    sut__node_log_stats(n);
    cmn_log_info("drained: every result sent; exiting");
    sut__node_stop(n);
}

/* Completion records, in the order the workers pushed them (loop thread). */
static void on_records(cmn_xq_t *q, cmn_xq_node_t *list)
{
    sut_node_t *n = q->data;
    int freed_engine = 0;

    while (list) {
        sut_qhdr_t *h = (sut_qhdr_t *)list;
        list = list->next;
        if (h->kind == SUT_REC_BATCH_DONE) {
            sut_nbatch_t *nb = (sut_nbatch_t *)(void *)((char *)h - offsetof(sut_nbatch_t, done));
            sut__metrics_batch(n->metrics, nb);
            sut__batcher_release(&n->batcher, nb);
            freed_engine = 1;
        } else {
            sut__sessions_take(&n->sessions, (sut_rec_t *)h);
        }
    }
    sut__sessions_flush(&n->sessions);
    if (freed_engine)
        sut__batcher_kick(&n->batcher);
    node_check_drained(n);
}

static void on_connection(uv_stream_t *server, int status)
{
    sut_node_t *n = server->data;

    if (status < 0) {
        cmn_log_error("accept: %s", cmn_strerror(status));
        return;
    }
    sut__sessions_accept(&n->sessions, server, NULL);
}

static void on_ucx_connection(cmn_ucx_listener_t *l, cmn_ucx_incoming_t *in, void *arg)
{
    sut_node_t *n = arg;

    (void)l;
    sut__sessions_accept(&n->sessions, NULL, in);
}

/* ucx:// listeners go with the tcp:// ones (stop, drain). */
static void close_ucx_listeners(sut_node_t *n)
{
    size_t i;

    for (i = 0; i < SUT_MAX_LISTEN; i++) {
        cmn_ucx_listener_close(n->ucx_listeners[i]);
        n->ucx_listeners[i] = NULL;
    }
}

/* Memory goes back to the system when peers leave: the idle batches and pooled result buffers
 * when none is connected, and whatever the allocator keeps free in its heaps. */
static void give_back_memory(sut_node_t *n)
{
    if (!sut__sessions_closed(&n->sessions))
        return;
    if (n->sessions.n == 0 && sut__batcher_idle(&n->batcher)) {
        sut__batcher_trim(&n->batcher);
        cmn_pool_trim(n->pool);
    }
    malloc_trim(0);
}

static void on_tick(uv_timer_t *t)
{
    sut_node_t *n = t->data;
    sut__sessions_tick(&n->sessions, cmn_now_ns());
    give_back_memory(n);
}

/* The end of every loop turn: batches from what the turn read, then the results of batches an
 * inline backend ran in this turn (pushed without a wake-up); handing them over may free an
 * engine and run the next batch, whose results are drained here too. */
static void on_turn(uv_check_t *h)
{
    sut_node_t *n = h->data;
    sut__batcher_kick(&n->batcher);
    while (cmn_xq_drain(&n->done_q)) {
    }
    node_check_drained(n);
}

void sut__node_log_stats(sut_node_t *n)
{
    Nsut__Stats st = NSUT__STATS__INIT;

    sut__sessions_stats(&n->sessions, &st);
    cmn_log_info(
        "stats: %u connections open (%llu total), %llu queries, %llu samples (%llu "
        "failed, %llu rejected), %llu batches, %llu bytes in, %llu bytes out, decode "
        "%.3f s, infer %.3f s, encode %.3f s, %llu errors, memory %llu of %llu bytes (peak %llu)",
        st.connections_open, (unsigned long long)st.connections_total,
        (unsigned long long)st.queries, (unsigned long long)st.samples,
        (unsigned long long)st.samples_failed, (unsigned long long)n->sessions.st.samples_rejected,
        (unsigned long long)st.batches, (unsigned long long)st.bytes_in,
        (unsigned long long)st.bytes_out, (double)st.decode_ns / 1e9, (double)st.infer_ns / 1e9,
        (double)st.encode_ns / 1e9, (unsigned long long)st.errors,
        (unsigned long long)sut__budget_used(&n->budget), (unsigned long long)n->budget.limit,
        (unsigned long long)atomic_load(&n->budget.peak));
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void sut__node_stop(sut_node_t *n)
{
    size_t i;

    if (n->stopping || !n->handles_ready)
        return;
    n->stopping = 1;
    sut__node_remove_port_file(&n->opt);
    for (i = 0; i < n->n_listeners; i++)
        close_handle((uv_handle_t *)&n->listeners[i]);
    close_ucx_listeners(n);
    cmn_ucx_close(n->ucx); /* once its last session has closed */
    n->ucx = NULL;
    close_handle((uv_handle_t *)&n->tick);
    close_handle((uv_handle_t *)&n->turn);
    close_handle((uv_handle_t *)&n->drain_timer);
    sut__sessions_close_timer(&n->sessions);
    close_handle((uv_handle_t *)&n->sig_term);
    close_handle((uv_handle_t *)&n->sig_int);
    close_handle((uv_handle_t *)&n->sig_hup);
    sut__batcher_close(&n->batcher);
    sut__metrics_stop(n->metrics);
    if (n->be.attached) {
        /* Its handles on this loop close (its last results, if any, are queued: drained by the
         * close below). */
        n->be.attached = 0;
        n->be.detach(n->be.be);
    }
    cmn_xq_close(&n->done_q, NULL);
}

/* Before the drain deadline, this long, samples still running are cancelled (ABI cancel), so that
 * the node exits in time with its Goodbyes, whatever an engine does. */
static uint64_t cancel_lead_ms(const sut_node_t *n)
{
    uint64_t lead = n->opt.drain_timeout_ms / 4;
    return lead > 1000 ? 1000 : lead;
}

static void on_drain_timeout(uv_timer_t *t);

static void on_drain_cancel(uv_timer_t *t)
{
    sut_node_t *n = t->data;
    size_t k = sut__batcher_cancel(&n->batcher, NULL);

    cmn_log_warn("shutdown: %u batches still running %llu ms before the %llu ms drain deadline; "
                 "cancelled their %zu samples",
                 n->batcher.inflight, (unsigned long long)cancel_lead_ms(n),
                 (unsigned long long)n->opt.drain_timeout_ms, k);
    uv_timer_start(&n->drain_timer, on_drain_timeout, cancel_lead_ms(n), 0);
}

static void on_drain_timeout(uv_timer_t *t)
{
    sut_node_t *n = t->data;
    cmn_log_error("shutdown: %u batches still running after %llu ms; exiting without their results",
                  n->batcher.inflight, (unsigned long long)n->opt.drain_timeout_ms);
    /* A backend thread may still complete into the queue; the process must not outlive it in a
     * half-torn-down state. */
    sut__node_remove_port_file(&n->opt);
    _exit(1);
}

void sut__node_drain(sut_node_t *n, const char *why)
{
    size_t i;

    if (n->draining)
        return;
    n->draining = 1;
    cmn_log_info("%s: stop accepting, finishing the samples in flight", why);
    sut__node_remove_port_file(&n->opt); /* nothing listens on its port any more */
    for (i = 0; i < n->n_listeners; i++)
        close_handle((uv_handle_t *)&n->listeners[i]);
    close_ucx_listeners(n);
    sut__sessions_drain(&n->sessions);
    sut__batcher_drain(&n->batcher);
    if (n->be.cancel)
        uv_timer_start(&n->drain_timer, on_drain_cancel,
                       n->opt.drain_timeout_ms - cancel_lead_ms(n), 0);
    else
        uv_timer_start(&n->drain_timer, on_drain_timeout, n->opt.drain_timeout_ms, 0);
    node_check_drained(n);
}

static void on_signal(uv_signal_t *h, int signum)
{
    sut_node_t *n = h->data;

    if (signum == SIGHUP) {
        sut__node_log_stats(n);
        return;
    }
    if (n->draining) {
        cmn_log_error("second %s while draining: exiting now",
                      signum == SIGINT ? "SIGINT" : "SIGTERM");
        sut__node_remove_port_file(&n->opt);
        _exit(1);
    }
    sut__node_drain(n, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static void init_handles(sut_node_t *n, uv_loop_t *loop)
{
    uv_timer_init(loop, &n->tick);
    uv_timer_init(loop, &n->drain_timer);
    uv_check_init(loop, &n->turn);
    uv_signal_init(loop, &n->sig_term);
    uv_signal_init(loop, &n->sig_int);
    uv_signal_init(loop, &n->sig_hup);
    n->tick.data = n->turn.data = n->drain_timer.data = n;
    n->sig_term.data = n->sig_int.data = n->sig_hup.data = n;
    n->handles_ready = 1;
}

/* Batch size, engines and the per-connection in-flight limit, from the options and the backend. */
static int size_node(sut_node_t *n, cmn_errbuf_t *eb)
{
    sut_backend_info_t *info = &n->be.info;

    n->max_batch = n->opt.max_batch ? n->opt.max_batch : info->max_batch;
    if (n->max_batch == 0)
        n->max_batch = 64;
    if (info->max_batch && n->max_batch > info->max_batch)
        return cmn_errf(eb, CMN_ECONFIG, "--max-batch %u is over the %s backend's limit of %u",
                        n->max_batch, info->name, info->max_batch);
    if (info->preferred_batch == 0 || info->preferred_batch > n->max_batch)
        info->preferred_batch = n->max_batch;
    n->engines = n->opt.workers ? n->opt.workers : (info->engines ? info->engines : 1);
    /* The samples a client keeps in flight here: enough to fill every engine's batches several
     * times over, few enough that a faster node can take more of an Offline query. */
    if (!n->opt.max_inflight) {
        uint64_t w = (uint64_t)n->engines * n->max_batch * 4u;
        n->opt.max_inflight = (uint32_t)(w < 64 ? 64 : w > 65536 ? 65536 : w);
    }
    if (!n->opt.max_preauth)
        n->opt.max_preauth = n->opt.max_connections / 2 ? n->opt.max_connections / 2 : 1;
    if (!n->opt.memory_budget)
        n->opt.memory_budget = sut__budget_default();
    sut__budget_init(&n->budget, n->opt.memory_budget);
    return 0;
}

static void init_parts(sut_node_t *n)
{
    sut_batcher_config_t bc;
    sut_sessions_env_t env;

    memset(&bc, 0, sizeof(bc));
    bc.max_batch = n->max_batch;
    bc.preferred_batch = n->be.info.preferred_batch;
    bc.max_batch_bytes = n->opt.max_batch_bytes;
    bc.max_wait_us = n->opt.max_wait_us;
    bc.engines = n->engines;
    bc.inline_run = (n->be.info.flags & SUT_BACKEND_F_INLINE) != 0;
    sut__batcher_init(&n->batcher, n->loop, &bc, &n->be, &n->workers, &n->budget);

    memset(&env, 0, sizeof(env));
    env.opt = &n->opt;
    env.name = n->name;
    env.info = &n->be.info;
    env.max_batch = n->max_batch;
    env.engines = n->engines;
    env.bt = &n->batcher;
    env.workers = &n->workers;
    env.pool = n->pool;
    env.budget = &n->budget;
    env.tls = n->tls;
    env.probe = &n->probe;
    sut__sessions_init(&n->sessions, n->loop, &env);
}

/* The port file appears whole (a temporary file renamed over it) and only once the node serves:
 * a script that waits for it never reads half a number, nor a port nobody answers on. */
static int write_port_file(const char *path, int port, cmn_errbuf_t *eb)
{
    char tmp[4096];
    FILE *f;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return cmn_errf(eb, CMN_ECONFIG, "--port-file %s: path too long", path);
    f = fopen(tmp, "w");
    if (!f)
        return cmn_errf(eb, CMN_ECONFIG, "cannot write port file %s: %s", tmp, strerror(errno));
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        (void)unlink(tmp);
        return cmn_errf(eb, CMN_ECONFIG, "cannot write port file %s: %s", path, strerror(e));
    }
    return 0;
}

static int listen_one(sut_node_t *n, size_t i, int *port, cmn_errbuf_t *eb)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss), rc;
    char addr[64];
    cmn_transport_t t;

    rc = cmn_endpoint_parse(n->opt.listen[i], &t, &ss, eb);
    if (rc < 0)
        return rc;
    uv_tcp_init(n->loop, &n->listeners[i]);
    n->listeners[i].data = n;
    n->n_listeners = i + 1;
    if (t == CMN_TRANSPORT_UCX) {
        if (n->tls)
            return cmn_errf(eb, CMN_ECONFIG, "%s: TLS runs on tcp:// only", n->opt.listen[i]);
        if (!n->opt.ucx_trusted_fabric)
            return cmn_errf(eb, CMN_ECONFIG, "--listen %s: %s", n->opt.listen[i],
                            CMN_UCX_UNTRUSTED_REASON "--ucx-trusted-fabric");
        cmn_ucx_options_t uo = {.busy_poll = n->opt.ucx_busy_poll};
        if (!n->ucx && (rc = cmn_ucx_open(n->loop, &uo, &n->ucx, eb)) < 0)
            return rc;
        rc = cmn_ucx_listen(n->ucx, (struct sockaddr *)&ss, on_ucx_connection, n,
                            &n->ucx_listeners[i], eb);
        if (rc < 0)
            return rc;
        cmn_addr_format((struct sockaddr *)&ss, addr, sizeof(addr));
        *port = cmn_ucx_listener_port(n->ucx_listeners[i]);
        cmn_log_info(
            "listening on ucx://%s (port %d; --ucx-trusted-fabric: every host that reaches "
            "it is trusted)",
            addr, *port);
        return 0;
    }
    rc = uv_tcp_bind(&n->listeners[i], (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&n->listeners[i], 511, on_connection);
    if (rc < 0)
        return cmn_errf(eb, rc, "cannot listen on %s: %s", n->opt.listen[i], cmn_strerror(rc));
    uv_tcp_getsockname(&n->listeners[i], (struct sockaddr *)&ss, &len);
    cmn_addr_format((struct sockaddr *)&ss, addr, sizeof(addr));
    *port = cmn_addr_port((struct sockaddr *)&ss);
    cmn_log_info("listening on %s", addr);
    return 0;
}

/* Binds and listens on every --listen address, then names the node after the first port. */
static int listen_all(sut_node_t *n, cmn_errbuf_t *eb)
{
    size_t i;
    int port = -1, rc;
    char host[200];

    n->port = -1;
    for (i = 0; i < n->opt.n_listen; i++) {
        rc = listen_one(n, i, &port, eb);
        if (rc < 0)
            return rc;
        if (n->port < 0)
            n->port = port;
    }
    if (n->opt.name) {
        snprintf(n->name, sizeof(n->name), "%s", n->opt.name);
    } else {
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "localhost");
        host[sizeof(host) - 1] = '\0';
        snprintf(n->name, sizeof(n->name), "%s:%d", host, n->port);
    }
    return 0;
}

int sut__node_init(sut_node_t *n, uv_loop_t *loop, const sut_opts_t *opt, cmn_errbuf_t *eb)
{
    const sut_opts_t *o = opt;
    int rc;

    memset(n, 0, sizeof(*n));
    n->opt = *opt;
    n->loop = loop;
    /* The loop's handles first, so that a failure further down can always be unwound by
     * sut__node_stop(). */
    rc = cmn_xq_init(loop, &n->done_q, on_records);
    if (rc < 0)
        return cmn_errf(eb, rc, "completion queue: %s", cmn_strerror(rc));
    n->done_q.data = n;
    init_handles(n, loop);
    /* Idle result buffers kept per size class: enough for steady traffic, little enough that a
     * burst's buffers go back to the system. */
    n->pool = cmn_pool_new(32u << 20);
    if (!n->pool)
        return cmn_errf(eb, -ENOMEM, "buffer pool: out of memory");
    if (o->tls_cert || o->tls_key || o->tls_ca || o->tls_allow) {
        rc = cmn_tls_server_ctx(o->tls_cert, o->tls_key, o->tls_ca, o->tls_allow, &n->tls, eb);
        if (rc < 0)
            return rc;
    }
    /* The ports first: a port taken by another process is found in a moment, not after a model
     * load of minutes. Clients that connect meanwhile wait in the kernel's backlog: the loop,
     * which accepts them, runs only once the backend is loaded. */
    rc = listen_all(n, eb);
    if (rc < 0)
        return rc;
    cmn_log_info("loading backend %s (device %s, %zu backend option(s)); clients wait for it",
                 o->backend, o->device, o->n_opts);
    rc = sut__backend_load(&n->be, o, eb);
    if (rc < 0)
        return rc;
    rc = size_node(n, eb);
    if (rc < 0)
        return rc;
    sut__slide_budget(&n->be, &n->budget); /* the window's sums count (slide.h) */
    rc = sut__probe_start(&n->probe, &n->be, eb);
    if (rc < 0)
        return rc;
    init_parts(n);
    sut__sessions_init_timer(&n->sessions, loop); /* after sut__sessions_init() */
    rc = sut__workers_init(&n->workers, &n->be, &n->done_q, n->pool, &n->budget, n->engines, eb);
    if (rc < 0)
        return rc;
    /* An inline backend's I/O on this loop (ABI 1.3): no thread hand-off per request, first token
     * or completion. A refusal keeps it on its own threads. */
    if (n->be.attach && (n->be.info.flags & SUT_BACKEND_F_INLINE) &&
        n->be.attach(n->be.be, loop) == 0)
        n->be.attached = 1;
    uv_timer_start(&n->tick, on_tick, TICK_MS, TICK_MS);
    uv_check_start(&n->turn, on_turn);
    uv_signal_start(&n->sig_term, on_signal, SIGTERM);
    uv_signal_start(&n->sig_int, on_signal, SIGINT);
    uv_signal_start(&n->sig_hup, on_signal, SIGHUP);
    return 0;
}

void sut__node_free(sut_node_t *n)
{
    sut__probe_stop(&n->probe);
    sut__workers_shutdown(&n->workers);
    sut__batcher_free(&n->batcher);
    sut__backend_unload(&n->be);
    /* After the backend: its threads observe into the metrics until every sample completed. */
    sut__metrics_free(n->metrics);
    n->metrics = NULL;
    sut__sessions_free(&n->sessions);
    cmn_tls_ctx_free(n->tls);
    n->tls = NULL;
    cmn_pool_free(n->pool);
    n->pool = NULL;
}

static int start_metrics(sut_node_t *n, cmn_errbuf_t *eb)
{
    sut_metrics_env_t env;

    memset(&env, 0, sizeof(env));
    env.listen = n->opt.metrics_listen;
    env.name = n->name;
    env.backend = n->be.info.name;
    env.max_batch = n->max_batch;
    env.sessions = &n->sessions;
    env.batcher = &n->batcher;
    env.workers = &n->workers;
    env.budget = &n->budget;
    env.probe = &n->probe;
    return sut__metrics_start(&n->metrics, n->loop, &env, eb);
}

int sut__node_listen(sut_node_t *n, cmn_errbuf_t *eb)
{
    int rc;

    if (n->opt.port_file && (rc = write_port_file(n->opt.port_file, n->port, eb)) < 0)
        return rc;
    if (n->opt.metrics_listen)
        return start_metrics(n, eb);
    return 0;
}

void sut__node_remove_port_file(const sut_opts_t *o)
{
    if (o->port_file)
        (void)unlink(o->port_file);
}
