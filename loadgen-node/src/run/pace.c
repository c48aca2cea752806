/* How the Server issue thread waits for a query's scheduled time without depending on what a
 * sleep costs on this machine.
 *
 * On a virtual machine clock_nanosleep() may cost tens of microseconds of CPU and wake 80 us late
 * even for a deadline already passed. So the thread measures that cost at the start of each
 * series (lg__pace_init: 32 sleeps of 1 us, the 90th percentile of how late they woke) and keeps
 * measuring it on every sleep during the run (the 90th percentile of the last 64). It never
 * sleeps when less than that cost plus --spin-us remains before the deadline: it spins instead,
 * yielding the CPU on every turn, or with a CPU of its own (--issue-cpu) with a pause instruction.
 * A host with more runnable threads than cores preempts a spinner for whole time slices; when spins
 * are seen preempted the thread sleeps instead for a while (judge_contention). The CPU the spin
 * takes is counted (shown in the summary's harness block) and bounded by --spin-budget: past that
 * share of the run's wall time the thread sleeps even short gaps, is late, and the lateness is
 * measured and reported.
 *
 * When the SUT lends its event loop (lg_sut_t.poll_begin; the QDL does, --issue-thread-io), every
 * turn of the spin first runs the SUT's ready I/O (p->io->poll with no timeout), and a sleep is
 * the SUT's poll with a timeout, which its I/O may end early: one thread does the issuing and the
 * network work, where otherwise the SUT's loop thread is woken per query.
 *
 * The quiet window. A turn that finds work (a frame to write, responses to read and complete)
 * costs several microseconds, much of it the kernel's loopback work on this thread's CPU, and a
 * yield hands the CPU to whoever else is runnable for as long as it runs; started just before a
 * deadline, either one makes the issue late by its length. So in the last quiet_ns before an
 * issue the thread neither polls nor yields: it watches the clock. quiet_ns is the longest of the
 * last LG__PACE_RING turns, so a turn like the recent ones ends before the issue; it is capped at
 * half the schedule's mean gap between issues, so most gaps keep time for the I/O and the window
 * cannot grow with the work it defers. A frame queued by an issue then waits at most that window
 * for its write (its sent_ns is stamped at the write: the QDL queueing shows it), and never for
 * another query: frames are written whenever the thread polls (the QDL does not batch queries,
 * rules 6.2.1). At 100k QPS through one null node on two vCPUs, interleaved pairs of runs: p99
 * issue lateness 26.0 to 18.8 us (medians of 5), p50 2.65 us to 69 ns (bench/README.md, "The
 * quiet window"). A larger cap (three mean gaps) left the frames waiting: QDL queueing p99 0.85 to
 * 0.93 ms and every run INVALID at 100k, against 19-26 us and VALID (3 interleaved pairs).
 * Every turn's length is counted by kind for the report (harness.c): writing (the first poll after
 * an issue writes its frame, then reads) or reading only; on a loaded 2-vCPU VM at 100k the
 * writing turns took 18-19 us at the median against 0.7 us for the others.
 *
 * Why an issue was late. Each wait ends with the cause of its lateness (lg__late_cause_t): the
 * step that crossed the deadline was a gap between two clock reads of LG__OFFCPU_NS or more (the
 * thread did not run: the host stopped it, or another thread had the CPU), a turn of the SUT's
 * I/O, a sleep, or the clock read itself (on time); a wait entered with its deadline already past
 * carries on what was left of the last wait's lateness, in its proportions, and adds the issuing
 * since (due_at_once). issue.c counts the lateness per cause, harness.c reports the causes of the
 * tail; the thread's run-queue wait (/proc/thread-self/schedstat, read at the series' start and
 * end) tells the guest's share of the time off CPU from the host's. The calibration also probes
 * the host's floor under the lateness (floor.c: a quarter second of spinning on every CPU), which
 * the harness block prints beside the lateness with their ratio. */
#include "run.h"

#include "cmn/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Longest single sleep, so that lg_interrupt() is seen within it. */
#define SLICE_NS 50000000u
/* The guard never grows beyond this: a machine this slow to wake gets late issues, reported. */
#define GUARD_MAX_NS 2000000u
/* A gap this long between two clock reads of a spin means the thread lost its CPU. */
#define PREEMPT_NS 20000u
/* Contention is judged over windows of this long; a contended host keeps the thread sleeping
 * for CONTENDED_HOLD of them. */
#define WINDOW_NS 100000000u
#define CONTENDED_HOLD 10u
/* The budget is checked only after this much of the series, so the start can spin. */
#define BUDGET_AFTER_NS 100000000u

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

static uint32_t p90(const uint32_t *v, size_t n)
{
    uint32_t s[LG__PACE_RING];

    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u32);
    return s[n * 9 / 10];
}

/* Sleeps until the absolute CLOCK_MONOTONIC time |t|; returns how late it woke (ns). */
static uint64_t sleep_abs(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
    uint64_t after;

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    after = cmn_now_ns();
    return after > t ? after - t : 0;
}

static void watch(lg__pace_t *p, uint64_t late);

/* Sleeps until |t|: in the SUT's poll when the thread runs the SUT's I/O (I/O may end the sleep
 * early; only a sleep that reached its time counts as one), else in clock_nanosleep(). */
static void nap(lg__pace_t *p, uint64_t t)
{
    uint64_t now;

    if (!p->io) {
        watch(p, sleep_abs(t));
        return;
    }
    now = cmn_now_ns();
    if (now < t) {
        p->io->poll(p->io, t - now);
        p->unsent = 0;
    }
    now = cmn_now_ns();
    if (now >= t)
        watch(p, now - t);
}

static uint32_t clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The second of the three figures of /proc/thread-self/schedstat (time on a CPU, time waiting on
 * a run queue, time slices), kept by kernels built with CONFIG_SCHED_INFO; -1 without it. A host
 * that stops the whole virtual machine is not in it: the guest counts that time as running. */
static int64_t runq_wait(int fd)
{
    char b[96];
    unsigned long long run_ns, wait_ns;
    ssize_t n;

    if (fd < 0 || (n = pread(fd, b, sizeof(b) - 1, 0)) <= 0)
        return -1;
    b[n] = '\0';
    return sscanf(b, "%llu %llu", &run_ns, &wait_ns) == 2 ? (int64_t)wait_ns : -1;
}

void lg__pace_init(lg__pace_t *p, uint64_t min_spin_ns, unsigned budget_pct, uint64_t mean_gap_ns,
                   uint64_t floor_probe_ns)
{
    uint32_t v[32];
    size_t i;

    memset(p, 0, sizeof(*p));
    /* The host's floor first, on every CPU while none of the run's threads is busy yet. */
    if (floor_probe_ns && lg__floor_probe(&p->floor, floor_probe_ns) < 0)
        p->floor.ok = 0;
    /* /proc/thread-self is the calling thread's: the issue thread's, as long as it stays open. */
    p->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    p->runq_start = runq_wait(p->schedstat_fd);
    p->runq_wait_ns = -1;
    for (i = 0; i < 32; i++)
        v[i] = clamp32(sleep_abs(cmn_now_ns() + 1000u));
    p->sleep_cost_ns = p90(v, 32);
    p->min_spin_ns = min_spin_ns;
    p->base_guard_ns = p->sleep_cost_ns + min_spin_ns;
    if (p->base_guard_ns > GUARD_MAX_NS)
        p->base_guard_ns = GUARD_MAX_NS;
    p->guard_ns = p->base_guard_ns;
    /* 0 (settings not from lg_log_settings_init) counts as no limit, as 100 does. */
    p->budget = budget_pct == 0 || budget_pct >= 100 ? 1.0 : budget_pct / 100.0;
    p->quiet_cap_ns = mean_gap_ns / 2;
    p->t_start = cmn_now_ns();
}

/* A turn of the spin (a poll of the SUT and a yield) of |kind| (LG__TURN_*) took |ns|: counted
 * for the report, and every LG__PACE_RING turns the quiet window becomes the longest of them, at
 * most quiet_cap_ns. */
static void watch_turn(lg__pace_t *p, uint64_t ns, int kind)
{
    uint32_t longest = 0;
    size_t i;

    lg__hist_add(&p->turn_hist[kind], (int64_t)ns);
    p->turn_ring[p->turns % LG__PACE_RING] = clamp32(ns);
    p->turns++;
    if (p->turns % LG__PACE_RING)
        return;
    for (i = 0; i < LG__PACE_RING; i++)
        longest = p->turn_ring[i] > longest ? p->turn_ring[i] : longest;
    p->quiet_ns = longest < p->quiet_cap_ns ? longest : p->quiet_cap_ns;
    if (p->quiet_ns > p->max_quiet_ns)
        p->max_quiet_ns = p->quiet_ns;
}

/* A sleep woke |late| ns after its target: every 64 sleeps the guard follows the 90th
 * percentile of the last 64 (never below the calibrated one, never above GUARD_MAX_NS). */
static void watch(lg__pace_t *p, uint64_t late)
{
    uint64_t g;

    p->ring[p->sleeps % LG__PACE_RING] = clamp32(late);
    p->sleeps++;
    if (late > p->max_oversleep_ns)
        p->max_oversleep_ns = late;
    if (p->sleeps % LG__PACE_RING)
        return;
    g = p90(p->ring, LG__PACE_RING) + p->min_spin_ns;
    g = g < p->base_guard_ns ? p->base_guard_ns : g;
    p->guard_ns = g > GUARD_MAX_NS ? GUARD_MAX_NS : g;
    if (p->guard_ns > p->max_guard_ns)
        p->max_guard_ns = p->guard_ns;
}

/* Spinning pays only while the thread keeps its CPU. On a host with more runnable threads than
 * cores a spinner is preempted for whole time slices and falls behind, while a sleeper is woken
 * promptly; so when more than 2 % of the spin time of a 100 ms window was lost to preemption
 * (gaps between two clock reads), the thread sleeps up to --spin-us before each issue for the
 * next CONTENDED_HOLD windows, then tries spinning again. (The gap that crosses a deadline is not
 * counted here: it is the lateness itself, reported by its cause. Judging by the kernel's
 * run-queue wait instead, which a host's stopping the whole VM does not count, put the thread to
 * sleep in 5 of 6 runs at 100k QPS, these gaps in none of 6, and won no lateness: p99 medians of
 * the 6 interleaved pairs 98 and 77 us, bench/README.md "Why an issue is late".) */
static void judge_contention(lg__pace_t *p, uint64_t now, uint64_t spun, uint64_t lost)
{
    if (!p->win_start)
        p->win_start = now;
    p->win_spin_ns += spun;
    p->win_lost_ns += lost;
    if (now - p->win_start < WINDOW_NS)
        return;
    if (p->contended) {
        p->contended--;
    } else if (p->win_lost_ns * 50 > p->win_spin_ns && p->win_lost_ns > 0) {
        p->contended = CONTENDED_HOLD;
        p->contended_windows++;
    }
    p->win_start = now;
    p->win_spin_ns = p->win_lost_ns = 0;
}

void lg__pace_finish(lg__pace_t *p)
{
    int64_t w = runq_wait(p->schedstat_fd);

    p->runq_wait_ns = w >= 0 && p->runq_start >= 0 ? w - p->runq_start : -1;
    if (p->schedstat_fd >= 0)
        close(p->schedstat_fd);
    p->schedstat_fd = -1;
}

static int over_budget(const lg__pace_t *p, uint64_t now)
{
    uint64_t elapsed = now - p->t_start;

    return p->budget < 1.0 && elapsed > BUDGET_AFTER_NS &&
           (double)p->spin_ns > p->budget * (double)elapsed;
}

/* A gap of |g| ns between two clock reads of a spin. */
static uint64_t watch_gap(lg__pace_t *p, uint64_t g)
{
    if (g >= LG__OFFCPU_NS) {
        p->offcpu_ns += g;
        p->offcpu_gaps++;
        if (g > p->longest_gap_ns)
            p->longest_gap_ns = g;
    }
    return g > PREEMPT_NS ? g : 0;
}

const char *lg__late_cause_name(lg__late_cause_t c)
{
    static const char *const names[LG__LATE_CAUSES] = {
        [LG__LATE_SPIN] = "spin",   [LG__LATE_OFFCPU] = "offcpu", [LG__LATE_IO] = "io",
        [LG__LATE_SLEEP] = "sleep", [LG__LATE_WORK] = "work",
    };

    return (unsigned)c < LG__LATE_CAUSES ? names[c] : "none";
}

/* The wait for |deadline| ends at |now|, late (if at all) for |cause| alone. */
static int woke(lg__pace_t *p, uint64_t now, uint64_t deadline, lg__late_cause_t cause)
{
    memset(p->part, 0, sizeof(p->part));
    p->late_ns = now > deadline ? now - deadline : 0;
    p->part[cause] = (double)p->late_ns;
    p->cause = cause;
    p->woke = now;
    return 0;
}

/* The wait for |deadline| found it past at |now|, without sleeping: the thread was busy since it
 * last woke. The lateness is what remained of the last wait's past this deadline, in that wait's
 * proportions, plus the issuing since (max(woke, deadline) to now); the cause is the largest part.
 * So a backlog after a stall keeps the stall's cause while it drains, and a thread whose issuing
 * keeps it behind is late for the issuing however its backlog began. */
static int due_at_once(lg__pace_t *p, uint64_t now, uint64_t deadline)
{
    uint64_t inherited = p->woke > deadline ? p->woke - deadline : 0;
    double scale = p->late_ns ? (double)inherited / (double)p->late_ns : 0.0;
    size_t c, top = LG__LATE_WORK;

    for (c = 0; c < LG__LATE_CAUSES; c++)
        p->part[c] *= scale;
    p->part[LG__LATE_WORK] += (double)(now - (p->woke > deadline ? p->woke : deadline));
    for (c = 0; c < LG__LATE_CAUSES; c++)
        if (p->part[c] > p->part[top])
            top = c;
    p->late_ns = now - deadline;
    p->cause = (lg__late_cause_t)top;
    p->woke = now;
    return 0;
}

int lg__pace_wait(lg__pace_t *p, uint64_t deadline)
{
    int napped = 0;

    /* Called after each issue (the series' first wait too: then its first poll counts as a
     * writing turn with nothing to write, once). */
    p->unsent = 1;

    for (;;) {
        uint64_t now = cmn_now_ns(), t, prev, guard, lost = 0;
        int sig = lg__interrupted(), io_turn = 0;

        if (sig)
            return sig;
        if (now >= deadline)
            return napped ? woke(p, now, deadline, LG__LATE_SLEEP) : due_at_once(p, now, deadline);
        guard = p->contended ? p->min_spin_ns : p->guard_ns;
        if (deadline - now > guard) {
            t = deadline - guard;
            if (t - now > SLICE_NS)
                t = now + SLICE_NS;
            nap(p, t);
            napped = 1;
            continue;
        }
        if (over_budget(p, now)) {
            p->budget_sleeps++;
            nap(p, deadline);
            now = cmn_now_ns();
            return woke(p, now, deadline, now > deadline ? LG__LATE_SLEEP : LG__LATE_SPIN);
        }
        /* A polite spin: the thread yields on every turn, so the QDL's and the node's threads
         * sharing the cores run whenever they have work (sched_yield returns at once when nobody
         * else is runnable; it costs the issue time about one system call, 0.3 us on a VM). A
         * thread with a CPU of its own has nobody to yield to: a pause instruction instead.
         * Measured on two vCPUs (bench/README.md), against yielding only while more than 10 us
         * remained: at 350k QPS 5 of 7 runs VALID instead of 3 of 7 (p99 median 0.71 against
         * 1.07 ms), below 300k no difference beyond the host's noise. With the SUT's loop lent the
         * turn polls it first and still yields: polling without yielding left a node that shared
         * the CPU waiting for whole time slices (wire and return p99 about 1 ms at 200k QPS). */
        t = prev = now;
        while ((now = cmn_now_ns()) < deadline) {
            lost += watch_gap(p, now - prev);
            prev = now;
            io_turn = 0;
            if (p->io) {
                if (deadline - now <= p->quiet_ns) {
                    cpu_relax(); /* the quiet window: only the clock */
                    continue;
                }
                io_turn = p->unsent ? LG__TURN_WRITE + 1 : LG__TURN_READ + 1;
                p->io->poll(p->io, 0);
                p->unsent = 0;
                prev = cmn_now_ns(); /* the SUT's I/O is work done, not time lost */
            }
            if (!p->own_cpu)
                sched_yield();
            else
                cpu_relax();
            if (io_turn)
                watch_turn(p, cmn_now_ns() - now, io_turn - 1);
        }
        /* The last step crossed the deadline: a gap (the thread did not run), else a turn of
         * the SUT's I/O that ended past it, else the clock read that found it. */
        watch_gap(p, now - prev);
        p->spin_ns += now - t;
        judge_contention(p, now, now - t, lost);
        return woke(p, now, deadline,
                    now - prev >= LG__OFFCPU_NS   ? LG__LATE_OFFCPU
                    : io_turn && prev >= deadline ? LG__LATE_IO
                                                  : LG__LATE_SPIN);
    }
}
