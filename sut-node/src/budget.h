/* The node's memory budget: one limit on the bytes a peer can make the node hold (batch inputs
 * with their decoded samples, frames being received, queued results), charged where the memory is
 * taken and given back where it is released. Peers may hold three quarters of it; the last
 * quarter is the node's own (code, read buffers, allocator overhead), so the whole process stays
 * under the budget. Thread-safe (atomic). */
#ifndef SUT_BUDGET_H
#define SUT_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    uint64_t budget; /* the --memory-budget */
    uint64_t limit;  /* what peers may hold: three quarters of it */
    atomic_uint_fast64_t used;
    atomic_uint_fast64_t peak;
    atomic_uint_fast64_t refused; /* charges refused */
} sut_budget_t;

void sut__budget_init(sut_budget_t *b, uint64_t budget);
/* Charges |bytes|; returns 0, or CMN_EOVERLOAD (nothing charged) when it would pass the limit. */
int sut__budget_take(sut_budget_t *b, uint64_t bytes);
void sut__budget_give(sut_budget_t *b, uint64_t bytes);
/* Takes |bytes| whatever the limit: for memory that replaces bytes the budget holds already (a
 * copy made just before its original is given back). */
void sut__budget_charge(sut_budget_t *b, uint64_t bytes);
uint64_t sut__budget_used(const sut_budget_t *b);
/* The default budget: half of the memory this process may use (the cgroup limit when there is
 * one, else physical memory), at least 256 MiB. */
uint64_t sut__budget_default(void);

#endif
