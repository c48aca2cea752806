// official_null: the official LoadGen's Server run against an in-process null SUT that completes
// every sample inline, in IssueQuery. bench/run.py runs it at B1's ladder steps for the reference
// row "official LoadGen, in-process null SUT" (issue 20). Built only when CMake is given
// MLPERF_LOADGEN_ROOT (an installed official LoadGen; nothing of it is vendored here).
//
//   official_null --qps N --duration-ms N --latency-ns N --samples N --outdir DIR
//
// Writes the official logs into DIR (mlperf_log_summary.txt holds the verdict and the p99);
// exits 0 when the run ended, 2 on bad arguments.
#include "loadgen.h"
#include "query_sample.h"
#include "query_sample_library.h"
#include "system_under_test.h"
#include "test_settings.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace
{

class NullSut : public mlperf::SystemUnderTest
{
  public:
    const std::string &Name() override
    {
        return name_;
    }
    void IssueQuery(const std::vector<mlperf::QuerySample> &samples) override
    {
        // Inline: the smallest cost an SUT can have, so the figure is the LoadGen's own.
        resp_.clear();
        for (const auto &s : samples)
            resp_.emplace_back(s.id, 0, 0, 0);
        mlperf::QuerySamplesComplete(resp_.data(), resp_.size());
    }
    void FlushQueries() override
    {
    }

  private:
    std::string name_ = "null (inline)";
    std::vector<mlperf::QuerySampleResponse> resp_;
};

class NullQsl : public mlperf::QuerySampleLibrary
{
  public:
    explicit NullQsl(size_t n) : n_(n)
    {
    }
    const std::string &Name() override
    {
        return name_;
    }
    size_t TotalSampleCount() override
    {
        return n_;
    }
    size_t PerformanceSampleCount() override
    {
        return n_;
    }
    void LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex> &) override
    {
    }
    void UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex> &) override
    {
    }

  private:
    std::string name_ = "null QSL";
    size_t n_;
};

int usage(const char *why)
{
    std::fprintf(stderr,
                 "official_null: %s\nusage: official_null --qps N --duration-ms N "
                 "--latency-ns N --samples N --outdir DIR\n",
                 why);
    return 2;
}

bool parse_u64(const char *v, unsigned long long *out)
{
    char *end = nullptr;

    if (!v || !*v || *v == '-')
        return false;
    *out = std::strtoull(v, &end, 10);
    return *end == '\0';
}

} // namespace

int main(int argc, char **argv)
{
    unsigned long long qps = 0, dur = 10000, lat = 1000000, samples = 1024;
    std::string outdir;

    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        bool ok = v != nullptr;

        if (ok && std::strcmp(k, "--qps") == 0)
            ok = parse_u64(v, &qps);
        else if (ok && std::strcmp(k, "--duration-ms") == 0)
            ok = parse_u64(v, &dur);
        else if (ok && std::strcmp(k, "--latency-ns") == 0)
            ok = parse_u64(v, &lat);
        else if (ok && std::strcmp(k, "--samples") == 0)
            ok = parse_u64(v, &samples);
        else if (ok && std::strcmp(k, "--outdir") == 0)
            outdir = v;
        else
            return usage((std::string("bad option or value at ") + k).c_str());
        if (!ok)
            return usage((std::string(k) + ": not a non-negative integer").c_str());
    }
    if (qps == 0 || outdir.empty() || samples == 0 || lat == 0)
        return usage("--qps, --latency-ns and --samples must be positive, --outdir given");

    mlperf::TestSettings ts;
    ts.scenario = mlperf::TestScenario::Server;
    ts.mode = mlperf::TestMode::PerformanceOnly;
    ts.server_target_qps = static_cast<double>(qps);
    ts.server_target_latency_ns = lat;
    ts.min_duration_ms = dur;

    mlperf::LogSettings ls;
    ls.log_output.outdir = outdir;
    ls.log_output.copy_summary_to_stdout = false;
    ls.enable_trace = false;

    NullSut sut;
    NullQsl qsl(static_cast<size_t>(samples));
    // A path that does not exist: no compliance audit.config is read from the working folder.
    mlperf::StartTest(&sut, &qsl, ts, ls, outdir + "/no-audit.config");
    return 0;
}
