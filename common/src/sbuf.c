/* The growing text buffer (cmn/sbuf.h). */
#include "cmn/sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmn_sbuf_reserve(cmn_sbuf_t *b, size_t extra)
{
    size_t cap;
    char *np;

    if (b->oom)
        return -1;
    if (extra > SIZE_MAX / 2 - b->len - 1) {
        b->oom = 1;
        return -1;
    }
    if (b->len + extra + 1 <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

void cmn_sbuf_add(cmn_sbuf_t *b, const char *s, size_t n)
{
    if (cmn_sbuf_reserve(b, n) < 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void cmn_sbuf_puts(cmn_sbuf_t *b, const char *s)
{
    cmn_sbuf_add(b, s, strlen(s));
}

void cmn_sbuf_printf(cmn_sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    /* Into the room there is; when the text is longer, once more into room for all of it. */
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        size_t room = b->cap - b->len;

        va_start(ap, fmt);
        n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        if (cmn_sbuf_reserve(b, (size_t)n) < 0)
            return;
    }
}
