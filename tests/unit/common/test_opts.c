/* cmn/opts.h: command-line words against a table, the --help rows and --list-options lines
 * both programs print, and the descriptor table's apply, range check, config-file step and
 * backend KEY=VALUE lookups. */
#include "cmn/opts.h"
#include "test_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Renders through |fn| into a memory stream and compares with |want| exactly. */
#define RENDER(buf, len, call)                    \
    do {                                          \
        FILE *f = open_memstream(&(buf), &(len)); \
        ck_assert_ptr_nonnull(f);                 \
        call;                                     \
        ck_assert_int_eq(fclose(f), 0);           \
    } while (0)

/* A table of three rows: "help" (flag), "seed N", "config PATH". */
static const char *const rows[][2] = {{"help", NULL}, {"seed", "N"}, {"config", "PATH"}};

static const void *find(const char *name, const char **arg)
{
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(rows[i][0], name) == 0) {
            *arg = rows[i][1];
            return rows[i];
        }
    return NULL;
}

START_TEST(words)
{
    static char argw[][12] = {"prog", "--seed", "7",      "--seed=9",
                              "-h",   "--help", "--nope", "--config"};
    char *argv[9] = {NULL};
    int argc = 8, i;
    const void *row;
    cmn_conf_word_t w;
    cmn_errbuf_t eb = {{0}};

    for (i = 0; i < argc; i++)
        argv[i] = argw[i];

    i = 1; /* the value in the next word */
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 0, find, &row, &w, &eb), 0);
    ck_assert_ptr_eq(row, rows[1]);
    ck_assert_str_eq(w.key, "seed");
    ck_assert_str_eq(w.value, "7");
    ck_assert_int_eq(i, 2);
    i = 3; /* the value after '=' */
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 0, find, &row, &w, &eb), 0);
    ck_assert_str_eq(w.value, "9");
    ck_assert_int_eq(i, 3);
    i = 4; /* -h only where the program reads it as --help */
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 0, find, &row, &w, &eb), CMN_ECONFIG);
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 1, find, &row, &w, &eb), 0);
    ck_assert_ptr_eq(row, rows[0]);
    ck_assert_ptr_null(w.value);
    i = 6;
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 0, find, &row, &w, &eb), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "unknown option '--nope' (see --help)");
    i = 7; /* the last word wants a value it does not have */
    ck_assert_int_eq(cmn_opts_word(argc, argv, &i, 0, find, &row, &w, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, "--config"));
}
END_TEST

START_TEST(help_rows)
{
    char *buf = NULL;
    size_t len = 0;

    /* sut-node's style: one line, the left column padded to 30. */
    RENDER(buf, len, cmn_opts_help_row(f, "device", "DEV", "device for the backend", 30, 0));
    ck_assert_str_eq(buf, "  --device DEV                   device for the backend\n");
    free(buf);
    /* A flag has no placeholder. */
    RENDER(buf, len, cmn_opts_help_row(f, "quiet", NULL, "less output", 10, 0));
    ck_assert_str_eq(buf, "  --quiet    less output\n");
    free(buf);
    /* loadgen-node's style: help lines continue at the help column... */
    RENDER(buf, len, cmn_opts_help_row(f, "seed", "N", "first line\nsecond", 12, 1));
    ck_assert_str_eq(buf, "  --seed N     first line\n               second\n");
    free(buf);
    /* ...and a left column wider than the width starts the help on the next line. */
    RENDER(buf, len, cmn_opts_help_row(f, "endpoint-max-tokens", "N", "output tokens", 12, 1));
    ck_assert_str_eq(buf, "  --endpoint-max-tokens N\n               output tokens\n");
    free(buf);
}
END_TEST

START_TEST(list_rows)
{
    char *buf = NULL;
    size_t len = 0;

    RENDER(buf, len, cmn_opts_list_row(f, "max-batch", 1, 0, 1, 1, 65536));
    ck_assert_str_eq(buf, "option max-batch int 1 65536\n");
    free(buf);
    RENDER(buf, len, cmn_opts_list_row(f, "max-frame", 1, 1, 1, 4096, UINT64_MAX));
    ck_assert_str_eq(buf, "option max-frame size 4096 18446744073709551615\n");
    free(buf);
    RENDER(buf, len, cmn_opts_list_row(f, "tls-ca", 0, 0, 1, 0, 0));
    ck_assert_str_eq(buf, "option tls-ca string 0 0\n");
    free(buf);
    RENDER(buf, len, cmn_opts_list_row(f, "help", 0, 0, 0, 0, 0));
    ck_assert_str_eq(buf, "option help flag 0 0\n");
    free(buf);
}
END_TEST

/* ---- the descriptor table: apply, check, config file, KEY=VALUE, --help, --list-options ---- */

typedef struct {
    const char *path;
    uint32_t n32;
    uint64_t n64;
    bool quiet;
    int busy;
    int calls;
    char *kept[5];
    size_t n_kept;
} dst_t;

static int set_count(void *dst, const char *name, const char *v, uint64_t u, cmn_errbuf_t *eb)
{
    dst_t *d = dst;

    (void)name, (void)v, (void)eb;
    d->calls += 1 + (int)u;
    return 0;
}

static int keep(void *dst, char *s, cmn_errbuf_t *eb)
{
    dst_t *d = dst;

    if (d->n_kept == 5) {
        free(s);
        return cmn_errf(eb, -ENOMEM, "too many");
    }
    d->kept[d->n_kept++] = s;
    return 0;
}

static const cmn_opt_t table[] = {
    CMN_OPT_SECTION("Main"),
    CMN_OPT_STR(dst_t, "path", "PATH", path, "a path"),
    CMN_OPT_NUM(dst_t, "n32", "N", n32, CMN_OPT_INT, 1, 100, " ms", "0: never", "small"),
    CMN_OPT_NUM(dst_t, "n64", "SIZE", n64, CMN_OPT_SIZE, 0, UINT64_MAX, " bytes", NULL, "big"),
    CMN_OPT_FLAG(dst_t, "quiet", quiet, "less"),
    CMN_OPT_SWITCH(dst_t, "busy", busy, "spin"),
    CMN_OPT_FNNUM("count", "N", set_count, CMN_OPT_INT, 0, 9, "", "calls"),
    CMN_OPT_ACT("help", NULL, "this"),
};
#define N_TABLE (sizeof(table) / sizeof(table[0]))

START_TEST(table_apply)
{
    dst_t d = {0};
    cmn_errbuf_t eb = {{0}};

    ck_assert_ptr_null(cmn_opts_find(table, N_TABLE, "Main")); /* a section is no option */
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "path"), &d, "/x", &eb), 0);
    ck_assert_str_eq(d.path, "/x");
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "n32"), &d, "42", &eb), 0);
    ck_assert_uint_eq(d.n32, 42);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "n64"), &d, "2G", &eb), 0);
    ck_assert_uint_eq(d.n64, 2ull << 30);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "n32"), &d, "0", &eb),
                     CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "--n32: '0' is not an integer from 1 to 100 ms (0: never)");
    ck_assert_uint_eq(d.n32, 42);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "quiet"), &d, NULL, &eb), 0);
    ck_assert(d.quiet);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "busy"), &d, NULL, &eb), 0);
    ck_assert_int_eq(d.busy, 1);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "busy"), &d, "0", &eb), 0);
    ck_assert_int_eq(d.busy, 0);
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "busy"), &d, "yes", &eb),
                     CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "busy 'yes': expected 1 or 0");
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "count"), &d, "3", &eb), 0);
    ck_assert_int_eq(d.calls, 4); /* the setter saw the checked number */
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "count"), &d, "10", &eb),
                     CMN_ECONFIG);
    ck_assert_int_eq(d.calls, 4); /* ... and no number out of range */
    ck_assert_int_eq(cmn_opts_apply(cmn_opts_find(table, N_TABLE, "help"), &d, NULL, &eb), 0);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(table_conf_file)
{
    char path[] = "/tmp/test_opts_XXXXXX";
    dst_t d = {0};
    cmn_errbuf_t eb = {{0}};
    size_t i;

    close(mkstemp(path));
    write_file(path, "# a file\npath = /etc/x\nn32 = 7\nquiet = 0\nbusy = 1\n");
    ck_assert_int_eq(cmn_opts_conf_file(path, table, N_TABLE, &d, keep, &eb), 0);
    ck_assert_str_eq(d.path, "/etc/x");
    ck_assert_uint_eq(d.n32, 7);
    ck_assert(!d.quiet); /* a false boolean sets nothing */
    ck_assert_int_eq(d.busy, 1);
    ck_assert_uint_eq(d.n_kept, 3); /* the values kept: path, n32, busy */
    write_file(path, "help = 1\n");
    ck_assert_int_eq(cmn_opts_conf_file(path, table, N_TABLE, &d, keep, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, ":1: 'help' is not an option a config file can set"));
    write_file(path, "path = /y\nquiet = maybe\n");
    ck_assert_int_eq(cmn_opts_conf_file(path, table, N_TABLE, &d, keep, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, ":2: quiet: 'maybe' is not a boolean (0/1)"));
    write_file(path, "n32 = 101\n");
    ck_assert_int_eq(cmn_opts_conf_file(path, table, N_TABLE, &d, keep, &eb), CMN_ECONFIG);
    ck_assert_ptr_nonnull(strstr(eb.msg, ":1: --n32: '101' is not an integer from 1 to 100 ms"));
    write_file(path, "path = /z\n");
    /* the keeper refuses (full: path, n32, busy, /y, 101): its message, after the file and line */
    ck_assert_int_eq(cmn_opts_conf_file(path, table, N_TABLE, &d, keep, &eb), -ENOMEM);
    ck_assert_ptr_nonnull(strstr(eb.msg, ":1: too many"));
    unlink(path);
    for (i = 0; i < d.n_kept; i++)
        free(d.kept[i]);
}
END_TEST

START_TEST(table_kv)
{
    static const cmn_opt_t kv[] = {CMN_OPT_KV("url", "http://h:1"), CMN_OPT_KV("model", NULL)};
    const char *keys[] = {"model", "modle"}, *vals[] = {"m", "x"};
    cmn_opt_t num = CMN_OPT_KV("engines", NULL);
    cmn_errbuf_t eb = {{0}};
    uint64_t u = 0;

    ck_assert_int_eq(cmn_opts_kv_unknown(kv, 2, 1, keys), -1);
    ck_assert_int_eq(cmn_opts_kv_unknown(kv, 2, 2, keys), 1);
    ck_assert_str_eq(cmn_opts_kv_get(kv, 2, 2, keys, vals, "model"), "m");
    ck_assert_str_eq(cmn_opts_kv_get(kv, 2, 2, keys, vals, "url"), "http://h:1");
    ck_assert_ptr_null(cmn_opts_kv_get(kv, 2, 2, keys, vals, "modle")); /* no row */
    num.num = CMN_OPT_INT;
    num.min = 1;
    num.max = 8;
    ck_assert_int_eq(cmn_opts_num(&num, "08", &u, &eb), 0);
    ck_assert_uint_eq(u, 8); /* decimal, as the backends always read them (not octal) */
    ck_assert_int_eq(cmn_opts_num(&num, "9", &u, &eb), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "option engines=9: expected an integer in 1..8");
    ck_assert_int_eq(cmn_opts_num(&num, "-1", &u, &eb), CMN_ECONFIG);
}
END_TEST

START_TEST(table_help_list)
{
    char *buf = NULL;
    size_t len = 0;

    RENDER(buf, len, cmn_opts_help(f, table, 3, 12, 1));
    ck_assert_str_eq(buf, "\nMain:\n  --path PATH  a path\n  --n32 N      small\n");
    free(buf);
    RENDER(buf, len, cmn_opts_list(f, table, N_TABLE));
    ck_assert_str_eq(buf, "option path string 0 0\n"
                          "option n32 int 1 100\n"
                          "option n64 size 0 18446744073709551615\n"
                          "option quiet flag 0 0\n"
                          "option busy flag 0 0\n"
                          "option count int 0 9\n"
                          "option help flag 0 0\n");
    free(buf);
}
END_TEST

/* A program's table for cmn_opts_parse: a string, a switch, a flag and the actions. */
typedef struct {
    const char *path;
    int busy;
    bool quiet;
    char acts[64]; /* the ACT rows seen, in order: "name[=value] " */
} prog_t;

static const cmn_opt_t prog[] = {
    CMN_OPT_STR(prog_t, "path", "PATH", path, "a path"),
    CMN_OPT_SWITCH(prog_t, "busy", busy, "spin"),
    CMN_OPT_FLAG(prog_t, "quiet", quiet, "less"),
    CMN_OPT_ACT("help", NULL, "this"),
    CMN_OPT_ACT("config", "FILE", "a file"),
    CMN_OPT_HIDDEN_ACT("list-options"),
};
#define N_PROG (sizeof(prog) / sizeof(prog[0]))

/* Records the action; "config" sets the path as a file would (a default the command line
 * overrides), any other refuses when the path is already set (the second pass came first). */
static int prog_act(void *dst, const cmn_opt_t *d, const char *v, cmn_errbuf_t *eb)
{
    prog_t *p = dst;
    size_t len = strlen(p->acts);

    if (p->path && strcmp(p->path, "/file") != 0)
        return cmn_errf(eb, CMN_ECONFIG, "action after the options");
    snprintf(p->acts + len, sizeof(p->acts) - len, "%s%s%s ", d->name, v ? "=" : "", v ? v : "");
    if (strcmp(d->name, "config") == 0)
        p->path = "/file";
    return 0;
}

/* cmn_opts_parse over "prog" and the argc - 1 words that follow. */
static int parse(prog_t *p, unsigned flags, cmn_errbuf_t *eb, int argc, ...)
{
    static char word[8][16] = {"prog"}; /* the values stored outlive the call */
    char *argv[8];
    va_list ap;
    int i;

    ck_assert_int_le(argc, 8);
    memset(p, 0, sizeof(*p));
    va_start(ap, argc);
    for (i = 0; i < argc; i++) {
        if (i > 0)
            snprintf(word[i], sizeof(word[i]), "%s", va_arg(ap, const char *));
        argv[i] = word[i];
    }
    va_end(ap);
    return cmn_opts_parse(argc, argv, flags, prog, N_PROG, p, prog_act, eb);
}

START_TEST(parse_passes)
{
    prog_t p;
    cmn_errbuf_t eb = {{0}};
    char *buf = NULL;
    size_t len = 0;

    /* The actions first, in order, the options over them (the command line wins). */
    ck_assert_int_eq(parse(&p, 0, &eb, 5, "--path=/cli", "--busy=0", "--config", "f"), 0);
    ck_assert_str_eq(p.acts, "config=f ");
    ck_assert_str_eq(p.path, "/cli");
    ck_assert_int_eq(p.busy, 0);
    ck_assert_int_eq(
        parse(&p, CMN_OPTS_DASH_H, &eb, 5, "--quiet", "-h", "--list-options", "--busy"), 0);
    ck_assert_str_eq(p.acts, "help list-options ");
    ck_assert(p.quiet);
    ck_assert_int_eq(p.busy, 1);
    /* "-h" is --help only where the program says so; a refused word stops the first pass. */
    ck_assert_int_eq(parse(&p, 0, &eb, 3, "--help", "-h"), CMN_ECONFIG);
    ck_assert_str_eq(p.acts, "help ");
    ck_assert_int_eq(parse(&p, 0, &eb, 3, "--nope", "--help"), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "unknown option '--nope' (see --help)");
    ck_assert_str_eq(p.acts, "");
    /* A value on a row without one: kept, or refused with CMN_OPTS_NO_VALUE (a switch's aside). */
    ck_assert_int_eq(parse(&p, 0, &eb, 3, "--quiet=1", "--help=x"), 0);
    ck_assert_str_eq(p.acts, "help=x ");
    ck_assert_int_eq(parse(&p, CMN_OPTS_NO_VALUE, &eb, 3, "--busy=1", "--quiet=1"), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "--quiet takes no value");
    ck_assert_int_eq(parse(&p, CMN_OPTS_NO_VALUE, &eb, 2, "--busy=1"), 0);
    ck_assert_int_eq(p.busy, 1);
    /* A setter's refusal in the second pass. */
    ck_assert_int_eq(parse(&p, 0, &eb, 2, "--busy=2"), CMN_ECONFIG);
    ck_assert_str_eq(eb.msg, "busy '2': expected 1 or 0");
    /* A hidden row is read, never shown. */
    RENDER(buf, len, cmn_opts_help(f, prog, N_PROG, 12, 0));
    ck_assert_ptr_null(strstr(buf, "list-options"));
    ck_assert_ptr_nonnull(strstr(buf, "--config FILE"));
    free(buf);
    RENDER(buf, len, cmn_opts_list(f, prog, N_PROG));
    ck_assert_str_eq(buf, "option path string 0 0\n"
                          "option busy flag 0 0\n"
                          "option quiet flag 0 0\n"
                          "option help flag 0 0\n"
                          "option config string 0 0\n");
    free(buf);
}
END_TEST

TCase *tcase_opts(void)
{
    TCase *tc = tcase_create("opts");

    tcase_add_test(tc, words);
    tcase_add_test(tc, help_rows);
    tcase_add_test(tc, list_rows);
    tcase_add_test(tc, table_apply);
    tcase_add_test(tc, table_conf_file);
    tcase_add_test(tc, table_kv);
    tcase_add_test(tc, table_help_list);
    tcase_add_test(tc, parse_passes);
    return tc;
}
