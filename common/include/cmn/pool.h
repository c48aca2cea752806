/* A thread-safe buffer pool with power-of-two size classes (64 B to 1 GiB). Buffers returned to
 * the pool are reused by the next request of the same class, so the data path recycles its
 * memory instead of calling malloc per sample; each class keeps at most a bounded number of idle
 * buffers and a bounded number of idle bytes, beyond which buffers go back to the system.
 *
 * Pooled buffers hold no data between uses that anyone reads: the rules forbid caching query data
 * or results, and a recycled buffer is always overwritten before use. */
#ifndef CMN_POOL_H
#define CMN_POOL_H

#include <stddef.h>

typedef struct cmn_pool cmn_pool_t;

/* |max_idle_bytes| caps the memory kept idle per size class. */
cmn_pool_t *cmn_pool_new(size_t max_idle_bytes);
void cmn_pool_free(cmn_pool_t *p);

/* A buffer of at least |size| bytes (16-byte aligned), or NULL. Thread-safe. */
void *cmn_pool_get(cmn_pool_t *p, size_t size);

/* Returns a buffer from cmn_pool_get (NULL is ignored). Thread-safe. */
void cmn_pool_put(cmn_pool_t *p, void *buf);

/* Frees every idle buffer (memory back to the system when the load that needed them is gone).
 * Thread-safe. */
void cmn_pool_trim(cmn_pool_t *p);

/* The usable size of a pooled buffer. */
size_t cmn_pool_size(const void *buf);

#endif
