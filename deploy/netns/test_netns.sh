#!/usr/bin/env bash
# CTest netns.fabric: 1 LoadGen host and 2 SUT hosts as network namespaces (deploy/netns/fabric.sh),
# 1 Gbit/s per link with a 200 us one-way delay relay, sut-nodes with the digest backend; a Server
# run (LZ4-compressed image samples) and an Offline run across the emulated fabric must both be
# VALID (loadgen-node) or PASS (qdl-drive, where loadgen-node is not built); then each run's
# latency plot is drawn and the Network-division metadata and system diagram are generated from the
# live fabric and checked. Skipped (exit 77, with the reason) when not root or without the
# capabilities network namespaces need.
#
#   test_netns.sh --out DIR --sut-node PATH --drive PATH --relay PATH --python PY
#                 [--loadgen-node PATH]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deploy=$(cd "$here/.." && pwd)
out="" sut_node="" drive="" relay="" python=python3 loadgen="" inner=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out=$2; shift ;;
        --sut-node) sut_node=$2; shift ;;
        --drive) drive=$2; shift ;;
        --relay) relay=$2; shift ;;
        --python) python=$2; shift ;;
        --loadgen-node) loadgen=$2; shift ;;
        --inner) inner=1 ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test_netns: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
[[ -n $out && -n $sut_node && -n $drive && -n $relay ]] || { echo "test_netns: missing arguments (see --help)" >&2; exit 2; }

fail() { echo "test_netns: FAIL: $*" >&2; exit 1; }

# ---- inside the LoadGen namespace -----------------------------------------------------------
if [[ $inner -eq 1 ]]; then
    : "${FABRIC_NODES:?not run by fabric.sh}"
    echo "test_netns: in $FABRIC_LG_NS, nodes $FABRIC_NODES"
    if [[ -n $loadgen ]]; then
        # Short runs through user.conf. Offline: the link (1 Gbit/s, 8 KiB samples, at most about
        # 15 000 samples/s) is the bottleneck, so 1.1 x 16 000 samples take over the minimum
        # duration however fast the machine is. Server: a generous latency bound, so validity
        # depends on the fabric working, not on how busy the machine is; 750 queries are enough
        # for early stopping at the 99th percentile (about 460 with none over the bound).
        cat >"$out/user.conf" <<'CONF'
# test_netns
*.*.min_duration = 1000
*.Server.min_duration = 1500
*.Server.target_qps = 500
*.Server.target_latency = 200
*.Offline.target_qps = 16000
CONF
        common=(--user-conf "$out/user.conf" --audit-config none --nodes "$FABRIC_NODES"
                --verify-digest --progress off --quiet)
        for scen in Server Offline; do
            dir=$out/$scen
            mkdir -p "$dir"
            extra=(--qsl-synthetic 256 --sample-size 8192 --model resnet50)
            # LZ4 under 3D-UNet's name: the rules approve it for 3D-UNet and DLRMv3 only.
            [[ $scen == Server ]] && extra=(--qsl-synthetic 256 --sample-size 8192 --model 3d-unet-99
                                            --synthetic-kind image --compress lz4)
            start=$SECONDS
            status=0
            "$loadgen" --scenario "$scen" "${common[@]}" "${extra[@]}" --output-dir "$dir" || status=$?
            echo "test_netns: loadgen-node $scen exited $status after $((SECONDS - start)) s"
            grep -E "Result is|samples per second|Samples per second|99.00 percentile" "$dir/mlperf_log_summary.txt" || true
            ((status == 0)) || fail "loadgen-node $scen exited $status"
            grep -q "Result is : VALID" "$dir/mlperf_log_summary.txt" || fail "$scen: summary does not say VALID"
            grep -q 'Network SUT' "$dir/mlperf_log_detail.txt" || fail "$scen: sut_name lacks 'Network SUT'"
            "$python" "$deploy/plot/latplot.py" "$dir" --out "$dir/latency.svg"
        done
    else
        echo "test_netns: loadgen-node is not built; driving the nodes with qdl-drive"
        dir=$out/Server
        mkdir -p "$dir"
        "$drive" --nodes "$FABRIC_NODES" --scenario Server --qps 500 --duration-ms 1500 \
            --target-latency-ms 200 --qsl-synthetic 256 --sample-size 8192 --synthetic-kind image \
            --compress lz4 --verify-digest --latency-csv "$dir/latencies.csv" >"$dir/result.json" \
            || fail "Server: qdl-drive did not PASS ($(cat "$dir/result.json"))"
        cat "$dir/result.json"
        "$python" "$deploy/plot/latplot.py" "$dir" --out "$dir/latency.svg"
        dir=$out/Offline
        mkdir -p "$dir"
        "$drive" --nodes "$FABRIC_NODES" --scenario Offline --samples 8000 --qsl-synthetic 256 \
            --sample-size 8192 --verify-digest --latency-csv "$dir/latencies.csv" >"$dir/result.json" \
            || fail "Offline: qdl-drive did not PASS ($(cat "$dir/result.json"))"
        cat "$dir/result.json"
        "$python" "$deploy/plot/latplot.py" "$dir" --out "$dir/latency.svg"
    fi
    # The metadata of this very fabric, probed from inside it.
    "$python" "$deploy/metadata/netmeta.py" --config "$FABRIC_CONFIG" --out "$out/system.json" \
        --dot "$out/diagram.dot" --svg "$out/diagram.svg" --dump-facts "$out/facts.json"
    exit 0
fi

# ---- outside: preconditions, the fabric, the checks ------------------------------------------
if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: test_netns needs root to create network namespaces, veth pairs and tc qdiscs (CI runs it as root)"
    exit 77
fi
capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
if (((0x$capeff >> 12 & 1) == 0 || (0x$capeff >> 21 & 1) == 0)); then
    echo "SKIP: root without CAP_NET_ADMIN and CAP_SYS_ADMIN (an unprivileged container?): cannot create network namespaces"
    exit 77
fi
rm -rf "$out"
mkdir -p "$out"
start=$SECONDS
args=(--out "$out" --sut-node "$sut_node" --drive "$drive" --relay "$relay" --python "$python")
[[ -z $loadgen ]] || args+=(--loadgen-node "$loadgen")
"$here/fabric.sh" --suts 2 --rate 1gbit --delay-us 200 --sut-node "$sut_node" --relay "$relay" \
    --sut-args "--backend digest" --timeout 40 --log-dir "$out/fabric" -- "$here/test_netns.sh" --inner "${args[@]}"

# Every namespace of the run is gone.
if ip netns list | grep "^nf$$-" >/dev/null; then
    ip netns list >&2
    fail "namespaces of this run were left behind"
fi
for f in Server/latency.svg Offline/latency.svg diagram.dot system.json; do
    [[ -s $out/$f ]] || fail "$f was not written"
done
if command -v dot >/dev/null; then
    grep -q "<svg" "$out/diagram.svg" || fail "the system diagram did not render to SVG"
fi
"$python" - "$out/system.json" <<'PY'
import json, sys
fields = ["is_network", "network_type", "network_media", "network_rate", "nic_loadgen",
          "number_nic_loadgen", "net_software_stack_loadgen", "network_protocol",
          "number_connections", "nic_sut", "number_nic_sut", "net_software_stack_sut",
          "network_topology"]
d = json.load(open(sys.argv[1]))
missing = [k for k in fields if k not in d]
assert not missing, f"missing fields: {missing}"
assert d["is_network"] == "true", d["is_network"]
assert d["number_connections"] == 2, d["number_connections"]
assert d["network_type"] == "Ethernet", d["network_type"]
assert d["network_rate"].startswith("1Gb/s"), d["network_rate"]
assert "TCP/IPv4" in d["network_protocol"], d["network_protocol"]
todo = [k for k in fields if "TODO" in str(d[k])]
assert not todo, f"the emulated fabric is fully known, yet TODO in {todo}"
print("test_netns: system.json has the 13 Network-division fields")
PY
echo "test_netns: PASS in $((SECONDS - start)) s (outputs in $out)"
