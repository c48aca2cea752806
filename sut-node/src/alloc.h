/* The daemon's own heap allocations, with a failing-allocator hook for tests: every allocation the
 * daemon makes on a peer's behalf goes through these, so a test can make the Nth one fail and
 * drive each `goto fail_*` path. Thread-safe (the countdown is atomic). */
#ifndef SUT_ALLOC_H
#define SUT_ALLOC_H

#include <stddef.h>

void *sut__malloc(size_t size);
void *sut__calloc(size_t n, size_t size);
void *sut__realloc(void *p, size_t size);

/* Tests only: the next |n| allocations succeed and every one after fails (n < 0: none fails,
 * the default). Returns how many allocations failed since the last call. */
long sut__alloc_fail_after(long n);

#endif
