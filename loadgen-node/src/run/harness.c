/* The harness's own block at the end of each performance summary: what loadgen-node and the QDL
 * cost the run (Server issue lateness against the schedule, the hand-off from the issue thread to
 * issue() returning, the QDL's queueing from its issue call to the wire, the spin the Server
 * wait took; p50/p99 from 1.6 %-wide histogram buckets, upper edges; why the issues at the tail
 * of the lateness were late, and what the issue thread lost to not running) and what happened to
 * the SUT's nodes
 * (losses, re-dispatched samples), with a warning in the summary and the detail log when either
 * may have spoilt the result. The official summary has no such block; its checker ignores it. */
#include "run.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void out(lg_run_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line to the summary and, with copy_summary_to_stdout, to stdout. */
static void out(lg_run_t *run, const char *fmt, ...)
{
    va_list ap;

    if (run->summary) {
        va_start(ap, fmt);
        vfprintf(run->summary, fmt, ap);
        va_end(ap);
    }
    if (run->ls->copy_summary_to_stdout) {
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
    }
}

static void health_lines(lg_run_t *run)
{
    lg_sut_health_t h;
    uint64_t lost, redisp, recon;

    if (!run->sut->health || run->sut->health(run->sut, &h) < 0)
        return;
    lost = h.nodes_lost - run->health0.nodes_lost;
    recon = h.reconnects - run->health0.reconnects;
    redisp = h.redispatched - run->health0.redispatched;
    out(run, "Nodes up at the end / total   : %" PRIu64 " / %" PRIu64 "\n", h.nodes - h.nodes_down,
        h.nodes);
    out(run, "Nodes lost during the series  : %" PRIu64 " (%" PRIu64 " reconnect attempts)\n", lost,
        recon);
    out(run, "Samples re-dispatched         : %" PRIu64 "\n", redisp);
    if (lost || recon || redisp || h.nodes_down) {
        LG_DWARN(&run->dlog, "warning_generic_message",
                 "SUT nodes: %" PRIu64 " lost during the series, %" PRIu64
                 " samples re-dispatched, %" PRIu64 " of %" PRIu64
                 " nodes down at its end (per-node counters: %snodes%s.json)",
                 lost, redisp, h.nodes_down, h.nodes, run->ls->prefix, run->ls->suffix);
        out(run,
            "WARNING: %" PRIu64 " nodes lost and %" PRIu64
            " re-dispatched samples during the series; %" PRIu64
            " nodes down at its end. See %snodes%s.json.\n",
            lost, redisp, h.nodes_down, run->ls->prefix, run->ls->suffix);
    }
}

/* The SUT's queueing before the wire (the QDL's issue call to the part's write), when the SUT
 * reports it (the in-process null SUT does not). */
static void qdl_queue_lines(lg_run_t *run)
{
    uint64_t q50, q99;

    if (lg__hist_count_from(&run->qq_hist, 0) == 0) {
        out(run, "QDL queueing                  : not reported by this SUT\n");
        return;
    }
    q50 = lg__hist_quantile(&run->qq_hist, 0.50);
    q99 = lg__hist_quantile(&run->qq_hist, 0.99);
    out(run, "QDL queueing p50 (ns)         : %" PRIu64 "\n", q50);
    out(run, "QDL queueing p99 (ns)         : %" PRIu64 "\n", q99);
    LG_DU64(&run->dlog, "harness_qdl_queue_p50_ns", q50);
    LG_DU64(&run->dlog, "harness_qdl_queue_p99_ns", q99);
}

/* The node's own times (arrival to backend start, backend start to result) and what remains of
 * each sample's time from the wire to its completion: the network and the framing both ways. */
static void node_lines(lg_run_t *run)
{
    static const struct {
        const char *label, *key;
        size_t off;
    } rows[] = {
        {"Node queue", "harness_node_queue", offsetof(lg_run_t, nq_hist)},
        {"Node backend", "harness_node_backend", offsetof(lg_run_t, nb_hist)},
        {"Wire and return", "harness_wire_return", offsetof(lg_run_t, wr_hist)},
    };
    char key[64];
    size_t i;

    if (lg__hist_count_from(&run->nb_hist, 0) == 0) {
        out(run, "Node queue and backend times  : not reported by this SUT\n");
        return;
    }
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        lg__hist_t *h = (lg__hist_t *)((char *)run + rows[i].off);
        uint64_t q50 = lg__hist_quantile(h, 0.50), q99 = lg__hist_quantile(h, 0.99);

        out(run, "%-16s p50 (ns)     : %" PRIu64 "\n", rows[i].label, q50);
        out(run, "%-16s p99 (ns)     : %" PRIu64 "\n", rows[i].label, q99);
        snprintf(key, sizeof(key), "%s_p50_ns", rows[i].key);
        LG_DU64(&run->dlog, key, q50);
        snprintf(key, sizeof(key), "%s_p99_ns", rows[i].key);
        LG_DU64(&run->dlog, key, q99);
    }
}

/* The share of the latency bound above which the harness's own lateness is called out. */
#define LATE_WARN_FRACTION 0.10

static const struct {
    const char *label, *why; /* in the summary; the warning's explanation */
} causes[LG__LATE_CAUSES] = {
    [LG__LATE_SPIN] = {"spinning", "while the issue thread was on its CPU"},
    [LG__LATE_OFFCPU] = {"off its CPU", "while the issue thread was off its CPU (the host, or "
                                        "another thread, ran instead)"},
    [LG__LATE_IO] = {"the SUT's I/O", "in turns of the SUT's I/O run by the issue thread"},
    [LG__LATE_SLEEP] = {"a sleep", "in sleeps that woke late"},
    [LG__LATE_WORK] = {"issuing", "while the issue thread was issuing earlier queries"},
};

/* Why the issues at the tail (the bucket of the p99 lateness |l99| and above) were late, and what
 * the issue thread lost to not running. Returns the cause of most of them. */
static lg__late_cause_t cause_lines(lg_run_t *run, uint64_t l99, double *share)
{
    const lg__pace_t *p = &run->pace;
    uint64_t n[LG__LATE_CAUSES], total = 0;
    lg__late_cause_t top = LG__LATE_SPIN;
    char line[256], key[64];
    size_t c, len = 0;

    for (c = 0; c < LG__LATE_CAUSES; c++) {
        n[c] = lg__hist_count_from(&run->late_cause_hist[c], l99);
        total += n[c];
        if (n[c] > n[top])
            top = (lg__late_cause_t)c;
    }
    line[0] = '\0';
    for (c = 0; c < LG__LATE_CAUSES && total > 0; c++) {
        double sh = (double)n[c] / (double)total;

        snprintf(key, sizeof(key), "harness_late_cause_%s_share",
                 lg__late_cause_name((lg__late_cause_t)c));
        LG_DF64(&run->dlog, key, sh);
        if (n[c] && len < sizeof(line))
            len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %.1f %%", len ? ", " : "",
                                    causes[c].label, 100.0 * sh);
    }
    out(run, "Issues at p99 lateness or more: %" PRIu64 " (%s)\n", total, line);
    out(run,
        "Issue thread off CPU, spinning: %.1f %% of its spin (%" PRIu64 " gaps of %u us or more, "
        "longest %" PRIu64 " ns)\n",
        p->spin_ns ? 100.0 * (double)p->offcpu_ns / (double)p->spin_ns : 0.0, p->offcpu_gaps,
        LG__OFFCPU_NS / 1000u, p->longest_gap_ns);
    LG_DF64(&run->dlog, "harness_offcpu_share",
            p->spin_ns ? (double)p->offcpu_ns / (double)p->spin_ns : 0.0);
    LG_DU64(&run->dlog, "harness_offcpu_longest_ns", p->longest_gap_ns);
    if (p->runq_wait_ns >= 0) {
        out(run,
            "Issue thread waiting for a CPU: %" PRIi64 " ns (runnable while other threads had "
            "them; the rest of its time off CPU was the host's)\n",
            p->runq_wait_ns);
        LG_DU64(&run->dlog, "harness_runq_wait_ns", p->runq_wait_ns);
    }
    *share = total ? (double)n[top] / (double)total : 0.0;
    return top;
}

/* Who wrote the series' batches of frames: the connections' write threads (--issue-write-thread)
 * or the thread running the SUT's loop (the issue thread while lent). */
static void write_lines(lg_run_t *run)
{
    lg_sut_health_t h;
    uint64_t all, thr;

    if (!run->sut->health || run->sut->health(run->sut, &h) < 0)
        return;
    all = h.batches_out - run->health0.batches_out;
    thr = h.batches_write_thread - run->health0.batches_write_thread;
    out(run, "Writes by write threads       : %" PRIu64 " of %" PRIu64 " batches (%s)\n", thr, all,
        thr ? "the rest by the thread running the loop"
            : "all by the thread running the loop: the issue thread while lent");
    LG_DU64(&run->dlog, "harness_batches_out", all);
    LG_DU64(&run->dlog, "harness_batches_write_thread", thr);
}

/* How long the spin's turns of the SUT's I/O took, by kind, beside the mean gap they share with
 * the issues: a turn longer than the time left to the next issue makes it late. */
static void turn_lines(lg_run_t *run)
{
    static const char *const label[LG__TURN_KINDS] = {
        [LG__TURN_WRITE] = "I/O turns writing (ns)        ",
        [LG__TURN_READ] = "I/O turns reading only (ns)   ",
    };
    static const char *const key[LG__TURN_KINDS] = {
        [LG__TURN_WRITE] = "harness_io_turn_write",
        [LG__TURN_READ] = "harness_io_turn_read",
    };
    lg__pace_t *p = &run->pace;
    char k[64];
    int i;

    for (i = 0; i < LG__TURN_KINDS; i++) {
        lg__hist_t *h = &p->turn_hist[i];
        uint64_t n = lg__hist_count_from(h, 0), p50 = lg__hist_quantile(h, 0.50),
                 p99 = lg__hist_quantile(h, 0.99);

        out(run, "%s: p50 %" PRIu64 ", p99 %" PRIu64 " (%" PRIu64 " turns%s)\n", label[i], p50, p99,
            n,
            i == LG__TURN_WRITE ? ": the first poll after an issue, its frame then reads"
                                : ": polls with no frame of the issue thread's to write");
        snprintf(k, sizeof(k), "%s_p50_ns", key[i]);
        LG_DU64(&run->dlog, k, p50);
        snprintf(k, sizeof(k), "%s_p99_ns", key[i]);
        LG_DU64(&run->dlog, k, p99);
        snprintf(k, sizeof(k), "%s_count", key[i]);
        LG_DU64(&run->dlog, k, n);
    }
    write_lines(run);
}

/* The host's floor (floor.c, probed at the series' start) beside the issue lateness |l99|. */
static void floor_lines(lg_run_t *run, uint64_t l99)
{
    const lg__floor_t *f = &run->pace.floor;

    if (!f->ok) {
        out(run, "Host floor p99 (ns)           : unknown (the probe could not run)\n");
        return;
    }
    out(run,
        "Host floor p99 (ns)           : %" PRIu64
        " (a spinner on each of %u of %u CPUs for %" PRIu64
        " ms at the start, the gaps they all shared: %.2f %% of the time%s)\n",
        f->p99_ns, f->cpus, f->cpus_allowed, f->probe_ns / 1000000u,
        100.0 * (double)f->lost_ns / (double)f->probe_ns,
        f->truncated ? ", gaps not all kept" : "");
    LG_DU64(&run->dlog, "harness_host_floor_p99_ns", f->p99_ns);
    if (f->p99_ns) {
        out(run, "Issue lateness p99 / floor    : %.2f\n", (double)l99 / (double)f->p99_ns);
        LG_DF64(&run->dlog, "harness_late_floor_ratio", (double)l99 / (double)f->p99_ns);
    } else
        out(run, "Issue lateness p99 / floor    : - (the host took no time from the probe)\n");
}

static void overhead_lines(lg_run_t *run, const lg_effective_settings_t *s)
{
    uint64_t c50 = lg__hist_quantile(&run->call_hist, 0.50);
    uint64_t c99 = lg__hist_quantile(&run->call_hist, 0.99);
    const lg__pace_t *p = &run->pace;

    if (s->scenario == LG_SERVER) {
        uint64_t l50, l99, end = cmn_now_ns(), wall = end > p->t_start ? end - p->t_start : 1;
        double bound = (double)s->target_latency_ns, top_share;
        lg__late_cause_t top;
        size_t c;

        lg__hist_reset(&run->late_hist);
        for (c = 0; c < LG__LATE_CAUSES; c++)
            lg__hist_merge(&run->late_hist, &run->late_cause_hist[c]);
        l50 = lg__hist_quantile(&run->late_hist, 0.50);
        l99 = lg__hist_quantile(&run->late_hist, 0.99);

        out(run, "Issue lateness p50 (ns)       : %" PRIu64 "\n", l50);
        out(run, "Issue lateness p99 (ns)       : %" PRIu64 "\n", l99);
        floor_lines(run, l99);
        out(run, "Sleep cost, calibrated (ns)   : %" PRIu64 "\n", p->sleep_cost_ns);
        out(run, "Spin guard, largest (ns)      : %" PRIu64 "\n",
            p->max_guard_ns > p->guard_ns ? p->max_guard_ns : p->guard_ns);
        out(run, "Issue thread spinning (%%)     : %.1f (budget %.0f)\n",
            100.0 * (double)p->spin_ns / (double)wall, 100.0 * p->budget);
        LG_DU64(&run->dlog, "harness_issue_late_p50_ns", l50);
        LG_DU64(&run->dlog, "harness_issue_late_p99_ns", l99);
        LG_DU64(&run->dlog, "harness_sleep_cost_ns", p->sleep_cost_ns);
        LG_DF64(&run->dlog, "harness_spin_share", (double)p->spin_ns / (double)wall);
        if (run->sut->poll_begin) {
            const char *why = "yes (between issues; the SUT's loop thread slept)";

            if (!p->io_lent)
                why = !run->ls->issue_thread_io ? "no (--issue-thread-io off)"
                      : run->cpu.pinned ? "no (--issue-cpu: the issue thread keeps its CPU alone)"
                                        : "no (the SUT could not lend its loop)";
            out(run, "SUT's I/O on the issue thread : %s\n", why);
            LG_DU64(&run->dlog, "harness_issue_thread_io", (uint64_t)p->io_lent);
            if (p->io_lent) {
                out(run,
                    "Quiet window, largest (ns)    : %" PRIu64 " (cap %" PRIu64
                    ": half the mean gap)\n",
                    p->max_quiet_ns, p->quiet_cap_ns);
                LG_DU64(&run->dlog, "harness_quiet_window_ns", p->max_quiet_ns);
                turn_lines(run);
            }
        }
        if (run->ls->issue_cpu >= 0)
            out(run, "Issue thread's own CPU        : %d (%s)\n", run->ls->issue_cpu,
                run->cpu.pinned ? "no other thread of the process on it" : "could not be pinned");
        if (p->contended_windows)
            out(run,
                "Spins preempted, slept instead: %" PRIu64 " times (a host with more "
                "runnable threads than cores)\n",
                p->contended_windows);
        if (p->budget_sleeps)
            out(run, "Sleeps forced by the budget   : %" PRIu64 "\n", p->budget_sleeps);
        top = cause_lines(run, l99, &top_share);
        if (bound > 0 && (double)l99 > LATE_WARN_FRACTION * bound) {
            LG_DWARN(&run->dlog, "warning_generic_message",
                     "The harness issued samples late: p99 issue lateness %" PRIu64
                     " ns is more than %.0f%% of the latency bound (%.0f ns); the SUT is charged "
                     "for it. %.0f%% of the issues that late were late %s",
                     l99, 100 * LATE_WARN_FRACTION, bound, 100 * top_share, causes[top].why);
            out(run,
                "WARNING: the harness, not the SUT, used %.1f%% of the latency bound: p99 issue "
                "lateness %" PRIu64 " ns against a bound of %.0f ns; %.0f%% of the issues that "
                "late were late %s.\n",
                100.0 * (double)l99 / bound, l99, bound, 100 * top_share, causes[top].why);
            cmn_log_warn("the harness issued late: p99 issue lateness %" PRIu64
                         " ns is %.1f%% of the %.0f ns latency bound; %.0f%% of those issues "
                         "were late %s (see the summary's harness block)",
                         l99, 100.0 * (double)l99 / bound, bound, 100 * top_share, causes[top].why);
        }
    }
    if ((s->scenario == LG_SINGLE_STREAM || s->scenario == LG_MULTI_STREAM) &&
        run->ls->wait_spin_ns) {
        if (!run->ls->wait_spin_adapt)
            out(run, "Query wait                    : spin %" PRIu64 " ns, then sleep (fixed)\n",
                run->ls->wait_spin_ns);
        else
            out(run,
                "Query wait                    : spun %" PRIu64 " of %" PRIu64
                " (median latency spinning %" PRIu64 " ns, sleeping %" PRIu64 " ns; %" PRIu64
                " switches)\n",
                run->ws_spins, run->ws_spins + run->ws_skipped, run->ws_med[LG__WS_SPIN],
                run->ws_med[LG__WS_SLEEP], run->ws_switches);
        LG_DU64(&run->dlog, "harness_query_wait_spins", run->ws_spins);
        LG_DU64(&run->dlog, "harness_query_wait_sleeps", run->ws_skipped);
    }
    out(run, "Issue hand-off p50 (ns)       : %" PRIu64 "\n", c50);
    out(run, "Issue hand-off p99 (ns)       : %" PRIu64 "\n", c99);
    LG_DU64(&run->dlog, "harness_issue_call_p50_ns", c50);
    LG_DU64(&run->dlog, "harness_issue_call_p99_ns", c99);
    qdl_queue_lines(run);
    node_lines(run);
}

void lg__harness_report(lg_run_t *run, const lg_effective_settings_t *s)
{
    out(run, "\n================================================\n"
             "Harness (loadgen-node; not part of the official summary)\n"
             "================================================\n");
    overhead_lines(run, s);
    health_lines(run);
}
