/* httpc/sse.h: a Server-Sent Events decoder with no I/O (the nghttp2 / picohttpparser model).
 *
 * It consumes bytes and returns how many it took; it stops right after an event is complete so
 * the caller can read it with httpc_sse_event() before feeding the rest. Lines end with LF, CR or
 * CRLF (a CRLF split across two feeds is one line end). Only the `data` field matters here:
 * several data lines of one event are joined with LF, comment lines (": ...") and the fields
 * event, id and retry are ignored, an event with no data line is not reported. An event larger
 * than |max_event| bytes (a line counts while it is read) is an error: an engine's stream is
 * hostile input until validated.
 *
 * Not thread-safe: one decoder per stream. Errors: HTTPC_SSE_ETOOBIG. */
#ifndef HTTPC_SSE_H
#define HTTPC_SSE_H

#include <stddef.h>
#include <sys/types.h>

#define HTTPC_SSE_ETOOBIG (-7) /* same value as -E2BIG: an event over the limit */

typedef struct {
    char *line; /* the line being read */
    size_t line_len, line_cap;
    char *ev; /* the data of the event being assembled */
    size_t ev_len, ev_cap;
    size_t max_event;
    int have_data; /* some data line was seen in this event */
    int after_cr;  /* the previous byte was a CR: a following LF is part of that line end */
    int ready;     /* an event is complete and not yet consumed */
} httpc_sse_t;

void httpc_sse_init(httpc_sse_t *p, size_t max_event);
void httpc_sse_free(httpc_sse_t *p);
/* Forget any partial line or event (a new stream on the same decoder). */
void httpc_sse_reset(httpc_sse_t *p);

/* Consumes up to |n| bytes and returns how many were consumed (0..n), or a negative code. When
 * *have_event is set on return, one event is complete: its data is httpc_sse_event() until the
 * next call. */
ssize_t httpc_sse_feed(httpc_sse_t *p, const char *data, size_t n, int *have_event);

/* The same without copying where it can (the hot path of an LLM stream): when *ev is set on
 * return, one event is complete and its data is the |*len| bytes at *ev, NOT NUL-terminated,
 * either in |data| (a single-line event that lay whole in it) or in the decoder; valid until the
 * next call and while |data| is. Same limits, errors and line ends as httpc_sse_feed(), with
 * which it may be mixed on one decoder. */
ssize_t httpc_sse_next(httpc_sse_t *p, const char *data, size_t n, const char **ev, size_t *len);

/* The data of the event just completed (NUL-terminated, |*len| bytes without the NUL). */
const char *httpc_sse_event(const httpc_sse_t *p, size_t *len);

#endif
