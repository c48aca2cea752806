# Debian packages with CPack, one per install component (cmake/Install.cmake):
#   mlperf-network-sut-node   daemon: sut-node, the onnx plugin, the systemd unit and its config
#   mlperf-network-loadgen    loadgen: loadgen-node, the deploy, data and submission tools
#   libqdl0                   lib: the shared QDL, libqdl.so.0
#   mlperf-network-dev        dev: headers, libqdl.so/.a, pkg-config files, the CMake package
# Runtime dependencies come from dpkg-shlibdeps (the Debian libraries the binaries link).
# Build them from a build configured for the system prefix (deploy/package/build-debs.sh):
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-deb -j && (cd build-deb && cpack)
# Lintian-clean (CI runs lintian on them, .ci/run step packages): one synopsis each, the
# copyright and changelog of deploy/package/debian in /usr/share/doc/<package>, man pages made from
# --help (help2man; cmake/Install.cmake), stripped binaries, and the shared QDL in a package named
# after its soname (libqdl0, with its shlibs and an ldconfig trigger: deploy/package/build-debs.sh
# finishes the control files CPack cannot).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mlperf-network)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "MLPerf Inference Network-division harness")
# Who the packages name as maintainer: a site that ships them sets its own.
set(MLPN_PACKAGE_MAINTAINER "MLPerf Network-division harness maintainers <mlperf-network@example.org>"
    CACHE STRING "Maintainer field of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${MLPN_PACKAGE_MAINTAINER}")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPack would put that one synopsis before every package's
# own; each CPACK_DEBIAN_<COMPONENT>_DESCRIPTION below starts with its synopsis line.
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon loadgen lib dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME mlperf-network-sut-node)
# One string each (a CMake list would join its lines with ";"), lines under 80 columns.
set(CPACK_DEBIAN_DAEMON_DESCRIPTION "SUT daemon of the MLPerf Inference Network-division harness
sut-node runs on each accelerator host: it receives the samples of
LoadGen's queries over the network, batches them, runs a backend (ONNX
models on oneDNN, an OpenAI-compatible or KServe serving engine, a
simulator, plugins) and streams the responses back. Includes the systemd
unit and /etc/mlperf/sut-node.conf.")
# /etc/mlperf/sut-node.conf is the administrator's: dpkg keeps their edits on upgrade.
file(WRITE ${PROJECT_BINARY_DIR}/install/conffiles "/etc/mlperf/sut-node.conf\n")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/install/conffiles)
endif()

set(CPACK_DEBIAN_LOADGEN_PACKAGE_NAME mlperf-network-loadgen)
set(CPACK_DEBIAN_LOADGEN_DESCRIPTION "LoadGen node of the MLPerf Inference Network-division harness
loadgen-node runs the MLPerf scenarios (the official LoadGen's trace,
metrics and logs) and sends every sample through the QDL to sut-node
daemons. With the tools for the data sets (LLM token QSLs included),
accuracy, the submission runner, the system description, latency plots,
TLS, the network-namespace fabric, Slurm and Kubernetes, in
/usr/share/mlperf-network.")
# The Python tools (accuracy, data sets, metadata, the runner) need numpy (pandas for the LLM
# pickles), the official submission checker the runner calls needs yaml; the rest is shlibdeps'.
set(CPACK_DEBIAN_LOADGEN_PACKAGE_RECOMMENDS "python3, python3-numpy, python3-yaml, openssl")
set(CPACK_DEBIAN_LOADGEN_PACKAGE_SUGGESTS "python3-pandas, iproute2")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libqdl0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "Query Dispatch Library of the MLPerf Network-division harness
libqdl looks like one SUT to an MLPerf LoadGen and sends every query's
samples over TCP, TLS or UCX to sut-node daemons, balancing them over the
nodes and streaming the responses back. This package holds the shared
library; mlperf-network-dev has the headers.")
# The shlibs file of libqdl0 (a package without a versioned library gets none).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME mlperf-network-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Development files of the MLPerf Network-division harness
qdl/qdl.h and libqdl (shared and static) for harnesses that drive
sut-nodes, and sut/sut_backend.h for sut-node backend plugins;
pkg-config files (qdl, sut-backend) and find_package(MLPerfNetwork).")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libqdl0 (= ${PROJECT_VERSION}), libuv1-dev, liblz4-dev, libprotobuf-c-dev, libssl-dev, libucx-dev, libcurl4-openssl-dev, libcjson-dev, libyajl-dev")

include(CPack)
