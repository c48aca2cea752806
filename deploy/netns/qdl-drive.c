/* qdl-drive: a small QDL client that drives sut-nodes with an Offline burst or a Server-like
 * Poisson stream and reports samples/s and latency percentiles. It is the fabric's smoke test and
 * the compression benchmark's client where loadgen-node is not built; it is not LoadGen and writes
 * no MLPerf logs (its PASS is "every sample completed once, correctly, and p99 within the bound").
 *
 *   qdl-drive --nodes 10.77.0.11:7000,10.77.0.12:7000 --scenario Offline --samples 2000 \
 *       --qsl-raw fmnist.raw --sample-size 150528 --compress lz4 --verify-digest
 *   qdl-drive --nodes ... --scenario Server --qps 500 --duration-ms 2000 --target-latency-ms 50
 *
 * Output: a human summary on stderr, one JSON object on stdout; with --latency-csv a per-sample
 * file "sample_seq,scheduled_ns,latency_ns" (scheduled_ns from the start of the run), which
 * deploy/plot/latplot.py reads. Exit status: 0 PASS, 1 FAIL, 2 bad arguments, 3 could not run. */
#include "cmn/clock.h"
#include "cmn/conf.h"
#include "cmn/digest.h"
#include "cmn/err.h"
#include "cmn/log.h"
#include "cmpr/cmpr.h"
#include "qdl/qdl.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NORUN = 3 };

static const char usage_text[] =
    "Usage: qdl-drive --nodes H:P[,H:P...] --scenario Offline|Server\n"
    "                 (--qsl-raw FILE | --qsl-synthetic N) --sample-size BYTES [OPTIONS]\n"
    "\n"
    "Drives sut-node daemons through the QDL: an Offline burst (one query of --samples samples,\n"
    "split across the nodes by the QDL) or a Server stream (one sample per query, Poisson\n"
    "arrivals at --qps for --duration-ms). Prints a summary on stderr and one JSON object on\n"
    "stdout. PASS (exit 0) when every sample completed exactly once without error (with the\n"
    "right digest under --verify-digest) and, for Server, the 99th percentile latency is within\n"
    "--target-latency-ms. Exit 1 FAIL, 2 bad arguments, 3 the run could not start.\n"
    "\n"
    "Options:\n"
    "  --nodes LIST              sut-node addresses, comma-separated\n"
    "  --connections N           connections per node (default 1)\n"
    "  --scenario S              Offline or Server\n"
    "  --qsl-raw FILE            back-to-back samples of --sample-size bytes\n"
    "  --qsl-synthetic N         N generated samples of --sample-size bytes\n"
    "  --synthetic-kind K        random (default) or image (smooth, compressible bytes)\n"
    "  --sample-size BYTES       bytes per sample (K/M suffixes)\n"
    "  --qsl-count N             load at most N samples from --qsl-raw (default all)\n"
    "  --compress none|lz4       compress each sample once at load time (untimed, as the QSL "
    "does)\n"
    "  --result-codec none|lz4   codec offered for responses\n"
    "  --samples N               Offline: samples in the query (default 2000)\n"
    "  --qps Q                   Server: arrival rate (default 200)\n"
    "  --duration-ms MS          Server: length of the stream (default 2000)\n"
    "  --target-latency-ms MS    Server: bound on the 99th percentile (default 100)\n"
    "  --verify-digest           check each response against the digest of its sample (use the\n"
    "                            sut-node digest backend)\n"
    "  --latency-csv FILE        write sample_seq,scheduled_ns,latency_ns per sample\n"
    "  --timeout-ms MS           give up on outstanding samples after this (default 60000)\n"
    "  --seed N                  seed of the arrival times and synthetic bytes (default 1)\n"
    "  --quiet                   no summary on stderr (the JSON still goes to stdout)\n"
    "  --help                    this text\n";

typedef struct {
    /* QSL: raw samples and what goes on the wire for each. */
    size_t qsl_n, sample_size;
    uint8_t *raw;
    uint8_t **wire;
    size_t *wire_size;
    int *codec;
    uint64_t *digest;

    /* Issued samples, indexed by response id (the issue sequence number). */
    size_t total;
    uint64_t *sched_ns, *done_ns;
    int *status;
    int *times_done;
    int verify;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done, failed, bad_digest, dup, unknown;
} drive_t;

static drive_t D;

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns();
    size_t i;

    (void)user;
    pthread_mutex_lock(&D.mu);
    for (i = 0; i < n; i++) {
        uint64_t id = r[i].response_id;
        if (id >= D.total) {
            D.unknown++;
            continue;
        }
        if (D.times_done[id]++) {
            D.dup++;
            continue;
        }
        D.done_ns[id] = now;
        D.status[id] = r[i].status;
        if (r[i].status != 0) {
            D.failed++;
        } else if (D.verify) {
            const uint8_t *d = r[i].data;
            if (r[i].size != 8 || cmn_digest_get(d) != D.digest[id % D.qsl_n])
                D.bad_digest++;
        }
        D.done++;
    }
    if (D.done >= D.total)
        pthread_cond_broadcast(&D.cv);
    pthread_mutex_unlock(&D.mu);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* Image-like bytes: smooth gradients with a little noise, so LZ4 finds some redundancy. */
static void synth_fill(uint8_t *p, size_t n, int image, uint64_t *seed)
{
    size_t j;
    if (!image) {
        for (j = 0; j < n; j++)
            p[j] = (uint8_t)(xorshift(seed) >> 24);
        return;
    }
    {
        unsigned base = (unsigned)(xorshift(seed) & 0xff);
        for (j = 0; j < n; j++) {
            unsigned v = base + (unsigned)((j / 224) & 0x3f) + (unsigned)((j % 224) >> 3);
            if ((xorshift(seed) & 7) == 0)
                v += (unsigned)(xorshift(seed) & 3);
            p[j] = (uint8_t)v;
        }
    }
}

static int load_qsl(const char *raw_path, uint64_t synth_n, int image, uint64_t count_cap,
                    int codec, uint64_t seed)
{
    cmpr_ctx_t *ctx = NULL;
    size_t i;

    if (raw_path) {
        FILE *f = fopen(raw_path, "rb");
        long len;

        if (!f) {
            fprintf(stderr, "qdl-drive: cannot open %s: %s\n", raw_path, strerror(errno));
            return -1;
        }
        fseek(f, 0, SEEK_END);
        len = ftell(f);
        fseek(f, 0, SEEK_SET);
        if (len <= 0 || (size_t)len % D.sample_size != 0) {
            fprintf(stderr, "qdl-drive: %s has %ld bytes, not a multiple of --sample-size %zu\n",
                    raw_path, len, D.sample_size);
            fclose(f);
            return -1;
        }
        D.qsl_n = (size_t)len / D.sample_size;
        if (count_cap && D.qsl_n > count_cap)
            D.qsl_n = (size_t)count_cap;
        D.raw = malloc(D.qsl_n * D.sample_size);
        if (!D.raw || fread(D.raw, D.sample_size, D.qsl_n, f) != D.qsl_n) {
            fprintf(stderr, "qdl-drive: cannot read %zu samples from %s\n", D.qsl_n, raw_path);
            fclose(f);
            return -1;
        }
        fclose(f);
    } else {
        D.qsl_n = (size_t)synth_n;
        D.raw = malloc(D.qsl_n * D.sample_size);
        if (!D.raw) {
            fprintf(stderr, "qdl-drive: out of memory for %zu samples\n", D.qsl_n);
            return -1;
        }
        for (i = 0; i < D.qsl_n; i++)
            synth_fill(D.raw + i * D.sample_size, D.sample_size, image, &seed);
    }
    D.wire = calloc(D.qsl_n, sizeof(*D.wire));
    D.wire_size = calloc(D.qsl_n, sizeof(*D.wire_size));
    D.codec = calloc(D.qsl_n, sizeof(*D.codec));
    D.digest = calloc(D.qsl_n, sizeof(*D.digest));
    if (!D.wire || !D.wire_size || !D.codec || !D.digest)
        return -1;
    if (codec != CMPR_NONE)
        ctx = cmpr_ctx_new();
    for (i = 0; i < D.qsl_n; i++) {
        uint8_t *src = D.raw + i * D.sample_size;
        D.digest[i] = cmn_digest64(src, D.sample_size);
        D.wire[i] = src;
        D.wire_size[i] = D.sample_size;
        if (ctx) {
            size_t cap = cmpr_bound(codec, D.sample_size);
            uint8_t *c = malloc(cap);
            long k = c ? cmpr_compress(ctx, codec, src, D.sample_size, c, cap) : 0;
            if (k > 0) {
                D.wire[i] = c;
                D.wire_size[i] = (size_t)k;
                D.codec[i] = codec;
            } else {
                free(c);
            }
        }
    }
    cmpr_ctx_free(ctx);
    return 0;
}

/* Frees everything load_qsl() and the schedule allocated (any subset of it). */
static void drive_free(void)
{
    size_t k;

    for (k = 0; D.wire && k < D.qsl_n; k++)
        if (D.wire[k] && D.wire[k] != D.raw + k * D.sample_size)
            free(D.wire[k]);
    free(D.wire);
    free(D.wire_size);
    free(D.codec);
    free(D.digest);
    free(D.raw);
    free(D.sched_ns);
    free(D.done_ns);
    free(D.status);
    free(D.times_done);
    memset(&D, 0, sizeof(D));
}

static qdl_sample_t sample_at(uint64_t seq)
{
    qdl_sample_t s;
    size_t k = (size_t)(seq % D.qsl_n);

    s.response_id = seq;
    s.data = D.wire[k];
    s.size = D.wire_size[k];
    s.codec = D.codec[k];
    s.raw_size = D.sample_size;
    return s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *sorted, size_t n, double p)
{
    size_t k;
    if (n == 0)
        return 0;
    /* The same rank LoadGen uses: the sample at index floor(p * n), capped. */
    k = (size_t)(p * (double)n);
    return sorted[k < n ? k : n - 1];
}

static int split_nodes(char *list, const char **out, size_t cap, size_t *n)
{
    char *save = NULL, *tok;

    *n = 0;
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == cap)
            return -1;
        out[(*n)++] = tok;
    }
    return *n ? 0 : -1;
}

#define MAX_NODES 64

int main(int argc, char **argv)
{
    const char *scenario = NULL, *raw_path = NULL, *csv_path = NULL, *kind = "random";
    const char *nodes[MAX_NODES];
    char *node_list = NULL, err[512], name[4096];
    uint64_t synth_n = 0, sample_size = 0, samples = 2000, duration_ms = 2000, seed = 1;
    uint64_t conns = 1, qsl_cap = 0, timeout_ms = 60000, name_ns = 0;
    double qps = 200, target_ms = 100;
    int codec = CMPR_NONE, result_codec = CMPR_NONE, quiet = 0, offline, pass, rc, i;
    size_t n_nodes = 0, k, n_ok;
    qdl_config_t cfg;
    qdl_t *q = NULL;
    uint64_t t0, t_end, *lat;
    double wire_mean = 0, secs, sps;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return EXIT_PASS;
        }
        if (strcmp(a, "--verify-digest") == 0) {
            D.verify = 1;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "qdl-drive: unknown option or missing value: %s (see --help)\n", a);
            return EXIT_USAGE;
        }
        if (strcmp(a, "--nodes") == 0)
            node_list = argv[i + 1]; /* argv strings are writable: split in place */
        else if (strcmp(a, "--scenario") == 0)
            scenario = v;
        else if (strcmp(a, "--qsl-raw") == 0)
            raw_path = v;
        else if (strcmp(a, "--qsl-synthetic") == 0)
            bad = cmn_parse_u64(v, &synth_n) < 0 || synth_n == 0;
        else if (strcmp(a, "--synthetic-kind") == 0)
            kind = v, bad = strcmp(v, "random") != 0 && strcmp(v, "image") != 0;
        else if (strcmp(a, "--sample-size") == 0)
            bad = cmn_parse_size(v, &sample_size) < 0 || sample_size == 0;
        else if (strcmp(a, "--qsl-count") == 0)
            bad = cmn_parse_u64(v, &qsl_cap) < 0;
        else if (strcmp(a, "--compress") == 0)
            bad = cmpr_codec_parse(v, &codec) < 0;
        else if (strcmp(a, "--result-codec") == 0)
            bad = cmpr_codec_parse(v, &result_codec) < 0;
        else if (strcmp(a, "--connections") == 0)
            bad = cmn_parse_u64(v, &conns) < 0 || conns == 0 || conns > 64;
        else if (strcmp(a, "--samples") == 0)
            bad = cmn_parse_u64(v, &samples) < 0 || samples == 0;
        else if (strcmp(a, "--qps") == 0)
            bad = cmn_parse_double(v, &qps) < 0 || !(qps > 0);
        else if (strcmp(a, "--duration-ms") == 0)
            bad = cmn_parse_u64(v, &duration_ms) < 0 || duration_ms == 0;
        else if (strcmp(a, "--target-latency-ms") == 0)
            bad = cmn_parse_double(v, &target_ms) < 0 || !(target_ms > 0);
        else if (strcmp(a, "--latency-csv") == 0)
            csv_path = v;
        else if (strcmp(a, "--timeout-ms") == 0)
            bad = cmn_parse_u64(v, &timeout_ms) < 0 || timeout_ms == 0;
        else if (strcmp(a, "--seed") == 0)
            bad = cmn_parse_u64(v, &seed) < 0;
        else {
            fprintf(stderr, "qdl-drive: unknown option %s (see --help)\n", a);
            return EXIT_USAGE;
        }
        if (bad) {
            fprintf(stderr, "qdl-drive: %s %s: not a valid value (see --help)\n", a, v);
            return EXIT_USAGE;
        }
        i++;
    }
    if (!node_list || split_nodes(node_list, nodes, MAX_NODES, &n_nodes) < 0) {
        fprintf(stderr, "qdl-drive: --nodes H:P[,H:P...] is required (at most %d)\n", MAX_NODES);
        return EXIT_USAGE;
    }
    if (!scenario || (strcmp(scenario, "Offline") != 0 && strcmp(scenario, "Server") != 0)) {
        fprintf(stderr, "qdl-drive: --scenario must be Offline or Server\n");
        return EXIT_USAGE;
    }
    if ((!raw_path) == (!synth_n) || !sample_size) {
        fprintf(stderr, "qdl-drive: give one of --qsl-raw or --qsl-synthetic, and --sample-size\n");
        return EXIT_USAGE;
    }
    offline = strcmp(scenario, "Offline") == 0;
    /* A node that closes a connection must not kill the client when the QDL writes to it next:
     * the QDL sees the error and re-dispatches. (libuv writes without MSG_NOSIGNAL.) */
    signal(SIGPIPE, SIG_IGN);
    cmn_log_init("qdl-drive", quiet ? CMN_LOG_ERROR : CMN_LOG_WARN);

    D.sample_size = (size_t)sample_size;
    if (load_qsl(raw_path, synth_n, strcmp(kind, "image") == 0, qsl_cap, codec, seed) < 0) {
        drive_free();
        return EXIT_NORUN;
    }
    for (k = 0; k < D.qsl_n; k++)
        wire_mean += (double)D.wire_size[k];
    wire_mean /= (double)D.qsl_n;

    /* The schedule: every sample's time from the start of the run. */
    if (offline) {
        D.total = (size_t)samples;
    } else {
        double t = 0, end = (double)duration_ms * 1e6;
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
        size_t cap = (size_t)(qps * (double)duration_ms / 1000.0 * 1.5) + 64;
        D.sched_ns = calloc(cap, sizeof(uint64_t));
        while (D.sched_ns && D.total < cap) {
            double u = ((double)(xorshift(&s) >> 11) + 0.5) / 9007199254740992.0;
            t += -log(u) / qps * 1e9;
            if (t >= end)
                break;
            D.sched_ns[D.total++] = (uint64_t)t;
        }
    }
    if (!D.sched_ns)
        D.sched_ns = calloc(D.total ? D.total : 1, sizeof(uint64_t));
    D.done_ns = calloc(D.total ? D.total : 1, sizeof(uint64_t));
    D.status = calloc(D.total ? D.total : 1, sizeof(int));
    D.times_done = calloc(D.total ? D.total : 1, sizeof(int));
    lat = calloc(D.total ? D.total : 1, sizeof(uint64_t));
    if (!D.sched_ns || !D.done_ns || !D.status || !D.times_done || !lat || D.total == 0) {
        fprintf(stderr, "qdl-drive: nothing to issue or out of memory\n");
        free(lat);
        drive_free();
        return EXIT_NORUN;
    }
    pthread_mutex_init(&D.mu, NULL);
    pthread_cond_init(&D.cv, NULL);

    qdl_config_init(&cfg);
    cfg.nodes = nodes;
    cfg.n_nodes = n_nodes;
    cfg.connections_per_node = (unsigned)conns;
    cfg.result_codec = result_codec;
    cfg.on_complete = on_complete;
    cfg.client_name = "qdl-drive";
    rc = qdl_create(&cfg, &q, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "qdl-drive: cannot reach the nodes: %s\n", err);
        free(lat);
        drive_free();
        return EXIT_NORUN;
    }
    rc = qdl_name(q, name, sizeof(name), &name_ns, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "qdl-drive: Name() failed: %s\n", err);
        qdl_destroy(q);
        free(lat);
        drive_free();
        return EXIT_NORUN;
    }

    cmn_timer_slack_min();
    t0 = cmn_now_ns();
    if (offline) {
        qdl_sample_t *s = malloc(D.total * sizeof(*s));
        if (!s) {
            fprintf(stderr, "qdl-drive: out of memory\n");
            qdl_destroy(q);
            free(lat);
            drive_free();
            return EXIT_NORUN;
        }
        for (k = 0; k < D.total; k++)
            s[k] = sample_at(k);
        rc = qdl_issue_query(q, s, D.total);
        free(s);
    } else {
        for (k = 0; k < D.total && rc == 0; k++) {
            qdl_sample_t s = sample_at(k);
            cmn_sleep_until_ns(t0 + D.sched_ns[k], 30000);
            rc = qdl_issue_query(q, &s, 1);
        }
    }
    if (rc < 0)
        fprintf(stderr, "qdl-drive: issue failed: %s\n", cmn_strerror(rc));
    qdl_flush(q);

    pthread_mutex_lock(&D.mu);
    {
        uint64_t deadline = cmn_now_ns() + timeout_ms * 1000000u;
        while (D.done < D.total && cmn_now_ns() < deadline) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&D.cv, &D.mu, &ts);
        }
    }
    pthread_mutex_unlock(&D.mu);
    if (!quiet)
        qdl_stats_print(q, stderr);
    qdl_destroy(q);

    /* Results: only samples that completed successfully count towards rates and latencies. */
    t_end = t0;
    n_ok = 0;
    for (k = 0; k < D.total; k++) {
        if (D.times_done[k] == 0 || D.status[k] != 0)
            continue;
        if (D.done_ns[k] > t_end)
            t_end = D.done_ns[k];
        lat[n_ok++] = D.done_ns[k] - (t0 + D.sched_ns[k]);
    }
    if (csv_path) {
        FILE *f = fopen(csv_path, "w");
        if (!f) {
            fprintf(stderr, "qdl-drive: cannot write %s: %s\n", csv_path, strerror(errno));
        } else {
            fprintf(f, "sample_seq,scheduled_ns,latency_ns\n");
            for (k = 0; k < D.total; k++)
                if (D.times_done[k] && D.status[k] == 0)
                    fprintf(f, "%zu,%llu,%llu\n", k, (unsigned long long)D.sched_ns[k],
                            (unsigned long long)(D.done_ns[k] - (t0 + D.sched_ns[k])));
            fclose(f);
        }
    }
    qsort(lat, n_ok, sizeof(uint64_t), cmp_u64);
    secs = (double)(t_end - t0) / 1e9;
    sps = secs > 0 ? (double)n_ok / secs : 0;
    pass = D.done == D.total && D.failed == 0 && D.bad_digest == 0 && D.dup == 0 &&
           D.unknown == 0 && strstr(name, "Network SUT") != NULL;
    if (!offline && (double)pct(lat, n_ok, 0.99) > target_ms * 1e6)
        pass = 0;

    if (!quiet) {
        fprintf(stderr,
                "qdl-drive: %s against %s\n"
                "  samples              : %zu issued, %zu completed, %zu failed, %zu wrong digest\n"
                "  sample bytes         : %zu raw, %.0f mean on the wire (%s, ratio %.3f)\n"
                "  samples per second   : %.1f (%.1f MB/s of raw sample data)\n"
                "  latency p50/p90/p99  : %.3f / %.3f / %.3f ms (max %.3f ms)\n"
                "  Name() round trips   : %.1f us\n"
                "  result               : %s\n",
                scenario, name, D.total, D.done, D.failed, D.bad_digest, D.sample_size, wire_mean,
                cmpr_codec_name(codec), (double)D.sample_size / wire_mean, sps,
                sps * (double)D.sample_size / 1e6, (double)pct(lat, n_ok, 0.5) / 1e6,
                (double)pct(lat, n_ok, 0.9) / 1e6, (double)pct(lat, n_ok, 0.99) / 1e6,
                n_ok ? (double)lat[n_ok - 1] / 1e6 : 0.0, (double)name_ns / 1e3,
                pass ? "PASS" : "FAIL");
    }
    printf("{\"scenario\": \"%s\", \"nodes\": %zu, \"connections_per_node\": %llu, "
           "\"compress\": \"%s\", \"sample_size\": %zu, \"wire_size_mean\": %.1f, "
           "\"issued\": %zu, \"completed\": %zu, \"failed\": %zu, \"bad_digest\": %zu, "
           "\"duplicates\": %zu, \"seconds\": %.6f, \"samples_per_second\": %.2f, "
           "\"target_qps\": %.2f, \"latency_ns\": {\"p50\": %llu, \"p90\": %llu, \"p99\": %llu, "
           "\"max\": %llu}, \"name_round_trip_ns\": %llu, \"pass\": %s}\n",
           scenario, n_nodes, (unsigned long long)conns, cmpr_codec_name(codec), D.sample_size,
           wire_mean, D.total, D.done, D.failed, D.bad_digest, D.dup, secs, sps,
           offline ? 0.0 : qps, (unsigned long long)pct(lat, n_ok, 0.5),
           (unsigned long long)pct(lat, n_ok, 0.9), (unsigned long long)pct(lat, n_ok, 0.99),
           (unsigned long long)(n_ok ? lat[n_ok - 1] : 0), (unsigned long long)name_ns,
           pass ? "true" : "false");

    free(lat);
    pthread_cond_destroy(&D.cv);
    pthread_mutex_destroy(&D.mu);
    drive_free();
    return pass ? EXIT_PASS : EXIT_FAIL;
}
