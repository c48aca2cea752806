/* The per-sample slots of a series: chunks of LG__CHUNK_SIZE samples in a directory, allocated
 * by the issue thread as the series grows and never moved, so that completions on other threads
 * read them without a lock (the directory entry is published with release order). */
#include "run.h"

#include <stdlib.h>

lg__chunk_t *lg__slot_chunk(lg_run_t *run, size_t ci)
{
    lg__chunk_t *c;

    while (run->n_chunks <= ci) {
        if (run->n_chunks >= LG__DIR_SIZE)
            return NULL;
        c = malloc(sizeof(*c));
        if (!c)
            return NULL;
        c->ttft = NULL;
        c->ntok = NULL;
        c->sched = NULL;
        if ((run->ls->sample_latencies || run->ls->latency_interval_ms) &&
            !(c->sched = malloc(LG__CHUNK_SIZE * sizeof(*c->sched)))) {
            free(c);
            return NULL;
        }
        if (run->use_tokens) {
            c->ttft = calloc(LG__CHUNK_SIZE, sizeof(*c->ttft));
            c->ntok = calloc(LG__CHUNK_SIZE, sizeof(*c->ntok));
            if (!c->ttft || !c->ntok) {
                free(c->ttft);
                free(c->ntok);
                free(c->sched);
                free(c);
                return NULL;
            }
        }
        atomic_store_explicit(&run->dir[run->n_chunks], c, memory_order_release);
        run->n_chunks++;
    }
    return atomic_load_explicit(&run->dir[ci], memory_order_relaxed);
}

void lg__slot_free_chunk(lg_run_t *run, size_t ci)
{
    lg__chunk_t *c = atomic_load_explicit(&run->dir[ci], memory_order_relaxed);

    if (!c)
        return;
    free(c->ttft);
    free(c->ntok);
    free(c->sched);
    free(c);
    atomic_store_explicit(&run->dir[ci], NULL, memory_order_relaxed);
}
