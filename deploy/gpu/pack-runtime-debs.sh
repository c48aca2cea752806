#!/usr/bin/env bash
# pack-runtime-debs.sh: fetches, on a Debian/Ubuntu machine with working apt sources, the runtime
# packages that sut-node, loadgen-node, the onnx backend and its tests need and that a CUDA-only
# GPU machine (an NVIDIA CUDA image: driver, CUDA runtime, cuBLAS, cuDNN, nothing else) lacks, so
# they can be carried to a GPU host without network access and unpacked there without root
# (runtime-env.sh). apt-get download only: nothing is installed, no root is needed here.
#
#   deploy/gpu/pack-runtime-debs.sh OUTDIR [--data]
#
# --data also fetches the test data the GPU tests compare against: the ONNX node test vectors
# (libonnx-testdata) and the Fashion-MNIST test set (only its two t10k files are kept, 4.4 MB,
# from dataset-fashion-mnist). OUTDIR/MANIFEST lists every package, version and sha256.
#
# The packages come from this machine's apt sources, so build the binaries on the same release
# (their glibc must not be newer than the GPU host's: compare `ldd --version` on both).
set -euo pipefail

usage() {
    echo "usage: $0 OUTDIR [--data]" >&2
    exit 2
}
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi
[ $# -ge 1 ] || usage
out=$1
shift
data=0
while [ $# -gt 0 ]; do
    case $1 in
    --data) data=1 ;;
    *) usage ;;
    esac
    shift
done
command -v apt-get >/dev/null || { echo "$0: needs apt-get (a Debian or Ubuntu machine)" >&2; exit 1; }

# What the binaries link (ldd of sut-node, loadgen-node, the onnx plugin, test_onnx_cuda,
# onnx_bench), minus what every Debian/Ubuntu system has (libc6, libgcc-s1, libstdc++6, zlib1g):
#   libuv1 (I/O), libprotobuf-c1 (wire and ONNX schema), liblz4-1 (compression), libssl3 (TLS),
#   libdnnl2 (the CPU engine) with libgomp1 and the OpenCL loader it links, libsubunit0 (Check).
runtime=(libuv1 libprotobuf-c1 liblz4-1 libssl3 libdnnl2 libgomp1 ocl-icd-libopencl1 libsubunit0)

# Releases after Debian 12 / Ubuntu 22.04 renamed some libraries for the 64-bit time_t move.
resolve() {
    local p
    for p in "$1" "${1}t64"; do
        if apt-cache show "$p" >/dev/null 2>&1; then
            echo "$p"
            return 0
        fi
    done
    echo "$0: no package $1 (nor ${1}t64) in the apt lists; run apt-get update, or check the name" \
        "for this release" >&2
    return 1
}

mkdir -p "$out"
out=$(cd "$out" && pwd)
pkgs=()
for p in "${runtime[@]}"; do
    pkgs+=("$(resolve "$p")")
done
if [ "$data" = 1 ]; then
    pkgs+=("$(resolve libonnx-testdata)")
fi
(cd "$out" && apt-get download "${pkgs[@]}")

if [ "$data" = 1 ]; then
    # Only the test set: the training set would triple what has to be carried.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    fm=$(resolve dataset-fashion-mnist)
    (cd "$tmp" && apt-get download "$fm" && dpkg-deb -x ./*.deb x)
    mkdir -p "$out/fashion-mnist"
    cp "$tmp"/x/usr/share/datasets/fashion-mnist/t10k-*-ubyte.gz "$out/fashion-mnist/"
fi

{
    echo "# packages fetched by pack-runtime-debs.sh on $(. /etc/os-release && echo "$PRETTY_NAME")," \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    for d in "$out"/*.deb; do
        printf '%s %s %s %s\n' "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Version)" \
            "$(dpkg-deb -f "$d" Architecture)" "$(sha256sum "$d" | cut -d' ' -f1)"
    done
    if [ -d "$out/fashion-mnist" ]; then
        (cd "$out" && sha256sum fashion-mnist/*)
    fi
} >"$out/MANIFEST"
echo "$out: $(ls "$out"/*.deb | wc -l) packages, $(du -sh "$out" | cut -f1); unpack on the GPU host with:"
echo "  . deploy/gpu/runtime-env.sh $out [PREFIX]"
