/* The C clients' request (sse_req.h). */
#include "sse_req.h"

#include <stdio.h>
#include <stdlib.h>

char *sse_req_build(unsigned port, long prompt_tokens, long first_id, long max_tokens, size_t *len)
{
    size_t cap = (size_t)prompt_tokens * 24 + 1024, n = 0;
    char *body = malloc(cap), *req;
    long i;

    if (!body)
        return NULL;
    n += (size_t)snprintf(body + n, cap - n, "{\"model\":\"model\",\"prompt\":[");
    for (i = 0; i < prompt_tokens; i++)
        n += (size_t)snprintf(body + n, cap - n, i ? ",%ld" : "%ld", first_id + i);
    n += (size_t)snprintf(body + n, cap - n,
                          "],\"max_tokens\":%ld,\"min_tokens\":%ld,\"temperature\":0,"
                          "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                          "\"ignore_eos\":true,\"return_token_ids\":true,\"logprobs\":0,"
                          "\"return_tokens_as_token_ids\":true}",
                          max_tokens, max_tokens);
    req = malloc(n + 512);
    if (!req) {
        free(body);
        return NULL;
    }
    *len = (size_t)snprintf(req, n + 512,
                            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                            "Content-Length: %zu\r\n\r\n%s",
                            port, n, body);
    free(body);
    return req;
}
