#!/usr/bin/env bash
# Builds the Debian packages (cmake/Packaging.cmake) from this checkout: a Release build for the
# system prefix in build-deb/, only the targets the packages hold, then cpack. Prints the paths.
#
#   Usage: deploy/package/build-debs.sh [--lintian] [BUILD_DIR]   (default: build-deb/)
#
#   --lintian   also run lintian on the packages; exit 1 on any error or warning it reports
#
# Packages: mlperf-network-sut-node (sut-node, its onnx, openai and kserve plugins, the systemd
# unit and /etc/mlperf/sut-node.conf), mlperf-network-loadgen (loadgen-node, the tools in
# /usr/share/mlperf-network: data sets, accuracy, the submission runner, the fabric), libqdl0 (the
# shared QDL), mlperf-network-dev (headers, libqdl.so/.a, pkg-config, CMake). Each with its
# copyright, changelog and man pages (help2man, installed here when missing and root).
set -euo pipefail
lintian=0
build=""
for a in "$@"; do
    case "$a" in
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --lintian) lintian=1 ;;
        -*) echo "build-debs: unknown option '$a' (see --help)" >&2; exit 2 ;;
        *) build=$a ;;
    esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${build:-$root/build-deb}
[[ $build == /* ]] || build=$PWD/$build
# The packaging tools: help2man (the man pages), lintian when asked. Debian packages.
need=(help2man)
[[ $lintian -eq 1 ]] && need+=(lintian)
missing=()
for p in "${need[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
    [[ $(id -u) -eq 0 ]] || { echo "build-debs: needs ${missing[*]} (apt-get install ${missing[*]})" >&2; exit 2; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 \
        install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: cpack installs what is built below instead of building every
# target (the tests, the benchmarks) first.
cmake -S "$root" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release -DWERROR=ON \
    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
targets=(sut-node loadgen-node qdl_shared qdl_static_archive delay-relay manpages)
grep -q '^SUT_HAVE_ONNX:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_onnx_plugin)
grep -q '^SUT_HAVE_ONNX_CUDA:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_onnx_cuda)
grep -q '^SUT_HAVE_OPENAI:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_openai)
grep -q '^SUT_HAVE_KSERVE:INTERNAL=ON' "$build/CMakeCache.txt" && targets+=(sut_backend_kserve)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
rm -f "$build"/packages/*.deb
# CPack warns (for developers) about each plugin without a soname, which is right for plugins:
# its messages are shown only when it fails.
(cd "$build" && cpack >"$build/cpack.log" 2>&1) || { cat "$build/cpack.log" >&2; exit 1; }

# What CPack cannot write: a package with a shared library in the linker's path gets an ldconfig
# trigger (Debian policy 8.1.1) instead of CPack's postinst/postrm that call ldconfig; nothing
# else is in those scripts, so they go.
finish() {
    local deb=$1 dir
    dir=$(mktemp -d)
    dpkg-deb -R "$deb" "$dir"
    if [[ -f $dir/DEBIAN/postinst ]] && grep -q ldconfig "$dir/DEBIAN/postinst"; then
        for s in postinst postrm; do
            [[ -f $dir/DEBIAN/$s ]] || continue
            if grep -vE '^\s*(#|$|set -e|ldconfig|if \[ "\$1" = "[a-z]+" \]; then|fi|exit 0)' \
                "$dir/DEBIAN/$s" | grep -q .; then
                echo "build-debs: $(basename "$deb"): $s does more than ldconfig; left as it is" >&2
                rm -rf "$dir"
                return
            fi
            rm -f "$dir/DEBIAN/$s"
        done
        if find "$dir/usr/lib" -maxdepth 2 -name '*.so.*' -type f | grep -q .; then
            echo "activate-noawait ldconfig" >"$dir/DEBIAN/triggers"
            chmod 644 "$dir/DEBIAN/triggers"
        fi
        dpkg-deb --root-owner-group -Zxz --build "$dir" "$deb" >/dev/null
    fi
    rm -rf "$dir"
}
for deb in "$build"/packages/*.deb; do finish "$deb"; done
ls "$build"/packages/*.deb
if [[ $lintian -eq 1 ]]; then
    # --fail-on error,warning: lintian-clean means neither.
    lintian --fail-on error,warning --tag-display-limit 0 "$build"/packages/*.deb
    echo "build-debs: lintian reports no error or warning on $(ls "$build"/packages/*.deb | wc -l) packages"
fi
