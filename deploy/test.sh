#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs missing Debian packages, configures,
# builds with warnings as errors, and runs every CTest test.
#
#   deploy/test.sh                 Release-with-debug-info build in build/
#   deploy/test.sh --asan          the same suite under AddressSanitizer + UBSan, in build-asan/
#   deploy/test.sh --tsan          the multi-threaded tests under ThreadSanitizer, in build-tsan/
#   deploy/test.sh -- -L qdl       extra arguments after -- go to ctest (here: only the qdl label)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
variant=default
ctest_args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --asan) variant=asan ;;
        --tsan) variant=tsan ;;
        --) shift; ctest_args=("$@"); break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

"$root/deploy/install-deps.sh"

case "$variant" in
    default) build="$root/build"; flags=() ;;
    asan) build="$root/build-asan"; flags=(-DASAN=ON) ;;
    tsan) build="$root/build-tsan"; flags=(-DTSAN=ON) ;;
esac
cmake -S "$root" -B "$build" -DWERROR=ON "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"

export CK_TIMEOUT_MULTIPLIER=1
if [[ "$variant" != default ]]; then
    # Sanitized binaries run several times slower; Check's per-test timeouts scale with this.
    export CK_TIMEOUT_MULTIPLIER=4
fi
if [[ "$variant" == tsan ]]; then
    export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
    # UCX's memory hooks (libucm patches mmap/brk and the allocator to track registered memory)
    # fight ThreadSanitizer's own interceptors: every program that links UCX then crashes at its
    # first thread. Without them UCX only skips its registration cache.
    export UCX_MEM_EVENTS=no
    [[ ${#ctest_args[@]} -eq 0 ]] && ctest_args=(-L "qdl|sut|common|httpc")
fi
cd "$build"
ctest --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
