/* Request bodies of each engine dialect (see httpc/oai.h), formatted here (numbers and fixed
 * keys only); the stream events are read in oai_event.c. */
#include "httpc/oai.h"

#include "cmn/sbuf.h"

#include <errno.h>
#include <stdint.h>
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

/* The prompt's token IDs as a JSON array, digits written here: one vsnprintf per token was most
 * of a request's formatting (callgrind: about 53 000 instructions for 64 tokens). */
static void sb_tokens(cmn_sbuf_t *b, const unsigned char *t, size_t n)
{
    size_t i;
    char *w;

    if (n > (SIZE_MAX / 2 - 2) / 12) { /* "-2147483648," is 12 bytes */
        b->oom = 1;
        return;
    }
    /* "[", the IDs and their commas, "]" (and the NUL the reserve keeps room for) */
    if (cmn_sbuf_reserve(b, 12 * n + 2) < 0)
        return;
    w = b->p + b->len;
    *w++ = '[';
    for (i = 0; i < n; i++) {
        int32_t v;
        uint32_t u;
        char d[10];
        int k = 0;

        memcpy(&v, t + 4 * i, 4); /* samples need not be aligned */
        if (i)
            *w++ = ',';
        if (v < 0)
            *w++ = '-';
        u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
        do
            d[k++] = (char)('0' + u % 10);
        while ((u /= 10) != 0);
        while (k)
            *w++ = d[--k];
    }
    *w++ = ']';
    *w = '\0';
    b->len = (size_t)(w - b->p);
}

/* The model name as a JSON string: only printable ASCII without quotes or backslashes is
 * accepted at create time, so it needs no escaping here. */
int httpc_oai_dialect_body(const httpc_oai_gen_t *g, const void *prompt, size_t n, char **out,
                           size_t *len)
{
    cmn_sbuf_t b = {0};

    switch (g->dialect) {
    case HTTPC_OAI_VLLM:
    case HTTPC_OAI_TRTLLM:
        cmn_sbuf_printf(&b, "{\"model\":\"%s\",\"prompt\":", g->model);
        sb_tokens(&b, prompt, n);
        cmn_sbuf_printf(
            &b,
            ",\"max_tokens\":%u,\"min_tokens\":%u,\"temperature\":%.17g,\"stream\":true,"
            "\"stream_options\":{\"include_usage\":true},"
            "\"ignore_eos\":%s,\"return_token_ids\":true,\"logprobs\":0,"
            "\"return_tokens_as_token_ids\":true}",
            g->max_tokens, g->min_tokens, g->temperature, g->ignore_eos ? "true" : "false");
        break;
    case HTTPC_OAI_SGLANG:
        cmn_sbuf_printf(&b, "{\"input_ids\":");
        sb_tokens(&b, prompt, n);
        cmn_sbuf_printf(&b,
                        ",\"sampling_params\":{\"max_new_tokens\":%u,\"min_new_tokens\":%u,"
                        "\"temperature\":%.17g,\"ignore_eos\":%s},\"stream\":true}",
                        g->max_tokens, g->min_tokens, g->temperature,
                        g->ignore_eos ? "true" : "false");
        break;
    case HTTPC_OAI_LLAMACPP:
        cmn_sbuf_printf(&b, "{\"prompt\":");
        sb_tokens(&b, prompt, n);
        cmn_sbuf_printf(&b,
                        ",\"n_predict\":%u,\"temperature\":%.17g,\"ignore_eos\":%s,\"stream\":%s,"
                        "\"return_tokens\":true,\"cache_prompt\":false}",
                        g->max_tokens, g->temperature, g->ignore_eos ? "true" : "false",
                        g->oneshot ? "false" : "true");
        break;
    }
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
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
