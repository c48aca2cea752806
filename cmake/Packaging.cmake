# Debian packages with CPack, one per install component (cmake/Install.cmake):
#   mlperf-network-sut-node   daemon: sut-node, the onnx plugin, the systemd unit and its config
#   mlperf-network-loadgen    loadgen: loadgen-node, libqdl.so.0, the deploy and data tools
#   mlperf-network-dev        dev: headers, libqdl.so/.a, pkg-config files, the CMake package
# Runtime dependencies come from dpkg-shlibdeps (the Debian libraries the binaries link).
# Build them from a build configured for the system prefix (deploy/package/build-debs.sh):
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-deb -j && (cd build-deb && cpack)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mlperf-network)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "MLPerf Inference Network-division harness")
set(CPACK_PACKAGE_CONTACT "MLPerf Network-division harness maintainers <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "MLPerf Inference Network-division harness: loadgen-node, the QDL and sut-node")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon loadgen dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME mlperf-network-sut-node)
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "SUT daemon of the MLPerf Inference Network-division harness\n"
    "sut-node runs on each accelerator host: it receives the samples of LoadGen's queries over\n"
    "the network, batches them, runs a backend (ONNX models on oneDNN, a simulator, plugins) and\n"
    "streams the responses back. Includes the systemd unit and /etc/mlperf/sut-node.conf.")
# /etc/mlperf/sut-node.conf is the administrator's: dpkg keeps their edits on upgrade.
file(WRITE ${PROJECT_BINARY_DIR}/install/conffiles "/etc/mlperf/sut-node.conf\n")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/install/conffiles)
endif()

set(CPACK_DEBIAN_LOADGEN_PACKAGE_NAME mlperf-network-loadgen)
set(CPACK_COMPONENT_LOADGEN_DESCRIPTION
    "LoadGen side of the MLPerf Inference Network-division harness\n"
    "loadgen-node runs the MLPerf scenarios (the official LoadGen's trace, metrics and logs) and\n"
    "sends every sample through the QDL (libqdl.so.0) to sut-node daemons. With the tools for\n"
    "the data sets, accuracy, the system description, latency plots, TLS, Slurm and Kubernetes\n"
    "in /usr/share/mlperf-network.")
# The Python tools (accuracy, data sets, metadata) need numpy; the rest is shlibdeps'.
set(CPACK_DEBIAN_LOADGEN_PACKAGE_RECOMMENDS "python3, python3-numpy, openssl")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME mlperf-network-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Development files of the MLPerf Inference Network-division harness\n"
    "qdl/qdl.h and libqdl (shared and static) for harnesses that drive sut-nodes, and\n"
    "sut/sut_backend.h for sut-node backend plugins; pkg-config (qdl, sut-backend) and\n"
    "find_package(MLPerfNetwork).")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "mlperf-network-loadgen (= ${PROJECT_VERSION}), libuv1-dev, liblz4-dev, libprotobuf-c-dev, libssl-dev, libucx-dev")

include(CPack)
