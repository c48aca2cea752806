/* The lean client's HTTP/1.1 response parser (httpc/h1.h): a state machine fed bytes in any
 * split. Lines (status, headers, chunk sizes, trailers) are gathered into a fixed buffer whose
 * limit is checked before each copy; body bytes are never copied, they come back as spans of the
 * caller's buffer. Every byte is hostile. */
#include "httpc/h1.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
    ST_STATUS = 0, /* the status line */
    ST_HEADER,     /* header lines until the empty one */
    ST_BODY_LEN,   /* Content-Length bytes */
    ST_BODY_CLOSE, /* to the close */
    ST_CHUNK_SIZE, /* a chunk-size line */
    ST_CHUNK_DATA,
    ST_CHUNK_END, /* the CRLF after a chunk's data */
    ST_TRAILER,   /* trailer lines after the last chunk */
    ST_DONE,
    ST_ERR
};

#define EPROTO_ (-71)

static int fail(httpc_h1_parser_t *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
    p->state = ST_ERR;
    return EPROTO_;
}

void httpc_h1_parser_init(httpc_h1_parser_t *p)
{
    p->state = ST_STATUS;
    p->status = 0;
    p->keep_alive = 1;
    p->chunked = p->has_length = p->http10 = 0;
    p->length = p->left = p->seen = 0;
    p->n_headers = 0;
    p->head_bytes = 0;
    p->line_len = 0;
    p->err[0] = '\0';
}

/* Gathers a line of at most |max| bytes (its LF included). 1 when p->line holds a whole line
 * (NUL-terminated, CR LF or LF removed), 0 when |buf| ran out, <0 over the limit. */
static int gather(httpc_h1_parser_t *p, const char *buf, size_t n, size_t *used, size_t max,
                  const char *what)
{
    const char *lf = memchr(buf, '\n', n);
    size_t k = lf ? (size_t)(lf - buf) + 1 : n;

    if (k > max - p->line_len || (lf == NULL && p->line_len + k >= max))
        return fail(p, "%s over %zu bytes", what, max);
    memcpy(p->line + p->line_len, buf, k);
    p->line_len += k;
    *used += k;
    if (!lf)
        return 0;
    p->line_len--; /* the LF */
    if (p->line_len && p->line[p->line_len - 1] == '\r')
        p->line_len--;
    p->line[p->line_len] = '\0';
    return 1;
}

/* A head line may hold printable ASCII, tabs and bytes >= 0x80 (obs-text), nothing else. */
static int clean_line(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

static int status_line(httpc_h1_parser_t *p)
{
    const char *s = p->line;

    if (!clean_line(s, p->cur_len))
        return fail(p, "a control byte in the status line");
    if (p->cur_len < 12 || strncmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') ||
        s[8] != ' ' || s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' ||
        s[11] > '9' || (s[12] != ' ' && s[12] != '\0'))
        return fail(p, "not an HTTP/1.x status line: '%.40s'", s);
    p->http10 = s[7] == '0';
    p->keep_alive = !p->http10;
    p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    if (p->status == 101)
        return fail(p, "HTTP 101 (a protocol switch nobody asked for)");
    return 0;
}

static int is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Whether comma-separated |v| holds the token |tok| (case-insensitive). */
static int has_token(const char *v, const char *tok)
{
    size_t tl = strlen(tok);

    while (*v) {
        size_t n;
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        n = strcspn(v, ",");
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == tl && strncasecmp(v, tok, tl) == 0)
            return 1;
        v += strcspn(v, ",");
    }
    return 0;
}

static int header_line(httpc_h1_parser_t *p)
{
    char *s = p->line, *v, *end;
    size_t nl;

    if (!clean_line(s, p->cur_len))
        return fail(p, "a control byte in a header line");
    if (s[0] == ' ' || s[0] == '\t')
        return fail(p, "a folded header line (obsolete line folding is refused)");
    if (++p->n_headers > HTTPC_H1_MAX_HEADERS)
        return fail(p, "over %u header lines", HTTPC_H1_MAX_HEADERS);
    for (nl = 0; is_token_char((unsigned char)s[nl]); nl++)
        ;
    if (nl == 0 || s[nl] != ':')
        return fail(p, "a header line without 'name:': '%.40s'", s);
    s[nl] = '\0';
    v = s + nl + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    end = v + strlen(v);
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    if (strcasecmp(s, "Content-Length") == 0) {
        uint64_t x = 0;
        size_t d = strspn(v, "0123456789");
        if (d == 0 || v[d] != '\0' || d > 18)
            return fail(p, "Content-Length '%.30s' is not a number of at most 18 digits", v);
        for (size_t i = 0; i < d; i++)
            x = x * 10 + (uint64_t)(v[i] - '0');
        if (p->has_length && x != p->length)
            return fail(p, "two different Content-Length headers");
        p->has_length = 1;
        p->length = x;
    } else if (strcasecmp(s, "Transfer-Encoding") == 0) {
        if (strcasecmp(v, "chunked") != 0)
            return fail(p, "Transfer-Encoding '%.40s' (only chunked is taken)", v);
        p->chunked = 1;
    } else if (strcasecmp(s, "Connection") == 0) {
        if (has_token(v, "close"))
            p->keep_alive = 0;
        else if (has_token(v, "keep-alive") && p->http10)
            p->keep_alive = 1;
    }
    return 0;
}

/* After the empty line: the body's framing, or the next head after a 1xx. */
static int head_done(httpc_h1_parser_t *p)
{
    if (p->status < 200) { /* 100 Continue and the like: the real answer follows */
        p->state = ST_STATUS;
        p->n_headers = 0;
        p->chunked = p->has_length = 0;
        return HTTPC_H1_MORE;
    }
    if (p->chunked && p->has_length)
        return fail(p, "both Transfer-Encoding: chunked and Content-Length");
    if (p->status == 204 || p->status == 304) {
        p->state = ST_DONE;
    } else if (p->chunked) {
        p->state = ST_CHUNK_SIZE;
    } else if (p->has_length) {
        p->left = p->length;
        p->state = p->length ? ST_BODY_LEN : ST_DONE;
    } else {
        p->keep_alive = 0; /* the body runs to the close */
        p->state = ST_BODY_CLOSE;
    }
    return HTTPC_H1_HEAD;
}

static int chunk_size(httpc_h1_parser_t *p)
{
    const char *s = p->line;
    uint64_t x = 0;
    size_t d = 0;

    for (; s[d]; d++) {
        int v;
        char c = s[d];
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else
            break;
        if (d >= 15)
            return fail(p, "a chunk size of over 15 hex digits");
        x = x * 16 + (uint64_t)v;
    }
    if (d == 0 || (s[d] != '\0' && s[d] != ';' && s[d] != ' ' && s[d] != '\t') ||
        !clean_line(s, p->cur_len))
        return fail(p, "a bad chunk-size line '%.30s'", s);
    p->left = x;
    p->state = x ? ST_CHUNK_DATA : ST_TRAILER;
    return 0;
}

/* The usual chunk boundary read where it lies, nothing gathered: the CRLF after a chunk's data,
 * or a chunk-size line of 1..15 hex digits and CRLF; 1 when taken (the same outcome as the
 * general path: gather(), chunk_size()), 0 for anything else, which the general path reads. */
static int chunk_line_in_place(httpc_h1_parser_t *p, const char *b, size_t rest, size_t *used)
{
    uint64_t x = 0;
    size_t d = 0;

    if (p->state == ST_CHUNK_END) {
        if (rest < 2 || b[0] != '\r' || b[1] != '\n')
            return 0;
        *used += 2;
        p->seen += 2;
        p->state = ST_CHUNK_SIZE;
        return 1;
    }
    if (p->state != ST_CHUNK_SIZE)
        return 0;
    for (; d < rest && d < 15; d++) {
        char c = b[d];
        int v = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (v < 0)
            break;
        x = x * 16 + (uint64_t)v;
    }
    if (d == 0 || rest - d < 2 || b[d] != '\r' || b[d + 1] != '\n')
        return 0;
    *used += d + 2;
    p->seen += d + 2;
    p->left = x;
    p->state = x ? ST_CHUNK_DATA : ST_TRAILER;
    return 1;
}

int httpc_h1_parse(httpc_h1_parser_t *p, const char *buf, size_t n, size_t *used, const char **data,
                   size_t *len)
{
    int rc;

    *used = 0;
    *data = NULL;
    *len = 0;
    for (;;) {
        const char *b = buf + *used;
        size_t rest = n - *used;
        switch (p->state) {
        case ST_ERR:
            return EPROTO_;
        case ST_DONE:
            return HTTPC_H1_END;
        case ST_BODY_LEN:
        case ST_CHUNK_DATA:
        case ST_BODY_CLOSE: {
            size_t k = rest;
            if (rest == 0)
                return HTTPC_H1_MORE;
            if (p->state != ST_BODY_CLOSE && k > p->left)
                k = (size_t)p->left;
            *data = b;
            *len = k;
            *used += k;
            p->seen += k;
            if (p->state != ST_BODY_CLOSE) {
                p->left -= k;
                if (p->left == 0)
                    p->state = p->state == ST_BODY_LEN ? ST_DONE : ST_CHUNK_END;
            }
            return HTTPC_H1_DATA;
        }
        default:
            break;
        }
        /* a line-based state */
        if (rest == 0)
            return HTTPC_H1_MORE;
        if (p->line_len == 0 && chunk_line_in_place(p, b, rest, used))
            continue;
        {
            size_t before = *used, max = HTTPC_H1_MAX_LINE;
            int in_head = p->state == ST_STATUS || p->state == ST_HEADER || p->state == ST_TRAILER;
            const char *what = p->state == ST_STATUS ? "the status line" : "a header line";
            if (p->state == ST_CHUNK_SIZE)
                max = HTTPC_H1_MAX_CHUNK_LINE, what = "a chunk-size line";
            else if (p->state == ST_CHUNK_END)
                max = 2, what = "the line end after a chunk's data";
            if (in_head && HTTPC_H1_MAX_HEAD - p->head_bytes < max)
                max = HTTPC_H1_MAX_HEAD - p->head_bytes;
            int st = p->state;
            rc = gather(p, b, rest, used, max, what);
            p->seen += *used - before;
            if (rc < 0 && st == ST_CHUNK_END)
                return fail(p, "chunk data longer than its size");
            if (rc < 0 && max < HTTPC_H1_MAX_LINE && in_head)
                return fail(p, "the head over %u bytes", HTTPC_H1_MAX_HEAD);
            if (rc <= 0)
                return rc < 0 ? rc : HTTPC_H1_MORE;
            if (in_head)
                p->head_bytes += p->line_len + 1;
        }
        p->cur_len = p->line_len; /* the line being handled */
        p->line_len = 0;          /* the next one starts empty */
        switch (p->state) {
        case ST_STATUS:
            if (status_line(p) < 0)
                return EPROTO_;
            p->state = ST_HEADER;
            break;
        case ST_HEADER:
            if (p->cur_len == 0) {
                rc = head_done(p);
                if (rc != HTTPC_H1_MORE)
                    return rc;
                break;
            }
            if (header_line(p) < 0)
                return EPROTO_;
            break;
        case ST_CHUNK_SIZE:
            if (chunk_size(p) < 0)
                return EPROTO_;
            break;
        case ST_CHUNK_END:
            if (p->cur_len != 0)
                return fail(p, "chunk data longer than its size");
            p->state = ST_CHUNK_SIZE;
            break;
        case ST_TRAILER:
            if (p->cur_len == 0) {
                p->state = ST_DONE;
                return HTTPC_H1_END;
            }
            if (!clean_line(p->line, p->cur_len) || ++p->n_headers > HTTPC_H1_MAX_HEADERS)
                return fail(p, "a bad trailer line, or over %u header lines", HTTPC_H1_MAX_HEADERS);
            break;
        default:
            return fail(p, "parser state %d", p->state);
        }
    }
}

int httpc_h1_parse_eof(httpc_h1_parser_t *p)
{
    switch (p->state) {
    case ST_BODY_CLOSE:
    case ST_DONE:
        p->state = ST_DONE;
        return HTTPC_H1_END;
    case ST_ERR:
        return EPROTO_;
    case ST_STATUS:
        if (p->seen == 0)
            return fail(p, "closed before answering");
        return fail(p, "closed in the status line");
    case ST_HEADER:
        return fail(p, "closed in the head (HTTP %d)", p->status);
    case ST_BODY_LEN:
        return fail(p, "closed with %llu of %llu body bytes still to come",
                    (unsigned long long)p->left, (unsigned long long)p->length);
    default:
        return fail(p, "closed mid-way through the chunked body");
    }
}
