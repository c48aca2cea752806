#!/usr/bin/env bash
# The Debian packages, as an operator gets them: builds them (build-debs.sh), installs them with
# apt into a pristine Debian 12 root (debootstrap minbase, nothing else: ../shared/tools/fresh-root.sh
# where the project's shared tools are, else deploy/container/make-base.sh --tar and a chroot),
# then, with the installed files only: --version of both programs; the packaged plugins found by
# name (sut-node --list-backends); a program compiled
# against the installed QDL, shared and static (pkg-config qdl) and the plugin ABI header; and a
# loopback Server run, sut-node started with the installed /etc/mlperf/sut-node.conf, loadgen-node
# through the network, the summary checked for a result and no errors, sut-node stopped cleanly.
#
#   deploy/package/test-debs.sh                 build the packages in build-deb/, then test them
#   deploy/package/test-debs.sh --build DIR     build them from the build folder DIR (configured
#                                               with -DCMAKE_INSTALL_PREFIX=/usr; the CTest test)
#   deploy/package/test-debs.sh --debs DIR      test the .debs in DIR
#
# Exit 77 (skipped) when not root, without debootstrap where the fresh-root tool is missing
# (FRESH_ROOT=path overrides ../shared/tools/fresh-root.sh; MLPN_BASE_TAR the tarball made
# otherwise, default /tmp/mlperf-network-base.tar.zst), or with --build of a folder whose prefix
# is not /usr. CI runs
# it (.ci/run, step packages).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
debs=""
build=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --debs) debs=$2; shift ;;
        --build) build=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "test-debs: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
fresh=${FRESH_ROOT:-$root/../shared/tools/fresh-root.sh}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: test-debs needs root (apt and chroot in a fresh root)"; exit 77; }
if [[ ! -x $fresh ]]; then
    command -v debootstrap >/dev/null && command -v zstd >/dev/null ||
        { echo "SKIP: test-debs needs $fresh (the fresh-root tool), or debootstrap and zstd"; exit 77; }
    fresh=""
fi

if [[ -n $build ]]; then
    grep -q '^CMAKE_INSTALL_PREFIX:PATH=/usr$' "$build/CMakeCache.txt" || {
        echo "SKIP: $build installs elsewhere than /usr; packages come from a build for /usr" \
             "(deploy/package/build-debs.sh makes one)"; exit 77; }
fi
if [[ -z $debs ]]; then
    build=${build:-$root/build-deb}
    "$root/deploy/package/build-debs.sh" "$build" >/dev/null
    debs=$build/packages
fi
stage=$(mktemp -d /tmp/test-debs.XXXXXX)
trap 'rm -rf "$stage"' EXIT
cp "$debs"/mlperf-network-*.deb "$debs"/libqdl0_*.deb "$stage/"
cat >"$stage/inside.sh" <<'INSIDE'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends ./*.deb gcc libc6-dev pkg-config man-db \
    python3 python3-numpy python3-pandas >/dev/null
echo "test-debs: installed $(ls ./*.deb | tr '\n' ' ')"
sut-node --version
loadgen-node --version
# The man pages (from --help) and the tools a package user needs: LLM data, the submission
# runner, the fabric; each answers --help from where the package put it.
man -P cat sut-node | grep -q -- '--backend' || { echo "test-debs: no man page of sut-node"; exit 1; }
man -P cat loadgen-node | grep -q -- '--scenario' || { echo "test-debs: no man page of loadgen-node"; exit 1; }
share=/usr/share/mlperf-network
for t in tools/make_llm_tokens.py tools/llm_pickle_to_qsl.py submission/submit.py netns/fabric.sh; do
    "$share/$t" --help >/tmp/help.txt 2>&1 || { echo "test-debs: $share/$t --help failed:"; cat /tmp/help.txt; exit 1; }
done
[[ -x /usr/libexec/mlperf-network/delay-relay ]] || { echo "test-debs: no delay-relay"; exit 1; }
# An LLM token QSL prepared with the packaged tools, as a user does from a data-set pickle.
"$share/tools/make_llm_tokens.py" --out /tmp/llm.pkl --count 8 >/dev/null
"$share/tools/llm_pickle_to_qsl.py" --pickle /tmp/llm.pkl --out-dir /tmp/llm-qsl
[[ $(ls /tmp/llm-qsl | wc -l) -eq 8 ]] || { echo "test-debs: the LLM QSL has not 8 samples"; exit 1; }
echo "test-debs: man pages, LLM data tools, the submission runner and the fabric script run from the package"
# The packaged plugins, found by name in /usr/lib/sut-node (--backend openai, kserve).
for be in openai kserve; do
    [[ -e /usr/lib/sut-node/libsut_backend_$be.so ]] || continue
    sut-node --list-backends | grep -q "^  $be  */usr/lib/sut-node/libsut_backend_$be.so\$" ||
        { echo "test-debs: sut-node does not list its $be plugin:"; sut-node --list-backends; exit 1; }
done

cat >/tmp/q.c <<'C'
#include <qdl/qdl.h>
#include <sut/sut_backend.h>
#include <stdio.h>
int main(void)
{
    qdl_config_t c;
    qdl_config_init(&c);
    printf("qdl: default policy %d, plugin ABI %d\n", (int)c.policy, SUT_BACKEND_ABI_VERSION);
    return 0;
}
C
gcc -o /tmp/q-shared /tmp/q.c $(pkg-config --cflags --libs qdl) && /tmp/q-shared
# Not grep -q: it exits at the first match, ldd dies of SIGPIPE and pipefail fails the check.
ldd /tmp/q-shared | grep 'libqdl.so.0 => /' >/dev/null || { echo "test-debs: libqdl.so.0 not found"; exit 1; }
libdir=$(pkg-config --variable=libdir qdl)
gcc -o /tmp/q-static /tmp/q.c $(pkg-config --cflags qdl) "$libdir/libqdl.a" \
    $(pkg-config --static --libs qdl | sed 's/-lqdl//') && /tmp/q-static
echo "test-debs: qdl.h, sut_backend.h, libqdl.so and libqdl.a build and run"

# The packaged config chooses no backend (sut-node refuses to start until one is set).
sut-node --config /etc/mlperf/sut-node.conf --listen 127.0.0.1:0 --port-file /tmp/port \
    --backend sim --log-level warn 2>/tmp/sut.log &
sut=$!
for _ in $(seq 200); do [[ -s /tmp/port ]] && break; sleep 0.05; done
[[ -s /tmp/port ]] || { echo "test-debs: sut-node did not start:"; cat /tmp/sut.log; exit 1; }
status=0
loadgen-node --scenario Server --model resnet50 --qsl-synthetic 256 --sample-size 150528 \
    --synthetic-kind image --nodes "127.0.0.1:$(cat /tmp/port)" \
    --set min_duration_ms=3000 --set server_target_qps=200 --set server_target_latency_ns=15000000 \
    --output-dir /tmp/run --quiet --progress off --log-level error || status=$?
grep -E "^(SUT name|Scenario|Completed samples per second|Result is)" /tmp/run/mlperf_log_summary.txt
grep -q "No errors encountered during test." /tmp/run/mlperf_log_summary.txt ||
    { echo "test-debs: the run logged errors"; exit 1; }
[[ $status -le 1 ]] || { echo "test-debs: loadgen-node exited $status"; exit 1; }
kill -TERM $sut
wait $sut || { echo "test-debs: sut-node did not stop cleanly:"; cat /tmp/sut.log; exit 1; }
echo "test-debs: the installed programs served a loopback Server run (loadgen-node exit $status)"
INSIDE
if [[ -n $fresh ]]; then
    "$fresh" run "$stage" bash inside.sh
    exit
fi
# Without the shared tool: the repository's own base (deploy/container/make-base.sh), unpacked
# into a throw-away root and entered with chroot in a private mount namespace.
base=${MLPN_BASE_TAR:-/tmp/mlperf-network-base.tar.zst}
"$root/deploy/container/make-base.sh" --tar "$base" >/dev/null
r=$stage/root
mkdir -p "$r"
zstd -dc "$base" | tar -x --numeric-owner -C "$r"
cp /etc/resolv.conf "$r/etc/resolv.conf"
mkdir -p "$r/root/project"
cp "$stage"/*.deb "$stage/inside.sh" "$r/root/project/"
unshare --mount --propagation private -- bash -c '
    set -e
    r=$1
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    mount -t sysfs sysfs "$r/sys"
    mount -t tmpfs tmpfs "$r/tmp"
    exec chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        bash -c "cd /root/project && bash inside.sh" </dev/null' _ "$r"
