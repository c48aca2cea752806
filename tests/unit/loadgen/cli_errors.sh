#!/bin/sh
# Bad input gets exit status 2 and a message that names the flag or file:line and the reason.
# Usage: cli_errors.sh LOADGEN_NODE OUTDIR
set -u
bin=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
fails=0

expect() { # expect STATUS PATTERN ARGS...
    want=$1 pattern=$2
    shift 2
    "$bin" "$@" > "$out/stdout" 2> "$out/stderr"
    got=$?
    if [ "$got" -ne "$want" ] || ! grep -q -- "$pattern" "$out/stdout" "$out/stderr"; then
        echo "FAIL: loadgen-node $* -> status $got (want $want), output:"
        cat "$out/stdout" "$out/stderr"
        fails=$((fails + 1))
    fi
}

qsl="--qsl-synthetic 64 --sample-size 16 --sut null --output-dir $out/logs --progress off"
expect 0 "--verify-digest" --help
expect 0 "--qsl-npy" --help
expect 2 "--scenario is required" $qsl
expect 2 "not SingleStream, MultiStream, Server or Offline" --scenario Batch $qsl
expect 2 "unknown option" --scenario Server --frobnicate $qsl
expect 2 "exactly one of --qsl-npy" --scenario Server --sut null
expect 2 "needs --sample-size" --scenario Server --qsl-synthetic 4 --sut null
printf '*.*.min_query_count = 7\n*.Server.target_qps = 5 # note\n' > "$out/user.conf"
expect 2 "user.conf:2:" --scenario Server --model resnet50 --user-conf "$out/user.conf" $qsl
expect 2 "llama2-70b" --scenario Offline --model llama2-70b --compress lz4 $qsl
expect 2 "--model is required" --scenario Offline --compress lz4 $qsl
expect 2 "no TestSettings field" --scenario Server --set bogus=1 $qsl
expect 2 "not a number" --scenario Server --set server_target_qps=fast $qsl
expect 2 "more than the limit of 1000000 us" --scenario SingleStream --wait-spin-us 1000001 $qsl
expect 2 "--spin-us: '-3' is not a non-negative integer" --scenario Server --spin-us -3 $qsl
expect 3 "nonexistent.npy" --scenario Server --qsl-npy "$out/nonexistent.npy" --sut null
# Settings the official generator would crash on are refused: status 3.
expect 3 "performance_issue_same_index 99" --scenario SingleStream --set min_duration_ms=0 --set min_query_count=10 \
    --set single_stream_expected_latency_ns=100 --qsl-synthetic 64 --sample-size 16 \
    --sut null --output-dir "$out/logs" --progress off --set performance_issue_same=1 \
    --set performance_issue_same_index=99
# A second run into an output folder that holds a run's logs would overwrite them: refused.
used="--scenario Offline --sut null --qsl-synthetic 64 --sample-size 16 --set min_duration_ms=0 \
    --output-dir $out/used --progress off --quiet"
"$bin" $used >/dev/null 2>&1
expect 2 "already holds the logs of an earlier run" $used
[ "$fails" -eq 0 ] && echo "OK: every bad input was refused clearly"
exit "$fails"
