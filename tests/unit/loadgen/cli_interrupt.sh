#!/bin/sh
# Ctrl-C ends a run cleanly: exit 130, a complete summary (with its trailer) and detail log, both
# marked interrupted, and a line on stderr that says so. Polls, never sleeps a fixed time first.
# Usage: cli_interrupt.sh LOADGEN_NODE OUTDIR
set -u
bin=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
"$bin" --scenario Server --sut null --qsl-synthetic 64 --sample-size 16 --progress on --quiet \
    --set server_target_qps=2000 --set min_duration_ms=600000 --output-dir "$out" \
    > "$out/stdout" 2> "$out/stderr" &
pid=$!
# Wait (at most 30 s) until the run is issuing: the progress line counts issued samples.
i=0
while ! tr '\r' '\n' < "$out/stderr" | grep -q "issued [1-9]"; do
    i=$((i + 1))
    if [ $i -gt 300 ]; then
        echo "FAIL: the run did not start"
        kill -9 $pid
        exit 1
    fi
    sleep 0.1
done
kill -INT $pid
# The run must end within its interrupt drain (2 s) plus slack: 30 s at most.
i=0
while kill -0 $pid 2> /dev/null; do
    i=$((i + 1))
    if [ $i -gt 300 ]; then
        echo "FAIL: still running 30 s after SIGINT"
        kill -9 $pid
        exit 1
    fi
    sleep 0.1
done
wait $pid
code=$?
fails=0
check() { # check DESCRIPTION COMMAND...
    what=$1
    shift
    "$@" > /dev/null 2>&1 || { echo "FAIL: $what"; fails=$((fails + 1)); }
}
check "exit status 130 (got $code)" test "$code" -eq 130
check "stderr says interrupted" grep -q "interrupted by SIGINT" "$out/stderr"
check "summary INVALID" grep -q "Result is : INVALID" "$out/mlperf_log_summary.txt"
check "summary says interrupted" grep -q "The run was interrupted (signal 2)" \
    "$out/mlperf_log_summary.txt"
check "summary has its trailer" grep -q "ERROR.* encountered" "$out/mlperf_log_summary.txt"
check "detail log says interrupted" grep -q "Run interrupted by signal 2" \
    "$out/mlperf_log_detail.txt"
check "detail log has the results" grep -q '"result_validity"' "$out/mlperf_log_detail.txt"
[ "$fails" -eq 0 ] && echo "OK: Ctrl-C ended the run with complete logs marked interrupted"
exit "$fails"
