/* sse_raw: the floor of the endpoint comparison's TTFT rows (issue 39, endpoint_bench.py): the
 * least a client can do. One plain blocking socket with TCP_NODELAY, one request at a time: it
 * writes a vLLM-dialect streaming completion (the body loadgen-node's endpoint mode sends: a
 * token-ID prompt, max_tokens, stream, return_token_ids) in one write, then reads the chunked
 * SSE answer and timestamps the read that brought the first "data: " byte, the read that brought
 * the last token's event (the one with a finish_reason) and the end of the stream. No JSON is
 * parsed: whatever a real client does on top of this is what the comparison measures.
 *
 *   sse_raw --port P [--requests 100] [--gap-us 0] [--prompt-tokens 100] [--max-tokens 8]
 *
 * Output: one line per request on stdout, on CLOCK_MONOTONIC in ns (the clock sse_source --log
 * writes): "start first last", start being just before the request's write. Errors name the
 * request and what failed; exit 1. A benchmark tool for a loopback engine it started itself. */
#include "sse_req.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RESP_MAX (1u << 20) /* one response; sse_source's are a few KiB */

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One response: reads until the chunked stream's last chunk; fills first and last. */
static int read_response(int fd, char *buf, uint64_t *first, uint64_t *last, long req)
{
    size_t have = 0;
    const char *body = NULL;

    *first = *last = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, RESP_MAX - 1 - have);
        uint64_t now = mono_ns();

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "sse_raw: request %ld: %s after %zu bytes of the response\n", req,
                    r == 0 ? "the engine closed the connection" : strerror(errno), have);
            return -1;
        }
        have += (size_t)r;
        buf[have] = '\0';
        if (!body) {
            char *e = strstr(buf, "\r\n\r\n");

            if (e)
                body = e + 4;
        }
        if (body && !*first && strstr(body, "data: "))
            *first = now;
        if (body && !*last && strstr(body, "\"finish_reason\":\""))
            *last = now;
        if (body && have >= 5 && !memcmp(buf + have - 5, "0\r\n\r\n", 5) && *first && *last)
            return 0;
        if (have == RESP_MAX - 1) {
            fprintf(stderr, "sse_raw: request %ld: the response is over %u bytes\n", req,
                    RESP_MAX - 1);
            return -1;
        }
    }
}

int main(int argc, char **argv)
{
    long port = 0, requests = 100, gap_us = 0, prompt_tokens = 100, max_tokens = 8, i;
    struct sockaddr_in a;
    struct timespec gap;
    char *req, *buf;
    size_t req_len;
    int fd, one = 1, rc = 0;

    for (i = 1; i + 1 < argc; i += 2) {
        long *dst = !strcmp(argv[i], "--port")            ? &port
                    : !strcmp(argv[i], "--requests")      ? &requests
                    : !strcmp(argv[i], "--gap-us")        ? &gap_us
                    : !strcmp(argv[i], "--prompt-tokens") ? &prompt_tokens
                    : !strcmp(argv[i], "--max-tokens")    ? &max_tokens
                                                          : NULL;
        if (!dst) {
            fprintf(stderr, "sse_raw: unknown option %s\n", argv[i]);
            return 2;
        }
        *dst = strtol(argv[i + 1], NULL, 10);
    }
    if (i != argc || port < 1 || port > 65535 || requests < 1 || gap_us < 0 || prompt_tokens < 1 ||
        prompt_tokens > 100000 || max_tokens < 1) {
        fprintf(stderr, "usage: sse_raw --port P [--requests N >= 1] [--gap-us U] "
                        "[--prompt-tokens 1..100000] [--max-tokens N >= 1]\n");
        return 2;
    }
    req = sse_req_build((unsigned)port, prompt_tokens, 1000, max_tokens, &req_len);
    buf = malloc(RESP_MAX);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!req || !buf || fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        fprintf(stderr, "sse_raw: cannot connect to 127.0.0.1:%ld: %s\n", port,
                !req || !buf ? "out of memory" : strerror(errno));
        if (fd >= 0)
            close(fd);
        free(req);
        free(buf);
        return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    gap.tv_sec = gap_us / 1000000;
    gap.tv_nsec = (gap_us % 1000000) * 1000;
    for (i = 0; i < requests && rc == 0; i++) {
        uint64_t start = mono_ns(), first, last;

        if (write_all(fd, req, req_len) < 0) {
            fprintf(stderr, "sse_raw: request %ld: write to 127.0.0.1:%ld failed: %s\n", i, port,
                    strerror(errno));
            rc = 1;
        } else if (read_response(fd, buf, &first, &last, i) < 0) {
            rc = 1;
        } else {
            printf("%llu %llu %llu\n", (unsigned long long)start, (unsigned long long)first,
                   (unsigned long long)last);
            if (gap_us)
                nanosleep(&gap, NULL);
        }
    }
    close(fd);
    free(req);
    free(buf);
    return rc;
}
