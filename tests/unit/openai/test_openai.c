/* Unit tests of the openai backend's parts: each dialect's request body and stream events, a
 * stream with text but no token IDs, the event scanner against hostile events. (The SSE decoder
 * and the HTTP pool it runs on are tested in tests/unit/httpc.) */
#include "../check_main.h"

#include "httpc/sse.h"
#include "httpc/oai.h"

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
        /* the digits are written by hand: the sign, the extremes and zero */
        const int32_t edge[4] = {-1, INT32_MIN, 0, INT32_MAX};
        ck_assert_int_eq(httpc_oai_dialect_body(&g, edge, 4, &body, &len), 0);
        ck_assert_ptr_nonnull(strstr(body, "\"prompt\":[-1,-2147483648,0,2147483647],"));
        ck_assert_uint_eq(len, strlen(body));
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

CHECK_MAIN("openai", tc_dialects, tc_text_without_ids, tc_event_scanner_hostile, tc_token_count)
