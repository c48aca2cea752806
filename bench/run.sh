#!/usr/bin/env bash
# The benchmark suite: builds the programs (Release, in build-bench/) and prints one table of
# every figure, its reference measured in the same run, and the ratio; also written as JSON.
#
#   bench/run.sh            the full suite (about 11 minutes; medians of 3 runs per row)
#   bench/run.sh --quick    a short version (under a minute)
#   bench/run.sh --only B1,B3   some rows (the references always run)
# More options: bench/run.py --help. bench/README.md holds the latest table and its analysis.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,9p' "$0"; exit 0; fi
"$root/deploy/install-deps.sh"
cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build-bench" -j"$(nproc)" --target sut-node loadgen-node rawrr qdlbench >/dev/null
exec python3 "$root/bench/run.py" --build "$root/build-bench" "$@"
