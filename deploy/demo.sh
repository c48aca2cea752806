#!/usr/bin/env bash
# The end-to-end demo, from a fresh checkout: installs missing Debian packages, builds, starts two
# sut-nodes on loopback, and runs loadgen-node through the network: the four scenarios in
# performance mode against simulated accelerators, then an accuracy run whose every response is
# checked against the digest of the exact sample bytes. Prints each run's summary and stops the
# daemons. Logs stay in the output folder.
#
# With --real it runs a real model instead: the Fashion-MNIST CNN (the onnx backend on oneDNN) on
# two sut-nodes, the 10 000 test images of Debian's dataset-fashion-mnist sent LZ4-compressed
# through the network; an accuracy run scored against the PyTorch FP32 reference (it must reach
# 99 % of it), then Offline and Server performance runs, which must be VALID.
#
#   deploy/demo.sh              the full demo (about 1 minute)
#   deploy/demo.sh --quick      a short version (under 40 seconds)
#   deploy/demo.sh --real       the real-model demo (about 40 seconds; with --quick about 20)
#   deploy/demo.sh --out DIR    where the logs go (default: a new folder under /tmp)
#   deploy/demo.sh --bin-dir B  use the programs of an existing build folder B (no install, no build)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
real=0
out=""
bin_dir=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick=1 ;;
        --real) real=1 ;;
        --out) out=$2; shift ;;
        --bin-dir) bin_dir=$2; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "demo: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [[ -n "$bin_dir" ]]; then
    build=$bin_dir
else
    "$root/deploy/install-deps.sh"
    build="$root/build-demo" # Release, apart from the test build (deploy/test.sh uses build/)
    echo "demo: building (Release) in $build"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target sut-node loadgen-node >/dev/null
fi
sut="$build/sut-node/sut-node"
lg="$build/loadgen-node/loadgen-node"
[[ -x "$sut" && -x "$lg" ]] || { echo "demo: no sut-node or loadgen-node under $build" >&2; exit 3; }

[[ -n "$out" ]] || out=$(mktemp -d /tmp/mlperf-demo.XXXXXX)
mkdir -p "$out"
pids=()
addr=""
stop_failed=0
# SIGTERM: a sut-node finishes its work in flight, says Goodbye and exits 0.
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || stop_failed=1; done
    pids=()
}
trap cleanup EXIT

# Starts a sut-node on an ephemeral loopback port and sets $addr to its address. (Not called in
# $(...): the daemon would hold the substitution's pipe open, and its pid would be lost.)
start_node() { # name, then sut-node options
    local name=$1; shift
    "$sut" --listen 127.0.0.1:0 --port-file "$out/$name.port" --name "$name" --log-level warn "$@" \
        >"$out/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [[ -s "$out/$name.port" ]] && break; sleep 0.05; done
    [[ -s "$out/$name.port" ]] || { echo "demo: $name did not start; see $out/$name.log" >&2; exit 3; }
    addr="127.0.0.1:$(cat "$out/$name.port")"
}

# The official seeds of mlperf.conf (v6.1); a submission reads them from mlperf.conf itself.
seeds=(--set qsl_rng_seed=2085463073848966840 --set sample_index_rng_seed=2747215439041700203
       --set schedule_rng_seed=16159082839903944936)
if [[ $quick -eq 1 ]]; then dur=2000; else dur=10000; fi

# Stops the daemons and exits with the demo's status (a daemon that fails to stop cleanly fails it).
finish() {
    echo
    cleanup
    trap - EXIT
    if [[ $stop_failed -ne 0 ]]; then
        echo "demo: a sut-node did not exit cleanly on SIGTERM (see $out/*.log)" >&2
        status=1
    fi
    echo "demo: daemons stopped cleanly; logs in $out"
    exit $status
}

run() { # scenario, then extra loadgen-node options (the QSL options are in ${qsl[@]})
    local scenario=$1; shift
    local dir="$out/$scenario"
    echo
    echo "=== $scenario ==="
    if "$lg" --scenario "$scenario" "${qsl[@]}" "${seeds[@]}" --nodes "$n1,$n2" --output-dir "$dir" \
        --quiet --progress off --log-level warn --set min_duration_ms=$dur "$@"; then :; else status=1; fi
    local lines="SUT name|Scenario|Mode|Samples per second|Completed samples per second|Result is"
    # Offline latencies are those of one query holding every sample: not worth printing.
    [[ $scenario == Offline ]] || lines+="|(50|99)\.00 percentile latency"
    grep -E "^($lines)" "$dir/mlperf_log_summary.txt" || true
}

status=0
if [[ $real -eq 1 ]]; then
    "$sut" --help | grep -q "Backends built in:.*onnx" ||
        { echo "demo: this sut-node has no onnx backend (oneDNN or the ONNX schema was missing at build time)" >&2; exit 3; }
    py=/usr/bin/python3 # Debian's, with python3-numpy (install-deps.sh)
    model="$root/sut-node/backends/onnx/models/fashion_mnist_cnn.onnx"
    ref="$root/sut-node/backends/onnx/models/fashion_mnist_cnn.json"
    data="$out/data"
    mkdir -p "$data"
    "$py" "$root/loadgen-node/tools/fmnist_to_npy.py" --split test --out-dir "$data"
    # One oneDNN thread per node: the two nodes and loadgen-node share this host's cores. The
    # node answers the class index (argmax), 4 bytes, instead of 40 bytes of logits.
    onnx=(--backend onnx --backend-opt "model=$model" --backend-opt output=argmax --threads 1 --max-batch 64)
    start_node onnx-node-1 "${onnx[@]}"; n1=$addr
    start_node onnx-node-2 "${onnx[@]}"; n2=$addr
    echo "demo: sut-nodes onnx-node-1 at $n1 and onnx-node-2 at $n2 (Fashion-MNIST CNN); logs in $out"
    qsl=(--model fashion-mnist --qsl-npy "$data/fmnist_test_images.npy" --compress lz4)

    echo
    echo "=== Accuracy (Offline, all 10 000 test images through the network) ==="
    if "$lg" --scenario Offline --mode AccuracyOnly "${qsl[@]}" "${seeds[@]}" --nodes "$n1,$n2" \
        --output-dir "$out/Accuracy" --quiet --progress off --log-level warn; then
        acc=$("$py" "$root/loadgen-node/tools/accuracy_classification.py" \
            --log "$out/Accuracy/mlperf_log_accuracy.json" --labels "$data/fmnist_test_labels.npy")
        echo "$acc"
        # The gate: 99 % of the PyTorch FP32 top-1 recorded when the model was trained.
        if ! "$py" - "$acc" "$ref" <<'PY'
import json, re, sys
got = float(re.search(r"accuracy=([0-9.]+)%", sys.argv[1]).group(1))
ref = json.load(open(sys.argv[2]))["pytorch_fp32_top1"]
ok = got >= 0.99 * ref
print(f"PyTorch FP32 reference {ref:.3f}%: {got / ref * 100:.2f}% of it (target >= 99%): "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
        then status=1; fi
    else
        echo "accuracy run: FAILED (see $out/Accuracy)"; status=1
    fi

    # Two 1-thread nodes classify about 28 000 images/s on a 2-vCPU host. The Offline hint is set
    # above what they do, so that the run (1.1 x hint x min_duration samples) outlasts its minimum
    # duration on a faster host too. The Server load is about a fifth of the Offline rate, under
    # ResNet-50's 15 ms bound (this project's demo classifier has no official one of its own).
    run Offline --set offline_expected_qps=50000
    run Server --set server_target_qps=6000 --set server_target_latency_ns=15000000
    finish
fi

# A simulated accelerator per node: one engine, 300 + 200*batch us per batch (+-5% jitter), so at
# most about 4.5k samples/s per node at batch 16: the accelerator, not this machine, sets the pace,
# and the settings below hold on a fast or a slow host.
sim=(--backend sim --backend-opt engines=1 --backend-opt a_us=300 --backend-opt b_us=200 --max-batch 16)
start_node sim-node-1 "${sim[@]}"; n1=$addr
start_node sim-node-2 "${sim[@]}" --seed 7; n2=$addr
echo "demo: sut-nodes sim-node-1 at $n1 and sim-node-2 at $n2; logs in $out"

# ResNet50-shaped samples (150 528 bytes, image-like), LZ4-compressed in the QSL where they
# shrink (image classification allows lossless compression, rules 6.2.4).
qsl=(--model resnet50 --qsl-synthetic 1024 --sample-size 150528 --synthetic-kind image --compress lz4)
run Offline --set offline_expected_qps=10000
run Server --set server_target_qps=2500 --set server_target_latency_ns=15000000 --sample-latencies
if python3 "$root/deploy/plot/latplot.py" "$out/Server" --out "$out/Server/latency.svg" >/dev/null 2>&1; then
    echo "latency over time and histogram: $out/Server/latency.svg"
fi
# The expected-latency hints size the generated trace (as in the official LoadGen: 2 x duration /
# hint queries); a hint above the real latency runs out of queries and makes the run INVALID.
# The query minimums are mlperf.conf's (enough queries for early stopping at the 90th/99th
# percentile), so a slow host (a sanitizer build) runs longer instead of turning INVALID.
run SingleStream --set single_stream_expected_latency_ns=250000 --set min_query_count=1024
run MultiStream --set multi_stream_expected_latency_ns=1000000 --set min_query_count=662

# Accuracy with proof: digest nodes answer the 64-bit digest of the exact bytes they decoded,
# and loadgen-node checks every one against the QSL's bytes.
start_node digest-node-1 --backend digest; d1=$addr
start_node digest-node-2 --backend digest; d2=$addr
echo
echo "=== Accuracy (Offline, every sample's digest verified) ==="
if "$lg" --scenario Offline --mode AccuracyOnly "${qsl[@]}" "${seeds[@]}" --nodes "$d1,$d2" \
    --output-dir "$out/Accuracy" --quiet --progress off --log-level warn --verify-digest; then
    echo "accuracy run: $(grep -c qsl_idx "$out/Accuracy/mlperf_log_accuracy.json") samples logged," \
         "every response matched the digest of its sample"
else
    echo "accuracy run: FAILED (see $out/Accuracy)"; status=1
fi

finish
