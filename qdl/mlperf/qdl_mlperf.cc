#include "qdl_mlperf.h"

#include <cstdio>
#include <cstring>

#include "loadgen.h"

namespace qdl_mlperf
{

qdl_sample_t MemorySampleSource::Sample(mlperf::QuerySampleIndex index)
{
    const std::vector<uint8_t> &b = samples_.at(index);
    qdl_sample_t s;
    std::memset(&s, 0, sizeof(s));
    s.data = b.data();
    s.size = b.size();
    s.codec = 0;
    s.raw_size = b.size();
    return s;
}

NetworkQDL::NetworkQDL(const qdl_config_t &cfg, SampleSource *source) : source_(source)
{
    qdl_config_t c = cfg;
    char err[512] = "";
    c.on_complete = &NetworkQDL::OnComplete;
    c.on_first_token = &NetworkQDL::OnFirstToken;
    c.user = this;
    int rc = qdl_create(&c, &qdl_, err, sizeof(err));
    if (rc < 0)
        throw StartError(std::string("QDL: ") + err, rc);
}

NetworkQDL::~NetworkQDL()
{
    qdl_destroy(qdl_);
}

const std::string &NetworkQDL::Name()
{
    char buf[4096];
    char err[512] = "";
    uint64_t ns = 0;
    name_calls_++;
    // LoadGen times this call (get_sut_name_duration_ns): it is a real round trip to every node.
    int rc = qdl_name(qdl_, buf, sizeof(buf), &ns, err, sizeof(err));
    last_name_ns_ = ns;
    if (rc < 0) {
        std::fprintf(stderr, "qdl_mlperf: Name() failed: %s\n", err);
        name_ = std::string("Network SUT (unavailable: ") + err + ")";
    } else {
        name_ = buf;
    }
    return name_;
}

void NetworkQDL::IssueQuery(const std::vector<mlperf::QuerySample> &samples)
{
    // LoadGen calls IssueQuery from one thread at a time per issue thread; the buffer is reused
    // and the QDL copies the descriptors, never the bytes.
    issue_buf_.resize(samples.size());
    for (size_t i = 0; i < samples.size(); i++) {
        issue_buf_[i] = source_->Sample(samples[i].index);
        issue_buf_[i].response_id = static_cast<uint64_t>(samples[i].id);
    }
    int rc = qdl_issue_query(qdl_, issue_buf_.data(), issue_buf_.size());
    if (rc < 0) {
        // Never leave LoadGen waiting for a sample that will not come: complete it, empty.
        std::fprintf(stderr,
                     "qdl_mlperf: IssueQuery of %zu samples failed (%d); completing them empty\n",
                     samples.size(), rc);
        std::vector<mlperf::QuerySampleResponse> resp(samples.size());
        for (size_t i = 0; i < samples.size(); i++)
            resp[i] = {samples[i].id, 0, 0};
        failed_ += samples.size();
        mlperf::QuerySamplesComplete(resp.data(), resp.size());
    }
}

void NetworkQDL::FlushQueries()
{
    qdl_flush(qdl_);
}

void NetworkQDL::Deliver(const qdl_response_t *r, size_t n, bool first_token)
{
    // One LoadGen call per received frame: it takes one timestamp per call. The response bytes
    // are valid during the call, and LoadGen copies the ones it logs before returning.
    thread_local std::vector<mlperf::QuerySampleResponse> resp;
    resp.resize(n);
    for (size_t i = 0; i < n; i++) {
        resp[i].id = static_cast<mlperf::ResponseId>(r[i].response_id);
        resp[i].data = reinterpret_cast<uintptr_t>(r[i].data);
        resp[i].size = r[i].status == 0 ? r[i].size : 0;
        resp[i].n_tokens = r[i].n_tokens;
        if (r[i].status != 0) {
            failed_++;
            // The node and the engine's words, with LoadGen's response id (the QDL's own line
            // names the wire id too).
            std::fprintf(stderr,
                         "qdl_mlperf: sample with LoadGen response id %llu failed at node %s "
                         "(%d): %s; completed with no data\n",
                         static_cast<unsigned long long>(r[i].response_id),
                         r[i].node ? r[i].node : "(none)", r[i].status,
                         r[i].error ? r[i].error : "no reason given");
        }
    }
    if (first_token)
        mlperf::FirstTokenComplete(resp.data(), n);
    else
        mlperf::QuerySamplesComplete(resp.data(), n);
}

void NetworkQDL::OnComplete(void *user, const qdl_response_t *r, size_t n)
{
    static_cast<NetworkQDL *>(user)->Deliver(r, n, false);
}

void NetworkQDL::OnFirstToken(void *user, const qdl_response_t *r, size_t n)
{
    static_cast<NetworkQDL *>(user)->Deliver(r, n, true);
}

} // namespace qdl_mlperf
