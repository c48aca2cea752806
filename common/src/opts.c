/* Command-line words, --help rows and --list-options lines for the option tables of both
 * programs (cmn/opts.h). */
#include "cmn/opts.h"

#include <inttypes.h>
#include <string.h>

int cmn_opts_word(int argc, char **argv, int *i, int dash_h, cmn_opts_find_fn find,
                  const void **row, cmn_conf_word_t *w, cmn_errbuf_t *eb)
{
    const char *arg = NULL;
    int rc;

    rc = cmn_conf_word_split(dash_h && strcmp(argv[*i], "-h") == 0 ? "--help" : argv[*i], w, eb);
    if (rc < 0)
        return rc;
    *row = find(w->key, &arg);
    if (!*row)
        return cmn_errf(eb, CMN_ECONFIG, "unknown option '--%s' (see --help)", w->key);
    if (arg)
        return cmn_conf_word_value(w, arg, argc, argv, i, eb);
    return 0;
}

void cmn_opts_help_row(FILE *f, const char *name, const char *arg, const char *help, int width,
                       int wrap)
{
    const char *h, *nl;
    char left[64];

    snprintf(left, sizeof(left), "--%s%s%s", name, arg ? " " : "", arg ? arg : "");
    if (!wrap) {
        fprintf(f, "  %-*s %s\n", width, left, help);
        return;
    }
    if (strlen(left) > (size_t)width)
        fprintf(f, "  %s\n  %-*s ", left, width, "");
    else
        fprintf(f, "  %-*s ", width, left);
    for (h = help; (nl = strchr(h, '\n')); h = nl + 1)
        fprintf(f, "%.*s\n  %-*s ", (int)(nl - h), h, width, "");
    fprintf(f, "%s\n", h);
}

void cmn_opts_list_row(FILE *f, const char *name, int num, int size, int has_arg, uint64_t min,
                       uint64_t max)
{
    fprintf(f, "option %s %s %" PRIu64 " %" PRIu64 "\n", name,
            num       ? (size ? "size" : "int")
            : has_arg ? "string"
                      : "flag",
            min, max);
}
