/* Allocation for the QDL. One indirection lets the unit suite fail chosen allocations, so every
 * `goto fail_*` path and every out-of-memory branch runs in a test. */
#include "qdl_internal.h"

#include <stdlib.h>

int (*qdl__alloc_fail)(size_t n);

void *qdl__malloc(size_t n)
{
    if (qdl__alloc_fail && qdl__alloc_fail(n))
        return NULL;
    return malloc(n);
}

void *qdl__calloc(size_t n, size_t size)
{
    if (qdl__alloc_fail && qdl__alloc_fail(n * size))
        return NULL;
    return calloc(n, size);
}

void *qdl__realloc(void *p, size_t n)
{
    if (qdl__alloc_fail && qdl__alloc_fail(n))
        return NULL;
    return realloc(p, n);
}
