/* The cancellable requests of a backend, by batch (httpc/live.h). */
#include "httpc/live.h"

#include "cmn/list.h"

#include <stdint.h>
#include <string.h>

static size_t slot(const void *batch)
{
    uintptr_t p = (uintptr_t)batch;
    return (size_t)((p >> 4) ^ (p >> 14)) & (HTTPC_LIVE_BUCKETS - 1);
}

int httpc_lives_init(httpc_lives_t *l)
{
    memset(l->bucket, 0, sizeof(l->bucket));
    return uv_mutex_init(&l->mu);
}

void httpc_lives_destroy(httpc_lives_t *l)
{
    uv_mutex_destroy(&l->mu);
}

void httpc_live_add(httpc_lives_t *l, httpc_live_t *e)
{
    httpc_live_t **b = &l->bucket[slot(e->batch)];

    e->got = 0;
    e->prev = NULL;
    uv_mutex_lock(&l->mu);
    e->next = *b;
    if (*b)
        (*b)->prev = e;
    *b = e;
    uv_mutex_unlock(&l->mu);
}

void httpc_live_del(httpc_lives_t *l, httpc_live_t *e)
{
    uv_mutex_lock(&l->mu);
    CMN_DLIST_UNLINK(l->bucket[slot(e->batch)], e, prev, next);
    uv_mutex_unlock(&l->mu);
    e->next = e->prev = NULL;
}

size_t httpc_live_mark(httpc_lives_t *l, const void *batch, const size_t *indices, size_t n,
                       void (*mark)(httpc_live_t *e, void *arg), void *arg)
{
    httpc_live_t *e;
    size_t i, k = 0;

    uv_mutex_lock(&l->mu);
    for (e = l->bucket[slot(batch)]; e; e = e->next) {
        if (e->batch != batch)
            continue;
        if (e->index == HTTPC_LIVE_ALL) {
            e->got += n;
            if (e->got < e->want) /* other clients' samples share the request */
                continue;
        } else {
            for (i = 0; i < n && indices[i] != e->index; i++) {
            }
            if (i == n)
                continue;
        }
        mark(e, arg);
        k++;
    }
    uv_mutex_unlock(&l->mu);
    return k;
}

static void mark_curl(httpc_live_t *e, void *h)
{
    httpc_cancel(h, e->req);
}

size_t httpc_live_cancel(httpc_lives_t *l, httpc_t *h, const void *batch, const size_t *indices,
                         size_t n)
{
    return httpc_live_mark(l, batch, indices, n, mark_curl, h);
}
