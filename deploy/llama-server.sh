#!/usr/bin/env bash
# llama.cpp's llama-server as Debian packages it, for the real-engine test (tests/engines/
# test_llamacpp.py) and for trying the openai backend's dialect=llamacpp by hand. Debian 12 has no
# llama.cpp; unstable has (llama.cpp-tools, built by Debian's Deep Learning Team). This fetches
# those .debs with apt-get into a private apt root (its own sources list, lists and cache: the
# system's sources and packages are untouched), unpacks them with dpkg-deb -x into a cache
# directory outside the source tree, together with the C and C++ runtimes they need (unstable's
# libc6 and libstdc++6 are newer than bookworm's, so they are unpacked too and the server runs
# under the unpacked ld.so), and writes a wrapper script that runs it. Nothing is built.
# Idempotent: a complete cache is reused without network; concurrent callers wait on a lock.
#
#   deploy/llama-server.sh            fetch if missing, then print the wrapper's path
#   deploy/llama-server.sh --cached   print it only if already fetched (no network), else exit 3
#
# The wrapper (CACHE/bin/llama-server) takes llama-server's own options. CACHE/versions lists the
# packages and versions unpacked. Exit 0 with the path on stdout; 3 (the reason on stderr) when
# it cannot be obtained (no apt-get, no network, a package gone from the suite).
#
# Environment: LLAMA_SERVER_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/mlperf-network/
# llama-server), LLAMA_DEB_MIRROR (default: the Debian mirror of this machine's apt sources), LLAMA_DEB_SUITE
# (default unstable).
set -euo pipefail

cache=${LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlperf-network/llama-server}
# The mirror this machine's apt already uses for Debian (its main archive, not -security).
mirror=${LLAMA_DEB_MIRROR:-$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' \
    2>/dev/null | grep -v -- '-security' | sort -u | head -n1)}
mirror=${mirror%/}
[[ -n $mirror ]] || { echo "llama-server.sh: no Debian mirror in apt's sources; set LLAMA_DEB_MIRROR" >&2; exit 3; }
suite=${LLAMA_DEB_SUITE:-unstable}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# llama-server, its libraries and CPU backends, and the runtimes of the suite they were built for.
packages=(llama.cpp-tools libllama0 libggml0 libc6 libgcc-s1 libgomp1 libstdc++6 libssl3t64
    zlib1g libzstd1)
wrapper=$cache/bin/llama-server

die() {
    echo "llama-server.sh: $*" >&2
    exit 3
}

case "${1:-}" in
    --cached)
        [[ -x $wrapper && -f $cache/versions ]] || die "not fetched yet into $cache"
        echo "$wrapper"
        exit 0
        ;;
    -h | --help)
        sed -n '2,22p' "$0"
        exit 0
        ;;
    "") ;;
    *)
        echo "llama-server.sh: unknown option '$1' (see --help)" >&2
        exit 2
        ;;
esac

mkdir -p "$(dirname "$cache")" || die "cannot create $(dirname "$cache")"
exec 9>"$cache.lock" || die "cannot open the lock $cache.lock"
flock 9
if [[ -x $wrapper && -f $cache/versions ]]; then
    echo "$wrapper"
    exit 0
fi
for t in apt-get dpkg-deb; do
    command -v $t >/dev/null || die "$t is missing (Debian's apt and dpkg)"
done
[[ -r $keyring ]] || die "$keyring is missing (debian-archive-keyring)"

t0=$SECONDS
work=$(mktemp -d "$cache.new.XXXXXX")
trap 'rm -rf "$work"' EXIT
apt_root=$work/apt
mkdir -p "$apt_root"/{lists/partial,cache/archives/partial,parts,prefs,debs} "$work/root"
echo "deb [signed-by=$keyring] $mirror $suite main" >"$apt_root/sources.list"
apt_opts=(-q -o Dir::Etc::sourcelist="$apt_root/sources.list"
    -o Dir::Etc::sourceparts="$apt_root/parts" -o Dir::Etc::preferences=/dev/null
    -o Dir::Etc::preferencesparts="$apt_root/prefs" -o Dir::State::Lists="$apt_root/lists"
    -o Dir::Cache="$apt_root/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 ||
    die "apt-get update of $mirror $suite failed: $(tail -n 3 "$work/apt.log" | tr '\n' ' ')"
(cd "$apt_root/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}") >>"$work/apt.log" 2>&1 ||
    die "apt-get download ${packages[*]} from $suite failed: $(grep -E '^E:' "$work/apt.log" | head -n 3 | tr '\n' ' ')"
for deb in "$apt_root"/debs/*.deb; do
    dpkg-deb -x "$deb" "$work/root" || die "dpkg-deb -x $deb failed"
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$work/versions"
done

# The loader and library directory of the unpacked root (e.g. usr/lib/x86_64-linux-gnu).
libc=$(find "$work/root/usr/lib" -name libc.so.6 -print -quit)
[[ -n $libc ]] || die "no libc.so.6 in the unpacked libc6"
libdir=$(dirname "$libc")
ld=$(find "$libdir" -maxdepth 1 -name 'ld-linux*.so.*' -print -quit)
[[ -n $ld ]] || die "no ld-linux in $libdir"
# ggml looks for its CPU backends (one per instruction set; it loads the best this CPU runs) in
# Debian's absolute path, then beside the executable: here that is the unpacked ld.so.
for b in "$libdir"/ggml/backends0/libggml-cpu-*.so; do
    ln -s "ggml/backends0/$(basename "$b")" "$libdir/"
done

# Paths inside the final cache directory (the work directory is renamed into place).
rel_libdir=${libdir#"$work"/}
rel_ld=${ld#"$work"/}
mkdir -p "$work/bin"
cat >"$work/bin/llama-server" <<EOF
#!/bin/sh
# llama-server from Debian $suite, run under its own unpacked ld.so and libraries ($0).
L='$cache/$rel_libdir'
exec '$cache/$rel_ld' --library-path "\$L:\$L/llama" '$cache/root/usr/bin/llama-server' "\$@"
EOF
chmod +x "$work/bin/llama-server"
rm -rf "$apt_root"

rm -rf "$cache"
mv "$work" "$cache"
trap - EXIT
chmod 755 "$cache"
version=$("$wrapper" --version 2>&1) || {
    rm -rf "$cache"
    die "the unpacked llama-server does not run: $(echo "$version" | tail -n 3 | tr '\n' ' ')"
}
echo "$version" >"$cache/version.txt"
echo "llama-server.sh: $(grep -m1 '^version' "$cache/version.txt" || true) from Debian $suite" \
    "($(grep '^llama.cpp-tools ' "$cache/versions")) in $cache, $((SECONDS - t0)) s" >&2
echo "$wrapper"
