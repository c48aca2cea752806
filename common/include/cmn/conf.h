/* Configuration files (`key = value` lines, `#` comments) and strict number parsing.
 * Reentrant; no global state. */
#ifndef CMN_CONF_H
#define CMN_CONF_H

#include "cmn/err.h"

#include <stdint.h>

/* Called for each `key = value` line; returns 0 or a negative code with a reason in |eb|, which
 * stops the parse. |line| is 1-based. */
typedef int (*cmn_conf_cb)(void *arg, const char *key, const char *value, int line,
                           cmn_errbuf_t *eb);

/* Reads |path| line by line. Blank lines and lines whose first non-blank character is '#' are
 * skipped; every other line must be `key = value` (spaces around '=' optional, value to the end of
 * the line with trailing blanks removed). Errors name the file and line. Returns 0, a negated
 * errno for I/O, CMN_ECONFIG for syntax, or the callback's code. */
int cmn_conf_parse_file(const char *path, cmn_conf_cb cb, void *arg, cmn_errbuf_t *eb);

/* Command lines whose long options are the config keys (sut-node, loadgen-node). */
typedef struct {
    const char *key;   /* the option's name without "--" */
    const char *value; /* after '=' in the same word, or NULL */
    char buf[64];      /* holds |key| when the word carries "=value" */
} cmn_conf_word_t;

/* Splits |word| ("--key" or "--key=value") into |w|. Returns 0, or CMN_ECONFIG naming the word:
 * not a long option, or a key too long to be one. */
int cmn_conf_word_split(const char *word, cmn_conf_word_t *w, cmn_errbuf_t *eb);

/* For an option that takes a value (|arg_doc| names it, e.g. "N") and got none with '=': takes
 * the next word, argv[*i + 1], and advances *i. Returns 0, or CMN_ECONFIG when there is none. */
int cmn_conf_word_value(cmn_conf_word_t *w, const char *arg_doc, int argc, char **argv, int *i,
                        cmn_errbuf_t *eb);

/* Strict parsers: the whole string must be consumed. Return 0 or CMN_ECONFIG. */
int cmn_parse_u64(const char *s, uint64_t *out);
int cmn_parse_i64(const char *s, int64_t *out);
int cmn_parse_double(const char *s, double *out);
/* "1", "0", "true", "false", "yes", "no", "on", "off". */
int cmn_parse_bool(const char *s, int *out);
/* A byte count with an optional K, M or G suffix (powers of 1024): "64K", "256M". */
int cmn_parse_size(const char *s, uint64_t *out);

/* A numeric option's value |v| (a byte count when |size|, else an integer) checked against
 * [min, max]: junk, a sign, trailing characters, an overflow and a value out of range all give
 * CMN_ECONFIG with "--NAME: 'V' is not an integer from MIN to MAXUNIT", plus " (WHY)" when |why|
 * is not NULL, so every refusal names the option, the value and what is allowed. */
int cmn_parse_option_num(const char *name, const char *v, int size, uint64_t min, uint64_t max,
                         const char *unit, const char *why, uint64_t *out, cmn_errbuf_t *eb);

#endif
