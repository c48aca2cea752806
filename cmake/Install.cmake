# What `cmake --install` installs, by component (CPack makes one Debian package of each, see
# cmake/Packaging.cmake):
#   daemon   sut-node, the onnx backend as a plugin (and the CUDA engine where it is built), the
#            systemd unit and its config (/etc/mlperf/sut-node.conf)
#   loadgen  loadgen-node, the deploy, data and submission tools
#   lib      the shared QDL (libqdl.so.0)
#   dev      qdl/qdl.h, sut/sut_backend.h, libqdl.so and libqdl.a, pkg-config files (qdl,
#            sut-backend) and a CMake package (find_package(MLPerfNetwork))
# Included by the top-level CMakeLists.txt after every module; the daemon's own install rules
# (sut-node/, its onnx backend) get their component from CMAKE_INSTALL_DEFAULT_COMPONENT_NAME.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Plugins live in <prefix>/lib/sut-node, where the onnx backend also looks for its CUDA engine
# (next to the executable's ../lib/sut-node): not the multiarch library folder.
set(SUT_PLUGIN_DIR lib/sut-node)
set(SUT_PLUGIN_FULL_DIR ${CMAKE_INSTALL_PREFIX}/${SUT_PLUGIN_DIR})
# sut-node --backend NAME looks there too (sut-node/src/plugins.h), after its own ../lib/sut-node.
target_compile_definitions(sut_core PRIVATE SUT_PLUGIN_INSTALL_DIR="${SUT_PLUGIN_FULL_DIR}")
set(MLPN_DATADIR ${CMAKE_INSTALL_DATADIR}/mlperf-network)

# ---- daemon --------------------------------------------------------------------------------------
foreach(_plugin sut_backend_onnx_plugin sut_backend_openai sut_backend_kserve)
    if(TARGET ${_plugin})
        install(TARGETS ${_plugin} LIBRARY DESTINATION ${SUT_PLUGIN_DIR} COMPONENT daemon)
    endif()
endforeach()
# The unit as committed starts /usr/local/bin/sut-node (a hand install); the installed one starts
# the installed program.
file(READ ${PROJECT_SOURCE_DIR}/deploy/systemd/sut-node.service _unit)
string(REPLACE "/usr/local/bin/sut-node" "${CMAKE_INSTALL_FULL_BINDIR}/sut-node" _unit "${_unit}")
file(WRITE ${PROJECT_BINARY_DIR}/install/sut-node.service "${_unit}")
install(FILES ${PROJECT_BINARY_DIR}/install/sut-node.service
        DESTINATION lib/systemd/system COMPONENT daemon)
# The config the unit reads: /etc/mlperf with the prefix /usr (the packages), <prefix>/etc/mlperf
# otherwise.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(_confdir ${CMAKE_INSTALL_FULL_SYSCONFDIR}/mlperf)
else()
    set(_confdir ${CMAKE_INSTALL_SYSCONFDIR}/mlperf)
endif()
install(FILES deploy/systemd/sut-node.conf DESTINATION ${_confdir} COMPONENT daemon)

# ---- loadgen -------------------------------------------------------------------------------------
install(TARGETS loadgen-node RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT loadgen)

# The shared QDL: the static qdl archive whole, with cmn, cmpr and the protocol code it needs
# (all built position-independent), exporting qdl_* only (cmake/install/qdl.map).
file(WRITE ${PROJECT_BINARY_DIR}/install/qdl_shared.c
     "/* The shared QDL is the qdl archive linked whole; this file only gives CMake a source. */\n"
     "typedef int qdl_shared_placeholder_t;\n")
add_library(qdl_shared SHARED ${PROJECT_BINARY_DIR}/install/qdl_shared.c)
target_link_libraries(qdl_shared PRIVATE -Wl,--whole-archive qdl -Wl,--no-whole-archive)
target_link_options(qdl_shared PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/install/qdl.map)
if(NOT ASAN AND NOT TSAN)
    target_link_options(qdl_shared PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(qdl_shared PROPERTIES OUTPUT_NAME qdl VERSION ${PROJECT_VERSION}
                                            SOVERSION ${PROJECT_VERSION_MAJOR}
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/install/qdl.map)
install(TARGETS qdl_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_SKIP)
install(TARGETS qdl_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev NAMELINK_ONLY)

# Tools for the LoadGen host and the fleet, in <prefix>/share/mlperf-network.
install(PROGRAMS deploy/tls/make-certs.sh DESTINATION ${MLPN_DATADIR}/tls COMPONENT loadgen)
install(PROGRAMS deploy/metadata/netmeta.py DESTINATION ${MLPN_DATADIR}/metadata COMPONENT loadgen)
install(PROGRAMS deploy/plot/latplot.py deploy/plot/runs.py DESTINATION ${MLPN_DATADIR}/plot
        COMPONENT loadgen)
install(PROGRAMS deploy/slurm/mlperf-network.sbatch DESTINATION ${MLPN_DATADIR}/slurm
        COMPONENT loadgen)
install(DIRECTORY deploy/k8s/ DESTINATION ${MLPN_DATADIR}/k8s COMPONENT loadgen
        FILES_MATCHING PATTERN "*.yaml")
install(PROGRAMS deploy/k8s/check-manifests.py DESTINATION ${MLPN_DATADIR}/k8s COMPONENT loadgen)
install(PROGRAMS loadgen-node/tools/accuracy_classification.py loadgen-node/tools/fmnist_to_npy.py
                 loadgen-node/tools/llm_pickle_to_qsl.py loadgen-node/tools/make_llm_tokens.py
        DESTINATION ${MLPN_DATADIR}/tools COMPONENT loadgen)
# The submission runner (submit.py and its netsub package; it finds netmeta.py at ../metadata).
install(PROGRAMS deploy/submission/submit.py DESTINATION ${MLPN_DATADIR}/submission
        COMPONENT loadgen)
install(DIRECTORY deploy/submission/netsub DESTINATION ${MLPN_DATADIR}/submission
        COMPONENT loadgen FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
# The emulated fabric (network namespaces); its delay relay is a program, so in libexec.
install(PROGRAMS deploy/netns/fabric.sh DESTINATION ${MLPN_DATADIR}/netns COMPONENT loadgen)
if(TARGET delay-relay)
    install(TARGETS delay-relay RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/mlperf-network
            COMPONENT loadgen)
endif()

# ---- what every package carries: copyright, changelog, man pages ---------------------------------
# /usr/share/doc/<package>/{copyright,changelog.gz} as Debian policy asks (a native package's
# changelog is changelog.gz), from deploy/package/debian; the man pages from each program's --help.
set(MLPN_CHANGELOG_DATE "")
execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} log -1 --format=%H%n%aD
                OUTPUT_VARIABLE _head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE _git_rc)
if(_git_rc EQUAL 0 AND _head MATCHES "^([0-9a-f]+)\n(.+)$")
    set(MLPN_COMMIT ${CMAKE_MATCH_1})
    set(MLPN_CHANGELOG_DATE "${CMAKE_MATCH_2}")
else()
    set(MLPN_COMMIT "unknown (not built from a git checkout)")
    string(TIMESTAMP MLPN_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
if(NOT DEFINED MLPN_PACKAGE_MAINTAINER)
    set(MLPN_PACKAGE_MAINTAINER "MLPerf Network-division harness maintainers <mlperf-network@example.org>")
endif()
configure_file(deploy/package/debian/changelog.in ${PROJECT_BINARY_DIR}/install/changelog @ONLY)
find_program(GZIP_PROGRAM gzip)
find_program(HELP2MAN_PROGRAM help2man)
set(_doc_files ${PROJECT_SOURCE_DIR}/deploy/package/debian/copyright)
if(GZIP_PROGRAM)
    # -n: no name or time stamp in the header, so the same input gives the same bytes.
    execute_process(COMMAND ${GZIP_PROGRAM} -n -9 -f -k ${PROJECT_BINARY_DIR}/install/changelog)
    list(APPEND _doc_files ${PROJECT_BINARY_DIR}/install/changelog.gz)
endif()
foreach(_c daemon loadgen lib dev)
    set(_pkg_daemon mlperf-network-sut-node)
    set(_pkg_loadgen mlperf-network-loadgen)
    set(_pkg_lib libqdl0)
    set(_pkg_dev mlperf-network-dev)
    install(FILES ${_doc_files} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_pkg_${_c}} COMPONENT ${_c})
endforeach()
# Man pages: help2man runs the built program's --help and --version (the target `manpages`;
# deploy/package/build-debs.sh builds it and needs help2man). Without help2man, none is installed.
if(HELP2MAN_PROGRAM AND GZIP_PROGRAM)
    set(_man_outputs)
    foreach(_prog_comp "sut-node|daemon|SUT daemon of the MLPerf Inference Network-division harness"
                       "loadgen-node|loadgen|LoadGen node of the MLPerf Inference Network-division harness")
        string(REPLACE "|" ";" _pc "${_prog_comp}")
        list(GET _pc 0 _prog)
        list(GET _pc 1 _comp)
        list(GET _pc 2 _what)
        if(NOT TARGET ${_prog})
            continue()
        endif()
        set(_man ${PROJECT_BINARY_DIR}/install/man/${_prog}.1)
        add_custom_command(OUTPUT ${_man}.gz
            COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/install/man
            COMMAND ${HELP2MAN_PROGRAM} --no-info --no-discard-stderr --name=${_what}
                    --output=${_man} $<TARGET_FILE:${_prog}>
            COMMAND ${GZIP_PROGRAM} -n -9 -f ${_man}
            DEPENDS ${_prog}
            COMMENT "man page of ${_prog} from its --help"
            VERBATIM)
        list(APPEND _man_outputs ${_man}.gz)
        install(FILES ${_man}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${_comp} OPTIONAL)
    endforeach()
    add_custom_target(manpages DEPENDS ${_man_outputs})
endif()

# ---- dev -----------------------------------------------------------------------------------------
install(FILES qdl/include/qdl/qdl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qdl COMPONENT dev)
install(FILES sut-node/include/sut/sut_backend.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sut COMPONENT dev)

# The static QDL: one archive holding qdl, cmn, cmpr and the protocol code (a static consumer
# then links libqdl.a and the Debian libraries named in qdl.pc's Requires.private).
# With endpoint nodes (issue 39) the QDL also holds the HTTP client and the engines' dialects,
# and a static consumer links libcurl, cJSON and yajl (qdl.pc and the CMake package say so).
set(_qdl_static_extra "")
set(_qdl_static_deps qdl cmpr cmn cmn_base nsut_proto)
set(QDL_PC_REQUIRES_EXTRA "")
set(QDL_CMAKE_LINK_EXTRA "")
if(TARGET httpc_oai)
    set(_qdl_static_extra "addlib $<TARGET_FILE:httpc>\naddlib $<TARGET_FILE:httpc_oai>\n")
    list(APPEND _qdl_static_deps httpc httpc_oai)
    set(QDL_PC_REQUIRES_EXTRA " libcurl libcjson yajl")
    set(QDL_CMAKE_LINK_EXTRA ";curl;cjson;yajl")
endif()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/install/qdl_static.mri CONTENT
"create ${PROJECT_BINARY_DIR}/install/libqdl.a
addlib $<TARGET_FILE:qdl>
addlib $<TARGET_FILE:cmpr>
addlib $<TARGET_FILE:cmn>
addlib $<TARGET_FILE:cmn_base>
addlib $<TARGET_FILE:nsut_proto>
${_qdl_static_extra}save
end
")
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/install/libqdl.a
    COMMAND ${CMAKE_COMMAND} -E rm -f ${PROJECT_BINARY_DIR}/install/libqdl.a
    COMMAND sh -c "${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/install/qdl_static.mri"
    DEPENDS ${_qdl_static_deps} ${PROJECT_BINARY_DIR}/install/qdl_static.mri
    COMMENT "libqdl.a: qdl with cmn, cmpr and the protocol code"
    VERBATIM)
add_custom_target(qdl_static_archive ALL DEPENDS ${PROJECT_BINARY_DIR}/install/libqdl.a)
install(FILES ${PROJECT_BINARY_DIR}/install/libqdl.a DESTINATION ${CMAKE_INSTALL_LIBDIR}
        COMPONENT dev)

# pkg-config files find the prefix from where they lie (${pcfiledir}): relocatable.
file(RELATIVE_PATH PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/install/qdl.pc.in ${PROJECT_BINARY_DIR}/install/qdl.pc @ONLY)
configure_file(cmake/install/sut-backend.pc.in ${PROJECT_BINARY_DIR}/install/sut-backend.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/qdl.pc ${PROJECT_BINARY_DIR}/install/sut-backend.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

set(_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/MLPerfNetwork)
configure_package_config_file(cmake/install/MLPerfNetworkConfig.cmake.in
    ${PROJECT_BINARY_DIR}/install/MLPerfNetworkConfig.cmake
    INSTALL_DESTINATION ${_cmakedir}
    PATH_VARS SUT_PLUGIN_DIR CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/MLPerfNetworkConfigVersion.cmake
    COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/MLPerfNetworkConfig.cmake
              ${PROJECT_BINARY_DIR}/install/MLPerfNetworkConfigVersion.cmake
        DESTINATION ${_cmakedir} COMPONENT dev)
