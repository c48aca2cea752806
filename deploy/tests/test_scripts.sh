#!/usr/bin/env bash
# CTest deploy.scripts: the service and fleet tooling without a cluster. Every script and program
# of deploy/ answers --help; fabric.sh refuses bad arguments (a public subnet above all) before it
# touches anything; the systemd unit passes `systemd-analyze verify` (or a syntax check where
# systemd is absent) and its example config starts the real sut-node; the Slurm batch script
# parses (bash -n) and its --dry-run prints the right steps for a node list.
#
#   test_scripts.sh SUT_NODE QDL_DRIVE DELAY_RELAY PYTHON
set -euo pipefail
[[ $# -eq 4 ]] || { sed -n '2,8p' "$0"; exit 2; }
sut_node=$1 drive=$2 relay=$3 python=$4
deploy=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/deploy-scripts.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "test_scripts: FAIL: $*" >&2; exit 1; }
expect_fail() { # status message-substring command...
    local want=$1 text=$2 status=0
    shift 2
    "$@" >"$tmp/out" 2>&1 || status=$?
    ((status == want)) || fail "'$*' exited $status, expected $want: $(cat "$tmp/out")"
    grep -q -- "$text" "$tmp/out" || fail "'$*' did not say '$text': $(cat "$tmp/out")"
}

# ---- --help everywhere
for cmd in "$deploy/netns/fabric.sh" "$deploy/netns/test_netns.sh" "$deploy/netns/bench-lz4.sh" \
           "$deploy/slurm/mlperf-network.sbatch" "$deploy/gpu/pack-runtime-debs.sh" \
           "$deploy/gpu/gpu-check.sh" "$deploy/install-deps.sh" "$deploy/test.sh" "$deploy/demo.sh" \
           "$deploy/package/build-debs.sh" "$deploy/package/test-debs.sh" "$deploy/package/test-install.sh" \
           "$drive" "$relay"; do
    "$cmd" --help >"$tmp/help" 2>&1 || fail "$cmd --help failed"
    grep -qi "usage\|--" "$tmp/help" || fail "$cmd --help printed no usage"
done
for py in demo-check.py netns/fmnist-like.py metadata/netmeta.py plot/latplot.py k8s/check-manifests.py; do
    "$python" "$deploy/$py" --help >/dev/null || fail "$py --help failed"
done
echo "test_scripts: --help: ok"

# ---- fabric.sh argument checks (no root needed: arguments are checked first)
fab=$deploy/netns/fabric.sh
expect_fail 2 "not a private" "$fab" --subnet 8.8.8 -- true
expect_fail 2 "not a private" "$fab" --subnet 172.32.0 -- true
expect_fail 2 "--rate" "$fab" --rate 10furlongs -- true
expect_fail 2 "--suts" "$fab" --suts 0 -- true
expect_fail 2 "no COMMAND" "$fab" --suts 2
expect_fail 2 "unknown option" "$fab" --bogus -- true
expect_fail 2 "--tag" "$fab" --tag 'a;b' -- true
echo "test_scripts: fabric.sh arguments: ok"

# ---- delay-relay and qdl-drive argument checks
expect_fail 2 "required" "$relay" --listen 127.0.0.1:0
expect_fail 2 "--delay-us" "$relay" --listen 127.0.0.1:0 --connect 127.0.0.1:1 --delay-us -5
expect_fail 2 "--nodes" "$drive" --scenario Offline --qsl-synthetic 1 --sample-size 8
expect_fail 2 "Offline or Server" "$drive" --nodes 127.0.0.1:1 --scenario Bogus --qsl-synthetic 1 --sample-size 8
expect_fail 3 "cannot reach" "$drive" --nodes 127.0.0.1:1 --scenario Offline --qsl-synthetic 1 --sample-size 8 --quiet
echo "test_scripts: program arguments: ok"

# ---- systemd: the unit, with ExecStart pointed at the built binary
unit=$tmp/sut-node.service
sed "s#/usr/local/bin/sut-node#$sut_node#" "$deploy/systemd/sut-node.service" >"$unit"
grep -q "^ExecStart=$sut_node --config /etc/mlperf/sut-node.conf$" "$unit" || fail "unexpected ExecStart in the unit"
for key in Restart=on-failure LimitNOFILE= LimitMEMLOCK= TasksMax= MemoryMax= TimeoutStopSec= KillSignal=SIGTERM \
    "DeviceAllow=char-infiniband_verbs rw" "DeviceAllow=/dev/infiniband/rdma_cm rw"; do
    grep -q "^$key" "$unit" || fail "the unit lacks $key"
done
if command -v systemd-analyze >/dev/null; then
    # verify exits 0 even for unknown keys; anything it prints is a finding.
    status=0
    SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$unit" >"$tmp/verify" 2>&1 || status=$?
    if ((status != 0)) || [[ -s $tmp/verify ]]; then
        fail "systemd-analyze verify: $(cat "$tmp/verify")"
    fi
    echo "test_scripts: systemd-analyze verify: ok"
    # The sandbox: exposure at most 3.0 of 10 (systemd-analyze security; 1.9 when written).
    systemd-analyze security --offline=true --threshold=30 "$unit" >"$tmp/security" 2>&1 ||
        fail "systemd-analyze security: exposure above 3.0: $(grep Overall "$tmp/security")"
    echo "test_scripts: systemd-analyze security: $(grep -o 'exposure level.*' "$tmp/security")"
else
    awk '/^[[:space:]]*(#|$)/ {next} /^\[[A-Za-z]+\]$/ {next} /^[A-Za-z]+=/ {next}
         {print FILENAME ":" NR ": not a section, key=value or comment: " $0; bad=1} END {exit bad}' \
        "$unit" || fail "systemd unit syntax"
    echo "test_scripts: systemd unit syntax: ok (systemd-analyze not installed)"
fi
# ---- the container recipes: every instruction known, the images not root, OCI labels
for cf in "$deploy/container/Containerfile" "$deploy/container/Containerfile.gpu"; do
    awk 'BEGIN {cont = 0}
         /^[[:space:]]*#/ || /^[[:space:]]*$/ {next}
         { if (!cont && $1 !~ /^(FROM|ARG|LABEL|COPY|RUN|ENV|USER|WORKDIR|EXPOSE|CMD|ENTRYPOINT)$/) {
               print FILENAME ":" NR ": not an instruction: " $0; bad = 1 }
           cont = /\\$/ }
         END {exit bad}' "$cf" || fail "container recipe syntax: $cf"
    grep -q '^USER 10001:10001$' "$cf" || fail "$cf does not run as the unprivileged user"
    grep -q 'org.opencontainers.image.revision=' "$cf" || fail "$cf lacks the OCI revision label"
done
echo "test_scripts: container recipes: ok"
# The example config refuses to start until a backend is chosen (exit 2, naming the file and key)...
grep -v '^listen' "$deploy/systemd/sut-node.conf" >"$tmp/sut-node.conf"
status=0
"$sut_node" --config "$tmp/sut-node.conf" --listen 127.0.0.1:0 --port-file "$tmp/port" 2>"$tmp/sut.log" || status=$?
((status == 2)) || fail "sut-node with the packaged config (backend = unset) exited $status, not 2"
grep -q "no backend chosen: set 'backend = ' in $tmp/sut-node.conf" "$tmp/sut.log" ||
    fail "sut-node with backend = unset did not name the file and key: $(cat "$tmp/sut.log")"
[[ ! -e $tmp/port ]] || fail "sut-node refused to start but left a port file"
echo "test_scripts: sut-node.conf refuses to start until a backend is chosen: ok"
# ...and starts the real daemon once one is (its listen address replaced by a loopback port 0).
"$sut_node" --config "$tmp/sut-node.conf" --backend sim --listen 127.0.0.1:0 --port-file "$tmp/port" 2>"$tmp/sut.log" &
pids+=($!)
for _ in $(seq 200); do [[ -s $tmp/port ]] && break; kill -0 "${pids[0]}" 2>/dev/null || break; sleep 0.05; done
[[ -s $tmp/port ]] || fail "sut-node did not start with deploy/systemd/sut-node.conf: $(cat "$tmp/sut.log")"
kill -TERM "${pids[0]}"
status=0
wait "${pids[0]}" || status=$?
((status == 0)) || fail "sut-node exited $status after SIGTERM: $(cat "$tmp/sut.log")"
echo "test_scripts: sut-node.conf starts sut-node: ok"

# ---- Slurm
sb=$deploy/slurm/mlperf-network.sbatch
bash -n "$sb" || fail "bash -n $sb"
env -u SLURM_JOB_NODELIST -u SLURM_JOB_ID "$sb" --dry-run --nodelist 'lg01,gpu[07-08]' --port 7100 \
    --sut-args "--backend sim" -- --scenario Offline --model resnet50 >"$tmp/dry" 2>&1 || fail "dry run: $(cat "$tmp/dry")"
grep -q "LoadGen host lg01; 2 SUT node(s): gpu07 gpu08" "$tmp/dry" || fail "dry run: wrong split: $(cat "$tmp/dry")"
grep -q -- "--nodelist=gpu07\\\\,gpu08 .*sut-node.*--listen.*0.0.0.0:7100" "$tmp/dry" || fail "dry run: no sut-node step: $(cat "$tmp/dry")"
grep -q -- "--nodelist=lg01 loadgen-node --nodes gpu07:7100\\\\,gpu08:7100 .*--scenario Offline --model resnet50" "$tmp/dry" \
    || fail "dry run: no loadgen-node step with the node list: $(cat "$tmp/dry")"
expect_fail 3 "at least 2 nodes" env -u SLURM_JOB_NODELIST "$sb" --dry-run --nodelist lg01
expect_fail 3 "not inside a Slurm job" env -u SLURM_JOB_NODELIST "$sb"
echo "test_scripts: Slurm batch script: ok"
echo "test_scripts: PASS"
