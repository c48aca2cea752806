/* An out-of-tree backend plugin, built as a shared library and loaded by sut-node with dlopen, to
 * prove the ABI works across a library boundary. Its result is the sample with every byte XOR'ed
 * with a key (--backend-opt xor=N), so the test can check the data path byte by byte. It uses
 * nothing from sut-node but the ABI header.
 *
 * For the ABI 1.3 loop offer: inline=1 makes it SUT_BACKEND_F_INLINE, attach=1 makes its
 * attach() take the node's loop (else it declines), and each of attach() and detach() says in the
 * node's log that it was called. With SUT_EXAMPLE_ABI_MINOR=2 in its environment the entry point
 * hands out the same table with a 1.2 struct_size, as a plugin built before 1.3 would: the node
 * must then never call the two functions that lie past it. */
#include "sut/sut_backend.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sut_backend {
    void (*log)(int level, const char *msg);
    int inline_run, take_loop;
    unsigned char key;
    unsigned char *buf;
    size_t cap;
};

static int ex_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err, size_t errlen)
{
    const char *k = sut_backend_opt(cfg, "xor", "255");
    char *end;
    long v = strtol(k, &end, 10);
    sut_backend_t *b;

    if (*end || v < 0 || v > 255) {
        snprintf(err, errlen, "xor=%s: expected 0..255", k);
        return -22;
    }
    b = calloc(1, sizeof(*b));
    if (!b)
        return -12;
    b->key = (unsigned char)v;
    b->log = cfg->log;
    b->inline_run = strcmp(sut_backend_opt(cfg, "inline", "0"), "1") == 0;
    b->take_loop = strcmp(sut_backend_opt(cfg, "attach", "0"), "1") == 0;
    if (cfg->log)
        cfg->log(SUT_LOG_INFO, "example-xor plugin loaded");
    *out = b;
    return 0;
}

static void ex_destroy(sut_backend_t *b)
{
    free(b->buf);
    free(b);
}

static int ex_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->name = "example-xor";
    info->device = "cpu (example plugin)";
    info->preferred_batch = 4;
    info->max_batch = 16;
    info->engines = 1;
    info->weight = 1.0;
    info->flags = b->inline_run ? SUT_BACKEND_F_INLINE : 0;
    return 0;
}

/* ABI 1.3. The example does its work inside infer(), so the loop changes nothing for it; what
 * the test reads is whether the node offered it, and when. */
static int ex_attach(sut_backend_t *b, void *uv_loop)
{
    if (b->log)
        b->log(SUT_LOG_INFO, b->take_loop && uv_loop ? "example-xor: attach: took the node's loop"
                                                     : "example-xor: attach: declined");
    return b->take_loop && uv_loop ? 0 : -95; /* -EOPNOTSUPP */
}

static void ex_detach(sut_backend_t *b)
{
    if (b->log)
        b->log(SUT_LOG_INFO, "example-xor: detach");
}

static int ex_infer(sut_backend_t *b, sut_batch_t *batch)
{
    /* Read once: after the last complete() the batch belongs to the node again. */
    const size_t n_samples = batch->n;
    size_t i, j;

    for (i = 0; i < n_samples; i++) {
        const unsigned char *in = batch->samples[i].data;
        size_t n = batch->samples[i].size;
        sut_result_t r;
        if (n > b->cap) {
            unsigned char *nb = realloc(b->buf, n);
            if (!nb)
                return -12;
            b->buf = nb;
            b->cap = n;
        }
        for (j = 0; j < n; j++)
            b->buf[j] = in[j] ^ b->key;
        r.index = i;
        r.status = 0;
        r.data = b->buf;
        r.size = n;
        r.n_tokens = 0;
        /* The node copies the result before complete() returns, so the buffer is reused. */
        batch->complete(batch, &r, 1);
    }
    return 0;
}

static const sut_backend_ops_t ops = {SUT_BACKEND_ABI_VERSION,
                                      sizeof(sut_backend_ops_t),
                                      "example-xor",
                                      ex_create,
                                      ex_destroy,
                                      ex_describe,
                                      ex_infer,
                                      NULL,
                                      NULL,
                                      NULL,
                                      NULL,
                                      ex_attach,
                                      ex_detach};

/* The same table as a plugin built against ABI 1.2 would hand out: its size ends before attach. */
static sut_backend_ops_t ops_1_2;

const sut_backend_ops_t *sut_backend_entry(void);

const sut_backend_ops_t *sut_backend_entry(void)
{
    const char *minor = getenv("SUT_EXAMPLE_ABI_MINOR");

    if (minor && strcmp(minor, "2") == 0) {
        ops_1_2 = ops;
        ops_1_2.struct_size = (uint32_t)offsetof(sut_backend_ops_t, attach);
        return &ops_1_2;
    }
    return &ops;
}
