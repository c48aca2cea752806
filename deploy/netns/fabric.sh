#!/usr/bin/env bash
# Emulates a Network-division fabric on one Linux host with network namespaces, runs sut-nodes on
# the SUT hosts and one command on the LoadGen host, then tears everything down (also on failure
# or Ctrl-C). Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN), iproute2 and tc.
#
#   deploy/netns/fabric.sh [OPTIONS] -- COMMAND [ARGS...]
#   deploy/netns/fabric.sh --gc          remove namespaces left by fabric.sh runs that died
#
# Layout: namespaces TAG-lg (LoadGen host), TAG-sw (the switch: a Linux bridge), TAG-s1..sN (SUT
# hosts); one veth pair per host, eth0 on the host side and p-<host> on the bridge; addresses
# SUBNET.1 (LoadGen) and SUBNET.11, .12, ... (SUT hosts) in a /24. Nothing is created in the
# root namespace. Each link is rate-limited in both directions with tc tbf; with --delay-us a
# delay-relay in each SUT namespace holds every byte that long in each direction (no netem here).
#
# COMMAND runs inside TAG-lg. "{nodes}" in its arguments becomes the node list
# (SUBNET.11:PORT,SUBNET.12:PORT,...), also exported as FABRIC_NODES with FABRIC_TAG,
# FABRIC_LG_NS, FABRIC_SW_NS, FABRIC_SUT_NS (space-separated), FABRIC_DIR (logs) and
# FABRIC_CONFIG (the deployment config of this fabric, for deploy/metadata/netmeta.py).
# The exit status is COMMAND's (124 when --timeout stopped it); 3 when the fabric failed.
#
# Options:
#   --suts N            SUT hosts (default 2)
#   --rate RATE         per link and direction: tc rate (1gbit, 10gbit, 2500mbit), a preset
#                       (1GbE 10GbE 25GbE 40GbE 100GbE) or none (default 10gbit)
#   --delay-us US       one-way delay added in front of each sut-node (default 0)
#   --mtu N             MTU of every link (default 1500)
#   --subnet A.B.C      the /24 to use; must be private (default 10.77.0)
#   --port P            sut-node port (default 7000)
#   --sut-node PATH     the sut-node binary (default build/sut-node/sut-node)
#   --sut-args "ARGS"   extra sut-node arguments, split on spaces (e.g. "--backend digest")
#   --relay PATH        the delay-relay binary (default build/deploy/netns/delay-relay, or
#                       /usr/libexec/mlperf-network/delay-relay from the package)
#   --connections N     connections per node the COMMAND opens (recorded in FABRIC_CONFIG)
#   --tag TAG           namespace name prefix (default nf<PID>; unique per run)
#   --timeout S         stop COMMAND after S seconds (default 600)
#   --log-dir DIR       keep sut-node logs and the config here (default: a temp dir, removed
#                       after a successful run)
#   --quiet             print only errors
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prog=fabric.sh

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "$prog: $*" >&2; exit 3; }
say() { [[ $quiet -eq 1 ]] || echo "$prog: $*" >&2; }

suts=2 rate=10gbit delay_us=0 mtu=1500 subnet=10.77.0 port=7000 connections=1
sut_node="" sut_args="" relay="" tag="nf$$" timeout_s=600 log_dir="" quiet=0 gc_only=0
cmd=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --suts) suts=$2; shift ;;
        --rate) rate=$2; shift ;;
        --delay-us) delay_us=$2; shift ;;
        --mtu) mtu=$2; shift ;;
        --subnet) subnet=$2; shift ;;
        --port) port=$2; shift ;;
        --sut-node) sut_node=$2; shift ;;
        --sut-args) sut_args=$2; shift ;;
        --relay) relay=$2; shift ;;
        --connections) connections=$2; shift ;;
        --tag) tag=$2; shift ;;
        --timeout) timeout_s=$2; shift ;;
        --log-dir) log_dir=$2; shift ;;
        --quiet) quiet=1 ;;
        --gc) gc_only=1 ;;
        -h|--help) usage 0 ;;
        --) shift; cmd=("$@"); break ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# Namespaces of runs whose fabric.sh process is gone (killed before its trap could run).
gc_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        [[ $ns =~ ^nf([0-9]+)-(lg|sw|s[0-9]+)$ ]] || continue
        pid=${BASH_REMATCH[1]}
        # Our own PID too: this runs before we create anything, so such a namespace is left
        # from an earlier process that had the same PID.
        [[ $pid != "$$" ]] && kill -0 "$pid" 2>/dev/null && continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null && say "removed stale namespace $ns"
    done
    return 0
}

bad_arg() { echo "$prog: $*" >&2; exit 2; }
[[ $gc_only -eq 1 || ${#cmd[@]} -gt 0 ]] || bad_arg "no COMMAND after -- (see --help)"
if ! is_uint "$suts" || ((suts < 1 || suts > 100)); then bad_arg "--suts must be 1 to 100"; fi
is_uint "$delay_us" || bad_arg "--delay-us must be a whole number"
if ! is_uint "$mtu" || ((mtu < 576 || mtu > 65535)); then bad_arg "--mtu must be 576 to 65535"; fi
if ! is_uint "$port" || ((port < 1 || port > 65534)); then bad_arg "--port must be 1 to 65534"; fi
if ! is_uint "$timeout_s" || ((timeout_s < 1)); then bad_arg "--timeout must be a positive number of seconds"; fi
if ! is_uint "$connections" || ((connections < 1)); then bad_arg "--connections must be at least 1"; fi
[[ $tag =~ ^[a-zA-Z0-9]{1,12}$ ]] || { echo "$prog: --tag must be 1 to 12 letters or digits" >&2; exit 2; }

# Only private addresses (RFC 1918), and only inside the namespaces created here.
if [[ ! $subnet =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
    echo "$prog: --subnet must look like 10.77.0 (the first three octets of a /24)" >&2; exit 2
fi
o1=${BASH_REMATCH[1]} o2=${BASH_REMATCH[2]} o3=${BASH_REMATCH[3]}
((o1 <= 255 && o2 <= 255 && o3 <= 255)) || { echo "$prog: --subnet $subnet: octet over 255" >&2; exit 2; }
if ! { ((o1 == 10)) || ((o1 == 172 && o2 >= 16 && o2 <= 31)) || ((o1 == 192 && o2 == 168)); }; then
    echo "$prog: --subnet $subnet is not a private (RFC 1918) range" >&2; exit 2
fi

# Rate: presets, tc syntax, or none. tc_rate is what tc gets; rate_bps is for the burst size.
case "$rate" in
    1GbE) tc_rate=1gbit ;; 10GbE) tc_rate=10gbit ;; 25GbE) tc_rate=25gbit ;;
    40GbE) tc_rate=40gbit ;; 100GbE) tc_rate=100gbit ;; 200GbE) tc_rate=200gbit ;;
    none) tc_rate="" ;;
    *) [[ $rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || {
           echo "$prog: --rate $rate: expected e.g. 1gbit, 2500mbit, 10GbE or none" >&2; exit 2; }
       tc_rate=$rate ;;
esac
rate_bps=0
if [[ -n $tc_rate ]]; then
    n=${tc_rate%%[a-z]*}
    case "$tc_rate" in
        *kbit) rate_bps=$((n * 1000)) ;; *mbit) rate_bps=$((n * 1000000)) ;; *gbit) rate_bps=$((n * 1000000000)) ;;
    esac
fi

# Arguments are checked first, so a mistake is reported the same way with or without root.
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, veth, tc); run with sudo"
command -v ip >/dev/null || die "'ip' (iproute2) is not installed; run deploy/install-deps.sh"
command -v tc >/dev/null || die "'tc' (iproute2) is not installed; run deploy/install-deps.sh"
if [[ $gc_only -eq 1 ]]; then gc_stale; exit 0; fi

[[ -n $sut_node ]] || sut_node=$root/build/sut-node/sut-node
[[ -x $sut_node ]] || sut_node=$(command -v sut-node || true)
[[ -n $sut_node && -x $sut_node ]] || die "no sut-node binary (build it, or give --sut-node PATH)"
if ((delay_us > 0)); then
    [[ -n $relay ]] || relay=$root/build/deploy/netns/delay-relay
    # Installed from the package: the script in /usr/share/mlperf-network/netns, the relay in
    # /usr/libexec/mlperf-network.
    [[ -x $relay ]] || relay=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/libexec/mlperf-network/delay-relay
    [[ -x $relay ]] || die "--delay-us needs the delay-relay binary (build it, or give --relay PATH)"
fi
command -v timeout >/dev/null || die "'timeout' (coreutils) is missing"

own_log_dir=0
if [[ -z $log_dir ]]; then
    log_dir=$(mktemp -d "${TMPDIR:-/tmp}/fabric-$tag.XXXXXX")
    own_log_dir=1
fi
mkdir -p "$log_dir"

lg_ns=$tag-lg sw_ns=$tag-sw
sut_ns=() sut_addr=() sut_pids=() relay_pids=() created_ns=() cmd_pid=""
for ((i = 1; i <= suts; i++)); do sut_ns+=("$tag-s$i"); sut_addr+=("$subnet.$((10 + i))"); done

# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
    local status=$? ns p deadline
    trap - EXIT INT TERM
    # The command first (timeout passes SIGTERM on to it), then the daemons.
    if [[ -n $cmd_pid ]]; then
        kill -TERM "$cmd_pid" 2>/dev/null || true
        deadline=$((SECONDS + 5))
        while kill -0 "$cmd_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
        kill -KILL "$cmd_pid" 2>/dev/null || true
    fi
    # sut-nodes first, gracefully (SIGTERM drains and says Goodbye), then anything left.
    for p in "${sut_pids[@]}" "${relay_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    deadline=$((SECONDS + 5))
    for p in "${sut_pids[@]}" "${relay_pids[@]}"; do
        while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    for ns in "${created_ns[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || echo "$prog: could not delete namespace $ns" >&2
    done
    if ((status != 0)); then
        for f in "$log_dir"/*.log; do
            [[ -s $f ]] || continue
            echo "---- $f (last 20 lines)" >&2
            tail -n 20 "$f" >&2
        done
        echo "$prog: logs kept in $log_dir" >&2
    elif ((own_log_dir)); then
        rm -rf "$log_dir"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

gc_stale

mkns() {
    ip netns add "$1" || die "cannot create network namespace $1"
    created_ns+=("$1")
    ip -n "$1" link set lo up
}

# Host side eth0 in namespace $1, bridge side p-$2 in the switch namespace; address $3/24.
attach() {
    local ns=$1 port=p-$2 addr=$3
    ip link add eth0 netns "$ns" mtu "$mtu" type veth peer name "$port" netns "$sw_ns" mtu "$mtu" \
        || die "cannot create the veth pair for $ns"
    ip -n "$sw_ns" link set "$port" master br0
    ip -n "$sw_ns" link set "$port" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ -n $tc_rate ]]; then
        # A token bucket of at least 128 KiB (two 64 KiB GSO segments, so none is split) and at
        # least 250 us of line rate; packets wait up to 10 ms before tbf drops them.
        local burst=$((rate_bps / 8 / 4000))
        ((burst >= 131072)) || burst=131072
        tc -n "$ns" qdisc add dev eth0 root tbf rate "$tc_rate" burst "$burst" latency 10ms \
            || die "tc tbf on $ns/eth0 failed"
        tc -n "$sw_ns" qdisc add dev "$port" root tbf rate "$tc_rate" burst "$burst" latency 10ms \
            || die "tc tbf on $sw_ns/$port failed"
    fi
}

delay_note=""
((delay_us == 0)) || delay_note=", $delay_us us one-way delay"
say "creating $tag: LoadGen host + $suts SUT hosts on $subnet.0/24, ${tc_rate:-unlimited} per link$delay_note"
mkns "$sw_ns"
ip -n "$sw_ns" link add br0 type bridge
ip -n "$sw_ns" link set br0 up
mkns "$lg_ns"
attach "$lg_ns" lg "$subnet.1"
for ((i = 0; i < suts; i++)); do
    mkns "${sut_ns[$i]}"
    attach "${sut_ns[$i]}" "s$((i + 1))" "${sut_addr[$i]}"
done

# Waits for a port file written by a process started in the background.
wait_port() { # pid file what
    local deadline=$((SECONDS + 15))
    while [[ ! -s $2 ]]; do
        kill -0 "$1" 2>/dev/null || die "$3 exited during start-up (see its log)"
        ((SECONDS < deadline)) || die "$3 did not start listening within 15 s"
        sleep 0.02
    done
}

read -r -a extra <<<"$sut_args"
nodes=""
for ((i = 0; i < suts; i++)); do
    ns=${sut_ns[$i]} addr=${sut_addr[$i]} name=sut-$((i + 1))
    if ((delay_us > 0)); then
        listen=127.0.0.1:$((port + 1))
    else
        listen=$addr:$port
    fi
    ip netns exec "$ns" "$sut_node" --listen "$listen" --name "$name" --port-file "$log_dir/$name.port" \
        "${extra[@]}" >"$log_dir/$name.log" 2>&1 &
    sut_pids+=($!)
    wait_port "$!" "$log_dir/$name.port" "sut-node $name"
    if ((delay_us > 0)); then
        ip netns exec "$ns" "$relay" --listen "$addr:$port" --connect "127.0.0.1:$((port + 1))" \
            --delay-us "$delay_us" --port-file "$log_dir/$name.relay.port" >"$log_dir/$name.relay.log" 2>&1 &
        relay_pids+=($!)
        wait_port "$!" "$log_dir/$name.relay.port" "delay-relay for $name"
    fi
    nodes+=${nodes:+,}$addr:$port
done

config=$log_dir/deployment.ini
{
    echo "# The emulated fabric of fabric.sh run $tag, in the deployment-config format of"
    echo "# deploy/metadata/netmeta.py. Values here describe the emulation, not real hardware."
    echo "[deployment]"
    echo "name = $tag"
    echo "emulated = yes"
    echo "network_type = Ethernet"
    echo "network_media = virtual (veth pairs between Linux network namespaces; no physical medium)"
    echo "rate = ${tc_rate:-none}"
    echo "topology = switch"
    echo "switch = Linux bridge br0 in namespace $sw_ns, emulated"
    echo "protocol = TCP/IPv4"
    echo "connections_per_node = $connections"
    echo "mtu = $mtu"
    echo "delay_us = $delay_us"
    echo
    echo "[loadgen]"
    echo "netns = $lg_ns"
    echo "interface = eth0"
    echo "address = $subnet.1"
    for ((i = 0; i < suts; i++)); do
        echo
        echo "[sut.sut-$((i + 1))]"
        echo "netns = ${sut_ns[$i]}"
        echo "interface = eth0"
        echo "address = ${sut_addr[$i]}:$port"
        echo "sut_node = $sut_node"
    done
} >"$config"

args=()
for a in "${cmd[@]}"; do args+=("${a//\{nodes\}/$nodes}"); done
say "running in $lg_ns: ${args[*]}"
# In the background with a wait, so that SIGTERM/SIGINT reach the trap at once (bash runs traps
# only after a foreground command ends); the command's stdin is therefore /dev/null.
timeout -k 5 "$timeout_s" ip netns exec "$lg_ns" env FABRIC_NODES="$nodes" FABRIC_TAG="$tag" \
    FABRIC_LG_NS="$lg_ns" FABRIC_SW_NS="$sw_ns" FABRIC_SUT_NS="${sut_ns[*]}" FABRIC_DIR="$log_dir" \
    FABRIC_CONFIG="$config" "${args[@]}" </dev/null &
cmd_pid=$!
status=0
wait "$cmd_pid" || status=$?
cmd_pid=""
((status != 124)) || echo "$prog: the command ran past --timeout $timeout_s s and was stopped" >&2
# Nodes that died during the run are a failure of the run even when the command did not notice.
for ((i = 0; i < suts; i++)); do
    if ! kill -0 "${sut_pids[$i]}" 2>/dev/null; then
        echo "$prog: sut-node sut-$((i + 1)) exited during the run" >&2
        ((status != 0)) || status=3
    fi
done
exit "$status"
