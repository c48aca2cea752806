/* The issue thread waiting for completions (a SingleStream/MultiStream query, or the end of a
 * series), and the completion path waking it. A completion takes the mutex only when the issue
 * thread sleeps and what it waits for has come. */
#include "run.h"

#include "cmn/clock.h"

#include <errno.h>
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

/* Waits until the current SingleStream/MultiStream query has completed: a spin of
 * wait_spin_ns (a fast SUT answers within it), then a condition variable. */
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
    while (atomic_load(&run->q_remaining) > 0)
        pthread_cond_wait(&run->cv, &run->mu);
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, LG__WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
}

/* Waits for |target| completions; with a timeout, returns 0 if they all came, 1 if not. */
int lg__wait_total(lg_run_t *run, uint64_t target, uint64_t timeout_ms)
{
    struct timespec ts;
    int timed_out = 0;

    if (atomic_load(&run->completed) >= target)
        return 0;
    if (timeout_ms) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(timeout_ms / 1000);
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->wait_target, target);
    atomic_store(&run->wait_kind, LG__WAIT_TOTAL);
    atomic_store(&run->sleeping, 1);
    while (atomic_load(&run->completed) < target) {
        if (!timeout_ms) {
            pthread_cond_wait(&run->cv, &run->mu);
        } else if (pthread_cond_timedwait(&run->cv, &run->mu, &ts) == ETIMEDOUT) {
            timed_out = atomic_load(&run->completed) < target;
            break;
        }
    }
    atomic_store(&run->sleeping, 0);
    atomic_store(&run->wait_kind, LG__WAIT_NONE);
    pthread_mutex_unlock(&run->mu);
    return timed_out;
}
