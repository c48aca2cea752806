/* A bump allocator that also serves as a ProtobufCAllocator, so unpacking a message costs no
 * malloc in steady state and freeing it is a reset. Not thread-safe: one arena per thread. */
#ifndef CMN_ARENA_H
#define CMN_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef struct cmn_arena_chunk cmn_arena_chunk_t;

typedef struct {
    ProtobufCAllocator pb;     /* pass &arena.pb to protobuf-c; its free is a no-op */
    cmn_arena_chunk_t *chunks; /* newest first */
    size_t chunk_size;
} cmn_arena_t;

void cmn_arena_init(cmn_arena_t *a, size_t chunk_size);

/* Returns 16-byte aligned memory valid until the next reset, or NULL when out of memory. */
void *cmn_arena_alloc(cmn_arena_t *a, size_t n);

/* Forgets every allocation; keeps the first chunk for reuse. */
void cmn_arena_reset(cmn_arena_t *a);

void cmn_arena_free(cmn_arena_t *a);

/* Chunks currently held (for tests and memory accounting). */
size_t cmn_arena_chunk_count(const cmn_arena_t *a);

#endif
