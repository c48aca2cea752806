/* The request of the endpoint comparison's C clients (sse_raw, sse_flood): a vLLM-dialect
 * streaming completion as httpc_oai_dialect_body() writes it, with its HTTP/1.1 head. */
#ifndef BENCH_SSE_REQ_H
#define BENCH_SSE_REQ_H

#include <stddef.h>

/* |prompt_tokens| IDs first_id, first_id + 1, ...; a malloc'ed request and its length in *len, or
 * NULL when out of memory. */
char *sse_req_build(unsigned port, long prompt_tokens, long first_id, long max_tokens, size_t *len);

#endif
