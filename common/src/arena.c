#include "cmn/arena.h"

#include <stdint.h>
#include <stdlib.h>

struct cmn_arena_chunk {
    cmn_arena_chunk_t *next;
    size_t cap;
    size_t used;
    _Alignas(16) unsigned char data[];
};

static void *arena_pb_alloc(void *ad, size_t n)
{
    return cmn_arena_alloc(ad, n);
}

static void arena_pb_free(void *ad, void *p)
{
    (void)ad;
    (void)p;
}

void cmn_arena_init(cmn_arena_t *a, size_t chunk_size)
{
    a->pb.alloc = arena_pb_alloc;
    a->pb.free = arena_pb_free;
    a->pb.allocator_data = a;
    a->chunks = NULL;
    a->chunk_size = chunk_size ? chunk_size : 16384;
}

void *cmn_arena_alloc(cmn_arena_t *a, size_t n)
{
    cmn_arena_chunk_t *c = a->chunks;
    size_t need = (n + 15u) & ~(size_t)15u;

    if (need < n)
        return NULL;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > a->chunk_size ? need : a->chunk_size;
        if (cap > SIZE_MAX - sizeof(*c))
            return NULL;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->chunks;
        a->chunks = c;
    }
    c->used += need;
    return c->data + c->used - need;
}

void cmn_arena_reset(cmn_arena_t *a)
{
    cmn_arena_chunk_t *c = a->chunks, *next;

    if (!c)
        return;
    /* Keep the oldest chunk (the one sized chunk_size); free the overflow. */
    while (c->next) {
        next = c->next;
        free(c);
        c = next;
    }
    c->used = 0;
    a->chunks = c;
}

void cmn_arena_free(cmn_arena_t *a)
{
    cmn_arena_chunk_t *c = a->chunks, *next;

    while (c) {
        next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
}

size_t cmn_arena_chunk_count(const cmn_arena_t *a)
{
    size_t n = 0;
    const cmn_arena_chunk_t *c;

    for (c = a->chunks; c; c = c->next)
        n++;
    return n;
}
