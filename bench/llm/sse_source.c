/* sse_source: a fast token source for the openai backend's benchmark. It answers vLLM-dialect
 * streaming completions (POST /v1/completions) on loopback with keep-alive HTTP/1.1 and chunked
 * SSE: the first token after --ttft-us, then one event per token every --tpot-us, each its own
 * write, as a real engine streams; then [DONE]. The events have the size and fields of vLLM's
 * (id, object, created, model, choices[0].text, token_ids, finish_reason). The token IDs are a
 * function of the prompt length and the position, so a client can check them.
 *
 *   sse_source [--port-file F] [--ttft-us 20000] [--tpot-us 5000] [--tokens N]
 *              [--stream-interval K] [--log F] [--one-write]
 *
 * --one-write (only with --ttft-us 0 --tpot-us 0, every token at once) writes each answer, the
 * same bytes, with one write instead of one per event: the null engine of the capacity rows
 * (endpoint_bench.py), whose client then meets one TCP segment per answer instead of one per
 * event (each of which costs the client's kernel an ACK and a wake-up), and which costs the
 * engine a twelfth of the system calls. Its --log times the first and last token both just before
 * that write; the last answer made is written again, unformatted, to the next request with the
 * same prompt length and tokens (the answer is a function of them). Every write is tried at once
 * (uv_try_write); only what the kernel did not take is copied.
 *
 * --stream-interval K (1 to 64, default 1) streams as engines do with their stream interval
 * (SGLang's and vLLM's --stream-interval, TensorRT-LLM's stream_interval): the first token alone,
 * then one event per K tokens generated (and the last ones), the tokens at the same pace.
 *
 * --log F writes one line per finished stream to F, on the engine's own clock (CLOCK_MONOTONIC,
 * ns; the clock loadgen-node and Python's time.monotonic() read): "arrival first last tokens",
 * the request's arrival (its last byte read), and the times just before the first and the last
 * token's event were written. A client's TTFT and TPOT less these are what the client adds
 * (endpoint_bench.py).
 *
 * A GET (a client's readiness probe, as the QDL's GET /v1/models at start) is answered with a
 * one-model list, not streamed and not logged.
 *
 * --tokens overrides the request's max_tokens. A benchmark tool, not a server: it trusts its
 * loopback client (requests over 64 KiB are refused and the connection closed). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#define REQ_MAX 65536
#define OUT_MAX 65536 /* a --one-write answer: about 300 B per event */

static uint64_t ttft_us = 20000, tpot_us = 5000;
static long force_tokens = 0;
static long stream_interval = 1;
#define INTERVAL_MAX 64
static uv_loop_t *loop;
static unsigned long long tokens_sent, streams_done;
static uv_signal_t sig;
static FILE *log_f;   /* --log: one line per stream */
static int one_write; /* --one-write */
#define SSE_HEAD \
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

typedef struct {
    uv_tcp_t tcp;
    uv_timer_t timer;
    char req[REQ_MAX];
    size_t req_len;
    int streaming; /* a response is being streamed */
    long tokens, sent, prompt_len;
    long held; /* tokens generated but not yet sent (--stream-interval) */
    /* --log: the request's arrival, its first and last token's send */
    uint64_t arrival_ns, first_ns, last_ns;
    int closing;
    int gather; /* --one-write: the answer is gathered in out, then written at once */
    size_t out_len;
    char out[OUT_MAX];
} conn_t;

typedef struct {
    uv_write_t w;
    size_t len;
    char data[];
} wreq_t;

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void send_bytes(conn_t *c, const char *p, size_t n)
{
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
    int k = uv_try_write((uv_stream_t *)&c->tcp, &b, 1); /* the kernel takes it all: no copy */
    wreq_t *w;

    if (k == UV_EAGAIN || k == UV_ENOSYS)
        k = 0;
    if (k < 0 || (size_t)k == n)
        return;
    p += k;
    n -= (size_t)k;
    w = malloc(sizeof(*w) + n); /* the rest, after what the kernel took, from a copy */
    if (!w)
        return;
    memcpy(w->data, p, n);
    w->len = n;
    b = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        free(w);
}

/* Bytes for the client: written at once, or (a --one-write answer) gathered in c->out. */
static void emit(conn_t *c, const char *p, size_t n)
{
    if (!c->gather) {
        send_bytes(c, p, n);
        return;
    }
    if (c->out_len + n > sizeof(c->out)) { /* a long answer: in pieces, the first timed */
        if (!c->first_ns)
            c->first_ns = mono_ns();
        send_bytes(c, c->out, c->out_len);
        c->out_len = 0;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

/* One SSE event as one HTTP chunk. */
static void send_event(conn_t *c, const char *json)
{
    char buf[4096];
    int ev = (int)strlen(json) + 8; /* "data: " + json + "\n\n" */
    int n = snprintf(buf, sizeof(buf), "%x\r\ndata: %s\n\n\r\n", ev, json);
    emit(c, buf, (size_t)n);
}

static void on_close(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->closing == 0)
        free(c);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 2;
    uv_close((uv_handle_t *)&c->timer, on_close);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void try_request(conn_t *c);

static long token_at(const conn_t *c, long pos)
{
    return (c->prompt_len * 31 + pos * 7) % 32000;
}

/* One event with the |c->held| tokens generated since the last one. */
static void send_tokens(conn_t *c, int last)
{
    char js[3072], text[1024], ids[1024];
    size_t nt = 0, ni = 0;
    long i;

    for (i = c->sent; i < c->sent + c->held; i++) {
        long tok = token_at(c, i);

        nt += (size_t)snprintf(text + nt, sizeof(text) - nt, " tok%ld", tok);
        ni += (size_t)snprintf(ids + ni, sizeof(ids) - ni, "%s%ld", i > c->sent ? "," : "", tok);
    }
    snprintf(js, sizeof(js),
             "{\"id\":\"cmpl-bench0000000000000000\",\"object\":\"text_completion\",\"created\":"
             "1700000000,\"model\":\"bench\",\"choices\":[{\"index\":0,\"text\":\"%s\","
             "\"logprobs\":null,\"finish_reason\":%s,\"stop_reason\":null,\"token_ids\":[%s]}]}",
             text, last ? "\"length\"" : "null", ids);
    send_event(c, js);
    c->sent += c->held;
    tokens_sent += (unsigned long long)c->held;
    c->held = 0;
}

/* One token generated; the first goes out alone, the others every --stream-interval (timed
 * just before their write, unless gathered). Returns 1 when it was the last: the stream's end
 * follows it. */
static int gen_token(conn_t *c)
{
    int last = c->sent + c->held + 1 == c->tokens;

    c->held++;
    if (c->sent == 0 || last || c->held == stream_interval) {
        if (!c->gather) {
            uint64_t now = mono_ns(); /* before the write: the client cannot see it earlier */
            if (c->sent == 0)
                c->first_ns = now;
            c->last_ns = now;
        }
        send_tokens(c, last);
    }
    if (last) {
        send_event(c, "[DONE]");
        emit(c, "0\r\n\r\n", 5);
    }
    return last;
}

static void stream_done(conn_t *c)
{
    streams_done++;
    if (log_f)
        fprintf(log_f, "%llu %llu %llu %ld\n", (unsigned long long)c->arrival_ns,
                (unsigned long long)c->first_ns, (unsigned long long)c->last_ns, c->tokens);
    c->streaming = 0;
}

/* Each tick generates one token. */
static void on_tick(uv_timer_t *t)
{
    conn_t *c = t->data;

    if (gen_token(c)) {
        stream_done(c);
        try_request(c); /* a pipelined next request, if any */
        return;
    }
    uv_timer_start(&c->timer, on_tick, tpot_us / 1000, 0);
}

/* A whole request in c->req: answer it; keep what follows for the next one. */
static void try_request(conn_t *c)
{
    char *end, *cl, *mt, *pr;
    size_t hdr, body = 0, total;
    long n;

    if (c->streaming || c->req_len == 0)
        return;
    c->req[c->req_len] = '\0';
    end = strstr(c->req, "\r\n\r\n");
    if (!end)
        return;
    hdr = (size_t)(end - c->req) + 4;
    cl = strcasestr(c->req, "content-length:");
    if (cl && cl < end)
        body = (size_t)strtoul(cl + 15, NULL, 10);
    total = hdr + body;
    if (c->req_len < total)
        return;
    mt = strstr(c->req + hdr, "\"max_tokens\":");
    n = mt ? strtol(mt + 13, NULL, 10) : 16;
    c->tokens = force_tokens ? force_tokens : (n > 0 ? n : 16);
    c->prompt_len = 1;
    pr = strstr(c->req + hdr, "\"prompt\":[");
    if (pr)
        for (pr += 10; *pr && *pr != ']'; pr++)
            c->prompt_len += *pr == ',';
    if (strncmp(c->req, "GET ", 4) == 0) { /* a client's readiness probe: the model list */
        static const char models[] =
            "{\"object\":\"list\",\"data\":[{\"id\":\"sse_source\",\"object\":\"model\"}]}";
        char head[128];
        int k = snprintf(head, sizeof(head),
                         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         sizeof(models) - 1);
        memmove(c->req, c->req + total, c->req_len - total);
        c->req_len -= total;
        send_bytes(c, head, (size_t)k);
        send_bytes(c, models, sizeof(models) - 1);
        try_request(c);
        return;
    }
    memmove(c->req, c->req + total, c->req_len - total);
    c->req_len -= total;
    c->sent = c->held = 0;
    c->first_ns = 0;
    c->streaming = 1;
    c->arrival_ns = mono_ns();
    c->gather = one_write;
    emit(c, SSE_HEAD, sizeof(SSE_HEAD) - 1);
    if (one_write) { /* every token at once: the whole answer in one write, timed just before */
        /* the last answer made, again when the prompt's length and the tokens are the same (the
         * answer is a function of them): formatting it was a sixth of the engine's CPU */
        static char memo[OUT_MAX];
        static size_t memo_len;
        static long memo_prompt = -1, memo_tokens;

        if (c->prompt_len == memo_prompt && c->tokens == memo_tokens) {
            c->out_len = 0;
            c->sent = c->tokens;
            tokens_sent += (unsigned long long)c->tokens;
            c->first_ns = c->last_ns = mono_ns();
            send_bytes(c, memo, memo_len);
            c->gather = 0;
            stream_done(c);
            try_request(c);
            return;
        }
        while (!gen_token(c))
            ;
        c->last_ns = mono_ns();
        if (!c->first_ns) { /* written whole: kept for the next request like it */
            c->first_ns = c->last_ns;
            memcpy(memo, c->out, c->out_len);
            memo_len = c->out_len;
            memo_prompt = c->prompt_len;
            memo_tokens = c->tokens;
        }
        send_bytes(c, c->out, c->out_len);
        c->out_len = 0;
        c->gather = 0;
        stream_done(c);
        try_request(c); /* a pipelined next request, if any */
        return;
    }
    uv_timer_start(&c->timer, on_tick, ttft_us / 1000, 0);
}

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    conn_t *c = h->data;
    (void)sz;
    *b = uv_buf_init(c->req + c->req_len, (unsigned)(REQ_MAX - 1 - c->req_len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn_t *c = s->data;
    (void)b;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->req_len += (size_t)n;
    if (c->req_len >= REQ_MAX - 1) {
        conn_close(c);
        return;
    }
    try_request(c);
}

static void on_conn(uv_stream_t *srv, int status)
{
    conn_t *c;
    if (status < 0)
        return;
    c = calloc(1, sizeof(*c));
    if (!c)
        return;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* SIGTERM: the totals, for the benchmark's per-token figures. */
static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    printf("sse_source: tokens=%llu streams=%llu\n", tokens_sent, streams_done);
    fflush(stdout);
    if (log_f && fclose(log_f) != 0)
        fprintf(stderr, "sse_source: writing the --log file failed\n");
    log_f = NULL;
    uv_stop(s->loop);
}

int main(int argc, char **argv)
{
    const char *port_file = NULL;
    struct sockaddr_in a;
    struct sockaddr_storage got;
    int i, len = sizeof(got);
    uv_tcp_t srv;

    for (i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--one-write")) {
            one_write = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sse_source: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--port-file"))
            port_file = argv[i + 1];
        else if (!strcmp(argv[i], "--ttft-us"))
            ttft_us = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--tpot-us"))
            tpot_us = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--tokens"))
            force_tokens = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--log")) {
            log_f = fopen(argv[i + 1], "w");
            if (!log_f) {
                perror(argv[i + 1]);
                return 1;
            }
        } else if (!strcmp(argv[i], "--stream-interval"))
            stream_interval = strtol(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "sse_source: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (stream_interval < 1 || stream_interval > INTERVAL_MAX) {
        fprintf(stderr, "sse_source: --stream-interval is from 1 to %d\n", INTERVAL_MAX);
        return 2;
    }
    if (one_write && (ttft_us || tpot_us)) {
        fprintf(stderr, "sse_source: --one-write is for --ttft-us 0 --tpot-us 0 (every token at "
                        "once)\n");
        return 2;
    }
    if (ttft_us % 1000 || tpot_us % 1000)
        fprintf(stderr, "sse_source: timers are in whole milliseconds (libuv)\n");
    loop = uv_default_loop();
    uv_tcp_init(loop, &srv);
    uv_ip4_addr("127.0.0.1", 0, &a);
    if (uv_tcp_bind(&srv, (const struct sockaddr *)&a, 0) < 0 ||
        uv_listen((uv_stream_t *)&srv, 1024, on_conn) < 0) {
        fprintf(stderr, "sse_source: cannot listen\n");
        return 1;
    }
    uv_tcp_getsockname(&srv, (struct sockaddr *)&got, &len);
    if (port_file) {
        char tmp[4096];
        FILE *f;
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        f = fopen(tmp, "w");
        if (!f)
            return 1;
        fprintf(f, "%u\n", ntohs(((struct sockaddr_in *)&got)->sin_port));
        fclose(f);
        rename(tmp, port_file);
    }
    uv_signal_init(loop, &sig);
    uv_signal_start(&sig, on_signal, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT);
    return 0;
}
