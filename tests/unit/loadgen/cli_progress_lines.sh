#!/bin/sh
# Progress for logs: with stderr a file (not a terminal), the default --progress auto writes plain
# lines (no "\r", no terminal codes), one per --progress-interval-ms, and nothing for a run shorter
# than one interval; --progress on keeps the live line; a bad value names the accepted ones.
#   cli_progress_lines.sh LOADGEN_NODE WORKDIR
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work/long" "$work/short" "$work/live"
fail() { echo "cli_progress_lines: $*" >&2; exit 1; }
run() { # outdir, then extra options
    out=$1
    shift
    # Exit 1 is an INVALID result (a short run can be); 0 and 1 both mean the run went through.
    rc=0
    "$bin" --scenario Server --sut null --qsl-synthetic 64 --sample-size 16 --quiet \
        --set server_target_qps=200 --set min_query_count=1 --output-dir "$out" "$@" \
        2>"$out/stderr" || rc=$?
    [ "$rc" -le 1 ] || fail "loadgen-node exited $rc (stderr: $(cat "$out/stderr"))"
}
# 2.5 s at a 500 ms interval: a few periodic lines and a last one.
run "$work/long" --set min_duration_ms=2500 --progress-interval-ms 500
n=$(grep -c '^\[.*issued [0-9]* *done [0-9]*' "$work/long/stderr" || true)
[ "$n" -ge 3 ] || fail "expected >= 3 progress lines in 2.5 s at 500 ms, got $n: $(cat "$work/long/stderr")"
if grep -q "$(printf '\r')" "$work/long/stderr"; then fail "a plain progress line holds a carriage return"; fi
if grep -q "$(printf '\033')" "$work/long/stderr"; then fail "a plain progress line holds a terminal code"; fi
# Each line is whole: elapsed seconds and the ETA on the same line.
bad=$(grep '^\[' "$work/long/stderr" | grep -vc 'ETA' || true)
[ "$bad" -eq 0 ] || fail "$bad progress lines without their ETA: $(cat "$work/long/stderr")"
# Shorter than one interval: no progress line at all.
run "$work/short" --set min_duration_ms=300 --progress-interval-ms 10000
if grep -q '^\[.*issued [0-9]* *done' "$work/short/stderr"; then fail "a run shorter than one interval printed progress: $(cat "$work/short/stderr")"; fi
# --progress on: the live line, redrawn in place.
run "$work/live" --set min_duration_ms=600 --progress on
grep -q "$(printf '\r')" "$work/live/stderr" || fail "--progress on did not draw the live line"
# A bad value names what is accepted.
if "$bin" --scenario Server --sut null --qsl-synthetic 64 --progress sometimes >"$work/bad" 2>&1; then
    fail "--progress sometimes was accepted"
fi
grep -q "'sometimes' is not auto, on, lines or off" "$work/bad" || fail "unclear message: $(cat "$work/bad")"
echo "cli_progress_lines: passed ($n lines in 2.5 s)"
