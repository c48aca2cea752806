/* httpc/live.h: the requests of a backend that can still be cancelled, found by their batch (the
 * backend ABI's cancel() names samples by batch pointer and index, and may name samples already
 * completed: see sut_backend.h).
 *
 * An entry is added before its request is submitted and removed in its on_done, before the
 * sample is completed; httpc_live_cancel() marks the matching requests with httpc_cancel()
 * under the set's lock, so a request it marks has not finished its on_done. Thread-safe. */
#ifndef HTTPC_LIVE_H
#define HTTPC_LIVE_H

#include "httpc/httpc.h"

#include <stddef.h>
#include <uv.h>

#define HTTPC_LIVE_BUCKETS 1024u

typedef struct httpc_live httpc_live_t;
struct httpc_live {
    httpc_req_t *req;
    const void *batch;
    size_t index; /* the sample it runs, or HTTPC_LIVE_ALL: the whole batch (one request) */
    size_t want;  /* HTTPC_LIVE_ALL: the batch's samples; cancelled once all of them are named */
    size_t got;   /* samples named so far */
    httpc_live_t *next, *prev;
};

#define HTTPC_LIVE_ALL ((size_t)-1)

typedef struct {
    uv_mutex_t mu;
    httpc_live_t *bucket[HTTPC_LIVE_BUCKETS];
} httpc_lives_t;

int httpc_lives_init(httpc_lives_t *l);
void httpc_lives_destroy(httpc_lives_t *l);
void httpc_live_add(httpc_lives_t *l, httpc_live_t *e);
void httpc_live_del(httpc_lives_t *l, httpc_live_t *e);
/* Marks the requests of samples batch[indices[0..n)] cancelled on |h|; returns how many. */
size_t httpc_live_cancel(httpc_lives_t *l, httpc_t *h, const void *batch, const size_t *indices,
                         size_t n);
/* The same with |mark| for each match instead of httpc_cancel, under the set's lock (another
 * client's cancel: the openai backend's lean transport). */
size_t httpc_live_mark(httpc_lives_t *l, const void *batch, const size_t *indices, size_t n,
                       void (*mark)(httpc_live_t *e, void *arg), void *arg);

#endif
