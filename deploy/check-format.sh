#!/usr/bin/env bash
# Checks that every tracked C, C++ and CUDA source is formatted as .clang-format says
# (clang-format 14, Debian 12's). Prints the offending lines and exits 1 if one is not.
#
#   deploy/check-format.sh          check (CI runs this)
#   deploy/check-format.sh --fix    rewrite the files in place
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=(--dry-run -Werror)
case "${1:-}" in
    --fix) mode=(-i) ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    "") ;;
    *) echo "check-format: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "check-format: clang-format is missing (deploy/install-deps.sh installs it)" >&2; exit 3; }
git ls-files -z '*.c' '*.h' '*.cc' '*.cu' | xargs -0 clang-format "${mode[@]}"
[[ ${mode[0]} == -i ]] || echo "check-format: every C source is formatted"
