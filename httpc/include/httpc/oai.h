/* httpc/oai.h: how each serving engine takes a token-ID prompt and streams token IDs back.
 * No I/O: a request body from a prompt, and the output tokens from one SSE event's data.
 *
 *   vllm      POST /v1/completions  {"prompt":[ids], "max_tokens", "min_tokens", "temperature",
 *             "stream":true, "stream_options":{"include_usage":true}, "return_token_ids":true,
 *             "logprobs":0, "return_tokens_as_token_ids":true}; tokens from
 *             choices[0].token_ids, else from choices[0].logprobs.tokens ("token_id:N"); ends
 *             with finish_reason / [DONE]; the engine's count from usage.completion_tokens
 *   trtllm    the same OpenAI completions request and stream (trtllm-serve)
 *   sglang    POST /generate  {"input_ids":[ids], "sampling_params":{"max_new_tokens",
 *             "min_new_tokens", "temperature"}, "stream":true}; tokens from output_ids
 *             (cumulative unless incremental=1), end from meta_info.finish_reason / [DONE];
 *             the engine's count from meta_info.completion_tokens
 *   llamacpp  POST /completion  {"prompt":[ids], "n_predict", "temperature", "stream":true,
 *             "return_tokens":true, "cache_prompt":false}; tokens from "tokens", end at
 *             "stop":true (no min_tokens in this API); the engine's count from
 *             tokens_predicted. oneshot=1: "stream":false, one JSON response with every token
 *             ID (llama-server's stream leaves out the IDs of tokens it held back as
 *             incomplete UTF-8)
 *
 * At the end, a stream whose engine reported its own count of output tokens must have brought
 * exactly that many token IDs (httpc_oai_dialect_end).
 *
 * An event that carries {"error": ...} (or "object":"error") fails the stream with the engine's
 * message. Not thread-safe per httpc_oai_out_t; the tables are constant. */
#ifndef HTTPC_OAI_H
#define HTTPC_OAI_H

#include <stddef.h>
#include <stdint.h>

#include "httpc/sse.h"

typedef enum {
    HTTPC_OAI_VLLM = 0,
    HTTPC_OAI_TRTLLM,
    HTTPC_OAI_SGLANG,
    HTTPC_OAI_LLAMACPP
} httpc_oai_dialect_t;

typedef struct {
    httpc_oai_dialect_t dialect;
    const char *model; /* "model" of OpenAI requests (vllm, trtllm) */
    uint32_t max_tokens, min_tokens;
    double temperature; /* 0: greedy */
    int ignore_eos;
    int incremental; /* sglang: output_ids carry only the new tokens */
    int oneshot;     /* llamacpp: one JSON response ("stream":false) instead of SSE */
} httpc_oai_gen_t;

/* Output tokens of one stream, bounded by |max| (an engine that sends more is an error). */
typedef struct {
    int32_t *toks;
    size_t n, cap, max;
    int done;          /* the engine said the stream is finished */
    int had_text;      /* some event carried non-empty text (choices[0].text, text, content) */
    int counted;       /* the engine reported its own count of output tokens: */
    uint64_t engine_n; /* the last one (tokens_predicted, usage/meta_info.completion_tokens) */
    char err[256];     /* why httpc_oai_dialect_event failed */
    /* httpc_oai_dialect_event's memory from one event of the stream to the next (zero at the
     * start): the start its events repeat (vLLM: id, object, created, model, the choices
     * array's opening) and the reader's state after it, so that an event beginning with the same
     * bytes is read on from there instead of from its first byte, and the runs after the token's
     * text that repeat too (vLLM: logprobs, finish_reason, stop_reason up to token_ids) are
     * stepped over. */
    struct {
        uint16_t len;     /* bytes of prefix kept */
        uint16_t at;      /* > 0: the reader's state after prefix[0..at) is in state */
        uint16_t misses;  /* events that did not repeat the start; it stops trying at a few */
        uint16_t n_marks; /* points in state: the resume point, then the ones after it */
        char prefix[256];
        uint64_t state[128];
    } memo;
} httpc_oai_out_t;

/* 0, or -22 for an unknown name. */
int httpc_oai_dialect_from_name(const char *name, httpc_oai_dialect_t *d);
const char *httpc_oai_dialect_name(httpc_oai_dialect_t d);
/* The request path, e.g. "/v1/completions". */
const char *httpc_oai_dialect_path(httpc_oai_dialect_t d);

/* The JSON body for |prompt| (n little-endian int32 tokens, any alignment) in a malloc'ed,
 * NUL-terminated buffer. 0 or -12. */
int httpc_oai_dialect_body(const httpc_oai_gen_t *g, const void *prompt, size_t n, char **out,
                           size_t *len);

/* One event's data: appends the new tokens to |o| and sets o->done at the end. 0, or a negative
 * code with o->err set (the engine's error message, malformed JSON, too many tokens). */
int httpc_oai_dialect_event(const httpc_oai_gen_t *g, const char *data, size_t len,
                            httpc_oai_out_t *o);

/* At the end of a stream the engine marked done: 0, or -71 (EPROTO) with o->err set when the
 * stream brought no token ID although its events carried text: the engine returns text only
 * (vLLM without return_token_ids, or the wrong dialect), and the message names the dialect and
 * the fields it reads token IDs from; or when the engine's own count of output tokens differs
 * from the token IDs it sent (the message gives both counts and the count's field). */
int httpc_oai_dialect_end(const httpc_oai_gen_t *g, httpc_oai_out_t *o);

void httpc_oai_out_free(httpc_oai_out_t *o);

/* One response read as it arrives (src/oai_stream.c), shared by every client of an engine (the
 * openai backend, the QDL's endpoint nodes): the SSE decoder bounded by |max_event|, each event
 * through httpc_oai_dialect_event, and with gen->oneshot the body gathered (at most max_event
 * bytes) and read at the end. Runs on the pool's thread; one per request. */
typedef struct {
    const httpc_oai_gen_t *gen;
    httpc_sse_t sse;
    size_t max_event;
    char *whole; /* oneshot: the response body so far */
    size_t whole_len;
    httpc_oai_out_t out; /* the tokens so far; out.max is gen->max_tokens */
    int failed;
    char err[256]; /* why it failed */
} httpc_oai_stream_t;

void httpc_oai_stream_init(httpc_oai_stream_t *s, const httpc_oai_gen_t *gen, size_t max_event);
/* From on_data: feeds |n| bytes. Returns 0 to go on, 1 to abort the transfer (s->failed, s->err:
 * an event over max_event, the engine's error, malformed JSON, too many tokens). *progress is
 * set when a token or the end mark arrived (for httpc_progress). */
int httpc_oai_stream_feed(httpc_oai_stream_t *s, const char *p, size_t n, int *progress);
/* From on_done with status 0: 0 when the response is whole (the end mark came, token IDs and the
 * engine's own count agree), else -EPROTO with s->err set. */
int httpc_oai_stream_end(httpc_oai_stream_t *s);
void httpc_oai_stream_free(httpc_oai_stream_t *s);

#endif
