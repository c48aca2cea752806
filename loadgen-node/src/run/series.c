/* One series (the official IssueQueries): its counters reset, the issue loop of its scenario,
 * FlushQueries, the wait for the last completion (bounded by drain_timeout_ms), the generator run
 * to its official end for the generated_* keys, the results collected, and power_begin/end. */
#include "run.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <string.h>
#include <time.h>

static void series_begin(lg_run_t *run, lg_scenario_t scenario, int accuracy)
{
    run->scenario = scenario;
    run->accuracy = accuracy;
    run->first_seq = run->seq;
    run->n_chunks = 0;
    atomic_store(&run->issued_hi, run->seq);
    atomic_store(&run->completed, 0);
    atomic_store(&run->failed, 0);
    atomic_store(&run->digest_bad, 0);
    atomic_store(&run->q_remaining, 0);
    atomic_store(&run->max_done_rel, 0);
    lg__run_errors_reset(run);
    for (size_t c = 0; c < LG__LATE_CAUSES; c++)
        lg__hist_reset(&run->late_cause_hist[c]);
    lg__hist_reset(&run->call_hist);
    lg__hist_reset(&run->qq_hist);
    lg__hist_reset(&run->nq_hist);
    lg__hist_reset(&run->nb_hist);
    lg__hist_reset(&run->wr_hist);
    memset(&run->pace, 0, sizeof(run->pace));
    memset(&run->health0, 0, sizeof(run->health0));
    if (run->sut->health)
        run->sut->health(run->sut, &run->health0);
    lg__hist_reset(&run->hist);
    lg__hist_reset(&run->ttft_hist);
    lg__hist_reset(&run->tpot_hist);
    atomic_store(&run->closed, 0);
}

/* No completion may touch the slots after this returns. */
static void series_close(lg_run_t *run)
{
    atomic_store(&run->closed, 1);
    while (atomic_load(&run->active) > 0)
        sched_yield();
    lg__run_errors_flush(run);
    lg__tok_clear(run);
}

static void progress_snap(void *arg, lg__progress_snap_t *s)
{
    lg_run_t *run = arg;
    uint64_t now = cmn_now_ns();
    double rate, left = -1;

    s->phase = run->phase;
    s->elapsed_ns = now - run->t0;
    s->issued = atomic_load(&run->issued_hi) - run->first_seq;
    s->completed = atomic_load(&run->completed);
    s->pct = run->prog_pct;
    s->p99_ns = lg__hist_quantile(&run->hist, run->prog_pct);
    s->target_ns = run->prog_target_ns;
    s->ttft_target_ns = run->prog_ttft_target_ns;
    s->tpot_target_ns = run->prog_tpot_target_ns;
    if (run->use_tokens) {
        s->ttft_ns = lg__hist_quantile(&run->ttft_hist, run->prog_pct);
        s->tpot_ns = lg__hist_quantile(&run->tpot_hist, run->prog_pct);
    }
    rate = s->elapsed_ns ? (double)s->completed * 1e9 / (double)s->elapsed_ns : 0;
    if (run->eta_samples && rate > 0)
        left =
            (double)(run->eta_samples > s->completed ? run->eta_samples - s->completed : 0) / rate;
    if (run->eta_min_ns)
        left = fmax(left, ((double)run->eta_min_ns - (double)s->elapsed_ns) / 1e9);
    s->eta_s = left < 0 && !run->eta_samples && !run->eta_min_ns ? -1 : fmax(left, 0);
}

static void power_time(char *buf, size_t len, uint64_t realtime_ns)
{
    time_t t = (time_t)(realtime_ns / 1000000000u);
    struct tm tm;
    char date[32];

    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%m-%d-%Y %H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03u", date, (unsigned)(realtime_ns % 1000000000u / 1000000u));
}

int lg__series_run(lg_run_t *run, const lg_effective_settings_t *s, int accuracy,
                   const uint32_t *loaded, size_t L, size_t end, lg__perf_t *pr, cmn_errbuf_t *eb)
{
    lg__gen_t g;
    lg__mt_t off_rng;
    lg__issue_state_t st = {0};
    double offset, prob;
    uint64_t expected, minimum, start_real, issued;
    int64_t end_rel;
    lg__progress_t *prog = NULL;
    char p0[64], p1[64];
    int rc, lost, interrupted;

    memset(pr, 0, sizeof(*pr));
    /* The accuracy-log sampling of performance mode (3.4). */
    lg__mt_seed(&off_rng, s->accuracy_log_rng_seed);
    offset = lg__canonical(&off_rng);
    prob = s->accuracy_log_probability;
    expected = (uint64_t)fmin(fmax(0, s->target_qps * (double)s->min_duration_ms / 1000), 1e19);
    minimum = s->min_query_count * s->samples_per_query;
    if (s->scenario != LG_OFFLINE)
        expected *= s->samples_per_query;
    else
        minimum = s->min_sample_count;
    if (expected < minimum)
        expected = minimum;
    if (s->accuracy_log_sampling_target > 0)
        prob = (double)s->accuracy_log_sampling_target / (double)expected;

    series_begin(run, s->scenario, accuracy);
    rc = lg__gen_init(&g, s, accuracy, loaded, L, end, &run->acc_rng, &run->seq, offset, prob, eb);
    if (rc < 0) {
        LG_DERR(&run->dlog, "error_invalid_test_settings", "%s", eb ? eb->msg : "invalid settings");
        return rc;
    }

    run->phase = accuracy ? "accuracy" : lg_scenario_name(s->scenario);
    run->eta_samples = accuracy ? L : s->scenario == LG_OFFLINE ? g.spq : 0;
    run->eta_min_ns = accuracy ? 0 : s->min_duration_ms * 1000000u;
    /* What the performance result is judged against (results.c: only Server has bounds). */
    run->prog_pct = s->scenario == LG_OFFLINE || s->target_latency_percentile <= 0
                        ? 0.99
                        : s->target_latency_percentile;
    run->prog_target_ns = run->prog_ttft_target_ns = run->prog_tpot_target_ns = 0;
    if (!accuracy && s->scenario == LG_SERVER && !s->use_token_latencies)
        run->prog_target_ns = (uint64_t)(s->target_latency_ns > 0 ? s->target_latency_ns : 0);
    if (!accuracy && s->scenario == LG_SERVER && s->use_token_latencies) {
        run->prog_ttft_target_ns =
            (uint64_t)(s->server_ttft_latency > 0 ? s->server_ttft_latency : 0);
        run->prog_tpot_target_ns =
            (uint64_t)(s->server_tpot_latency > 0 ? s->server_tpot_latency : 0);
    }
    /* Calibrating the Server wait takes a few milliseconds, and the floor probe of a performance
     * series a quarter second: before the clock starts. */
    if (s->scenario == LG_SERVER)
        lg__pace_init(&run->pace, run->ls->spin_ns, run->ls->spin_budget_pct,
                      s->target_qps > 0 ? (uint64_t)(1e9 / s->target_qps) : 0,
                      accuracy ? 0 : LG__FLOOR_PROBE_NS);
    start_real = cmn_realtime_ns();
    run->t0 = cmn_now_ns();
    if (run->progress_on)
        prog = lg__progress_start(stderr, progress_snap, run, run->progress_on == LG_PROGRESS_LINES,
                                  run->ls->progress_interval_ms);

    if (run->ls->issue_cpu >= 0 && (rc = lg__cpu_claim(&run->cpu, run->ls->issue_cpu)) < 0)
        cmn_log_warn("--issue-cpu %d: cannot give the issue thread that CPU alone (%s); it "
                     "issues unpinned",
                     run->ls->issue_cpu, cmn_strerror(rc));
    run->pace.own_cpu = run->cpu.on;
    if (s->scenario == LG_SERVER) {
        /* With a CPU of its own the issue thread stays alone on it (its punctuality is what
         * --issue-cpu buys); the SUT's I/O stays on the SUT's thread, on the other CPUs. */
        if (run->ls->issue_thread_io && !run->cpu.on && run->sut->poll_begin && run->sut->poll &&
            run->sut->poll_end) {
            if ((rc = run->sut->poll_begin(run->sut)) == 0) {
                run->pace.io = run->sut;
                run->pace.io_lent = 1;
            } else
                cmn_log_debug("the SUT's I/O stays on its own thread (%s)", cmn_strerror(rc));
        }
        lg__issue_server(run, s, &g, &st);
        lg__pace_finish(&run->pace);
        if (run->pace.io)
            run->sut->poll_end(run->sut);
        run->pace.io = NULL;
    } else
        lg__issue_sequential(run, s, &g, &st);
    lg__cpu_release(&run->cpu);
    if (run->sut->flush)
        run->sut->flush(run->sut);
    if (!accuracy && st.ran_out && s->scenario != LG_SERVER)
        LG_DERR(
            &run->dlog, "error_runtime",
            "Ending early: Ran out of generated queries to issue before the minimum query count "
            "and test duration were reached. Please update the relevant expected latency or "
            "target qps in the TestSettings so they are more accurate.");

    issued = atomic_load(&run->issued_hi) - run->first_seq;
    lost = lg__wait_total(run, issued, run->ls->drain_timeout_ms);
    end_rel = (int64_t)(cmn_now_ns() - run->t0);
    lg__progress_stop(prog);
    series_close(run);
    interrupted = st.interrupted ? st.interrupted : lg__interrupted();
    if (interrupted)
        LG_DERR(&run->dlog, "error_runtime",
                "Run interrupted by signal %d after %.3f s and %" PRIu64
                " issued samples; the results cover only that part",
                interrupted, (double)end_rel / 1e9, issued);
    if (lost)
        LG_DERR(&run->dlog, "error_runtime",
                "%" PRIu64 " samples were still outstanding %" PRIu64
                " ms after the last issue; counted as lost",
                issued - atomic_load(&run->completed),
                interrupted && (!run->ls->drain_timeout_ms ||
                                run->ls->drain_timeout_ms > LG_INTERRUPT_DRAIN_MS)
                    ? (uint64_t)LG_INTERRUPT_DRAIN_MS
                    : run->ls->drain_timeout_ms);

    /* The official loop runs to its end before issuing; run it now for the counters and the
     * generated_* values. */
    if (lg__gen_finish(&g, lg__interrupted) && !interrupted)
        interrupted = lg__interrupted();
    LG_DU64(&run->dlog, "generated_query_count", g.count);
    LG_DU64(&run->dlog, "generated_samples_per_query", g.spq);
    LG_DI64(&run->dlog, "generated_query_duration", g.ts);
    lg__gen_free(&g);

    rc = lg__collect(run, s, &st, end_rel, pr);
    pr->interrupted = interrupted;
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory collecting %" PRIu64 " latencies", issued);
    power_time(p0, sizeof(p0), start_real);
    power_time(p1, sizeof(p1), start_real + (uint64_t)atomic_load(&run->max_done_rel));
    LG_DSTR(&run->dlog, "power_begin", p0);
    LG_DSTR(&run->dlog, "power_end", p1);
    return 0;
}
