# The build's identity for `--version` and the detail log: the git commit (with "-dirty" when the
# tree had uncommitted changes), its date, and the build date (UTC). Regenerated at every build
# (target build_info), written only when the commit changes, so an unchanged tree rebuilds nothing.
# Outside a git checkout (a tarball made with `git archive`) the commit comes from
# cmake/git-commit.txt, which git fills in on export (.gitattributes: export-subst); otherwise
# "unknown". SOURCE_DATE_EPOCH, when set, fixes the build date (reproducible builds).
#   include(BuildInfo)  ->  target build_info (INTERFACE): #include "build_info.h"
set(BUILD_INFO_DIR ${PROJECT_BINARY_DIR}/build_info)
add_custom_target(build_info_gen
    COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${BUILD_INFO_DIR}/build_info.h
            -P ${PROJECT_SOURCE_DIR}/cmake/build_info_gen.cmake
    BYPRODUCTS ${BUILD_INFO_DIR}/build_info.h
    COMMENT "build_info.h: git commit and build date"
    VERBATIM)
add_library(build_info INTERFACE)
target_include_directories(build_info INTERFACE ${BUILD_INFO_DIR})
add_dependencies(build_info build_info_gen)
