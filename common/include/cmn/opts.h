/* The shared part of the option engines of sut-node and loadgen-node (their tables stay in the
 * programs): one --help row and one --list-options line, written the same way by both. */
#ifndef CMN_OPTS_H
#define CMN_OPTS_H

#include <stdint.h>
#include <stdio.h>

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
