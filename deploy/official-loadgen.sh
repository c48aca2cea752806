#!/usr/bin/env bash
# Builds the official MLCommons LoadGen (C++, static library) from a source folder into
# DEST/prefix, for `cmake -DMLPERF_LOADGEN_ROOT=DEST/prefix` (loadgen-node --loadgen official, the
# QDL shim, bench's official row). Optional: the README's two commands never need it.
#
#   deploy/official-loadgen.sh SRC DEST
#       SRC   the loadgen/ folder of mlcommons/inference (e.g. ../shared/reference/
#             mlcommons-inference/loadgen); only read: it may be read-only
#       DEST  a folder of ours (e.g. build-official/loadgen): DEST/src is a copy of SRC,
#             DEST/build the LoadGen's CMake build, DEST/prefix what it installs
#
# The copy is needed because the LoadGen's CMakeLists writes mlperf_conf.h into its own source
# folder at configure time (file(WRITE) of a relative path); building SRC in place would write
# into it (or fail where it is mounted read-only). Idempotent: when DEST/prefix holds a library
# built from the same SRC content (a hash of every file, kept in DEST/prefix/source.sha256), it
# only says so (well under a second). Needs cmake, g++ and python3 (the LoadGen's version
# generator; it also asks git for a hash and prints `fatal: not a git repository` outside a
# checkout, which is harmless).
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
src=$1
dest=$2
for f in CMakeLists.txt loadgen.h mlperf.conf VERSION.txt; do
    [[ -f $src/$f ]] || { echo "official-loadgen: $src/$f is missing: SRC must be the loadgen/ folder of mlcommons/inference" >&2; exit 2; }
done
command -v g++ >/dev/null || { echo "official-loadgen: g++ is missing (Debian package g++)" >&2; exit 3; }
command -v python3 >/dev/null || { echo "official-loadgen: python3 is missing (Debian package python3)" >&2; exit 3; }
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
src=$(cd "$src" && pwd)

hash=$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
stamp=$dest/prefix/source.sha256
if [[ -f $stamp && $(cat "$stamp") == "$hash" && -f $dest/prefix/lib/libmlperf_loadgen.a &&
      -f $dest/prefix/include/loadgen.h ]]; then
    echo "official-loadgen: $dest/prefix is up to date (LoadGen $(cat "$src/VERSION.txt") from $src)"
    exit 0
fi

echo "official-loadgen: building LoadGen $(cat "$src/VERSION.txt") from $src into $dest/prefix"
rm -rf "$dest/src" "$dest/build" "$dest/prefix"
cp -R "$src" "$dest/src"
chmod -R u+w "$dest/src"
cmake -S "$dest/src" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$dest/prefix" >"$dest/configure.log" 2>&1 ||
    { cat "$dest/configure.log" >&2; echo "official-loadgen: configuring $dest/src failed" >&2; exit 3; }
# Only the library: the LoadGen's own benchmark program is not installed.
cmake --build "$dest/build" --target mlperf_loadgen -j"$(nproc)"
cmake --install "$dest/build" >/dev/null
echo "$hash" >"$stamp"
echo "official-loadgen: installed $dest/prefix/lib/libmlperf_loadgen.a"
