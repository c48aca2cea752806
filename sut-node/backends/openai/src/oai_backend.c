/* The openai backend: every sample is a prompt of int32 token IDs, forwarded to a local
 * OpenAI-compatible serving engine (vLLM, SGLang, TensorRT-LLM, llama.cpp) as one streaming
 * completion. The first streamed token becomes first_token(), the end of the stream complete()
 * with the output token IDs (int32, little endian) and their count.
 *
 * infer() only formats each request body and hands it to the HTTP pool (httpc.c); the pool's
 * loop thread decodes the streams (httpc's sse.c, oai_dialect.c) and completes the samples later.
 * That is cheap and never blocks, so it is SUT_BACKEND_F_INLINE: infer() runs on the node's I/O
 * thread (no worker thread and no hand-off per batch); completions arrive from the loop thread,
 * which the ABI allows.
 *
 * dialect=llamacpp oneshot=1 asks for one JSON response instead of a stream (llama-server's
 * stream leaves out the IDs of tokens it holds back as incomplete UTF-8): the body is gathered
 * (at most max_event bytes) and read at the end, the first token and the end leave together.
 * Every sample's token IDs are checked against the engine's own count (httpc_oai_dialect_end).
 *
 * cancel() (ABI 1.1) marks the batch's streams in the pool (httpc_cancel): a queued one is
 * never sent, an open one is closed; both complete with SUT_BACKEND_ECANCELED. stream_idle_ms
 * fails a stream that brings no token for that long (the first one included).
 *
 * client=lean (the default) sends through the lean HTTP/1.1 client instead of libcurl
 * (oai_lean.c: httpc/h1.h on a loop thread of its own, same deadlines and cancel; https:// with
 * its TLS); client=curl keeps libcurl's pool. Both read a stream on the coalescing tick
 * (coalesce_us) after its first token. Either verifies an
 * https:// engine against ca_file, else the system's CAs. */
#include "httpc/oai.h"
#include "httpc/httpc.h"
#include "httpc/live.h"
#include "httpc/opts.h"
#include "httpc/probe.h"
#include "httpc/sse.h"
#include "httpc/svc.h"
#include "sut/sut_backend.h"

#include "oai_lean.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sut_backend {
    httpc_t *http;     /* client=curl */
    oai_lean_t *lean;  /* client=lean */
    oai_lean_cfg_t lc; /* lean's settings, for oai_attach */
    int use_lean;
    int node_loop;       /* loop=node: the lean client goes onto the node's loop when offered */
    httpc_lives_t lives; /* the streams cancel() can find */
    httpc_oai_gen_t gen;
    char *url;    /* base URL + the dialect's path */
    char *model;  /* owned copy for gen.model */
    char *auth;   /* "Authorization: Bearer ..." or NULL */
    char *health; /* base URL + health_path, or NULL (health_path empty: ready at once) */
    long health_timeout_ms;
    /* https: the CA the engine's certificate is verified against (NULL: the system's) */
    const char *ca_file;
    const char *headers[3];
    char device[320];
    uint32_t max_concurrency;
    long timeout_ms;
    long stream_idle_ms;
    size_t max_event;
    void (*log)(int level, const char *msg);
};

typedef struct {
    httpc_req_t req; /* first: the pool hands it back (client=curl) */
    oai_lreq_t lr;   /* client=lean */
    httpc_live_t live;
    sut_backend_t *b;
    sut_batch_t *batch;
    size_t index;
    char *body;
    httpc_oai_stream_t st; /* the response read as it arrives (httpc/oai.h) */
    int first_sent;
} stream_t;

/* ---- options ---- */

#define OAI_STR_(x) #x
#define OAI_STR(x) OAI_STR_(x)

static const httpc_optdef_t known[] = {
    HTTPC_OPT("url", "http://127.0.0.1:8000"),
    HTTPC_OPT("dialect", "vllm"),
    HTTPC_OPT("model", "model"),
    HTTPC_OPT("max_tokens", "128"),
    HTTPC_OPT("min_tokens", "0"),
    HTTPC_OPT("temperature", "0"),
    HTTPC_OPT("ignore_eos", "0"),
    HTTPC_OPT("incremental", "0"),
    HTTPC_OPT("oneshot", "0"),
    HTTPC_OPT("max_concurrency", NULL), /* default: the node's --max-batch */
    HTTPC_OPT("timeout_ms", "600000"),
    HTTPC_OPT("stream_idle_ms", "60000"),
    HTTPC_OPT("connect_timeout_ms", "5000"),
    HTTPC_OPT("max_event", "65536"),
    HTTPC_OPT("api_key", NULL),
    HTTPC_OPT("coalesce_us", OAI_STR(HTTPC_COALESCE_US_DEFAULT)),
    HTTPC_OPT("health_path", "/health"),
    HTTPC_OPT("health_timeout_ms", "2000"),
    HTTPC_OPT("client", "lean"),
    HTTPC_OPT("loop", "node"),  /* client=lean: node (the node's I/O loop, ABI 1.3) or own */
    HTTPC_OPT("ca_file", NULL), /* https: the engine's CA (PEM); default: the system's CAs */
};

#define N_KNOWN (sizeof(known) / sizeof(known[0]))
HTTPC_OPTS_GETTER(opt, sut_backend_config_t, known)

static int printable(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

/* Parse: the generation options into b->gen, the limits into |b| and the pool's into |hc|;
 * nothing opened yet. 0, or -EINVAL with the option's message in err. */
static int oai_parse(const sut_backend_config_t *cfg, sut_backend_t *b, httpc_cfg_t *hc, char *err,
                     size_t errlen)
{
    unsigned long long u;
    const char *s;
    char *end;

    if (httpc_opts_check(cfg->n_options, cfg->keys, "openai", known, N_KNOWN, err, errlen) < 0)
        return -EINVAL;
    if (httpc_oai_dialect_from_name(opt(cfg, "dialect"), &b->gen.dialect) < 0) {
        snprintf(err, errlen, "option dialect=%s: expected vllm, trtllm, sglang or llamacpp",
                 opt(cfg, "dialect"));
        return -EINVAL;
    }
    if (!printable(opt(cfg, "model"))) {
        snprintf(err, errlen, "option model: printable ASCII without quotes or backslashes");
        return -EINVAL;
    }
    if (httpc_opts_u("max_tokens", opt(cfg, "max_tokens"), 1, 1u << 20, &u, err, errlen) < 0)
        return -EINVAL;
    b->gen.max_tokens = (uint32_t)u;
    if (httpc_opts_u("min_tokens", opt(cfg, "min_tokens"), 0, b->gen.max_tokens, &u, err, errlen) <
        0)
        return -EINVAL;
    b->gen.min_tokens = (uint32_t)u;
    if (b->gen.dialect == HTTPC_OAI_LLAMACPP && b->gen.min_tokens) {
        snprintf(err, errlen,
                 "option min_tokens: the llama.cpp server has no minimum length "
                 "(use ignore_eos=1 for fixed-length outputs)");
        return -EINVAL;
    }
    s = opt(cfg, "temperature");
    errno = 0;
    b->gen.temperature = strtod(s, &end);
    if (errno || end == s || *end || !(b->gen.temperature >= 0 && b->gen.temperature <= 100)) {
        snprintf(err, errlen, "option temperature=%s: expected a number in 0..100 (0: greedy)", s);
        return -EINVAL;
    }
    if (httpc_opts_u("ignore_eos", opt(cfg, "ignore_eos"), 0, 1, &u, err, errlen) < 0)
        return -EINVAL;
    b->gen.ignore_eos = (int)u;
    if (httpc_opts_u("incremental", opt(cfg, "incremental"), 0, 1, &u, err, errlen) < 0)
        return -EINVAL;
    b->gen.incremental = (int)u;
    if (httpc_opts_u("oneshot", opt(cfg, "oneshot"), 0, 1, &u, err, errlen) < 0)
        return -EINVAL;
    b->gen.oneshot = (int)u;
    if (b->gen.oneshot && b->gen.dialect != HTTPC_OAI_LLAMACPP) {
        snprintf(err, errlen, "option oneshot=1: only with dialect=llamacpp");
        return -EINVAL;
    }
    s = opt(cfg, "max_concurrency");
    if (s) {
        if (httpc_opts_u("max_concurrency", s, 1, 65536, &u, err, errlen) < 0)
            return -EINVAL;
        b->max_concurrency = (uint32_t)u;
    } else {
        b->max_concurrency = cfg->max_batch ? cfg->max_batch : 64;
    }
    if (httpc_opts_u("timeout_ms", opt(cfg, "timeout_ms"), 1, 86400000, &u, err, errlen) < 0)
        return -EINVAL;
    b->timeout_ms = (long)u;
    if (httpc_opts_u("stream_idle_ms", opt(cfg, "stream_idle_ms"), 0, 86400000, &u, err, errlen) <
        0)
        return -EINVAL;
    b->stream_idle_ms = (long)u;
    hc->idle_ms = b->stream_idle_ms;
    if (httpc_opts_u("connect_timeout_ms", opt(cfg, "connect_timeout_ms"), 1, 600000, &u, err,
                     errlen) < 0)
        return -EINVAL;
    hc->connect_timeout_ms = (long)u;
    if (httpc_opts_u("max_event", opt(cfg, "max_event"), 256, 64u << 20, &u, err, errlen) < 0)
        return -EINVAL;
    b->max_event = (size_t)u;
    if (httpc_opts_u("coalesce_us", opt(cfg, "coalesce_us"), 0, 1000000, &u, err, errlen) < 0)
        return -EINVAL;
    hc->coalesce_us = (uint32_t)u;
    return 0;
}

/* The client: the lean one (client=lean, http:// and https://) or libcurl's pool (client=curl). */
static int oai_client(const sut_backend_config_t *cfg, sut_backend_t *b, httpc_cfg_t *hc, char *err,
                      size_t errlen)
{
    const char *c = opt(cfg, "client");
    int rc;
    const char *lp = opt(cfg, "loop");
    oai_lean_cfg_t *lc = &b->lc;

    if (strcmp(c, "lean") != 0 && strcmp(c, "curl") != 0) {
        snprintf(err, errlen, "option client=%s: expected lean or curl", c);
        return -EINVAL;
    }
    if (strcmp(lp, "node") != 0 && strcmp(lp, "own") != 0) {
        snprintf(err, errlen, "option loop=%s: expected node or own", lp);
        return -EINVAL;
    }
    b->use_lean = strcmp(c, "lean") == 0;
    b->node_loop = b->use_lean && strcmp(lp, "node") == 0;
    hc->ca_file = b->ca_file;
    if (!b->use_lean)
        return httpc_svc_open(hc, "stream", &b->http, &b->lives, err, errlen);
    if ((rc = httpc_lives_init(&b->lives)) < 0) {
        snprintf(err, errlen, "the stream registry's mutex: %s", strerror(-rc));
        return rc;
    }
    memset(lc, 0, sizeof(*lc));
    lc->url = b->url;
    lc->headers = b->headers;
    lc->max_conns = b->max_concurrency;
    lc->connect_ms = hc->connect_timeout_ms;
    lc->timeout_ms = b->timeout_ms;
    lc->idle_ms = b->stream_idle_ms;
    lc->ca_file = b->ca_file;
    lc->coalesce_us = hc->coalesce_us;
    /* on a thread of its own until (and unless) the node offers its loop (oai_attach) */
    if ((rc = oai_lean_open(lc, NULL, &b->lean, err, errlen)) < 0)
        httpc_lives_destroy(&b->lives);
    return rc;
}

/* Open: the completion and health URLs, the model name and the headers, then the pool on |hc|
 * (no request is sent: the engine's readiness is oai_ready's, ABI 1.2). */
static int oai_open(const sut_backend_config_t *cfg, sut_backend_t *b, httpc_cfg_t *hc, char *err,
                    size_t errlen)
{
    const char *url = opt(cfg, "url"), *s;
    unsigned long long u;
    size_t ul;
    int rc;

    if ((rc = httpc_svc_base(url, &ul, err, errlen)) < 0)
        return rc;
    b->url = httpc_svc_url(url, ul, httpc_oai_dialect_path(b->gen.dialect));
    if (!b->url)
        return -ENOMEM;
    if (httpc_opts_u("health_timeout_ms", opt(cfg, "health_timeout_ms"), 1, 600000, &u, err,
                     errlen) < 0)
        return -EINVAL;
    b->health_timeout_ms = (long)u;
    if ((rc = httpc_svc_health(url, ul, opt(cfg, "health_path"), &b->health, err, errlen)) < 0)
        return rc;
    b->ca_file = opt(cfg, "ca_file");
    if (b->ca_file && !*b->ca_file)
        b->ca_file = NULL;
    b->model = strdup(opt(cfg, "model"));
    if (!b->model)
        return -ENOMEM;
    b->gen.model = b->model;
    b->headers[0] = "Content-Type: application/json";
    s = opt(cfg, "api_key");
    if (s) {
        if (!printable(s)) {
            snprintf(err, errlen, "option api_key: printable ASCII expected");
            return -EINVAL;
        }
        b->auth = malloc(strlen(s) + 32);
        if (!b->auth)
            return -ENOMEM;
        sprintf(b->auth, "Authorization: Bearer %s", s);
        b->headers[1] = b->auth;
    }
    snprintf(b->device, sizeof(b->device), "%s engine at %s (max %u streams)",
             httpc_oai_dialect_name(b->gen.dialect), b->url, b->max_concurrency);
    hc->max_conns = b->max_concurrency;
    return oai_client(cfg, b, hc, err, errlen);
}

/* Also what a failed create leaves: the pool only when it was opened. */
static void oai_destroy(sut_backend_t *b)
{
    if (b->lean) {
        oai_lean_close(b->lean);
        httpc_lives_destroy(&b->lives);
    }
    httpc_svc_close(b->http, &b->lives);
    free(b->health);
    free(b->auth);
    free(b->model);
    free(b->url);
    free(b);
}

static int oai_create(const sut_backend_config_t *cfg, sut_backend_t **out, char *err,
                      size_t errlen)
{
    sut_backend_t *b;
    httpc_cfg_t hc = {0};
    int rc;

    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->log = cfg->log;
    if ((rc = oai_parse(cfg, b, &hc, err, errlen)) < 0 ||
        (rc = oai_open(cfg, b, &hc, err, errlen)) < 0) {
        oai_destroy(b);
        return rc;
    }
    httpc_logf(b->log, SUT_LOG_INFO,
               "openai backend: %s, max_tokens=%u min_tokens=%u temperature=%g coalesce_us=%u "
               "stream_idle_ms=%ld client=%s%s%s",
               b->device, b->gen.max_tokens, b->gen.min_tokens, b->gen.temperature, hc.coalesce_us,
               b->stream_idle_ms, b->use_lean ? "lean" : "curl",
               b->use_lean ? (b->node_loop ? " loop=node" : " loop=own") : "",
               b->gen.oneshot ? " oneshot (no streaming)" : "");
    *out = b;
    return 0;
}

static int oai_describe(sut_backend_t *b, sut_backend_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->name = "openai";
    info->device = b->device;
    /* The engine batches continuously: every sample is its own stream, so a batch of any size
     * is dispatched at once, and as many batches run as the engine takes streams. */
    info->preferred_batch = 1;
    info->max_batch = b->max_concurrency;
    info->engines = b->max_concurrency;
    /* What one stream may make the backend hold, charged by the node against its memory budget
     * while the sample runs: the SSE decoder's line and event buffers (max_event each), the JSON
     * parser's blocks (bounded by the event), and the token and logprob-token arrays
     * (max_tokens each); every one of them refuses to grow past its limit. */
    info->output_size = 3 * (b->max_event + 1) + 2 * sizeof(int32_t) * (size_t)b->gen.max_tokens;
    info->input_size = 0;
    info->weight = 1.0;
    info->flags = SUT_BACKEND_F_STREAMING | SUT_BACKEND_F_INLINE;
    return 0;
}

/* ---- one stream ---- */

static void stream_free(stream_t *s)
{
    httpc_oai_stream_free(&s->st);
    free(s->body);
    free(s);
}

/* The first token to the node as soon as it is in. */
static void first_token(stream_t *s)
{
    if (!s->first_sent && s->st.out.n > 0) {
        sut_result_t res = {s->index, 0, s->st.out.toks, 4, 1};
        s->first_sent = 1;
        s->batch->first_token(s->batch, &res, 1);
    }
}

/* A piece of the answer: 1 stops the stream. *progress: a token came; *first: the first token
 * just went out (TTFT is measured; the rest may wait, coalesce_us). */
static int stream_data(stream_t *s, const char *p, size_t n, int *progress, int *first)
{
    int had = s->first_sent;

    *progress = *first = 0;
    if (httpc_oai_stream_feed(&s->st, p, n, progress))
        return 1;
    if (!s->st.gen->oneshot) {
        first_token(s);
        *first = !had && s->first_sent;
    }
    return 0;
}

static int on_data(httpc_req_t *r, const char *p, size_t n)
{
    stream_t *s = (stream_t *)r;
    int progress, first;

    if (stream_data(s, p, n, &progress, &first))
        return 1;
    if (progress) /* a token: the idle deadline restarts */
        httpc_progress(&s->req);
    if (first)
        httpc_coalesce(&s->req);
    return 0;
}

static int on_lean_data(httpc_h1_req_t *r, const char *p, size_t n)
{
    stream_t *s = r->ctx;
    int progress, first;

    if (stream_data(s, p, n, &progress, &first))
        return 1;
    if (progress)
        oai_lean_progress(&s->lr);
    if (first)
        oai_lean_coalesce(&s->lr);
    return 0;
}

/* An engine's error answer as its own words: "HTTP 400: <message>" from the JSON error bodies of
 * vLLM, SGLang, llama.cpp, OpenAI and TGI (httpc_json_message); |msg| as it is otherwise. */
static const char *engine_error(const char *msg, char *buf, size_t len)
{
    const char *h = strstr(msg, "HTTP "), *body;
    char m[256], *end;
    long code;

    if (!h)
        return msg;
    code = strtol(h + 5, &end, 10); /* curl's "HTTP 400 from URL: ...", lean's "HTTP 400: ..." */
    body = strstr(end, ": ");
    if (code < 400 || !body || !httpc_json_message(body + 2, m, sizeof(m)))
        return msg;
    /* Truncated to |len| as the reason on the wire is (SUT_BACKEND_ERROR_MAX). */
    if (snprintf(buf, len, "HTTP %ld: %s", code, m) < 0)
        return msg;
    return buf;
}

static void stream_done(stream_t *s, int status, const char *msg)
{
    sut_backend_t *b = s->b;
    sut_result_t res = {s->index, 0, NULL, 0, 0};
    char ebuf[SUT_BACKEND_ERROR_MAX + 1] = "", fbuf[sizeof(s->st.err) + 600];

    if (status == 0 && httpc_oai_stream_end(&s->st) == 0)
        first_token(s); /* oneshot: the whole response at once */
    if (status == HTTPC_ESTATUS)
        msg = engine_error(msg, ebuf, sizeof(ebuf));
    if (status != HTTPC_ECANCEL && (s->st.failed || status != 0)) {
        /* The stream's own findings (SSE, JSON, token checks) name the engine as the transport's
         * do; either may quote the engine's bytes (a bad event's or body's start): printable ASCII
         * only, in the log and to the client */
        if (s->st.failed)
            snprintf(fbuf, sizeof(fbuf), "%s: %s", b->url, s->st.err);
        else
            snprintf(fbuf, sizeof(fbuf), "%s", msg ? msg : "(no message)");
        httpc_text_clean(fbuf, '?');
        msg = fbuf;
    }
    if (status == HTTPC_ECANCEL) {
        res.status = SUT_BACKEND_ECANCELED; /* its client is gone: nothing to tell anyone */
    } else if (s->st.failed || status != 0) {
        httpc_logf(b->log, SUT_LOG_WARN, "openai backend: sample %zu failed: %s%s", s->index, msg,
                   status == HTTPC_EIDLE ? " (stream_idle_ms)" : "");
        res.status = s->st.failed ? -EPROTO : status;
        /* The reason goes to the client too (ABI 1.2): the engine's words in its log. */
        res.data = msg;
        res.size = strlen(res.data);
    } else {
        res.data = s->st.out.toks;
        res.size = s->st.out.n * sizeof(int32_t);
        res.n_tokens = (int64_t)s->st.out.n;
    }
    httpc_live_del(&b->lives, &s->live); /* before the batch may go back to the node */
    s->batch->complete(s->batch, &res, 1);
    stream_free(s);
}

static void on_done(httpc_req_t *r, int status, const char *msg)
{
    stream_done((stream_t *)r, status, msg);
}

static void on_lean_done(oai_lreq_t *r, int status, const char *msg)
{
    stream_done(r->h1.ctx, status, msg);
}

static int oai_infer(sut_backend_t *b, sut_batch_t *batch)
{
    const size_t n = batch->n;
    stream_t **ss;
    size_t i;
    int rc = 0;

    /* Prepare every stream first: on failure nothing was completed and the node fails the
     * batch; after the first submission the samples belong to the pool. */
    ss = calloc(n, sizeof(*ss));
    if (!ss)
        return -ENOMEM;
    for (i = 0; i < n && rc == 0; i++) {
        const sut_sample_t *smp = &batch->samples[i];
        size_t blen;
        stream_t *s;

        if (smp->size == 0 || smp->size % 4) {
            httpc_logf(
                b->log, SUT_LOG_WARN,
                "openai backend: sample %zu has %zu bytes, not a whole number of int32 tokens", i,
                smp->size);
            rc = -EINVAL;
            break;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
            rc = -ENOMEM;
            break;
        }
        ss[i] = s;
        s->b = b;
        s->batch = batch;
        s->index = i;
        httpc_oai_stream_init(&s->st, &b->gen, b->max_event);
        if ((rc = httpc_oai_dialect_body(&b->gen, smp->data, smp->size / 4, &s->body, &blen)) < 0)
            break;
        s->req.url = b->url;
        s->req.body = s->body;
        s->req.body_len = blen;
        s->req.headers = b->headers;
        s->req.timeout_ms = b->timeout_ms;
        s->req.on_data = on_data;
        s->req.on_done = on_done;
        s->req.ctx = s;
        s->lr.h1.body = s->body;
        s->lr.h1.body_len = blen;
        s->lr.h1.on_data = on_lean_data;
        s->lr.on_done = on_lean_done;
        s->lr.h1.ctx = s;
    }
    if (rc < 0) {
        for (i = 0; i < n; i++)
            if (ss[i])
                stream_free(ss[i]);
        free(ss);
        return rc;
    }
    for (i = 0; i < n; i++) {
        ss[i]->live.req = &ss[i]->req;
        ss[i]->live.batch = batch;
        ss[i]->live.index = i;
        httpc_live_add(&b->lives, &ss[i]->live);
        if ((b->lean ? oai_lean_submit(b->lean, &ss[i]->lr) : httpc_submit(b->http, &ss[i]->req)) <
            0) {
            sut_result_t res = {i, -ECANCELED, NULL, 0, 0};
            httpc_live_del(&b->lives, &ss[i]->live);
            stream_free(ss[i]);
            batch->complete(batch, &res, 1);
        }
    }
    free(ss);
    return 0;
}

/* Under the registry's lock: the stream's on_done has not returned. */
static void mark_lean(httpc_live_t *e, void *arg)
{
    (void)arg;
    oai_lean_cancel(&((stream_t *)((char *)e - offsetof(stream_t, live)))->lr);
}

static void oai_cancel(sut_backend_t *b, sut_batch_t *batch, const size_t *indices, size_t n)
{
    size_t k = b->lean ? httpc_live_mark(&b->lives, batch, indices, n, mark_lean, NULL)
                       : httpc_live_cancel(&b->lives, b->http, batch, indices, n);

    httpc_logf(b->log, SUT_LOG_DEBUG, "openai backend: %zu of %zu cancelled samples were running",
               k, n);
}

/* ABI 1.2: the engine's health endpoint answers (httpc/probe.h). */
static int oai_ready(sut_backend_t *b, char *why, size_t whylen)
{
    if (!b->health)
        return 1;
    return httpc_probe_get_ca(b->health, b->headers + 1, b->ca_file, b->health_timeout_ms, why,
                              whylen);
}

/* ABI 1.3: the lean client moves onto the node's I/O loop (loop=node): a request leaves from
 * infer() itself and its first token and end are handed over on that thread, with no wake-up of
 * another thread. Before the first infer(), so the client on its own thread has sent nothing. */
static int oai_attach(sut_backend_t *b, void *loop)
{
    oai_lean_t *l = NULL;
    char err[512];
    int rc;

    if (!b->lean || !b->node_loop)
        return -ENOTSUP;
    if ((rc = oai_lean_open(&b->lc, loop, &l, err, sizeof(err))) < 0) {
        httpc_logf(b->log, SUT_LOG_WARN,
                   "openai backend: %s; the HTTP client stays on a thread of its own", err);
        return rc;
    }
    oai_lean_close(b->lean);
    b->lean = l;
    httpc_logf(b->log, SUT_LOG_INFO, "openai backend: the HTTP client runs on the node's I/O loop");
    return 0;
}

static void oai_detach(sut_backend_t *b)
{
    oai_lean_detach(b->lean);
}

static const sut_backend_ops_t ops = {
    SUT_BACKEND_ABI_VERSION,
    sizeof(sut_backend_ops_t),
    "openai",
    oai_create,
    oai_destroy,
    oai_describe,
    oai_infer,
    NULL,
    NULL,
    oai_cancel,
    oai_ready,
    oai_attach,
    oai_detach,
};

SUT_BACKEND_ENTRY(ops);
