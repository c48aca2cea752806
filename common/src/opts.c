/* The option engine (cmn/opts.h): descriptors looked up, checked, applied and printed, for the
 * command line, config files and backends' KEY=VALUE options alike. */
#include "cmn/opts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One command-line word against a lookup: |find| with its |ctx| (a table, or the caller's own
 * function for cmn_opts_word). */
typedef const void *(*lookup_fn)(const void *ctx, const char *name, const char **arg);

static int read_word(int argc, char **argv, int *i, int dash_h, lookup_fn find, const void *ctx,
                     const void **row, cmn_conf_word_t *w, cmn_errbuf_t *eb)
{
    const char *arg = NULL;
    int rc;

    rc = cmn_conf_word_split(dash_h && strcmp(argv[*i], "-h") == 0 ? "--help" : argv[*i], w, eb);
    if (rc < 0)
        return rc;
    *row = find(ctx, w->key, &arg);
    if (!*row)
        return cmn_errf(eb, CMN_ECONFIG, "unknown option '--%s' (see --help)", w->key);
    if (arg)
        return cmn_conf_word_value(w, arg, argc, argv, i, eb);
    return 0;
}

static const void *by_fn(const void *ctx, const char *name, const char **arg)
{
    cmn_opts_find_fn find;

    memcpy(&find, ctx, sizeof(find));
    return find(name, arg);
}

int cmn_opts_word(int argc, char **argv, int *i, int dash_h, cmn_opts_find_fn find,
                  const void **row, cmn_conf_word_t *w, cmn_errbuf_t *eb)
{
    return read_word(argc, argv, i, dash_h, by_fn, &find, row, w, eb);
}

typedef struct {
    const cmn_opt_t *t;
    size_t n;
} table_t;

const cmn_opt_t *cmn_opts_find(const cmn_opt_t *t, size_t n, const char *name)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (t[i].kind != CMN_OPTK_SECTION && strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

static const void *by_table(const void *ctx, const char *name, const char **arg)
{
    const table_t *tb = ctx;
    const cmn_opt_t *d = cmn_opts_find(tb->t, tb->n, name);

    if (d)
        *arg = d->arg;
    return d;
}

int cmn_opts_next(int argc, char **argv, int *i, int dash_h, const cmn_opt_t *t, size_t n,
                  const cmn_opt_t **d, cmn_conf_word_t *w, cmn_errbuf_t *eb)
{
    table_t tb = {t, n};
    const void *row = NULL;
    int rc = read_word(argc, argv, i, dash_h, by_table, &tb, &row, w, eb);

    *d = row;
    return rc;
}

int cmn_opts_parse(int argc, char **argv, unsigned flags, const cmn_opt_t *t, size_t n, void *dst,
                   cmn_opts_act_fn act, cmn_errbuf_t *eb)
{
    int pass, i, rc;

    for (pass = 0; pass < 2; pass++) {
        for (i = 1; i < argc; i++) {
            const cmn_opt_t *d;
            cmn_conf_word_t w;

            rc = cmn_opts_next(argc, argv, &i, (flags & CMN_OPTS_DASH_H) != 0, t, n, &d, &w, eb);
            if (rc < 0)
                return rc;
            if ((flags & CMN_OPTS_NO_VALUE) && !d->arg && d->kind != CMN_OPTK_SWITCH && w.value)
                return cmn_errf(eb, CMN_ECONFIG, "--%s takes no value", w.key);
            if (d->kind == CMN_OPTK_ACT)
                rc = pass == 0 ? act(dst, d, w.value, eb) : 0;
            else
                rc = pass == 1 ? cmn_opts_apply(d, dst, w.value, eb) : 0;
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* A backend option's number: decimal digits only, no sign, no suffix. */
static int kv_num(const cmn_opt_t *d, const char *v, uint64_t *out, cmn_errbuf_t *eb)
{
    char *end;
    unsigned long long u;

    errno = 0;
    u = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || u < d->min || u > d->max)
        return cmn_errf(eb, CMN_ECONFIG,
                        "option %s=%s: expected an integer in %" PRIu64 "..%" PRIu64, d->name, v,
                        d->min, d->max);
    *out = u;
    return 0;
}

int cmn_opts_num(const cmn_opt_t *d, const char *v, uint64_t *out, cmn_errbuf_t *eb)
{
    if (d->flags & CMN_OPT_F_KV)
        return kv_num(d, v, out, eb);
    return cmn_parse_option_num(d->name, v, d->num == CMN_OPT_SIZE, d->min, d->max,
                                d->unit ? d->unit : "", d->why, out, eb);
}

int cmn_opts_apply(const cmn_opt_t *d, void *dst, const char *v, cmn_errbuf_t *eb)
{
    char *field = (char *)dst + d->off;
    uint64_t u = 0;
    uint32_t u32;
    bool b = true;
    int on, rc;

    if (d->num != CMN_OPT_NONE && (rc = cmn_opts_num(d, v, &u, eb)) < 0)
        return rc;
    switch (d->kind) {
    case CMN_OPTK_STR:
        memcpy(field, &v, sizeof(v));
        break;
    case CMN_OPTK_NUM:
        if (d->width == sizeof(u32)) {
            u32 = (uint32_t)u; /* a 4-byte field's max fits */
            memcpy(field, &u32, sizeof(u32));
        } else {
            memcpy(field, &u, sizeof(u));
        }
        break;
    case CMN_OPTK_FLAG:
        memcpy(field, &b, sizeof(b));
        break;
    case CMN_OPTK_SWITCH:
        if (v && strcmp(v, "1") != 0 && strcmp(v, "0") != 0)
            return cmn_errf(eb, CMN_ECONFIG, "%s '%s': expected 1 or 0", d->name, v);
        on = !v || v[0] == '1';
        memcpy(field, &on, sizeof(on));
        break;
    case CMN_OPTK_FN:
        return d->set(dst, d->name, v, u, eb);
    case CMN_OPTK_ACT:
    case CMN_OPTK_SECTION:
        break;
    }
    return 0;
}

typedef struct {
    const char *path;
    const cmn_opt_t *t;
    size_t n;
    void *dst;
    cmn_opts_keep_fn keep;
} conf_t;

static int conf_line(void *arg, const char *key, const char *value, int line, cmn_errbuf_t *eb)
{
    const conf_t *c = arg;
    const cmn_opt_t *d = cmn_opts_find(c->t, c->n, key);
    cmn_errbuf_t inner;
    char *v;
    int rc, on;

    if (!d || d->kind == CMN_OPTK_ACT)
        return cmn_errf(eb, CMN_ECONFIG, "%s:%d: '%s' is not an option a config file can set",
                        c->path, line, key);
    if (!d->arg && d->kind != CMN_OPTK_SWITCH) {
        if (cmn_parse_bool(value, &on) < 0)
            return cmn_errf(eb, CMN_ECONFIG, "%s:%d: %s: '%s' is not a boolean (0/1)", c->path,
                            line, key, value);
        rc = on ? cmn_opts_apply(d, c->dst, NULL, &inner) : 0;
    } else {
        v = strdup(value);
        if (!v)
            return cmn_errf(eb, -ENOMEM, "%s:%d: out of memory", c->path, line);
        if ((rc = c->keep(c->dst, v, &inner)) == 0)
            rc = cmn_opts_apply(d, c->dst, v, &inner);
    }
    if (rc < 0)
        return cmn_errf(eb, rc, "%s:%d: %s", c->path, line, inner.msg);
    return 0;
}

int cmn_opts_conf_file(const char *path, const cmn_opt_t *t, size_t n, void *dst,
                       cmn_opts_keep_fn keep, cmn_errbuf_t *eb)
{
    conf_t c = {path, t, n, dst, keep};

    return cmn_conf_parse_file(path, conf_line, &c, eb);
}

long cmn_opts_kv_unknown(const cmn_opt_t *t, size_t n, size_t nk, const char *const *keys)
{
    size_t i;

    for (i = 0; i < nk; i++)
        if (!cmn_opts_find(t, n, keys[i]))
            return (long)i;
    return -1;
}

const char *cmn_opts_kv_get(const cmn_opt_t *t, size_t n, size_t nk, const char *const *keys,
                            const char *const *values, const char *key)
{
    const cmn_opt_t *d = cmn_opts_find(t, n, key);
    size_t i;

    if (!d)
        return NULL;
    for (i = 0; i < nk; i++)
        if (strcmp(keys[i], key) == 0)
            return values[i];
    return d->dflt;
}

void cmn_opts_help(FILE *f, const cmn_opt_t *t, size_t n, int width, int wrap)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (t[i].kind == CMN_OPTK_SECTION)
            fprintf(f, "\n%s:\n", t[i].name);
        else if (!(t[i].flags & CMN_OPT_F_HIDDEN))
            cmn_opts_help_row(f, t[i].name, t[i].arg, t[i].help, width, wrap);
    }
}

void cmn_opts_list(FILE *f, const cmn_opt_t *t, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (t[i].kind != CMN_OPTK_SECTION && !(t[i].flags & CMN_OPT_F_HIDDEN))
            cmn_opts_list_row(f, t[i].name, t[i].num != CMN_OPT_NONE, t[i].num == CMN_OPT_SIZE,
                              t[i].arg != NULL, t[i].min, t[i].max);
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
