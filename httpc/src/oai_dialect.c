/* Request bodies of each engine dialect (see httpc/oai.h), formatted here (numbers and fixed
 * keys only); the stream events are read in oai_event.c. */
#include "httpc/oai.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"vllm", "trtllm", "sglang", "llamacpp"};

int httpc_oai_dialect_from_name(const char *name, httpc_oai_dialect_t *d)
{
    size_t i;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            *d = (httpc_oai_dialect_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *httpc_oai_dialect_name(httpc_oai_dialect_t d)
{
    return names[d];
}

const char *httpc_oai_dialect_path(httpc_oai_dialect_t d)
{
    switch (d) {
    case HTTPC_OAI_SGLANG:
        return "/generate";
    case HTTPC_OAI_LLAMACPP:
        return "/completion";
    default:
        return "/v1/completions";
    }
}

/* "00" to "99": two digits per division. */
static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

/* Four digits of |u| (< 10000), leading zeros included. */
static void put4(char *w, uint32_t u)
{
    memcpy(w, digits2 + 2 * (u / 100), 2);
    memcpy(w + 2, digits2 + 2 * (u % 100), 2);
}

static size_t digits_of(uint32_t u)
{
    size_t k = 1;

    for (uint32_t p = 10; k < 10 && u >= p; p *= 10)
        k++;
    return k;
}

/* The prompt's token IDs as a JSON array at |w| (room for 12 bytes per ID and 2 more), digits
 * written here: one vsnprintf per token was most of a request's formatting (callgrind: about
 * 53 000 instructions for 64 tokens); each ID's digits counted, then written back to front in
 * place, two per division, an ID of 9 or 10 digits in two chains of four (an endpoint's prompt of
 * 100 ten-digit IDs: 12.9 % of loadgen-node's CPU with one digit per step and a copy). Returns
 * the end. */
static char *put_tokens(char *w, const unsigned char *t, size_t n)
{
    *w++ = '[';
    for (size_t i = 0; i < n; i++) {
        int32_t v;
        uint32_t u;
        char *q;

        memcpy(&v, t + 4 * i, 4); /* samples need not be aligned */
        if (i)
            *w++ = ',';
        if (v < 0)
            *w++ = '-';
        u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
        if (u >= 100000000u) {
            uint32_t lo = u % 100000000u;
            u /= 100000000u;
            if (u >= 10) {
                memcpy(w, digits2 + 2 * u, 2);
                w += 2;
            } else {
                *w++ = (char)('0' + u);
            }
            put4(w, lo / 10000);
            put4(w + 4, lo % 10000);
            w += 8;
            continue;
        }
        w += digits_of(u);
        q = w; /* back to front from the ID's end */
        while (u >= 100) {
            uint32_t r = u % 100;
            u /= 100;
            q -= 2;
            memcpy(q, digits2 + 2 * r, 2);
        }
        if (u >= 10)
            memcpy(q - 2, digits2 + 2 * u, 2);
        else
            q[-1] = (char)('0' + u);
    }
    *w++ = ']';
    return w;
}

/* The body's text before and after the prompt's IDs (the model name as a JSON string: only
 * printable ASCII without quotes or backslashes is accepted at create time, so it needs no
 * escaping here), with snprintf's contract: the lengths they need, whatever the room. */
static int parts_format(const httpc_oai_gen_t *g, char *h, size_t hcap, char *t, size_t tcap,
                        size_t *hl, size_t *tl)
{
    const char *eos = g->ignore_eos ? "true" : "false";
    int a = -1, b = -1;

    switch (g->dialect) {
    case HTTPC_OAI_VLLM:
    case HTTPC_OAI_TRTLLM:
        a = snprintf(h, hcap, "{\"model\":\"%s\",\"prompt\":", g->model);
        b = snprintf(t, tcap,
                     ",\"max_tokens\":%u,\"min_tokens\":%u,\"temperature\":%.17g,\"stream\":true,"
                     "\"stream_options\":{\"include_usage\":true},"
                     "\"ignore_eos\":%s,\"return_token_ids\":true,\"logprobs\":0,"
                     "\"return_tokens_as_token_ids\":true}",
                     g->max_tokens, g->min_tokens, g->temperature, eos);
        break;
    case HTTPC_OAI_SGLANG:
        a = snprintf(h, hcap, "{\"input_ids\":");
        b = snprintf(t, tcap,
                     ",\"sampling_params\":{\"max_new_tokens\":%u,\"min_new_tokens\":%u,"
                     "\"temperature\":%.17g,\"ignore_eos\":%s},\"stream\":true}",
                     g->max_tokens, g->min_tokens, g->temperature, eos);
        break;
    case HTTPC_OAI_LLAMACPP:
        a = snprintf(h, hcap, "{\"prompt\":");
        b = snprintf(t, tcap,
                     ",\"n_predict\":%u,\"temperature\":%.17g,\"ignore_eos\":%s,\"stream\":%s,"
                     "\"return_tokens\":true,\"cache_prompt\":false}",
                     g->max_tokens, g->temperature, eos, g->oneshot ? "false" : "true");
        break;
    }
    if (a < 0 || b < 0)
        return -EINVAL;
    *hl = (size_t)a;
    *tl = (size_t)b;
    return 0;
}

/* The parts of the last settings this thread formatted a body for: they depend on the settings
 * only, and the %.17g and format strings were a third of a 100-ID body's cost, per request. */
static _Thread_local struct {
    int valid;
    httpc_oai_gen_t g;
    char model[128];
    size_t hl, tl;
    char head[192], tail[320];
} parts;

static int parts_same(const httpc_oai_gen_t *g)
{
    return parts.valid && parts.g.dialect == g->dialect && parts.g.max_tokens == g->max_tokens &&
           parts.g.min_tokens == g->min_tokens &&
           memcmp(&parts.g.temperature, &g->temperature, sizeof(double)) == 0 &&
           parts.g.ignore_eos == g->ignore_eos && parts.g.oneshot == g->oneshot &&
           strcmp(parts.model, g->model ? g->model : "") == 0;
}

int httpc_oai_dialect_body(const httpc_oai_gen_t *g, const void *prompt, size_t n, char **out,
                           size_t *len)
{
    const char *model = g->model ? g->model : "";
    const char *head = parts.head, *tail = parts.tail;
    char *own = NULL, *body, *w;
    size_t hl, tl;

    if (!parts_same(g)) {
        parts.valid = strlen(model) < sizeof(parts.model) &&
                      parts_format(g, parts.head, sizeof(parts.head), parts.tail,
                                   sizeof(parts.tail), &parts.hl, &parts.tl) == 0 &&
                      parts.hl < sizeof(parts.head) && parts.tl < sizeof(parts.tail);
        if (parts.valid) {
            parts.g = *g;
            strcpy(parts.model, model);
        }
    }
    if (parts.valid) {
        hl = parts.hl;
        tl = parts.tl;
    } else { /* a model name too long to keep: formatted for this body alone */
        if (parts_format(g, NULL, 0, NULL, 0, &hl, &tl) < 0)
            return -ENOMEM;
        own = malloc(hl + tl + 2);
        if (!own || parts_format(g, own, hl + 1, own + hl + 1, tl + 1, &hl, &tl) < 0) {
            free(own);
            return -ENOMEM;
        }
        head = own;
        tail = own + hl + 1;
    }
    if (n > ((size_t)-1 / 2 - hl - tl) / 12) { /* "-2147483648," is 12 bytes */
        free(own);
        return -ENOMEM;
    }
    body = malloc(hl + 12 * n + 2 + tl + 1);
    if (!body) {
        free(own);
        return -ENOMEM;
    }
    memcpy(body, head, hl);
    w = put_tokens(body + hl, prompt, n);
    memcpy(w, tail, tl);
    w += tl;
    *w = '\0';
    free(own);
    *out = body;
    *len = (size_t)(w - body);
    return 0;
}

/* The engine's own count of output tokens against the token IDs that arrived. */
static int oai_dialect_count(const httpc_oai_gen_t *g, httpc_oai_out_t *o)
{
    static const char *const fields[] = {"usage.completion_tokens", "usage.completion_tokens",
                                         "meta_info.completion_tokens", "tokens_predicted"};

    if (!o->counted || o->engine_n == (uint64_t)o->n)
        return 0;
    snprintf(o->err, sizeof(o->err),
             "the engine counted %llu output tokens (%s) but sent %zu token IDs: %s",
             (unsigned long long)o->engine_n, fields[g->dialect], o->n,
             g->dialect == HTTPC_OAI_LLAMACPP && !g->oneshot
                 ? "llama-server leaves out the IDs of tokens it holds back as incomplete UTF-8 "
                   "while streaming; oneshot=1 asks for all of them in one response"
                 : "the output would be short or padded");
    return -EPROTO;
}

int httpc_oai_dialect_end(const httpc_oai_gen_t *g, httpc_oai_out_t *o)
{
    static const char *const fields[] = {
        "choices[0].token_ids or choices[0].logprobs.tokens (\"token_id:N\")",
        "choices[0].token_ids or choices[0].logprobs.tokens (\"token_id:N\")", "output_ids",
        "tokens"};

    if (o->n > 0 || !o->had_text)
        return oai_dialect_count(g, o);
    snprintf(o->err, sizeof(o->err),
             "the stream ended with no token IDs although its events carried text: "
             "dialect=%s reads them from %s; is dialect= right, and does the engine return "
             "token IDs?",
             httpc_oai_dialect_name(g->dialect), fields[g->dialect]);
    return -EPROTO;
}

void httpc_oai_out_free(httpc_oai_out_t *o)
{
    free(o->toks);
    o->toks = NULL;
    o->n = o->cap = 0;
}
