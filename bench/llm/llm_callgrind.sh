#!/bin/bash
# User-space instructions per streamed token of sut-node's openai backend (bench/README.md, L1):
# sse_source, sut-node under callgrind (instrumentation on after start-up), loadgen-node in
# Server at a low rate (callgrind is ~50x slower), then instructions / tokens the source sent.
#
#   bench/llm/llm_callgrind.sh BUILD K OUTDIR [QPS=15] [DURATION_MS=6000]
#
# K is the source's --stream-interval (1: one event per token). Prints "K= tokens= Ir= per_token=";
# OUTDIR keeps cg.out and callgrind_annotate's self.txt (exclusive) and incl.txt (inclusive).
# Needs valgrind and python3-numpy (the QSL files). Nothing is asserted.
set -eu
[ $# -ge 3 ] || { sed -n '2,11p' "$0"; exit 2; }
B=$(realpath "$1"); K=$2; O=$3; QPS=${4:-15}; DUR=${5:-6000}
mkdir -p "$O"; rm -rf "${O:?}"/*
/usr/bin/python3 - "$O/qsl" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
r = np.random.default_rng(1)
for i in range(256):
    np.save(os.path.join(d, f"{i:08d}.npy"), r.integers(3, 32000, 64).astype("<i4"))
PY
"$B/bench/sse_source" --port-file "$O/src.port" --ttft-us 20000 --tpot-us 4000 \
    --stream-interval "$K" > "$O/src.log" &
SP=$!
for _ in $(seq 100); do [ -s "$O/src.port" ] && break; sleep 0.05; done
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$O/cg.out" \
    "$B/sut-node/sut-node" --listen 127.0.0.1:0 --port-file "$O/node.port" --name cg \
    --log-level warn --backend openai --backend-opt "url=http://127.0.0.1:$(cat "$O/src.port")" \
    --backend-opt max_tokens=64 --backend-opt max_concurrency=128 --max-batch 32 \
    2> "$O/vg.log" &
VP=$!
for _ in $(seq 400); do [ -s "$O/node.port" ] && break; sleep 0.05; done
sleep 0.5
callgrind_control -i on $VP > /dev/null
"$B/loadgen-node/loadgen-node" --scenario Server --model llama2-70b --qsl-npy "$O/qsl" \
    --nodes "127.0.0.1:$(cat "$O/node.port")" --output-dir "$O/lg" --quiet --progress off \
    --log-level warn --set "server_target_qps=$QPS" --set use_token_latencies=1 \
    --set "min_duration_ms=$DUR" --set min_query_count=1 --set server_ttft_latency=2000000000 \
    --set server_tpot_latency=200000000 --set server_target_latency_ns=60000000000 || true
callgrind_control -i off $VP > /dev/null
kill -TERM $VP; wait $VP || true
kill -TERM $SP; wait $SP || true
TOK=$(grep -o 'tokens=[0-9]*' "$O/src.log" | tail -1 | cut -d= -f2)
callgrind_annotate --inclusive=no "$O/cg.out" 2> /dev/null > "$O/self.txt"
callgrind_annotate --inclusive=yes "$O/cg.out" 2> /dev/null > "$O/incl.txt"
IR=$(grep -m1 'PROGRAM TOTALS' "$O/self.txt" | awk '{gsub(",", "", $1); print $1}')
echo "K=$K tokens=$TOK Ir=$IR per_token=$((IR / TOK))"
