/* Helpers shared by the loadgen suites: temporary directories, files, and a strict JSON checker
 * for the log lines (the submission checker json-parses every detail line). */
#include "test_loadgen.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tl_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    char *path;

    if (!base || !*base)
        base = "/tmp";
    ck_assert_int_ge(asprintf(&path, "%s/lgtest.XXXXXX", base), 0);
    ck_assert_ptr_nonnull(mkdtemp(path));
    return path;
}

void tl_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4096];

    if (!d)
        return;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (unlink(path) != 0)
            tl_rmdir(path);
    }
    closedir(d);
    rmdir(dir);
}

char *tl_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            if (len)
                *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

void tl_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* ---- strict JSON ------------------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
    int depth;
} js_t;

static void js_ws(js_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int js_value(js_t *j);

static int js_string(js_t *j)
{
    if (j->p >= j->end || *j->p != '"')
        return 0;
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;

        if (c < 0x20)
            return 0;
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end)
                return 0;
            if (*j->p == 'u') {
                int i;

                for (i = 0; i < 4; i++) {
                    j->p++;
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p))
                        return 0;
                }
            } else if (!strchr("\"\\/bfnrt", *j->p)) {
                return 0;
            }
        }
        j->p++;
    }
    if (j->p >= j->end)
        return 0;
    j->p++;
    return 1;
}

static int js_digits(js_t *j)
{
    int n = 0;

    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        j->p++;
        n++;
    }
    return n;
}

static int js_number(js_t *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!js_digits(j))
        return 0;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!js_digits(j))
            return 0;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!js_digits(j))
            return 0;
    }
    return 1;
}

static int js_word(js_t *j, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return 0;
    j->p += n;
    return 1;
}

static int js_value(js_t *j)
{
    js_ws(j);
    if (j->p >= j->end || ++j->depth > 64)
        return 0;
    switch (*j->p) {
    case '"':
        j->depth--;
        return js_string(j);
    case '{':
        j->p++;
        js_ws(j);
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            break;
        }
        for (;;) {
            js_ws(j);
            if (!js_string(j))
                return 0;
            js_ws(j);
            if (j->p >= j->end || *j->p++ != ':' || !js_value(j))
                return 0;
            js_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == '}') {
                j->p++;
                break;
            }
            return 0;
        }
        break;
    case '[':
        j->p++;
        js_ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            break;
        }
        for (;;) {
            if (!js_value(j))
                return 0;
            js_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == ']') {
                j->p++;
                break;
            }
            return 0;
        }
        break;
    case 't':
        j->depth--;
        return js_word(j, "true");
    case 'f':
        j->depth--;
        return js_word(j, "false");
    case 'n':
        j->depth--;
        return js_word(j, "null");
    default:
        j->depth--;
        return js_number(j);
    }
    j->depth--;
    return 1;
}

int tl_json_valid(const char *s, size_t n)
{
    js_t j = {s, s + n, 0};

    if (!js_value(&j))
        return 0;
    js_ws(&j);
    return j.p == j.end;
}

long tl_detail_lines(const char *path, long *bad_line)
{
    size_t len;
    char *text = tl_read(path, &len), *line, *nl;
    long n = 0;

    *bad_line = 0;
    if (!text)
        return -1;
    for (line = text; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) {
            /* Every line ends with a newline. */
            *bad_line = n + 1;
            n = -1;
            break;
        }
        n++;
        if (strncmp(line, ":::MLLOG ", 9) != 0 || line[9] != '{' ||
            !tl_json_valid(line + 9, (size_t)(nl - line - 9))) {
            *bad_line = n;
            n = -1;
            break;
        }
    }
    free(text);
    return n;
}

static const char *find_key(const char *text, const char *key)
{
    char pat[256];

    snprintf(pat, sizeof(pat), "{\"key\": \"%s\", \"value\": ", key);
    return strstr(text, pat) ? strstr(text, pat) + strlen(pat) : NULL;
}

const char *tl_detail_value(const char *path, const char *key, char *buf, size_t len)
{
    char *text = tl_read(path, NULL);
    const char *v, *e;

    buf[0] = '\0';
    if (!text)
        return buf;
    v = find_key(text, key);
    if (v) {
        e = strstr(v, ", \"time_ms\": ");
        if (e && (size_t)(e - v) < len) {
            memcpy(buf, v, (size_t)(e - v));
            buf[e - v] = '\0';
        }
    }
    free(text);
    return buf;
}

int tl_detail_count(const char *path, const char *key)
{
    char *text = tl_read(path, NULL), pat[256];
    const char *p;
    int n = 0;

    if (!text)
        return 0;
    snprintf(pat, sizeof(pat), "{\"key\": \"%s\", ", key);
    for (p = text; (p = strstr(p, pat)); p++)
        n++;
    free(text);
    return n;
}
