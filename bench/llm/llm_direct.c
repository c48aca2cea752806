/* llm_direct: the reference client of the openai backend's benchmark. It calls the engine (the
 * token source) directly with the backend's own HTTP pool, SSE decoder and dialect code, at a
 * fixed request rate, and reports the time to first token and the output rate: the same
 * requests the node makes, without loadgen-node, the QDL and sut-node in between. With
 * --parse N it times the decoding of one vLLM event (SSE, then JSON) N times instead.
 *
 *   llm_direct --url http://127.0.0.1:P --qps Q --duration-s S --max-tokens N
 *              [--prompt-tokens N] [--max-conns N] [--coalesce-us N]
 *   llm_direct --parse N
 *
 * Prints key=value lines: ttft_p50_us, ttft_p99_us, tokens, tokens_per_s, cpu_ns_per_token,
 * tpot_p50_us, parks (streams moved onto the read-coalescing tick). */
#include "httpc/oai.h"
#include "httpc/httpc.h"
#include "httpc/sse.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

typedef struct {
    httpc_req_t req;
    httpc_oai_gen_t *gen;
    httpc_sse_t sse;
    httpc_oai_out_t out;
    char *body;
    uint64_t t0, ttft, tpot;
    int failed;
} call_t;

static atomic_long done_calls, done_tokens, failed_calls;

static int on_data(httpc_req_t *r, const char *p, size_t n)
{
    call_t *c = (call_t *)r;
    while (n) {
        const char *ev;
        size_t len;
        ssize_t used = httpc_sse_next(&c->sse, p, n, &ev, &len); /* in place, as the backend */
        if (used < 0)
            return 1;
        p += used;
        n -= (size_t)used;
        if (ev) {
            if (!c->out.done && httpc_oai_dialect_event(c->gen, ev, len, &c->out) < 0)
                return 1;
            if (!c->ttft && c->out.n) {
                c->ttft = now_ns() - c->t0;
                httpc_coalesce(&c->req); /* as the backend does */
            }
        }
    }
    return 0;
}

static void on_done(httpc_req_t *r, int status, const char *msg)
{
    call_t *c = (call_t *)r;
    if (status != 0 || !c->out.done) {
        fprintf(stderr, "llm_direct: a request failed: %s\n", msg);
        atomic_fetch_add(&failed_calls, 1);
    } else {
        atomic_fetch_add(&done_tokens, (long)c->out.n);
        if (c->out.n > 1 && c->ttft) /* as LoadGen: (end - first token) / (n - 1) */
            c->tpot = (now_ns() - c->t0 - c->ttft) / (c->out.n - 1);
    }
    atomic_fetch_add(&done_calls, 1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int parse_bench(long n)
{
    /* as a stream's events differ: the text and the token ID (oai_event.c's memo resumes
     * after the part they repeat, as it does on a real stream) */
    char ev[16][320];
    size_t evlen[16];
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "bench", 1u << 30, 0, 0, 0, 0, 0};
    httpc_sse_t p;
    httpc_oai_out_t *o = calloc(1, sizeof(*o));
    uint64_t t0, t_sse = 0, t_json = 0;
    long i;

    if (!o)
        return 1;
    for (i = 0; i < 16; i++)
        evlen[i] = (size_t)snprintf(
            ev[i], sizeof(ev[i]),
            "data: {\"id\":\"cmpl-bench0000000000000000\",\"object\":\"text_completion\","
            "\"created\":1700000000,\"model\":\"bench\",\"choices\":[{\"index\":0,\"text\":"
            "\" tok%ld\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null,"
            "\"token_ids\":[%ld]}]}\n\n",
            123 + i * 7919, 123 + i * 7919);
    httpc_sse_init(&p, 65536);
    o->max = (size_t)n + 1;
    for (i = 0; i < n; i++) {
        size_t len;
        const char *d;
        t0 = now_ns();
        httpc_sse_next(&p, ev[i & 15], evlen[i & 15], &d, &len);
        t_sse += now_ns() - t0;
        t0 = now_ns();
        if (httpc_oai_dialect_event(&g, d, len, o) < 0)
            return 1;
        t_json += now_ns() - t0;
    }
    printf("event_bytes=%zu\nsse_ns_per_event=%.1f\njson_ns_per_event=%.1f\n", evlen[0],
           (double)t_sse / (double)n, (double)t_json / (double)n);
    httpc_sse_free(&p);
    httpc_oai_out_free(o);
    free(o);
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = "http://127.0.0.1:8000";
    double qps = 100, dur = 10;
    long max_tokens = 64, prompt_tokens = 64, max_conns = 256, i, n;
    long coalesce_us = HTTPC_COALESCE_US_DEFAULT;
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "bench", 64, 0, 0, 0, 0, 0};
    httpc_cfg_t hc = {0};
    httpc_t *h;
    call_t *calls;
    uint64_t *ttft, *tpot, t_start, c0, c1;
    int32_t *prompt;
    char err[256], urlp[512];
    long nt = 0;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--parse"))
            return parse_bench(strtol(argv[i + 1], NULL, 10));
        else if (!strcmp(argv[i], "--url"))
            url = argv[i + 1];
        else if (!strcmp(argv[i], "--qps"))
            qps = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--duration-s"))
            dur = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--max-tokens"))
            max_tokens = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--prompt-tokens"))
            prompt_tokens = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--max-conns"))
            max_conns = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--coalesce-us"))
            coalesce_us = strtol(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "llm_direct: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    g.max_tokens = (uint32_t)max_tokens;
    snprintf(urlp, sizeof(urlp), "%s/v1/completions", url);
    n = (long)(qps * dur);
    calls = calloc((size_t)n, sizeof(*calls));
    ttft = calloc((size_t)n, sizeof(*ttft));
    tpot = calloc((size_t)n, sizeof(*tpot));
    prompt = calloc((size_t)prompt_tokens, sizeof(*prompt));
    if (!calls || !ttft || !tpot || !prompt)
        return 1;
    for (i = 0; i < prompt_tokens; i++)
        prompt[i] = (int32_t)(i * 7 + 1);
    hc.max_conns = (uint32_t)max_conns;
    hc.connect_timeout_ms = 5000;
    hc.coalesce_us = (uint32_t)coalesce_us;
    if (httpc_create(&hc, &h, err, sizeof(err)) < 0) {
        fprintf(stderr, "llm_direct: %s\n", err);
        return 1;
    }
    static const char *hdrs[] = {"Content-Type: application/json", NULL};
    t_start = now_ns();
    c0 = cpu_ns();
    for (i = 0; i < n; i++) {
        call_t *c = &calls[i];
        size_t blen;
        uint64_t due = t_start + (uint64_t)((double)i * 1e9 / qps);
        for (;;) { /* sleep, then spin the last 50 us; one clock reading per test */
            uint64_t t = now_ns();
            if (t >= due)
                break;
            if (due - t > 50000)
                usleep((useconds_t)((due - t) / 1000 - 20));
        }
        c->gen = &g;
        httpc_sse_init(&c->sse, 65536);
        c->out.max = (size_t)max_tokens;
        httpc_oai_dialect_body(&g, prompt, (size_t)prompt_tokens, &c->body, &blen);
        c->req.url = urlp;
        c->req.body = c->body;
        c->req.body_len = blen;
        c->req.headers = hdrs;
        c->req.timeout_ms = 60000;
        c->req.on_data = on_data;
        c->req.on_done = on_done;
        c->t0 = due; /* from the scheduled time, as LoadGen measures */
        httpc_submit(h, &c->req);
    }
    for (i = 0; i < 60000 && atomic_load(&done_calls) < n; i++)
        usleep(1000);
    c1 = cpu_ns();
    printf("parks=%llu\n", (unsigned long long)httpc_parks(h)); /* streams read on the tick */
    {
        double wall = (double)(now_ns() - t_start) / 1e9;
        long m = 0, mt = 0;
        for (i = 0; i < n; i++) {
            if (calls[i].ttft)
                ttft[m++] = calls[i].ttft;
            if (calls[i].tpot)
                tpot[mt++] = calls[i].tpot;
        }
        qsort(ttft, (size_t)m, sizeof(*ttft), cmp_u64);
        qsort(tpot, (size_t)mt, sizeof(*tpot), cmp_u64);
        nt = atomic_load(&done_tokens);
        printf("requests=%ld\nfailed=%ld\nttft_p50_us=%.1f\nttft_p99_us=%.1f\ntokens=%ld\n"
               "tokens_per_s=%.0f\ncpu_ns_per_token=%.0f\ntpot_p50_us=%.1f\n",
               n, atomic_load(&failed_calls), m ? (double)ttft[m / 2] / 1e3 : 0,
               m ? (double)ttft[(size_t)((double)m * 0.99)] / 1e3 : 0, nt, (double)nt / wall,
               nt ? (double)(c1 - c0) / (double)nt : 0, mt ? (double)tpot[mt / 2] / 1e3 : 0);
    }
    httpc_destroy(h);
    for (i = 0; i < n; i++) {
        httpc_sse_free(&calls[i].sse);
        httpc_oai_out_free(&calls[i].out);
        free(calls[i].body);
    }
    free(calls);
    free(ttft);
    free(tpot);
    free(prompt);
    return atomic_load(&failed_calls) ? 1 : 0;
}
