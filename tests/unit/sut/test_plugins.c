/* Backend plugins found by name (plugins.c) in folders of SUT_NODE_BACKEND_PATH: the first folder
 * that has a name wins, a plugin may lie in a subfolder of its name (the build tree's layout) but
 * not deeper, files that are not libsut_backend_NAME.so are no plugins, and a name that is not
 * found or not a name fails with a message that names the folders and the plugins found. */
#include "test_sut.h"

#include "cmn/err.h"
#include "plugins.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void touch(const char *dir, const char *rel)
{
    char path[PATH_MAX];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

static void mkdir_in(const char *dir, const char *rel)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    ck_assert_int_eq(mkdir(path, 0700), 0);
}

START_TEST(plugin_lookup)
{
    char ta[] = "/tmp/sutplugA.XXXXXX", tb[] = "/tmp/sutplugB.XXXXXX";
    char a[PATH_MAX], b[PATH_MAX], env[2 * PATH_MAX + 32], want[3 * PATH_MAX], why[1024];
    char long_name[80], *path = NULL, *listing = NULL, *found;
    size_t listing_len = 0;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(ta));
    ck_assert_ptr_nonnull(mkdtemp(tb));
    ck_assert_ptr_nonnull(realpath(ta, a));
    ck_assert_ptr_nonnull(realpath(tb, b));
    touch(a, "libsut_backend_one.so");
    touch(a, "libsut_backend_.so"); /* no name */
    touch(a, "notaplugin.so");
    mkdir_in(a, "sub");
    mkdir_in(a, "sub/deeper");
    touch(a, "sub/deeper/libsut_backend_deep.so"); /* two folders down: not searched */
    touch(b, "libsut_backend_one.so");             /* shadowed by a's */
    mkdir_in(b, "two");
    touch(b, "two/libsut_backend_two.so");
    snprintf(env, sizeof(env), "%s::%s:/nonexistent-plugin-folder", a, b);
    ck_assert_int_eq(setenv("SUT_NODE_BACKEND_PATH", env, 1), 0);

    ck_assert_int_eq(sut__plugin_find("one", &path, why, sizeof(why)), 0);
    snprintf(want, sizeof(want), "%s/libsut_backend_one.so", a);
    ck_assert_str_eq(path, want);
    free(path);
    ck_assert_int_eq(sut__plugin_find("two", &path, why, sizeof(why)), 0);
    snprintf(want, sizeof(want), "%s/two/libsut_backend_two.so", b);
    ck_assert_str_eq(path, want);
    free(path);

    ck_assert_int_eq(sut__plugin_find("deep", &path, why, sizeof(why)), CMN_ECONFIG);
    ck_assert_ptr_null(path);
    snprintf(want, sizeof(want), "no libsut_backend_deep.so in %s, %s, /nonexistent-plugin-folder",
             a, b);
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s", why);
    found = strstr(why, "(plugins found there: ");
    ck_assert_msg(found && strstr(found, " one") && strstr(found, " two") &&
                      !strstr(found, "deep") && !strstr(found, "notaplugin"),
                  "%s", why);

    ck_assert_int_eq(sut__plugin_find("a b", &path, why, sizeof(why)), CMN_ECONFIG);
    ck_assert_str_eq(why, "not a plugin name (1 to 63 letters, digits, '_' or '-'); a plugin is "
                          "also given by its path, which has a '/'");
    ck_assert_int_eq(sut__plugin_find("", &path, why, sizeof(why)), CMN_ECONFIG);
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    ck_assert_int_eq(sut__plugin_find(long_name, &path, why, sizeof(why)), CMN_ECONFIG);
    ck_assert_ptr_null(path);

    /* A short buffer truncates the message, never overruns. */
    ck_assert_int_eq(sut__plugin_find("deep", &path, why, 16), CMN_ECONFIG);
    ck_assert_uint_eq(strlen(why), 15);

    f = open_memstream(&listing, &listing_len);
    ck_assert_ptr_nonnull(f);
    sut__plugins_print(f);
    fclose(f);
    snprintf(want, sizeof(want), "  one            %s/libsut_backend_one.so\n", a);
    ck_assert_msg(strstr(listing, want), "%s", listing);
    snprintf(want, sizeof(want), "  two            %s/two/libsut_backend_two.so\n", b);
    ck_assert_msg(strstr(listing, want), "%s", listing);
    snprintf(want, sizeof(want),
             "Plugin folders, searched in order ($SUT_NODE_BACKEND_PATH first):\n  %s\n  %s\n"
             "  /nonexistent-plugin-folder\n",
             a, b);
    ck_assert_msg(strstr(listing, want), "%s", listing);
    free(listing);

    unsetenv("SUT_NODE_BACKEND_PATH");
    snprintf(env, sizeof(env), "rm -rf %s %s", a, b);
    ck_assert_int_eq(system(env), 0);
}
END_TEST

CHECK_ONE_TEST_TCASE(plugin_lookup)
