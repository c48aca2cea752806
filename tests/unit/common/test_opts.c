/* cmn/opts.h: command-line words against a table, and the --help rows and --list-options lines
 * both programs print. */
#include "cmn/opts.h"
#include "test_common.h"

#include <stdlib.h>
#include <string.h>

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

TCase *tcase_opts(void)
{
    TCase *tc = tcase_create("opts");

    tcase_add_test(tc, words);
    tcase_add_test(tc, help_rows);
    tcase_add_test(tc, list_rows);
    return tc;
}
