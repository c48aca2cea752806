/* Request bodies and stream events of each engine dialect (see oai_dialect.h). JSON is parsed
 * with cJSON; the bodies are formatted here (numbers and fixed keys only). */
#include "oai_dialect.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"vllm", "trtllm", "sglang", "llamacpp"};

int oai_dialect_from_name(const char *name, oai_dialect_t *d)
{
    size_t i;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            *d = (oai_dialect_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *oai_dialect_name(oai_dialect_t d)
{
    return names[d];
}

const char *oai_dialect_path(oai_dialect_t d)
{
    switch (d) {
    case OAI_SGLANG:
        return "/generate";
    case OAI_LLAMACPP:
        return "/completion";
    default:
        return "/v1/completions";
    }
}

/* A growing output buffer for the body. */
typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        {
            size_t ncap = b->cap ? b->cap * 2 : 512;
            char *np;
            while (ncap < b->len + (size_t)n + 1)
                ncap *= 2;
            np = realloc(b->p, ncap);
            if (!np) {
                b->failed = 1;
                return;
            }
            b->p = np;
            b->cap = ncap;
        }
    }
}

static void sb_tokens(sbuf_t *b, const unsigned char *t, size_t n)
{
    size_t i;
    sb_printf(b, "[");
    for (i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, t + 4 * i, 4); /* samples need not be aligned */
        sb_printf(b, i ? ",%d" : "%d", (int)v);
    }
    sb_printf(b, "]");
}

/* The model name as a JSON string: only printable ASCII without quotes or backslashes is
 * accepted at create time, so it needs no escaping here. */
int oai_dialect_body(const oai_gen_t *g, const void *prompt, size_t n, char **out, size_t *len)
{
    sbuf_t b = {0};

    switch (g->dialect) {
    case OAI_VLLM:
    case OAI_TRTLLM:
        sb_printf(&b, "{\"model\":\"%s\",\"prompt\":", g->model);
        sb_tokens(&b, prompt, n);
        sb_printf(&b,
                  ",\"max_tokens\":%u,\"min_tokens\":%u,\"temperature\":%.17g,\"stream\":true,"
                  "\"ignore_eos\":%s,\"return_token_ids\":true,\"logprobs\":0,"
                  "\"return_tokens_as_token_ids\":true}",
                  g->max_tokens, g->min_tokens, g->temperature, g->ignore_eos ? "true" : "false");
        break;
    case OAI_SGLANG:
        sb_printf(&b, "{\"input_ids\":");
        sb_tokens(&b, prompt, n);
        sb_printf(&b,
                  ",\"sampling_params\":{\"max_new_tokens\":%u,\"min_new_tokens\":%u,"
                  "\"temperature\":%.17g,\"ignore_eos\":%s},\"stream\":true}",
                  g->max_tokens, g->min_tokens, g->temperature, g->ignore_eos ? "true" : "false");
        break;
    case OAI_LLAMACPP:
        sb_printf(&b, "{\"prompt\":");
        sb_tokens(&b, prompt, n);
        sb_printf(&b,
                  ",\"n_predict\":%u,\"temperature\":%.17g,\"ignore_eos\":%s,\"stream\":true,"
                  "\"return_tokens\":true,\"cache_prompt\":false}",
                  g->max_tokens, g->temperature, g->ignore_eos ? "true" : "false");
        break;
    }
    if (b.failed) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

static int push(oai_out_t *o, double v)
{
    if (v < 0 || v > 2147483647.0 || v != (double)(int32_t)v) {
        snprintf(o->err, sizeof(o->err), "token id %g is not a non-negative int32", v);
        return -EPROTO;
    }
    if (o->n >= o->max) {
        snprintf(o->err, sizeof(o->err), "the engine sent more than max_tokens=%zu tokens", o->max);
        return -EPROTO;
    }
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 64;
        int32_t *nt;
        if (ncap > o->max)
            ncap = o->max;
        nt = realloc(o->toks, ncap * sizeof(*nt));
        if (!nt) {
            snprintf(o->err, sizeof(o->err), "out of memory for %zu tokens", ncap);
            return -ENOMEM;
        }
        o->toks = nt;
        o->cap = ncap;
    }
    o->toks[o->n++] = (int32_t)v;
    return 0;
}

/* Appends a JSON array of numbers, from element |skip| on. */
static int push_array(oai_out_t *o, const cJSON *a, size_t skip)
{
    const cJSON *e;
    size_t i = 0;
    int rc;

    cJSON_ArrayForEach(e, a)
    {
        if (i++ < skip)
            continue;
        if (!cJSON_IsNumber(e)) {
            snprintf(o->err, sizeof(o->err), "a token id that is not a number");
            return -EPROTO;
        }
        if ((rc = push(o, e->valuedouble)) < 0)
            return rc;
    }
    return 0;
}

/* "token_id:N" strings of vLLM's return_tokens_as_token_ids. */
static int push_token_strings(oai_out_t *o, const cJSON *a)
{
    const cJSON *e;
    int rc;

    cJSON_ArrayForEach(e, a)
    {
        char *end;
        long v;
        if (!cJSON_IsString(e) || strncmp(e->valuestring, "token_id:", 9) != 0) {
            snprintf(o->err, sizeof(o->err),
                     "logprobs token is not \"token_id:N\" (start the engine with "
                     "return_tokens_as_token_ids, or use one that returns token_ids)");
            return -EPROTO;
        }
        errno = 0;
        v = strtol(e->valuestring + 9, &end, 10);
        if (errno || *end || end == e->valuestring + 9) {
            snprintf(o->err, sizeof(o->err), "bad token string '%.40s'", e->valuestring);
            return -EPROTO;
        }
        if ((rc = push(o, (double)v)) < 0)
            return rc;
    }
    return 0;
}

/* {"error": {"message": ...}} or {"error": "..."} or {"object":"error","message":...}. */
static int engine_error(const cJSON *root, oai_out_t *o)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, "object");
    const cJSON *msg = NULL;

    if (e) {
        msg = cJSON_IsString(e) ? e : cJSON_GetObjectItemCaseSensitive(e, "message");
    } else if (cJSON_IsString(obj) && strcmp(obj->valuestring, "error") == 0) {
        msg = cJSON_GetObjectItemCaseSensitive(root, "message");
    } else {
        return 0;
    }
    snprintf(o->err, sizeof(o->err), "engine error: %.200s",
             cJSON_IsString(msg) ? msg->valuestring : "(no message)");
    return -EPROTO;
}

static int openai_event(const cJSON *root, oai_out_t *o)
{
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *c, *ids, *lp, *fin;
    int rc;

    if (!cJSON_IsArray(choices)) {
        snprintf(o->err, sizeof(o->err), "event without a choices array");
        return -EPROTO;
    }
    c = cJSON_GetArrayItem(choices, 0);
    if (!c) /* a usage-only chunk */
        return 0;
    ids = cJSON_GetObjectItemCaseSensitive(c, "token_ids");
    if (cJSON_IsArray(ids)) {
        rc = push_array(o, ids, 0);
    } else {
        lp = cJSON_GetObjectItemCaseSensitive(c, "logprobs");
        lp = lp ? cJSON_GetObjectItemCaseSensitive(lp, "tokens") : NULL;
        rc = cJSON_IsArray(lp) ? push_token_strings(o, lp) : 0;
    }
    if (rc < 0)
        return rc;
    fin = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
    if (fin && !cJSON_IsNull(fin))
        o->done = 1;
    return 0;
}

static int sglang_event(const oai_gen_t *g, const cJSON *root, oai_out_t *o)
{
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "output_ids");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta_info");
    const cJSON *fin = meta ? cJSON_GetObjectItemCaseSensitive(meta, "finish_reason") : NULL;
    int rc;

    if (cJSON_IsArray(ids)) {
        size_t have = o->n, len = (size_t)cJSON_GetArraySize(ids);
        if (g->incremental) {
            rc = push_array(o, ids, 0);
        } else if (len < have) {
            snprintf(o->err, sizeof(o->err),
                     "cumulative output_ids shrank from %zu to %zu (is the engine streaming "
                     "incrementally? set incremental=1)",
                     have, len);
            return -EPROTO;
        } else {
            rc = push_array(o, ids, have);
        }
        if (rc < 0)
            return rc;
    }
    if (fin && !cJSON_IsNull(fin))
        o->done = 1;
    return 0;
}

static int llamacpp_event(const cJSON *root, oai_out_t *o)
{
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    int rc;

    if (cJSON_IsArray(ids) && (rc = push_array(o, ids, 0)) < 0)
        return rc;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stop")))
        o->done = 1;
    return 0;
}

int oai_dialect_event(const oai_gen_t *g, const char *data, size_t len, oai_out_t *o)
{
    cJSON *root;
    int rc;

    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        o->done = 1;
        return 0;
    }
    root = cJSON_ParseWithLength(data, len);
    if (!root || !cJSON_IsObject(root)) {
        snprintf(o->err, sizeof(o->err), "event is not a JSON object: '%.60s'", data);
        cJSON_Delete(root);
        return -EPROTO;
    }
    rc = engine_error(root, o);
    if (rc == 0) {
        switch (g->dialect) {
        case OAI_VLLM:
        case OAI_TRTLLM:
            rc = openai_event(root, o);
            break;
        case OAI_SGLANG:
            rc = sglang_event(g, root, o);
            break;
        case OAI_LLAMACPP:
            rc = llamacpp_event(root, o);
            break;
        }
    }
    cJSON_Delete(root);
    return rc;
}

void oai_out_free(oai_out_t *o)
{
    free(o->toks);
    o->toks = NULL;
    o->n = o->cap = 0;
}
