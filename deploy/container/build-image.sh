#!/usr/bin/env bash
# Builds the container image the Kubernetes manifests name (mlperf-network:<version>) from
# deploy/container/Containerfile with buildah: Debian 12 plus this checkout's .deb packages
# (deploy/package/build-debs.sh), then checks the manifests against the image
# (deploy/k8s/check-manifests.py --image-root: every container command is in the image, and the
# image's sut-node starts with the ConfigMap's config). Prints the image's size.
#
#   Usage: deploy/container/build-image.sh [--debs DIR] [--base IMAGE]
#     --debs DIR     the .debs to install (default: build them in build-deb/)
#     --base IMAGE   the Debian 12 base image (default: localhost/debian-debootstrap:12, built
#                    once by deploy/container/make-base.sh from a debootstrap minbase root: no
#                    registry needed; only the Debian mirror of this machine's apt sources)
#
# Needs root, buildah and debootstrap (apt-get install buildah debootstrap); the build runs with
# chroot isolation and the host's network, so it works where no container runtime can start.
# The image runs as the unprivileged user mlperf (10001) and carries OCI labels (version, the
# commit, the creation time); Containerfile.gpu is its GPU variant (a recipe: see its header).
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

if [[ $base == localhost/debian-debootstrap:12 ]]; then
    "$root/deploy/container/make-base.sh" --image "$base"
fi

if [[ -z $debs ]]; then
    "$root/deploy/package/build-debs.sh" >/dev/null
    debs=$root/build-deb/packages
fi
ctx=$(mktemp -d /tmp/build-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$debs"/mlperf-network-sut-node_*.deb "$debs"/mlperf-network-loadgen_*.deb "$ctx/"
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
buildah bud -q --isolation chroot --network host --build-arg BASE="$base" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -f "$root/deploy/container/Containerfile" -t "$image" "$ctx" >/dev/null

# Not root, and labelled: what an operator's admission policy and inventory read.
user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
[[ -n $user && ${user%%:*} != 0 && ${user%%:*} != root ]] || { echo "build-image: $image runs as '${user:-root}'" >&2; exit 1; }
buildah inspect --type image --format '{{index .OCIv1.Config.Labels "org.opencontainers.image.revision"}}' "$image" |
    grep -q "$revision" || { echo "build-image: $image lacks its revision label" >&2; exit 1; }
echo "build-image: $image runs as $user, labelled with version $version and revision $revision"

# The manifests against the image: its file system, mounted read-only through a working container.
ctr=$(buildah from -q "$image")
mnt=$(buildah mount "$ctr")
status=0
python3 "$root/deploy/k8s/check-manifests.py" "$root/deploy/k8s" --image-root "$mnt" --image "$image" || status=$?
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$image"
exit $status
