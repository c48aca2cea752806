/* Backend plugins found by name: `--backend NAME` loads libsut_backend_NAME.so from the first
 * folder that has it, of
 *   1. each folder of $SUT_NODE_BACKEND_PATH (colon-separated), then
 *   2. from the build tree (the executable lies in the build's sut-node/): the build's
 *      sut-node/backends; from an install: the executable's ../lib/sut-node (a relocated
 *      install, `cmake --install --prefix`), then <CMAKE_INSTALL_PREFIX>/lib/sut-node (the
 *      packages' /usr/lib/sut-node).
 * In each folder the plugin may lie at its top or in a subfolder of its name (the build tree's
 * backends/NAME/). Folders come only from the node's own build, environment and executable,
 * never from a peer. */
#ifndef SUT_PLUGINS_H
#define SUT_PLUGINS_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdio.h>

#define SUT_PLUGIN_PREFIX "libsut_backend_"
#define SUT_PLUGIN_SUFFIX ".so"

/* 0 and the path of plugin |name| in *path (malloc'ed); or CMN_ECONFIG with why[0..whylen)
 * naming the folders searched and the plugins found there. */
int sut__plugin_find(const char *name, char **path, char *why, size_t whylen);

/* One line per plugin found ("  NAME  PATH"), then the folders searched, for --help and
 * --list-backends. */
void sut__plugins_print(FILE *f);

#endif
