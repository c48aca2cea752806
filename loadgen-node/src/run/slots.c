/* The per-sample slots of a series: chunks of LG__CHUNK_SIZE samples in a directory, allocated
 * by the issue thread as the series grows and never moved, so that completions on other threads
 * read them without a lock (the directory entry is published with release order). */
#include "run.h"

#include <stdlib.h>

static void chunk_free(lg__chunk_t *c)
{
    free(c->ttft);
    free(c->ntok);
    free(c->sched);
    free(c->late);
    free(c->call);
    free(c->qq);
    free(c->nq);
    free(c->nb);
    free(c->wr);
    free(c->cause);
    free(c);
}

lg__chunk_t *lg__slot_chunk(lg_run_t *run, size_t ci)
{
    lg__chunk_t *c;

    while (run->n_chunks <= ci) {
        if (run->n_chunks >= LG__DIR_SIZE)
            return NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        if ((run->ls->sample_latencies || run->ls->latency_interval_ms) &&
            !(c->sched = malloc(LG__CHUNK_SIZE * sizeof(*c->sched))))
            goto fail;
        /* The breakdown columns of the sample-latency file (the others keep no per-sample
         * copy of them: the harness block reads histograms). */
        if (run->ls->sample_latencies && (!(c->late = calloc(LG__CHUNK_SIZE, sizeof(*c->late))) ||
                                          !(c->call = calloc(LG__CHUNK_SIZE, sizeof(*c->call))) ||
                                          !(c->qq = calloc(LG__CHUNK_SIZE, sizeof(*c->qq))) ||
                                          !(c->nq = calloc(LG__CHUNK_SIZE, sizeof(*c->nq))) ||
                                          !(c->nb = calloc(LG__CHUNK_SIZE, sizeof(*c->nb))) ||
                                          !(c->wr = calloc(LG__CHUNK_SIZE, sizeof(*c->wr))) ||
                                          !(c->cause = calloc(LG__CHUNK_SIZE, sizeof(*c->cause)))))
            goto fail;
        if (run->use_tokens && (!(c->ttft = calloc(LG__CHUNK_SIZE, sizeof(*c->ttft))) ||
                                !(c->ntok = calloc(LG__CHUNK_SIZE, sizeof(*c->ntok)))))
            goto fail;
        atomic_store_explicit(&run->dir[run->n_chunks], c, memory_order_release);
        run->n_chunks++;
    }
    return atomic_load_explicit(&run->dir[ci], memory_order_relaxed);

fail:
    chunk_free(c);
    return NULL;
}

void lg__slot_free_chunk(lg_run_t *run, size_t ci)
{
    lg__chunk_t *c = atomic_load_explicit(&run->dir[ci], memory_order_relaxed);

    if (!c)
        return;
    chunk_free(c);
    atomic_store_explicit(&run->dir[ci], NULL, memory_order_relaxed);
}
