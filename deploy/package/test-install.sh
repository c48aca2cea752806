#!/usr/bin/env bash
# `cmake --install` of a build into a temporary folder (DESTDIR), then what a user of the install
# does with it: every promised file is there, the installed sut-node finds its plugins by name
# (--list-backends), and a program that includes qdl/qdl.h and
# sut/sut_backend.h builds and runs against it through find_package(MLPerfNetwork) (shared and
# static QDL) and through pkg-config (qdl, sut-backend).
#
#   Usage: deploy/package/test-install.sh BUILD_DIR
set -euo pipefail
case "${1:-}" in
    ""|-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "$([[ -z ${1:-} ]] && echo 2 || echo 0)" ;;
esac
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/test-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-install: FAILED: $*"; exit 1; }

DESTDIR=$tmp/root cmake --install "$build" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
p=$tmp/root$prefix
libdir=$(dirname "$(find "$p" -name libqdl.so.0 -print -quit)")
[[ -n $libdir && $libdir != . ]] || fail "no libqdl.so.0 under $p"
for f in bin/sut-node bin/loadgen-node include/qdl/qdl.h include/sut/sut_backend.h \
         lib/systemd/system/sut-node.service share/mlperf-network/tls/make-certs.sh \
         share/mlperf-network/k8s/sut-node-daemonset.yaml; do
    [[ -e $p/$f ]] || fail "$prefix/$f was not installed"
done
for f in libqdl.so libqdl.a pkgconfig/qdl.pc pkgconfig/sut-backend.pc \
         cmake/MLPerfNetwork/MLPerfNetworkConfig.cmake; do
    [[ -e $libdir/$f ]] || fail "${libdir#$tmp/root}/$f was not installed"
done
find "$tmp/root" -name sut-node.conf | grep . >/dev/null || fail "no sut-node.conf installed"
grep -q "^ExecStart=$prefix/bin/sut-node " "$p/lib/systemd/system/sut-node.service" ||
    fail "the installed unit does not start $prefix/bin/sut-node"
if grep -q '^SUT_HAVE_ONNX:INTERNAL=ON' "$build/CMakeCache.txt"; then
    [[ -e $p/lib/sut-node/libsut_backend_onnx.so ]] || fail "the onnx plugin was not installed"
fi
# The installed sut-node finds the installed plugins by name (next to it: ../lib/sut-node).
for be in openai kserve; do
    grep -q "^SUT_HAVE_${be^^}:INTERNAL=ON" "$build/CMakeCache.txt" || continue
    "$p/bin/sut-node" --list-backends | grep -q "^  $be  *$p/lib/sut-node/libsut_backend_$be.so\$" ||
        fail "the installed sut-node does not list its $be plugin: $("$p/bin/sut-node" --list-backends)"
done
nm -D --defined-only "$libdir/libqdl.so" | awk '{print $3}' | grep -v '^qdl_[a-z]' &&
    fail "libqdl.so exports more than the qdl_ API (above)"

mkdir -p "$tmp/src"
cat >"$tmp/src/q.c" <<'C'
#include <qdl/qdl.h>
#include <sut/sut_backend.h>
#include <stdio.h>
int main(void)
{
    qdl_config_t c;
    qdl_config_init(&c);
    printf("qdl config ok (policy %d), plugin ABI %d\n", (int)c.policy, SUT_BACKEND_ABI_VERSION);
    return 0;
}
C
cat >"$tmp/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(MLPerfNetwork 0.1 REQUIRED)
add_executable(q_shared q.c)
target_link_libraries(q_shared PRIVATE MLPerfNetwork::qdl MLPerfNetwork::sut_backend)
add_executable(q_static q.c)
target_link_libraries(q_static PRIVATE MLPerfNetwork::qdl_static MLPerfNetwork::sut_backend)
CM
cmake -S "$tmp/src" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$p" >/dev/null || fail "find_package(MLPerfNetwork)"
cmake --build "$tmp/b" >/dev/null || fail "building against MLPerfNetwork::qdl"
LD_LIBRARY_PATH=$libdir "$tmp/b/q_shared" || fail "the find_package program (shared) did not run"
"$tmp/b/q_static" || fail "the find_package program (static) did not run"
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -o "$tmp/q_pc" "$tmp/src/q.c" $(pkg-config --cflags --libs qdl sut-backend) || fail "pkg-config qdl"
LD_LIBRARY_PATH=$libdir "$tmp/q_pc" || fail "the pkg-config program did not run"
echo "test-install: every file in place; find_package and pkg-config consumers build and run"
