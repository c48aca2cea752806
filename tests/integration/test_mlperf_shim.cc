// The QDL under the unaltered official MLCommons LoadGen (built only when MLPERF_LOADGEN_ROOT is
// given): Server and Offline performance runs through two sut-nodes must be VALID with a
// "Network SUT" name obtained by a live round trip, and an accuracy run must log, for every
// sample, the digest of exactly the bytes the QSL holds.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "loadgen.h"
#include "qdl_mlperf.h"
#include "query_sample_library.h"
#include "test_settings.h"

extern "C" {
#include "cmn/digest.h"
#include "testnet.h"
}

namespace
{

int failures = 0;

#define EXPECT(cond, ...)                                               \
    do {                                                                \
        if (!(cond)) {                                                  \
            std::fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
            std::fprintf(stderr, __VA_ARGS__);                          \
            std::fprintf(stderr, "\n");                                 \
            failures++;                                                 \
        }                                                               \
    } while (0)

class Qsl : public mlperf::QuerySampleLibrary
{
  public:
    explicit Qsl(size_t n) : name_("digest-qsl")
    {
        std::vector<std::vector<uint8_t>> samples(n);
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < n; i++) {
            samples[i].resize(64 + (i * 37) % 2000);
            for (auto &b : samples[i]) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b = static_cast<uint8_t>(x);
            }
        }
        source_.reset(new qdl_mlperf::MemorySampleSource(std::move(samples)));
    }
    const std::string &Name() override
    {
        return name_;
    }
    size_t TotalSampleCount() override
    {
        return source_->Count();
    }
    size_t PerformanceSampleCount() override
    {
        return source_->Count();
    }
    void LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex> &) override
    {
    }
    void UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex> &) override
    {
    }
    qdl_mlperf::MemorySampleSource *source()
    {
        return source_.get();
    }

  private:
    std::string name_;
    std::unique_ptr<qdl_mlperf::MemorySampleSource> source_;
};

std::string slurp(const std::string &path)
{
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The runs' log folders: removed at the end when every check passed, kept (and named) otherwise.
std::vector<std::string> g_dirs;

int remove_entry(const char *path, const struct stat *, int, struct FTW *)
{
    return std::remove(path);
}

std::string run(qdl_mlperf::NetworkQDL *qdl, Qsl *qsl, mlperf::TestScenario scenario,
                mlperf::TestMode mode, const char *tag)
{
    char dir[] = "/tmp/shim_XXXXXX";
    if (!mkdtemp(dir))
        std::abort();
    g_dirs.push_back(dir);
    mlperf::TestSettings ts;
    ts.scenario = scenario;
    ts.mode = mode;
    ts.min_duration_ms = 1000;
    ts.min_query_count = 100;
    ts.server_target_qps = 2000;
    ts.server_target_latency_ns = 20000000;
    // Offline issues one query of 1.1 x min_duration x expected_qps samples; it must outlast
    // min_duration even at the 1.3M samples/s the digest path reaches on loopback (samples of 64
    // to 2063 bytes, split across two nodes), so the hint is set well above that.
    ts.offline_expected_qps = 5000000;
    if (scenario == mlperf::TestScenario::Offline)
        ts.min_duration_ms = 500;
    mlperf::LogSettings ls;
    ls.log_output.outdir = dir;
    ls.enable_trace = false;
    mlperf::StartTest(qdl, qsl, ts, ls);
    std::printf("%s: logs in %s\n", tag, dir);
    return dir;
}

} // namespace

int main()
{
    tn_proc_t nodes[2];
    const char *a0[] = {"--backend", "digest", "--name", "shim-a", nullptr};
    const char *a1[] = {"--backend", "digest", "--name", "shim-b", nullptr};
    if (tn_spawn(&nodes[0], SUT_NODE_EXE, a0) != 0 || tn_spawn(&nodes[1], SUT_NODE_EXE, a1) != 0) {
        std::fprintf(stderr, "cannot start sut-node\n");
        return 1;
    }
    std::string addr0 = "127.0.0.1:" + std::to_string(nodes[0].port);
    std::string addr1 = "127.0.0.1:" + std::to_string(nodes[1].port);
    const char *list[2] = {addr0.c_str(), addr1.c_str()};
    qdl_config_t cfg;
    qdl_config_init(&cfg);
    cfg.nodes = list;
    cfg.n_nodes = 2;

    Qsl qsl(1024);
    {
        qdl_mlperf::NetworkQDL qdl(cfg, qsl.source());

        for (auto sc : {mlperf::TestScenario::Server, mlperf::TestScenario::Offline}) {
            const char *tag = sc == mlperf::TestScenario::Server ? "Server" : "Offline";
            uint64_t calls = qdl.name_calls();
            std::string dir = run(&qdl, &qsl, sc, mlperf::TestMode::PerformanceOnly, tag);
            std::string summary = slurp(dir + "/mlperf_log_summary.txt");
            std::string detail = slurp(dir + "/mlperf_log_detail.txt");
            // VALID or INVALID is how fast this machine was (a benchmark's business); that the
            // run ended with a result and no error is the shim's.
            EXPECT(summary.find("Result is : ") != std::string::npos, "%s run has no result:\n%s",
                   tag, summary.c_str());
            EXPECT(summary.find("No errors encountered during test.") != std::string::npos,
                   "%s run logged errors:\n%s", tag, summary.c_str());
            EXPECT(summary.find("SUT name : Network SUT (2 nodes: shim-a, shim-b)") !=
                       std::string::npos,
                   "%s summary lacks the network SUT name", tag);
            EXPECT(detail.find("\"get_sut_name_duration_ns\"") != std::string::npos,
                   "%s detail log lacks the name time", tag);
            EXPECT(qdl.name_calls() > calls, "%s: LoadGen's Name() did not reach the QDL", tag);
            std::printf("%s: %s; Name() round trip %.1f us\n", tag,
                        summary.find("Result is : VALID") != std::string::npos ? "VALID"
                                                                               : "INVALID",
                        qdl.last_name_duration_ns() / 1e3);
        }

        // Accuracy: every sample logged with the digest of exactly its bytes.
        std::string dir = run(&qdl, &qsl, mlperf::TestScenario::Offline,
                              mlperf::TestMode::AccuracyOnly, "Accuracy");
        std::string acc = slurp(dir + "/mlperf_log_accuracy.json");
        size_t pos = 0, entries = 0, good = 0;
        while ((pos = acc.find("\"qsl_idx\" : ", pos)) != std::string::npos) {
            size_t idx = std::strtoul(acc.c_str() + pos + 12, nullptr, 10);
            size_t d = acc.find("\"data\" : \"", pos) + 10;
            std::string hex = acc.substr(d, 16);
            uint8_t le[8];
            for (int i = 0; i < 8; i++)
                le[i] =
                    static_cast<uint8_t>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
            const auto &bytes = qsl.source()->Bytes(idx);
            if (cmn_digest_get(le) == cmn_digest64(bytes.data(), bytes.size()))
                good++;
            entries++;
            pos = d;
        }
        EXPECT(entries == 1024, "accuracy log has %zu entries, expected 1024", entries);
        EXPECT(good == entries, "%zu of %zu digests match the QSL bytes", good, entries);
        EXPECT(qdl.failed_samples() == 0, "%llu samples failed",
               static_cast<unsigned long long>(qdl.failed_samples()));
        std::printf("Accuracy: %zu of %zu samples carry the digest of their exact bytes\n", good,
                    entries);
    }
    for (auto &n : nodes) {
        EXPECT(tn_stop(&n, SIGTERM, 10000) == 0, "sut-node did not exit cleanly");
        tn_cleanup(&n);
    }
    if (failures) {
        std::printf("logs kept for the failure: %zu folders under /tmp/shim_*\n", g_dirs.size());
    } else {
        for (const auto &d : g_dirs)
            nftw(d.c_str(), remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    }
    std::printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
