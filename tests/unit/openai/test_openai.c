/* Unit tests of the openai and kserve backends' parts: the SSE decoder fed byte by byte and in
 * every split, its limit; each dialect's request body and stream events; the KServe v2 header;
 * and the HTTP pool against a scripted loopback server (a full stream, an error status, a
 * connection closed mid-stream, a server that never answers), also with read coalescing (streams
 * that end, a keep-alive connection reused after a coalesced stream, a cut-off while coalesced). */
#include "../check_main.h"

#include "ks_v2.h"
#include "oai_dialect.h"
#include "oai_http.h"
#include "oai_opts.h"
#include "oai_sse.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- SSE ---- */

typedef struct {
    char ev[8][128];
    int n;
} evs_t;

/* Feeds |s| in pieces of |step| bytes (0: all at once) and collects the events. */
static int feed(oai_sse_t *p, const char *s, size_t len, size_t step, evs_t *out)
{
    size_t off = 0;
    while (off < len) {
        size_t piece = step ? (len - off < step ? len - off : step) : len - off;
        while (piece) {
            int have;
            ssize_t used = oai_sse_feed(p, s + off, piece, &have);
            if (used < 0)
                return (int)used;
            off += (size_t)used;
            piece -= (size_t)used;
            if (have) {
                size_t n;
                const char *e = oai_sse_event(p, &n);
                ck_assert_int_lt(out->n, 8);
                ck_assert_uint_lt(n, 128);
                memcpy(out->ev[out->n], e, n + 1);
                out->n++;
            }
        }
    }
    return 0;
}

static const char stream[] = ": keep-alive comment\r\n"
                             "event: message\n"
                             "data: {\"a\":1}\r\n\r\n"
                             "data:{\"b\":2}\r\r"
                             "id: 7\n"
                             "data: line1\n"
                             "data: line2\n"
                             "\n"
                             "retry: 10\n\n" /* no data: no event */
                             "data\n\n"      /* a data field with no value: an empty event */
                             "data: [DONE]\n\n"
                             "data: partial"; /* never finished */

START_TEST(sse_bytewise)
{
    size_t step;
    for (step = 0; step <= sizeof(stream); step++) {
        oai_sse_t p;
        evs_t e = {0};
        oai_sse_init(&p, 1024);
        ck_assert_int_eq(feed(&p, stream, sizeof(stream) - 1, step, &e), 0);
        ck_assert_int_eq(e.n, 5);
        ck_assert_str_eq(e.ev[0], "{\"a\":1}");
        ck_assert_str_eq(e.ev[1], "{\"b\":2}");
        ck_assert_str_eq(e.ev[2], "line1\nline2");
        ck_assert_str_eq(e.ev[3], "");
        ck_assert_str_eq(e.ev[4], "[DONE]");
        oai_sse_free(&p);
    }
}
END_TEST

START_TEST(sse_limits)
{
    oai_sse_t p;
    evs_t e = {0};
    char big[300];

    /* A line over the limit is an error, before it ends. */
    memset(big, 'x', sizeof(big));
    memcpy(big, "data: ", 6);
    oai_sse_init(&p, 256);
    ck_assert_int_eq(feed(&p, big, sizeof(big), 1, &e), OAI_SSE_ETOOBIG);
    oai_sse_free(&p);
    /* Many short data lines that add up past the limit, too. */
    oai_sse_init(&p, 64);
    {
        int i, rc = 0;
        for (i = 0; i < 20 && rc == 0; i++)
            rc = feed(&p, "data: 0123456789\n", 17, 0, &e);
        ck_assert_int_eq(rc, OAI_SSE_ETOOBIG);
    }
    /* After a reset the decoder works again; a line exactly at the limit passes. */
    oai_sse_reset(&p);
    memset(big, 'y', sizeof(big));
    memcpy(big, "data: ", 6);
    big[64] = '\n';
    big[65] = '\n';
    ck_assert_int_eq(feed(&p, big, 66, 3, &e), 0);
    ck_assert_int_eq(e.n, 1);
    ck_assert_uint_eq(strlen(e.ev[0]), 58);
    oai_sse_free(&p);
}
END_TEST

/* ---- dialects ---- */

static void event_ok(const oai_gen_t *g, const char *ev, oai_out_t *o)
{
    int rc = oai_dialect_event(g, ev, strlen(ev), o);
    ck_assert_msg(rc == 0, "event %s: %s", ev, o->err);
}

START_TEST(dialects)
{
    const int32_t prompt[3] = {5, 6, 70000};
    oai_gen_t g = {OAI_VLLM, "m", 8, 2, 0.0, 0, 0, 0};
    oai_out_t o = {0};
    char *body;
    size_t len;
    oai_dialect_t d;

    ck_assert_int_eq(oai_dialect_from_name("sglang", &d), 0);
    ck_assert_int_eq(d, OAI_SGLANG);
    ck_assert_int_lt(oai_dialect_from_name("tgi", &d), 0);

    /* vLLM: body, token_ids, logprobs strings, the end, and an error. */
    ck_assert_int_eq(oai_dialect_body(&g, prompt, 3, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"prompt\":[5,6,70000]"));
    ck_assert_ptr_nonnull(strstr(body, "\"max_tokens\":8,\"min_tokens\":2,\"temperature\":0,"));
    ck_assert_ptr_nonnull(strstr(body, "\"return_tokens_as_token_ids\":true"));
    ck_assert_uint_eq(len, strlen(body));
    free(body);
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
        oai_dialect_event(&g, "{\"object\":\"error\",\"message\":\"too long\"}", 40, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "too long"));
    ck_assert_int_lt(
        oai_dialect_event(&g, "{\"choices\":[{\"logprobs\":{\"tokens\":[\"hi\"]}}]}", 43, &o), 0);
    ck_assert_int_lt(oai_dialect_event(&g, "{\"choices\":[{\"token_ids\":[-1]}]}", 32, &o), 0);
    ck_assert_int_lt(oai_dialect_event(&g, "not json", 8, &o), 0);
    /* More tokens than max_tokens: refused. */
    event_ok(&g, "{\"choices\":[{\"token_ids\":[1,2,3,4]}]}", &o);
    ck_assert_int_lt(oai_dialect_event(&g, "{\"choices\":[{\"token_ids\":[5]}]}", 31, &o), 0);
    oai_out_free(&o);

    /* SGLang: cumulative output_ids, meta_info.finish_reason. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_SGLANG;
    ck_assert_int_eq(oai_dialect_body(&g, prompt, 2, &body, &len), 0);
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
    ck_assert_int_lt(oai_dialect_event(&g, "{\"output_ids\":[7]}", 18, &o), 0); /* shrank */
    oai_out_free(&o);

    /* llama.cpp: tokens, stop. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_LLAMACPP;
    ck_assert_int_eq(oai_dialect_body(&g, prompt, 1, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "{\"prompt\":[5],\"n_predict\":8,"));
    ck_assert_ptr_nonnull(strstr(body, "\"return_tokens\":true"));
    free(body);
    event_ok(&g, "{\"content\":\"a\",\"tokens\":[3],\"stop\":false}", &o);
    event_ok(&g, "{\"content\":\"\",\"tokens\":[],\"stop\":true}", &o);
    ck_assert_uint_eq(o.n, 1);
    ck_assert_int_eq(o.done, 1);
    ck_assert_int_eq(oai_dialect_end(&g, &o), 0);
    oai_out_free(&o);
}
END_TEST

/* A stream that ends without a token ID while its events carried text (an engine that returns
 * text only, or the wrong dialect) fails, naming the dialect and the fields it reads; one with
 * token IDs, or with no text either, does not. */
START_TEST(text_without_ids)
{
    oai_gen_t g = {OAI_VLLM, "m", 8, 0, 0.0, 0, 0, 0};
    oai_out_t o = {0};

    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"Hel\",\"finish_reason\":null}]}", &o);
    event_ok(&g, "{\"choices\":[{\"text\":\"lo\",\"finish_reason\":\"length\"}]}", &o);
    ck_assert_int_eq(o.done, 1);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_int_lt(oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "no token IDs although its events carried text"));
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=vllm reads them from choices[0].token_ids"));
    oai_out_free(&o);

    /* Text with token IDs, and an end with neither: fine. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"a\",\"token_ids\":[4],\"finish_reason\":null}]}", &o);
    ck_assert_int_eq(oai_dialect_end(&g, &o), 0);
    oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}", &o);
    ck_assert_int_eq(oai_dialect_end(&g, &o), 0);
    oai_out_free(&o);

    /* SGLang's text and llama.cpp's content, each naming its own field. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_SGLANG;
    event_ok(&g, "{\"text\":\"x\",\"meta_info\":{\"finish_reason\":{\"type\":\"stop\"}}}", &o);
    ck_assert_int_lt(oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=sglang reads them from output_ids"));
    oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_LLAMACPP;
    event_ok(&g, "{\"content\":\"x\",\"stop\":true}", &o);
    ck_assert_int_lt(oai_dialect_end(&g, &o), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "dialect=llamacpp reads them from tokens"));
    oai_out_free(&o);
}
END_TEST

/* The event scanner (oai_event.c) on hostile and odd input: bounded, the engine's error first, a
 * failed event leaves the tokens as they were. */
static int event_rc(const oai_gen_t *g, const char *ev, oai_out_t *o)
{
    return oai_dialect_event(g, ev, strlen(ev), o);
}

START_TEST(event_scanner_hostile)
{
    oai_gen_t g = {OAI_VLLM, "m", 8, 0, 0.0, 0, 0, 0};
    oai_out_t o = {0};
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
    oai_out_free(&o);
    free(deep);

    /* llama.cpp: only "stop":true ends; SGLang incremental appends. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_LLAMACPP;
    event_ok(&g, "{\"tokens\":[1],\"stop\":1}", &o);
    event_ok(&g, "{\"tokens\":[2],\"stop\":\"true\"}", &o);
    ck_assert_int_eq(o.done, 0);
    ck_assert_int_lt(event_rc(&g, "{\"tokens\":[2,-1],\"stop\":true}", &o), 0);
    ck_assert_int_eq(o.done, 0);
    oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    g.dialect = OAI_SGLANG;
    g.incremental = 1;
    event_ok(&g, "{\"output_ids\":[1,2]}", &o);
    event_ok(&g, "{\"output_ids\":[3],\"meta_info\":{\"finish_reason\":\"stop\"}}", &o);
    ck_assert_uint_eq(o.n, 3);
    ck_assert_int_eq(o.toks[2], 3);
    ck_assert_int_eq(o.done, 1);
    oai_out_free(&o);
}
END_TEST

/* ---- the engine's own token count ---- */

/* Feeds a canned SSE stream in pieces of |step| bytes through the decoder and the dialect, as the
 * backend does (events after the end mark too); returns oai_dialect_end's code. */
static int run_stream(const oai_gen_t *g, const char *sse, size_t step, oai_out_t *o)
{
    oai_sse_t p;
    size_t off = 0, len = strlen(sse);
    int rc = 0;

    oai_sse_init(&p, 4096);
    while (off < len && rc == 0) {
        size_t piece = len - off < step ? len - off : step;
        while (piece && rc == 0) {
            int have;
            ssize_t used = oai_sse_feed(&p, sse + off, piece, &have);
            ck_assert_int_ge(used, 0);
            off += (size_t)used;
            piece -= (size_t)used;
            if (have) {
                size_t n;
                const char *e = oai_sse_event(&p, &n);
                rc = oai_dialect_event(g, e, n, o);
            }
        }
    }
    oai_sse_free(&p);
    ck_assert_msg(rc == 0, "event: %s", o->err);
    ck_assert_int_eq(o->done, 1);
    return oai_dialect_end(g, o);
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
    oai_gen_t g = {OAI_LLAMACPP, "m", 8, 0, 0.0, 1, 0, 0};
    oai_out_t o = {0};
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
        oai_out_free(&o);
    }

    /* oneshot: "stream":false, and the one response carries every ID and the same count. */
    g.oneshot = 1;
    ck_assert_int_eq(oai_dialect_body(&g, prompt, 2, &body, &len), 0);
    ck_assert_ptr_nonnull(strstr(body, "\"stream\":false,\"return_tokens\":true"));
    free(body);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g,
             "{\"index\":0,\"content\":\"p\\u00e9\",\"tokens\":[115,198,172],\"id_slot\":0,"
             "\"stop\":true,\"tokens_predicted\":3,\"prompt\":\"<s>\\ufffd\"}",
             &o);
    ck_assert_int_eq(o.done, 1);
    ck_assert_int_eq(oai_dialect_end(&g, &o), 0);
    ck_assert_int_eq(o.toks[1], 198);
    oai_out_free(&o);
    /* A count the IDs do not match in oneshot: no hint about streaming. */
    memset(&o, 0, sizeof(o));
    o.max = 8;
    event_ok(&g, "{\"tokens\":[115],\"stop\":true,\"tokens_predicted\":2}", &o);
    ck_assert_int_lt(oai_dialect_end(&g, &o), 0);
    ck_assert_str_eq(o.err, "the engine counted 2 output tokens (tokens_predicted) but sent 1 "
                            "token IDs: the output would be short or padded");
    oai_out_free(&o);

    /* vLLM: stream_options.include_usage asked for; its usage comes after the finish_reason. */
    g.dialect = OAI_VLLM;
    g.oneshot = 0;
    ck_assert_int_eq(oai_dialect_body(&g, prompt, 2, &body, &len), 0);
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
        oai_out_free(&o);
        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_lt(run_stream(&g, vllm_short, 5, &o), 0);
        ck_assert_ptr_nonnull(
            strstr(o.err, "counted 5 output tokens (usage.completion_tokens) but sent 1 token"));
        oai_out_free(&o);
        /* An engine that reports no count: nothing to check against. */
        memset(&o, 0, sizeof(o));
        o.max = 8;
        ck_assert_int_eq(run_stream(&g, vllm_nousage, 3, &o), 0);
        ck_assert_int_eq(o.counted, 0);
        oai_out_free(&o);
    }

    /* SGLang: meta_info.completion_tokens, cumulative like output_ids. */
    g.dialect = OAI_SGLANG;
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
    oai_out_free(&o);
    memset(&o, 0, sizeof(o));
    o.max = 8;
    ck_assert_int_lt(run_stream(&g,
                                "data: {\"output_ids\":[7],\"meta_info\":{\"completion_tokens\":3,"
                                "\"finish_reason\":\"stop\"}}\n\n",
                                64, &o),
                     0);
    ck_assert_ptr_nonnull(strstr(o.err, "counted 3 output tokens (meta_info.completion_tokens)"));
    oai_out_free(&o);

    /* Hostile counts: not a number, negative, fractional, 17 digits, an object: the event fails
     * and takes nothing. */
    g.dialect = OAI_LLAMACPP;
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
    ck_assert_int_eq(oai_dialect_end(&g, &o), 0);
    oai_out_free(&o);
}
END_TEST

/* ---- KServe v2 ---- */

START_TEST(kserve_v2)
{
    ks_tensor_t t = {"input", "logits", "UINT8", {1, 28, 28}, 3};
    const char resp[] = "{\"outputs\":[{\"name\":\"aux\",\"parameters\":{\"binary_data_size\":8}},"
                        "{\"name\":\"j\",\"data\":[1]},"
                        "{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":80}}]}";
    char *h, err[200];
    size_t len, off, size;

    ck_assert_uint_eq(ks_dtype_size("FP32"), 4);
    ck_assert_uint_eq(ks_dtype_size("FP8"), 0);
    ck_assert_int_eq(ks_request_header(&t, 2, 1568, &h, &len), 0);
    ck_assert_str_eq(h, "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,1,28,28],\"datatype\":"
                        "\"UINT8\",\"parameters\":{\"binary_data_size\":1568}}],\"outputs\":[{"
                        "\"name\":\"logits\",\"parameters\":{\"binary_data\":true}}]}");
    ck_assert_uint_eq(len, strlen(h));
    free(h);
    ck_assert_int_eq(ks_response_output(resp, strlen(resp), 88, "logits", &off, &size, err, 200),
                     0);
    ck_assert_uint_eq(off, 8);
    ck_assert_uint_eq(size, 80);
    ck_assert_int_lt(ks_response_output(resp, strlen(resp), 88, "j", &off, &size, err, 200), 0);
    ck_assert_int_lt(ks_response_output(resp, strlen(resp), 88, "x", &off, &size, err, 200), 0);
    ck_assert_int_lt(
        ks_response_output("{\"error\":\"bad shape\"}", 21, 0, "x", &off, &size, err, 200), 0);
    ck_assert_ptr_nonnull(strstr(err, "bad shape"));
    ck_assert_int_lt(ks_response_output(resp, 20, 88, "logits", &off, &size, err, 200), 0);
}
END_TEST

/* ---- the HTTP pool against a scripted server ---- */

typedef struct {
    int lfd;
    const char *reply; /* written after the request; NULL: never answer */
} server_t;

static void *serve_one(void *arg)
{
    server_t *s = arg;
    char buf[4096];
    size_t got = 0;
    int fd = accept(s->lfd, NULL, NULL);

    if (fd < 0)
        return NULL;
    /* Read until the headers end and the small body is in (the tests send < 100 bytes). */
    while (got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n") && strstr(buf, "\r\n\r\n")[4] == '{' && buf[got - 1] == '}')
            break;
    }
    if (s->reply) {
        ssize_t w = write(fd, s->reply, strlen(s->reply));
        (void)w;
        close(fd);
    } else {
        sleep(2); /* past the client's deadline */
        close(fd);
    }
    return NULL;
}

typedef struct {
    char data[1024];
    size_t len;
    int status, done;
    char msg[600];
} result_t;

static int on_data(oai_http_req_t *r, const char *p, size_t n)
{
    result_t *res = r->ctx;
    if (res->len + n < sizeof(res->data)) {
        memcpy(res->data + res->len, p, n);
        res->len += n;
    }
    return 0;
}

static void on_done(oai_http_req_t *r, int status, const char *msg)
{
    result_t *res = r->ctx;
    res->status = status;
    snprintf(res->msg, sizeof(res->msg), "%s", msg);
    __atomic_store_n(&res->done, 1, __ATOMIC_RELEASE);
}

static int listen_any(int *port)
{
    struct sockaddr_in a = {0};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void run_request(const char *reply, long timeout_ms, result_t *res)
{
    int port;
    server_t s;
    pthread_t th;
    oai_http_t *h;
    oai_http_cfg_t cfg = {4, 2000, 0, 0};
    oai_http_req_t req;
    char err[200], url[64];
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    int i;

    memset(res, 0, sizeof(*res));
    s.lfd = listen_any(&port);
    s.reply = reply;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_one, &s), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    memset(&req, 0, sizeof(req));
    req.url = url;
    req.body = "{\"prompt\":[1]}";
    req.body_len = strlen(req.body);
    req.headers = hdrs;
    req.timeout_ms = timeout_ms;
    req.on_data = on_data;
    req.on_done = on_done;
    req.ctx = res;
    ck_assert_int_eq(oai_http_submit(h, &req), 0);
    for (i = 0; i < 1000 && !__atomic_load_n(&res->done, __ATOMIC_ACQUIRE); i++)
        usleep(10000); /* polls the condition, bounded at 10 s */
    ck_assert_msg(res->done, "no completion within 10 s");
    oai_http_destroy(h);
    pthread_join(th, NULL);
    close(s.lfd);
}

/* Serves |n| requests one connection each, in turn (Connection: close). */
typedef struct {
    int lfd, n;
} serve_n_t;

static void *serve_n(void *arg)
{
    serve_n_t *sv = arg;
    static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n"
                                "\r\nok";
    server_t one = {sv->lfd, reply};
    int i;

    for (i = 0; i < sv->n; i++)
        serve_one(&one);
    return NULL;
}

static oai_http_req_t *new_req(const char *url, long timeout_ms, result_t *res)
{
    static const char *hdrs[] = {"Content-Type: application/json", NULL};
    oai_http_req_t *req = calloc(1, sizeof(*req));

    ck_assert_ptr_nonnull(req);
    req->url = url;
    req->body = "{\"prompt\":[1]}";
    req->body_len = strlen(req->body);
    req->headers = hdrs;
    req->timeout_ms = timeout_ms;
    req->on_data = on_data;
    req->on_done = on_done;
    req->ctx = res;
    return req;
}

static int wait_all_done(result_t *res, int n, int timeout_ms)
{
    int i, k, done = 0;

    for (k = 0; k < timeout_ms / 10; k++) {
        for (i = 0, done = 0; i < n; i++)
            done += __atomic_load_n(&res[i].done, __ATOMIC_ACQUIRE);
        if (done == n)
            break;
        usleep(10000);
    }
    return done;
}

/* More requests than connections wait in the pool's own queue and all complete; one that waits
 * its whole deadline for a connection fails unsent, saying so. */
START_TEST(http_queue)
{
    enum { N = 40 };
    static result_t res[N];
    oai_http_req_t *reqs[N];
    oai_http_cfg_t cfg = {2, 2000, 0, 0};
    serve_n_t sv;
    server_t silent;
    pthread_t th;
    oai_http_t *h;
    char err[200], url[64];
    int i, port;

    memset(res, 0, sizeof(res));
    sv.lfd = listen_any(&port);
    sv.n = N;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_n, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/models/m/infer", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    for (i = 0; i < N; i++) {
        reqs[i] = new_req(url, 20000, &res[i]);
        ck_assert_int_eq(oai_http_submit(h, reqs[i]), 0);
    }
    ck_assert_int_eq(wait_all_done(res, N, 20000), N);
    for (i = 0; i < N; i++) {
        ck_assert_msg(res[i].status == 0, "request %d: %s", i, res[i].msg);
        ck_assert_str_eq(res[i].data, "ok");
    }
    oai_http_destroy(h);
    pthread_join(th, NULL);
    close(sv.lfd);
    for (i = 0; i < N; i++)
        free(reqs[i]);

    /* One connection, held by a request the server never answers (300 ms deadline); the one
     * behind it has 100 ms and never gets the connection. */
    memset(res, 0, 2 * sizeof(res[0]));
    cfg.max_conns = 1;
    silent.lfd = listen_any(&port);
    silent.reply = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_one, &silent), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/models/m/infer", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    reqs[0] = new_req(url, 300, &res[0]);
    reqs[1] = new_req(url, 100, &res[1]);
    ck_assert_int_eq(oai_http_submit(h, reqs[0]), 0);
    ck_assert_int_eq(oai_http_submit(h, reqs[1]), 0);
    ck_assert_int_eq(wait_all_done(res, 2, 10000), 2);
    ck_assert_int_eq(res[0].status, OAI_HTTP_ETRANSFER);
    ck_assert_int_eq(res[1].status, OAI_HTTP_ETRANSFER);
    ck_assert_msg(strstr(res[1].msg, "for a free connection"), "%s", res[1].msg);
    oai_http_destroy(h);
    pthread_join(th, NULL);
    close(silent.lfd);
    free(reqs[0]);
    free(reqs[1]);
}
END_TEST

START_TEST(http_pool)
{
    result_t r;

    run_request("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                "data: {\"x\":1}\n\ndata: [DONE]\n\n",
                5000, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.data, "data: {\"x\":1}\n\ndata: [DONE]\n\n");

    run_request("HTTP/1.1 400 Bad Request\r\nContent-Length: 26\r\nConnection: close\r\n\r\n"
                "{\"message\":\"bad prompt!\"}\n",
                5000, &r);
    ck_assert_int_eq(r.status, OAI_HTTP_ESTATUS);
    ck_assert_msg(strstr(r.msg, "HTTP 400") && strstr(r.msg, "bad prompt!"), "%s", r.msg);
    ck_assert_uint_eq(r.len, 0);

    /* A chunked stream cut off mid-way: the transfer fails. */
    run_request("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                "e\r\ndata: {\"x\":1}\n\r\n",
                5000, &r);
    ck_assert_int_eq(r.status, OAI_HTTP_ETRANSFER);

    /* A server that never answers: the deadline. */
    run_request(NULL, 300, &r);
    ck_assert_int_eq(r.status, OAI_HTTP_ETRANSFER);
    ck_assert_msg(strstr(r.msg, "imeout") || strstr(r.msg, "timed out"), "%s", r.msg);
}
END_TEST

/* ---- read coalescing: streams on one keep-alive connection ---- */

#define CO_EVENTS 40

typedef struct {
    int lfd;
    int requests;  /* answered on one connection, one after the other */
    int cut;       /* close after a few events, without the end chunk */
    oai_http_t *h; /* with coalescing: the pool whose parks the server waits for */
} co_server_t;

/* Waits (10 s at most) until the pool moved |n| connections onto its tick: the rest of a stream
 * is then sent to a parked connection however slowly the client runs. */
static void wait_parks(oai_http_t *h, uint64_t n)
{
    int i;
    for (i = 0; i < 10000 && oai_http_parks(h) < n; i++)
        usleep(1000);
}

/* Reads one small request (headers and a JSON body); 0 at its end, -1 when the peer closed. */
static int read_request(int fd)
{
    char buf[4096];
    size_t got = 0;
    while (got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, 1); /* bytewise: never past this request */
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        if (buf[got - 1] == '}' && strstr(buf, "\r\n\r\n"))
            return 0;
    }
    return -1;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* the client may have closed */
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void *serve_stream(void *arg)
{
    co_server_t *s = arg;
    int fd = accept(s->lfd, NULL, NULL), k, i;

    if (fd < 0)
        return NULL;
    for (k = 0; k < s->requests && read_request(fd) == 0; k++) {
        static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n";
        write_all(fd, hdr, sizeof(hdr) - 1);
        for (i = 0; i < CO_EVENTS; i++) {
            char ev[64], chunk[96];
            int n = snprintf(ev, sizeof(ev), "data: {\"r\":%d,\"i\":%d}\n\n", k, i);
            int m = snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", n, ev);
            if (s->cut && i == 3)
                break;
            write_all(fd, chunk, (size_t)m);
            if (i == 0 && s->h)
                wait_parks(s->h, (uint64_t)k + 1);
            usleep(200); /* one write per event, as engines stream */
        }
        if (s->cut)
            break;
        write_all(fd, "0\r\n\r\n", 5);
    }
    close(fd);
    return NULL;
}

static size_t co_abort_at; /* 0, or stop the transfer once this many bytes came */

static int on_data_coalesce(oai_http_req_t *r, const char *p, size_t n)
{
    result_t *res = r->ctx;
    oai_http_coalesce(r); /* after the first piece, as the openai backend after a first token */
    on_data(r, p, n);
    return co_abort_at && res->len >= co_abort_at; /* as the backend on a bad event */
}

static void expect_events(const result_t *res, int k, int n)
{
    char want[sizeof(res->data)];
    size_t len = 0;
    int i;
    for (i = 0; i < n; i++)
        len +=
            (size_t)snprintf(want + len, sizeof(want) - len, "data: {\"r\":%d,\"i\":%d}\n\n", k, i);
    ck_assert_uint_eq(res->len, len);
    ck_assert(memcmp(res->data, want, len) == 0);
}

/* |n| requests on a pool of one connection with coalesce_us; all submitted at once. Returns how
 * often a connection was moved onto the coalescing tick. */
static uint64_t run_coalesced(int n, int cut, uint32_t coalesce_us, result_t *res)
{
    int port;
    co_server_t s = {0};
    pthread_t th;
    oai_http_t *h;
    oai_http_cfg_t cfg = {1, 2000, coalesce_us, 0};
    oai_http_req_t req[2];
    char err[200], url[64];
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    int i, k, done;
    uint64_t parks;

    ck_assert_int_le(n, 2);
    s.lfd = listen_any(&port);
    s.requests = n;
    s.cut = cut;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    s.h = coalesce_us ? h : NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, serve_stream, &s), 0);
    for (k = 0; k < n; k++) {
        memset(&res[k], 0, sizeof(res[k]));
        memset(&req[k], 0, sizeof(req[k]));
        req[k].url = url;
        req[k].body = "{\"prompt\":[1]}";
        req[k].body_len = strlen(req[k].body);
        req[k].headers = hdrs;
        req[k].timeout_ms = 10000;
        req[k].on_data = on_data_coalesce;
        req[k].on_done = on_done;
        req[k].ctx = &res[k];
        ck_assert_int_eq(oai_http_submit(h, &req[k]), 0);
    }
    for (i = 0; i < 1000; i++) { /* polls the condition, bounded at 10 s */
        for (k = 0, done = 0; k < n; k++)
            done += __atomic_load_n(&res[k].done, __ATOMIC_ACQUIRE);
        if (done == n)
            break;
        usleep(10000);
    }
    ck_assert_msg(done == n, "%d of %d requests completed within 10 s", done, n);
    parks = oai_http_parks(h);
    oai_http_destroy(h);
    pthread_join(th, NULL);
    close(s.lfd);
    return parks;
}

START_TEST(http_coalesce)
{
    result_t r[2];

    /* Two streams on one keep-alive connection: the second starts on the connection the first
     * left parked on the coalescing tick; each arrives whole and in order. */
    /* Each stream's connection goes onto the tick at its first data, while the stream runs. */
    ck_assert_uint_eq(run_coalesced(2, 0, 2000, r), 2);
    ck_assert_int_eq(r[0].status, 0);
    ck_assert_int_eq(r[1].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);
    expect_events(&r[1], 1, CO_EVENTS);

    /* A period longer than the whole stream: the end still comes, on a tick. */
    ck_assert_uint_eq(run_coalesced(1, 0, 50000, r), 1);
    ck_assert_int_eq(r[0].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);

    /* Coalescing off: the same bytes. */
    ck_assert_uint_eq(run_coalesced(1, 0, 0, r), 0);
    ck_assert_int_eq(r[0].status, 0);
    expect_events(&r[0], 0, CO_EVENTS);

    /* Cut off while coalesced: the transfer fails, with what came before delivered. */
    ck_assert_uint_eq(run_coalesced(1, 1, 2000, r), 1);
    ck_assert_int_eq(r[0].status, OAI_HTTP_ETRANSFER);
    expect_events(&r[0], 0, 3);

    /* The reader stops a coalesced stream (the backend on a bad event): on_done once, with
     * OAI_HTTP_EABORT. */
    co_abort_at = 100;
    ck_assert_uint_eq(run_coalesced(1, 0, 2000, r), 1);
    co_abort_at = 0;
    ck_assert_int_eq(r[0].status, OAI_HTTP_EABORT);
    ck_assert_uint_ge(r[0].len, 100);
}
END_TEST

/* ---- the option helpers both forwarding backends use ---- */

START_TEST(options)
{
    static const oai_optdef_t known[] = {
        {"url", "http://127.0.0.1:8000"}, {"model", NULL}, {"engines", "2"}};
    const char *keys[] = {"model", "engines"}, *vals[] = {"m1", "7"};
    const char *bad_keys[] = {"model", "enignes"};
    sut_backend_config_t cfg;
    unsigned long long u = 0;
    char err[256] = "";

    memset(&cfg, 0, sizeof(cfg));
    cfg.keys = keys;
    cfg.values = vals;
    cfg.n_options = 2;
    ck_assert_int_eq(oai_opts_check(&cfg, "test", known, 3, err, sizeof(err)), 0);
    ck_assert_str_eq(oai_opts_get(&cfg, known, 3, "model"), "m1");
    ck_assert_str_eq(oai_opts_get(&cfg, known, 3, "engines"), "7");
    ck_assert_str_eq(oai_opts_get(&cfg, known, 3, "url"), "http://127.0.0.1:8000");
    ck_assert_ptr_null(oai_opts_get(&cfg, known, 3, "other"));
    cfg.keys = bad_keys;
    ck_assert_int_lt(oai_opts_check(&cfg, "test", known, 3, err, sizeof(err)), 0);
    ck_assert_str_eq(err,
                     "unknown option 'enignes' for the test backend (known: url model engines)");
    /* A short buffer truncates the list, never overruns. */
    ck_assert_int_lt(oai_opts_check(&cfg, "test", known, 3, err, 20), 0);
    ck_assert_uint_eq(strlen(err), 19);
    ck_assert_int_eq(oai_opts_u("engines", "7", 1, 8, &u, err, sizeof(err)), 0);
    ck_assert_uint_eq(u, 7);
    ck_assert_int_lt(oai_opts_u("engines", "9", 1, 8, &u, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "option engines=9: expected an integer in 1..8");
    ck_assert_int_lt(oai_opts_u("engines", "-1", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(oai_opts_u("engines", "3x", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(oai_opts_u("engines", "", 0, 8, &u, err, sizeof(err)), 0);
    ck_assert_int_lt(
        oai_opts_u("engines", "99999999999999999999999", 0, ~0ull, &u, err, sizeof(err)), 0);
    ck_assert_uint_eq(u, 7);
}
END_TEST

/* A server that answers each request with |head| (or nothing) and holds the connection until the
 * client closes it; it stops after 1.5 s without a new connection. Counts connections and their
 * closes by the client. */
typedef struct {
    int lfd;
    const char *head;
    int accepted, closed;
} hold_t;

static void *serve_hold(void *arg)
{
    hold_t *s = arg;
    struct pollfd p = {s->lfd, POLLIN, 0};
    char b[256];

    while (poll(&p, 1, 1500) > 0) {
        int fd = accept(s->lfd, NULL, NULL);
        struct pollfd q;
        if (fd < 0)
            break;
        __atomic_add_fetch(&s->accepted, 1, __ATOMIC_ACQ_REL);
        if (read_request(fd) == 0 && s->head)
            write_all(fd, s->head, strlen(s->head));
        q.fd = fd;
        q.events = POLLIN;
        while (poll(&q, 1, 10000) > 0 && read(fd, b, sizeof(b)) > 0) {
        }
        __atomic_add_fetch(&s->closed, 1, __ATOMIC_ACQ_REL);
        close(fd);
    }
    return NULL;
}

/* oai_http_cancel: a running request's transfer is aborted (the server sees its connection
 * closed) and a queued one fails unsent; both with OAI_HTTP_ECANCEL, long before their 20 s
 * deadline. */
START_TEST(http_cancel)
{
    static result_t res[2];
    oai_http_req_t *reqs[2];
    oai_http_cfg_t cfg = {1, 2000, 0, 0};
    hold_t sv = {0};
    pthread_t th;
    oai_http_t *h;
    char err[200], url[64];
    int i, port;

    memset(res, 0, sizeof(res));
    sv.lfd = listen_any(&port);
    sv.head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              "Transfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(pthread_create(&th, NULL, serve_hold, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    for (i = 0; i < 2; i++) {
        reqs[i] = new_req(url, 20000, &res[i]);
        ck_assert_int_eq(oai_http_submit(h, reqs[i]), 0);
    }
    for (i = 0; i < 1000 && !__atomic_load_n(&sv.accepted, __ATOMIC_ACQUIRE); i++)
        usleep(10000); /* the first request is running (bounded at 10 s) */
    ck_assert_int_eq(sv.accepted, 1);
    oai_http_cancel(h, reqs[1]); /* queued behind the only connection */
    oai_http_cancel(h, reqs[0]); /* running */
    ck_assert_int_eq(wait_all_done(res, 2, 10000), 2);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(res[i].status, OAI_HTTP_ECANCEL);
        ck_assert_msg(strstr(res[i].msg, "cancelled"), "%s", res[i].msg);
    }
    pthread_join(th, NULL);           /* after 1.5 s without a new connection */
    ck_assert_int_eq(sv.accepted, 1); /* the queued request was never sent */
    ck_assert_int_eq(sv.closed, 1);
    oai_http_destroy(h);
    close(sv.lfd);
    free(reqs[0]);
    free(reqs[1]);
}
END_TEST

/* cfg.idle_ms: a response that starts and then sends nothing fails with OAI_HTTP_EIDLE, naming
 * the URL and the deadline, long before its 20 s timeout. */
START_TEST(http_idle)
{
    static result_t res[1];
    oai_http_req_t *req;
    oai_http_cfg_t cfg = {1, 2000, 0, 200};
    hold_t sv = {0};
    pthread_t th;
    oai_http_t *h;
    char err[200], url[64];
    int port;

    memset(res, 0, sizeof(res));
    sv.lfd = listen_any(&port);
    sv.head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              "Transfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(pthread_create(&th, NULL, serve_hold, &sv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/completions", port);
    ck_assert_int_eq(oai_http_create(&cfg, &h, err, sizeof(err)), 0);
    req = new_req(url, 20000, &res[0]);
    ck_assert_int_eq(oai_http_submit(h, req), 0);
    ck_assert_int_eq(wait_all_done(res, 1, 10000), 1);
    ck_assert_int_eq(res[0].status, OAI_HTTP_EIDLE);
    ck_assert_msg(strstr(res[0].msg, url) && strstr(res[0].msg, "idle deadline of 200 ms"), "%s",
                  res[0].msg);
    pthread_join(th, NULL);
    ck_assert_int_eq(sv.closed, 1);
    oai_http_destroy(h);
    close(sv.lfd);
    free(req);
}
END_TEST

static TCase *tc(const char *name, const TTest *t)
{
    TCase *c = tcase_create(name);
    tcase_add_test(c, t);
    tcase_set_timeout(c, 30);
    return c;
}

static TCase *tc_sse_bytewise(void)
{
    return tc("sse_bytewise", sse_bytewise);
}
static TCase *tc_sse_limits(void)
{
    return tc("sse_limits", sse_limits);
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
static TCase *tc_kserve_v2(void)
{
    return tc("kserve_v2", kserve_v2);
}
static TCase *tc_http_pool(void)
{
    return tc("http_pool", http_pool);
}
static TCase *tc_http_coalesce(void)
{
    return tc("http_coalesce", http_coalesce);
}
static TCase *tc_http_queue(void)
{
    return tc("http_queue", http_queue);
}
static TCase *tc_http_cancel(void)
{
    return tc("http_cancel", http_cancel);
}
static TCase *tc_http_idle(void)
{
    return tc("http_idle", http_idle);
}
static TCase *tc_options(void)
{
    return tc("options", options);
}

CHECK_MAIN("openai", tc_sse_bytewise, tc_sse_limits, tc_dialects, tc_text_without_ids,
           tc_event_scanner_hostile, tc_token_count, tc_kserve_v2, tc_http_pool, tc_http_coalesce,
           tc_http_queue, tc_http_cancel, tc_http_idle, tc_options)
