/* The three official log files.
 *
 * Detail log: one `:::MLLOG {json}` line per event, with the official keys, layout and number
 * formats (doubles as C++'s default ostream, 6 significant digits; booleans true/false). Unlike
 * the official writer, every string is JSON-escaped and a non-finite double is written as null,
 * so every line parses. Thread-safe (a mutex; the lines are rare except for errors, which are
 * rate-limited by the caller).
 *
 * Accuracy log: the official JSON array of {seq_id, qsl_idx, data[, token_data][, token_count]}
 * with UPPERCASE hex. Thread-safe; entries are written from the completion path.
 *
 * Summary: plain text written by the issue thread at the end of a performance series. */
#ifndef LG_LOGS_H
#define LG_LOGS_H

#include "cmn/err.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __FILE_NAME__
#    define LG__FILE __FILE_NAME__
#else
#    define LG__FILE __FILE__
#endif

typedef enum { LG__INFO = 0, LG__WARN = 1, LG__ERR = 2 } lg__level_t;

typedef struct {
    FILE *f;
    int copy_stdout;
    pthread_mutex_t mu;
    uint64_t origin_ns;
    long pid;
    atomic_uint_fast64_t errors, warnings;
} lg__dlog_t;

int lg__dlog_open(lg__dlog_t *d, const char *path, int copy_stdout, uint64_t origin_ns,
                  cmn_errbuf_t *eb);
/* Returns 0 or a negated errno when the file could not be written completely. */
int lg__dlog_close(lg__dlog_t *d);

/* Writes one line whose value is the JSON text |json| (already valid JSON). */
void lg__dlog_json(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *json,
                   const char *file, int line);
void lg__dlog_str(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *s, const char *file,
                  int line);
void lg__dlog_strf(lg__dlog_t *d, lg__level_t lvl, const char *key, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void lg__dlog_u64(lg__dlog_t *d, const char *key, uint64_t v, const char *file, int line);
void lg__dlog_i64(lg__dlog_t *d, const char *key, int64_t v, const char *file, int line);
void lg__dlog_f64(lg__dlog_t *d, const char *key, double v, const char *file, int line);
void lg__dlog_bool(lg__dlog_t *d, const char *key, int v, const char *file, int line);
/* A JSON list of unsigned numbers, e.g. loaded_qsl_set. */
void lg__dlog_u32_list(lg__dlog_t *d, const char *key, const uint32_t *v, size_t n,
                       const char *file, int line);

#define LG_DSTR(d, k, v) lg__dlog_str((d), LG__INFO, (k), (v), LG__FILE, __LINE__)
#define LG_DU64(d, k, v) lg__dlog_u64((d), (k), (uint64_t)(v), LG__FILE, __LINE__)
#define LG_DI64(d, k, v) lg__dlog_i64((d), (k), (int64_t)(v), LG__FILE, __LINE__)
#define LG_DF64(d, k, v) lg__dlog_f64((d), (k), (double)(v), LG__FILE, __LINE__)
#define LG_DBOOL(d, k, v) lg__dlog_bool((d), (k), (v) ? 1 : 0, LG__FILE, __LINE__)
#define LG_DERR(d, k, ...) lg__dlog_strf((d), LG__ERR, (k), LG__FILE, __LINE__, __VA_ARGS__)
#define LG_DWARN(d, k, ...) lg__dlog_strf((d), LG__WARN, (k), LG__FILE, __LINE__, __VA_ARGS__)
#define LG_DMSG(d, ...) \
    lg__dlog_strf((d), LG__INFO, "generic_message", LG__FILE, __LINE__, __VA_ARGS__)

/* A double as `std::ostream << double` prints it with default flags: "%g" with precision 6. */
void lg__fmt_g(char *buf, size_t len, double v);
/* DoubleToString(v, prec): fixed notation. */
void lg__fmt_fixed(char *buf, size_t len, double v, int prec);

typedef struct {
    FILE *f;
    pthread_mutex_t mu;
    int need_comma;
    char *hexbuf;
    size_t hexcap;
} lg__acclog_t;

int lg__acclog_open(lg__acclog_t *a, const char *path, cmn_errbuf_t *eb);
int lg__acclog_close(lg__acclog_t *a);

/* token_mode: 0 no tokens, 1 token_count only (Offline), 2 token_data and token_count. */
void lg__acclog_write(lg__acclog_t *a, uint64_t seq, uint64_t qsl_idx, const void *data,
                      size_t size, int token_mode, const void *tok, size_t tok_size,
                      int64_t n_tokens);

#endif
