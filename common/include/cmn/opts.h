/* The shared part of the option engines of sut-node and loadgen-node (their tables stay in the
 * programs): reading one command-line word against a table, one --help row and one
 * --list-options line, written the same way by both. Numbers and their ranges: cmn/conf.h's
 * cmn_parse_option_num; config files: cmn_conf_parse_file. */
#ifndef CMN_OPTS_H
#define CMN_OPTS_H

#include "cmn/conf.h"
#include "cmn/err.h"

#include <stdint.h>
#include <stdio.h>

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
