// qdl_mlperf.h: the QDL as an official MLCommons LoadGen QueryDispatchLibrary.
//
// Official Network-division results must use the unaltered LoadGen (C++). Its C API cannot do a
// live Name() (the name is fixed at construction), so this thin C++ class subclasses
// mlperf::QueryDispatchLibrary: Name() performs the QDL's NameRequest round trip to every node
// on every call, IssueQuery/FlushQueries forward to the C API, and completions come back through
// mlperf::QuerySamplesComplete / mlperf::FirstTokenComplete on the QDL's loop thread.
//
// The QDL needs each sample's bytes: the application provides them with a SampleSource (its QSL
// knows them); the shim adds nothing and copies nothing.
#ifndef QDL_MLPERF_H
#define QDL_MLPERF_H

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "qdl/qdl.h"
#include "query_dispatch_library.h"
#include "query_sample.h"

namespace qdl_mlperf
{

// Where the bytes of QSL sample |index| are. Called on LoadGen's issue thread; the bytes must
// stay valid until the sample completes (they normally live in the QSL's loaded set).
class SampleSource
{
  public:
    virtual ~SampleSource() = default;
    // Fills data, size, codec (0 none, 1 lz4) and raw_size; response_id is set by the shim.
    virtual qdl_sample_t Sample(mlperf::QuerySampleIndex index) = 0;
};

// A SampleSource over byte vectors held in memory (for demos and tests).
class MemorySampleSource : public SampleSource
{
  public:
    explicit MemorySampleSource(std::vector<std::vector<uint8_t>> samples)
        : samples_(std::move(samples))
    {
    }
    qdl_sample_t Sample(mlperf::QuerySampleIndex index) override;
    const std::vector<uint8_t> &Bytes(size_t i) const
    {
        return samples_.at(i);
    }
    size_t Count() const
    {
        return samples_.size();
    }

  private:
    std::vector<std::vector<uint8_t>> samples_;
};

// What NetworkQDL's constructor throws: the reason, and qdl_create's code (CMN_ENOTREADY for a
// node whose engine cannot serve, so that a front end can say so in its exit status).
class StartError : public std::runtime_error
{
  public:
    StartError(const std::string &what, int code) : std::runtime_error(what), code_(code)
    {
    }
    int code() const
    {
        return code_;
    }

  private:
    int code_;
};

class NetworkQDL : public mlperf::QueryDispatchLibrary
{
  public:
    // Connects to every node in |cfg| (its callbacks are replaced by the shim's). Throws
    // StartError (a std::runtime_error) naming the node and the reason when a node cannot be
    // reached or is not ready.
    NetworkQDL(const qdl_config_t &cfg, SampleSource *source);
    ~NetworkQDL() override;
    NetworkQDL(const NetworkQDL &) = delete;
    NetworkQDL &operator=(const NetworkQDL &) = delete;

    // A NameRequest round trip to every node on every call; contains "Network SUT". On failure
    // (no node reachable) returns "Network SUT (unavailable: <reason>)" and counts an error.
    const std::string &Name() override;
    void IssueQuery(const std::vector<mlperf::QuerySample> &samples) override;
    void FlushQueries() override;

    uint64_t name_calls() const
    {
        return name_calls_.load();
    }
    uint64_t last_name_duration_ns() const
    {
        return last_name_ns_.load();
    }
    uint64_t failed_samples() const
    {
        return failed_.load();
    }
    qdl_t *handle()
    {
        return qdl_;
    }

  private:
    static void OnComplete(void *user, const qdl_response_t *r, size_t n);
    static void OnFirstToken(void *user, const qdl_response_t *r, size_t n);
    void Deliver(const qdl_response_t *r, size_t n, bool first_token);

    qdl_t *qdl_ = nullptr;
    SampleSource *source_;
    std::string name_;
    std::vector<qdl_sample_t> issue_buf_;
    std::atomic<uint64_t> name_calls_{0};
    std::atomic<uint64_t> last_name_ns_{0};
    std::atomic<uint64_t> failed_{0};
};

} // namespace qdl_mlperf

#endif
