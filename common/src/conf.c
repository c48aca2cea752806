#include "cmn/conf.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int cmn_conf_parse_file(const char *path, cmn_conf_cb cb, void *arg, cmn_errbuf_t *eb)
{
    FILE *f = fopen(path, "r");
    char line[4096], *p, *eq, *key, *val;
    int lineno = 0, rc = 0;

    if (!f)
        return cmn_errf(eb, -errno, "cannot open config file %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = cmn_errf(eb, CMN_ECONFIG, "%s:%d: line longer than %zu bytes", path, lineno,
                          sizeof(line) - 2);
            break;
        }
        p = trim(line);
        if (*p == '\0' || *p == '#')
            continue;
        eq = strchr(p, '=');
        if (!eq) {
            rc = cmn_errf(eb, CMN_ECONFIG, "%s:%d: expected 'key = value', got '%s'", path, lineno,
                          p);
            break;
        }
        *eq = '\0';
        key = trim(p);
        val = trim(eq + 1);
        if (*key == '\0') {
            rc = cmn_errf(eb, CMN_ECONFIG, "%s:%d: empty key", path, lineno);
            break;
        }
        rc = cb(arg, key, val, lineno, eb);
        if (rc < 0)
            break;
    }
    if (rc == 0 && ferror(f))
        rc = cmn_errf(eb, -EIO, "error reading %s", path);
    fclose(f);
    return rc;
}

int cmn_conf_word_split(const char *word, cmn_conf_word_t *w, cmn_errbuf_t *eb)
{
    const char *eq;
    size_t k;

    if (strncmp(word, "--", 2) != 0 || word[2] == '\0')
        return cmn_errf(eb, CMN_ECONFIG, "unexpected argument '%s' (see --help)", word);
    w->key = word + 2;
    w->value = NULL;
    eq = strchr(w->key, '=');
    if (!eq)
        return 0;
    k = (size_t)(eq - w->key);
    if (k >= sizeof(w->buf))
        return cmn_errf(eb, CMN_ECONFIG, "unknown option '%s' (see --help)", word);
    memcpy(w->buf, w->key, k);
    w->buf[k] = '\0';
    w->key = w->buf;
    w->value = eq + 1;
    return 0;
}

int cmn_conf_word_value(cmn_conf_word_t *w, const char *arg_doc, int argc, char **argv, int *i,
                        cmn_errbuf_t *eb)
{
    if (w->value)
        return 0;
    if (*i + 1 >= argc)
        return cmn_errf(eb, CMN_ECONFIG, "--%s needs a value (%s)", w->key, arg_doc);
    w->value = argv[++*i];
    return 0;
}

int cmn_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (!s || !*s || *s == '-' || isspace((unsigned char)*s))
        return CMN_ECONFIG;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || *end)
        return CMN_ECONFIG;
    *out = v;
    return 0;
}

int cmn_parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (!s || !*s || isspace((unsigned char)*s))
        return CMN_ECONFIG;
    errno = 0;
    v = strtoll(s, &end, 0);
    if (errno || *end)
        return CMN_ECONFIG;
    *out = v;
    return 0;
}

int cmn_parse_double(const char *s, double *out)
{
    char *end;
    double v;

    if (!s || !*s || isspace((unsigned char)*s))
        return CMN_ECONFIG;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return CMN_ECONFIG;
    *out = v;
    return 0;
}

int cmn_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    size_t i;

    for (i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return CMN_ECONFIG;
}

int cmn_parse_size(const char *s, uint64_t *out)
{
    char buf[64];
    size_t n;
    unsigned shift = 0;
    uint64_t v;

    if (!s)
        return CMN_ECONFIG;
    n = strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return CMN_ECONFIG;
    memcpy(buf, s, n + 1);
    switch (toupper((unsigned char)buf[n - 1])) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift)
        buf[n - 1] = '\0';
    if (cmn_parse_u64(buf, &v) < 0)
        return CMN_ECONFIG;
    if (shift && v > (UINT64_MAX >> shift))
        return CMN_ECONFIG;
    *out = v << shift;
    return 0;
}

int cmn_parse_option_num(const char *name, const char *v, int size, uint64_t min, uint64_t max,
                         const char *unit, const char *why, uint64_t *out, cmn_errbuf_t *eb)
{
    uint64_t u;
    int rc = size ? cmn_parse_size(v, &u) : cmn_parse_u64(v, &u);

    if (rc < 0 || u < min || u > max)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--%s: '%s' is not %s from %" PRIu64 " to %" PRIu64 "%s%s%s%s", name, v,
                        size ? "a byte count (K, M, G suffixes)" : "an integer", min, max, unit,
                        why ? " (" : "", why ? why : "", why ? ")" : "");
    *out = u;
    return 0;
}
