/* The issue thread waiting for completions (a SingleStream/MultiStream query, or the end of a
 * series), and the completion path waking it. A completion takes the mutex only when the issue
 * thread sleeps and what it waits for has come. */
#include "run.h"

#include "cmn/clock.h"

#include <time.h>

void lg__wait_wake(lg_run_t *run, int64_t q_left, uint64_t done)
{
    int kind;

    if (!atomic_load(&run->sleeping))
        return;
    kind = atomic_load(&run->wait_kind);
    if ((kind == LG__WAIT_QUERY && q_left <= 0) ||
        (kind == LG__WAIT_TOTAL && done >= atomic_load(&run->wait_target))) {
        pthread_mutex_lock(&run->mu);
        pthread_cond_broadcast(&run->cv);
        pthread_mutex_unlock(&run->mu);
    }
}

/* How often a sleeping wait looks at lg_interrupt(). */
#define POLL_NS 50000000u

/* Sleeps on the condition variable (CLOCK_MONOTONIC) until woken, |deadline| (0: none) or the next
 * poll. Called with run->mu held. */
static void sleep_slice(lg_run_t *run, uint64_t deadline)
{
    uint64_t t = cmn_now_ns() + POLL_NS;
    struct timespec ts;

    if (deadline && deadline < t)
        t = deadline;
    ts.tv_sec = (time_t)(t / 1000000000u);
    ts.tv_nsec = (long)(t % 1000000000u);
    pthread_cond_timedwait(&run->cv, &run->mu, &ts);
}

/* Waits until the current SingleStream/MultiStream query has completed: a spin of
 * wait_spin_ns (a fast SUT answers within it), then a condition variable. Returns early when the
 * run is interrupted. */
void lg__wait_query(lg_run_t *run)
{
    uint64_t until = cmn_now_ns() + run->ls->wait_spin_ns;

    while (atomic_load(&run->q_remaining) > 0) {
        if (cmn_now_ns() > until)
            break;
    }
    if (atomic_load(&run->q_remaining) <= 0)
        return;
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->wait_kind, LG__WAIT_QUERY);
    atomic_store(&run->sleeping, 1);
    while (atomic_load(&run->q_remaining) > 0 && !lg__interrupted())
        sleep_slice(run, 0);
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, LG__WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
}

/* Waits for |target| completions, at most |timeout_ms| (0: for ever) and at most
 * LG_INTERRUPT_DRAIN_MS once the run is interrupted. Returns 0 if they all came, 1 if not. */
int lg__wait_total(lg_run_t *run, uint64_t target, uint64_t timeout_ms)
{
    uint64_t now0 = cmn_now_ns();
    /* Saturating: a timeout too long for ns arithmetic waits for ever, not 0.1 s (issue 34). */
    uint64_t deadline = !timeout_ms ? 0
                        : timeout_ms > (UINT64_MAX - now0) / 1000000u
                            ? UINT64_MAX
                            : now0 + timeout_ms * 1000000u;
    int timed_out = 0, draining = 0;

    if (atomic_load(&run->completed) >= target)
        return 0;
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->wait_target, target);
    atomic_store(&run->wait_kind, LG__WAIT_TOTAL);
    atomic_store(&run->sleeping, 1);
    while (atomic_load(&run->completed) < target) {
        uint64_t now = cmn_now_ns();

        if (!draining && lg__interrupted()) {
            uint64_t d = now + (uint64_t)LG_INTERRUPT_DRAIN_MS * 1000000u;

            draining = 1;
            if (!deadline || d < deadline)
                deadline = d;
        }
        if (deadline && now >= deadline) {
            timed_out = 1;
            break;
        }
        sleep_slice(run, deadline);
    }
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, LG__WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
    return timed_out;
}
