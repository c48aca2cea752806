/* Clocks and precise waiting.
 *
 * Latencies use CLOCK_MONOTONIC nanoseconds (the clock uv_hrtime() reads), never uv_now(), which is
 * milliseconds and cached per loop turn. All functions are thread-safe. */
#ifndef CMN_CLOCK_H
#define CMN_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t cmn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time in nanoseconds since the epoch (for log timestamps, never for intervals). */
uint64_t cmn_realtime_ns(void);

/* Sets this thread's timer slack to 1 ns, so a sleep ends when asked instead of up to 50 us late
 * (the Linux default slack). Returns 0 or a negated errno. */
int cmn_timer_slack_min(void);

/* Waits until the monotonic clock reaches |deadline_ns|: sleeps until |spin_ns| before it, then
 * spins. With timer slack at 1 ns and spin_ns around 20-50 us this ends within about a microsecond
 * of the deadline on an idle core. Returns at once when the deadline has passed. */
void cmn_sleep_until_ns(uint64_t deadline_ns, uint64_t spin_ns);

#endif
