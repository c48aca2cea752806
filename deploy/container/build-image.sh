#!/usr/bin/env bash
# Builds the container image the Kubernetes manifests name (mlperf-network:<version>) from
# deploy/container/Containerfile with buildah: Debian 12 plus this checkout's .deb packages
# (deploy/package/build-debs.sh), then checks the manifests against the image
# (deploy/k8s/check-manifests.py --image-root: every container command is in the image, and the
# image's sut-node starts with the ConfigMap's config). Prints the image's size.
#
#   Usage: deploy/container/build-image.sh [--debs DIR] [--base IMAGE]
#     --debs DIR     the .debs to install (default: build them in build-deb/)
#     --base IMAGE   the Debian 12 base image (default: localhost/debian-debootstrap:12, imported
#                    once from a debootstrap minbase root: no registry needed; only the Debian
#                    mirror of this machine's apt sources, which the build's apt uses)
#
# Needs root and buildah (apt-get install buildah); the build runs with chroot isolation and the
# host's network, so it works where no container runtime can start.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
debs="" base=localhost/debian-debootstrap:12
while [[ $# -gt 0 ]]; do
    case "$1" in
        --debs) debs=$2; shift ;;
        --base) base=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
command -v buildah >/dev/null || { echo "build-image: buildah is missing (apt-get install buildah)" >&2; exit 3; }
[[ $(id -u) -eq 0 ]] || { echo "build-image: run as root" >&2; exit 3; }
version=$(sed -n 's/^project(mlperf_network VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
image=mlperf-network:$version

if [[ $base == localhost/debian-debootstrap:12 ]] && ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    echo "build-image: importing $base from a debootstrap minbase root"
    tarball=${FRESH_ROOT_TAR:-/tmp/fresh-root.tar.zst}
    if [[ ! -s $tarball ]]; then
        fresh=${FRESH_ROOT:-$root/../shared/tools/fresh-root.sh}
        [[ -x $fresh ]] || { echo "build-image: no $tarball and no fresh-root tool to make it" >&2; exit 3; }
        "$fresh" create
    fi
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    tar -x --numeric-owner -C "$mnt" --use-compress-program="zstd -d" -f "$tarball"
    # The Debian entries of this machine's apt sources (a debootstrap root has none).
    mkdir -p "$mnt/etc/apt/sources.list.d"
    rm -f "$mnt/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/debian.sources "$mnt/etc/apt/sources.list.d/" 2>/dev/null ||
        cp /etc/apt/sources.list "$mnt/etc/apt/"
    buildah umount "$ctr" >/dev/null
    buildah config --cmd /bin/bash "$ctr"
    buildah commit -q "$ctr" "$base" >/dev/null
    buildah rm "$ctr" >/dev/null
fi

if [[ -z $debs ]]; then
    "$root/deploy/package/build-debs.sh" >/dev/null
    debs=$root/build-deb/packages
fi
ctx=$(mktemp -d /tmp/build-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$debs"/mlperf-network-sut-node_*.deb "$debs"/mlperf-network-loadgen_*.deb "$ctx/"
buildah bud -q --isolation chroot --network host --build-arg BASE="$base" \
    -f "$root/deploy/container/Containerfile" -t "$image" "$ctx" >/dev/null

# The manifests against the image: its file system, mounted read-only through a working container.
ctr=$(buildah from -q "$image")
mnt=$(buildah mount "$ctr")
status=0
python3 "$root/deploy/k8s/check-manifests.py" "$root/deploy/k8s" --image-root "$mnt" --image "$image" || status=$?
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$image"
exit $status
