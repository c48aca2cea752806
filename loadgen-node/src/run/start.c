/* StartTest: checks the settings, opens the three logs, asks the SUT its name, logs the settings,
 * runs the mode, and closes the logs with the summary's trailer. A run that ended with samples
 * still outstanding is parked, not freed, so a late completion finds it closed. */
#include "run.h"

#include "build_info.h"
#include "cmn/clock.h"
#include "cmn/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void lg_log_settings_init(lg_log_settings_t *ls)
{
    memset(ls, 0, sizeof(*ls));
    ls->outdir = ".";
    ls->prefix = "mlperf_log_";
    ls->suffix = "";
    ls->audit_config = "audit.config";
    ls->progress = LG_PROGRESS_AUTO;
    ls->progress_interval_ms = 10000;
    ls->spin_ns = 30000;
    ls->spin_budget_pct = 100;
    ls->wait_spin_ns = 150000;
    ls->wait_spin_adapt = true;
    ls->issue_cpu = -1;
    ls->issue_thread_io = true;
}

/* The official test_datetime ("%FT%TZ" of local time, the Z notwithstanding), or with |zone| == 0
 * the datetime prefix of the log names. */
static void local_datetime(char *buf, size_t len, int zone)
{
    time_t t = time(NULL);
    struct tm tm;

    localtime_r(&t, &tm);
    if (zone)
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
}

static void trailer(lg_run_t *run)
{
    uint64_t w = atomic_load(&run->dlog.warnings), e = lg__run_error_total(run);
    char text[256];
    size_t n = 0;

    if (w == 0)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\nNo warnings encountered during test.\n");
    else if (w == 1)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\n1 warning encountered. See detailed log.\n");
    else
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "\n%" PRIu64 " warnings encountered. See detailed log.\n", w);
    if (e == 0)
        snprintf(text + n, sizeof(text) - n, "\nNo errors encountered during test.\n");
    else if (e == 1)
        snprintf(text + n, sizeof(text) - n, "\n1 ERROR encountered. See detailed log.\n");
    else
        snprintf(text + n, sizeof(text) - n,
                 "\n%" PRIu64 " ERRORS encountered. See detailed log.\n", e);
    if (run->summary)
        fputs(text, run->summary);
    if (run->ls->copy_summary_to_stdout) {
        fputs(text, stdout);
        fflush(stdout);
    }
}

static int open_logs(lg_run_t *run, const lg_log_settings_t *ls, cmn_errbuf_t *eb)
{
    char base[4096], path[4200], dt[64] = "";
    int rc;

    if (ls->prefix_with_datetime) {
        local_datetime(dt, sizeof(dt) - 1, 0);
        strcat(dt, "_");
    }
    snprintf(base, sizeof(base), "%s/%s%s", ls->outdir, ls->prefix, dt);
    snprintf(path, sizeof(path), "%ssummary%s.txt", base, ls->suffix);
    run->summary = fopen(path, "w");
    if (!run->summary)
        return cmn_errf(eb, -errno, "cannot create the summary %s: %s", path, strerror(errno));
    snprintf(path, sizeof(path), "%sdetail%s.txt", base, ls->suffix);
    rc = lg__dlog_open(&run->dlog, path, ls->copy_detail_to_stdout, cmn_now_ns(), eb);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof(path), "%saccuracy%s.json", base, ls->suffix);
    return lg__acclog_open(&run->acc, path, eb);
}

static int close_logs(lg_run_t *run, cmn_errbuf_t *eb, int rc)
{
    int r1 = 0, r2, r3;

    if (run->summary) {
        trailer(run);
        if (ferror(run->summary))
            r1 = -EIO;
        if (fclose(run->summary) != 0 && r1 == 0)
            r1 = -errno;
        run->summary = NULL;
    }
    r2 = lg__acclog_close(&run->acc);
    r3 = lg__dlog_close(&run->dlog);
    if (rc == 0 && (r1 || r2 || r3))
        rc = cmn_errf(eb,
                      r1   ? r1
                      : r2 ? r2
                           : r3,
                      "writing the logs in %s failed: %s", run->ls->outdir,
                      strerror(-(r1   ? r1
                                 : r2 ? r2
                                      : r3)));
    return rc;
}

/* Runs that ended with samples still outstanding. A SUT may complete those later, even after
 * lg_start_test has returned; the run stays allocated (its buffers freed, the struct marked
 * finished) so such a call finds a closed run instead of freed memory. Reachable from here, the
 * parked structs are not leaks. */
static struct parked {
    struct parked *next;
} * parked_runs;
static pthread_mutex_t parked_mu = PTHREAD_MUTEX_INITIALIZER;

static void run_free(lg_run_t *run, int park)
{
    if (!run)
        return;
    free(run->dir);
    free(run->tok);
    free(run->idxbuf);
    free(run->sbuf);
    free(run->rbuf);
    run->dir = NULL;
    run->tok = NULL;
    run->idxbuf = NULL;
    run->sbuf = NULL;
    run->rbuf = NULL;
    if (park) {
        struct parked *p = malloc(sizeof(*p) + sizeof(lg_run_t *));

        atomic_store(&run->finished, 1);
        if (p) {
            memcpy(p + 1, &run, sizeof(run));
            pthread_mutex_lock(&parked_mu);
            p->next = parked_runs;
            parked_runs = p;
            pthread_mutex_unlock(&parked_mu);
            return;
        }
    }
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    pthread_mutex_destroy(&run->tok_mu);
    free(run);
}

static lg_run_t *run_new(void)
{
    lg_run_t *run = calloc(1, sizeof(*run));
    pthread_condattr_t ca;

    if (!run)
        return NULL;
    pthread_mutex_init(&run->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&run->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&run->tok_mu, NULL);
    run->dir = calloc(LG__DIR_SIZE, sizeof(*run->dir));
    run->tok = calloc(LG__TOK_BUCKETS, sizeof(*run->tok));
    run->idxbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->idxbuf));
    run->sbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->sbuf));
    run->rbuf = malloc(LG_ISSUE_CHUNK * sizeof(*run->rbuf));
    if (!run->dir || !run->tok || !run->idxbuf || !run->sbuf || !run->rbuf) {
        run_free(run, 0);
        return NULL;
    }
    /* SequenceGen's accuracy-log generator is default-constructed and never seeded. */
    lg__mt_seed(&run->acc_rng, 5489u);
    return run;
}

static int file_exists(const char *path)
{
    struct stat st;

    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int lg_start_test(lg_sut_t *sut, lg_qsl_t *qsl, const lg_test_settings_t *settings,
                  const lg_log_settings_t *log, lg_result_t *res, cmn_errbuf_t *eb)
{
    lg_log_settings_t defaults;
    lg_test_settings_t ts = *settings;
    lg_effective_settings_t s;
    lg_msgs_t msgs = {0};
    lg_result_t local;
    lg_run_t *run;
    char err[256] = "", dt[64];
    uint64_t t, name_ns;
    int rc;

    if (!res)
        res = &local;
    memset(res, 0, sizeof(*res));
    if (!log) {
        lg_log_settings_init(&defaults);
        log = &defaults;
    }
    if (!sut || !sut->issue || !sut->name || !qsl)
        return cmn_errf(eb, CMN_ECONFIG,
                        "lg_start_test needs a SUT with name and issue, and a QSL");
    if ((unsigned)ts.scenario > LG_OFFLINE || (unsigned)ts.mode > LG_MODE_FIND_PEAK_PERFORMANCE)
        return cmn_errf(eb, CMN_ECONFIG, "unknown scenario or mode");
    if (ts.server_num_issue_query_threads != 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "server_num_issue_query_threads = %llu: loadgen-node issues from one "
                        "thread; only 0 is supported",
                        (unsigned long long)ts.server_num_issue_query_threads);
    rc = lg_test_settings_check(&ts, eb);
    if (rc < 0)
        return rc;
    if (log->issue_cpu >= 0 && (rc = lg_issue_cpu_check(log->issue_cpu, eb)) < 0)
        return rc;
    run = run_new();
    if (!run)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    /* The calling thread issues the queries: with the default 50 us timer slack every Server
     * sleep would end up to 50 us late, and that lateness counts as SUT latency. */
    if (cmn_timer_slack_min() < 0)
        cmn_log_warn("cannot lower the timer slack; Server issue times may be up to 50 us late");
    run->sut = sut;
    run->qsl = qsl;
    run->ls = log;
    rc = open_logs(run, log, eb);
    if (rc < 0)
        goto fail_logs;
    run->progress_on = (int)lg_progress_mode(log->progress);
    run->obs = log->observe;
    run->verify_digest = log->verify_digest;
    if (run->verify_digest)
        lg_qsl_keep_digests(qsl, 1);

    t = cmn_now_ns();
    rc = sut->name(sut, run->sut_name, sizeof(run->sut_name), NULL, err, sizeof(err));
    name_ns = cmn_now_ns() - t;
    if (rc < 0) {
        rc = cmn_errf(eb, rc, "the SUT's Name() failed: %s", err[0] ? err : cmn_strerror(rc));
        goto fail_run;
    }
    snprintf(res->sut_name, sizeof(res->sut_name), "%s", run->sut_name);

    LG_DSTR(&run->dlog, "loadgen_version", LG_VERSION_STRING);
    LG_DSTR(&run->dlog, "loadgen_build_date_local", BUILD_DATE_LOCAL);
    LG_DSTR(&run->dlog, "loadgen_build_date_utc", BUILD_DATE_UTC);
    LG_DSTR(&run->dlog, "loadgen_git_commit_date", BUILD_GIT_COMMIT_DATE);
    LG_DSTR(&run->dlog, "loadgen_git_log_message", "commit " BUILD_GIT_COMMIT);
    LG_DSTR(&run->dlog, "loadgen_git_status_message", "NA");
    lg__log_msgs(&run->dlog, log->msgs);
    local_datetime(dt, sizeof(dt), 1);
    LG_DSTR(&run->dlog, "test_datetime", dt);
    LG_DSTR(&run->dlog, "sut_name", run->sut_name);
    LG_DU64(&run->dlog, "get_sut_name_duration_ns", name_ns);
    LG_DSTR(&run->dlog, "qsl_name", lg_qsl_name(qsl));
    LG_DU64(&run->dlog, "qsl_reported_total_count", lg_qsl_total_count(qsl));
    LG_DU64(&run->dlog, "qsl_reported_performance_count", lg_qsl_performance_count(qsl));

    if (file_exists(log->audit_config)) {
        cmn_errbuf_t aeb;

        LG_DWARN(
            &run->dlog, "warning_generic_message",
            "Found Audit Config file (audit.config). Overriding TestSettings from audit.config "
            "file.");
        lg_test_settings_from_config(&ts, log->audit_config, "*", lg_scenario_name(ts.scenario),
                                     LG_CONF_AUDIT, &msgs, &aeb);
    }
    if (ts.test05) {
        LG_DWARN(&run->dlog, "warning_generic_message",
                 "Test05 flag detected Overriding random seeds");
        ts.mode = LG_MODE_PERFORMANCE_ONLY;
        ts.qsl_rng_seed = settings->test05_qsl_rng_seed;
        ts.sample_index_rng_seed = settings->test05_sample_index_rng_seed;
        ts.schedule_rng_seed = settings->test05_schedule_rng_seed;
    }
    lg_effective_settings(&ts, lg_qsl_performance_count(qsl), lg_qsl_total_count(qsl), &s, &msgs);
    lg__log_msgs(&run->dlog, &msgs);
    lg__log_requested(&run->dlog, &ts);
    lg__log_effective(&run->dlog, &s);

    run->use_tokens = s.use_token_latencies;
    run->needs_first_token = s.scenario != LG_OFFLINE;
    __atomic_store_n(&sut->run, run, __ATOMIC_RELEASE);
    switch (s.mode) {
    case LG_MODE_SUBMISSION_RUN:
        rc = lg__mode_accuracy(run, &s, res, eb);
        if (rc == 0 && !res->interrupted)
            rc = lg__mode_performance(run, &s, res, eb);
        break;
    case LG_MODE_ACCURACY_ONLY:
        rc = lg__mode_accuracy(run, &s, res, eb);
        break;
    case LG_MODE_PERFORMANCE_ONLY:
        rc = lg__mode_performance(run, &s, res, eb);
        break;
    case LG_MODE_FIND_PEAK_PERFORMANCE:
        rc = lg__mode_find_peak(run, &s, res, eb);
        break;
    }
    __atomic_store_n(&sut->run, NULL, __ATOMIC_RELEASE);
    res->num_errors = lg__run_error_total(run);
fail_run:
    rc = close_logs(run, eb, rc);
fail_logs:
    if (run->summary)
        fclose(run->summary);
    lg__acclog_close(&run->acc);
    lg__dlog_close(&run->dlog);
    run_free(run, res->lost_samples > 0);
    return rc;
}
