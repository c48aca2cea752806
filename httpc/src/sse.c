/* Server-Sent Events decoding (see httpc/sse.h). */
#include "httpc/sse.h"

#include <stdlib.h>
#include <string.h>

void httpc_sse_init(httpc_sse_t *p, size_t max_event)
{
    memset(p, 0, sizeof(*p));
    p->max_event = max_event;
}

void httpc_sse_free(httpc_sse_t *p)
{
    free(p->line);
    free(p->ev);
    memset(p, 0, sizeof(*p));
}

void httpc_sse_reset(httpc_sse_t *p)
{
    p->line_len = 0;
    p->ev_len = 0;
    p->have_data = 0;
    p->after_cr = 0;
    p->ready = 0;
}

/* Grows |*buf| to hold |need| bytes plus a NUL, never past the event limit. */
static int reserve(char **buf, size_t *cap, size_t need, size_t max)
{
    size_t ncap;
    char *nb;

    if (need > max)
        return HTTPC_SSE_ETOOBIG;
    if (need + 1 <= *cap)
        return 0;
    ncap = *cap ? *cap : 256;
    while (ncap < need + 1)
        ncap *= 2;
    if (ncap > max + 1)
        ncap = max + 1;
    nb = realloc(*buf, ncap);
    if (!nb)
        return -12; /* -ENOMEM */
    *buf = nb;
    *cap = ncap;
    return 0;
}

/* A complete line: returns 1 when it ends an event that has data, 0 otherwise, or an error. */
static int end_line(httpc_sse_t *p)
{
    const char *l = p->line, *v;
    size_t n = p->line_len, vn;
    int rc;

    p->line_len = 0;
    if (n == 0) {
        if (!p->have_data)
            return 0;
        p->have_data = 0;
        return 1;
    }
    /* Only the data field is read: "data" alone, "data:value" or "data: value". */
    if (n < 4 || memcmp(l, "data", 4) != 0 || (n > 4 && l[4] != ':'))
        return 0;
    v = n > 4 ? l + 5 : l + n;
    vn = n > 4 ? n - 5 : 0;
    if (vn && *v == ' ') {
        v++;
        vn--;
    }
    if (p->have_data) {
        rc = reserve(&p->ev, &p->ev_cap, p->ev_len + 1 + vn, p->max_event);
        if (rc < 0)
            return rc;
        p->ev[p->ev_len++] = '\n';
    } else {
        rc = reserve(&p->ev, &p->ev_cap, vn, p->max_event);
        if (rc < 0)
            return rc;
        p->ev_len = 0;
    }
    memcpy(p->ev + p->ev_len, v, vn);
    p->ev_len += vn;
    p->ev[p->ev_len] = '\0';
    p->have_data = 1;
    return 0;
}

ssize_t httpc_sse_feed(httpc_sse_t *p, const char *data, size_t n, int *have_event)
{
    size_t i = 0;
    int rc;

    *have_event = 0;
    if (p->ready) { /* the previous event was read: the next one starts empty */
        p->ready = 0;
        p->ev_len = 0;
    }
    while (i < n) {
        const char *eol;
        size_t run;

        if (p->after_cr) {
            p->after_cr = 0;
            if (data[i] == '\n') {
                i++;
                continue;
            }
        }
        /* Copy the run of bytes up to the next line end in one go. */
        eol = memchr(data + i, '\n', n - i);
        {
            const char *cr = memchr(data + i, '\r', (eol ? (size_t)(eol - data) : n) - i);
            if (cr)
                eol = cr;
        }
        run = (eol ? (size_t)(eol - data) : n) - i;
        if (run) {
            rc = reserve(&p->line, &p->line_cap, p->line_len + run, p->max_event);
            if (rc < 0)
                return rc;
            memcpy(p->line + p->line_len, data + i, run);
            p->line_len += run;
            i += run;
        }
        if (!eol)
            break;
        p->after_cr = *eol == '\r';
        i++;
        rc = end_line(p);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            p->ready = 1;
            *have_event = 1;
            return (ssize_t)i;
        }
    }
    return (ssize_t)i;
}

/* The usual event, a single "data:" line and the blank line after it, read where it lies: at a
 * line start with nothing pending, both line ends LF and in |data|, the line within the limit.
 * Returns the bytes it takes (0: not that shape, the general path reads it). */
static size_t whole_event(httpc_sse_t *p, const char *data, size_t n, const char **ev, size_t *len)
{
    const char *eol, *v;
    size_t ln;

    if (p->line_len || p->have_data || p->after_cr || n < 7 || memcmp(data, "data:", 5) != 0)
        return 0;
    eol = memchr(data, '\n', n);
    if (!eol || (size_t)(eol - data) + 1 >= n || eol[1] != '\n')
        return 0;
    ln = (size_t)(eol - data);
    if (ln > p->max_event || memchr(data, '\r', ln))
        return 0;
    v = data + 5;
    if (v < eol && *v == ' ')
        v++;
    *ev = v;
    *len = (size_t)(eol - v);
    return ln + 2;
}

ssize_t httpc_sse_next(httpc_sse_t *p, const char *data, size_t n, const char **ev, size_t *len)
{
    size_t used;
    ssize_t rc;
    int have;

    *ev = NULL;
    *len = 0;
    if (p->ready) { /* the previous event was read: the next one starts empty */
        p->ready = 0;
        p->ev_len = 0;
    }
    used = whole_event(p, data, n, ev, len);
    if (used)
        return (ssize_t)used;
    rc = httpc_sse_feed(p, data, n, &have);
    if (rc >= 0 && have)
        *ev = httpc_sse_event(p, len);
    return rc;
}

const char *httpc_sse_event(const httpc_sse_t *p, size_t *len)
{
    *len = p->ev_len;
    return p->ev ? p->ev : "";
}
