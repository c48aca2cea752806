/* An out-of-tree backend plugin, built as a shared library and loaded by sut-node with dlopen, to
 * prove the ABI works across a library boundary. Its result is the sample with every byte XOR'ed
 * with a key (--backend-opt xor=N), so the test can check the data path byte by byte. It uses
 * nothing from sut-node but the ABI header. */
#include "sut/sut_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sut_backend {
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
    (void)b;
    memset(info, 0, sizeof(*info));
    info->name = "example-xor";
    info->device = "cpu (example plugin)";
    info->preferred_batch = 4;
    info->max_batch = 16;
    info->engines = 1;
    info->weight = 1.0;
    return 0;
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
                                      NULL,
                                      NULL};

const sut_backend_ops_t *sut_backend_entry(void);

const sut_backend_ops_t *sut_backend_entry(void)
{
    return &ops;
}
