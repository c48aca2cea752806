/* The option engine of sut-node, loadgen-node and the backends: one descriptor type (cmn_opt_t)
 * for a row of a program's option table or of a backend's KEY=VALUE options, and one path for
 * what a row does with a value: the range check whose message names the option, storing it in
 * the program's struct (or its setter), the config-file apply step, the --help rows and the
 * --list-options lines. The tables stay in the programs and backends. Numbers:
 * cmn/conf.h's parsers; config files: cmn_conf_parse_file. */
#ifndef CMN_OPTS_H
#define CMN_OPTS_H

#include "cmn/conf.h"
#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What a row is and what giving it a value does. */
typedef enum {
    CMN_OPTK_SECTION, /* a --help heading (name is its title), not an option */
    CMN_OPTK_ACT,     /* acted upon by the program's parser (help, version, config): storing
                       * does nothing, and a config file cannot set it */
    CMN_OPTK_STR,     /* a const char * field: the value as given */
    CMN_OPTK_NUM,     /* a uint32_t or uint64_t field (width): an integer or a byte count in
                       * [min, max] */
    CMN_OPTK_FLAG,    /* a bool field set true when given; a config file gives a boolean
                       * (cmn_parse_bool's words) and only true sets it */
    CMN_OPTK_SWITCH,  /* an int field: 1 when given; "--NAME=V" and a config file give 1 or 0
                       * exactly ("NAME 'V': expected 1 or 0" otherwise) */
    CMN_OPTK_FN,      /* the row's setter, after the number is parsed and checked when num is
                       * set; without arg, a config file's boolean calls it (v NULL) when true */
} cmn_opt_kind_t;

/* How a numeric value is written (num). */
enum { CMN_OPT_NONE = 0, CMN_OPT_INT = 1, CMN_OPT_SIZE = 2 };

/* flags */
#define CMN_OPT_F_KV 1u     /* a backend's KEY=VALUE option: messages name it "option KEY=VALUE" */
#define CMN_OPT_F_HIDDEN 2u /* read as any row, but neither --help nor --list-options shows it */

/* A setter: |dst| is the program's options struct, |u| the checked number (num rows). */
typedef int (*cmn_opt_set_fn)(void *dst, const char *name, const char *v, uint64_t u,
                              cmn_errbuf_t *eb);

/* One option. |name| is the long option without "--", also its config-file key (a backend's
 * KEY); |arg| the value's placeholder in --help (NULL: a flag); |help| lines separated by '\n';
 * |off| and |width| the field in the program's struct; |unit| (" ms", " bytes", "") and |why|
 * (what the smallest refused value would do, or NULL) finish the range message; |dflt| a
 * backend option's default as text (NULL: absent means "not set"). */
typedef struct {
    const char *name;
    const char *arg;
    const char *help;
    cmn_opt_kind_t kind;
    size_t off, width;
    cmn_opt_set_fn set;
    int num;
    uint64_t min, max;
    const char *unit, *why;
    const char *dflt;
    unsigned flags;
} cmn_opt_t;

#define CMN_OPT_FIELD(T, f) .off = offsetof(T, f), .width = sizeof(((T *)0)->f)
#define CMN_OPT_STR(T, n, a, f, h)                                                \
    {                                                                             \
        .name = n, .arg = a, .help = h, .kind = CMN_OPTK_STR, CMN_OPT_FIELD(T, f) \
    }
#define CMN_OPT_NUM(T, n, a, f, nk, lo, hi, u, w, h)                                          \
    {                                                                                         \
        .name = n, .arg = a, .help = h, .kind = CMN_OPTK_NUM, CMN_OPT_FIELD(T, f), .num = nk, \
        .min = lo, .max = hi, .unit = u, .why = w                                             \
    }
#define CMN_OPT_FLAG(T, n, f, h)                                         \
    {                                                                    \
        .name = n, .help = h, .kind = CMN_OPTK_FLAG, CMN_OPT_FIELD(T, f) \
    }
#define CMN_OPT_SWITCH(T, n, f, h)                                         \
    {                                                                      \
        .name = n, .help = h, .kind = CMN_OPTK_SWITCH, CMN_OPT_FIELD(T, f) \
    }
#define CMN_OPT_FN(n, a, fn, h)                                        \
    {                                                                  \
        .name = n, .arg = a, .help = h, .kind = CMN_OPTK_FN, .set = fn \
    }
#define CMN_OPT_FNNUM(n, a, fn, nk, lo, hi, u, h)                                             \
    {                                                                                         \
        .name = n, .arg = a, .help = h, .kind = CMN_OPTK_FN, .set = fn, .num = nk, .min = lo, \
        .max = hi, .unit = u                                                                  \
    }
#define CMN_OPT_ACT(n, a, h)                                 \
    {                                                        \
        .name = n, .arg = a, .help = h, .kind = CMN_OPTK_ACT \
    }
/* An ACT row that --help and --list-options do not show (--list-options itself). */
#define CMN_OPT_HIDDEN_ACT(n)                                      \
    {                                                              \
        .name = n, .kind = CMN_OPTK_ACT, .flags = CMN_OPT_F_HIDDEN \
    }
#define CMN_OPT_SECTION(t)                  \
    {                                       \
        .name = t, .kind = CMN_OPTK_SECTION \
    }
/* A backend's KEY with its default (NULL: none). */
#define CMN_OPT_KV(k, d)                                                  \
    {                                                                     \
        .name = k, .kind = CMN_OPTK_STR, .dflt = d, .flags = CMN_OPT_F_KV \
    }

/* The option |name| of the table (sections skipped), or NULL. */
const cmn_opt_t *cmn_opts_find(const cmn_opt_t *t, size_t n, const char *name);

/* The range check: |v| read as |d|'s number (a byte count for CMN_OPT_SIZE, else a decimal
 * integer) within [min, max] into *out; refused values, junk, a sign, trailing characters and an
 * overflow alike give CMN_ECONFIG with "--NAME: 'V' is not an integer from MIN to MAXUNIT (WHY)",
 * or for a backend option (CMN_OPT_F_KV) "option KEY=V: expected an integer in MIN..MAX". */
int cmn_opts_num(const cmn_opt_t *d, const char *v, uint64_t *out, cmn_errbuf_t *eb);

/* Gives |d| the value |v| (NULL for a flag) in the program's struct |dst|, by its kind (above).
 * Returns 0 or the check's or setter's code with its message. */
int cmn_opts_apply(const cmn_opt_t *d, void *dst, const char *v, cmn_errbuf_t *eb);

/* Keeps the malloc'ed |s| (a config file's value) as long as |dst|: 0, or a negative code with a
 * message (the string is then freed). */
typedef int (*cmn_opts_keep_fn)(void *dst, char *s, cmn_errbuf_t *eb);

/* The config-file apply step: each `key = value` line of |path| is the option of that name,
 * given its value as on the command line (flags and switches as their kinds say). A key that is
 * no row, or an ACT row, gives "PATH:LINE: 'KEY' is not an option a config file can set"; any
 * other refusal "PATH:LINE: " and the option's message. Returns 0, or cmn_conf_parse_file's
 * code. */
int cmn_opts_conf_file(const char *path, const cmn_opt_t *t, size_t n, void *dst,
                       cmn_opts_keep_fn keep, cmn_errbuf_t *eb);

/* Reads the option at argv[*i] as cmn_opts_word does, looked up in the table; *d is its row. */
int cmn_opts_next(int argc, char **argv, int *i, int dash_h, const cmn_opt_t *t, size_t n,
                  const cmn_opt_t **d, cmn_conf_word_t *w, cmn_errbuf_t *eb);

/* flags of cmn_opts_parse: DASH_H, "-h" is read as "--help"; NO_VALUE, "--NAME=V" for a row
 * without |arg| (a switch's 1 or 0 aside) is refused: "--NAME takes no value". */
#define CMN_OPTS_DASH_H 1u
#define CMN_OPTS_NO_VALUE 2u

/* What a program does with an ACT row (--config reads its file; --help and --version print and
 * exit): |v| is the value (NULL without one). Returns 0, or a negative code with its message. */
typedef int (*cmn_opts_act_fn)(void *dst, const cmn_opt_t *d, const char *v, cmn_errbuf_t *eb);

/* A program's command line against its table, in two passes: first each ACT row, in the order
 * given, to |act| (--config's file sets defaults, --help prints whatever else is given), then
 * every other row to cmn_opts_apply on |dst|, over what the file set. Words are read as
 * cmn_opts_next does (|flags|' CMN_OPTS_DASH_H), and refused there in the first pass. Returns 0,
 * or the first refusal's code with its message. */
int cmn_opts_parse(int argc, char **argv, unsigned flags, const cmn_opt_t *t, size_t n, void *dst,
                   cmn_opts_act_fn act, cmn_errbuf_t *eb);

/* The --help rows of a table (cmn_opts_help_row's |width| and |wrap|), each section as a blank
 * line and "TITLE:"; hidden rows skipped. */
void cmn_opts_help(FILE *f, const cmn_opt_t *t, size_t n, int width, int wrap);

/* The --list-options lines of a table (cmn_opts_list_row), sections and hidden rows skipped. */
void cmn_opts_list(FILE *f, const cmn_opt_t *t, size_t n);

/* A backend's KEY=VALUE options (|nk| pairs in |keys| and |values|) against its table: the index
 * of the first key that is no row, or -1; and the value of |key| or its default (NULL for a key
 * that is no row). */
long cmn_opts_kv_unknown(const cmn_opt_t *t, size_t n, size_t nk, const char *const *keys);
const char *cmn_opts_kv_get(const cmn_opt_t *t, size_t n, size_t nk, const char *const *keys,
                            const char *const *values, const char *key);

/* Looks |name| up in a program's table: returns its row (opaque here) and sets *arg to the
 * value's placeholder ("N", "PATH"; NULL for a flag), or returns NULL for an unknown name. */
typedef const void *(*cmn_opts_find_fn)(const char *name, const char **arg);

/* Reads the option at argv[*i] ("--key", "--key=value", or "--key" then its value in the next
 * word, which advances *i), with "-h" read as "--help" when |dash_h|. On success *row is the
 * table's row and |w| holds the key and the value (NULL for a flag given without "="). Returns 0,
 * or CMN_ECONFIG naming the word: not a long option, "unknown option '--NAME' (see --help)", or
 * an option that takes a value without one. */
int cmn_opts_word(int argc, char **argv, int *i, int dash_h, cmn_opts_find_fn find,
                  const void **row, cmn_conf_word_t *w, cmn_errbuf_t *eb);

/* One --help row: "  --NAME ARG" padded to |width| columns, a space, then |help|. With |wrap|, a
 * left column wider than |width| starts the help on the next line, and each '\n' in |help|
 * continues at the help column; without it the help follows on the same line as written. */
void cmn_opts_help_row(FILE *f, const char *name, const char *arg, const char *help, int width,
                       int wrap);

/* One --list-options line, "option NAME KIND MIN MAX": KIND is "size" (|size|) or "int" for a
 * numeric option (|num|), else "string" when it takes a value (|has_arg|), else "flag". */
void cmn_opts_list_row(FILE *f, const char *name, int num, int size, int has_arg, uint64_t min,
                       uint64_t max);

#endif
