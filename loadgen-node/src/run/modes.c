/* The test modes: accuracy (every loadable set in turn), performance (the first set) and
 * FindPeakPerformance (Server: widen the rate until a run fails, then bisect), the loadable sets
 * they load (GenerateLoadableSets), and each performance report. */
#include "run.h"

#include "cmn/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *v;
    size_t n, end;
} set_t;

/* GenerateLoadableSets: a shuffle of [0, min(count, total)) cut into sets of
 * performance_sample_count, each padded in MultiStream with its first spq - 1 samples. */
static int loadable_sets(lg_run_t *run, const lg_effective_settings_t *s, uint64_t count,
                         set_t **out, size_t *n_out)
{
    size_t total = lg_qsl_total_count(run->qsl), n = (size_t)(count < total ? count : total);
    size_t set_size = (size_t)s->performance_sample_count, pad, nsets, i, j;
    uint32_t *order;
    set_t *sets;
    int rc;

    pad = s->scenario == LG_MULTI_STREAM && s->samples_per_query > 0
              ? (size_t)s->samples_per_query - 1
              : 0;
    rc = lg__loadable_order(s->qsl_rng_seed, n, &order);
    if (rc < 0)
        return rc;
    if (set_size == 0)
        set_size = n ? n : 1;
    nsets = n ? (n + set_size - 1) / set_size : 0;
    sets = calloc(nsets ? nsets : 1, sizeof(*sets));
    if (!sets) {
        free(order);
        return -ENOMEM;
    }
    for (i = 0; i < nsets; i++) {
        size_t len = n - i * set_size < set_size ? n - i * set_size : set_size;

        sets[i].v = malloc((len + pad) * sizeof(uint32_t));
        if (!sets[i].v) {
            while (i-- > 0)
                free(sets[i].v);
            free(sets);
            free(order);
            return -ENOMEM;
        }
        memcpy(sets[i].v, order + i * set_size, len * sizeof(uint32_t));
        /* Padding copies the set's first elements, so a query may start anywhere in it. */
        for (j = 0; j < pad; j++)
            sets[i].v[len + j] = sets[i].v[j % len];
        sets[i].n = len + pad;
        sets[i].end = len;
    }
    free(order);
    *out = sets;
    *n_out = nsets;
    return 0;
}

static void free_sets(set_t *sets, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(sets[i].v);
    free(sets);
}

/* Each loaded sample's bytes go to the SUT's mem_register (once per index in the set, duplicates
 * included, so unload_set undoes exactly what this did). */
static int load_set(lg_run_t *run, const set_t *set, cmn_errbuf_t *eb)
{
    lg_qsl_sample_t qs;
    size_t i;
    int rc;

    lg__dlog_u32_list(&run->dlog, "loaded_qsl_set", set->v, set->n, LG__FILE, __LINE__);
    rc = lg_qsl_load(run->qsl, set->v, set->n, eb);
    if (rc < 0)
        LG_DERR(&run->dlog, "error_runtime", "LoadSamplesToRam failed: %s", eb ? eb->msg : "");
    for (i = 0; rc == 0 && run->sut->mem_register && i < set->n; i++)
        if (lg_qsl_get(run->qsl, set->v[i], &qs) == 0)
            (void)run->sut->mem_register(run->sut, (void *)qs.data, qs.size);
    return rc;
}

static void unload_set(lg_run_t *run, const set_t *set)
{
    lg_qsl_sample_t qs;
    size_t i;

    for (i = 0; run->sut->mem_unregister && i < set->n; i++)
        if (lg_qsl_get(run->qsl, set->v[i], &qs) == 0)
            run->sut->mem_unregister(run->sut, (void *)qs.data);
    lg_qsl_unload(run->qsl, set->v, set->n);
}

static void refresh_name(lg_run_t *run)
{
    char name[sizeof(run->sut_name)], err[256];
    uint64_t d;

    /* As officially, each PerformanceSummary asks the SUT for its name again. */
    if (run->sut->name(run->sut, name, sizeof(name), &d, err, sizeof(err)) == 0)
        snprintf(run->sut_name, sizeof(run->sut_name), "%s", name);
}

static void report(lg_run_t *run, const lg_effective_settings_t *s, lg__perf_t *pr,
                   lg_result_t *res)
{
    refresh_name(run);
    lg__perf_report(run->sut_name, s, pr, &run->dlog, run->summary, run->ls->copy_summary_to_stdout,
                    res);
    lg__harness_report(run, s);
    LG_DU64(&run->dlog, "num_errors", lg__run_error_total(run));
}

static void add_sample_counts(lg_result_t *res, const lg__perf_t *pr)
{
    res->failed_samples += pr->failed;
    res->lost_samples += pr->lost;
    res->digest_mismatches += pr->digest_bad;
    res->samples_issued += pr->n;
    if (pr->interrupted)
        res->interrupted = pr->interrupted;
}

int lg__mode_accuracy(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                      cmn_errbuf_t *eb)
{
    set_t *sets;
    size_t nsets, i;
    int rc;

    LG_DMSG(&run->dlog, "Starting accuracy mode");
    rc = loadable_sets(run, s, s->accuracy_sample_count, &sets, &nsets);
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory for the loadable sets");
    for (i = 0; i < nsets && rc == 0 && !res->interrupted; i++) {
        lg__perf_t pr;

        rc = load_set(run, &sets[i], eb);
        if (rc < 0)
            break;
        rc = lg__series_run(run, s, 1, sets[i].v, sets[i].n, sets[i].end, &pr, eb);
        if (rc == 0)
            add_sample_counts(res, &pr);
        lg__perf_free(&pr);
        unload_set(run, &sets[i]);
    }
    free_sets(sets, nsets);
    res->accuracy_ran = rc == 0;
    return rc;
}

static void check_clocks(lg_run_t *run, uint64_t pc_ns, uint64_t sc_ns)
{
    double ratio;

    /* Reading the two clocks is a few microseconds apart, which is more than 0.1% of a short
     * run; the official check compares whole milliseconds and has the same blind spot. */
    if (pc_ns < 1000000000u || sc_ns < 1000000000u)
        return;
    ratio = (double)pc_ns / (double)sc_ns;
    if (ratio > 1.01 || ratio < 0.99)
        LG_DERR(&run->dlog, "error_runtime",
                "PerfClock and system_clock differ by more than 1%%!  pc_sc_ratio: %g", ratio);
    else if (ratio > 1.001 || ratio < 0.999)
        LG_DWARN(&run->dlog, "warning_generic_message",
                 "PerfClock and system_clock differ by more than 0.1%%!  pc_sc_ratio: %g", ratio);
}

int lg__mode_performance(lg_run_t *run, const lg_effective_settings_t *s, lg_result_t *res,
                         cmn_errbuf_t *eb)
{
    set_t *sets;
    size_t nsets;
    lg__perf_t pr;
    uint64_t pc0, sc0, pc1, sc1;
    int rc;

    LG_DMSG(&run->dlog, "Starting performance mode");
    rc = loadable_sets(run, s, s->performance_sample_count, &sets, &nsets);
    if (rc < 0)
        return cmn_errf(eb, rc, "out of memory for the loadable sets");
    if (nsets == 0) {
        free_sets(sets, nsets);
        return cmn_errf(eb, CMN_ECONFIG, "the performance sample set is empty");
    }
    rc = load_set(run, &sets[0], eb);
    if (rc < 0)
        goto out;
    pc0 = cmn_now_ns();
    sc0 = cmn_realtime_ns();
    if (s->print_timestamps)
        printf("Loadgen :: Perf mode start. system_clock Timestamp = %llu\n",
               (unsigned long long)(sc0 / 1000000000u));
    rc = lg__series_run(run, s, 0, sets[0].v, sets[0].n, sets[0].end, &pr, eb);
    pc1 = cmn_now_ns();
    sc1 = cmn_realtime_ns();
    if (rc == 0) {
        if (s->print_timestamps) {
            printf("Loadgen :: Perf mode stop. systme_clock Timestamp = %llu\n",
                   (unsigned long long)(sc1 / 1000000000u));
            printf("Loadgen :: PerfClock Perf duration = %llums\n",
                   (unsigned long long)((pc1 - pc0) / 1000000u));
            printf("Loadgen :: system_clock Perf duration = %llums\n",
                   (unsigned long long)((sc1 - sc0) / 1000000u));
            printf("Loadgen :: PerfClock/system_clock ratio = %.4f\n",
                   (double)(pc1 - pc0) / (double)(sc1 - sc0));
            fflush(stdout);
        }
        check_clocks(run, pc1 - pc0, sc1 - sc0);
        add_sample_counts(res, &pr);
        report(run, s, &pr, res);
    }
    lg__perf_free(&pr);
    unload_set(run, &sets[0]);
out:
    free_sets(sets, nsets);
    return rc;
}

/* One performance run at the given settings for FindPeakPerformance (with its own set load when
 * |load| is set, as FindBoundaries does). */
static int peak_run(lg_run_t *run, const lg_effective_settings_t *s, const set_t *set, int load,
                    lg__perf_t *pr, lg_result_t *res, cmn_errbuf_t *eb)
{
    int rc;

    if (load && (rc = load_set(run, set, eb)) < 0)
        return rc;
    rc = lg__series_run(run, s, 0, set->v, set->n, set->end, pr, eb);
    if (rc == 0)
        add_sample_counts(res, pr);
    if (load)
        unload_set(run, set);
    return rc;
}

/* A FindBoundaries run at |s| (with its own set load) that reports the run when it was
 * interrupted. Returns 1 when the search ends here (*rc < 0, or the interruption), else 0. */
static int boundary_run(lg_run_t *run, const lg_effective_settings_t *s, const set_t *set,
                        lg__perf_t *pr, lg_result_t *res, cmn_errbuf_t *eb, int *rc)
{
    *rc = peak_run(run, s, set, 1, pr, res, eb);
    if (*rc < 0)
        return 1;
    if (res->interrupted)
        report(run, s, pr, res);
    return res->interrupted != 0;
}

static int peak_finished(const lg_effective_settings_t *l, const lg_effective_settings_t *u)
{
    uint8_t precision = (uint8_t)l->requested.server_find_peak_qps_decimals_of_precision;
    double lf = floor(l->target_qps * pow(10, precision));
    double uf = floor(u->target_qps * pow(10, precision));

    return lf + 1 >= uf;
}

int lg__mode_find_peak(lg_run_t *run, const lg_effective_settings_t *base, lg_result_t *res,
                       cmn_errbuf_t *eb)
{
    lg_effective_settings_t l = *base, u, m;
    lg__perf_t lp = {0}, up = {0}, mp = {0};
    set_t *sets = NULL;
    size_t nsets = 0;
    char rec[256];
    int rc;

    LG_DMSG(&run->dlog, "Starting FindPeakPerformance mode");
    if (base->scenario != LG_SERVER) {
        LG_DERR(&run->dlog, "error_invalid_config",
                "Finding peak performance is only supported in Server scenarios.");
        return 0;
    }
    LG_DMSG(&run->dlog, "FindPeakPerformance: Check validity of the base settings field: %f",
            base->target_qps);
    rc = loadable_sets(run, base, base->performance_sample_count, &sets, &nsets);
    if (rc < 0 || nsets == 0) {
        free_sets(sets, nsets);
        return cmn_errf(eb, rc < 0 ? rc : CMN_ECONFIG, "no performance sample set");
    }
    if (boundary_run(run, &l, &sets[0], &lp, res, eb, &rc))
        goto out;
    if (!lg__perf_constraints_met(&l, &lp, rec, sizeof(rec))) {
        LG_DERR(
            &run->dlog, "error_runtime",
            "FindPeakPerformance: Initial lower bound does not satisfy performance constraints, "
            "msg: %s",
            rec);
        report(run, &l, &lp, res);
        goto out;
    }
    /* FindBoundaries: widen the rate until a run fails. */
    for (;;) {
        u = l;
        u.target_qps = l.target_qps * (1 + l.requested.server_find_peak_qps_boundary_step_size);
        LG_DMSG(&run->dlog, "FindBoundaries: Checking fields [%f, %f)", l.target_qps, u.target_qps);
        if (boundary_run(run, &u, &sets[0], &up, res, eb, &rc))
            goto out;
        if (!lg__perf_constraints_met(&u, &up, rec, sizeof(rec)))
            break;
        lg__perf_free(&lp);
        lp = up;
        memset(&up, 0, sizeof(up));
        l = u;
    }
    LG_DMSG(&run->dlog, "FindPeakPerformance: Found boundaries: [%f, %f)", l.target_qps,
            u.target_qps);
    rc = load_set(run, &sets[0], eb);
    if (rc < 0)
        goto out;
    while (!peak_finished(&l, &u)) {
        m = l;
        m.target_qps = l.target_qps + (u.target_qps - l.target_qps) / 2;
        LG_DMSG(&run->dlog,
                "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [%f, %f): %f",
                l.target_qps, u.target_qps, m.target_qps);
        rc = peak_run(run, &m, &sets[0], 0, &mp, res, eb);
        if (rc < 0)
            break;
        if (res->interrupted) {
            lg__perf_free(&lp);
            lp = mp;
            l = m;
            memset(&mp, 0, sizeof(mp));
            break;
        }
        if (lg__perf_constraints_met(&m, &mp, rec, sizeof(rec))) {
            lg__perf_free(&lp);
            lp = mp;
            l = m;
        } else {
            lg__perf_free(&up);
            up = mp;
            u = m;
        }
        memset(&mp, 0, sizeof(mp));
    }
    if (rc == 0) {
        LG_DMSG(&run->dlog, "FindPeakPerformance: Found peak performance field: %f", l.target_qps);
        report(run, &l, &lp, res);
    }
    unload_set(run, &sets[0]);
out:
    lg__perf_free(&lp);
    lg__perf_free(&up);
    lg__perf_free(&mp);
    free_sets(sets, nsets);
    return rc;
}
