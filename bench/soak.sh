#!/usr/bin/env bash
# Soak benchmark (not part of CI): builds the programs (Release, in build-bench/) and runs
# bench/soak.py: two sut-nodes, Server at 80 % of the measured maximum for 10 minutes, errors, RSS
# over time and latency percentiles per minute. bench/README.md holds the last result.
#
#   bench/soak.sh                     the full soak (about 12 minutes with the sweep)
#   bench/soak.sh --minutes 2 --qps 120000     shorter, at a given rate
# More options: bench/soak.py --help.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,8p' "$0"; exit 0; fi
"$root/deploy/install-deps.sh"
cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build-bench" -j"$(nproc)" --target sut-node loadgen-node rawrr qdlbench >/dev/null
exec python3 "$root/bench/soak.py" --build "$root/build-bench" "$@"
