#include "lg/sut_qdl.h"

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The nodes whose counters the health report and nodes.json read (loadgen-node accepts 64). */
#define MAX_NODES 64

typedef struct {
    lg_sut_t sut;
    qdl_t *q;
    /* For lg_sut_qdl_counts() (the metrics endpoint reads them from its own thread). */
    atomic_uint_fast64_t issued, completed, failed;
} qdl_sut_t;

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    qdl_sut_t *a = user;
    size_t i, failed = 0;

    for (i = 0; i < n; i++)
        failed += r[i].status != 0;
    atomic_fetch_add_explicit(&a->completed, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->failed, failed, memory_order_relaxed);

    lg_run_t *run = __atomic_load_n(&a->sut.run, __ATOMIC_ACQUIRE);

    if (run)
        lg_complete(run, r, n);
}

static void on_first_token(void *user, const qdl_response_t *r, size_t n)
{
    qdl_sut_t *a = user;

    lg_run_t *run = __atomic_load_n(&a->sut.run, __ATOMIC_ACQUIRE);

    if (run)
        lg_first_token(run, r, n);
}

static int qdl_sut_name(lg_sut_t *sut, char *buf, size_t len, uint64_t *dur_ns, char *err,
                        size_t errlen)
{
    qdl_sut_t *a = sut->data;

    return qdl_name(a->q, buf, len, dur_ns, err, errlen);
}

static int qdl_sut_issue(lg_sut_t *sut, const lg_sample_t *s, size_t n)
{
    qdl_sut_t *a = sut->data;
    int rc = qdl_issue_query(a->q, s, n);

    if (rc == 0)
        atomic_fetch_add_explicit(&a->issued, n, memory_order_relaxed);
    return rc;
}

static int qdl_sut_flush(lg_sut_t *sut)
{
    qdl_sut_t *a = sut->data;

    return qdl_flush(a->q);
}

static int qdl_sut_poll_begin(lg_sut_t *sut)
{
    return qdl_poll_begin(((qdl_sut_t *)sut->data)->q);
}

static int qdl_sut_poll(lg_sut_t *sut, uint64_t timeout_ns)
{
    return qdl_poll(((qdl_sut_t *)sut->data)->q, timeout_ns);
}

static void qdl_sut_poll_end(lg_sut_t *sut)
{
    qdl_poll_end(((qdl_sut_t *)sut->data)->q);
}

/* The sum of the nodes' counters; qdl_stats() copies them under the QDL's lock. */
static int qdl_sut_health(lg_sut_t *sut, lg_sut_health_t *h)
{
    qdl_sut_t *a = sut->data;
    qdl_node_stats_t st[MAX_NODES];
    int n = qdl_stats(a->q, st, MAX_NODES), i;

    memset(h, 0, sizeof(*h));
    if (n < 0)
        return n;
    h->nodes = (uint64_t)n;
    for (i = 0; i < n && i < MAX_NODES; i++) {
        h->nodes_down += st[i].up ? 0u : 1u;
        h->nodes_lost += st[i].reconnects || !st[i].up ? 1u : 0u;
        h->reconnects += st[i].reconnects;
        h->redispatched += st[i].redispatched;
        h->batches_out += st[i].batches_out;
        h->batches_write_thread += st[i].batches_write_thread;
    }
    return 0;
}

/* The QDL's own JSON (qdl_stats_write_json) carries more than a copy here could: degraded,
 * losses, stalls and samples in flight, besides the counters. */
static int qdl_sut_mem_register(lg_sut_t *sut, void *ptr, size_t len)
{
    return qdl_register_memory(((qdl_sut_t *)sut)->q, ptr, len);
}

static void qdl_sut_mem_unregister(lg_sut_t *sut, void *ptr)
{
    qdl_unregister_memory(((qdl_sut_t *)sut)->q, ptr);
}

int lg_sut_qdl_write_nodes(lg_sut_t *sut, const char *path, cmn_errbuf_t *eb)
{
    qdl_sut_t *a = sut->data;
    FILE *f = fopen(path, "w");
    int rc;

    if (!f)
        return cmn_errf(eb, -errno, "cannot write %s: %s", path, strerror(errno));
    rc = qdl_stats_write_json(a->q, f);
    if ((fclose(f) != 0) && rc == 0)
        rc = -EIO;
    if (rc < 0)
        return cmn_errf(eb, -EIO, "writing %s failed", path);
    return 0;
}

int lg_sut_qdl_create(const qdl_config_t *cfg, lg_sut_t **out, cmn_errbuf_t *eb)
{
    qdl_sut_t *a = calloc(1, sizeof(*a));
    qdl_config_t c = *cfg;
    int rc;

    if (!a)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    c.on_complete = on_complete;
    c.on_first_token = on_first_token;
    c.user = a;
    rc = qdl_create(&c, &a->q, eb ? eb->msg : NULL, eb ? sizeof(eb->msg) : 0);
    if (rc < 0) {
        free(a);
        return rc;
    }
    a->sut.name = qdl_sut_name;
    a->sut.issue = qdl_sut_issue;
    a->sut.flush = qdl_sut_flush;
    a->sut.health = qdl_sut_health;
    a->sut.mem_register = qdl_sut_mem_register;
    a->sut.mem_unregister = qdl_sut_mem_unregister;
    a->sut.poll_begin = qdl_sut_poll_begin;
    a->sut.poll = qdl_sut_poll;
    a->sut.poll_end = qdl_sut_poll_end;
    a->sut.data = a;
    *out = &a->sut;
    return 0;
}

void lg_sut_qdl_destroy(lg_sut_t *sut)
{
    qdl_sut_t *a;

    if (!sut)
        return;
    a = sut->data;
    qdl_destroy(a->q);
    free(a);
}

qdl_t *lg_sut_qdl_handle(lg_sut_t *sut)
{
    return ((qdl_sut_t *)sut->data)->q;
}

void lg_sut_qdl_counts(lg_sut_t *sut, uint64_t *issued, uint64_t *completed, uint64_t *failed)
{
    qdl_sut_t *a = sut->data;

    *issued = atomic_load_explicit(&a->issued, memory_order_relaxed);
    *completed = atomic_load_explicit(&a->completed, memory_order_relaxed);
    *failed = atomic_load_explicit(&a->failed, memory_order_relaxed);
}
