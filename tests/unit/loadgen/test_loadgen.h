#ifndef TEST_LOADGEN_H
#define TEST_LOADGEN_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

TCase *tcase_rng(void);
TCase *tcase_trace(void);
TCase *tcase_trace_modes(void);
TCase *tcase_conf(void);
TCase *tcase_mlperf_conf(void);
TCase *tcase_effective(void);
TCase *tcase_early_stopping(void);
TCase *tcase_metrics(void);
TCase *tcase_logs(void);
TCase *tcase_npy(void);
TCase *tcase_qsl(void);
TCase *tcase_sched(void);
TCase *tcase_sched_faults(void);
TCase *tcase_tokens(void);
TCase *tcase_accuracy(void);

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string. */
char *tl_mkdtemp(void);
/* Removes the files in |dir| and the directory. */
void tl_rmdir(const char *dir);
/* The whole file as a NUL-terminated string (NULL if it cannot be read); the caller frees it. */
char *tl_read(const char *path, size_t *len);
void tl_write(const char *path, const char *text);
/* 1 if |s|[0..n) is exactly one JSON value (RFC 8259, whitespace around allowed). */
int tl_json_valid(const char *s, size_t n);
/* Checks every line of a detail log: the :::MLLOG marker and a valid JSON object. Returns the
 * number of lines, or -1 (with the bad line number in *bad_line). */
long tl_detail_lines(const char *path, long *bad_line);
/* The raw JSON text of the value of the first line with |key| ("" if absent), copied into buf. */
const char *tl_detail_value(const char *path, const char *key, char *buf, size_t len);
/* How many lines carry |key|. */
int tl_detail_count(const char *path, const char *key);

#endif
