/* Prometheus metrics over HTTP (libmicrohttpd, on its own thread): GET /metrics returns the text
 * exposition format. The loop thread publishes a snapshot of the node's counters every tick
 * (sut__metrics_publish); a scrape reads the latest one under a mutex, so it never touches loop
 * state. Values are therefore up to one tick (250 ms) old. */
#ifndef SUT_METRICS_H
#define SUT_METRICS_H

#include "cmn/err.h"

#include <stdint.h>
#include <uv.h>

/* Upper bounds of the histogram buckets (+Inf is implicit). */
#define SUT_BATCH_BUCKETS 11   /* 1, 2, 4, ... 1024 samples */
#define SUT_LATENCY_BUCKETS 14 /* 100 us ... 10 s */

extern const double sut__latency_bounds_s[SUT_LATENCY_BUCKETS];

/* Cumulative counts per bucket (+Inf last), the sum and the count: Prometheus' histogram. */
typedef struct {
    uint64_t batch_size[SUT_BATCH_BUCKETS + 1];
    uint64_t batch_size_sum;
    uint64_t latency[SUT_LATENCY_BUCKETS + 1];
    double latency_sum_s;
} sut_histograms_t;

typedef struct {
    uint64_t queries, samples, batches;
    uint64_t bytes_in, bytes_out;
    uint64_t decode_ns, queue_ns, infer_ns, encode_ns;
    uint64_t errors, samples_failed, samples_rejected;
    uint64_t connections_total;
    uint32_t connections_open;
    uint32_t inflight_samples;
    uint64_t memory_used, memory_peak, memory_limit, memory_budget;
    sut_histograms_t h;
} sut_metrics_values_t;

/* Bucket index for a batch of |n| samples and for a latency of |ns|. */
unsigned sut__batch_bucket(uint64_t n);
unsigned sut__latency_bucket(uint64_t ns);

typedef struct sut_metrics sut_metrics_t;

/* Serves /metrics on |addr| (ADDR:PORT, port 0 for any). Returns 0 or a negative code with a
 * reason in |eb|; *port gets the bound port. */
int sut__metrics_start(sut_metrics_t **out, const char *addr, const char *node_name, int *port,
                       cmn_errbuf_t *eb);
/* Replaces the snapshot scrapes read (loop thread). */
void sut__metrics_publish(sut_metrics_t *m, const sut_metrics_values_t *v);
void sut__metrics_stop(sut_metrics_t *m);

#endif
