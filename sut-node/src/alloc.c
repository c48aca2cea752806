/* The failing-allocator hook (alloc.h). */
#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_long budget = -1; /* allocations left before failing; < 0: unlimited */
static atomic_long failed;

static int allowed(void)
{
    long b = atomic_load_explicit(&budget, memory_order_relaxed);

    while (b >= 0) {
        if (b == 0) {
            atomic_fetch_add_explicit(&failed, 1, memory_order_relaxed);
            return 0;
        }
        if (atomic_compare_exchange_weak(&budget, &b, b - 1))
            return 1;
    }
    return 1;
}

void *sut__malloc(size_t size)
{
    return allowed() ? malloc(size) : NULL;
}

void *sut__calloc(size_t n, size_t size)
{
    return allowed() ? calloc(n, size) : NULL;
}

void *sut__realloc(void *p, size_t size)
{
    return allowed() ? realloc(p, size) : NULL;
}

long sut__alloc_fail_after(long n)
{
    atomic_store(&budget, n);
    return atomic_exchange(&failed, 0);
}
