#!/bin/sh
# End-to-end run of the loadgen-node binary with the in-process null SUT for one scenario, then a
# check of the three logs (every detail line is JSON, the run is VALID, the accuracy log parses).
# Usage: cli_run.sh LOADGEN_NODE PYTHON CHECKER OUTDIR SCENARIO
set -eu
bin=$1 py=$2 checker=$3 out=$4 scenario=$5
rm -rf "$out"
mkdir -p "$out"

# Short runs through the official user.conf path; the latency bound is generous so validity
# depends on counts, not on how busy the machine is.
cat > "$out/user.conf" <<CONF
# loadgen-node integration test
*.*.min_duration = 300
*.Server.target_qps = 2000
*.Server.target_latency = 10000
*.Offline.target_qps = 1000
*.SingleStream.target_latency = 0.0001
*.MultiStream.target_latency = 0.001
*.MultiStream.min_query_count = 662
CONF

set -- --scenario "$scenario" --model resnet50 --user-conf "$out/user.conf" --sut null \
    --qsl-synthetic 1024 --sample-size 3072 --synthetic-kind image \
    --output-dir "$out" --progress off --audit-config none --quiet
conf=$(dirname "$0")/../../../../shared/reference/mlperf.conf
if [ -r "$conf" ]; then
    set -- "$@" --mlperf-conf "$conf"
else
    echo "note: $conf not found; running with the TestSettings defaults"
fi
case $scenario in
    MultiStream) set -- "$@" --null-threaded ;;
    Server) set -- "$@" --null-threaded --null-digest --verify-digest --sample-latencies \
            --latency-intervals 100 ;;
    Offline) set -- "$@" --null-delay-us 300000 ;;
esac

status=0
"$bin" "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "loadgen-node exited with $status"
    cat "$out/mlperf_log_summary.txt" 2>/dev/null || true
    exit 1
fi
exec "$py" "$checker" "$out" "$scenario"
