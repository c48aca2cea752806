/* qdlbench: the QDL + sut-node data path without a scheduler, for profiling and for the benchmark
 * table's lower bound. Keeps --inflight single-sample queries outstanding through the QDL to the
 * given sut-node(s) (run them with --backend null) and measures each sample's round trip, exactly
 * the shape rawrr measures with plain sockets, so the two can be divided.
 *
 *   qdlbench --nodes 127.0.0.1:7000 --size 64 --inflight 1 --seconds 3
 *
 * Output: one JSON object on stdout. */
#include "qdl/qdl.h"

#include "cmn/clock.h"
#include "cmn/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define MAX_NODES 16

static struct {
    uv_mutex_t mu;
    uv_cond_t cv;
    uint64_t *sent_ns; /* per slot */
    uint64_t *rtt;
    size_t n_rtt, cap_rtt;
    size_t free_slots;
    size_t *free_list;
    atomic_uint_fast64_t completions;
    uint64_t failures;
} B;

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns();
    size_t i;

    (void)user;
    uv_mutex_lock(&B.mu);
    for (i = 0; i < n; i++) {
        size_t slot = (size_t)r[i].response_id;
        if (r[i].status != 0)
            B.failures++;
        if (B.n_rtt < B.cap_rtt)
            B.rtt[B.n_rtt++] = now - B.sent_ns[slot];
        B.free_list[B.free_slots++] = slot;
    }
    uv_cond_signal(&B.cv);
    uv_mutex_unlock(&B.mu);
    atomic_fetch_add(&B.completions, n);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    printf("Usage: qdlbench --nodes HOST:PORT[,HOST:PORT...] [--size BYTES] [--inflight N] "
           "[--seconds S]\n"
           "                [--connections N] [--name-calls N]\n"
           "Keeps N single-sample queries outstanding through the QDL to the sut-node(s) and "
           "prints one\n"
           "JSON object with samples/s, bytes/s and round-trip percentiles (us).\n"
           "With --name-calls N it instead times N calls of Name() (a NameRequest round trip to "
           "every\n"
           "node) and prints their percentiles (us).\n");
}

int main(int argc, char **argv)
{
    const char *nodes[MAX_NODES];
    char *list = NULL, *tok, *save = NULL, err[512] = "";
    size_t n_nodes = 0, size = 64, inflight = 1, name_calls = 0, i;
    unsigned conns = 1;
    double seconds = 3;
    qdl_config_t cfg;
    qdl_t *q = NULL;
    uint8_t *data;
    uint64_t start, end, done;

    for (i = 1; i < (size_t)argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        }
        if (i + 1 >= (size_t)argc) {
            fprintf(stderr, "qdlbench: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--nodes"))
            list = strdup(argv[++i]);
        else if (!strcmp(argv[i], "--size"))
            size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--inflight"))
            inflight = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--connections"))
            conns = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--name-calls"))
            name_calls = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "qdlbench: unknown option %s (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!list || !size || !inflight || seconds <= 0) {
        fprintf(stderr, "qdlbench: --nodes is required; sizes and durations must be positive\n");
        return 2;
    }
    for (tok = strtok_r(list, ",", &save); tok && n_nodes < MAX_NODES;
         tok = strtok_r(NULL, ",", &save))
        nodes[n_nodes++] = tok;
    cmn_log_init("qdlbench", CMN_LOG_WARN);
    uv_mutex_init(&B.mu);
    uv_cond_init(&B.cv);
    B.sent_ns = calloc(inflight, sizeof(uint64_t));
    B.free_list = calloc(inflight, sizeof(size_t));
    B.cap_rtt = 1u << 24;
    B.rtt = malloc(B.cap_rtt * sizeof(uint64_t));
    data = calloc(1, size);
    for (i = 0; i < inflight; i++)
        B.free_list[B.free_slots++] = i;

    qdl_config_init(&cfg);
    cfg.nodes = nodes;
    cfg.n_nodes = n_nodes;
    cfg.connections_per_node = conns;
    cfg.on_complete = on_complete;
    if (qdl_create(&cfg, &q, err, sizeof(err)) < 0) {
        fprintf(stderr, "qdlbench: %s\n", err);
        return 1;
    }
    if (name_calls) {
        uint64_t *ns = calloc(name_calls, sizeof(*ns));
        char name[1024];
        for (i = 0; i < name_calls; i++) {
            if (qdl_name(q, name, sizeof(name), &ns[i], err, sizeof(err)) < 0) {
                fprintf(stderr, "qdlbench: Name(): %s\n", err);
                return 1;
            }
        }
        qsort(ns, name_calls, sizeof(*ns), cmp_u64);
        printf("{\"tool\": \"qdlbench\", \"mode\": \"name\", \"nodes\": %zu, \"calls\": %zu, "
               "\"name_p50_us\": %.2f, \"name_p99_us\": %.2f, \"name\": \"%s\"}\n",
               n_nodes, name_calls, (double)ns[name_calls / 2] / 1e3,
               (double)ns[(size_t)((double)name_calls * 0.99)] / 1e3, name);
        free(ns);
        qdl_destroy(q);
        free(list);
        return 0;
    }
    /* The issuing thread behaves like a closed-loop scheduler: issue whenever a slot is free. */
    cmn_timer_slack_min();
    start = cmn_now_ns();
    end = start + (uint64_t)(seconds * 1e9);
    for (;;) {
        size_t slot;
        qdl_sample_t s;
        uv_mutex_lock(&B.mu);
        while (B.free_slots == 0)
            uv_cond_wait(&B.cv, &B.mu);
        slot = B.free_list[--B.free_slots];
        uv_mutex_unlock(&B.mu);
        if (cmn_now_ns() >= end)
            break;
        B.sent_ns[slot] = cmn_now_ns();
        s.response_id = slot;
        s.data = data;
        s.size = s.raw_size = size;
        s.codec = 0;
        qdl_issue_query(q, &s, 1);
    }
    done = atomic_load(&B.completions);
    end = cmn_now_ns();
    /* Let the last ones land before the QDL goes. */
    uv_mutex_lock(&B.mu);
    while (B.free_slots + 1 < inflight)
        uv_cond_wait(&B.cv, &B.mu);
    uv_mutex_unlock(&B.mu);
    qdl_destroy(q);
    qsort(B.rtt, B.n_rtt, sizeof(uint64_t), cmp_u64);
    {
        double secs = (double)(end - start) / 1e9;
        printf("{\"tool\": \"qdlbench\", \"size\": %zu, \"inflight\": %zu, \"nodes\": %zu, "
               "\"connections\": %u, "
               "\"samples\": %llu, \"failures\": %llu, \"seconds\": %.3f, \"req_per_s\": %.1f, "
               "\"bytes_per_s\": %.1f, "
               "\"rtt_p50_us\": %.2f, \"rtt_p99_us\": %.2f}\n",
               size, inflight, n_nodes, conns, (unsigned long long)done,
               (unsigned long long)B.failures, secs, (double)done / secs,
               (double)done * (double)size / secs, B.n_rtt ? (double)B.rtt[B.n_rtt / 2] / 1e3 : 0.0,
               B.n_rtt ? (double)B.rtt[(size_t)((double)B.n_rtt * 0.99)] / 1e3 : 0.0);
    }
    free(list);
    return 0;
}
