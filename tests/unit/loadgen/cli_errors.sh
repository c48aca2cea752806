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
expect 2 "not SingleStream, MultiStream, Server, Offline or Interactive" --scenario Batch $qsl
expect 2 "--scenario Interactive needs --model" --scenario Interactive $qsl
expect 2 "the settings of llama3_1-8b-interactive do not set use_token_latencies" \
    --scenario Interactive --model llama3_1-8b $qsl
expect 2 "--llm-field names a field of --qsl-llm-json's file" --scenario Offline --llm-field x $qsl
expect 2 "unknown option" --scenario Server --frobnicate $qsl
expect 2 "exactly one of --qsl-npy" --scenario Server --sut null
expect 2 "needs --sample-size" --scenario Server --qsl-synthetic 4 --sut null
printf '*.*.min_query_count = 7\n*.Server.target_qps = 5 # note\n' > "$out/user.conf"
expect 2 "user.conf:2:" --scenario Server --model resnet50 --user-conf "$out/user.conf" $qsl
expect 2 "llama2-70b" --scenario Offline --model llama2-70b --compress lz4 $qsl
expect 2 "--model is required" --scenario Offline --compress lz4 $qsl
# Rules 6.2.4: only 3D-UNet and DLRMv3 may compress in the Network division, both ways.
expect 2 "refused for model 'resnet50'" --scenario Offline --model resnet50 --compress lz4 $qsl
nodes="--qsl-synthetic 64 --sample-size 16 --nodes 127.0.0.1:9 --output-dir $out/logs --progress off"
expect 2 "--result-codec: compression 'lz4' refused for model 'llama2-70b'" --scenario Offline \
    --model llama2-70b --result-codec lz4 $nodes
expect 3 "cannot open /nonexistent" --scenario Offline --model 3d-unet-99 \
    --qsl-kits /nonexistent --sut null --output-dir $out/logs
expect 2 "no TestSettings field" --scenario Server --set bogus=1 $qsl
expect 2 "not a number" --scenario Server --set server_target_qps=fast $qsl
expect 2 "--wait-spin-us: '1000001' is not an integer from 0 to 1000000 us" --scenario SingleStream \
    --wait-spin-us 1000001 $qsl
expect 2 "--spin-us: '-3' is not an integer from 0 to 1000000 us" --scenario Server --spin-us -3 $qsl
expect 2 "--metrics-push: 'ftp://x' is not an http:// or https:// URL" --scenario Offline \
    --metrics-push ftp://x $qsl
expect 2 "report the built-in scheduler's run; not with --loadgen official" --scenario Offline \
    --loadgen official --metrics-listen 127.0.0.1:0 $qsl
expect 0 "--metrics-push URL" --help
expect 0 "--progress-timeout-ms" --help
expect 0 "--max-dispatches" --help
expect 2 "--max-dispatches: '0' is not an integer from 1 to 1000" --scenario Server --max-dispatches 0 $qsl
expect 2 "--max-dispatches: '1001' is not an integer from 1 to 1000" --scenario Server --max-dispatches 1001 $qsl
expect 2 "--progress-timeout-ms: 'soon' is not an integer from 0 to 86400000 ms" --scenario Server \
    --progress-timeout-ms soon $qsl
expect 2 "--progress-timeout-ms: '86400001' is not an integer from 0 to 86400000 ms" \
    --scenario Server --progress-timeout-ms 86400001 $qsl
expect 3 "nonexistent.npy" --scenario Server --qsl-npy "$out/nonexistent.npy" --sut null
# Settings the official generator would crash on are refused: status 3.
expect 3 "performance_issue_same_index 99" --scenario SingleStream --set min_duration_ms=0 --set min_query_count=10 \
    --set single_stream_expected_latency_ns=100 --qsl-synthetic 64 --sample-size 16 \
    --sut null --output-dir "$out/logs" --progress off --set performance_issue_same=1 \
    --set performance_issue_same_index=99
# Mistakes that used to exit 3 or pass in silence (issue 16, item 13).
expect 2 "'node1' is not HOST:PORT" --scenario Server --nodes node1 --qsl-synthetic 4 --sample-size 16
expect 2 "no port from 1 to 65535" --scenario Server --nodes 127.0.0.1:70000 --qsl-synthetic 4 \
    --sample-size 16
# A transport prefix is taken (then the port is checked), not read as a malformed HOST.
expect 2 "'ucx://127.0.0.1:70000' has no port" --scenario Server --nodes ucx://127.0.0.1:70000 \
    --qsl-synthetic 4 --sample-size 16
expect 2 "an empty entry" --scenario Server --nodes 127.0.0.1:1,,127.0.0.1:2 --qsl-synthetic 4 \
    --sample-size 16
expect 2 "\[ADDR\]:PORT" --scenario Server --nodes "[::1]7000" --qsl-synthetic 4 --sample-size 16
expect 2 "--tls-ca $out/missing.pem: cannot read it" --scenario Server --nodes 127.0.0.1:1 \
    --tls-ca "$out/missing.pem" --qsl-synthetic 4 --sample-size 16
printf '*.Server.min_duration = -1000\n' > "$out/neg.conf"
expect 2 "neg.conf:1: min_duration = -1000: a negative value" --scenario Server --model resnet50 \
    --user-conf "$out/neg.conf" $qsl
printf '*.Server.target_qsp = 5000\n' > "$out/typo.conf"
expect 2 "typo.conf:1: 'target_qsp' is not a key" --scenario Server --model resnet50 \
    --user-conf "$out/typo.conf" $qsl
printf '*.Sever.target_qps = 5000\n' > "$out/scen.conf"
expect 2 "scen.conf:1: 'Sever' is not a scenario" --scenario Server --model resnet50 \
    --user-conf "$out/scen.conf" $qsl
printf '*.Server.target_qps=5000\n' > "$out/glued.conf"
expect 2 "glued.conf:1: '\*.Server.target_qps=5000' has no ' = value'" --scenario Server \
    --model resnet50 --user-conf "$out/glued.conf" $qsl
expect 2 "server_target_qps = 1e-06: issuing min_query_count 100 queries would take 1e+08 s" \
    --scenario Server --set server_target_qps=0.000001 $qsl
expect 2 "server_target_qps = 0: must be a positive number" --scenario Server \
    --set server_target_qps=0 $qsl
expect 2 "--spin-budget: '0' is not an integer from 1 to 100 %" --scenario Server --spin-budget 0 $qsl
# Issue 34, item 12: values that killed, wrapped, spun or passed, each refused naming its range.
expect 2 "--latency-intervals: '288230376151711744' is not an integer from 1 to 86400000 ms" \
    --scenario SingleStream --latency-intervals 288230376151711744 $qsl
expect 2 "--drain-timeout-ms: '18446744073710' is not an integer from 0 to 86400000 ms" \
    --scenario SingleStream --drain-timeout-ms 18446744073710 $qsl
expect 2 "single_stream_expected_latency_ns = 0: not a number from 1 to 86400000000000 ns" \
    --scenario SingleStream --set single_stream_expected_latency_ns=0 $qsl
expect 2 "server_target_latency_percentile = -1: not a number greater than 0 and less than 1" \
    --scenario Server --set server_target_latency_percentile=-1 $qsl
printf '*.SingleStream.target_latency_percentile = 100\n' > "$out/pct.conf"
expect 2 "pct.conf:1: target_latency_percentile = 100: not a number greater than 0 and less than 100 %" \
    --scenario SingleStream --model resnet50 --user-conf "$out/pct.conf" $qsl
printf '*.*.min_duration = 18446744073709551616\n' > "$out/big.conf"
expect 2 "big.conf:1: min_duration = 18446744073709551616: not a number from 0 to 604800000 ms" \
    --scenario Offline --model resnet50 --user-conf "$out/big.conf" $qsl
# A user.conf whose lines are all for another model: a warning, not a silent fallback.
printf 'bert.Offline.target_qps = 100\n*.Offline.min_duration = 10\n' > "$out/other.conf"
"$bin" --scenario Offline --model resnet50 --user-conf "$out/other.conf" $qsl \
    --output-dir "$out/other" > "$out/stdout" 2> "$out/stderr"
grep -q -- "--model resnet50 matches no line of $out/other.conf (its lines are for bert)" \
    "$out/stderr" || { echo "FAIL: no warning for a --model no line names"; fails=$((fails + 1)); }
grep -q "1 warning encountered" "$out/other/mlperf_log_summary.txt" ||
    { echo "FAIL: the --model warning is not counted in the summary"; fails=$((fails + 1)); }
# The option table is also the --config keys: a file names its line, a good file runs.
printf 'scenario = Server\nfrobnicate = 1\n' > "$out/bad.cfg"
expect 2 "bad.cfg:2: 'frobnicate' is not an option" --config "$out/bad.cfg" $qsl
printf 'scenario = Offline\nset = offline_expected_qps=100\nset = min_duration_ms=10\nquiet = 1\n' \
    > "$out/good.cfg"
"$bin" --config "$out/good.cfg" $qsl --output-dir "$out/good" > /dev/null 2>&1
grep -q "Scenario : Offline" "$out/good/mlperf_log_summary.txt" ||
    { echo "FAIL: --config did not set the scenario"; fails=$((fails + 1)); }
# A second run into an output folder that holds a run's logs would overwrite them: refused.
used="--scenario Offline --sut null --qsl-synthetic 64 --sample-size 16 --set min_duration_ms=0 \
    --output-dir $out/used --progress off --quiet"
"$bin" $used >/dev/null 2>&1
expect 2 "already holds the logs of an earlier run" $used
[ "$fails" -eq 0 ] && echo "OK: every bad input was refused clearly"
exit "$fails"
