#!/usr/bin/env bash
# Builds a Debian 12 base from Debian's own packages (debootstrap --variant=minbase), with no
# registry: as the container image deploy/container/build-image.sh starts from, or as a root file
# system tarball that deploy/package/test-debs.sh installs the packages into when the shared
# fresh-root tool is not there. The mirror is this machine's (its apt sources, Debian entries
# only); the base's apt sources are the same suite, -updates and -security entries.
#
#   deploy/container/make-base.sh [--image NAME]   a buildah image (default
#                                                  localhost/debian-debootstrap:12)
#   deploy/container/make-base.sh --tar FILE       a root file system tarball (.tar.zst)
#   Options: --suite S (default bookworm), --mirror URL (default: from apt), --force (rebuild)
#
# Needs root and debootstrap (and buildah for an image, zstd for a tarball); about 1-2 minutes.
set -euo pipefail
image=localhost/debian-debootstrap:12 tar="" suite=bookworm mirror="" force=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --image) image=$2; shift ;;
        --tar) tar=$2; shift ;;
        --suite) suite=$2; shift ;;
        --mirror) mirror=$2; shift ;;
        --force) force=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "make-base: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "make-base: $*" >&2; exit 3; }
[[ $(id -u) -eq 0 ]] || die "run as root (debootstrap)"
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
if [[ -n $tar ]]; then
    command -v zstd >/dev/null || die "zstd is missing (apt-get install zstd)"
    [[ $force -eq 0 && -s $tar ]] && { echo "make-base: $tar exists (--force rebuilds it)"; exit 0; }
else
    command -v buildah >/dev/null || die "buildah is missing (apt-get install buildah)"
    if [[ $force -eq 0 ]] && buildah inspect --type image "$image" >/dev/null 2>&1; then
        echo "make-base: $image exists (--force rebuilds it)"
        exit 0
    fi
fi
# The mirror and the entries for the base's apt: this machine's Debian sources for the suite.
entries=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' 2>/dev/null |
    sort -u | grep -E " ${suite}(-updates|-security)?$" || true)
[[ -n $mirror ]] || mirror=$(awk -v s="$suite" '$2 == s {print $1; exit}' <<<"$entries")
[[ -n $mirror ]] || die "no apt source for '$suite' on this machine; give --mirror URL"

root=$(mktemp -d /tmp/make-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "make-base: debootstrap --variant=minbase $suite from $mirror"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; rm -f "$root.log"; die "debootstrap failed"; }
rm -f "$root.log"
# deb822 sources as Debian 12 writes them; no package lists (apt-get update first, as a fresh
# machine needs).
rm -f "$root/etc/apt/sources.list"
mkdir -p "$root/etc/apt/sources.list.d"
{
    if [[ -n $entries ]]; then
        while read -r uri rel; do
            printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n' "$uri" "$rel"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n'
        done <<<"$entries"
    else
        printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n' "$mirror" "$suite"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
} >"$root/etc/apt/sources.list.d/debian.sources"
# (Files only: apt's partial/ folders belong to its _apt user and stay.)
find "$root/var/lib/apt/lists" "$root/var/cache/apt" -type f -delete

if [[ -n $tar ]]; then
    tar -C "$root" --numeric-owner -c . | zstd -q -T0 -o "$tar.part" && mv "$tar.part" "$tar"
    echo "make-base: $tar ($(du -h "$tar" | cut -f1))"
else
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    tar -C "$root" --numeric-owner -c . | tar -C "$mnt" --numeric-owner -x
    buildah umount "$ctr" >/dev/null
    buildah config --cmd /bin/bash "$ctr"
    buildah commit -q "$ctr" "$image" >/dev/null
    buildah rm "$ctr" >/dev/null
    echo "make-base: image $image"
fi
