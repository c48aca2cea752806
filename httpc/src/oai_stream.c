/* One engine response read as it arrives (httpc/oai.h): SSE events through the dialect, or with
 * oneshot the whole body at the end; the checks at its end. No I/O. */
#include "httpc/oai.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void httpc_oai_stream_init(httpc_oai_stream_t *s, const httpc_oai_gen_t *gen, size_t max_event)
{
    memset(s, 0, sizeof(*s));
    s->gen = gen;
    s->max_event = max_event;
    httpc_sse_init(&s->sse, max_event);
    s->out.max = gen->max_tokens;
}

void httpc_oai_stream_free(httpc_oai_stream_t *s)
{
    httpc_sse_free(&s->sse);
    httpc_oai_out_free(&s->out);
    free(s->whole);
    s->whole = NULL;
}

static int fail(httpc_oai_stream_t *s, const char *msg)
{
    snprintf(s->err, sizeof(s->err), "%s", msg);
    s->failed = 1;
    return 1;
}

/* oneshot: gathers the response body, at most max_event bytes. */
static int gather(httpc_oai_stream_t *s, const char *p, size_t n)
{
    char *nw;

    if (n > s->max_event - s->whole_len) {
        snprintf(s->err, sizeof(s->err), "a response over max_event=%zu bytes", s->max_event);
        s->failed = 1;
        return 1;
    }
    nw = realloc(s->whole, s->whole_len + n + 1);
    if (!nw) {
        snprintf(s->err, sizeof(s->err), "out of memory for a %zu-byte response", s->whole_len + n);
        s->failed = 1;
        return 1;
    }
    memcpy(nw + s->whole_len, p, n);
    s->whole = nw;
    s->whole_len += n;
    nw[s->whole_len] = '\0';
    return 0;
}

int httpc_oai_stream_feed(httpc_oai_stream_t *s, const char *p, size_t n, int *progress)
{
    *progress = 0;
    if (s->gen->oneshot)
        return gather(s, p, n);
    while (n) {
        const char *ev;
        size_t len;
        /* Each event read where it lies in |p| when it can (httpc_sse_next), not copied. */
        ssize_t used = httpc_sse_next(&s->sse, p, n, &ev, &len);
        if (used < 0) {
            snprintf(s->err, sizeof(s->err), "an SSE event over max_event=%zu bytes", s->max_event);
            s->failed = 1;
            return 1;
        }
        p += used;
        n -= (size_t)used;
        if (ev) {
            size_t before = s->out.n;
            /* Events after the end mark are read too: vLLM's usage comes last. */
            if (httpc_oai_dialect_event(s->gen, ev, len, &s->out) < 0)
                return fail(s, s->out.err);
            if (s->out.n > before || s->out.done)
                *progress = 1;
        }
    }
    return 0;
}

int httpc_oai_stream_end(httpc_oai_stream_t *s)
{
    if (s->failed)
        return -EPROTO;
    /* oneshot: the whole response is one event. */
    if (s->gen->oneshot &&
        httpc_oai_dialect_event(s->gen, s->whole ? s->whole : "", s->whole_len, &s->out) < 0) {
        fail(s, s->out.err);
        return -EPROTO;
    }
    if (!s->out.done) {
        snprintf(s->err, sizeof(s->err),
                 "the engine ended the stream after %zu tokens without its end mark", s->out.n);
        s->failed = 1;
        return -EPROTO;
    }
    if (httpc_oai_dialect_end(s->gen, &s->out) < 0) {
        fail(s, s->out.err);
        return -EPROTO;
    }
    return 0;
}
