#!/bin/sh
# A node lost during a run leaves a trace: <prefix>nodes.json in the output folder names it (up
# false or reconnects > 0, re-dispatched samples), and the summary warns instead of saying "No
# warnings". Two null sut-nodes on loopback (port 0); one is killed with SIGKILL mid-run.
# Usage: cli_nodeloss.sh LOADGEN_NODE SUT_NODE OUTDIR
set -u
lg=$1 sut=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
pids=""
cleanup() { for p in $pids; do kill -9 "$p" 2> /dev/null; done; }
trap cleanup EXIT INT TERM
wait_file() { # wait_file PATH: at most 20 s
    i=0
    while [ ! -s "$1" ]; do
        i=$((i + 1))
        [ $i -gt 200 ] && { echo "FAIL: $1 never appeared"; exit 1; }
        sleep 0.1
    done
}
"$sut" --listen 127.0.0.1:0 --port-file "$out/p1" --name node-a --log-level warn 2> "$out/a.log" &
a=$!
"$sut" --listen 127.0.0.1:0 --port-file "$out/p2" --name node-b --log-level warn 2> "$out/b.log" &
b=$!
pids="$a $b"
wait_file "$out/p1"
wait_file "$out/p2"
# A Server run long enough that node-b dies while it holds samples.
"$lg" --scenario Server --nodes "127.0.0.1:$(cat "$out/p1"),127.0.0.1:$(cat "$out/p2")" \
    --qsl-synthetic 64 --sample-size 64 --progress on --quiet --drain-timeout-ms 10000 \
    --progress-timeout-ms 5000 --max-dispatches 4 --sample-latencies \
    --set server_target_qps=500 --set min_duration_ms=4000 --set min_query_count=1 \
    --output-dir "$out/logs" > "$out/stdout" 2> "$out/stderr" &
l=$!
pids="$pids $l"
i=0
while ! tr "\r" "\n" < "$out/stderr" 2> /dev/null | grep -q "done [1-9][0-9][0-9]"; do
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "FAIL: the run did not start"; cat "$out/stderr"; exit 1; }
    sleep 0.1
done
kill -9 "$b"
i=0
while kill -0 "$l" 2> /dev/null; do
    i=$((i + 1))
    [ $i -gt 600 ] && { echo "FAIL: loadgen-node still running 60 s after the node died"; exit 1; }
    sleep 0.1
done
wait "$l"
fails=0
check() { # check DESCRIPTION COMMAND...
    what=$1
    shift
    "$@" > /dev/null 2>&1 || { echo "FAIL: $what"; fails=$((fails + 1)); }
}
check "nodes.json written" test -s "$out/logs/mlperf_log_nodes.json"
check "nodes.json is JSON naming node-b down" python3 -c "
import json, sys
n = {x['name']: x for x in json.load(open(sys.argv[1]))['nodes']}
b = n['node-b']
assert not b['up'] or b['reconnects'] > 0, b
" "$out/logs/mlperf_log_nodes.json"
# The QDL's queueing per sample: reported for completed samples and in order: the issue (late
# after the schedule) comes before the wire, the wire before the completion (the latency).
check "qdl_queue_ns reported and ordered" python3 -c "
import sys
f = open(sys.argv[1])
assert f.readline().strip().split(',')[5] == 'qdl_queue_ns'
rows = [[int(x) for x in line.split(',')[:11]] for line in f]
done = [r for r in rows if r[2] >= 0 and r[5] >= 0]  # a sample failed unsent has none
assert len(done) > len(rows) // 2, 'most samples without qdl_queue_ns'
assert all(r[3] + r[5] <= r[2] for r in done), 'issue + queueing after the completion'
" "$out/logs/mlperf_log_sample_latencies.csv"
# The nodes' own times (queue, backend) and the wire and return, per completed sample.
check "node times reported and within the latency" python3 -c "
import sys
f = open(sys.argv[1])
assert f.readline().strip().split(',')[8:] == ['node_queue_ns', 'node_backend_ns', 'wire_return_ns', 'issue_late_cause']
rows = [[int(x) for x in line.split(',')[:11]] for line in f]
done = [r for r in rows if r[2] >= 0 and r[5] >= 0]
assert done and all(r[8] >= 1 and r[9] >= 1 and r[10] >= 0 for r in done), 'node times missing'
assert all(r[10] == 0 or r[5] + r[8] + r[9] + r[10] <= r[2] + 1000 for r in done), 'parts > latency'
" "$out/logs/mlperf_log_sample_latencies.csv"
check "summary has the node times" grep -q "Node backend     p99 (ns)" \
    "$out/logs/mlperf_log_summary.txt"
check "summary has the QDL queueing" grep -q "QDL queueing p99 (ns)" \
    "$out/logs/mlperf_log_summary.txt"
check "summary warns about the loss" grep -q "WARNING: 1 nodes lost" \
    "$out/logs/mlperf_log_summary.txt"
check "summary does not say 'No warnings'" sh -c \
    "! grep -q 'No warnings' '$out/logs/mlperf_log_summary.txt'"
check "detail log warns" grep -q "lost during the series" "$out/logs/mlperf_log_detail.txt"
[ "$fails" -eq 0 ] && echo "OK: the lost node is on record and the summary warns" ||
    { cat "$out/stderr" "$out/logs/mlperf_log_summary.txt"; }
exit "$fails"
