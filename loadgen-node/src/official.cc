// official.cc: loadgen-node --loadgen official (see official.h). The official LoadGen owns the
// schedule, the clock and the logs; this file only adapts loadgen-node's QSL to it, hands the
// queries to the QDL through qdl_mlperf::NetworkQDL, and maps the flags main.c parsed onto the
// official TestSettings and LogSettings.
#include "official.h"
#include "official_conf.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "loadgen.h"
#include "qdl_mlperf.h"
#include "query_sample_library.h"
#include "test_settings.h"

namespace
{

// loadgen-node's QSL as the official QuerySampleLibrary, and as the shim's SampleSource (the
// bytes of a loaded sample, compressed when --compress asked for it).
class Qsl : public mlperf::QuerySampleLibrary, public qdl_mlperf::SampleSource
{
  public:
    explicit Qsl(lg_qsl_t *q) : q_(q), name_(lg_qsl_name(q))
    {
    }
    const std::string &Name() override
    {
        return name_;
    }
    size_t TotalSampleCount() override
    {
        return lg_qsl_total_count(q_);
    }
    size_t PerformanceSampleCount() override
    {
        return lg_qsl_performance_count(q_);
    }
    void LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex> &s) override
    {
        std::vector<uint32_t> idx(s.begin(), s.end());
        cmn_errbuf_t eb = {{0}};
        // LoadGen has no way to fail a load: a sample that cannot be loaded would be issued
        // without bytes, so the run stops here with the reason.
        if (lg_qsl_load(q_, idx.data(), idx.size(), &eb) < 0) {
            std::fprintf(stderr, "loadgen-node: loading %zu samples failed: %s\n", idx.size(),
                         eb.msg);
            std::exit(3);
        }
    }
    void UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex> &s) override
    {
        std::vector<uint32_t> idx(s.begin(), s.end());
        lg_qsl_unload(q_, idx.data(), idx.size());
    }
    qdl_sample_t Sample(mlperf::QuerySampleIndex index) override
    {
        lg_qsl_sample_t s;
        qdl_sample_t out;
        std::memset(&out, 0, sizeof(out));
        issued_.fetch_add(1, std::memory_order_relaxed);
        if (lg_qsl_get(q_, static_cast<uint32_t>(index), &s) == 0) {
            out.data = s.data;
            out.size = s.size;
            out.codec = s.codec;
            out.raw_size = s.raw_size;
        }
        return out;
    }
    uint64_t issued() const
    {
        return issued_.load(std::memory_order_relaxed);
    }

  private:
    lg_qsl_t *q_;
    std::string name_;
    std::atomic<uint64_t> issued_{0};
};

// --set FIELD=VALUE: the value main.c already parsed into lg_test_settings_t, copied into the
// official field of the same name.
struct SetField {
    const char *name;
    void (*copy)(mlperf::TestSettings &t, const lg_test_settings_t &s);
};

#define COPY(n)                                                                      \
    {                                                                                \
#        n, [](mlperf::TestSettings & t, const lg_test_settings_t &s) { t.n = s.n; } \
    }
const SetField set_fields[] = {
    COPY(single_stream_expected_latency_ns),
    COPY(single_stream_target_latency_percentile),
    COPY(multi_stream_expected_latency_ns),
    COPY(multi_stream_target_latency_percentile),
    COPY(multi_stream_samples_per_query),
    COPY(server_target_qps),
    COPY(server_target_latency_ns),
    COPY(server_target_latency_percentile),
    COPY(server_coalesce_queries),
    COPY(server_find_peak_qps_decimals_of_precision),
    COPY(server_find_peak_qps_boundary_step_size),
    COPY(server_max_async_queries),
    COPY(offline_expected_qps),
    COPY(sample_concatenate_permutation),
    COPY(min_duration_ms),
    COPY(max_duration_ms),
    COPY(min_query_count),
    COPY(max_query_count),
    COPY(qsl_rng_seed),
    COPY(sample_index_rng_seed),
    COPY(schedule_rng_seed),
    COPY(accuracy_log_rng_seed),
    COPY(accuracy_log_probability),
    COPY(accuracy_log_sampling_target),
    COPY(print_timestamps),
    COPY(performance_issue_unique),
    COPY(performance_issue_same),
    COPY(performance_issue_same_index),
    COPY(performance_sample_count_override),
    COPY(accuracy_sample_count_override),
    COPY(use_token_latencies),
    COPY(server_ttft_latency),
    COPY(server_tpot_latency),
    COPY(infer_token_latencies),
    COPY(token_latency_scaling_factor),
};
#undef COPY

template <typename T> struct named {
    const char *name;
    T value;
};

const named<mlperf::TestScenario> scenarios[] = {
    {"SingleStream", mlperf::TestScenario::SingleStream},
    {"MultiStream", mlperf::TestScenario::MultiStream},
    {"Server", mlperf::TestScenario::Server},
    {"Offline", mlperf::TestScenario::Offline}};
const named<mlperf::TestMode> modes[] = {
    {"SubmissionRun", mlperf::TestMode::SubmissionRun},
    {"AccuracyOnly", mlperf::TestMode::AccuracyOnly},
    {"PerformanceOnly", mlperf::TestMode::PerformanceOnly},
    {"FindPeakPerformance", mlperf::TestMode::FindPeakPerformance}};

// Sets *out to the value named |s| in |t|; -1 when |t| has no such name.
template <typename T, std::size_t N> int parse_named(const named<T> (&t)[N], const char *s, T *out)
{
    for (const auto &e : t)
        if (std::strcmp(s, e.name) == 0) {
            *out = e.value;
            return 0;
        }
    return -1;
}

int settings(const lg_official_args_t *a, mlperf::TestSettings *ts, cmn_errbuf_t *eb)
{
    const char *model = a->model ? a->model : "*";

    if (parse_named(scenarios, a->scenario, &ts->scenario) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--scenario: '%s' is not a scenario", a->scenario);
    // Officially the user.conf is the one conf file; FromConfig reads the compiled-in mlperf.conf
    // before the first one. Without a user.conf, mlperf.conf alone is read as LoadGen reads it.
    if (a->n_user_conf == 0 && a->mlperf_conf)
        ts->FromConfig("", model, a->scenario, 0);
    for (int i = 0; i < a->n_user_conf; i++)
        if (ts->FromConfig(a->user_conf[i], model, a->scenario) != 0)
            return cmn_errf(eb, CMN_ECONFIG, "--user-conf %s: the official LoadGen cannot read it",
                            a->user_conf[i]);
    if (a->mode && parse_named(modes, a->mode, &ts->mode) < 0)
        return cmn_errf(eb, CMN_ECONFIG, "--mode: '%s' is not a test mode", a->mode);
    for (int i = 0; i < a->n_sets; i++) {
        const char *eq = std::strchr(a->sets[i], '=');
        size_t klen = eq ? static_cast<size_t>(eq - a->sets[i]) : std::strlen(a->sets[i]);
        bool found = false;
        for (const auto &f : set_fields)
            if (std::strlen(f.name) == klen && std::strncmp(f.name, a->sets[i], klen) == 0) {
                f.copy(*ts, *a->parsed);
                found = true;
            }
        if (!found)
            return cmn_errf(eb, CMN_ECONFIG, "--set %s: not a field of the official TestSettings",
                            a->sets[i]);
    }
    return 0;
}

// What the official LoadGen reads on its own: ./audit.config whenever it exists. A different
// --audit-config cannot be honoured without altering it, so it is refused.
int check_audit(const lg_official_args_t *a, cmn_errbuf_t *eb)
{
    struct stat st;
    bool present = stat("audit.config", &st) == 0;

    if (!a->audit_config)
        return 0;
    if (std::strcmp(a->audit_config, "none") == 0) {
        if (present)
            return cmn_errf(eb, CMN_ECONFIG,
                            "--audit-config none: the official LoadGen reads ./audit.config "
                            "whenever it exists; remove it or run from another folder");
        return 0;
    }
    if (std::strcmp(a->audit_config, "audit.config") != 0 &&
        std::strcmp(a->audit_config, "./audit.config") != 0)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--audit-config %s: the official LoadGen reads only ./audit.config in the "
                        "working directory; copy the file there instead",
                        a->audit_config);
    return 0;
}

int check_extras(const lg_log_settings_t *log, cmn_errbuf_t *eb)
{
    const char *what = nullptr;
    if (log->sample_latencies)
        what = "--sample-latencies";
    else if (log->latency_interval_ms)
        what = "--latency-intervals";
    else if (log->verify_digest)
        what = "--verify-digest";
    else if (log->drain_timeout_ms)
        what = "--drain-timeout-ms";
    if (what)
        return cmn_errf(eb, CMN_ECONFIG,
                        "%s is a loadgen-node scheduler feature; the official LoadGen has none "
                        "(use --loadgen builtin)",
                        what);
    return 0;
}

// The live line on stderr (the official LoadGen has none): elapsed time, samples issued (as the
// shim asks the QSL for their bytes) and completed (the QDL's counters), and the rate.
class Progress
{
  public:
    Progress(const char *phase, Qsl *qsl, qdl_t *qdl, bool plain, uint64_t interval_ms)
        : phase_(phase), qsl_(qsl), qdl_(qdl), plain_(plain),
          every_(plain ? static_cast<int64_t>(interval_ms ? interval_ms : 10000) : 250)
    {
        start_ = std::chrono::steady_clock::now();
        thread_ = std::thread([this] { Loop(); });
    }
    ~Progress()
    {
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
        Draw(true);
    }

  private:
    void Loop()
    {
        std::unique_lock<std::mutex> g(mu_);
        while (!cv_.wait_for(g, std::chrono::milliseconds(every_), [this] { return stop_; }))
            Draw(false);
    }
    void Draw(bool final)
    {
        qdl_node_stats_t st[64];
        int n = qdl_stats(qdl_, st, 64);
        uint64_t done = 0;
        for (int i = 0; i < n && i < 64; i++)
            done += st[i].samples_completed + st[i].samples_failed;
        double el =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        double rate = el > 0 ? static_cast<double>(done) / el : 0;
        char line[160];
        std::snprintf(line, sizeof(line), "[official %s] %6.1fs  issued %llu  done %llu  %.0f/s",
                      phase_, el, static_cast<unsigned long long>(qsl_->issued()),
                      static_cast<unsigned long long>(done), rate);
        if (plain_) {
            // Plain lines for logs: none at all for a run shorter than one interval.
            if (final && !drawn_)
                return;
            std::fprintf(stderr, "%s\n", line);
        } else
            std::fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
        drawn_++;
        std::fflush(stderr);
    }

    const char *phase_;
    Qsl *qsl_;
    qdl_t *qdl_;
    bool plain_;
    int64_t every_; // ms between two draws
    uint64_t drawn_ = 0;
    std::chrono::steady_clock::time_point start_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

std::string summary_path(const lg_log_settings_t *log)
{
    std::string dir = log->outdir ? log->outdir : ".";
    std::string prefix = log->prefix ? log->prefix : "mlperf_log_";
    std::string suffix = log->suffix ? log->suffix : "";
    return dir + "/" + prefix + "summary" + suffix + ".txt";
}

} // namespace

extern "C" int lg_official_run(const lg_official_args_t *a, lg_qsl_t *qsl,
                               const qdl_config_t *qdl_cfg, const lg_log_settings_t *log,
                               cmn_errbuf_t *eb)
{
    mlperf::TestSettings ts;
    mlperf::LogSettings ls;

    if ((a->mlperf_conf && lg_official_check_mlperf_conf(a->mlperf_conf, eb) < 0) ||
        settings(a, &ts, eb) < 0 || check_audit(a, eb) < 0 || check_extras(log, eb) < 0)
        return 2;
    ls.log_output.outdir = log->outdir ? log->outdir : ".";
    if (log->prefix)
        ls.log_output.prefix = log->prefix;
    if (log->suffix)
        ls.log_output.suffix = log->suffix;
    ls.log_output.prefix_with_datetime = log->prefix_with_datetime;
    ls.log_output.copy_summary_to_stdout = log->copy_summary_to_stdout;
    ls.log_output.copy_detail_to_stdout = log->copy_detail_to_stdout;

    Qsl q(qsl);
    try {
        qdl_mlperf::NetworkQDL sut(*qdl_cfg, &q);
        lg_progress_t show = lg_progress_mode(log->progress);
        {
            std::unique_ptr<Progress> p(show != LG_PROGRESS_OFF
                                            ? new Progress(a->scenario, &q, sut.handle(),
                                                           show == LG_PROGRESS_LINES,
                                                           log->progress_interval_ms)
                                            : nullptr);
            mlperf::StartTest(&sut, &q, ts, ls);
        }
        qdl_stats_print(sut.handle(), stderr);
        if (sut.failed_samples())
            std::fprintf(stderr,
                         "loadgen-node: %llu samples could not be delivered (completed empty)\n",
                         static_cast<unsigned long long>(sut.failed_samples()));
        if (sut.failed_samples())
            return 1;
    } catch (const qdl_mlperf::StartError &e) {
        // A node that is not ready: the same exit status and message as the built-in front end.
        cmn_errf(eb, e.code(), "%s", e.what());
        return e.code() == CMN_ENOTREADY ? 4 : 3;
    } catch (const std::exception &e) {
        cmn_errf(eb, CMN_ECONFIG, "%s", e.what());
        return 3;
    }
    if (ts.mode == mlperf::TestMode::AccuracyOnly)
        return 0;
    // The official LoadGen reports validity only in its summary.
    if (log->prefix_with_datetime)
        return 0;
    std::ifstream f(summary_path(log));
    std::stringstream ss;
    ss << f.rdbuf();
    if (ss.str().find("Result is : VALID") != std::string::npos)
        return 0;
    if (ss.str().empty()) {
        cmn_errf(eb, -EIO, "cannot read %s after the run", summary_path(log).c_str());
        return 3;
    }
    return 1;
}
