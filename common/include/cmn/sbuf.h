/* A growing text buffer for text built in pieces (a Prometheus page, a JSON line, an HTTP body):
 * an append that runs out of memory sets |oom| and every later one does nothing, so the caller
 * checks once, at the end. Zero-initialised it is empty (p NULL); after any append p holds len
 * bytes and a NUL. The caller frees p. */
#ifndef CMN_SBUF_H
#define CMN_SBUF_H

#include <stddef.h>

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} cmn_sbuf_t;

/* Room for |extra| more bytes and the NUL after them: 0, or -1 with oom set (also when oom was
 * already set). Capacities double from 256 bytes. */
int cmn_sbuf_reserve(cmn_sbuf_t *b, size_t extra);

/* Appends |n| bytes of |s|, the string |s|, or printf's text. */
void cmn_sbuf_add(cmn_sbuf_t *b, const char *s, size_t n);
void cmn_sbuf_puts(cmn_sbuf_t *b, const char *s);
void cmn_sbuf_printf(cmn_sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
