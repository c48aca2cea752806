# runtime-env.sh: unpacks the packages of pack-runtime-debs.sh into a prefix (dpkg -x: no root,
# no dpkg database touched) and points the dynamic linker and the tests at them. Source it:
#
#   . deploy/gpu/runtime-env.sh DEBDIR [PREFIX]        (PREFIX: default $HOME/.cache/sut-runtime)
#
# Exports LD_LIBRARY_PATH (the prefix's library folders first), and ONNX_NODE_DIR / FMNIST_DIR
# when the test data came along (pack-runtime-debs.sh --data). Where dpkg is missing (a non-Debian
# CUDA image) ar and tar unpack the same archives.
sut_runtime_unpack() {
    local debs=$1 prefix=$2 d t arch
    [ -d "$debs" ] || { echo "runtime-env.sh: no folder $debs" >&2; return 1; }
    mkdir -p "$prefix" || return 1
    for d in "$debs"/*.deb; do
        [ -e "$d" ] || { echo "runtime-env.sh: no .deb in $debs" >&2; return 1; }
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$d" "$prefix" || return 1
        else
            t=$(mktemp -d) || return 1
            (cd "$t" && ar x "$d" && tar -xf data.tar.* -C "$prefix") || { rm -rf "$t"; return 1; }
            rm -rf "$t"
        fi
    done
    arch=$(uname -m)-linux-gnu
    export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ -d "$prefix/usr/share/libonnx-testdata/data/node" ]; then
        export ONNX_NODE_DIR="$prefix/usr/share/libonnx-testdata/data/node"
    fi
    if [ -d "$debs/fashion-mnist" ]; then
        FMNIST_DIR=$(cd "$debs/fashion-mnist" && pwd)
        export FMNIST_DIR
    fi
    echo "runtime-env.sh: $(ls "$debs"/*.deb | wc -l) packages unpacked into $prefix"
}
sut_runtime_unpack "${1:?usage: . runtime-env.sh DEBDIR [PREFIX]}" "${2:-$HOME/.cache/sut-runtime}"
