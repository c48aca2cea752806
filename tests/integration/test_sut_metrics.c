/* sut-node's observability: Debian's real Prometheus server scrapes `--metrics-listen` and its HTTP
 * API returns the node's series (skipped, exit 77, where prometheus cannot run); and
 * `sut-node --stats HOST:PORT` prints a running node's counters. */
#include "../unit/check_main.h"
#include "testnet.h"

#include "cmn/clock.h"
#include "cmpr/cmpr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Three 64-byte samples answered by the node. */
static void serve_three(int port)
{
    static const uint8_t bytes[3][64] = {{1}, {2}, {3}};
    const void *ptrs[3] = {bytes[0], bytes[1], bytes[2]};
    size_t sizes[3] = {64, 64, 64};
    int codecs[3] = {CMPR_NONE, CMPR_NONE, CMPR_NONE}, none = CMPR_NONE;
    tn_client_t *c = malloc(sizeof(*c));
    Nsut__HelloAck *ack;
    size_t got = 0;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(tn_connect(c, port), 0);
    ack = tn_handshake(c, &none, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    ck_assert_int_eq(tn_send_query(c, 1, 1, 3, ptrs, sizes, sizes, codecs), 0);
    while (got < 3) {
        unsigned type;
        ProtobufCMessage *m;
        uint8_t *payload;
        size_t plen;
        ck_assert_int_eq(tn_recv(c, 10000, &type, &m, &payload, &plen), 0);
        if (type == CMN_MSG_RESPONSE)
            got += ((Nsut__Response *)m)->n_results;
        cmn_msg_free(m, NULL);
        free(payload);
    }
    tn_close(c);
    free(c);
}

/* The port the node serves metrics on, from its log. */
static int metrics_port(const tn_proc_t *p)
{
    uint64_t end = cmn_now_ns() + 10000000000ull;
    char line[512];
    int port = 0;

    while (!port && cmn_now_ns() < end) {
        FILE *f = fopen(p->log_path, "r");
        while (f && fgets(line, sizeof(line), f)) {
            const char *k = strstr(line, "metrics on port ");
            if (k)
                port = atoi(k + strlen("metrics on port "));
        }
        if (f)
            fclose(f);
        if (!port)
            usleep(20000);
    }
    return port;
}

/* GET |path| from 127.0.0.1:|port| (HTTP/1.0); the body into |out|. Returns 0 or -1. */
static int http_get(int port, const char *path, char *out, size_t cap)
{
    struct sockaddr_in a;
    char req[512];
    size_t have = 0;
    ssize_t n;
    char *body;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    while (have + 1 < cap && (n = read(fd, out + have, cap - 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    out[have] = '\0';
    body = strstr(out, "\r\n\r\n");
    if (!body || strncmp(out, "HTTP/1.", 7) != 0 || strncmp(out + 9, "200", 3) != 0)
        return -1;
    memmove(out, body + 4, strlen(body + 4) + 1);
    return 0;
}

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

START_TEST(prometheus_scrape)
{
    const char *args[] = {"--backend",        "digest",      "--name", "metrics-node",
                          "--metrics-listen", "127.0.0.1:0", NULL};
    char dir[] = "/tmp/sut_prom_XXXXXX", path[512], cfg[256], data[256], web[64], logp[256];
    static char body[1 << 16];
    tn_proc_t p;
    int mport, pport, found = 0;
    pid_t prom;
    FILE *f;
    uint64_t end;

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    mport = metrics_port(&p);
    ck_assert_int_gt(mport, 0);
    serve_three(p.port);
    /* The endpoint itself, as the text format. */
    ck_assert_int_eq(http_get(mport, "/metrics", body, sizeof(body)), 0);
    ck_assert_ptr_nonnull(strstr(body, "# TYPE sut_batch_size histogram"));
    ck_assert_ptr_nonnull(strstr(body, "sut_node_info{node=\"metrics-node\"} 1"));

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", dir);
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(logp, sizeof(logp), "%s/prometheus.log", dir);
    f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            "  - job_name: sut\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
            mport);
    fclose(f);
    pport = free_port();
    snprintf(web, sizeof(web), "--web.listen-address=127.0.0.1:%d", pport);
    snprintf(path, sizeof(path), "--config.file=%s", cfg);
    prom = fork();
    ck_assert_int_ge(prom, 0);
    if (prom == 0) {
        char st[300];
        FILE *lf = freopen(logp, "w", stderr);
        (void)lf;
        snprintf(st, sizeof(st), "--storage.tsdb.path=%s", data);
        execlp("prometheus", "prometheus", path, st, web, (char *)NULL);
        _exit(127);
    }
    /* The scraped series, through Prometheus' own query API. */
    end = cmn_now_ns() + 40000000000ull;
    while (!found && cmn_now_ns() < end) {
        if (http_get(pport, "/api/v1/query?query=sut_samples_total", body, sizeof(body)) == 0 &&
            strstr(body, "\"job\":\"sut\"") && strstr(body, "\"3\"]"))
            found = 1;
        else
            usleep(200000);
    }
    ck_assert_msg(found, "prometheus never returned sut_samples_total 3 (last answer: %.300s)",
                  body);
    ck_assert_int_eq(
        http_get(pport, "/api/v1/query?query=sut_latency_seconds_count", body, sizeof(body)), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"3\"]"));
    ck_assert_int_eq(
        http_get(pport, "/api/v1/query?query=sut_memory_budget_bytes", body, sizeof(body)), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"job\":\"sut\""));
    kill(prom, SIGTERM);
    ck_assert_int_eq(waitpid(prom, NULL, 0), prom);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    ck_assert_int_eq(system(path), 0);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

START_TEST(stats_command)
{
    const char *args[] = {"--backend", "digest", NULL};
    char cmd[512], line[256];
    int samples = -1, rc;
    tn_proc_t p;
    FILE *f;

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    serve_three(p.port);
    snprintf(cmd, sizeof(cmd), "%s --stats 127.0.0.1:%d", SUT_NODE_EXE, p.port);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f))
        sscanf(line, "samples %d", &samples);
    rc = pclose(f);
    ck_assert_int_eq(WEXITSTATUS(rc), 0);
    ck_assert_int_eq(samples, 3);
    /* Nothing listening: a clear failure, exit 1. */
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    snprintf(cmd, sizeof(cmd), "%s --stats 127.0.0.1:%d 2>/dev/null", SUT_NODE_EXE, p.port);
    rc = system(cmd);
    ck_assert_int_eq(WEXITSTATUS(rc), 1);
    tn_cleanup(&p);
}
END_TEST

static TCase *tc_prometheus(void)
{
    TCase *t = tcase_create("prometheus");
    tcase_add_test(t, prometheus_scrape);
    tcase_set_timeout(t, 90);
    return t;
}

static TCase *tc_stats(void)
{
    TCase *t = tcase_create("stats_command");
    tcase_add_test(t, stats_command);
    return t;
}

static int prometheus_runs(void)
{
    return system("prometheus --version >/dev/null 2>&1") == 0;
}

/* The prometheus case is skipped (77) where Debian's prometheus cannot run. */
int main(void)
{
    const char *only = getenv("CK_RUN_CASE");
    SRunner *sr;
    Suite *s = suite_create("sut_metrics");
    int failed;

    if (only && strcmp(only, "prometheus") == 0 && !prometheus_runs()) {
        printf("prometheus cannot run here: skipped\n");
        return 77;
    }
    suite_add_tcase(s, tc_prometheus());
    suite_add_tcase(s, tc_stats());
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    if (srunner_ntests_run(sr) == 0)
        failed = 1;
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
