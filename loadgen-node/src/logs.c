#include "logs.h"

#include "cmn/clock.h"
#include "cmn/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void lg__fmt_g(char *buf, size_t len, double v)
{
    snprintf(buf, len, "%g", v);
}

void lg__fmt_fixed(char *buf, size_t len, double v, int prec)
{
    snprintf(buf, len, "%.*f", prec, v);
}

/* A JSON string literal: quotes, backslashes and control characters escaped; other bytes (UTF-8
 * included) pass through. */
static void sb_json_str(cmn_sbuf_t *b, const char *s)
{
    /* The characters JSON writes as a backslash and a letter, and those letters. */
    static const char plain[] = "\"\\\b\f\n\r\t", letter[] = "\"\\bfnrt";
    static const char hex[] = "0123456789abcdef";
    char esc[8];

    cmn_sbuf_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *named = strchr(plain, c);

        if (named) {
            esc[0] = '\\';
            esc[1] = letter[named - plain];
            cmn_sbuf_add(b, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            cmn_sbuf_add(b, esc, 6);
        } else {
            cmn_sbuf_add(b, (const char *)&c, 1);
        }
    }
    cmn_sbuf_add(b, "\"", 1);
}

/* ---- detail log ---------------------------------------------------------------------------- */

int lg__dlog_open(lg__dlog_t *d, const char *path, int copy_stdout, uint64_t origin_ns,
                  cmn_errbuf_t *eb)
{
    memset(d, 0, sizeof(*d));
    d->f = fopen(path, "w");
    if (!d->f)
        return cmn_errf(eb, -errno, "cannot create the detail log %s: %s", path, strerror(errno));
    pthread_mutex_init(&d->mu, NULL);
    d->copy_stdout = copy_stdout;
    d->origin_ns = origin_ns;
    d->pid = (long)getpid();
    atomic_init(&d->errors, 0);
    atomic_init(&d->warnings, 0);
    return 0;
}

int lg__dlog_close(lg__dlog_t *d)
{
    int rc = 0;

    if (!d->f)
        return 0;
    if (ferror(d->f))
        rc = -EIO;
    if (fclose(d->f) != 0 && rc == 0)
        rc = -errno;
    d->f = NULL;
    pthread_mutex_destroy(&d->mu);
    return rc;
}

void lg__dlog_json(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *json,
                   const char *file, int line)
{
    uint64_t t;
    cmn_sbuf_t b = {0};
    char meta[256];

    if (!d || !d->f)
        return;
    if (lvl == LG__ERR)
        atomic_fetch_add(&d->errors, 1);
    else if (lvl == LG__WARN)
        atomic_fetch_add(&d->warnings, 1);
    t = cmn_now_ns() - d->origin_ns;
    cmn_sbuf_puts(&b, ":::MLLOG {\"key\": ");
    sb_json_str(&b, key);
    cmn_sbuf_puts(&b, ", \"value\": ");
    cmn_sbuf_puts(&b, json);
    snprintf(meta, sizeof(meta),
             ", \"time_ms\": %" PRIu64 ".%06" PRIu64
             ", \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", "
             "\"metadata\": {\"is_error\": %s, \"is_warning\": %s, \"file\": ",
             t / 1000000u, t % 1000000u, lvl == LG__ERR ? "true" : "false",
             lvl == LG__WARN ? "true" : "false");
    cmn_sbuf_puts(&b, meta);
    sb_json_str(&b, file);
    snprintf(meta, sizeof(meta), ", \"line_no\": %d, \"pid\": %ld, \"tid\": %ld}}\n", line, d->pid,
             (long)syscall(SYS_gettid));
    cmn_sbuf_puts(&b, meta);
    if (b.oom) {
        free(b.p);
        return;
    }
    pthread_mutex_lock(&d->mu);
    fwrite(b.p, 1, b.len, d->f);
    if (lvl == LG__ERR)
        fflush(d->f);
    if (d->copy_stdout)
        fwrite(b.p, 1, b.len, stdout);
    pthread_mutex_unlock(&d->mu);
    free(b.p);
}

void lg__dlog_str(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *s, const char *file,
                  int line)
{
    cmn_sbuf_t b = {0};

    sb_json_str(&b, s ? s : "");
    if (!b.oom)
        lg__dlog_json(d, lvl, key, b.p, file, line);
    free(b.p);
}

void lg__dlog_strf(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *file, int line,
                   const char *fmt, ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    lg__dlog_str(d, lvl, key, text, file, line);
}

void lg__dlog_u64(lg__dlog_t *d, const char *key, uint64_t v, const char *file, int line)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    lg__dlog_json(d, LG__INFO, key, buf, file, line);
}

void lg__dlog_i64(lg__dlog_t *d, const char *key, int64_t v, const char *file, int line)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%" PRId64, v);
    lg__dlog_json(d, LG__INFO, key, buf, file, line);
}

void lg__dlog_f64(lg__dlog_t *d, const char *key, double v, const char *file, int line)
{
    char buf[64];

    /* JSON has no inf or nan; the official writer would print "inf" and break the line. */
    if (!isfinite(v))
        snprintf(buf, sizeof(buf), "null");
    else
        lg__fmt_g(buf, sizeof(buf), v);
    lg__dlog_json(d, LG__INFO, key, buf, file, line);
}

void lg__dlog_bool(lg__dlog_t *d, const char *key, int v, const char *file, int line)
{
    lg__dlog_json(d, LG__INFO, key, v ? "true" : "false", file, line);
}

void lg__dlog_u32_list(lg__dlog_t *d, const char *key, const uint32_t *v, size_t n,
                       const char *file, int line)
{
    cmn_sbuf_t b = {0};
    char num[16];
    size_t i;

    cmn_sbuf_add(&b, "[", 1);
    for (i = 0; i < n; i++) {
        int len = snprintf(num, sizeof(num), i ? ",%u" : "%u", v[i]);

        cmn_sbuf_add(&b, num, (size_t)len);
    }
    cmn_sbuf_add(&b, "]", 1);
    if (!b.oom)
        lg__dlog_json(d, LG__INFO, key, b.p, file, line);
    free(b.p);
}

/* ---- accuracy log -------------------------------------------------------------------------- */

int lg__acclog_open(lg__acclog_t *a, const char *path, cmn_errbuf_t *eb)
{
    memset(a, 0, sizeof(*a));
    a->f = fopen(path, "w");
    if (!a->f)
        return cmn_errf(eb, -errno, "cannot create the accuracy log %s: %s", path, strerror(errno));
    /* Responses can be large (3D-UNet masks); a big buffer keeps the writes few. */
    setvbuf(a->f, NULL, _IOFBF, 1 << 20);
    pthread_mutex_init(&a->mu, NULL);
    fputs("[", a->f);
    return 0;
}

int lg__acclog_close(lg__acclog_t *a)
{
    int rc = 0;

    if (!a->f)
        return 0;
    fputs("\n]\n", a->f);
    if (ferror(a->f))
        rc = -EIO;
    if (fclose(a->f) != 0 && rc == 0)
        rc = -errno;
    a->f = NULL;
    free(a->hexbuf);
    a->hexbuf = NULL;
    pthread_mutex_destroy(&a->mu);
    return rc;
}

static void write_hex(lg__acclog_t *a, const void *data, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    const uint8_t *p = data;
    size_t done = 0;

    fputc('"', a->f);
    if (!a->hexbuf) {
        a->hexcap = 1 << 16;
        a->hexbuf = malloc(a->hexcap);
    }
    while (done < size && a->hexbuf) {
        size_t n = size - done, i;

        if (n > a->hexcap / 2)
            n = a->hexcap / 2;
        for (i = 0; i < n; i++) {
            a->hexbuf[2 * i] = hex[p[done + i] >> 4];
            a->hexbuf[2 * i + 1] = hex[p[done + i] & 15];
        }
        fwrite(a->hexbuf, 1, 2 * n, a->f);
        done += n;
    }
    fputc('"', a->f);
}

void lg__acclog_write(lg__acclog_t *a, uint64_t seq, uint64_t qsl_idx, const void *data,
                      size_t size, int token_mode, const void *tok, size_t tok_size,
                      int64_t n_tokens)
{
    if (!a || !a->f)
        return;
    pthread_mutex_lock(&a->mu);
    fputs(a->need_comma ? ",\n{ " : "\n{ ", a->f);
    fprintf(a->f, "\"seq_id\" : %" PRIu64 ", \"qsl_idx\" : %" PRIu64 ", \"data\" : ", seq, qsl_idx);
    write_hex(a, data, data ? size : 0);
    if (token_mode == 2) {
        fputs(", \"token_data\" : ", a->f);
        write_hex(a, tok, tok ? tok_size : 0);
    }
    if (token_mode >= 1)
        fprintf(a->f, ", \"token_count\" : %" PRId64, n_tokens);
    fputs(" }", a->f);
    a->need_comma = 1;
    pthread_mutex_unlock(&a->mu);
}
