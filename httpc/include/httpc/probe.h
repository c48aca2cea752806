/* httpc/probe.h: the readiness probe of the forwarding backends (ABI 1.2 ready()): one blocking
 * HTTP GET of the engine's health endpoint with a deadline of its own, on the node's probe thread
 * (never on the request pool's loop, so a slow probe delays no sample).
 *
 * Ready: a 2xx answer; also 404, 405 and 501, the answers of an engine without such an endpoint
 * (it answers HTTP, so it runs; the samples tell the rest). Not ready: no connection, no answer
 * within the deadline, any other status (vLLM and llama.cpp answer 503 while they load a model),
 * with the reason as the engine gave it. Thread-safe (one curl easy handle per call). */
#ifndef HTTPC_PROBE_H
#define HTTPC_PROBE_H

#include "httpc/h1.h"

#include <stddef.h>

/* 1 ready, 0 not ready with the reason in why[0..whylen), or a negative code (out of memory). */
int httpc_probe_get(const char *url, const char *const *headers, long timeout_ms, char *why,
                    size_t whylen);

/* The same, https:// verified against |ca_file| (PEM) instead of the system's CAs when given. */
int httpc_probe_get_ca(const char *url, const char *const *headers, const char *ca_file,
                       long timeout_ms, char *why, size_t whylen);

/* The same on the lean client (httpc/h1.h; HTTPS with its TLS): GET cfg->path with
 * cfg->method "GET", on a loop of its own, each phase (connect, handshake, answer) bounded by
 * cfg's deadlines. |url| names it in the reason for a status; a failure to connect or to
 * handshake is the client's message, which names the address ("https://HOST:PORT: TLS handshake
 * failed: certificate verify failed (self-signed certificate)"). */
int httpc_probe_h1(const httpc_h1_cfg_t *cfg, const char *url, char *why, size_t whylen);

/* The engine's own words from a JSON error body: {"error": {"message": ...}} as llama.cpp and
 * OpenAI write it, {"message": ...} as vLLM and SGLang, {"error": "..."} as TGI. 1 with the
 * message in out[0..outlen) (truncated), 0 when |body| is not such JSON. */
int httpc_json_message(const char *body, char *out, size_t outlen);

/* Every byte of the NUL-terminated |s| outside printable ASCII (control bytes, DEL, anything
 * of UTF-8) becomes |with|, so an engine's text fits one log line and says nothing to a
 * terminal. */
void httpc_text_clean(char *s, char with);

#endif
