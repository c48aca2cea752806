/* The issue thread waiting for completions (a SingleStream/MultiStream query, or the end of a
 * series), and the completion path waking it. A completion takes the mutex only when the issue
 * thread sleeps and what it waits for has come. */
#include "run.h"

#include "cmn/clock.h"

#include <stdlib.h>
#include <string.h>
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

/* The adaptive query wait. A query's latency ends with the completion's time stamp, taken on the
 * thread that completes it, so the issue thread's way of waiting changes it only through the
 * machine: on an idle VM a spinning thread keeps its vCPU from halting, and the completion comes
 * sooner (64 B p50 on loopback 17.8 us with a 150 us spin, 47.8 us with 20 us); on a host with
 * more runnable threads than cores the spinner takes the CPU that the threads answering need (the
 * QDL's loop, the kernel's network work, a sut-node on the same host), and the latency grows by
 * what it steals (SingleStream p50 360-450 us against 214-236 us for the official LoadGen beside
 * two busy loops; 110-196 us against 43-47 us for 150 KB samples with other builds running).
 * Which way wins depends on the host, and changes during a run, so the wait measures it: queries
 * wait in windows of LG__WS_WINDOW one way; the median latency of each window is kept for its
 * way; the next window waits the way whose last median was lower, except every WS_EXPLORE-th
 * window, which tries the other way again. A fixed spin (--wait-spin-adapt off) spins always. */
#define WS_EXPLORE 8u

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The latency of the query whose samples are |first|..|first + n - 1| (the longest), or 0 when
 * one is not known (failed, or not in a chunk). */
static uint64_t query_latency(lg_run_t *run, uint64_t first, uint64_t n)
{
    uint64_t seq, worst = 0;

    for (seq = first; seq < first + n; seq++) {
        lg__chunk_t *c =
            atomic_load_explicit(&run->dir[seq >> LG__CHUNK_BITS], memory_order_acquire);
        int64_t v;

        if (!c)
            return 0;
        v = atomic_load_explicit(&c->lat[seq & LG__CHUNK_MASK], memory_order_acquire);
        if (v <= 0)
            return 0;
        if ((uint64_t)v > worst)
            worst = (uint64_t)v;
    }
    return worst;
}

/* Counts the query just waited for in the current window; at its end, picks the next way. */
static void judge_wait(lg_run_t *run, uint64_t lat)
{
    uint64_t sorted[LG__WS_WINDOW];
    int best, next;

    if (lat)
        run->ws_lat[run->ws_n++] = lat;
    if (run->ws_n < LG__WS_WINDOW)
        return;
    memcpy(sorted, run->ws_lat, sizeof(sorted));
    qsort(sorted, LG__WS_WINDOW, sizeof(sorted[0]), cmp_u64);
    run->ws_med[run->ws_mode] = sorted[LG__WS_WINDOW / 2];
    run->ws_n = 0;
    run->ws_windows++;
    /* A way never measured is tried first; then the lower median, but every WS_EXPLORE-th
     * window the other way (the host may have changed). */
    if (!run->ws_med[LG__WS_SLEEP] || !run->ws_med[LG__WS_SPIN])
        best = run->ws_med[LG__WS_SLEEP] ? LG__WS_SPIN : LG__WS_SLEEP;
    else
        best = run->ws_med[LG__WS_SPIN] < run->ws_med[LG__WS_SLEEP] ? LG__WS_SPIN : LG__WS_SLEEP;
    next = run->ws_windows % WS_EXPLORE == 0 ? !best : best;
    if (next != run->ws_mode)
        run->ws_switches++;
    run->ws_mode = next;
}

/* Waits until the current SingleStream/MultiStream query (samples |first|..|first + n - 1|) has
 * completed: a spin of at most wait_spin_ns when this window spins (a fast SUT answers within
 * it), then a condition variable. Returns early when the run is interrupted. */
void lg__wait_query(lg_run_t *run, uint64_t first, uint64_t n)
{
    uint64_t spin = run->ls->wait_spin_ns;
    int adapt = run->ls->wait_spin_adapt && spin;

    if (adapt && run->ws_mode == LG__WS_SLEEP)
        spin = 0;
    if (spin) {
        uint64_t until = cmn_now_ns() + spin;

        run->ws_spins++;
        while (atomic_load(&run->q_remaining) > 0) {
            if (cmn_now_ns() > until)
                break;
        }
    } else {
        run->ws_skipped++;
    }
    if (atomic_load(&run->q_remaining) > 0) {
        pthread_mutex_lock(&run->mu);
        atomic_store(&run->wait_kind, LG__WAIT_QUERY);
        atomic_store(&run->sleeping, 1);
        while (atomic_load(&run->q_remaining) > 0 && !lg__interrupted())
            sleep_slice(run, 0);
        atomic_store(&run->sleeping, 0);
        atomic_store(&run->wait_kind, LG__WAIT_NONE);
        pthread_mutex_unlock(&run->mu);
    }
    if (adapt && atomic_load(&run->q_remaining) <= 0)
        judge_wait(run, query_latency(run, first, n));
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
