#!/usr/bin/env bash
# Builds the Debian packages (cmake/Packaging.cmake) from this checkout: a Release build for the
# system prefix in build-deb/, only the targets the packages hold, then cpack. Prints the paths.
#
#   Usage: deploy/package/build-debs.sh [BUILD_DIR]   (default: build-deb/ in the checkout)
#
# Packages: mlperf-network-sut-node (sut-node, its onnx, openai and kserve plugins, the systemd unit and
# /etc/mlperf/sut-node.conf), mlperf-network-loadgen (loadgen-node, libqdl.so.0, the tools in
# /usr/share/mlperf-network), mlperf-network-dev (headers, libqdl.so/.a, pkg-config, CMake).
set -euo pipefail
case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-deb}
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: cpack installs what is built below instead of building every
# target (the tests, the benchmarks) first.
cmake -S "$root" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release -DWERROR=ON \
    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
targets=(sut-node loadgen-node qdl_shared qdl_static_archive)
grep -q '^SUT_HAVE_ONNX:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_onnx_plugin)
grep -q '^SUT_HAVE_ONNX_CUDA:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_onnx_cuda)
grep -q '^SUT_HAVE_OPENAI:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_openai)
grep -q '^SUT_HAVE_KSERVE:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_kserve)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
rm -f "$build"/packages/*.deb
(cd "$build" && cpack >/dev/null)
ls "$build"/packages/*.deb
