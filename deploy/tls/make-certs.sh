#!/usr/bin/env bash
# Makes a private CA and the certificates for TLS between the QDL and sut-nodes (ECDSA P-256,
# TLS 1.3). Keys stay in the output folder (mode 600); hand each host only its own pair + ca.pem.
#
#   deploy/tls/make-certs.sh DIR                         CA, one node cert, one client cert
#   deploy/tls/make-certs.sh DIR --node NAME --san SANS  a node certificate (repeatable)
#   deploy/tls/make-certs.sh DIR --client NAME           a client certificate (repeatable)
#   deploy/tls/make-certs.sh DIR --ca-cn NAME            the CA's name (default mlperf-network-ca)
#
# SANS is OpenSSL syntax, e.g. "DNS:gpu-node-1,IP:10.0.0.2". The default node is "node" with
# DNS:localhost, IP:127.0.0.1, IP:::1 and the host name; the default client is "qdl-client".
# An existing ca.pem/ca.key in DIR is reused, so more certificates can be added later.
# Then: sut-node --tls-cert DIR/node.pem --tls-key DIR/node.key [--tls-ca DIR/ca.pem]
#       loadgen-node --tls-ca DIR/ca.pem [--tls-cert DIR/qdl-client.pem --tls-key DIR/qdl-client.key]
set -euo pipefail

usage() { sed -n '2,14p' "$0"; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
[[ "$1" == -h || "$1" == --help ]] && usage 0
dir=$1; shift
ca_cn=mlperf-network-ca
nodes=(); sans=(); clients=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --node) nodes+=("$2"); sans+=(""); shift ;;
        --san) [[ ${#nodes[@]} -gt 0 ]] || { echo "make-certs: --san must follow --node" >&2; exit 2; }
               sans[${#sans[@]}-1]=$2; shift ;;
        --client) clients+=("$2"); shift ;;
        --ca-cn) ca_cn=$2; shift ;;
        -h|--help) usage 0 ;;
        *) echo "make-certs: unknown option '$1'" >&2; usage 2 ;;
    esac
    shift
done
if [[ ${#nodes[@]} -eq 0 && ${#clients[@]} -eq 0 ]]; then
    nodes=(node); sans=("DNS:localhost,IP:127.0.0.1,IP:::1,DNS:$(hostname)"); clients=(qdl-client)
fi
command -v openssl >/dev/null || { echo "make-certs: openssl is not installed" >&2; exit 1; }
mkdir -p "$dir"
umask 077

if [[ ! -f "$dir/ca.pem" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
        -subj "/CN=$ca_cn" -keyout "$dir/ca.key" -out "$dir/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    echo "make-certs: CA $dir/ca.pem"
fi

issue() { # name, extensions file
    local name=$1 ext=$2
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 825 -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
    rm -f "$dir/$name.csr" "$ext"
    echo "make-certs: $dir/$name.pem"
}

for i in "${!nodes[@]}"; do
    ext=$(mktemp)
    san=${sans[$i]:-DNS:${nodes[$i]}}
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$san" >"$ext"
    issue "${nodes[$i]}" "$ext"
done
for c in "${clients[@]}"; do
    ext=$(mktemp)
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\nsubjectAltName=DNS:%s\n' "$c" >"$ext"
    issue "$c" "$ext"
done
