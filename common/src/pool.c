#include "cmn/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <uv.h>

#define POOL_MIN_SHIFT 6u  /* 64 B */
#define POOL_MAX_SHIFT 30u /* 1 GiB */
#define POOL_CLASSES (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1u)
#define POOL_MAX_IDLE_COUNT 4096u

/* The header sits in front of every buffer; the user pointer stays 16-byte aligned. */
typedef struct pool_hdr {
    struct pool_hdr *next;
    uint32_t cls; /* size class, or UINT32_MAX for an unpooled (oversize) buffer */
    uint32_t pad;
} pool_hdr_t;

typedef struct {
    uv_mutex_t mu;
    pool_hdr_t *idle;
    size_t n_idle;
} pool_class_t;

struct cmn_pool {
    size_t max_idle_bytes;
    pool_class_t cls[POOL_CLASSES];
};

_Static_assert(sizeof(pool_hdr_t) == 16, "pool header keeps 16-byte alignment");

cmn_pool_t *cmn_pool_new(size_t max_idle_bytes)
{
    cmn_pool_t *p = calloc(1, sizeof(*p));
    unsigned i;

    if (!p)
        return NULL;
    p->max_idle_bytes = max_idle_bytes;
    for (i = 0; i < POOL_CLASSES; i++) {
        if (uv_mutex_init(&p->cls[i].mu) != 0) {
            while (i--)
                uv_mutex_destroy(&p->cls[i].mu);
            free(p);
            return NULL;
        }
    }
    return p;
}

void cmn_pool_free(cmn_pool_t *p)
{
    unsigned i;
    pool_hdr_t *h, *n;

    if (!p)
        return;
    for (i = 0; i < POOL_CLASSES; i++) {
        for (h = p->cls[i].idle; h; h = n) {
            n = h->next;
            free(h);
        }
        uv_mutex_destroy(&p->cls[i].mu);
    }
    free(p);
}

void cmn_pool_trim(cmn_pool_t *p)
{
    unsigned i;
    pool_hdr_t *h, *n;

    for (i = 0; i < POOL_CLASSES; i++) {
        uv_mutex_lock(&p->cls[i].mu);
        h = p->cls[i].idle;
        p->cls[i].idle = NULL;
        p->cls[i].n_idle = 0;
        uv_mutex_unlock(&p->cls[i].mu);
        for (; h; h = n) {
            n = h->next;
            free(h);
        }
    }
}

static uint32_t class_of(size_t size)
{
    uint32_t s = POOL_MIN_SHIFT;
    while (s <= POOL_MAX_SHIFT && ((size_t)1 << s) < size)
        s++;
    return s > POOL_MAX_SHIFT ? UINT32_MAX : s - POOL_MIN_SHIFT;
}

void *cmn_pool_get(cmn_pool_t *p, size_t size)
{
    uint32_t c = class_of(size);
    pool_hdr_t *h = NULL;
    size_t bytes;

    if (c != UINT32_MAX) {
        pool_class_t *pc = &p->cls[c];
        uv_mutex_lock(&pc->mu);
        h = pc->idle;
        if (h) {
            pc->idle = h->next;
            pc->n_idle--;
        }
        uv_mutex_unlock(&pc->mu);
        if (h)
            return h + 1;
        bytes = (size_t)1 << (c + POOL_MIN_SHIFT);
    } else {
        bytes = size;
    }
    if (bytes > SIZE_MAX - sizeof(pool_hdr_t))
        return NULL;
    h = malloc(sizeof(pool_hdr_t) + bytes);
    if (!h)
        return NULL;
    h->cls = c;
    h->pad = 0;
    return h + 1;
}

size_t cmn_pool_size(const void *buf)
{
    const pool_hdr_t *h = (const pool_hdr_t *)buf - 1;
    return h->cls == UINT32_MAX ? 0 : (size_t)1 << (h->cls + POOL_MIN_SHIFT);
}

void cmn_pool_put(cmn_pool_t *p, void *buf)
{
    pool_hdr_t *h;
    pool_class_t *pc;
    size_t bytes;

    if (!buf)
        return;
    h = (pool_hdr_t *)buf - 1;
    if (h->cls == UINT32_MAX) {
        free(h);
        return;
    }
    pc = &p->cls[h->cls];
    bytes = (size_t)1 << (h->cls + POOL_MIN_SHIFT);
    uv_mutex_lock(&pc->mu);
    if (pc->n_idle < POOL_MAX_IDLE_COUNT && (pc->n_idle + 1) * bytes <= p->max_idle_bytes) {
        h->next = pc->idle;
        pc->idle = h;
        pc->n_idle++;
        h = NULL;
    }
    uv_mutex_unlock(&pc->mu);
    free(h);
}
