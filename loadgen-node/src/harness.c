/* The harness's own block at the end of each performance summary: what loadgen-node and the QDL
 * cost the run (issue lateness, the time issue() took) and what happened to the SUT's nodes
 * (losses, re-dispatched samples), with a warning in the summary and the detail log when either
 * may have spoilt the result. The official summary has no such block; its checker ignores it. */
#include "run.h"

#include <inttypes.h>
#include <stdarg.h>
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

void lg__harness_report(lg_run_t *run, const lg_effective_settings_t *s)
{
    (void)s;
    out(run, "\n================================================\n"
             "Harness (loadgen-node; not part of the official summary)\n"
             "================================================\n");
    health_lines(run);
}
