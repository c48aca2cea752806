#include "lg/sut_qdl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The nodes whose counters the health report and nodes.json read (loadgen-node accepts 64). */
#define MAX_NODES 64

typedef struct {
    lg_sut_t sut;
    qdl_t *q;
    qdl_sample_t *buf; /* issue thread only */
    size_t cap;
} qdl_sut_t;

/* Converts a batch of QDL responses and passes it on, in slices, without allocating. */
static void forward(lg_run_t *run, const qdl_response_t *r, size_t n, int first_token)
{
    enum { SLICE = 256 };
    lg_response_t out[SLICE];
    size_t done = 0, i;

    if (!run)
        return;
    while (done < n) {
        size_t m = n - done < SLICE ? n - done : SLICE;

        for (i = 0; i < m; i++) {
            out[i].id = r[done + i].response_id;
            out[i].status = r[done + i].status;
            out[i].data = r[done + i].data;
            out[i].size = r[done + i].size;
            out[i].n_tokens = r[done + i].n_tokens;
        }
        if (first_token)
            lg_first_token(run, out, m);
        else
            lg_complete(run, out, m);
        done += m;
    }
}

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    qdl_sut_t *a = user;

    forward(__atomic_load_n(&a->sut.run, __ATOMIC_ACQUIRE), r, n, 0);
}

static void on_first_token(void *user, const qdl_response_t *r, size_t n)
{
    qdl_sut_t *a = user;

    forward(__atomic_load_n(&a->sut.run, __ATOMIC_ACQUIRE), r, n, 1);
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
    size_t i;

    if (n > a->cap) {
        qdl_sample_t *nb = realloc(a->buf, n * sizeof(*nb));

        if (!nb)
            return -ENOMEM;
        a->buf = nb;
        a->cap = n;
    }
    for (i = 0; i < n; i++) {
        a->buf[i].response_id = s[i].id;
        a->buf[i].data = s[i].data;
        a->buf[i].size = s[i].size;
        a->buf[i].codec = s[i].codec;
        a->buf[i].raw_size = s[i].raw_size;
    }
    return qdl_issue_query(a->q, a->buf, n);
}

static int qdl_sut_flush(lg_sut_t *sut)
{
    qdl_sut_t *a = sut->data;

    return qdl_flush(a->q);
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
    }
    return 0;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int lg_sut_qdl_write_nodes(lg_sut_t *sut, const char *path, cmn_errbuf_t *eb)
{
    qdl_sut_t *a = sut->data;
    qdl_node_stats_t *st = calloc(MAX_NODES, sizeof(*st));
    int n, i, rc = 0;
    FILE *f;

    if (!st)
        return cmn_errf(eb, -ENOMEM, "%s: out of memory", path);
    n = qdl_stats(a->q, st, MAX_NODES);
    if (n < 0) {
        free(st);
        return cmn_errf(eb, n, "cannot read the QDL's node counters: %s", cmn_strerror(n));
    }
    n = n < MAX_NODES ? n : MAX_NODES;
    f = fopen(path, "w");
    if (!f) {
        rc = cmn_errf(eb, -errno, "cannot write %s: %s", path, strerror(errno));
        free(st);
        return rc;
    }
    fputs("[\n", f);
    for (i = 0; i < n; i++) {
        fputs("  {\"name\": ", f);
        json_str(f, st[i].name);
        fputs(", \"address\": ", f);
        json_str(f, st[i].address);
        fprintf(f,
                ", \"up\": %s, \"samples_sent\": %" PRIu64 ", \"samples_completed\": %" PRIu64
                ", \"samples_failed\": %" PRIu64 ", \"redispatched\": %" PRIu64
                ", \"errors\": %" PRIu64 ", \"reconnects\": %" PRIu64 ", \"bytes_out\": %" PRIu64
                ", \"bytes_in\": %" PRIu64 ", \"rtt_ns_min\": %" PRIu64
                ", \"rtt_ns_last\": %" PRIu64 "}%s\n",
                st[i].up ? "true" : "false", st[i].samples_sent, st[i].samples_completed,
                st[i].samples_failed, st[i].redispatched, st[i].errors, st[i].reconnects,
                st[i].bytes_out, st[i].bytes_in, st[i].rtt_ns_min, st[i].rtt_ns_last,
                i + 1 < n ? "," : "");
    }
    fputs("]\n", f);
    if (ferror(f) | (fclose(f) != 0))
        rc = cmn_errf(eb, -EIO, "writing %s failed", path);
    free(st);
    return rc;
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
    free(a->buf);
    free(a);
}

qdl_t *lg_sut_qdl_handle(lg_sut_t *sut)
{
    return ((qdl_sut_t *)sut->data)->q;
}
