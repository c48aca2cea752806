/* ucx:// is offered to trusted fabrics only (issue 34): UCX 1.13 aborts the process on
 * malformed connection bytes before this code sees them (cmn/ucx.h, CMN_UCX_UNTRUSTED_REASON),
 * so sut-node refuses to listen on ucx:// and the QDL (loadgen-node) to reach a ucx:// node
 * unless the operator says the fabric is trusted. Each refusal names the address, the reason
 * and the option; with the option the programs work. (The bad-frame classes a peer that did
 * complete UCX's handshake can send are in test_sut.c, bad_ucx_messages.) */
#include "../unit/check_main.h"
#include "testnet.h"

#include "cmpr/cmpr.h"
#include "qdl/qdl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REASON "refused: UCX 1.13 aborts the whole process on malformed connection bytes"

START_TEST(sut_node_refuses_untrusted_ucx)
{
    char out[] = "/tmp/ucxtrust_XXXXXX", conf[] = "/tmp/ucxtrustconf_XXXXXX", pf[64];
    const char *ucx_only[] = {"--listen", "ucx://127.0.0.1:0", "--port-file", pf, NULL};
    const char *mixed[] = {"--listen", "127.0.0.1:0", "--listen", "ucx://127.0.0.1:0", NULL};
    const char *withconf[] = {"--config", conf, NULL};
    const char *good[] = {"--backend", "digest", NULL};
    const int codecs[] = {CMPR_NONE};
    Nsut__HelloAck *ack;
    tn_proc_t p;
    tn_client_t c;
    FILE *f;

    close(mkstemp(out));
    snprintf(pf, sizeof(pf), "%s.port", out);
    /* No listener at all: nothing UCX owns is reachable, so no peer can abort the node. */
    ck_assert_int_eq(tn_run(SUT_NODE_EXE, ucx_only, out), 2);
    ck_assert(tn_file_contains(out, "--listen ucx://127.0.0.1:0: " REASON));
    ck_assert(tn_file_contains(out, "say so with --ucx-trusted-fabric"));
    ck_assert_int_eq(access(pf, F_OK), -1);
    /* A tcp:// listener beside it does not start a half-configured node. */
    ck_assert_int_eq(tn_run(SUT_NODE_EXE, mixed, out), 2);
    ck_assert(tn_file_contains(out, "--listen ucx://127.0.0.1:0: " REASON));
    /* The config-file key takes 1 or 0 only. */
    close(mkstemp(conf));
    f = fopen(conf, "w");
    fprintf(f, "listen = ucx://127.0.0.1:0\nucx-trusted-fabric = yes\n");
    fclose(f);
    ck_assert_int_eq(tn_run(SUT_NODE_EXE, withconf, out), 2);
    ck_assert(tn_file_contains(out, "ucx-trusted-fabric 'yes': expected 1 or 0"));
    /* With the option (tn_spawn passes it on ucx://): it listens, says so, and serves. */
    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, good), 0);
    ck_assert(tn_wait_log(&p, "--ucx-trusted-fabric: every host that reaches it is trusted", 5000));
    ck_assert_int_eq(tn_connect(&c, p.port), 0);
    ack = tn_handshake(&c, codecs, 1);
    ck_assert_ptr_nonnull(ack);
    ck_assert_str_eq(ack->caps->backend, "digest");
    cmn_msg_free(&ack->base, NULL);
    tn_close(&c);
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
    unlink(conf);
    unlink(out);
}
END_TEST

/* Nothing is issued: the QDL is only created. */
static void no_results(void *user, const qdl_response_t *r, size_t n)
{
    (void)user;
    (void)r;
    ck_assert_msg(n == 0, "a result without a query");
}

START_TEST(qdl_refuses_untrusted_ucx)
{
    char addr[64], err[1024], want[256], out[] = "/tmp/ucxtrust_XXXXXX";
    const char *list[1] = {addr};
    const char *lg[] = {"--scenario",
                        "Offline",
                        "--qsl-synthetic",
                        "4",
                        "--sample-size",
                        "16",
                        "--output-dir",
                        "/tmp",
                        "--nodes",
                        addr,
                        NULL};
    qdl_config_t cfg;
    qdl_t *q = NULL;
    tn_proc_t p;

    ck_assert_int_eq(tn_spawn(&p, SUT_NODE_EXE, NULL), 0);
    snprintf(addr, sizeof(addr), "ucx://127.0.0.1:%d", p.port);
    snprintf(want, sizeof(want), "sut-node %s: " REASON, addr);
    unsetenv("NSUT_UCX_TRUSTED_FABRIC");
    qdl_config_init(&cfg);
    cfg.nodes = list;
    cfg.n_nodes = 1;
    cfg.on_complete = no_results;
    err[0] = '\0';
    ck_assert_int_ne(qdl_create(&cfg, &q, err, sizeof(err)), 0);
    ck_assert_ptr_null(q);
    ck_assert_msg(strstr(err, want) != NULL, "%s", err);
    ck_assert_msg(strstr(err, "loadgen-node --ucx-trusted-fabric") != NULL, "%s", err);
    /* loadgen-node says the same and exits 3 (the QDL could not start), before a byte is sent. */
    close(mkstemp(out));
    ck_assert_int_eq(tn_run(LOADGEN_NODE_EXE, lg, out), 3);
    ck_assert(tn_file_contains(out, want));
    /* The opt-ins: the configuration field, and the environment for a program embedding the QDL
     * without an option for it. */
    cfg.ucx_trusted_fabric = 1;
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    qdl_destroy(q);
    q = NULL;
    cfg.ucx_trusted_fabric = 0;
    setenv("NSUT_UCX_TRUSTED_FABRIC", "1", 1);
    ck_assert_msg(qdl_create(&cfg, &q, err, sizeof(err)) == 0, "%s", err);
    qdl_destroy(q);
    unsetenv("NSUT_UCX_TRUSTED_FABRIC");
    ck_assert_int_eq(tn_stop(&p, SIGTERM, 10000), 0);
    tn_cleanup(&p);
    unlink(out);
}
END_TEST

static TCase *tc_sut(void)
{
    TCase *tc = tcase_create("sut_untrusted");
    tcase_add_test(tc, sut_node_refuses_untrusted_ucx);
    return tc;
}

static TCase *tc_qdl(void)
{
    TCase *tc = tcase_create("qdl_untrusted");
    tcase_add_test(tc, qdl_refuses_untrusted_ucx);
    return tc;
}

CHECK_MAIN("ucx_trust", tc_sut, tc_qdl)
