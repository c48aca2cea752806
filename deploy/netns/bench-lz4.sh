#!/usr/bin/env bash
# Compression pays where the fabric is slow: Offline samples/s with and without LZ4 over the
# emulated fabric (deploy/netns/fabric.sh, default 1 Gbit/s per link), with Fashion-MNIST images
# prepared as ResNet50-sized int8 tensors (deploy/netns/fmnist-like.py, 150 528 bytes each).
# The sut-nodes run the digest backend, so every sample is decompressed (timed, on the SUT) and
# proven intact; runs alternate none/lz4 in one fabric so both see the same machine. Needs root.
#
#   deploy/netns/bench-lz4.sh [OPTIONS]
#
# Options:
#   --rate RATE          per-link rate (default 1gbit; see fabric.sh --rate)
#   --suts N             SUT hosts (default 2)
#   --samples N          samples per Offline run with qdl-drive (default 3000; loadgen-node
#                        sizes its Offline query itself: 1.1 x target_qps x 1 s)
#   --runs N             runs per codec; the median is reported (default 3)
#   --count N            distinct images in the QSL (default 512)
#   --client C           loadgen-node (an Offline run with the official logs; the default when it
#                        is built) or qdl-drive
#   --build DIR          the build folder (default build)
#   --out FILE           write the results as JSON here (default bench-lz4-RATE.json)
#   --data FILE          reuse this fmnist-like.py output instead of making one
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prog=bench-lz4.sh
usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

rate=1gbit suts=2 samples=3000 runs=3 count=512 client=auto build=$root/build out="" data=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rate) rate=$2; shift ;;
        --suts) suts=$2; shift ;;
        --samples) samples=$2; shift ;;
        --runs) runs=$2; shift ;;
        --count) count=$2; shift ;;
        --client) client=$2; shift ;;
        --build) build=$2; shift ;;
        --out) out=$2; shift ;;
        --data) data=$2; shift ;;
        --inner) shift; break ;;
        -h|--help) usage 0 ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---- inside the LoadGen namespace: $1 = results folder; the rest from the environment.
if [[ ${BENCH_INNER:-0} -eq 1 ]]; then
    res=$1
    for ((r = 1; r <= BENCH_RUNS; r++)); do
        for codec in none lz4; do
            tag=$codec-$r
            if [[ $BENCH_CLIENT == qdl-drive ]]; then
                "$BENCH_DRIVE" --quiet --nodes "$FABRIC_NODES" --scenario Offline --samples "$BENCH_SAMPLES" \
                    --qsl-raw "$BENCH_DATA" --sample-size 150528 --compress "$codec" --verify-digest \
                    >"$res/$tag.json"
            else
                mkdir -p "$res/$tag"
                # Offline: the QSL's samples/s target sized so the run lasts about 2 s at line rate.
                printf '*.Offline.min_duration = 1000\n*.Offline.target_qps = %s\n' "$BENCH_TARGET_QPS" >"$res/user.conf"
                # 3D-UNet's name: the rules approve LZ4 for 3D-UNet and DLRMv3 only (6.2.4).
                "$BENCH_LOADGEN" --scenario Offline --model 3d-unet-99 --user-conf "$res/user.conf" \
                    --audit-config none --nodes "$FABRIC_NODES" --qsl-raw "$BENCH_DATA" --sample-size 150528 \
                    --compress "$codec" --verify-digest --progress off --quiet --output-dir "$res/$tag" \
                    2>"$res/$tag/stderr.log"
            fi
            echo "$prog: run $r, $codec: done" >&2
        done
    done
    exit 0
fi

if [[ $client == auto ]]; then
    client=qdl-drive
    [[ -x $build/loadgen-node/loadgen-node ]] && client=loadgen-node
fi
case "$client" in
    qdl-drive) bin=$build/deploy/netns/qdl-drive ;;
    loadgen-node) bin=$build/loadgen-node/loadgen-node ;;
    *) echo "$prog: --client must be loadgen-node or qdl-drive" >&2; exit 2 ;;
esac
[[ -x $bin ]] || { echo "$prog: $bin is not built (cmake --build $build)" >&2; exit 3; }
[[ -x $build/sut-node/sut-node ]] || { echo "$prog: $build/sut-node/sut-node is not built" >&2; exit 3; }
for n in "$suts" "$samples" "$runs" "$count"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$prog: --suts, --samples, --runs and --count take positive numbers" >&2; exit 2; }
done
[[ -n $out ]] || out=bench-lz4-$rate.json
# The Debian python3 has python3-numpy (deploy/install-deps.sh); another python3 first in PATH
# (pyenv, a virtualenv) may not.
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3) || { echo "$prog: python3 is missing" >&2; exit 3; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-lz4.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [[ -z $data ]]; then
    data=$tmp/fmnist-like.raw
    "$python" "$here/fmnist-like.py" "$data" --count "$count"
fi
mkdir -p "$tmp/res"
# loadgen-node's Offline query holds 1.1 x target_qps x 1 s samples. The target is three times
# what the link carries uncompressed (LZ4 shrinks these tensors ~2.5x), so even the compressed
# run lasts past the 1 s minimum; with no rate limit, a generous fixed target.
line_rate=$("$python" - "$rate" <<'PY'
import re, sys
r = {"1GbE": "1gbit", "10GbE": "10gbit", "25GbE": "25gbit", "40GbE": "40gbit",
     "100GbE": "100gbit", "200GbE": "200gbit"}.get(sys.argv[1], sys.argv[1])
m = re.match(r"(\d+)(k|m|g)bit$", r)
bps = int(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else 40e9
print(int(bps / 8 / 150528 * 3))
PY
)

if [[ $client == qdl-drive ]]; then size="$samples samples"; else size="target_qps $line_rate"; fi
echo "$prog: Offline ($size) x $runs runs per codec, $suts SUT hosts, $rate per link, client $client"
BENCH_INNER=1 BENCH_RUNS=$runs BENCH_CLIENT=$client BENCH_DRIVE=$build/deploy/netns/qdl-drive \
BENCH_LOADGEN=$build/loadgen-node/loadgen-node BENCH_SAMPLES=$samples BENCH_DATA=$data \
BENCH_TARGET_QPS=$line_rate \
    "$here/fabric.sh" --quiet --suts "$suts" --rate "$rate" --sut-node "$build/sut-node/sut-node" \
    --sut-args "--backend digest" --timeout 900 -- "$here/bench-lz4.sh" --inner "$tmp/res"

"$python" - "$tmp/res" "$runs" "$rate" "$suts" "$client" "$out" <<'PY'
import glob, json, os, re, statistics, sys
res, runs, rate, suts, client, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
def run(codec, r):
    base = os.path.join(res, f"{codec}-{r}")
    if os.path.exists(base + ".json"):
        d = json.load(open(base + ".json"))
        if not d["pass"]:
            sys.exit(f"bench-lz4: {codec} run {r} did not pass: {d}")
        return d["samples_per_second"], d["wire_size_mean"]
    s = open(os.path.join(base, "mlperf_log_summary.txt")).read()
    m = re.search(r"Samples per second: *([0-9.e+]+)", s)
    if not m:
        sys.exit(f"bench-lz4: {codec} run {r}: no 'Samples per second' in the loadgen-node summary")
    if "Result is : VALID" not in s:
        print(f"bench-lz4: warning: {codec} run {r} is not VALID (see {base}); its rate still counts",
              file=sys.stderr)
    # The QDL's per-node table on stderr: sent samples (4th column) and bytes out (12th).
    sent = out = 0
    for line in open(os.path.join(base, "stderr.log")):
        f = line.split()
        if len(f) == 13 and f[2] in ("yes", "no") and f[3].isdigit() and f[11].isdigit():
            sent += int(f[3])
            out += int(f[11])
    return float(m.group(1)), (out / sent if sent else None)
result = {"rate": rate, "sut_hosts": suts, "client": client, "sample_bytes": 150528,
          "data": "Fashion-MNIST t10k, bilinear 224x224, ImageNet-normalised, int8 CHW", "codecs": {}}
for codec in ("none", "lz4"):
    sps = [run(codec, r)[0] for r in range(1, runs + 1)]
    wire = run(codec, 1)[1]
    result["codecs"][codec] = {"samples_per_second_runs": sps,
                               "samples_per_second_median": statistics.median(sps),
                               "wire_bytes_mean": wire}
a, b = (result["codecs"][c]["samples_per_second_median"] for c in ("none", "lz4"))
result["speedup_lz4"] = round(b / a, 3)
w = result["codecs"]["lz4"]["wire_bytes_mean"]
if w:
    result["lz4_ratio"] = round(150528 / w, 3)
with open(out, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
print(f"bench-lz4: {rate} per link, {suts} SUT hosts, Offline, 150528-byte samples ({client})")
print(f"  without compression : {a:10.1f} samples/s  (runs: {', '.join('%.1f' % x for x in result['codecs']['none']['samples_per_second_runs'])})")
print(f"  with LZ4            : {b:10.1f} samples/s  (runs: {', '.join('%.1f' % x for x in result['codecs']['lz4']['samples_per_second_runs'])})")
if w:
    print(f"  LZ4 ratio           : {result['lz4_ratio']:.2f} ({w:.0f} bytes on the wire per sample)")
print(f"  speed-up            : {result['speedup_lz4']:.2f}x   (written to {out})")
PY
