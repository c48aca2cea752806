/* The node's memory budget: one limit on the bytes peers can make the node hold (batch inputs
 * with their decoded samples, frames being received, queued results with their records), charged
 * where the memory is taken, at what the allocator really holds for it, and given back where it is
 * released. Peers may hold three quarters of it (the limit); the last quarter is the node's own
 * (code, read buffers, idle pooled buffers), so the whole process stays under the budget.
 *
 * Fairness: each peer (one handshaken connection) has an account (sut_peer_t) of what it makes the
 * node hold. Its share is limit / (peers + 1), at least min(limit / 4, 16 MiB): one share is kept
 * for a peer that arrives. A peer within its share is charged up to the limit; a peer over it (it
 * uses budget no one else needs) only while one share of the limit stays free, so what another
 * peer needs is refused to the greedy peer first. No peer holds more than half of the limit.
 * Thread-safe (atomic). */
#ifndef SUT_BUDGET_H
#define SUT_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    uint64_t budget;   /* the --memory-budget */
    uint64_t limit;    /* what peers may hold: three quarters of it */
    uint64_t peer_max; /* what one peer may hold: half of the limit */
    atomic_uint_fast64_t used;
    atomic_uint_fast64_t peak;
    atomic_uint_fast64_t refused; /* charges refused */
    atomic_uint peers;            /* accounts open */
} sut_budget_t;

/* One peer's account: the bytes the node holds on its behalf. */
typedef struct sut_peer {
    atomic_uint_fast64_t used;
} sut_peer_t;

void sut__budget_init(sut_budget_t *b, uint64_t budget);
/* Charges |bytes|; returns 0, or CMN_EOVERLOAD (nothing charged) when it would pass the limit. */
int sut__budget_take(sut_budget_t *b, uint64_t bytes);
void sut__budget_give(sut_budget_t *b, uint64_t bytes);
/* Takes |bytes| whatever the limit: for memory that replaces bytes the budget holds already (a
 * copy made just before its original is given back). */
void sut__budget_charge(sut_budget_t *b, uint64_t bytes);
uint64_t sut__budget_used(const sut_budget_t *b);
/* Takes |bytes| past the peers' limit, into the node's own quarter, while the whole budget holds
 * them: for the node's working memory of samples it admitted already (the sliding window's sums
 * when nothing else of the window runs, slide.h). Returns 0, or CMN_EOVERLOAD (nothing charged). */
int sut__budget_take_whole(sut_budget_t *b, uint64_t bytes);

/* A peer's account opens at its handshake and closes with its connection. */
void sut__budget_join(sut_budget_t *b);
void sut__budget_leave(sut_budget_t *b);
/* One peer's share of the limit now. */
uint64_t sut__budget_share(const sut_budget_t *b);
/* What the budget can still hold on |p|'s behalf under the rules above (NULL: the node's own). */
uint64_t sut__budget_room(sut_budget_t *b, const sut_peer_t *p);
/* sut__budget_take on |p|'s behalf (NULL: the node's own), under the fairness rules; charged to
 * its account too when |attribute| (else the rules look at what it holds already: memory shared
 * with other peers, such as a batch's input). */
int sut__budget_take_for(sut_budget_t *b, sut_peer_t *p, uint64_t bytes, int attribute);
/* Charges |p|'s account alone, for bytes the budget holds already (a sample decoded into a shared
 * batch): refused (CMN_EOVERLOAD) under the fairness rules unless |force|. */
int sut__budget_attribute(sut_budget_t *b, sut_peer_t *p, uint64_t bytes, int force);
void sut__budget_unattribute(sut_peer_t *p, uint64_t bytes);
uint64_t sut__budget_peer_used(const sut_peer_t *p);

/* The default budget: half of the memory this process may use (the cgroup limit when there is
 * one, else physical memory), at least 256 MiB and at most 8/3 GiB, at which one peer (half of
 * three quarters of it) holds 1 GiB at most. */
uint64_t sut__budget_default(void);

#endif
