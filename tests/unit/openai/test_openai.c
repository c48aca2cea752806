/* Unit tests of the openai backend's parts: each dialect's request body and stream events, a
 * stream with text but no token IDs, the event scanner against hostile events, its fast JSON path
 * against yajl on mutated events. (The SSE decoder
 * and the HTTP pool it runs on are tested in tests/unit/httpc.) */
#include "../check_main.h"

#include "httpc/sse.h"
#include "httpc/oai.h"
#include "json_scan.h" /* httpc/src: the event's fast JSON path */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dialects ---- */

static void event_ok(const httpc_oai_gen_t *g, const char *ev, httpc_oai_out_t *o)
{
    int rc = httpc_oai_dialect_event(g, ev, strlen(ev), o);
    ck_assert_msg(rc == 0, "event %s: %s", ev, o->err);
}

START_TEST(dialects)
{
    const int32_t prompt[3] = {5, 6, 70000};
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "m", 8, 2, 0.0, 0, 0, 0};
    httpc_oai_out_t o = {0};
    char *body;
    size_t len;
    httpc_oai_dialect_t d;

    ck_assert_int_eq(httpc_oai_dialect_from_name("sglang", &d), 0);
    ck_assert_int_eq(d, HTTPC_OAI_SGLANG);
    ck_assert_int_lt(httpc_oai_dialect_from_name("tgi", &d), 0);

    /* vLLM: body, token_ids, logprobs strings, the end, and an error. */
    ck_assert_int_eq(httpc_oai_dialect_body(&g, prompt, 3, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"prompt\":[5,6,70000]"));
    ck_assert_ptr_nonnull(strstr(body, "\"max_tokens\":8,\"min_tokens\":2,\"temperature\":0,"));
    ck_assert_ptr_nonnull(strstr(body, "\"return_tokens_as_token_ids\":true"));
    ck_assert_uint_eq(len, strlen(body));
    free(body);
    {
        /* Every int32 spelled as %d would, unaligned, then the rest of the body. */
        static const int32_t ext[6] = {0, 0, -1, 2147483647, (-2147483647 - 1), 10};
        ck_assert_int_eq(httpc_oai_dialect_body(&g, (const char *)ext + 4, 5, &body, &len), 0);
        ck_assert_ptr_nonnull(
            strstr(body, "\"prompt\":[0,-1,2147483647,-2147483648,10],\"max_tokens\":8,"));
        ck_assert_uint_eq(len, strlen(body));
        free(body);
    }
    {
        /* Every digit count at its edges, two digits per step: as "%d" writes them. */
        static const int32_t edge[] = {
            9,         10,        99,         100,    101,     999,     1000,     9999,
            10000,     99999,     100000,     999999, 1000000, 9999999, 10000000, 99999999,
            100000000, 999999999, 1000000000, -9,     -10,     -99,     -100,     -1000000000};
        char want[400];
        size_t k = 0, i;

        k += (size_t)snprintf(want, sizeof(want), "\"prompt\":[");
        for (i = 0; i < sizeof(edge) / sizeof(edge[0]); i++)
            k += (size_t)snprintf(want + k, sizeof(want) - k, i ? ",%d" : "%d", (int)edge[i]);
        snprintf(want + k, sizeof(want) - k, "],");
        ck_assert_int_eq(
            httpc_oai_dialect_body(&g, edge, sizeof(edge) / sizeof(edge[0]), &body, &len), 0);
        ck_assert_ptr_nonnull(strstr(body, want));
        ck_assert_uint_eq(len, strlen(body));
        free(body);
    }
    {
        /* The text around the IDs is kept per thread for the last settings: a change of any of
         * them, and a model name too long to keep, still make their own body. */
        httpc_oai_gen_t h = g;
        char model[301];

        h.max_tokens = 9;
        h.temperature = 0.5;
        ck_assert_int_eq(httpc_oai_dialect_body(&h, prompt, 1, &body, &len), 0);
        ck_assert_ptr_nonnull(
            strstr(body, "\"max_tokens\":9,\"min_tokens\":2,\"temperature\":0.5,"));
        free(body);
        memset(model, 'm', 300);
        model[300] = '\0';
        h.model = model;
        ck_assert_int_eq(httpc_oai_dialect_body(&h, prompt, 3, &body, &len), 0);
        ck_assert_uint_eq(len, strlen(body));
        ck_assert_int_eq(strncmp(body, "{\"model\":\"mmm", 13), 0);
        ck_assert_ptr_nonnull(strstr(body, "m\",\"prompt\":[5,6,70000],\"max_tokens\":9,"));
        free(body);
        h.dialect = HTTPC_OAI_SGLANG;
        ck_assert_int_eq(httpc_oai_dialect_body(&h, prompt, 2, &body, &len), 0);
        ck_assert_str_eq(body, "{\"input_ids\":[5,6],\"sampling_params\":{\"max_new_tokens\":9,"
                               "\"min_new_tokens\":2,\"temperature\":0.5,\"ignore_eos\":false},"
                               "\"stream\":true}");
        free(body);
    }
    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"x\",\"token_ids\":[11,12],\"finish_reason\":null}]}",
             &o);
    event_ok(&g,
             "{\"choices\":[{\"logprobs\":{\"tokens\":[\"token_id:13\"]},\"finish_reason\":null}]}",
             &o);
    ck_assert_int_eq(o.done, 0);
    event_ok(&g, "{\"choices\":[{\"token_ids\":[14],\"finish_reason\":\"length\"}]}", &o);
    ck_assert_int_eq(o.done, 1);
    ck_assert_uint_eq(o.n, 4);
    ck_assert_int_eq(o.toks[0], 11);
    ck_assert_int_eq(o.toks[3], 14);
    event_ok(&g, "[DONE]", &o);
    ck_assert_int_lt(
        httpc_oai_dialect_event(&g, "{\"object\":\"error\",\"message\":\"too long\"}", 40, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "too long"));
    ck_assert_int_lt(
        httpc_oai_dialect_event(&g, "{\"choices\":[{\"logprobs\":{\"tokens\":[\"hi\"]}}]}", 43, &o),
        0);
    ck_assert_int_lt(httpc_oai_dialect_event(&g, "{\"choices\":[{\"token_ids\":[-1]}]}", 32, &o),
                     0);
    ck_assert_int_lt(httpc_oai_dialect_event(&g, "not json", 8, &o), 0);
    /* More tokens than max_tokens: refused. */
    event_ok(&g, "{\"choices\":[{\"token_ids\":[1,2,3,4]}]}", &o);
    ck_assert_int_lt(httpc_oai_dialect_event(&g, "{\"choices\":[{\"token_ids\":[5]}]}", 31, &o), 0);
    httpc_oai_out_free(&o);

    /* SGLang: cumulative output_ids, meta_info.finish_reason. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_SGLANG;
    ck_assert_int_eq(httpc_oai_dialect_body(&g, prompt, 2, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"input_ids\":[5,6],\"sampling_params\":{"
                                       "\"max_new_tokens\":8,\"min_new_tokens\":2,"));
    free(body);
    event_ok(&g, "{\"output_ids\":[7],\"meta_info\":{\"finish_reason\":null}}", &o);
    event_ok(&g, "{\"output_ids\":[7,8,9],\"meta_info\":{\"finish_reason\":null}}", &o);
    event_ok(&g,
             "{\"output_ids\":[7,8,9,10],\"meta_info\":{\"finish_reason\":{\"type\":\"length\"}}}",
             &o);
    ck_assert_uint_eq(o.n, 4);
    ck_assert_int_eq(o.toks[2], 9);
    ck_assert_int_eq(o.done, 1);
    ck_assert_int_lt(httpc_oai_dialect_event(&g, "{\"output_ids\":[7]}", 18, &o), 0); /* shrank */
    httpc_oai_out_free(&o);

    /* llama.cpp: tokens, stop. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_LLAMACPP;
    ck_assert_int_eq(httpc_oai_dialect_body(&g, prompt, 1, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "{\"prompt\":[5],\"n_predict\":8,"));
    ck_assert_ptr_nonnull(strstr(body, "\"return_tokens\":true"));
    free(body);
    event_ok(&g, "{\"content\":\"a\",\"tokens\":[3],\"stop\":false}", &o);
    event_ok(&g, "{\"content\":\"\",\"tokens\":[],\"stop\":true}", &o);
    ck_assert_uint_eq(o.n, 1);
    ck_assert_int_eq(o.done, 1);
    ck_assert_int_eq(httpc_oai_dialect_end(&g, &o), 0);
    httpc_oai_out_free(&o);
}
END_TEST

/* A stream that ends without a token ID while its events carried text (an engine that returns
 * text only, or the wrong dialect) fails, naming the dialect and the fields it reads; one with
 * token IDs, or with no text either, does not. */
START_TEST(text_without_ids)
{
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "m", 8, 0, 0.0, 0, 0, 0};
    httpc_oai_out_t o = {0};

    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"Hel\",\"finish_reason\":null}]}", &o);
    event_ok(&g, "{\"choices\":[{\"text\":\"lo\",\"finish_reason\":\"length\"}]}", &o);
    ck_assert_int_eq(o.done, 1);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_int_lt(httpc_oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "no token IDs although its events carried text"));
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=vllm reads them from choices[0].token_ids"));
    httpc_oai_out_free(&o);

    /* Text with token IDs, and an end with neither: fine. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"a\",\"token_ids\":[4],\"finish_reason\":null}]}", &o);
    ck_assert_int_eq(httpc_oai_dialect_end(&g, &o), 0);
    httpc_oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}", &o);
    ck_assert_int_eq(httpc_oai_dialect_end(&g, &o), 0);
    httpc_oai_out_free(&o);

    /* SGLang's text and llama.cpp's content, each naming its own field. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_SGLANG;
    event_ok(&g, "{\"text\":\"x\",\"meta_info\":{\"finish_reason\":{\"type\":\"stop\"}}}", &o);
    ck_assert_int_lt(httpc_oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=sglang reads them from output_ids"));
    httpc_oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_LLAMACPP;
    event_ok(&g, "{\"content\":\"x\",\"stop\":true}", &o);
    ck_assert_int_lt(httpc_oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=llamacpp reads them from tokens"));
    httpc_oai_out_free(&o);
}
END_TEST

/* The event scanner (oai_event.c) on hostile and odd input: bounded, the engine's error first, a
 * failed event leaves the tokens as they were. */
static int event_rc(const httpc_oai_gen_t *g, const char *ev, httpc_oai_out_t *o)
{
    return httpc_oai_dialect_event(g, ev, strlen(ev), o);
}

START_TEST(event_scanner_hostile)
{
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "m", 8, 0, 0.0, 0, 0, 0};
    httpc_oai_out_t o = {0};
    char *deep;
    size_t i, n = 20000;

    o.max = 8;
    /* Integral numbers in any JSON spelling are token IDs; others are not. */
    event_ok(&g, "{\"choices\":[{\"token_ids\":[5.0,1e1,0]}]}", &o);
    ck_assert_uint_eq(o.n, 3);
    ck_assert_int_eq(o.toks[1], 10);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[5.5]}]}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[2147483648]}]}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[\"7\"]}]}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[[7]]}]}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[1,2],\"token_ids\":[3]}]}", &o),
                     0);
    event_ok(&g, "{\"choices\":[{\"token_ids\":[1]}]}", &o);
    ck_assert_uint_eq(o.n, 4); /* the failed events above took nothing */
    /* Not one JSON object: refused. */
    ck_assert_int_lt(event_rc(&g, "[1,2]", &o), 0);
    ck_assert_int_lt(event_rc(&g, "7", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[]} {}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[1", &o), 0);
    ck_assert_int_lt(event_rc(&g, "", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"text\":\"no choices\"}", &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "choices"));
    /* The engine's error wins, wherever it is and whatever else is wrong. */
    ck_assert_int_lt(event_rc(&g, "{\"choices\":[{\"token_ids\":[\"x\"]}],\"error\":\"boom\"}", &o),
                     0);
    ck_assert_str_eq(o.err, "engine error: boom");
    ck_assert_int_lt(event_rc(&g, "{\"error\":{\"code\":3,\"message\":\"bad prompt\"}}", &o), 0);
    ck_assert_str_eq(o.err, "engine error: bad prompt");
    ck_assert_int_lt(event_rc(&g, "{\"error\":null}", &o), 0);
    ck_assert_str_eq(o.err, "engine error: (no message)");
    /* token_ids win over logprobs (whose strings are then not read), only choices[0] counts,
     * unknown fields of any shape are skipped. */
    event_ok(&g,
             "{\"x\":[{\"token_ids\":[\"no\"]},{}],\"choices\":[{\"logprobs\":{\"tokens\":"
             "[\"junk\"]},\"token_ids\":[6]},{\"token_ids\":[\"ignored\"]}]}",
             &o);
    ck_assert_uint_eq(o.n, 5);
    ck_assert_int_eq(o.toks[4], 6);
    ck_assert_int_eq(o.done, 0);
    ck_assert_int_lt(
        event_rc(&g, "{\"choices\":[{\"logprobs\":{\"tokens\":[\"token_id:-3\"]}}]}", &o), 0);
    ck_assert_int_lt(
        event_rc(&g, "{\"choices\":[{\"logprobs\":{\"tokens\":[\"token_id:99999999999\"]}}]}", &o),
        0);
    /* Deep nesting in a skipped field: no recursion, no crash; unterminated: refused. */
    deep = malloc(2 * n + 64);
    ck_assert_ptr_nonnull(deep);
    i = (size_t)sprintf(deep, "{\"choices\":[],\"x\":");
    memset(deep + i, '[', n);
    deep[i + n] = '\0';
    ck_assert_int_lt(event_rc(&g, deep, &o), 0);
    memset(deep + i + n, ']', n);
    strcpy(deep + i + 2 * n, "}");
    event_ok(&g, deep, &o);
    httpc_oai_out_free(&o);
    free(deep);

    /* llama.cpp: only "stop":true ends; SGLang incremental appends. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_LLAMACPP;
    event_ok(&g, "{\"tokens\":[1],\"stop\":1}", &o);
    event_ok(&g, "{\"tokens\":[2],\"stop\":\"true\"}", &o);
    ck_assert_int_eq(o.done, 0);
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[2,-1],\"stop\":true}", &o), 0);
    ck_assert_int_eq(o.done, 0);
    httpc_oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = HTTPC_OAI_SGLANG;
    g.incremental = 1;
    event_ok(&g, "{\"output_ids\":[1,2]}", &o);
    event_ok(&g, "{\"output_ids\":[3],\"meta_info\":{\"finish_reason\":\"stop\"}}", &o);
    ck_assert_uint_eq(o.n, 3);
    ck_assert_int_eq(o.toks[2], 3);
    ck_assert_int_eq(o.done, 1);
    httpc_oai_out_free(&o);
}
END_TEST

/* ---- the engine's own token count ---- */

/* Feeds a canned SSE stream in pieces of |step| bytes through the decoder and the dialect, as the
 * backend does (events after the end mark too); returns httpc_oai_dialect_end's code. */
static int run_stream(const httpc_oai_gen_t *g, const char *sse, size_t step, httpc_oai_out_t *o)
{
    httpc_sse_t p;
    size_t off = 0, len = strlen(sse);
    int rc = 0;

    httpc_sse_init(&p, 4096);
    while (off < len && rc == 0) {
        size_t piece = len - off < step ? len - off : step;
        while (piece && rc == 0) {
            int have;
            ssize_t used = httpc_sse_feed(&p, sse + off, piece, &have);
            ck_assert_int_ge(used, 0);
            off += (size_t)used;
            piece -= (size_t)used;
            if (have) {
                size_t n;
                const char *e = httpc_sse_event(&p, &n);
                rc = httpc_oai_dialect_event(g, e, n, o);
            }
        }
    }
    httpc_sse_free(&p);
    ck_assert_msg(rc == 0, "event: %s", o->err);
    ck_assert_int_eq(o->done, 1);
    return httpc_oai_dialect_end(g, o);
}

/* llama-server's stream as it came from Debian's llama-server 0.7.0 with a byte-fallback
 * vocabulary: token 198 (<0xC3>) is held back as incomplete UTF-8 and its ID is in no event;
 * the next event brings "é" with only token 172 (<0xA9>), and tokens_predicted counts both. */
static const char llama_held[] =
    "data: {\"index\":0,\"content\":\"p\",\"tokens\":[115],\"stop\":false,\"id_slot\":-1,"
    "\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n"
    "data: {\"index\":0,\"content\":\"\\u00e9\",\"tokens\":[172],\"stop\":false,\"id_slot\":-1,"
    "\"tokens_predicted\":3,\"tokens_evaluated\":5}\n\n"
    "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,"
    "\"tokens_predicted\":3,\"tokens_evaluated\":5,\"stop_type\":\"limit\","
    "\"timings\":{\"predicted_n\":3}}\n\n";

START_TEST(token_count)
{
    httpc_oai_gen_t g = {HTTPC_OAI_LLAMACPP, "m", 8, 0, 0.0, 1, 0, 0};
    httpc_oai_out_t o = {0};
    char *body;
    size_t len, step;
    static const int32_t prompt[2] = {1, 300};

    /* A token held back: 2 IDs arrived, the engine counted 3; in every split of the stream. */
    for (step = 1; step <= sizeof(llama_held); step += 37) {
        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_lt(run_stream(&g, llama_held, step, &o), 0);
        ck_assert_uint_eq(o.n, 2);
        ck_assert_str_eq(o.err,
                         "the engine counted 3 output tokens (tokens_predicted) but sent 2 token "
                         "IDs: llama-server leaves out the IDs of tokens it holds back as "
                         "incomplete UTF-8 while streaming; oneshot=1 asks for all of them in one "
                         "response");
        httpc_oai_out_free(&o);
    }

    /* oneshot: "stream":false, and the one response carries every ID and the same count. */
    g.oneshot = 1;
    ck_assert_int_eq(httpc_oai_dialect_body(&g, prompt, 2, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"stream\":false,\"return_tokens\":true"));
    free(body);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g,
             "{\"index\":0,\"content\":\"p\\u00e9\",\"tokens\":[115,198,172],\"id_slot\":0,"
             "\"stop\":true,\"tokens_predicted\":3,\"prompt\":\"<s>\\ufffd\"}",
             &o);
    ck_assert_int_eq(o.done, 1);
    ck_assert_int_eq(httpc_oai_dialect_end(&g, &o), 0);
    ck_assert_int_eq(o.toks[1], 198);
    httpc_oai_out_free(&o);
    /* A count the IDs do not match in oneshot: no hint about streaming. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"tokens\":[115],\"stop\":true,\"tokens_predicted\":2}", &o);
    ck_assert_int_lt(httpc_oai_dialect_end(&g, &o), 0);
    ck_assert_str_eq(o.err, "the engine counted 2 output tokens (tokens_predicted) but sent 1 "
                            "token IDs: the output would be short or padded");
    httpc_oai_out_free(&o);

    /* vLLM: stream_options.include_usage asked for; its usage comes after the finish_reason. */
    g.dialect = HTTPC_OAI_VLLM;
    g.oneshot = 0;
    ck_assert_int_eq(httpc_oai_dialect_body(&g, prompt, 2, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"stream_options\":{\"include_usage\":true}"));
    free(body);
    {
        static const char vllm_ok[] =
            "data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[11],\"finish_reason\":null}],"
            "\"usage\":null}\n\n"
            "data: {\"choices\":[{\"text\":\"b\",\"token_ids\":[12],\"finish_reason\":\"length\"}],"
            "\"usage\":null}\n\n"
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"total_tokens\":4,"
            "\"completion_tokens\":2}}\n\n"
            "data: [DONE]\n\n";
        static const char vllm_short[] =
            "data: {\"choices\":[{\"token_ids\":[11],\"finish_reason\":\"length\"}]}\n\n"
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\n"
            "data: [DONE]\n\n";
        static const char vllm_nousage[] =
            "data: {\"choices\":[{\"token_ids\":[11],\"finish_reason\":\"length\"}]}\n\n"
            "data: [DONE]\n\n";

        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_eq(run_stream(&g, vllm_ok, 7, &o), 0);
        ck_assert_uint_eq(o.n, 2);
        ck_assert_int_eq(o.counted, 1);
        httpc_oai_out_free(&o);
        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_lt(run_stream(&g, vllm_short, 5, &o), 0);
        ck_assert_ptr_nonnull(
            strstr(o.err, "counted 5 output tokens (usage.completion_tokens) but sent 1 token"));
        httpc_oai_out_free(&o);
        /* An engine that reports no count: nothing to check against. */
        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_eq(run_stream(&g, vllm_nousage, 3, &o), 0);
        ck_assert_int_eq(o.counted, 0);
        httpc_oai_out_free(&o);
    }

    /* SGLang: meta_info.completion_tokens, cumulative like output_ids. */
    g.dialect = HTTPC_OAI_SGLANG;
    memset(&o, 0, sizeof(o));
    o.max = 8;
    ck_assert_int_eq(
        run_stream(&g,
                   "data: {\"output_ids\":[7],\"meta_info\":{\"completion_tokens\":1,"
                   "\"finish_reason\":null}}\n\n"
                   "data: {\"output_ids\":[7,8],\"meta_info\":{\"completion_tokens\":2,"
                   "\"finish_reason\":{\"type\":\"length\"}}}\n\ndata: [DONE]\n\n",
                   11, &o),
        0);
    httpc_oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    ck_assert_int_lt(run_stream(&g,
                                "data: {\"output_ids\":[7],\"meta_info\":{\"completion_tokens\":3,"
                                "\"finish_reason\":\"stop\"}}\n\n",
                                64, &o),
                     0);
    ck_assert_ptr_nonnull(strstr(o.err, "counted 3 output tokens (meta_info.completion_tokens)"));
    httpc_oai_out_free(&o);

    /* Hostile counts: not a number, negative, fractional, 17 digits, an object: the event fails
     * and takes nothing. */
    g.dialect = HTTPC_OAI_LLAMACPP;
    memset(&o, 0, sizeof(o));
    o.max = 8;
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[1],\"tokens_predicted\":\"1\"}", &o), 0);
    ck_assert_str_eq(o.err, "the engine's count of output tokens is not a number");
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[1],\"tokens_predicted\":-1}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[1],\"tokens_predicted\":1.5}", &o), 0);
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[1],\"tokens_predicted\":12345678901234567}", &o),
                     0);
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[1],\"tokens_predicted\":{\"n\":1}}", &o), 0);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_int_eq(o.counted, 0);
    /* null is no count. */
    event_ok(&g, "{\"tokens\":[1],\"tokens_predicted\":null,\"stop\":true}", &o);
    ck_assert_int_eq(httpc_oai_dialect_end(&g, &o), 0);
    httpc_oai_out_free(&o);
}
END_TEST

/* ---- the fast JSON path against yajl ---- */

/* Each callback appends one record to a log; the fast scanner and yajl must write the same log
 * for every text the scanner accepts. |lens_only|: strings are logged by emptiness alone (an
 * escaped string reaches the scanner's user undecoded, yajl's decoded). */
typedef struct {
    char log[8192];
    size_t n;
    int overflow, lens_only;
} rec_t;

static void rec(rec_t *r, char tag, const void *p, size_t len)
{
    if (r->n + len + 3 > sizeof(r->log)) {
        r->overflow = 1;
        return;
    }
    r->log[r->n++] = tag;
    memcpy(r->log + r->n, p, len);
    r->n += len;
    r->log[r->n++] = '\x1f';
}

static int r_null(void *c)
{
    rec(c, 'z', "", 0);
    return 1;
}
static int r_bool(void *c, int b)
{
    rec(c, 'b', b ? "1" : "0", 1);
    return 1;
}
static int r_num(void *c, const char *s, size_t l)
{
    rec(c, 'n', s, l);
    return 1;
}
static int r_str(void *c, const unsigned char *s, size_t l)
{
    rec_t *r = c;
    if (r->lens_only)
        rec(r, 's', l ? "+" : "0", 1);
    else
        rec(r, 's', s, l);
    return 1;
}
static int r_key(void *c, const unsigned char *s, size_t l)
{
    rec(c, 'k', s, l);
    return 1;
}
static int r_smap(void *c)
{
    rec(c, '{', "", 0);
    return 1;
}
static int r_emap(void *c)
{
    rec(c, '}', "", 0);
    return 1;
}
static int r_sarr(void *c)
{
    rec(c, '[', "", 0);
    return 1;
}
static int r_earr(void *c)
{
    rec(c, ']', "", 0);
    return 1;
}
static int r_escaped(void *c, const unsigned char *s, size_t l)
{
    rec_t *r = c;
    (void)s;
    if (!r->lens_only)
        return -1; /* yajl decodes it */
    rec(r, 's', l ? "+" : "0", 1);
    return 1;
}

static const yajl_callbacks rec_cb = {r_null, r_bool, NULL,   NULL,   r_num, r_str,
                                      r_smap, r_key,  r_emap, r_sarr, r_earr};

/* 1 when the scanner took |t| (then asserted equal to yajl's reading), 0 when it left it. */
static int scan_vs_yajl(const char *t, size_t len, int lens_only)
{
    rec_t *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    yajl_handle h;
    yajl_status st;
    int rc;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    a->lens_only = b->lens_only = lens_only;
    rc = httpc_json_scan(t, len, &rec_cb, r_escaped, a);
    ck_assert_int_ne(rc, HTTPC_JSCAN_CANCEL); /* no callback here says stop */
    if (rc == HTTPC_JSCAN_OK) {
        h = yajl_alloc(&rec_cb, NULL, b);
        ck_assert_ptr_nonnull(h);
        yajl_config(h, yajl_dont_validate_strings, 1);
        st = yajl_parse(h, (const unsigned char *)t, len);
        if (st == yajl_status_ok)
            st = yajl_complete_parse(h);
        yajl_free(h);
        ck_assert_msg(st == yajl_status_ok, "the scanner took what yajl refuses: '%.*s'", (int)len,
                      t);
        ck_assert_msg(!a->overflow && !b->overflow && a->n == b->n && !memcmp(a->log, b->log, a->n),
                      "the scanner and yajl read '%.*s' differently", (int)len, t);
    }
    free(a);
    free(b);
    return rc == HTTPC_JSCAN_OK;
}

START_TEST(json_fast_path)
{
    static const char *const base[] = {
        "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"b\","
        "\"choices\":[{\"index\":0,\"text\":\" tok1\\n\\u00e9\",\"logprobs\":null,"
        "\"finish_reason\":null,\"stop_reason\":null,\"token_ids\":[12,-0,3.5e+2,1E3]}],"
        "\"usage\":{\"completion_tokens\":7,\"x\":[true,false,{}]}}",
        "{\"output_ids\":[1,2],\"meta_info\":{\"finish_reason\":{\"type\":\"length\"},"
        "\"completion_tokens\":2},\"text\":\"a\\\"b\\/c\\\\\"}",
        " {\t\"tokens\" : [ 115 ] ,\r\n\"stop\":false, \"content\":\"\\ud83d\\ude00\"} ",
        "{\"error\":{\"message\":\"bad \\\"prompt\\\"\",\"code\":400},\"object\":\"error\"}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    };
    static const char spice[] = "\"\\{}[],: 01-.eE+utfnal/\n\t\r\x01\x7f\x80\xff";
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t b, i, taken = 0, total = 0;
    char t[512];

    /* The texts themselves: taken, except the one deeper than the scanner goes. */
    for (b = 0; b < 4; b++)
        ck_assert_msg(scan_vs_yajl(base[b], strlen(base[b]), 1), "not taken: %s", base[b]);
    ck_assert_int_eq(scan_vs_yajl(base[4], strlen(base[4]), 1), 0);
    /* Escaped strings go to the caller's hook; a NUL escape and a bad one never do. */
    ck_assert_int_eq(scan_vs_yajl(base[0], strlen(base[0]), 0), 0);
    ck_assert_int_eq(scan_vs_yajl("{\"t\":\"a\\u0000\"}", 15, 1), 0);
    ck_assert_int_eq(scan_vs_yajl("{\"t\":\"a\\x\"}", 11, 1), 0);
    ck_assert_int_eq(scan_vs_yajl("{\"t\\n\":1}", 9, 1), 0);
    /* Mutants of each: a byte replaced, removed or inserted, or the text cut, in many places. */
    for (b = 0; b < sizeof(base) / sizeof(base[0]); b++) {
        size_t len0 = strlen(base[b]);
        for (i = 0; i < 4000; i++) {
            size_t len = len0, at;
            int k, edits = 1 + (int)(i % 3);

            memcpy(t, base[b], len0);
            for (k = 0; k < edits; k++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                at = (size_t)(x >> 8) % (len + 1);
                switch ((x >> 40) % 4) {
                case 0:
                    if (at < len)
                        t[at] = spice[(x >> 48) % (sizeof(spice) - 1)];
                    break;
                case 1:
                    if (at < len) {
                        memmove(t + at, t + at + 1, len - at - 1);
                        len--;
                    }
                    break;
                case 2:
                    memmove(t + at + 1, t + at, len - at);
                    t[at] = spice[(x >> 48) % (sizeof(spice) - 1)];
                    len++;
                    break;
                default:
                    len = at;
                }
            }
            taken += (size_t)scan_vs_yajl(t, len, (int)(i & 1));
            total++;
        }
    }
    /* Not vacuous: many mutants are still JSON the scanner reads. */
    ck_assert_msg(taken > total / 20, "only %zu of %zu mutants taken", taken, total);
}
END_TEST

/* One event read twice: through |o| (its memo may resume the scan where the stream's events
 * begin alike) and through a copy of |o| without the memo (read from its first byte); both must
 * end the same way with the same output. */
static int memo_vs_whole(const httpc_oai_gen_t *g, const char *t, size_t len, httpc_oai_out_t *o)
{
    httpc_oai_out_t *w = malloc(sizeof(*w));
    int ra, rb;

    ck_assert_ptr_nonnull(w);
    *w = *o;
    memset(&w->memo, 0, sizeof(w->memo));
    w->toks = o->cap ? malloc(o->cap * sizeof(int32_t)) : NULL;
    if (o->cap) {
        ck_assert_ptr_nonnull(w->toks);
        memcpy(w->toks, o->toks, o->n * sizeof(int32_t));
    }
    ra = httpc_oai_dialect_event(g, t, len, o);
    rb = httpc_oai_dialect_event(g, t, len, w);
    ck_assert_msg(ra == rb && o->n == w->n && o->done == w->done && o->had_text == w->had_text &&
                      o->counted == w->counted && o->engine_n == w->engine_n &&
                      (!o->n || !memcmp(o->toks, w->toks, o->n * 4)) &&
                      (ra == 0 || !strcmp(o->err, w->err)),
                  "resumed and whole reads differ on '%.*s': rc %d/%d, n %zu/%zu, err '%s'/'%s'",
                  (int)len, t, ra, rb, o->n, w->n, o->err, w->err);
    httpc_oai_out_free(w);
    free(w);
    return ra;
}

START_TEST(event_memo)
{
/* A vLLM stream's events: the same start, then the text, the IDs and the end differ. */
#define SHAPE0                                                                                  \
    "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"b\"," \
    "\"choices\":[{\"index\":0,\"text\":\" tok%u\",\"logprobs\":null,\"finish_reason\":%s,"     \
    "\"stop_reason\":null,\"token_ids\":[%u]}]}"
#define SHAPE1                                                                                     \
    "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"b\","    \
    "\"choices\":[{\"index\":0,\"text\":\"\\u00e9%u\",\"logprobs\":{\"tokens\":[\"token_id:9\"]}," \
    "\"finish_reason\":%s,\"token_ids\":[%u,1]}],\"usage\":{\"completion_tokens\":3}}"
    static const char spice[] = "\"\\{}[],: 01-.eE+utfnal/\n\t\r\x01\x7f\x80\xff";
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "m", 4096, 0, 0.0, 0, 0, 0};
    uint64_t x = 0x2545f4914f6cdd1du;
    size_t resumed = 0, runs = 0;
    char t[600];

    for (size_t run = 0; run < 300; run++) {
        httpc_oai_out_t *o = calloc(1, sizeof(*o));
        ck_assert_ptr_nonnull(o);
        o->max = g.max_tokens;
        for (unsigned ev = 0; ev < 12; ev++) {
            const char *end = ev == 11 ? "\"length\"" : "null";
            int len = run % 2 ? snprintf(t, sizeof(t), SHAPE1, ev * 7919u % 100000u, end, ev * 31u)
                              : snprintf(t, sizeof(t), SHAPE0, ev * 7919u % 100000u, end, ev * 31u);
            size_t n = (size_t)len;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            /* after the third event, now and then a byte changed, dropped or added anywhere
             * (in the start the memo compares, too) */
            if (ev >= 3 && (x & 3) == 0) {
                size_t at = (size_t)(x >> 8) % n;
                switch ((x >> 40) % 3) {
                case 0:
                    t[at] = spice[(x >> 48) % (sizeof(spice) - 1)];
                    break;
                case 1:
                    memmove(t + at, t + at + 1, n - at - 1);
                    n--;
                    break;
                default:
                    memmove(t + at + 1, t + at, n - at);
                    t[at] = spice[(x >> 48) % (sizeof(spice) - 1)];
                    n++;
                }
            }
            resumed += o->memo.at && n > o->memo.at && !memcmp(t, o->memo.prefix, o->memo.at);
            memo_vs_whole(&g, t, n, o);
        }
        runs++;
        httpc_oai_out_free(o);
        free(o);
    }
    /* Not vacuous: most events were read from the memo's resume point. */
    ck_assert_msg(resumed > runs * 6, "only %zu of %zu events resumed", resumed, runs * 12);
}
END_TEST

static TCase *tc(const char *name, const TTest *t)
{
    TCase *c = tcase_create(name);
    tcase_add_test(c, t);
    tcase_set_timeout(c, 30);
    return c;
}

static TCase *tc_dialects(void)
{
    return tc("dialects", dialects);
}
static TCase *tc_text_without_ids(void)
{
    return tc("text_without_ids", text_without_ids);
}
static TCase *tc_event_scanner_hostile(void)
{
    return tc("event_scanner_hostile", event_scanner_hostile);
}
static TCase *tc_token_count(void)
{
    return tc("token_count", token_count);
}

static TCase *tc_event_memo(void)
{
    return tc("event_memo", event_memo);
}

static TCase *tc_json_fast_path(void)
{
    return tc("json_fast_path", json_fast_path);
}

CHECK_MAIN("openai", tc_dialects, tc_text_without_ids, tc_event_scanner_hostile, tc_token_count,
           tc_json_fast_path, tc_event_memo)
