#!/usr/bin/env bash
# gpu-check.sh: every check of the onnx backend's CUDA engine, on a GPU host, from a build made
# elsewhere (deploy/gpu/README.md). Run from the repository root:
#
#   deploy/gpu/gpu-check.sh BUILD_DIR [DEBDIR] [--quick]
#
# BUILD_DIR: a CMake build with the CUDA engine (its tests, sut-node, loadgen-node, onnx_bench,
# resnet50_onnx). DEBDIR: the packages of pack-runtime-debs.sh, unpacked first (runtime-env.sh).
# --quick: shorter benchmark runs.
#
# Runs, printing each command: the device-free tests (options, plans, the emulated node vectors);
# the GPU tests (node vectors, Fashion-MNIST against the CPU engine and its accuracy, streams,
# options, describe, a bad ordinal); sut-node on the GPU with the HelloAck a client sees and an
# Offline run of loadgen-node against it; onnx_bench on the GPU and the CPU for Fashion-MNIST and
# ResNet-50 at batch 1 and 64; bench_onnx.py --device cuda when python3 has PyTorch. Exit status:
# 0 when everything ran and passed, 1 when something failed, 77 when there is no usable GPU.
set -u

usage() {
    echo "usage: $0 BUILD_DIR [DEBDIR] [--quick]" >&2
    exit 2
}
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd) || usage
shift
debs=""
quick=0
for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    -*) usage ;;
    *) debs=$a ;;
    esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "$debs" ]; then
    # shellcheck source=runtime-env.sh
    . "$root/deploy/gpu/runtime-env.sh" "$debs" || exit 1
fi

# The build has the source folder of the machine that configured it baked in (the models, the
# engine's path): make that path lead here when it does not exist on this host.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then
    if mkdir -p "$(dirname "$src")" 2>/dev/null && ln -s "$root" "$src" 2>/dev/null; then
        echo "gpu-check: $src -> $root (the configured source folder)"
    else
        echo "gpu-check: warning: cannot link $src to $root; tests that read the models may fail"
    fi
fi
export LD_LIBRARY_PATH="$build/sut-node/backends/onnx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

failed=()
run() {
    echo "== $*"
    "$@"
    local rc=$?
    [ $rc -eq 0 ] || failed+=("$* (exit $rc)")
    return $rc
}

echo "== host: $(uname -srm), $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
t=$build/tests/unit/onnx

# 1. What needs no GPU, here too (the same binaries with this host's libraries).
for c in cuda_options cuda_plan cuda_plan_nodes; do
    run env CK_RUN_CASE=$c "$t/test_onnx"
done

# 2. The GPU tests; 77 means no usable device, and then nothing else here can run.
for c in cuda_nodes cuda_engine; do
    echo "== CK_RUN_CASE=$c $t/test_onnx_cuda"
    CK_RUN_CASE=$c CK_DEFAULT_TIMEOUT=300 "$t/test_onnx_cuda"
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "gpu-check: no usable GPU on this host; the GPU checks were skipped"
        [ ${#failed[@]} -eq 0 ] && exit 77
        printf 'FAILED: %s\n' "${failed[@]}"
        exit 1
    fi
    [ $rc -eq 0 ] || failed+=("test_onnx_cuda $c (exit $rc)")
done

# 3. The daemon on the GPU: what a client learns in HelloAck, and a LoadGen run through it.
model=$root/sut-node/backends/onnx/models/fashion_mnist_cnn.onnx
echo "== sut-node --backend onnx --device cuda:0 (Fashion-MNIST, argmax)"
"$build/sut-node/sut-node" --backend onnx --backend-opt model="$model" --backend-opt output=argmax \
    --device cuda:0 --max-batch 64 --listen 127.0.0.1:0 --port-file "$tmp/port" \
    --name gpu-check >"$tmp/node.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
    [ -s "$tmp/port" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.1
done
if [ -s "$tmp/port" ]; then
    port=$(cat "$tmp/port")
    if command -v python3 >/dev/null; then
        run python3 "$root/deploy/metadata/netmeta.py" --hello "127.0.0.1:$port"
    fi
    run "$build/loadgen-node/loadgen-node" --scenario Offline --qsl-synthetic 4096 --sample-size 784 \
        --nodes "127.0.0.1:$port" --set min_duration_ms=5000 --set offline_expected_qps=50000 \
        --output-dir "$tmp/offline" >"$tmp/lg.log" 2>&1
    grep -E "Samples per second|Result is" "$tmp/offline/mlperf_log_summary.txt" 2>/dev/null
    grep -q "No errors encountered" "$tmp/lg.log" || failed+=("loadgen-node Offline: sample errors")
    tail -3 "$tmp/lg.log"
else
    failed+=("sut-node did not start on the GPU")
fi
cat "$tmp/node.log"

# 4. Throughput: the engines alone, batch 1 and 64.
runs=5 secs=2
[ $quick = 1 ] && runs=3 secs=0.5
run "$build/bench/onnx/resnet50_onnx" "$tmp/resnet50.onnx" >/dev/null
for m in "$model" "$tmp/resnet50.onnx"; do
    run "$build/bench/onnx/onnx_bench" --model "$m" --device cuda --batch 1,64 --runs $runs --seconds $secs
    run "$build/bench/onnx/onnx_bench" --model "$m" --device cuda --opt tf32=1 --batch 64 --runs $runs --seconds $secs
    run "$build/bench/onnx/onnx_bench" --model "$m" --batch 1,64 --runs 3 --seconds $secs
done
if command -v python3 >/dev/null && python3 -c "import torch, numpy" 2>/dev/null; then
    run python3 "$root/bench/onnx/bench_onnx.py" --bench-bin "$build/bench/onnx/onnx_bench" \
        --device cuda --runs $runs --seconds $secs --threads "$(nproc)"
else
    echo "gpu-check: no python3 with PyTorch and numpy here: no PyTorch comparison"
fi

if [ ${#failed[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "gpu-check: every check passed"
