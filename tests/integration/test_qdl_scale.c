/* The QDL over 64 real sut-node processes (null backend) on loopback (issue 38): every sample of
 * Server-like and Offline-like queries completes exactly once, every node takes part, and the
 * test process's resident memory (the QDL lives in it; the nodes do not) grows by at most 1 MB
 * per node from before qdl_create to the end of the run (VmHWM, from /proc). */
#include "../unit/check_main.h"
#include "qdlrun.h"
#include "testnet.h"

#include "qdl/qdl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_NODES 64
#define N_SAMPLES 20000
/* Peak RSS growth allowed per node (the bench's target, B10m). */
#define RSS_PER_NODE_KB 1024L

static tn_proc_t nodes[N_NODES];
static char addrs[N_NODES][32];
static const char *addr_list[N_NODES];

START_TEST(sixty_four_nodes_every_sample_once)
{
    static char names[N_NODES][16];
    static qdl_node_stats_t st[N_NODES];
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[256];
    long base_kb, hwm_kb;
    size_t i;

    run_init(N_SAMPLES, 256, 0);
    for (i = 0; i < N_NODES; i++) {
        const char *args[] = {"--backend", "null",   "--workers", "1", "--max-batch",
                              "8",         "--name", names[i],    NULL};

        snprintf(names[i], sizeof(names[i]), "n%02zu", i);
        ck_assert_msg(tn_spawn(&nodes[i], SUT_NODE_EXE, args) == 0, "node %zu did not start", i);
        snprintf(addrs[i], sizeof(addrs[i]), "%s127.0.0.1:%d", tn_scheme(), nodes[i].port);
        addr_list[i] = addrs[i];
    }
    base_kb = tn_hwm_reset();
    qdl_config_init(&cfg);
    cfg.ucx_trusted_fabric = 1; /* loopback: the tests' own fabric */
    cfg.nodes = addr_list;
    cfg.n_nodes = N_NODES;
    cfg.on_complete = on_complete;
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "qdl_create: %s", err);

    /* Server-like single-sample queries (each to an idle node, mostly), then Offline-like ones
     * larger than all the nodes' windows together. */
    issue_range(q, 0, N_SAMPLES / 2, 1);
    issue_range(q, N_SAMPLES / 2, N_SAMPLES, 2500);
    ck_assert_int_eq(qdl_flush(q), 0);
    ck_assert_uint_eq(wait_done(N_SAMPLES, 120000), N_SAMPLES);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, N_NODES), N_NODES);
    for (i = 0; i < N_NODES; i++) {
        ck_assert_msg(st[i].samples_completed > 0, "node %zu (%s) completed no sample", i,
                      st[i].name);
        ck_assert_msg(st[i].up == 1, "node %zu (%s) is not up", i, st[i].name);
    }
    hwm_kb = tn_status_kb("VmHWM:");
    printf("%d nodes: peak RSS %ld kB over the %ld kB before qdl_create (%ld kB per node)\n",
           N_NODES, hwm_kb - base_kb, base_kb, (hwm_kb - base_kb) / N_NODES);
    ck_assert_msg(hwm_kb - base_kb <= RSS_PER_NODE_KB * N_NODES,
                  "peak RSS grew by %ld kB over %d nodes: more than %ld kB per node",
                  hwm_kb - base_kb, N_NODES, RSS_PER_NODE_KB);
    qdl_destroy(q);
    for (i = 0; i < N_NODES; i++) {
        tn_stop(&nodes[i], SIGTERM, 10000);
        tn_cleanup(&nodes[i]);
    }
    run_free();
}
END_TEST

CHECK_TCASE(tc_scale, "scale", 200, sixty_four_nodes_every_sample_once)

CHECK_MAIN("qdl scale", tc_scale)
