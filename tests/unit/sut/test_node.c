/* A whole node in this process, on loopback: results queued per session leave as one Response
 * per completion pass (through the copy path and the zero-copy sink path), allocation failures on
 * a peer's behalf answered with an Error frame, and the accept path when TLS set-up fails. */
#include "test_sut.h"

#include "testnet.h"
#include "alloc.h"
#include "cmn/clock.h"
#include "cmn/digest.h"
#include "cmpr/cmpr.h"
#include "node.h"
#include "opts.h"

#include <openssl/crypto.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* OpenSSL's allocations, failing on demand: how a test makes the TLS set-up of one connection
 * fail. Installed before OpenSSL allocates anything. */
static atomic_int ossl_fail;
static int ossl_hooked;

static void *t_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return atomic_load(&ossl_fail) ? NULL : malloc(n);
}

static void *t_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return atomic_load(&ossl_fail) ? NULL : realloc(p, n);
}

static void t_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    free(p);
}

__attribute__((constructor)) static void hook_openssl(void)
{
    ossl_hooked = CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free);
}

typedef struct {
    uv_loop_t loop;
    sut_opts_t opt;
    sut_node_t node;
    int port;
} inproc_t;

static void node_start(inproc_t *p, const char *const *kv)
{
    cmn_errbuf_t eb = {{0}};
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    size_t i;

    memset(p, 0, sizeof(*p));
    sut__opts_defaults(&p->opt);
    p->opt.listen[p->opt.n_listen++] = "127.0.0.1:0";
    p->opt.name = "unit-node";
    for (i = 0; kv && kv[i]; i += 2) {
        if (strcmp(kv[i], "backend") == 0)
            p->opt.backend = kv[i + 1];
        else if (strcmp(kv[i], "max_batch") == 0)
            p->opt.max_batch = (uint32_t)atoi(kv[i + 1]);
        else if (strcmp(kv[i], "memory_budget") == 0)
            p->opt.memory_budget = strtoull(kv[i + 1], NULL, 10);
        else if (strcmp(kv[i], "tls_cert") == 0)
            p->opt.tls_cert = kv[i + 1];
        else if (strcmp(kv[i], "tls_key") == 0)
            p->opt.tls_key = kv[i + 1];
        else {
            p->opt.opt_keys[p->opt.n_opts] = kv[i];
            p->opt.opt_values[p->opt.n_opts++] = kv[i + 1];
        }
    }
    ck_assert_int_eq(uv_loop_init(&p->loop), 0);
    ck_assert_msg(sut__node_init(&p->node, &p->loop, &p->opt, &eb) == 0, "%s", eb.msg);
    ck_assert_msg(sut__node_listen(&p->node, &eb) == 0, "%s", eb.msg);
    uv_tcp_getsockname(&p->node.listeners[0], (struct sockaddr *)&ss, &len);
    p->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void node_finish(inproc_t *p)
{
    sut__node_drain(&p->node, "end of test");
    uv_run(&p->loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&p->loop), 0);
    sut__node_free(&p->node);
    sut__alloc_fail_after(-1);
}

/* ---- a blocking client on a thread while this thread runs the node's loop -------------------- */

typedef struct {
    int port;
    void (*body)(void *arg, int port);
    void *arg;
    atomic_int done;
} client_t;

static void client_main(void *arg)
{
    client_t *c = arg;
    c->body(c->arg, c->port);
    atomic_store(&c->done, 1);
}

static void run_client(inproc_t *p, void (*body)(void *, int), void *arg)
{
    client_t c = {p->port, body, arg, 0};
    uv_thread_t t;
    uint64_t end = cmn_now_ns() + 20000000000ull;

    ck_assert_int_eq(uv_thread_create(&t, client_main, &c), 0);
    while (!atomic_load(&c.done) && cmn_now_ns() < end)
        uv_run(&p->loop, UV_RUN_ONCE); /* the node's 250 ms tick bounds each turn */
    ck_assert_int_eq(atomic_load(&c.done), 1);
    uv_thread_join(&t);
}

/* ---- results: one Response per session and pass ---------------------------------------------- */

typedef struct {
    size_t n, size;
    size_t frames, results, good; /* what came back */
} results_job_t;

static void results_client(void *arg, int port)
{
    results_job_t *j = arg;
    static uint8_t data[32][8192];
    const void *ptrs[32];
    size_t sizes[32];
    int codecs[32];
    int none = CMPR_NONE;
    tn_client_t *c = malloc(sizeof(*c));
    Nsut__HelloAck *ack;
    size_t i;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(tn_connect(c, port), 0);
    ack = tn_handshake(c, &none, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    for (i = 0; i < j->n; i++) {
        memset(data[i], (int)(i * 7 + 1), j->size);
        ptrs[i] = data[i];
        sizes[i] = j->size;
        codecs[i] = CMPR_NONE;
    }
    ck_assert_int_eq(tn_send_query(c, 1, 100, j->n, ptrs, sizes, sizes, codecs), 0);
    while (j->results < j->n) {
        unsigned type;
        ProtobufCMessage *m;
        uint8_t *payload;
        size_t plen, off = 0;
        const Nsut__Response *r;

        ck_assert_int_eq(tn_recv(c, 10000, &type, &m, &payload, &plen), 0);
        ck_assert_uint_eq(type, CMN_MSG_RESPONSE);
        r = (const Nsut__Response *)m;
        j->frames++;
        for (i = 0; i < r->n_results; i++) {
            uint64_t k = r->results[i]->id - 100;
            j->results++;
            if (k < j->n && r->results[i]->wire_size == 8 &&
                cmn_digest_get(payload + off) == cmn_digest64(data[k], j->size))
                j->good++;
            off += r->results[i]->wire_size;
        }
        cmn_msg_free(m, NULL);
        free(payload);
    }
    tn_close(c);
    free(c);
}

START_TEST(session_results)
{
    static const char *const kv[] = {"backend", "digest", "max_batch", "16", "inline", "1", NULL};
    inproc_t *p = malloc(sizeof(*p));
    results_job_t small = {16, 100, 0, 0, 0}, big = {16, 8192, 0, 0, 0};

    ck_assert_ptr_nonnull(p);
    node_start(p, kv);
    /* 16 small samples: copied into the open batch, one batch, one Response of 16. */
    run_client(p, results_client, &small);
    ck_assert_uint_eq(small.good, 16);
    ck_assert_uint_eq(small.frames, 1);
    /* 16 x 8 KiB: a full batch by itself, read straight into the batch (the sink path). */
    run_client(p, results_client, &big);
    ck_assert_uint_eq(big.good, 16);
    ck_assert_uint_eq(big.frames, 1);
    ck_assert_uint_eq(p->node.sessions.st.samples, 32);
    ck_assert_uint_eq(p->node.batcher.st.batches, 2);
    node_finish(p);
    free(p);
}
END_TEST

/* ---- a result over the memory budget: answered REJECTED, and counted ------------------------ */

static void reject_client(void *arg, int port)
{
    int *status = arg;
    static const uint8_t bytes[64];
    const void *ptr = bytes;
    size_t size = sizeof(bytes);
    int none = CMPR_NONE;
    tn_client_t *c = malloc(sizeof(*c));
    Nsut__HelloAck *ack;
    unsigned type;
    ProtobufCMessage *m;
    uint8_t *payload;
    size_t plen;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(tn_connect(c, port), 0);
    ack = tn_handshake(c, &none, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    ck_assert_int_eq(tn_send_query(c, 1, 7, 1, &ptr, &size, &size, &none), 0);
    ck_assert_int_eq(tn_recv(c, 10000, &type, &m, &payload, &plen), 0);
    ck_assert_uint_eq(type, CMN_MSG_RESPONSE);
    ck_assert_uint_eq(((const Nsut__Response *)m)->n_results, 1);
    *status = (int)((const Nsut__Response *)m)->results[0]->status;
    cmn_msg_free(m, NULL);
    free(payload);
    tn_close(c);
    free(c);
}

START_TEST(result_over_budget_counted)
{
    /* Every result is 32 MiB against a 16 MiB budget: the sample is answered REJECTED at the
     * result stage (workers.c), and Stats and the metric count it. */
    static const char *const kv[] = {"backend",       "null",     "output_size", "33554432",
                                     "memory_budget", "16777216", NULL};
    inproc_t *p = malloc(sizeof(*p));
    int status = -1;

    ck_assert_ptr_nonnull(p);
    node_start(p, kv);
    run_client(p, reject_client, &status);
    ck_assert_int_eq(status, NSUT__STATUS__STATUS_REJECTED);
    ck_assert_uint_eq(p->node.sessions.st.samples_rejected, 1);
    ck_assert_uint_eq(p->node.sessions.st.samples_failed, 0);
    node_finish(p);
    free(p);
}
END_TEST

/* ---- allocation failures on a peer's behalf -------------------------------------------------- */

typedef struct {
    int error_code;  /* from the connection whose batch could not be allocated */
    int closed_once; /* the connection whose session could not be allocated was closed */
    int served;      /* a good client afterwards */
} fail_job_t;

static void fail_client(void *arg, int port)
{
    fail_job_t *j = arg;
    static const uint8_t bytes[64];
    const void *ptr = bytes;
    size_t size = sizeof(bytes);
    int none = CMPR_NONE;
    tn_client_t *c = malloc(sizeof(*c));
    Nsut__HelloAck *ack;
    unsigned type;
    ProtobufCMessage *m;
    uint8_t *payload;
    size_t plen;

    ck_assert_ptr_nonnull(c);
    /* No memory for the session: the connection is accepted and closed at once. */
    sut__alloc_fail_after(0);
    ck_assert_int_eq(tn_connect(c, port), 0);
    j->closed_once = tn_recv(c, 10000, &type, &m, &payload, &plen) == CMN_ECLOSED;
    tn_close(c);
    ck_assert_int_ge(sut__alloc_fail_after(-1), 1);

    /* No memory for a batch: the query is answered with an Error frame naming it. */
    ck_assert_int_eq(tn_connect(c, port), 0);
    ack = tn_handshake(c, &none, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    sut__alloc_fail_after(0);
    ck_assert_int_eq(tn_send_query(c, 1, 1, 1, &ptr, &size, &size, &none), 0);
    j->error_code = tn_expect_error(c, 10000);
    sut__alloc_fail_after(-1);
    tn_close(c);

    /* And the node serves the next client. */
    ck_assert_int_eq(tn_connect(c, port), 0);
    ack = tn_handshake(c, &none, 1);
    ck_assert_ptr_nonnull(ack);
    cmn_msg_free(&ack->base, NULL);
    ck_assert_int_eq(tn_send_query(c, 1, 1, 1, &ptr, &size, &size, &none), 0);
    ck_assert_int_eq(tn_recv(c, 10000, &type, &m, &payload, &plen), 0);
    j->served = type == CMN_MSG_RESPONSE;
    cmn_msg_free(m, NULL);
    free(payload);
    tn_close(c);
    free(c);
}

START_TEST(session_alloc_fail)
{
    static const char *const kv[] = {"backend", "digest", "inline", "1", NULL};
    inproc_t *p = malloc(sizeof(*p));
    fail_job_t j = {0, 0, 0};

    ck_assert_ptr_nonnull(p);
    node_start(p, kv);
    run_client(p, fail_client, &j);
    ck_assert_int_eq(j.closed_once, 1);
    ck_assert_int_eq(j.error_code, NSUT__ERROR_CODE__ERROR_INTERNAL);
    ck_assert_int_eq(j.served, 1);
    node_finish(p);
    free(p);
}
END_TEST

/* ---- the accept path when TLS set-up fails --------------------------------------------------- */

/* Runs the loop until |fd| reads end-of-file (the node closed it), or 10 s. */
static int loop_until_eof(inproc_t *p, int fd)
{
    uint64_t end = cmn_now_ns() + 10000000000ull;
    char b;

    while (cmn_now_ns() < end) {
        struct pollfd pf = {fd, POLLIN, 0};
        uv_run(&p->loop, UV_RUN_NOWAIT);
        if (poll(&pf, 1, 5) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) == 0)
            return 1;
    }
    return 0;
}

START_TEST(accept_tls_fail)
{
    char dir[] = "/tmp/sut_unit_tls_XXXXXX", cmd[512], cert[128], key[128];
    const char *kv[] = {"tls_cert", cert, "tls_key", key, NULL};
    inproc_t *p = malloc(sizeof(*p));
    tn_client_t *c = malloc(sizeof(*c));
    uint64_t end;

    ck_assert_msg(ossl_hooked == 1, "OpenSSL allocated before the test could hook it");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), "%s %s >/dev/null", MAKE_CERTS, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cert, sizeof(cert), "%s/node.pem", dir);
    snprintf(key, sizeof(key), "%s/node.key", dir);
    node_start(p, kv);

    /* The TLS session cannot be created: that connection is closed, and its handles are released
     * through the close callback (ASan sees any use after free). */
    atomic_store(&ossl_fail, 1);
    ck_assert_int_eq(tn_connect(c, p->port), 0);
    ck_assert_int_eq(loop_until_eof(p, c->fd), 1);
    atomic_store(&ossl_fail, 0);
    tn_close(c);
    ck_assert_uint_eq(p->node.sessions.st.connections_total, 0);

    /* The listener still accepts: the next connection gets a session. */
    ck_assert_int_eq(tn_connect(c, p->port), 0);
    end = cmn_now_ns() + 10000000000ull;
    while (p->node.sessions.st.connections_total < 1 && cmn_now_ns() < end)
        uv_run(&p->loop, UV_RUN_ONCE);
    ck_assert_uint_eq(p->node.sessions.st.connections_total, 1);
    ck_assert_uint_eq(p->node.sessions.n, 1);
    tn_close(c);
    node_finish(p);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(c);
    free(p);
}
END_TEST

CHECK_ONE_TEST_TCASE(session_results)

CHECK_ONE_TEST_TCASE(session_alloc_fail)

CHECK_ONE_TEST_TCASE(result_over_budget_counted)

CHECK_ONE_TEST_TCASE(accept_tls_fail)
