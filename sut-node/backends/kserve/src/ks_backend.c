/* The kserve backend: each batch of tensor samples becomes one KServe v2 REST inference request
 * with the binary tensor extension (Triton, KServe, OpenVINO Model Server), sent over the shared
 * libcurl-on-libuv pool (httpc/src/httpc.c); each sample's result is its slice of the
 * output tensor's bytes. The message format is ks_v2.c. cancel() (ABI 1.1) drops or aborts a
 * batch's request once every sample of the batch is cancelled (httpc/live.h). */
#include "ks_v2.h"
#include "httpc/httpc.h"
#include "httpc/live.h"
#include "httpc/opts.h"
#include "httpc/probe.h"
#include "httpc/svc.h"
#include "sut/sut_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sut_backend {
    httpc_t *http;
    httpc_lives_t lives; /* the requests cancel() can find */
    ks_tensor_t t;
    char *url, *input, *output, *datatype;
    char *health; /* base URL + health_path, or NULL (empty health_path: ready at once) */
    size_t sample_bytes;
    uint32_t max_batch, engines;
    long timeout_ms;
    size_t max_response; /* a full batch's response (max_response_mb) */
    size_t per_sample;   /* its share per sample: a batch of n gets n of them */
    char device[400];
    void (*log)(int level, const char *msg);
};

typedef struct {
    httpc_req_t req; /* first: the pool hands it back */
    httpc_live_t live;
    sut_backend_t *b;
    sut_batch_t *batch;
    size_t n;
    char *body;
    char hdr[64];
    const char *headers[3];
    char *resp;
    size_t resp_len, resp_cap;
    long json_len; /* ks_header_length() of Inference-Header-Content-Length; -1 until seen */
    char err[300];
} call_t;

static const httpc_optdef_t known[] = {
    HTTPC_OPT("url", "http://127.0.0.1:8000"),
    HTTPC_OPT("model", NULL),
    HTTPC_OPT("version", NULL),
    HTTPC_OPT("input", "input"),
    HTTPC_OPT("output", "output"),
    HTTPC_OPT("datatype", "FP32"),
    HTTPC_OPT("shape", NULL),
    HTTPC_OPT("max_batch", "64"),
    HTTPC_OPT("engines", "2"),
    HTTPC_OPT("timeout_ms", "60000"),
    HTTPC_OPT("max_response_mb", "64"),
    HTTPC_OPT("health_path", "/v2/health/ready"),
};

#define N_KNOWN (sizeof(known) / sizeof(known[0]))
HTTPC_OPTS_GETTER(opt, sut_backend_config_t, known)

/* A model, version or tensor name that goes into the URL path or the JSON unescaped. */
static int printable(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s <= 0x20 || *s > 0x7e || *s == '"' || *s == '\\' || *s == '/' || *s == '?')
            return 0;
    return 1;
}

/* Parse: the options checked and read into |b| (names, tensor, numbers); nothing opened yet. 0, or
 * a negative code with the option's message in err. */
static int ks_parse(const sut_backend_config_t *cfg, sut_backend_t *b, char *err, size_t errlen)
{
    const char *model = opt(cfg, "model");
    const char *version = opt(cfg, "version");
    const char *shape = opt(cfg, "shape");
    unsigned long long u;
    size_t elem;

    if (httpc_opts_check(cfg->n_options, cfg->keys, "kserve", known, N_KNOWN, err, errlen) < 0)
        return -EINVAL;
    if (!model || !shape) {
        snprintf(err, errlen,
                 "the kserve backend needs model=NAME and shape=D1,D2,... (one "
                 "sample's shape)");
        return -EINVAL;
    }
    b->input = strdup(opt(cfg, "input"));
    b->output = strdup(opt(cfg, "output"));
    b->datatype = strdup(opt(cfg, "datatype"));
    if (!b->input || !b->output || !b->datatype)
        return -ENOMEM;
    if (!printable(model) || (version && !printable(version)) || !printable(b->input) ||
        !printable(b->output)) {
        snprintf(err, errlen,
                 "options model, version, input, output: printable ASCII without "
                 "spaces, quotes, slashes or backslashes");
        return -EINVAL;
    }
    elem = ks_dtype_size(b->datatype);
    if (!elem) {
        snprintf(err, errlen, "option datatype=%s: not a KServe v2 datatype (UINT8, FP32, ...)",
                 b->datatype);
        return -EINVAL;
    }
    b->t.input = b->input;
    b->t.output = b->output;
    b->t.datatype = b->datatype;
    if (ks_parse_shape(shape, elem, &b->t, &b->sample_bytes, err, errlen) < 0)
        return -EINVAL;
    if (httpc_opts_u("max_batch", opt(cfg, "max_batch"), 1, 65536, &u, err, errlen) < 0)
        return -EINVAL;
    b->max_batch = (uint32_t)u;
    if (httpc_opts_u("engines", opt(cfg, "engines"), 1, 1024, &u, err, errlen) < 0)
        return -EINVAL;
    b->engines = (uint32_t)u;
    if (httpc_opts_u("timeout_ms", opt(cfg, "timeout_ms"), 1, 86400000, &u, err, errlen) < 0)
        return -EINVAL;
    b->timeout_ms = (long)u;
    if (httpc_opts_u("max_response_mb", opt(cfg, "max_response_mb"), 1, 65536, &u, err, errlen) < 0)
        return -EINVAL;
    b->max_response = (size_t)u << 20;
    /* The node charges each running batch's response against its memory budget at n x the
     * describe()d output_size before it is sent (batcher.c): a batch of n may get exactly that. */
    b->per_sample = (b->max_response + b->max_batch - 1) / b->max_batch;
    return 0;
}

/* Open: the inference and readiness URLs, then the pool (no request is sent: the server's
 * readiness is ks_ready's, ABI 1.2). */
static int ks_open(const sut_backend_config_t *cfg, sut_backend_t *b, char *err, size_t errlen)
{
    const char *url = opt(cfg, "url");
    const char *model = opt(cfg, "model");
    const char *version = opt(cfg, "version");
    httpc_cfg_t hc = {0};
    size_t ul;
    int rc;

    if ((rc = httpc_svc_base(url, &ul, err, errlen)) < 0)
        return rc;
    b->url = malloc(ul + strlen(model) + (version ? strlen(version) : 0) + 40);
    if (!b->url)
        return -ENOMEM;
    if ((rc = httpc_svc_health(url, ul, opt(cfg, "health_path"), &b->health, err, errlen)) < 0)
        return rc;
    if (version)
        sprintf(b->url, "%.*s/v2/models/%s/versions/%s/infer", (int)ul, url, model, version);
    else
        sprintf(b->url, "%.*s/v2/models/%s/infer", (int)ul, url, model);
    snprintf(b->device, sizeof(b->device), "KServe v2 server at %s (%s %s, %zu B per sample)",
             b->url, b->input, b->datatype, b->sample_bytes);
    hc.max_conns = b->engines;
    hc.connect_timeout_ms = 5000;
    return httpc_svc_open(&hc, "request", &b->http, &b->lives, err, errlen);
}

/* Also what a failed create leaves: the pool only when it was opened. */
static void ks_destroy(sut_backend_t *b)
{
    httpc_svc_close(b->http, &b->lives);
    free(b->health);
    free(b->url);
    free(b->input);
    free(b->output);
    free(b->datatype);
    free(b);
}

static int ks_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err, size_t errlen)
{
    sut_backend_t *b;
    int rc;

    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->log = cfg->log;
    if ((rc = ks_parse(cfg, b, err, errlen)) < 0 || (rc = ks_open(cfg, b, err, errlen)) < 0) {
        ks_destroy(b);
        return rc;
    }
    httpc_logf(b->log, SUT_LOG_INFO, "kserve backend: %s, max batch %u, %u engines", b->device,
               b->max_batch, b->engines);
    *out = b;
    return 0;
}

static int ks_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->name = "kserve";
    info->device = b->device;
    info->preferred_batch = b->max_batch;
    info->max_batch = b->max_batch;
    info->engines = b->engines;
    info->input_size = b->sample_bytes;
    info->output_size = b->per_sample; /* a response's worst case per sample (on_data) */
    info->weight = 1.0;
    return 0;
}

static void on_header(httpc_req_t *r, const char *line, size_t n)
{
    call_t *c = (call_t *)r;
    long v = ks_header_length(line, n);

    if (v != -1) /* a second, different value makes it unusable (-2) */
        c->json_len = c->json_len == -1 || c->json_len == v ? v : -2;
}

static int on_data(httpc_req_t *r, const char *p, size_t n)
{
    call_t *c = (call_t *)r;
    const size_t cap = c->n * c->b->per_sample; /* what the node charged for it */

    if (n > cap - c->resp_len) {
        snprintf(c->err, sizeof(c->err),
                 "the response from %s is over %zu bytes (max_response_mb=%zu for a batch of "
                 "%u, this batch %zu)",
                 c->b->url, cap, c->b->max_response >> 20, c->b->max_batch, c->n);
        return 1;
    }
    if (c->resp_len + n > c->resp_cap) {
        size_t ncap = c->resp_cap ? c->resp_cap : 4096;
        char *nr;
        while (ncap < c->resp_len + n)
            ncap *= 2;
        if (ncap > cap)
            ncap = cap; /* never more than was charged */
        nr = realloc(c->resp, ncap);
        if (!nr) {
            snprintf(c->err, sizeof(c->err), "out of memory for a %zu-byte response", ncap);
            return 1;
        }
        c->resp = nr;
        c->resp_cap = ncap;
    }
    memcpy(c->resp + c->resp_len, p, n);
    c->resp_len += n;
    return 0;
}

static void call_free(call_t *c)
{
    free(c->body);
    free(c->resp);
    free(c);
}

/* |why| (or NULL) goes to the client with each failure (ABI 1.2). */
static void fail_all(sut_batch_t *batch, size_t n, int status, const char *why)
{
    size_t i;
    for (i = 0; i < n; i++) {
        sut_result_t res = {i, status, why, why ? strlen(why) : 0, 0};
        batch->complete(batch, &res, 1);
    }
}

static void on_done(httpc_req_t *r, int status, const char *msg)
{
    call_t *c = (call_t *)r;
    sut_backend_t *b = c->b;
    size_t data = 0, per = 0, i, n = c->n;
    sut_result_t *res;

    httpc_live_del(&b->lives, &c->live); /* before the batch may go back to the node */
    if (status == HTTPC_ECANCEL) {       /* every sample's client is gone: nothing to tell */
        fail_all(c->batch, n, SUT_BACKEND_ECANCELED, NULL);
        call_free(c);
        return;
    }
    if (status == 0 && !c->err[0])
        ks_response_parse(c->resp, c->resp_len, c->json_len, b->output, n, &data, &per, c->err,
                          sizeof(c->err));
    if (status != 0 || c->err[0]) {
        httpc_logf(b->log, SUT_LOG_WARN, "kserve backend: batch of %zu failed: %s", n,
                   c->err[0] ? c->err : msg);
        fail_all(c->batch, n, status ? status : -EPROTO, c->err[0] ? c->err : msg);
        call_free(c);
        return;
    }
    res = calloc(n, sizeof(*res));
    if (!res) {
        fail_all(c->batch, n, -ENOMEM, "out of memory for the results");
        call_free(c);
        return;
    }
    for (i = 0; i < n; i++) {
        res[i].index = i;
        res[i].data = c->resp + data + i * per;
        res[i].size = per;
    }
    c->batch->complete(c->batch, res, n);
    free(res);
    call_free(c);
}

static int ks_infer(sut_backend_t *b, sut_batch_t *batch)
{
    size_t n = batch->n, i, jlen, total = 0;
    char *json;
    call_t *c;
    int rc;

    for (i = 0; i < n; i++) {
        if (batch->samples[i].size != b->sample_bytes) {
            httpc_logf(b->log, SUT_LOG_WARN,
                       "kserve backend: sample %zu has %zu bytes, the tensor shape says %zu", i,
                       batch->samples[i].size, b->sample_bytes);
            return -EINVAL;
        }
        total += batch->samples[i].size;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if ((rc = ks_request_header(&b->t, n, total, &json, &jlen)) < 0) {
        free(c);
        return rc;
    }
    /* One contiguous body: the JSON header, then the samples (one copy of the batch input). */
    c->body = malloc(jlen + total);
    if (!c->body) {
        free(json);
        free(c);
        return -ENOMEM;
    }
    memcpy(c->body, json, jlen);
    free(json);
    for (i = 0, total = jlen; i < n; i++) {
        memcpy(c->body + total, batch->samples[i].data, batch->samples[i].size);
        total += batch->samples[i].size;
    }
    snprintf(c->hdr, sizeof(c->hdr), "Inference-Header-Content-Length: %zu", jlen);
    c->headers[0] = "Content-Type: application/octet-stream";
    c->headers[1] = c->hdr;
    c->b = b;
    c->batch = batch;
    c->n = n;
    c->json_len = -1;
    c->req.url = b->url;
    c->req.body = c->body;
    c->req.body_len = total;
    c->req.headers = c->headers;
    c->req.timeout_ms = b->timeout_ms;
    c->req.on_data = on_data;
    c->req.on_done = on_done;
    c->req.on_header = on_header;
    c->live.req = &c->req;
    c->live.batch = batch;
    c->live.index = HTTPC_LIVE_ALL;
    c->live.want = n;
    httpc_live_add(&b->lives, &c->live);
    if ((rc = httpc_submit(b->http, &c->req)) < 0) {
        httpc_live_del(&b->lives, &c->live);
        call_free(c);
        return rc;
    }
    return 0;
}

static void ks_cancel(sut_backend_t *b, sut_batch_t *batch, const size_t *indices, size_t n)
{
    httpc_live_cancel(&b->lives, b->http, batch, indices, n);
}

/* ABI 1.2: the server's readiness endpoint answers (httpc/probe.h). */
static int ks_ready(sut_backend_t *b, char *why, size_t whylen)
{
    return b->health ? httpc_probe_get(b->health, NULL, 2000, why, whylen) : 1;
}

static const sut_backend_ops_t ops = {
    SUT_BACKEND_ABI_VERSION,
    sizeof(sut_backend_ops_t),
    "kserve",
    ks_create,
    ks_destroy,
    ks_describe,
    ks_infer,
    NULL,
    NULL,
    ks_cancel,
    ks_ready,
    NULL,
    NULL,
};

SUT_BACKEND_ENTRY(ops);
