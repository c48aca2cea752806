#include "cmn/clock.h"

#include <errno.h>
#include <sys/prctl.h>

uint64_t cmn_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cmn_timer_slack_min(void)
{
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0)
        return -errno;
    return 0;
}

void cmn_sleep_until_ns(uint64_t deadline_ns, uint64_t spin_ns)
{
    uint64_t now = cmn_now_ns();
    struct timespec ts;

    if (now >= deadline_ns)
        return;
    if (deadline_ns - now > spin_ns) {
        uint64_t wake = deadline_ns - spin_ns;
        ts.tv_sec = (time_t)(wake / 1000000000u);
        ts.tv_nsec = (long)(wake % 1000000000u);
        /* Absolute sleep: an interrupted sleep simply resumes toward the same instant. */
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
    while (cmn_now_ns() < deadline_ns) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}
