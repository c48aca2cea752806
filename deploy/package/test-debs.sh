#!/usr/bin/env bash
# The Debian packages, as an operator gets them: builds them (build-debs.sh), installs them with
# apt into a pristine Debian 12 root (debootstrap minbase, nothing else: ../shared/tools/fresh-root.sh
# where the project's shared tools are, else deploy/container/make-base.sh --tar and a chroot),
# then, with the installed files only: --version of both programs; the packaged plugins found by
# name (sut-node --list-backends); a program compiled
# against the installed QDL, shared and static (pkg-config qdl) and the plugin ABI header; and a
# loopback Server run, sut-node started with the installed /etc/mlperf/sut-node.conf, loadgen-node
# through the network, the summary checked for a result and no errors, sut-node stopped cleanly;
# an LLM run: the token QSL prepared with the packaged tools through a token-streaming sim node,
# loadgen-node Server with token latencies (TTFT/TPOT lines checked), both programs' metrics
# scraped (metrics_check.py: counts against the run's logs; the LLM metrics this build has); and
# a dry-run LLM submission with the packaged runner through that node (llama3.1-8b Offline and
# Interactive, TEST06 and the checker of a copy of the inference checkout: MLPERF_INFERENCE_DIR,
# default ../shared/reference/mlcommons-inference; a stand-in accuracy), its tree checked.
#
#   deploy/package/test-debs.sh                 build the packages in build-deb/, then test them
#   deploy/package/test-debs.sh --build DIR     build them from the build folder DIR (configured
#                                               with -DCMAKE_INSTALL_PREFIX=/usr; the CTest test)
#   deploy/package/test-debs.sh --debs DIR      test the .debs in DIR
#
# Exit 77 (skipped) when not root, without debootstrap where the fresh-root tool is missing
# (FRESH_ROOT=path overrides ../shared/tools/fresh-root.sh; MLPN_BASE_TAR the tarball made
# otherwise, default /tmp/mlperf-network-base.tar.zst), or with --build of a folder whose prefix
# is not /usr. CI runs
# it (.ci/run, step packages).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
debs=""
build=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --debs) debs=$2; shift ;;
        --build) build=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "test-debs: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
fresh=${FRESH_ROOT:-$root/../shared/tools/fresh-root.sh}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: test-debs needs root (apt and chroot in a fresh root)"; exit 77; }
if [[ ! -x $fresh ]]; then
    command -v debootstrap >/dev/null && command -v zstd >/dev/null ||
        { echo "SKIP: test-debs needs $fresh (the fresh-root tool), or debootstrap and zstd"; exit 77; }
    fresh=""
fi
# The official sources (mlperf.conf, accuracy script, compliance tests, checker), never modified.
inference=${MLPERF_INFERENCE_DIR:-$root/../shared/reference/mlcommons-inference}
[[ -f $inference/loadgen/mlperf.conf ]] ||
    { echo "SKIP: test-debs needs an mlcommons/inference checkout (MLPERF_INFERENCE_DIR, else $inference)"; exit 77; }

if [[ -n $build ]]; then
    grep -q '^CMAKE_INSTALL_PREFIX:PATH=/usr$' "$build/CMakeCache.txt" || {
        echo "SKIP: $build installs elsewhere than /usr; packages come from a build for /usr" \
             "(deploy/package/build-debs.sh makes one)"; exit 77; }
fi
if [[ -z $debs ]]; then
    build=${build:-$root/build-deb}
    "$root/deploy/package/build-debs.sh" "$build" >/dev/null
    debs=$build/packages
fi
stage=$(mktemp -d /tmp/test-debs.XXXXXX)
trap 'rm -rf "$stage"' EXIT
cp "$debs"/mlperf-network-*.deb "$debs"/libqdl0_*.deb "$stage/"
cat >"$stage/inside.sh" <<'INSIDE'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends ./*.deb gcc libc6-dev pkg-config man-db \
    python3 python3-numpy python3-pandas >/dev/null
# What the loadgen package recommends (apt installs it unless told not to) comes too.
recommends=$(dpkg-query -W -f='${Recommends}' mlperf-network-loadgen | sed 's/([^)]*)//g; s/,/ /g')
apt-get install -y -qq --no-install-recommends $recommends >/dev/null
echo "test-debs: installed $(ls ./*.deb | tr '\n' ' ')"
sut-node --version
loadgen-node --version
# The man pages (from --help) and the tools a package user needs: LLM data, the submission
# runner, the fabric; each answers --help from where the package put it.
man -P cat sut-node | grep -q -- '--backend' || { echo "test-debs: no man page of sut-node"; exit 1; }
man -P cat loadgen-node | grep -q -- '--scenario' || { echo "test-debs: no man page of loadgen-node"; exit 1; }
share=/usr/share/mlperf-network
for t in tools/make_llm_tokens.py tools/llm_pickle_to_qsl.py submission/submit.py netns/fabric.sh; do
    "$share/$t" --help >/tmp/help.txt 2>&1 || { echo "test-debs: $share/$t --help failed:"; cat /tmp/help.txt; exit 1; }
done
[[ -x /usr/libexec/mlperf-network/delay-relay ]] || { echo "test-debs: no delay-relay"; exit 1; }
# An LLM token QSL prepared with the packaged tools, as a user does from a data-set pickle.
"$share/tools/make_llm_tokens.py" --out /tmp/llm.pkl --count 8 >/dev/null
"$share/tools/llm_pickle_to_qsl.py" --pickle /tmp/llm.pkl --out-dir /tmp/llm-qsl
[[ $(ls /tmp/llm-qsl | wc -l) -eq 8 ]] || { echo "test-debs: the LLM QSL has not 8 samples"; exit 1; }
echo "test-debs: man pages, LLM data tools, the submission runner and the fabric script run from the package"
# The packaged plugins, found by name in /usr/lib/sut-node (--backend openai, kserve).
for be in openai kserve; do
    [[ -e /usr/lib/sut-node/libsut_backend_$be.so ]] || continue
    sut-node --list-backends | grep -q "^  $be  */usr/lib/sut-node/libsut_backend_$be.so\$" ||
        { echo "test-debs: sut-node does not list its $be plugin:"; sut-node --list-backends; exit 1; }
done

cat >/tmp/q.c <<'C'
#include <qdl/qdl.h>
#include <sut/sut_backend.h>
#include <stdio.h>
int main(void)
{
    qdl_config_t c;
    qdl_config_init(&c);
    printf("qdl: default policy %d, plugin ABI %d\n", (int)c.policy, SUT_BACKEND_ABI_VERSION);
    return 0;
}
C
gcc -o /tmp/q-shared /tmp/q.c $(pkg-config --cflags --libs qdl) && /tmp/q-shared
# Not grep -q: it exits at the first match, ldd dies of SIGPIPE and pipefail fails the check.
ldd /tmp/q-shared | grep 'libqdl.so.0 => /' >/dev/null || { echo "test-debs: libqdl.so.0 not found"; exit 1; }
libdir=$(pkg-config --variable=libdir qdl)
gcc -o /tmp/q-static /tmp/q.c $(pkg-config --cflags qdl) "$libdir/libqdl.a" \
    $(pkg-config --static --libs qdl | sed 's/-lqdl//') && /tmp/q-static
echo "test-debs: qdl.h, sut_backend.h, libqdl.so and libqdl.a build and run"

# The packaged config chooses no backend (sut-node refuses to start until one is set).
sut-node --config /etc/mlperf/sut-node.conf --listen 127.0.0.1:0 --port-file /tmp/port \
    --backend sim --log-level warn 2>/tmp/sut.log &
sut=$!
for _ in $(seq 200); do [[ -s /tmp/port ]] && break; sleep 0.05; done
[[ -s /tmp/port ]] || { echo "test-debs: sut-node did not start:"; cat /tmp/sut.log; exit 1; }
status=0
loadgen-node --scenario Server --model resnet50 --qsl-synthetic 256 --sample-size 150528 \
    --synthetic-kind image --nodes "127.0.0.1:$(cat /tmp/port)" \
    --set min_duration_ms=3000 --set server_target_qps=200 --set server_target_latency_ns=15000000 \
    --output-dir /tmp/run --quiet --progress off --log-level error || status=$?
grep -E "^(SUT name|Scenario|Completed samples per second|Result is)" /tmp/run/mlperf_log_summary.txt
grep -q "No errors encountered during test." /tmp/run/mlperf_log_summary.txt ||
    { echo "test-debs: the run logged errors"; exit 1; }
[[ $status -le 1 ]] || { echo "test-debs: loadgen-node exited $status"; exit 1; }
kill -TERM $sut
wait $sut || { echo "test-debs: sut-node did not stop cleanly:"; cat /tmp/sut.log; exit 1; }
echo "test-debs: the installed programs served a loopback Server run (loadgen-node exit $status)"

# An LLM run from the package: the token QSL prepared above through a sut-node whose sim backend
# streams tokens (llm=1: a first token, then TOKENS at a fixed pace), loadgen-node Server with
# token latencies (mlperf.conf of the copied inference checkout, short --set values), both
# programs' metrics scraped after the run (loadgen-node's lingers) and counted against its logs.
inf=/root/project/inference
TOKENS=16
sut-node --listen 127.0.0.1:0 --port-file /tmp/llm-port --backend sim --backend-opt llm=1 \
    --backend-opt tokens=$TOKENS --backend-opt ttft_us=2000 --backend-opt tpot_us=200 \
    --metrics-listen 127.0.0.1:0 --log-level info 2>/tmp/llm-sut.log &
sut=$!
for _ in $(seq 200); do [[ -s /tmp/llm-port ]] && break; sleep 0.05; done
[[ -s /tmp/llm-port ]] || { echo "test-debs: the LLM sut-node did not start:"; cat /tmp/llm-sut.log; exit 1; }
sut_url=$(grep -o 'metrics on http://[^ ]*' /tmp/llm-sut.log | cut -d' ' -f3)
loadgen-node --scenario Server --model llama3_1-8b --qsl-npy /tmp/llm-qsl \
    --mlperf-conf "$inf/loadgen/mlperf.conf" --nodes "127.0.0.1:$(cat /tmp/llm-port)" \
    --set min_duration_ms=2000 --set server_target_qps=20 --set min_query_count=40 \
    --output-dir /tmp/llm-run --quiet --progress off --log-level info \
    --metrics-listen 127.0.0.1:0 --metrics-linger-ms 10000 2>/tmp/llm-lg.log &
lg=$!
# The nodes file is written after the logs and before the linger: the run is over, counts final.
for _ in $(seq 1200); do [[ -s /tmp/llm-run/mlperf_log_nodes.json ]] && break; sleep 0.05; done
lg_url=$(grep -o 'metrics on http://[^ ]*' /tmp/llm-lg.log | cut -d' ' -f3 || true)
[[ -n $lg_url && -s /tmp/llm-run/mlperf_log_nodes.json ]] ||
    { echo "test-debs: the LLM run did not finish or named no metrics endpoint:"; cat /tmp/llm-lg.log; exit 1; }
# The LLM histograms and token counters exist where loadgen-node has --metrics-push (the same
# change); there they are required, elsewhere the names found are printed.
llm_metrics=optional
loadgen-node --help | grep -q -- '--metrics-push' && llm_metrics=required
python3 /root/project/metrics_check.py "$lg_url" "$sut_url" /tmp/llm-run $TOKENS $llm_metrics
status=0
wait $lg || status=$?
[[ $status -le 1 ]] || { echo "test-debs: the LLM loadgen-node exited $status:"; cat /tmp/llm-lg.log; exit 1; }
s=/tmp/llm-run/mlperf_log_summary.txt
grep -E "^(Scenario|Completed tokens per second|Result is|99.00 percentile (first token latency|time to output token))" $s
for want in "Completed tokens per second" "99.00 percentile first token latency (ns)" \
        "99.00 percentile time to output token (ns)" "No errors encountered during test."; do
    grep -qF "$want" $s || { echo "test-debs: the LLM summary has no '$want'"; exit 1; }
done
echo "test-debs: an LLM Server run from the package: token QSL, token latencies, metrics (exit $status)"

# A dry-run LLM submission with the packaged runner through the same node: llama3.1-8b Offline and
# Interactive on the token QSL, TEST06 verified and the tree checked by the official scripts of the
# copied inference checkout; accuracy by a stand-in (sub/standin.py: the official script needs
# Hugging Face packages Debian 12 lacks), so the tree says it is not a valid result. The short
# runs break the checker's rules (600 s, data-set size, the stand-in's scores): exit 1 is the
# checker's verdict; a step that stops the runner exits 2 or 3.
sub=/root/project/sub
sed -i "s/@ADDR@/127.0.0.1:$(cat /tmp/llm-port)/; s|@INF@|$inf|" $sub/submission.ini $sub/deployment.ini
status=0
(cd $sub && "$share/submission/submit.py" submission.ini --dry-run) >/tmp/submit.log 2>&1 || status=$?
grep -E "^\[[0-9]+/[0-9]+\]|^submit.py: |^NOT A VALID" /tmp/submit.log | grep -v ' \.\.\.$' || true
[[ $status -le 1 ]] || { echo "test-debs: submit.py --dry-run exited $status:"; cat /tmp/submit.log; exit 1; }
# The checker's own lines: it must have judged the tree, not stopped with a Python error.
grep -A4 "^The official submission checker" /tmp/submit.log || true
! grep -q "the checker stopped with a Python error" /tmp/submit.log ||
    { echo "test-debs: the official checker failed to run:"; cat $sub/work/logs/check.log; exit 1; }
# Its errors are only what a short run with a stand-in accuracy cannot meet.
short='Test duration less than 600s|accurc?y run does not cover all dataset|Early stopping condition'
short+='|performance_sample_count, found|Required minimum (Query Count|samples per query)'
short+='|Some (performance|accuracy|compliance) checks? Checks failed for|NoResults |SUMMARY: submission has errors'
bad=$(grep ' ERROR\] ' $sub/work/logs/check.log | grep -vE "$short" || true)
[[ -z $bad ]] || { echo "test-debs: the checker found more than a short run's faults:"; echo "$bad"; exit 1; }
res=$sub/out/network/PackageTry/results/pkg_1x_sim/llama3.1-8b
for f in NOT_FOR_SUBMISSION.txt STAND_IN_ACCURACY.txt network/PackageTry/systems/pkg_1x_sim.json; do
    [[ -s $sub/out/$f ]] || { echo "test-debs: the dry-run tree lacks $f:"; cat /tmp/submit.log; exit 1; }
done
for sc in Offline Interactive; do
    for f in performance/run_1/mlperf_log_summary.txt accuracy/mlperf_log_accuracy.json \
            accuracy/accuracy.txt measurements.json TEST06/verify_accuracy.txt; do
        [[ -s $res/$sc/$f ]] || { echo "test-debs: the dry-run tree lacks $sc/$f:"; cat /tmp/submit.log; exit 1; }
    done
    grep -q "TEST06 verification complete" "$res/$sc/TEST06/verify_accuracy.txt" ||
        { echo "test-debs: $sc TEST06 not verified:"; cat "$res/$sc/TEST06/verify_accuracy.txt"; exit 1; }
    grep -q "'gen_num': 8}" "$res/$sc/accuracy/accuracy.txt" ||
        { echo "test-debs: $sc accuracy.txt is not the stand-in's over 8 samples:"; cat "$res/$sc/accuracy/accuracy.txt"; exit 1; }
done
kill -TERM $sut
wait $sut || { echo "test-debs: the LLM sut-node did not stop cleanly:"; cat /tmp/llm-sut.log; exit 1; }
echo "test-debs: submit.py --dry-run wrote $(find $sub/out -type f | wc -l) files, NOT_FOR_SUBMISSION.txt among them (exit $status)"
INSIDE
cp "$root/deploy/package/metrics_check.py" "$stage/"
# The official sources, copied: the runner's `inference =` checkout and the LLM run's mlperf.conf.
cp -r "$inference" "$stage/inference"
chmod -R u+w "$stage/inference"
# The runner's config (@ADDR@, the node's address, and @INF@ filled in inside): short runs.
mkdir "$stage/sub"
cat >"$stage/sub/submission.ini" <<'INI'
[submission]
organization = PackageTry
system = pkg_1x_sim
division = network
version = v6.1
inference = @INF@
output = out
work = work
loadgen_node = /usr/bin/loadgen-node
mlperf_conf = @INF@/loadgen/mlperf.conf
system_json = system-base.json
deployment = deployment.ini
netmeta_flags = --no-probe

[nodes]
addresses = @ADDR@

[benchmark.llama3_1-8b]
scenarios = Offline, Interactive
user_conf = user.conf
qsl = --qsl-npy /tmp/llm-qsl
accuracy_standin = python3 /root/project/sub/standin.py {accuracy_log}
verify_flags.TEST06 = --dtype int32 -e 2
measurements.input_data_types = int32 token IDs
measurements.retraining = no
measurements.starting_weights_filename = none (sim backend)
measurements.weight_data_types = N/A
measurements.weight_transformations = none
INI
cat >"$stage/sub/user.conf" <<'CONF'
llama3_1-8b.Offline.target_qps = 100
llama3_1-8b.*.min_duration = 1000
llama3_1-8b.*.min_query_count = 16
llama3_1-8b-interactive.Server.target_qps = 8
llama3_1-8b-interactive.*.min_duration = 1000
llama3_1-8b-interactive.*.min_query_count = 16
CONF
cat >"$stage/sub/standin.py" <<'PY'
"""A stand-in accuracy for the test (standard library): the samples and output tokens of the
accuracy log, in the official scripts' dictionary form; the ROUGE scores are not computed (0.0)."""
import json
import sys

log = json.load(open(sys.argv[1]))
tokens = sum(len(e["data"]) // 8 for e in log)  # int32 token IDs as hex
print("STAND-IN (samples and output tokens only): {'rouge1': '0.0', 'rouge2': '0.0', "
      f"'rougeL': '0.0', 'rougeLsum': '0.0', 'gen_len': {tokens}, 'gen_num': {len(log)}}}")
PY
cat >"$stage/sub/deployment.ini" <<'INI'
[deployment]
network_type = Ethernet
network_media = virtual
network_rate = N/A (loopback)
protocol = TCP/IPv4
topology = point-to-point
emulated = yes

[loadgen]
local = yes
interface = lo
nic = loopback
number_nic = 1

[sut.node0]
address = @ADDR@
local = yes
interface = lo
nic = loopback
number_nic = 1
device = sim backend
INI
python3 - "$stage/sub/system-base.json" <<'PY'
import json, sys
keys = ("system_type_detail host_processor_model_name host_processors_per_node "
        "host_processor_core_count host_processor_frequency host_processor_caches "
        "host_processor_interconnect host_memory_capacity host_memory_configuration "
        "host_storage_capacity host_storage_type host_networking host_networking_topology "
        "host_network_card_count accelerators_per_node accelerator_model_name "
        "accelerator_memory_capacity accelerator_frequency accelerator_host_interconnect "
        "accelerator_interconnect accelerator_interconnect_topology "
        "accelerator_memory_configuration accelerator_on-chip_memories cooling framework "
        "operating_system other_software_stack hw_notes sw_notes").split()
d = {k: "N/A" for k in keys}
d.update(status="available", system_type="datacenter", number_of_nodes="1")
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
if [[ -n $fresh ]]; then
    "$fresh" run "$stage" bash inside.sh
    exit
fi
# Without the shared tool: the repository's own base (deploy/container/make-base.sh), unpacked
# into a throw-away root and entered with chroot in a private mount namespace.
base=${MLPN_BASE_TAR:-/tmp/mlperf-network-base.tar.zst}
"$root/deploy/container/make-base.sh" --tar "$base" >/dev/null
r=$stage/root
mkdir -p "$r"
zstd -dc "$base" | tar -x --numeric-owner -C "$r"
cp /etc/resolv.conf "$r/etc/resolv.conf"
mkdir -p "$r/root/project"
cp -r "$stage"/*.deb "$stage"/inside.sh "$stage"/metrics_check.py "$stage"/inference "$stage"/sub "$r/root/project/"
unshare --mount --propagation private -- bash -c '
    set -e
    r=$1
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    mount -t sysfs sysfs "$r/sys"
    mount -t tmpfs tmpfs "$r/tmp"
    exec chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        bash -c "cd /root/project && bash inside.sh" </dev/null' _ "$r"
