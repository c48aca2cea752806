/* The node's memory budget (budget.h). */
#include "budget.h"

#include "cmn/err.h"

#include <uv.h>

/* A share is never smaller than this (nor than a quarter of the limit, if that is smaller). */
#define SHARE_FLOOR (16ull << 20)

void sut__budget_init(sut_budget_t *b, uint64_t budget)
{
    b->budget = budget;
    b->limit = budget / 4 * 3;
    b->peer_max = b->limit / 2;
    atomic_init(&b->used, 0);
    atomic_init(&b->peak, 0);
    atomic_init(&b->refused, 0);
    atomic_init(&b->peers, 0);
}

/* Raises the high-water mark to |used| if it is higher. */
static void raise_peak(sut_budget_t *b, uint_fast64_t used)
{
    uint_fast64_t peak = atomic_load_explicit(&b->peak, memory_order_relaxed);

    while (used > peak && !atomic_compare_exchange_weak(&b->peak, &peak, used))
        ;
}

uint64_t sut__budget_share(const sut_budget_t *b)
{
    unsigned peers = atomic_load_explicit(&b->peers, memory_order_relaxed);
    uint64_t share = b->limit / ((uint64_t)peers + 1), floor = b->limit / 4;

    if (floor > SHARE_FLOOR)
        floor = SHARE_FLOOR;
    return share > floor ? share : floor;
}

/* The most the whole budget may hold once |p| holds |p_used|; 0 when |p| may hold no more. */
static uint64_t cap_for(const sut_budget_t *b, const sut_peer_t *p, uint64_t p_used)
{
    uint64_t share;

    if (!p)
        return b->limit;
    if (p_used > b->peer_max)
        return 0;
    share = sut__budget_share(b);
    return p_used <= share ? b->limit : b->limit - share;
}

static int refuse(sut_budget_t *b)
{
    atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
    return CMN_EOVERLOAD;
}

int sut__budget_take_for(sut_budget_t *b, sut_peer_t *p, uint64_t bytes, int attribute)
{
    uint64_t mine = p ? sut__budget_peer_used(p) : 0;
    /* Memory on the peer's account counts towards its share; memory it only asks for (a shared
     * batch's input) is judged by where the peer stands. */
    uint64_t cap = !attribute                  ? cap_for(b, p, mine)
                   : bytes > UINT64_MAX - mine ? 0
                                               : cap_for(b, p, mine + bytes);
    uint_fast64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);

    do {
        if (bytes > cap || used > cap - bytes)
            return refuse(b);
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + bytes));
    raise_peak(b, used + bytes);
    if (p && attribute)
        atomic_fetch_add_explicit(&p->used, bytes, memory_order_relaxed);
    return 0;
}

int sut__budget_take(sut_budget_t *b, uint64_t bytes)
{
    return sut__budget_take_for(b, NULL, bytes, 0);
}

uint64_t sut__budget_room(sut_budget_t *b, const sut_peer_t *p)
{
    uint64_t cap = cap_for(b, p, p ? sut__budget_peer_used(p) : 0), used = sut__budget_used(b);

    return used < cap ? cap - used : 0;
}

int sut__budget_attribute(sut_budget_t *b, sut_peer_t *p, uint64_t bytes, int force)
{
    uint64_t mine = sut__budget_peer_used(p);

    if (!force && (bytes > UINT64_MAX - mine || sut__budget_used(b) > cap_for(b, p, mine + bytes)))
        return refuse(b);
    atomic_fetch_add_explicit(&p->used, bytes, memory_order_relaxed);
    return 0;
}

void sut__budget_unattribute(sut_peer_t *p, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&p->used, bytes, memory_order_relaxed);
}

uint64_t sut__budget_peer_used(const sut_peer_t *p)
{
    return atomic_load_explicit(&p->used, memory_order_relaxed);
}

void sut__budget_join(sut_budget_t *b)
{
    atomic_fetch_add_explicit(&b->peers, 1, memory_order_relaxed);
}

void sut__budget_leave(sut_budget_t *b)
{
    atomic_fetch_sub_explicit(&b->peers, 1, memory_order_relaxed);
}

void sut__budget_charge(sut_budget_t *b, uint64_t bytes)
{
    raise_peak(b, atomic_fetch_add_explicit(&b->used, bytes, memory_order_relaxed) + bytes);
}

int sut__budget_take_whole(sut_budget_t *b, uint64_t bytes)
{
    uint_fast64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);

    do {
        if (bytes > b->budget || used > b->budget - bytes)
            return refuse(b);
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + bytes));
    raise_peak(b, used + bytes);
    return 0;
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
    uint64_t half = avail / 2, most = (8ull << 30) / 3;

    return half < (256ull << 20) ? 256ull << 20 : half > most ? most : half;
}
