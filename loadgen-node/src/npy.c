#include "npy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A cursor over the header's Python literal. The first error sticks. */
typedef struct {
    const char *p, *end;
    cmn_errbuf_t *eb;
    int err;
    int depth;
} cur_t;

static int fail(cur_t *c, const char *what)
{
    if (!c->err)
        c->err = cmn_errf(c->eb, CMN_EFORMAT, "bad .npy header: %s", what);
    return c->err;
}

static void skip_ws(cur_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int accept(cur_t *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string (single or double quotes, backslash escapes kept as is) into buf. */
static int parse_string(cur_t *c, char *buf, size_t len)
{
    char q;
    size_t n = 0;

    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return fail(c, "expected a string");
    q = *c->p++;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' && c->p + 1 < c->end)
            c->p++;
        if (n + 1 < len)
            buf[n++] = *c->p;
        c->p++;
    }
    if (c->p >= c->end)
        return fail(c, "unterminated string");
    c->p++;
    buf[n] = '\0';
    return 0;
}

static int parse_uint(cur_t *c, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;

    skip_ws(c);
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        unsigned d = (unsigned)(*c->p - '0');

        if (v > (UINT64_MAX - d) / 10)
            return fail(c, "a dimension overflows 64 bits");
        v = v * 10 + d;
        c->p++;
        digits++;
    }
    /* Python 2 era headers write long integers as 3L. */
    if (digits && c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
        c->p++;
    if (!digits)
        return fail(c, "expected a non-negative integer");
    *out = v;
    return 0;
}

static int skip_value(cur_t *c);

static int skip_seq(cur_t *c, char close)
{
    if (++c->depth > 16)
        return fail(c, "nested too deeply");
    while (!c->err) {
        if (accept(c, close))
            break;
        if (skip_value(c))
            break;
        if (!accept(c, ',')) {
            if (!accept(c, close))
                fail(c, "expected ',' or a closing bracket");
            break;
        }
    }
    c->depth--;
    return c->err;
}

static int skip_value(cur_t *c)
{
    char tmp[256];

    skip_ws(c);
    if (c->p >= c->end)
        return fail(c, "truncated");
    if (*c->p == '\'' || *c->p == '"')
        return parse_string(c, tmp, sizeof(tmp));
    if (accept(c, '('))
        return skip_seq(c, ')');
    if (accept(c, '['))
        return skip_seq(c, ']');
    if (accept(c, '{')) {
        if (++c->depth > 16)
            return fail(c, "nested too deeply");
        while (!c->err && !accept(c, '}')) {
            if (skip_value(c) || !accept(c, ':'))
                return fail(c, "bad dictionary");
            if (skip_value(c))
                return c->err;
            if (!accept(c, ',') && !accept(c, '}'))
                return fail(c, "bad dictionary");
            if (c->p[-1] == '}')
                break;
        }
        c->depth--;
        return c->err;
    }
    /* A bare word or number: True, False, None, 3, -1.5 */
    while (c->p < c->end &&
           (isalnum((unsigned char)*c->p) || *c->p == '.' || *c->p == '-' || *c->p == '+'))
        c->p++;
    return 0;
}

/* Bytes per element of a simple dtype string such as '<f4', '|u1', '<U10', '<M8[ns]'. */
static int simple_itemsize(cur_t *c, const char *d, uint64_t *out)
{
    uint64_t n = 0;
    const char *s = d;
    char kind;
    int digits = 0;

    if (*s == '<' || *s == '>' || *s == '|' || *s == '=')
        s++;
    kind = *s++;
    if (kind == '?' && *s == '\0') {
        *out = 1;
        return 0;
    }
    if (kind == 'O')
        return fail(c, "object arrays hold Python pointers, not sample data");
    while (isdigit((unsigned char)*s)) {
        if (n > 1000000)
            return fail(c, "an element size is implausibly large");
        n = n * 10 + (uint64_t)(*s++ - '0');
        digits++;
    }
    if (*s == '[') /* datetime unit, e.g. [ns] */
        s += strcspn(s, "]") + (strchr(s, ']') ? 1 : 0);
    if (*s != '\0' || !digits)
        goto bad;
    switch (kind) {
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c':
    case 'V':
    case 'S':
    case 'a':
    case 'm':
    case 'M':
        *out = n;
        return n ? 0 : fail(c, "a zero-size dtype");
    case 'U':
        *out = 4 * n;
        return n ? 0 : fail(c, "a zero-size dtype");
    default:
        break;
    }
bad:
    if (!c->err)
        c->err = cmn_errf(c->eb, CMN_EFORMAT, "bad .npy header: unknown dtype '%s'", d);
    return c->err;
}

static int parse_descr(cur_t *c, uint64_t *itemsize, char *text, size_t len);

/* A structured dtype: [('name', descr[, shape]), ...]; the fields are packed back to back (an
 * aligned dtype lists its padding as fields of its own). */
static int parse_struct(cur_t *c, uint64_t *itemsize)
{
    uint64_t total = 0;
    char name[256];

    if (++c->depth > 8)
        return fail(c, "structured dtype nested too deeply");
    while (!c->err && !accept(c, ']')) {
        uint64_t size = 0, count = 1, dim;

        if (!accept(c, '('))
            return fail(c, "expected a field tuple in the structured dtype");
        skip_ws(c);
        if (c->p < c->end && *c->p == '(') {
            if (skip_value(c)) /* (title, name) */
                return c->err;
        } else if (parse_string(c, name, sizeof(name))) {
            return c->err;
        }
        if (!accept(c, ','))
            return fail(c, "expected ',' in a field tuple");
        if (parse_descr(c, &size, NULL, 0))
            return c->err;
        if (accept(c, ',')) {
            if (accept(c, '(')) {
                while (!c->err && !accept(c, ')')) {
                    if (parse_uint(c, &dim))
                        return c->err;
                    if (dim && count > UINT64_MAX / dim)
                        return fail(c, "a field shape overflows");
                    count *= dim;
                    accept(c, ',');
                }
            } else if (parse_uint(c, &count)) {
                return c->err;
            }
        }
        if (!accept(c, ')'))
            return fail(c, "expected ')' after a field");
        if (count && size > UINT64_MAX / count)
            return fail(c, "a field size overflows");
        if (total > UINT64_MAX - size * count)
            return fail(c, "the structured dtype size overflows");
        total += size * count;
        accept(c, ',');
    }
    c->depth--;
    if (total == 0 && !c->err)
        return fail(c, "a zero-size structured dtype");
    *itemsize = total;
    return c->err;
}

static int parse_descr(cur_t *c, uint64_t *itemsize, char *text, size_t len)
{
    char d[64];

    skip_ws(c);
    if (accept(c, '[')) {
        if (text)
            snprintf(text, len, "[structured]");
        return parse_struct(c, itemsize);
    }
    if (parse_string(c, d, sizeof(d)))
        return c->err;
    if (text)
        snprintf(text, len, "%s", d);
    return simple_itemsize(c, d, itemsize);
}

long lg__npy_header_size(const uint8_t *p, size_t n, cmn_errbuf_t *eb)
{
    uint64_t hlen;

    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return cmn_errf(eb, CMN_EFORMAT, "not a NumPy .npy file (no \\x93NUMPY magic)");
    if (p[6] < 1 || p[6] > 3)
        return cmn_errf(eb, CMN_EFORMAT, ".npy format version %u.%u is not supported (1 to 3 are)",
                        p[6], p[7]);
    if (p[6] == 1)
        return (long)(10u + ((unsigned)p[8] | (unsigned)p[9] << 8));
    if (n < 12)
        return 12;
    hlen = (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
    if (hlen > LG_NPY_MAX_HEADER)
        return cmn_errf(eb, CMN_EFORMAT, ".npy header of %llu bytes is implausible (limit %u)",
                        (unsigned long long)hlen, LG_NPY_MAX_HEADER);
    return (long)(12u + hlen);
}

uint64_t lg__npy_count(const lg__npy_t *h, unsigned from)
{
    uint64_t n = 1;
    unsigned i;

    for (i = from; i < h->ndim; i++) {
        if (h->shape[i] && n > UINT64_MAX / h->shape[i])
            return UINT64_MAX;
        n *= h->shape[i];
    }
    return n;
}

int lg__npy_parse(const uint8_t *p, size_t n, lg__npy_t *out, cmn_errbuf_t *eb)
{
    long total = lg__npy_header_size(p, n, eb);
    cur_t c;
    char key[64];
    int have_descr = 0, have_order = 0, have_shape = 0;
    unsigned start;

    if (total < 0)
        return (int)total;
    if ((size_t)total > n || (p[6] >= 2 && n < 12))
        return cmn_errf(eb, CMN_EFORMAT, ".npy header truncated (%zu of %ld bytes)", n, total);
    memset(out, 0, sizeof(*out));
    out->major = p[6];
    out->minor = p[7];
    out->data_offset = (uint64_t)total;
    start = p[6] == 1 ? 10u : 12u;
    c.p = (const char *)p + start;
    c.end = (const char *)p + total;
    c.eb = eb;
    c.err = 0;
    c.depth = 0;

    if (!accept(&c, '{'))
        return fail(&c, "the header is not a dictionary");
    while (!c.err && !accept(&c, '}')) {
        if (parse_string(&c, key, sizeof(key)) || !accept(&c, ':'))
            return fail(&c, "expected 'key': value");
        /* A key given twice would leave the earlier value half-overwritten (two shapes would
         * concatenate): Python's dict keeps the last, a reader that is not Python refuses. */
        if ((strcmp(key, "descr") == 0 && have_descr) ||
            (strcmp(key, "fortran_order") == 0 && have_order) ||
            (strcmp(key, "shape") == 0 && have_shape))
            return fail(&c, "a key appears twice in the header");
        if (strcmp(key, "descr") == 0) {
            if (parse_descr(&c, &out->itemsize, out->descr, sizeof(out->descr)))
                return c.err;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                out->fortran_order = 1;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                c.p += 5;
            } else {
                return fail(&c, "fortran_order is not True or False");
            }
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (!accept(&c, '('))
                return fail(&c, "shape is not a tuple");
            while (!c.err && !accept(&c, ')')) {
                if (out->ndim == LG_NPY_MAX_DIMS)
                    return fail(&c, "more than 32 dimensions");
                if (parse_uint(&c, &out->shape[out->ndim++]))
                    return c.err;
                if (!accept(&c, ',') && !accept(&c, ')'))
                    return fail(&c, "bad shape tuple");
                if (c.p[-1] == ')')
                    break;
            }
            have_shape = 1;
        } else if (skip_value(&c)) {
            return c.err;
        }
        if (c.err)
            return c.err;
        if (!accept(&c, ',')) {
            if (!accept(&c, '}'))
                return fail(&c, "expected ',' or '}'");
            break;
        }
    }
    if (c.err)
        return c.err;
    if (!have_descr || !have_order || !have_shape)
        return cmn_errf(eb, CMN_EFORMAT, "bad .npy header: missing %s",
                        !have_descr   ? "'descr'"
                        : !have_order ? "'fortran_order'"
                                      : "'shape'");
    return 0;
}
