/* After a series: the slots become the latency arrays of the performance result (each chunk
 * freed once read, so the peak is one copy), and, on request, the two CSV files beside the logs:
 * <prefix>sample_latencies.csv (one line per sample) and <prefix>latency_intervals.csv (one line
 * per interval of scheduled time). */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The samples of one interval of scheduled time, gathered while collect() walks them in issue
 * order (scheduled times only grow along it), written as one CSV line when the next begins. */
typedef struct {
    FILE *f;
    int64_t width_ns;
    int64_t cur; /* interval index of the samples in v */
    int64_t *v;
    size_t n, cap;
    uint64_t lost; /* samples of this interval that never completed */
    int oom;
} ivl_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void ivl_flush(ivl_t *iv)
{
    static const double p[4] = {0.50, 0.90, 0.99, 0.999};
    int i;

    if (!iv->n)
        return;
    qsort(iv->v, iv->n, sizeof(*iv->v), cmp_i64);
    fprintf(iv->f, "%" PRId64 ",%zu,%" PRIu64, iv->cur * iv->width_ns / 1000000, iv->n, iv->lost);
    for (i = 0; i < 4; i++) {
        size_t k = (size_t)((double)iv->n * p[i]); /* the summary's percentile index */
        fprintf(iv->f, ",%" PRId64, iv->v[k < iv->n ? k : iv->n - 1]);
    }
    fprintf(iv->f, ",%" PRId64 "\n", iv->v[iv->n - 1]);
    iv->n = 0;
    iv->lost = 0;
}

static void ivl_add(ivl_t *iv, int64_t sched, int64_t lat, int lost)
{
    int64_t b;

    if (!iv->f || iv->oom)
        return;
    b = sched / iv->width_ns;
    if (iv->n && b != iv->cur)
        ivl_flush(iv);
    iv->cur = b;
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? 2 * iv->cap : 4096;
        int64_t *v = realloc(iv->v, cap * sizeof(*v));

        if (!v) {
            iv->oom = 1;
            return;
        }
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = lat;
    iv->lost += (uint64_t)lost;
}

/* Moves the slots into |pr| (freeing each chunk once read), feeding the two CSV writers. */
/* A breakdown column stored as ns + 1: the duration, or -1 when not reported. */
static int64_t col_ns(const uint64_t *col, size_t k)
{
    return col && col[k] ? (int64_t)col[k] - 1 : -1;
}

static int collect(lg_run_t *run, const lg_effective_settings_t *s, const lg__issue_state_t *st,
                   int64_t end_rel, FILE *csv, ivl_t *iv, lg__perf_t *pr)
{
    uint64_t n = atomic_load(&run->issued_hi) - run->first_seq, i;
    int64_t max_lat = 0, final_done = 0;

    memset(pr, 0, sizeof(*pr));
    pr->n = (size_t)n;
    pr->lat = malloc((n ? n : 1) * sizeof(*pr->lat));
    if (run->use_tokens) {
        pr->ttft = malloc((n ? n : 1) * sizeof(*pr->ttft));
        pr->tpot = malloc((n ? n : 1) * sizeof(*pr->tpot));
        pr->ntok = malloc((n ? n : 1) * sizeof(*pr->ntok));
    }
    if (!pr->lat || (run->use_tokens && (!pr->ttft || !pr->tpot || !pr->ntok)))
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        lg__chunk_t *c = atomic_load_explicit(&run->dir[i >> LG__CHUNK_BITS], memory_order_relaxed);
        size_t k = (size_t)(i & LG__CHUNK_MASK);
        int64_t v = atomic_load_explicit(&c->lat[k], memory_order_relaxed);

        if (csv && c->sched) {
            /* ttft_ns: -1 without a first token (not a token run, or an error). */
            int64_t t1 = c->ttft ? atomic_load_explicit(&c->ttft[k], memory_order_relaxed) : 0;

            fprintf(csv,
                    "%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRIu32 ",%" PRIu32 ",%" PRId64
                    ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%s\n",
                    run->first_seq + i, c->sched[k], v < 0 ? -1 : v, c->late ? c->late[k] : 0,
                    c->call ? c->call[k] : 0, col_ns(c->qq, k), t1 > 0 ? t1 - 1 : -1,
                    c->ntok ? (int64_t)c->ntok[k] : 0, col_ns(c->nq, k), col_ns(c->nb, k),
                    col_ns(c->wr, k),
                    c->cause && c->cause[k]
                        ? lg__late_cause_name((lg__late_cause_t)(c->cause[k] - 1))
                        : "none");
        }
        int never = v < 0;

        if (never) {
            /* Never completed (drain timeout): a lower bound of its latency. */
            pr->lost++;
            v = end_rel + v + 1;
        }
        if (iv && c->sched)
            ivl_add(iv, c->sched[k], v, never);
        pr->lat[i] = v;
        if (v > max_lat)
            max_lat = v;
        if (run->first_seq + i >= st->last_q_first && v > final_done)
            final_done = v;
        if (run->use_tokens) {
            int64_t t = c->ttft ? atomic_load_explicit(&c->ttft[k], memory_order_relaxed) : 0;
            int64_t nt = c->ntok ? c->ntok[k] : 0;

            /* A missing first token (an error) counts as the whole latency, the cautious side. */
            pr->ttft[i] = t > 0 ? t - 1 : v;
            pr->ntok[i] = nt;
            pr->tpot[i] = nt > 1 ? (v - pr->ttft[i]) / (nt - 1) : 0;
        }
        if (k == LG__CHUNK_MASK)
            lg__slot_free_chunk(run, (size_t)(i >> LG__CHUNK_BITS));
    }
    for (i = 0; i < run->n_chunks; i++)
        lg__slot_free_chunk(run, (size_t)i);
    run->n_chunks = 0;
    if (iv && iv->f)
        ivl_flush(iv);

    if (s->scenario == LG_MULTI_STREAM && st->queries_issued > 0) {
        uint64_t spq = n / st->queries_issued, q;

        pr->nq = (size_t)st->queries_issued;
        pr->qlat = malloc(pr->nq * sizeof(*pr->qlat));
        if (!pr->qlat)
            return -ENOMEM;
        /* A query's latency is its last sample's: they share the scheduled time. */
        for (q = 0; q < st->queries_issued; q++) {
            int64_t m = 0;

            for (i = q * spq; i < (q + 1) * spq && i < n; i++)
                m = pr->lat[i] > m ? pr->lat[i] : m;
            pr->qlat[q] = m;
        }
    }
    pr->queries_issued = st->queries_issued;
    pr->max_latency = (double)max_lat / 1e9;
    pr->final_query_scheduled_time = (double)st->last_sched_rel / 1e9;
    pr->final_query_issued_time = (double)st->last_issue_rel / 1e9;
    pr->final_query_all_samples_done_time = (double)(st->last_sched_rel + final_done) / 1e9;
    pr->failed = atomic_load(&run->failed);
    pr->digest_bad = atomic_load(&run->digest_bad);
    return 0;
}

int lg__collect(lg_run_t *run, const lg_effective_settings_t *s, const lg__issue_state_t *st,
                int64_t end_rel, lg__perf_t *pr)
{
    int rc;
    FILE *csv = NULL;
    ivl_t iv = {0};

    if (run->ls->latency_interval_ms && !run->accuracy) {
        char path[4200];

        snprintf(path, sizeof(path), "%s/%slatency_intervals%s.csv", run->ls->outdir,
                 run->ls->prefix, run->ls->suffix);
        iv.f = fopen(path, run->ivl_started ? "a" : "w");
        /* At most a day (as --latency-intervals allows): a wider interval would wrap to 0 in ns
         * and divide by it. */
        iv.width_ns =
            (int64_t)(run->ls->latency_interval_ms < 86400000u ? run->ls->latency_interval_ms
                                                               : 86400000u) *
            1000000;
        if (!iv.f)
            LG_DERR(&run->dlog, "error_runtime", "cannot write %s: %s", path, strerror(errno));
        else if (!run->ivl_started)
            fputs("interval_start_ms,samples,lost,p50_ns,p90_ns,p99_ns,p99_9_ns,max_ns\n", iv.f);
        run->ivl_started = 1;
    }
    if (run->ls->sample_latencies && !run->accuracy) {
        char path[4200];
        /* The first performance series creates the file; later ones (find-peak) append. */
        snprintf(path, sizeof(path), "%s/%ssample_latencies%s.csv", run->ls->outdir,
                 run->ls->prefix, run->ls->suffix);
        csv = fopen(path, run->csv_started ? "a" : "w");
        if (!csv)
            LG_DERR(&run->dlog, "error_runtime", "cannot write %s: %s", path, strerror(errno));
        else if (!run->csv_started)
            fputs("sample_seq,scheduled_ns,latency_ns,issue_late_ns,issue_call_ns,qdl_queue_ns,"
                  "ttft_ns,n_tokens,node_queue_ns,node_backend_ns,wire_return_ns,"
                  "issue_late_cause\n",
                  csv);
        run->csv_started = 1;
    }
    rc = collect(run, s, st, end_rel, csv, &iv, pr);
    if (csv && fclose(csv) != 0)
        LG_DERR(&run->dlog, "error_runtime", "writing the sample latencies failed: %s",
                strerror(errno));
    if (iv.oom)
        LG_DERR(&run->dlog, "error_runtime",
                "out of memory for the latency intervals; the file is incomplete");
    if (iv.f && fclose(iv.f) != 0)
        LG_DERR(&run->dlog, "error_runtime", "writing the latency intervals failed: %s",
                strerror(errno));
    free(iv.v);
    return rc;
}
