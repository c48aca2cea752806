#!/bin/sh
# The query wait adapts to the host (issue 38 item 5): SingleStream/MultiStream queries wait in
# windows, spinning or sleeping, and the next window takes the way whose median latency was lower
# (with a window of the other way now and then); --wait-spin-adapt off spins always, and
# --wait-spin-us 0 never. The summary's harness block and the detail log say which.
#   cli_wait_spin.sh LOADGEN_NODE WORKDIR
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "cli_wait_spin: $*" >&2; exit 1; }
run() { # name, scenario, then options
    n=$1
    sc=$2
    shift 2
    rc=0
    "$bin" --scenario "$sc" --sut null --qsl-synthetic 64 --sample-size 64 --quiet \
        --progress off --log-level error --set single_stream_expected_latency_ns=100000 \
        --set multi_stream_expected_latency_ns=100000 --set min_duration_ms=200 \
        --set min_query_count=1000 --output-dir "$work/$n" "$@" 2>"$work/$n.err" || rc=$?
    [ "$rc" -le 1 ] || fail "$n: loadgen-node exited $rc: $(cat "$work/$n.err")"
    sed -n 's/^Query wait *: //p' "$work/$n/mlperf_log_summary.txt" >"$work/$n.wait"
    echo "$n: $(cat "$work/$n.wait")"
}
for sc in SingleStream MultiStream; do
    run "adapt-$sc" "$sc"
    [ -s "$work/adapt-$sc.wait" ] || fail "adapt-$sc: no 'Query wait' line"
    # Both ways measured (a median each), and both used.
    grep -Eq "^spun [1-9][0-9]* of [1-9][0-9]* \(median latency spinning [1-9][0-9]* ns, sleeping [1-9][0-9]* ns; [1-9][0-9]* switches\)$" \
        "$work/adapt-$sc.wait" || fail "adapt-$sc: both ways were not measured"
    spins=$(sed -n 's/^spun \([0-9]*\) of \([0-9]*\) .*/\1 \2/p' "$work/adapt-$sc.wait")
    set -- $spins
    [ "$1" -lt "$2" ] || fail "adapt-$sc: every query spun ($1 of $2)"
done
run fixed SingleStream --wait-spin-adapt off
[ -s "$work/fixed.wait" ] || fail "fixed: no 'Query wait' line"
grep -q "^spin 150000 ns, then sleep (fixed)$" "$work/fixed.wait" || fail "--wait-spin-adapt off: not the fixed spin"
grep -q '"harness_query_wait_sleeps", "value": 0,' "$work/fixed/mlperf_log_detail.txt" ||
    fail "--wait-spin-adapt off: the detail log counts sleeps"
run nospin SingleStream --wait-spin-us 0
if grep -q "^Query wait" "$work/nospin/mlperf_log_summary.txt"; then
    fail "--wait-spin-us 0 still reports a query wait's spin"
fi
if "$bin" --scenario SingleStream --sut null --qsl-synthetic 64 --wait-spin-adapt maybe \
    >"$work/bad" 2>&1; then
    fail "--wait-spin-adapt maybe was accepted"
fi
grep -q "'maybe' is not on or off" "$work/bad" || fail "unclear message: $(cat "$work/bad")"
echo "cli_wait_spin: passed"
