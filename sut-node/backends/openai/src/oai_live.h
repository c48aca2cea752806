/* oai_live.h: the requests of a backend that can still be cancelled, found by their batch (the
 * backend ABI's cancel() names samples by batch pointer and index, and may name samples already
 * completed: see sut_backend.h).
 *
 * An entry is added before its request is submitted and removed in its on_done, before the
 * sample is completed; oai_live_cancel() marks the matching requests with oai_http_cancel()
 * under the set's lock, so a request it marks has not finished its on_done. Thread-safe. */
#ifndef OAI_LIVE_H
#define OAI_LIVE_H

#include "oai_http.h"

#include <stddef.h>
#include <uv.h>

#define OAI_LIVE_BUCKETS 1024u

typedef struct oai_live oai_live_t;
struct oai_live {
    oai_http_req_t *req;
    const void *batch;
    size_t index; /* the sample it runs, or OAI_LIVE_ALL: the whole batch (one request) */
    size_t want;  /* OAI_LIVE_ALL: the batch's samples; cancelled once all of them are named */
    size_t got;   /* samples named so far */
    oai_live_t *next, *prev;
};

#define OAI_LIVE_ALL ((size_t)-1)

typedef struct {
    uv_mutex_t mu;
    oai_live_t *bucket[OAI_LIVE_BUCKETS];
} oai_lives_t;

int oai_lives_init(oai_lives_t *l);
void oai_lives_destroy(oai_lives_t *l);
void oai_live_add(oai_lives_t *l, oai_live_t *e);
void oai_live_del(oai_lives_t *l, oai_live_t *e);
/* Marks the requests of samples batch[indices[0..n)] cancelled on |h|; returns how many. */
size_t oai_live_cancel(oai_lives_t *l, oai_http_t *h, const void *batch, const size_t *indices,
                       size_t n);

#endif
