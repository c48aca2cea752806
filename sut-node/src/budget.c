/* The node's memory budget (budget.h). */
#include "budget.h"

#include "cmn/err.h"

#include <uv.h>

void sut__budget_init(sut_budget_t *b, uint64_t budget)
{
    b->budget = budget;
    b->limit = budget / 4 * 3;
    atomic_init(&b->used, 0);
    atomic_init(&b->peak, 0);
    atomic_init(&b->refused, 0);
}

/* Raises the high-water mark to |used| if it is higher. */
static void raise_peak(sut_budget_t *b, uint_fast64_t used)
{
    uint_fast64_t peak = atomic_load_explicit(&b->peak, memory_order_relaxed);

    while (used > peak && !atomic_compare_exchange_weak(&b->peak, &peak, used))
        ;
}

int sut__budget_take(sut_budget_t *b, uint64_t bytes)
{
    uint_fast64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);

    do {
        if (bytes > b->limit || used > b->limit - bytes) {
            atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
            return CMN_EOVERLOAD;
        }
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + bytes));
    raise_peak(b, used + bytes);
    return 0;
}

void sut__budget_charge(sut_budget_t *b, uint64_t bytes)
{
    raise_peak(b, atomic_fetch_add_explicit(&b->used, bytes, memory_order_relaxed) + bytes);
}

void sut__budget_give(sut_budget_t *b, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
}

uint64_t sut__budget_used(const sut_budget_t *b)
{
    return atomic_load_explicit(&b->used, memory_order_relaxed);
}

uint64_t sut__budget_default(void)
{
    uint64_t total = uv_get_total_memory(), cg = uv_get_constrained_memory();
    uint64_t avail = cg && cg < total ? cg : total;
    uint64_t half = avail / 2;

    return half < (256ull << 20) ? 256ull << 20 : half;
}
