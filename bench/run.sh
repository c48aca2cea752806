#!/usr/bin/env bash
# The benchmark suite: builds the programs (Release, in build-bench/) and prints one table of
# every figure, its reference measured in the same run, and the ratio; also written as JSON.
#
#   bench/run.sh            the full suite (about 11 minutes; medians of 3 runs per row)
#   bench/run.sh --quick    a short version (about two minutes on 2 cores)
#   bench/run.sh --only B1,B3   some rows (the references always run)
#   bench/run.sh --official-loadgen-root PATH   B1 adds the official LoadGen's reference row
# More options: bench/run.py --help. bench/README.md holds the latest table and its analysis.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,10p' "$0"; exit 0; fi
"$root/deploy/install-deps.sh"
# B1's official reference row: --official-loadgen-root PATH (or $MLPERF_LOADGEN_ROOT) builds
# bench/official_null against that installed official LoadGen.
official=${MLPERF_LOADGEN_ROOT:-}
prev=
for a in "$@"; do
    [[ "$prev" == --official-loadgen-root ]] && official=$a
    [[ "$a" == --official-loadgen-root=* ]] && official=${a#*=}
    prev=$a
done
targets=(sut-node loadgen-node rawrr qdlbench spingaps slidebench)
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
if [[ -n "$official" ]]; then
    cmake_args+=("-DMLPERF_LOADGEN_ROOT=$official")
    targets+=(official_null)
fi
cmake -S "$root" -B "$root/build-bench" "${cmake_args[@]}" >/dev/null
cmake --build "$root/build-bench" -j"$(nproc)" --target "${targets[@]}" >/dev/null
exec python3 "$root/bench/run.py" --build "$root/build-bench" "$@"
