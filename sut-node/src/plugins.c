/* Backend plugins found by name in the plugin folders (plugins.h says which, in what order). */
#include "plugins.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DIRS 16
#define MAX_FOUND 64
#define MAX_NAME 64

typedef struct {
    char *dir[MAX_DIRS];
    size_t n;
} dirs_t;

typedef struct {
    char name[MAX_NAME];
    char *path;
} found_t;

typedef struct {
    found_t f[MAX_FOUND];
    size_t n;
} founds_t;

/* Adds |path| (resolved when it exists, so one folder reached two ways is searched once). */
static void dirs_add(dirs_t *d, const char *path)
{
    char real[PATH_MAX];
    const char *p;
    size_t i;

    if (!*path || d->n == MAX_DIRS)
        return;
    p = realpath(path, real) ? real : path;
    for (i = 0; i < d->n; i++)
        if (strcmp(d->dir[i], p) == 0)
            return;
    d->dir[d->n] = strdup(p);
    if (d->dir[d->n])
        d->n++;
}

#if defined(SUT_BUILD_EXE_DIR) && defined(SUT_BUILD_BACKEND_DIR)
static int same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];

    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}
#endif

static void dirs_collect(dirs_t *d)
{
    const char *env = getenv("SUT_NODE_BACKEND_PATH");
    char exe[PATH_MAX], buf[PATH_MAX + 32], *slash;
    ssize_t len;

    d->n = 0;
    while (env && *env) {
        size_t n = strcspn(env, ":");
        if (n > 0 && n < PATH_MAX) {
            memcpy(buf, env, n);
            buf[n] = '\0';
            dirs_add(d, buf);
        }
        env += n + (env[n] == ':');
    }
    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        exe[0] = '\0';
    else
        exe[len] = '\0';
    slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
#if defined(SUT_BUILD_EXE_DIR) && defined(SUT_BUILD_BACKEND_DIR)
    if (exe[0] && same_dir(exe, SUT_BUILD_EXE_DIR)) {
        dirs_add(d, SUT_BUILD_BACKEND_DIR);
        return;
    }
#endif
    if (exe[0]) {
        snprintf(buf, sizeof(buf), "%s/../lib/sut-node", exe);
        dirs_add(d, buf);
    }
#ifdef SUT_PLUGIN_INSTALL_DIR
    dirs_add(d, SUT_PLUGIN_INSTALL_DIR);
#endif
}

static void dirs_free(dirs_t *d)
{
    size_t i;

    for (i = 0; i < d->n; i++)
        free(d->dir[i]);
    d->n = 0;
}

/* 1 and the plugin's name when |file| is libsut_backend_NAME.so. */
static int plugin_name(const char *file, char *name)
{
    size_t pl = strlen(SUT_PLUGIN_PREFIX), sl = strlen(SUT_PLUGIN_SUFFIX), n = strlen(file);

    if (n <= pl + sl || n - pl - sl >= MAX_NAME || strncmp(file, SUT_PLUGIN_PREFIX, pl) != 0 ||
        strcmp(file + n - sl, SUT_PLUGIN_SUFFIX) != 0)
        return 0;
    memcpy(name, file + pl, n - pl - sl);
    name[n - pl - sl] = '\0';
    return 1;
}

static int is_kind(const char *path, mode_t kind)
{
    struct stat st;

    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* The plugins at |dir|'s top and, with |depth| 1, one folder down; the first of a name wins. */
static void scan_dir(const char *dir, int depth, founds_t *fs)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX], name[MAX_NAME];
    size_t i;

    if (!dp)
        return;
    while ((e = readdir(dp)) != NULL && fs->n < MAX_FOUND) {
        if (e->d_name[0] == '.' ||
            (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
            continue;
        if (plugin_name(e->d_name, name) && is_kind(path, S_IFREG)) {
            for (i = 0; i < fs->n && strcmp(fs->f[i].name, name) != 0; i++)
                ;
            if (i == fs->n && (fs->f[i].path = strdup(path)) != NULL)
                memcpy(fs->f[fs->n++].name, name, sizeof(name));
        } else if (depth > 0 && is_kind(path, S_IFDIR)) {
            scan_dir(path, depth - 1, fs);
        }
    }
    closedir(dp);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const found_t *)a)->name, ((const found_t *)b)->name);
}

static founds_t *scan(const dirs_t *d)
{
    founds_t *fs = calloc(1, sizeof(*fs));
    size_t i;

    if (!fs)
        return NULL;
    for (i = 0; i < d->n; i++)
        scan_dir(d->dir[i], 1, fs);
    qsort(fs->f, fs->n, sizeof(fs->f[0]), by_name);
    return fs;
}

static void founds_free(founds_t *fs)
{
    size_t i;

    for (i = 0; fs && i < fs->n; i++)
        free(fs->f[i].path);
    free(fs);
}

/* Appends to |buf| (always NUL-terminated, truncated at |len|). */
static void append(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);

    if (used + 1 < len)
        snprintf(buf + used, len - used, "%s", s);
}

static int valid_name(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n >= MAX_NAME)
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int sut__plugin_find(const char *name, char **path, char *why, size_t whylen)
{
    char cand[PATH_MAX];
    founds_t *fs;
    dirs_t d;
    size_t i, k;

    *path = NULL;
    if (!valid_name(name)) {
        snprintf(why, whylen,
                 "not a plugin name (1 to %d letters, digits, '_' or '-'); a plugin is also given "
                 "by its path, which has a '/'",
                 MAX_NAME - 1);
        return CMN_ECONFIG;
    }
    dirs_collect(&d);
    for (i = 0; i < d.n && !*path; i++) {
        for (k = 0; k < 2 && !*path; k++) {
            if (k == 0)
                snprintf(cand, sizeof(cand), "%s/" SUT_PLUGIN_PREFIX "%s" SUT_PLUGIN_SUFFIX,
                         d.dir[i], name);
            else
                snprintf(cand, sizeof(cand), "%s/%s/" SUT_PLUGIN_PREFIX "%s" SUT_PLUGIN_SUFFIX,
                         d.dir[i], name, name);
            if (is_kind(cand, S_IFREG))
                *path = strdup(cand);
        }
    }
    if (*path) {
        dirs_free(&d);
        return 0;
    }
    snprintf(why, whylen, "no " SUT_PLUGIN_PREFIX "%s" SUT_PLUGIN_SUFFIX " in", name);
    for (i = 0; i < d.n; i++) {
        append(why, whylen, i ? ", " : " ");
        append(why, whylen, d.dir[i]);
    }
    if (d.n == 0)
        append(why, whylen, " any folder (none to search)");
    append(why, whylen, " (plugins found there:");
    fs = scan(&d);
    for (i = 0; fs && i < fs->n; i++) {
        append(why, whylen, i ? ", " : " ");
        append(why, whylen, fs->f[i].name);
    }
    append(why, whylen, fs && fs->n ? ")" : " none)");
    founds_free(fs);
    dirs_free(&d);
    return CMN_ECONFIG;
}

void sut__plugins_print(FILE *f)
{
    founds_t *fs;
    dirs_t d;
    size_t i;

    dirs_collect(&d);
    fs = scan(&d);
    fprintf(f, "Backend plugins found (--backend NAME):%s\n", fs && fs->n ? "" : " none");
    for (i = 0; fs && i < fs->n; i++)
        fprintf(f, "  %-14s %s\n", fs->f[i].name, fs->f[i].path);
    fprintf(f, "Plugin folders, searched in order ($SUT_NODE_BACKEND_PATH first):%s\n",
            d.n ? "" : " none");
    for (i = 0; i < d.n; i++)
        fprintf(f, "  %s\n", d.dir[i]);
    founds_free(fs);
    dirs_free(&d);
}
