/* TLS 1.3 between the QDL and sut-node: queries over TLS (small, and large mixed with small),
 * mutual TLS that rejects unauthenticated,
 * wrongly signed and unlisted clients, a QDL that rejects a node it cannot verify, and a plaintext
 * peer against a TLS node. Certificates come from deploy/tls/make-certs.sh. */
#include "../unit/check_main.h"
#include "testnet.h"

#include "cmn/clock.h"
#include "cmn/digest.h"
#include "qdl/qdl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

static char certs[64];
static char path_buf[16][160];
static int path_n;

static const char *cert(const char *name)
{
    char *p = path_buf[path_n++ % 16];
    snprintf(p, sizeof(path_buf[0]), "%s/%s", certs, name);
    return p;
}

/* A digest sut-node with the fabric's node certificate, TLS on. */
static void spawn_tls_node(tn_proc_t *p)
{
    const char *args[] = {"--backend", "digest",         "--tls-cert", cert("node.pem"),
                          "--tls-key", cert("node.key"), NULL};

    ck_assert_int_eq(tn_spawn(p, SUT_NODE_EXE, args), 0);
}

static void make_certs(void)
{
    char cmd[512];

    snprintf(certs, sizeof(certs), "/tmp/tlscerts_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(certs));
    /* The fabric's CA with a node and two clients; and an unrelated CA with its own client. */
    snprintf(cmd, sizeof(cmd),
             "%s %s >/dev/null && %s %s --client intruder >/dev/null && %s %s/other >/dev/null",
             MAKE_CERTS, certs, MAKE_CERTS, certs, MAKE_CERTS, certs);
    ck_assert_int_eq(system(cmd), 0);
}

static void remove_certs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
    ck_assert_int_eq(system(cmd), 0);
}

typedef struct {
    uv_mutex_t mu;
    size_t done, ok;
} counter_t;

static counter_t C;
/* 64 distinct samples; query k sends sample k % 64 with sample_len[k % 64] bytes. */
static uint8_t *sample_bytes[64];
static size_t sample_len[64];

static void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    size_t i;
    (void)user;
    uv_mutex_lock(&C.mu);
    for (i = 0; i < n; i++) {
        uint64_t k = r[i].response_id;
        C.done++;
        if (r[i].status == 0 && r[i].size == 8 &&
            cmn_digest_get(r[i].data) == cmn_digest64(sample_bytes[k % 64], sample_len[k % 64]))
            C.ok++;
    }
    uv_mutex_unlock(&C.mu);
}

static int try_qdl(int port, const char *ca, const char *ccert, const char *ckey, qdl_t **out,
                   char *err, size_t errlen)
{
    char addr[32];
    const char *list[1] = {addr};
    qdl_config_t cfg;

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    qdl_config_init(&cfg);
    cfg.nodes = list;
    cfg.n_nodes = 1;
    cfg.on_complete = on_complete;
    cfg.connect_timeout_ms = 3000;
    cfg.tls_ca_file = ca;
    cfg.tls_cert_file = ccert;
    cfg.tls_key_file = ckey;
    return qdl_create(&cfg, out, err, errlen);
}

/* |count| digest queries through |q|, all issued at once: every one comes back right. Every
 * |big_every|-th sample (0: none) has |big| bytes, the others 777. */
static void run_sized(qdl_t *q, size_t count, size_t big_every, size_t big)
{
    qdl_sample_t s;
    uint64_t deadline = cmn_now_ns() + 60000000000ull;
    size_t i, j;

    uv_mutex_init(&C.mu);
    C.done = C.ok = 0;
    for (i = 0; i < 64; i++) {
        sample_len[i] = big_every && i % big_every == 0 ? big : 777;
        sample_bytes[i] = malloc(sample_len[i]);
        ck_assert_ptr_nonnull(sample_bytes[i]);
        for (j = 0; j < sample_len[i]; j++)
            sample_bytes[i][j] = (uint8_t)(i * 7 + j + (j >> 8));
    }
    for (i = 0; i < count; i++) {
        s.response_id = i;
        s.data = sample_bytes[i % 64];
        s.size = s.raw_size = sample_len[i % 64];
        s.codec = 0;
        ck_assert_int_eq(qdl_issue_query(q, &s, 1), 0);
    }
    for (;;) {
        size_t done;
        uv_mutex_lock(&C.mu);
        done = C.done;
        uv_mutex_unlock(&C.mu);
        if (done == count || cmn_now_ns() > deadline)
            break;
        usleep(2000);
    }
    ck_assert_uint_eq(C.done, count);
    ck_assert_uint_eq(C.ok, count);
    uv_mutex_destroy(&C.mu);
    for (i = 0; i < 64; i++)
        free(sample_bytes[i]);
}

/* 2000 small digest queries through |q|. */
static void run_queries(qdl_t *q)
{
    run_sized(q, 2000, 0, 0);
}

START_TEST(queries_over_tls)
{
    tn_proc_t p;
    qdl_t *q = NULL;
    char err[512] = "", name[256];
    const char *args[] = {"--backend",      "digest",    "--name",         "tls-node", "--tls-cert",
                          cert("node.pem"), "--tls-key", cert("node.key"), NULL};

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    ck_assert(tn_wait_log(&p, "tls on (TLS 1.3)", 10000));
    ck_assert_msg(try_qdl(p.port, cert("ca.pem"), NULL, NULL, &q, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(qdl_name(q, name, sizeof(name), NULL, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(name, "Network SUT (1 node: tls-node)"));
    run_queries(q);
    qdl_destroy(q);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

/* Large frames (decrypted straight into place, encrypted past the 1 MiB of ciphertext the
 * transport lets wait for the socket) mixed with small ones (gathered into shared records): 640
 * samples, a quarter of them 300 001 B (not a multiple of a record), about 48 MB in all, issued
 * at once; every digest comes back right. */
START_TEST(large_samples_over_tls)
{
    tn_proc_t p;
    qdl_t *q = NULL;
    char err[512] = "";

    spawn_tls_node(&p);
    ck_assert(tn_wait_log(&p, "tls on (TLS 1.3)", 10000));
    ck_assert_msg(try_qdl(p.port, cert("ca.pem"), NULL, NULL, &q, err, sizeof(err)) == 0, "%s",
                  err);
    run_sized(q, 640, 4, 300001);
    qdl_destroy(q);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

START_TEST(mutual_tls_accepts_the_right_client)
{
    tn_proc_t p;
    qdl_t *q = NULL;
    char err[512] = "";
    const char *args[] = {"--backend",   "digest",         "--tls-cert", cert("node.pem"),
                          "--tls-key",   cert("node.key"), "--tls-ca",   cert("ca.pem"),
                          "--tls-allow", "qdl-client",     NULL};

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    ck_assert(tn_wait_log(&p, "client certificates required, names pinned", 10000));
    ck_assert_msg(try_qdl(p.port, cert("ca.pem"), cert("qdl-client.pem"), cert("qdl-client.key"),
                          &q, err, sizeof(err)) == 0,
                  "%s", err);
    run_queries(q);
    qdl_destroy(q);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

/* The node must refuse, log why, and keep serving a good client afterwards. */
static void expect_rejected(const char *ca, const char *ccert, const char *ckey,
                            const char *node_log)
{
    tn_proc_t p;
    qdl_t *q = NULL, *good = NULL;
    char err[512] = "";
    const char *args[] = {"--backend",   "digest",         "--tls-cert", cert("node.pem"),
                          "--tls-key",   cert("node.key"), "--tls-ca",   cert("ca.pem"),
                          "--tls-allow", "qdl-client",     NULL};

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, args), 0);
    ck_assert_int_lt(try_qdl(p.port, ca, ccert, ckey, &q, err, sizeof(err)), 0);
    ck_assert_ptr_null(q);
    ck_assert_msg(err[0] != '\0', "no reason given");
    printf("rejected as expected: %s\n", err);
    ck_assert_msg(tn_wait_log(&p, node_log, 10000), "node log lacks '%s'", node_log);
    ck_assert_msg(try_qdl(p.port, cert("ca.pem"), cert("qdl-client.pem"), cert("qdl-client.key"),
                          &good, err, sizeof(err)) == 0,
                  "%s", err);
    qdl_destroy(good);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}

START_TEST(unauthenticated_client_rejected)
{
    expect_rejected(cert("ca.pem"), NULL, NULL, "certificate");
}
END_TEST

START_TEST(client_from_another_ca_rejected)
{
    expect_rejected(cert("ca.pem"), cert("other/qdl-client.pem"), cert("other/qdl-client.key"),
                    "certificate");
}
END_TEST

START_TEST(client_not_in_allow_list_rejected)
{
    expect_rejected(cert("ca.pem"), cert("intruder.pem"), cert("intruder.key"),
                    "not in the allow list");
}
END_TEST

START_TEST(node_with_untrusted_certificate_rejected)
{
    tn_proc_t p;
    qdl_t *q = NULL;
    char err[512] = "";

    spawn_tls_node(&p);
    ck_assert_int_lt(try_qdl(p.port, cert("other/ca.pem"), NULL, NULL, &q, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "certificate verification failed"));
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

START_TEST(plaintext_peer_against_tls_node)
{
    tn_proc_t p;
    tn_client_t c;
    qdl_t *q = NULL;
    char err[512] = "";
    const int codecs[1] = {0};

    spawn_tls_node(&p);
    ck_assert_int_eq(tn_connect(&c, p.port), 0);
    /* A plaintext Hello is not a TLS record: the node drops the connection. */
    ck_assert_ptr_null(tn_handshake(&c, codecs, 1));
    tn_close(&c);
    ck_assert(tn_wait_log(&p, "TLS", 10000));
    ck_assert_msg(try_qdl(p.port, cert("ca.pem"), NULL, NULL, &q, err, sizeof(err)) == 0, "%s",
                  err);
    qdl_destroy(q);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
}
END_TEST

static TCase *tc_tls(void)
{
    TCase *t = tcase_create("tls");
    tcase_add_checked_fixture(t, make_certs, remove_certs);
    tcase_add_test(t, queries_over_tls);
    tcase_add_test(t, large_samples_over_tls);
    tcase_add_test(t, mutual_tls_accepts_the_right_client);
    tcase_add_test(t, node_with_untrusted_certificate_rejected);
    tcase_add_test(t, plaintext_peer_against_tls_node);
    tcase_set_timeout(t, 60);
    return t;
}

static TCase *tc_mtls_reject(void)
{
    TCase *t = tcase_create("mtls_reject");
    tcase_add_checked_fixture(t, make_certs, remove_certs);
    tcase_add_test(t, unauthenticated_client_rejected);
    tcase_add_test(t, client_from_another_ca_rejected);
    tcase_add_test(t, client_not_in_allow_list_rejected);
    tcase_set_timeout(t, 60);
    return t;
}

CHECK_MAIN("tls", tc_tls, tc_mtls_reject)
