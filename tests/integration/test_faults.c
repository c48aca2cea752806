/* Faults during a run, with real sut-node processes: kill -9 during an Offline query, SIGSTOP past
 * the ping deadline, a node restarted mid-run (it rejoins), and the network between the QDL and a
 * node dropped (a relay cuts the TCP connection) or silently partitioned (the relay blackholes it).
 * Every sample must complete exactly once, or fail with a clear status; nothing hangs. */
#include "../unit/check_main.h"
#include "qdlrun.h"
#include "testnet.h"

#include "cmn/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static tn_proc_t nodes[3];
static char addrs[3][32];
static const char *addr_list[3];

static void start_sim_nodes(size_t n, const char *a_us)
{
    static const char *names[3] = {"f0", "f1", "f2"};
    size_t i;

    for (i = 0; i < n; i++) {
        const char *args[] = {"--backend", "sim",         "--name", names[i], "--backend-opt",
                              a_us,        "--max-batch", "8",      NULL};
        ck_assert_int_eq(tn_spawn(&nodes[i], SUT_NODE_EXE, args), 0);
        snprintf(addrs[i], sizeof(addrs[i]), "%s127.0.0.1:%d", tn_scheme(), nodes[i].port);
        addr_list[i] = addrs[i];
    }
}

static void stop_all(size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (nodes[i].pid > 0) {
            kill(nodes[i].pid, SIGCONT);
            tn_stop(&nodes[i], SIGTERM, 10000);
        }
        tn_cleanup(&nodes[i]);
    }
}

/* A QDL on the first |n| nodes of addr_list, marking a node down after |ping_timeout_ms| of
 * silence. */
static qdl_t *qdl_on_deadline(size_t n, unsigned ping_timeout_ms)
{
    qdl_config_t cfg;
    qdl_t *q = NULL;
    char err[512] = "";

    qdl_config_init(&cfg);
    cfg.ucx_trusted_fabric = 1; /* loopback: the tests' own fabric */
    cfg.nodes = addr_list;
    cfg.n_nodes = n;
    cfg.on_complete = on_complete;
    cfg.ping_interval_ms = 200;
    cfg.ping_timeout_ms = ping_timeout_ms;
    cfg.connect_timeout_ms = 1000;
    cfg.reconnect_max_ms = 300;
    cfg.fail_timeout_ms = 3000;
    cfg.max_part_samples = 16;
    cfg.write_thread_min = test_write_thread_min();
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "qdl_create: %s", err);
    return q;
}

/* Short deadlines, so the fault tests end quickly: down after 600 ms of silence. */
static qdl_t *qdl_on(size_t n)
{
    return qdl_on_deadline(n, 600);
}

static uint64_t total(qdl_t *q, size_t n, size_t field_offset)
{
    qdl_node_stats_t st[3];
    uint64_t sum = 0;
    size_t i;

    ck_assert_int_eq(qdl_stats(q, st, n), (int)n);
    for (i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&st[i] + field_offset, sizeof(v));
        sum += v;
    }
    return sum;
}

START_TEST(kill_during_offline_query)
{
    qdl_t *q;

    run_init(4000, 512, 0);
    start_sim_nodes(3, "a_us=2000");
    q = qdl_on(3);
    issue_range(q, 0, 4000, 4000); /* one Offline query, split into parts across the nodes */
    ck_assert_uint_ge(wait_done(800, 30000), 800);
    ck_assert_int_eq(tn_kill_hold(&nodes[2]), 0);
    ck_assert_uint_eq(wait_done(4000, 30000), 4000);
    expect_exactly_once(0);
    printf("Offline, kill -9 of one node of three: %llu samples re-dispatched\n",
           (unsigned long long)total(q, 3, offsetof(qdl_node_stats_t, redispatched)));
    ck_assert_uint_gt(total(q, 3, offsetof(qdl_node_stats_t, redispatched)), 0);
    qdl_destroy(q);
    stop_all(3);
    run_free();
}
END_TEST

START_TEST(sigstop_past_the_ping_deadline)
{
    qdl_node_stats_t st[2];
    uint64_t before;
    qdl_t *q;

    run_init(3000, 256, 0);
    start_sim_nodes(2, "a_us=1000");
    q = qdl_on(2);
    issue_paced(q, 0, 1000, 200);
    kill(nodes[1].pid, SIGSTOP);
    /* The stopped node keeps its connection open but stops answering: the QDL must notice through
     * its pings (600 ms), re-dispatch, and carry on with the other node. */
    issue_paced(q, 1000, 2000, 500);
    ck_assert_uint_ge(wait_done(2000, 30000), 2000);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    ck_assert_int_eq(st[1].up, 0);
    ck_assert_uint_gt(st[1].redispatched, 0);
    before = st[1].samples_completed;
    /* Resumed, it rejoins and takes work again. */
    kill(nodes[1].pid, SIGCONT);
    ck_assert_msg(wait_node_rejoined(q, 1, 30000), "the resumed node did not rejoin within 30 s");
    issue_paced(q, 2000, 3000, 300);
    ck_assert_uint_eq(wait_done(3000, 30000), 3000);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    printf("SIGSTOP: %llu re-dispatched; after SIGCONT the node completed %llu more (reconnects "
           "%llu)\n",
           (unsigned long long)st[1].redispatched,
           (unsigned long long)(st[1].samples_completed - before),
           (unsigned long long)st[1].reconnects);
    ck_assert_int_eq(st[1].up, 1);
    ck_assert_uint_gt(st[1].samples_completed, before);
    qdl_destroy(q);
    stop_all(2);
    run_free();
}
END_TEST

START_TEST(restart_rejoins)
{
    const char *args[] = {"--backend", "sim",         "--name", "f1", "--backend-opt",
                          "a_us=1000", "--max-batch", "8",      NULL};
    qdl_node_stats_t st[2];
    uint64_t before;
    int port;
    qdl_t *q;

    run_init(3000, 256, 0);
    start_sim_nodes(2, "a_us=1000");
    q = qdl_on(2);
    issue_paced(q, 0, 1000, 200);
    port = nodes[1].port;
    /* Held until the restart, so no node of another test takes the port meanwhile. */
    ck_assert_int_eq(tn_kill_hold(&nodes[1]), 0);
    issue_paced(q, 1000, 2000, 200);
    ck_assert_uint_ge(wait_done(2000, 30000), 2000);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    before = st[1].samples_completed;
    tn_cleanup(&nodes[1]);
    /* The node comes back on the same address; the QDL's backoff reconnects to it. */
    ck_assert_int_eq(tn_spawn_port(&nodes[1], SUT_NODE_EXE, args, port), 0);
    ck_assert_msg(wait_node_rejoined(q, 1, 30000), "the restarted node did not rejoin within 30 s");
    issue_paced(q, 2000, 3000, 300);
    ck_assert_uint_eq(wait_done(3000, 30000), 3000);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    printf("restart: node rejoined after %llu reconnects and completed %llu more samples\n",
           (unsigned long long)st[1].reconnects,
           (unsigned long long)(st[1].samples_completed - before));
    ck_assert_int_eq(st[1].up, 1);
    ck_assert_uint_ge(st[1].reconnects, 1);
    ck_assert_uint_gt(st[1].samples_completed, before);
    qdl_destroy(q);
    stop_all(2);
    run_free();
}
END_TEST

/* A node busy for longer than the ping deadline, with reading paused at its in-flight limit (so
 * it cannot see Pings), is alive: its heartbeats say so, and nothing is re-dispatched. The ping
 * deadline is ten heartbeats wide, so a loaded machine that runs the node late does not look like
 * a dead node; each batch still takes longer than the deadline. */
START_TEST(busy_node_is_not_down)
{
    const char *args[] = {
        "--backend",      "sim",         "--name", "slowpoke",       "--backend-opt",
        "a_us=3000000",   "--max-batch", "8",      "--max-inflight", "8",
        "--heartbeat-ms", "200",         NULL};
    qdl_node_stats_t st[1];
    qdl_t *q;

    run_init(16, 64, 0);
    ck_assert_int_eq(tn_spawn(&nodes[0], SUT_NODE_EXE, args), 0);
    snprintf(addrs[0], sizeof(addrs[0]), "%s127.0.0.1:%d", tn_scheme(), nodes[0].port);
    addr_list[0] = addrs[0];
    q = qdl_on_deadline(1, 2000); /* ping every 200 ms, down after 2 s of silence */
    issue_range(q, 0, 16, 16);
    ck_assert_uint_eq(wait_done(16, 30000), 16);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, 1), 1);
    ck_assert_uint_eq(st[0].reconnects, 0);
    ck_assert_uint_eq(st[0].redispatched, 0);
    qdl_destroy(q);
    stop_all(1);
    run_free();
}
END_TEST

/* fail_timeout_ms (3 s here) counts how long no node has been up, not how old a sample is: a
 * backlog that waited longer than that for a busy node must not fail when its only node goes
 * silent for a moment (marked down after 600 ms, back after a reconnect). */
START_TEST(old_backlog_survives_a_short_outage)
{
    const char *args[] = {
        "--backend",      "sim",         "--name", "blink",          "--backend-opt",
        "a_us=1000000",   "--max-batch", "8",      "--max-inflight", "8",
        "--heartbeat-ms", "200",         NULL};
    qdl_node_stats_t st[1];
    uint64_t t0, deadline;
    qdl_t *q;

    run_init(64, 64, 0);
    ck_assert_int_eq(tn_spawn(&nodes[0], SUT_NODE_EXE, args), 0);
    snprintf(addrs[0], sizeof(addrs[0]), "%s127.0.0.1:%d", tn_scheme(), nodes[0].port);
    addr_list[0] = addrs[0];
    q = qdl_on(1);
    t0 = cmn_now_ns();
    issue_range(q, 0, 64, 64);                /* 8 samples a second: most of them wait */
    while (cmn_now_ns() - t0 < 3500000000ull) /* older than fail_timeout_ms */
        usleep(10000);
    ck_assert_uint_lt(wait_done(64, 0), 56);
    kill(nodes[0].pid, SIGSTOP);
    deadline = cmn_now_ns() + 10000000000ull;
    do {
        usleep(10000);
        ck_assert_int_eq(qdl_stats(q, st, 1), 1);
    } while (st[0].up && cmn_now_ns() < deadline);
    kill(nodes[0].pid, SIGCONT);
    ck_assert_msg(!st[0].up, "the stopped node was not marked down within 10 s");
    ck_assert_uint_eq(wait_done(64, 60000), 64);
    expect_exactly_once(0); /* none failed for being old */
    ck_assert_int_eq(qdl_stats(q, st, 1), 1);
    printf("short outage: %llu reconnects, %llu re-dispatched, all 64 completed\n",
           (unsigned long long)st[0].reconnects, (unsigned long long)st[0].redispatched);
    ck_assert_uint_ge(st[0].reconnects, 1);
    qdl_destroy(q);
    stop_all(1);
    run_free();
}
END_TEST

/* ---- a TCP relay between the QDL and one node: the "network" that can fail ------------------ */

enum { RELAY_PASS, RELAY_BLACKHOLE, RELAY_CUT };

typedef struct {
    int listen_fd, port, upstream_port;
    atomic_int mode;
    atomic_int stop;
    /* Non-zero: cut (RST) once this many bytes went from the QDL towards the node. */
    atomic_llong cut_after;
    /* Bytes relayed towards the node; the test reads it while the relay still runs. */
    atomic_llong relayed;
    uv_thread_t thread;
} relay_t;

static relay_t relay;

static int relay_connect(int port)
{
    struct sockaddr_in a = tn_loopback(port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void relay_reset(int fd)
{
    struct linger l = {1, 0};
    /* An abortive close (RST), as when a link or a middlebox drops the connection. */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd);
}

static void relay_main(void *arg)
{
    int pairs[16][2], np = 0, i;
    char buf[65536];

    (void)arg;
    while (!atomic_load(&relay.stop)) {
        struct pollfd pfd[33];
        int n = 0, mode = atomic_load(&relay.mode);

        if (mode == RELAY_CUT) {
            for (i = 0; i < np; i++) {
                relay_reset(pairs[i][0]);
                relay_reset(pairs[i][1]);
            }
            np = 0;
            atomic_store(&relay.mode, RELAY_PASS);
            continue;
        }
        pfd[n].fd = relay.listen_fd;
        pfd[n++].events = POLLIN;
        for (i = 0; i < np; i++) {
            pfd[n].fd = pairs[i][0];
            pfd[n++].events = mode == RELAY_BLACKHOLE ? 0 : POLLIN;
            pfd[n].fd = pairs[i][1];
            pfd[n++].events = mode == RELAY_BLACKHOLE ? 0 : POLLIN;
        }
        int polled = np; /* pairs accepted below were not part of this poll */
        if (poll(pfd, (nfds_t)n, 20) <= 0)
            continue;
        if ((pfd[0].revents & POLLIN) && np < 16) {
            int c = accept(relay.listen_fd, NULL, NULL), u;
            if (c >= 0) {
                u = relay_connect(relay.upstream_port);
                if (u < 0) {
                    close(c);
                } else {
                    pairs[np][0] = c;
                    pairs[np][1] = u;
                    np++;
                }
            }
        }
        for (i = 0; i < polled; i++) {
            int k;
            for (k = 0; k < 2; k++) {
                struct pollfd *p = &pfd[1 + 2 * i + k];
                if (p->revents & (POLLIN | POLLHUP | POLLERR)) {
                    ssize_t r = read(pairs[i][k], buf, sizeof(buf));
                    if (r > 0 && k == 0) {
                        long long limit = atomic_load(&relay.cut_after);
                        long long sofar = atomic_fetch_add(&relay.relayed, r) + r;
                        if (limit && sofar >= limit) {
                            atomic_store(&relay.cut_after, 0);
                            atomic_store(&relay.mode, RELAY_CUT);
                        }
                    }
                    if (r <= 0 || write(pairs[i][1 - k], buf, (size_t)r) != r) {
                        close(pairs[i][0]);
                        close(pairs[i][1]);
                        /* Keep the polled pairs in front: move the last polled pair here and the
                         * last pair (maybe just accepted) into its place. */
                        pairs[i][0] = pairs[polled - 1][0];
                        pairs[i][1] = pairs[polled - 1][1];
                        pairs[polled - 1][0] = pairs[np - 1][0];
                        pairs[polled - 1][1] = pairs[np - 1][1];
                        np--;
                        polled--;
                        i = polled; /* the pollfd slots no longer match: rescan next round */
                        break;
                    }
                }
            }
        }
    }
    for (i = 0; i < np; i++) {
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
}

static void relay_start(int upstream_port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int one = 1;

    memset(&relay, 0, sizeof(relay));
    relay.upstream_port = upstream_port;
    relay.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(relay.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    a = tn_loopback(0);
    ck_assert_int_eq(bind(relay.listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(relay.listen_fd, 16), 0);
    getsockname(relay.listen_fd, (struct sockaddr *)&a, &len);
    relay.port = ntohs(a.sin_port);
    ck_assert_int_eq(uv_thread_create(&relay.thread, relay_main, NULL), 0);
}

static void relay_stop(void)
{
    atomic_store(&relay.stop, 1);
    uv_thread_join(&relay.thread);
    close(relay.listen_fd);
}

static void network_fault(int mode, const char *what)
{
    qdl_node_stats_t st[2];
    qdl_t *q;

    run_init(2500, 256, 0);
    start_sim_nodes(2, "a_us=1000");
    relay_start(nodes[1].port);
    /* The QDL reaches node 1 only through the relay. */
    snprintf(addrs[1], sizeof(addrs[1]), "127.0.0.1:%d", relay.port);
    q = qdl_on(2);
    issue_paced(q, 0, 1000, 200);
    atomic_store(&relay.mode, mode);
    issue_paced(q, 1000, 2000, 400);
    ck_assert_uint_ge(wait_done(2000, 30000), 2000);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    ck_assert_uint_gt(st[1].redispatched + st[1].samples_completed, 0);
    /* The network heals: the node is reachable again and rejoins. */
    atomic_store(&relay.mode, RELAY_PASS);
    ck_assert_msg(wait_node_rejoined(q, 1, 30000), "%s: the node did not rejoin within 30 s", what);
    issue_paced(q, 2000, 2500, 400);
    ck_assert_uint_eq(wait_done(2500, 30000), 2500);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    printf("%s: %llu re-dispatched, %llu reconnects, node up again: %s\n", what,
           (unsigned long long)st[1].redispatched, (unsigned long long)st[1].reconnects,
           st[1].up ? "yes" : "no");
    ck_assert_uint_ge(st[1].reconnects, 1);
    ck_assert_int_eq(st[1].up, 1);
    qdl_destroy(q);
    relay_stop();
    stop_all(2);
    run_free();
}

START_TEST(network_cut)
{
    network_fault(RELAY_CUT, "connection cut (RST)");
}
END_TEST

START_TEST(network_blackhole)
{
    network_fault(RELAY_BLACKHOLE, "silent partition");
}
END_TEST

/* The connection reset while the QDL is writing megabytes to it. SIGPIPE keeps its default action
 * in this process (a host program need not ignore it): the QDL must survive on its own, and every
 * sample completes once on the other node. The first write after a reset fails with ECONNRESET
 * and no signal; only a second write to the dead socket raises SIGPIPE, which happens or not by
 * timing (the loop thread blocks SIGPIPE for exactly that case), so this guards the path rather
 * than reproducing the signal on every run. */
START_TEST(reset_mid_write)
{
    qdl_node_stats_t st[2];
    qdl_t *q;

    ck_assert(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
    run_init(600, 150528, 0);
    start_sim_nodes(2, "a_us=200");
    relay_start(nodes[1].port);
    snprintf(addrs[1], sizeof(addrs[1]), "127.0.0.1:%d", relay.port);
    atomic_store(&relay.cut_after, 2ll << 20);
    q = qdl_on(2);
    issue_range(q, 0, 600, 600); /* one Offline query of ~45 MB, parts to both nodes */
    ck_assert_uint_eq(wait_done(600, 30000), 600);
    expect_exactly_once(0);
    ck_assert_int_eq(qdl_stats(q, st, 2), 2);
    printf(
        "reset mid-write: %lld bytes relayed before the RST, %llu re-dispatched, %llu reconnects\n",
        (long long)atomic_load(&relay.relayed), (unsigned long long)st[1].redispatched,
        (unsigned long long)st[1].reconnects);
    ck_assert_uint_ge(st[1].reconnects + st[1].redispatched, 1);
    qdl_destroy(q);
    relay_stop();
    stop_all(2);
    run_free();
}
END_TEST

CHECK_TCASE(tc_offline, "kill_offline", 60, kill_during_offline_query)
CHECK_TCASE(tc_sigstop, "sigstop", 60, sigstop_past_the_ping_deadline)
CHECK_TCASE(tc_restart, "restart", 60, restart_rejoins)
CHECK_TCASE(tc_busy, "busy_node", 60, busy_node_is_not_down)
CHECK_TCASE(tc_outage, "short_outage", 60, old_backlog_survives_a_short_outage)
CHECK_TCASE(tc_cut, "network_cut", 60, network_cut)
CHECK_TCASE(tc_blackhole, "network_blackhole", 60, network_blackhole)
CHECK_TCASE(tc_reset_write, "reset_mid_write", 60, reset_mid_write)

CHECK_MAIN("faults", tc_offline, tc_sigstop, tc_restart, tc_busy, tc_outage, tc_cut, tc_blackhole,
           tc_reset_write)
