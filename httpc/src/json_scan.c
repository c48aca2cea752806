/* The fast path of an engine event's JSON (see json_scan.h): iterative, bounded depth, no
 * allocation, every byte checked against the grammar before a callback sees it. */
#include "json_scan.h"

#include <string.h>

typedef const unsigned char *cp_t;

static cp_t skip_ws(cp_t p, cp_t e)
{
    /* Engines send compact JSON: the first test ends almost every call. */
    while (p < e && *p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static int is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* Bytes a string holds as they are: not a control byte (0x00-0x1f), '"' (0x22), '\\' (0x5c). */
static const unsigned char plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* A string's body from just after its opening quote: *close is its closing quote. 0: no escape,
 * 1: valid escapes, -1: unusual (a control byte, a bad or NUL escape, no closing quote). */
static int scan_string(cp_t p, cp_t e, cp_t *close)
{
    int esc = 0;

    while (p < e) {
        unsigned char c;

        while (e - p >= 4 && plain[p[0]] && plain[p[1]] && plain[p[2]] && plain[p[3]])
            p += 4;
        while (p < e && plain[*p])
            p++;
        if (p == e)
            break;
        c = *p;
        if (c == '"') {
            *close = p;
            return esc;
        }
        if (c != '\\')
            return -1; /* a control byte */
        if (e - p < 2)
            return -1;
        c = p[1];
        if (c == 'u') {
            if (e - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5]))
                return -1;
            if (p[2] == '0' && p[3] == '0' && p[4] == '0' && p[5] == '0')
                return -1;
            p += 6;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                   c == 'r' || c == 't') {
            p += 2;
        } else {
            return -1;
        }
        esc = 1;
    }
    return -1;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?: the byte after it, or NULL. */
static cp_t scan_number(cp_t p, cp_t e)
{
    cp_t d;

    if (p < e && *p == '-')
        p++;
    if (p >= e)
        return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    } else {
        return NULL;
    }
    if (p < e && *p == '.') {
        d = ++p;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return NULL;
    }
    return p;
}

static int literal(cp_t p, cp_t e, const char *lit, size_t n)
{
    size_t i;

    if ((size_t)(e - p) < n)
        return 0;
    for (i = 0; i < n; i++)
        if (p[i] != (unsigned char)lit[i])
            return 0;
    return 1;
}

int httpc_json_scan(const char *data, size_t len, const yajl_callbacks *cb,
                    httpc_jscan_escaped_fn escaped, void *ctx)
{
    return httpc_json_scan_at(data, len, cb, escaped, ctx, NULL, NULL);
}

int httpc_json_scan_at(const char *data, size_t len, const yajl_callbacks *cb,
                       httpc_jscan_escaped_fn escaped, void *ctx, const httpc_jscan_mark_t *from,
                       int (*mark)(void *ctx, const httpc_jscan_mark_t *at,
                                   httpc_jscan_mark_t *ahead))
{
    cp_t p = (cp_t)data, e = p + len, q;
    unsigned char stack[HTTPC_JSCAN_DEPTH]; /* '{' or '[' of each open container */
    unsigned depth = 0;
    int k;

    if (from) {
        if (from->off > len || from->depth == 0 || from->depth > HTTPC_JSCAN_MARK_DEPTH)
            return HTTPC_JSCAN_UNUSUAL;
        depth = from->depth;
        memcpy(stack, from->stack, depth);
        p += from->off;
    }

value:
    p = skip_ws(p, e);
    if (p >= e)
        return HTTPC_JSCAN_UNUSUAL;
    switch (*p) {
    case '{':
    case '[':
        if (depth == HTTPC_JSCAN_DEPTH)
            return HTTPC_JSCAN_UNUSUAL;
        if (!(*p == '{' ? cb->yajl_start_map(ctx) : cb->yajl_start_array(ctx)))
            return HTTPC_JSCAN_CANCEL;
        stack[depth++] = *p;
        p = skip_ws(p + 1, e);
        if (p < e && *p == (stack[depth - 1] == '{' ? '}' : ']'))
            goto close;
        if (stack[depth - 1] == '{')
            goto key;
        goto value;
    case '"':
        k = scan_string(p + 1, e, &q);
        if (k < 0)
            return HTTPC_JSCAN_UNUSUAL;
        if (k == 0) {
            if (!cb->yajl_string(ctx, p + 1, (size_t)(q - p - 1)))
                return HTTPC_JSCAN_CANCEL;
        } else {
            k = escaped(ctx, p + 1, (size_t)(q - p - 1));
            if (k < 0)
                return HTTPC_JSCAN_UNUSUAL;
            if (k == 0)
                return HTTPC_JSCAN_CANCEL;
        }
        p = q + 1;
        goto after;
    case 't':
    case 'f':
        k = *p == 't';
        if (!literal(p, e, k ? "true" : "false", k ? 4 : 5))
            return HTTPC_JSCAN_UNUSUAL;
        if (!cb->yajl_boolean(ctx, k))
            return HTTPC_JSCAN_CANCEL;
        p += k ? 4 : 5;
        goto after;
    case 'n':
        if (!literal(p, e, "null", 4))
            return HTTPC_JSCAN_UNUSUAL;
        if (!cb->yajl_null(ctx))
            return HTTPC_JSCAN_CANCEL;
        p += 4;
        goto after;
    default:
        q = scan_number(p, e);
        if (!q)
            return HTTPC_JSCAN_UNUSUAL;
        if (!cb->yajl_number(ctx, (const char *)p, (size_t)(q - p)))
            return HTTPC_JSCAN_CANCEL;
        p = q;
        goto after;
    }

key:
    if (p >= e || *p != '"' || scan_string(p + 1, e, &q) != 0)
        return HTTPC_JSCAN_UNUSUAL;
    if (!cb->yajl_map_key(ctx, p + 1, (size_t)(q - p - 1)))
        return HTTPC_JSCAN_CANCEL;
    p = skip_ws(q + 1, e);
    if (p >= e || *p != ':')
        return HTTPC_JSCAN_UNUSUAL;
    p++;
    if (mark && depth <= HTTPC_JSCAN_MARK_DEPTH) {
        httpc_jscan_mark_t m, ahead;
        m.off = (size_t)(p - (cp_t)data);
        m.depth = depth;
        memcpy(m.stack, stack, depth);
        if (mark(ctx, &m, &ahead)) {
            if (ahead.off > (size_t)(e - p) || ahead.depth == 0 ||
                ahead.depth > HTTPC_JSCAN_MARK_DEPTH)
                return HTTPC_JSCAN_UNUSUAL;
            p += ahead.off;
            depth = ahead.depth;
            memcpy(stack, ahead.stack, depth);
        }
    }
    goto value;

close: /* *p closes the innermost container */
    depth--;
    if (!(*p == '}' ? cb->yajl_end_map(ctx) : cb->yajl_end_array(ctx)))
        return HTTPC_JSCAN_CANCEL;
    p++;
    /* fall through */

after:
    p = skip_ws(p, e);
    if (depth == 0)
        return p == e ? HTTPC_JSCAN_OK : HTTPC_JSCAN_UNUSUAL;
    if (p >= e)
        return HTTPC_JSCAN_UNUSUAL;
    if (*p == ',') {
        p = skip_ws(p + 1, e);
        if (stack[depth - 1] == '{')
            goto key;
        goto value;
    }
    if (*p == (stack[depth - 1] == '{' ? '}' : ']'))
        goto close;
    return HTTPC_JSCAN_UNUSUAL;
}
