#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demos need. Idempotent: packages
# already installed are skipped, and nothing is printed when all are present. Run as root (or
# with sudo) on Debian 12.
#
#   deploy/install-deps.sh            build + test + demo dependencies
#   deploy/install-deps.sh --bench    also the benchmark references (PyTorch, iperf3)
#   deploy/install-deps.sh --help     this text (installs nothing)
set -euo pipefail

packages=(
    # toolchain and build
    build-essential cmake pkg-config clang clang-format
    # libraries
    libuv1-dev libprotobuf-c-dev protobuf-c-compiler liblz4-dev libssl-dev libxxhash-dev zlib1g-dev
    # the /metrics endpoint (libmicrohttpd), the Prometheus server that scrapes it in tests and the
    # Pushgateway loadgen-node --metrics-push pushes to
    libmicrohttpd-dev prometheus prometheus-pushgateway
    # the ucx:// transport (RDMA, shared memory, TCP) and ucx_info to see what a host offers
    libucx-dev ucx-utils
    # unit tests
    check libsubunit-dev
    # the onnx backend: oneDNN, the ONNX schema, the ONNX conformance test vectors
    libdnnl-dev libonnx-dev libonnx-testdata
    # the real-model demo: the data set and the scripts that read it
    dataset-fashion-mnist python3 python3-numpy
    # the openai and kserve backends (HTTP pool, engine JSON); the real engines of their tests
    # (FastAPI + uvicorn over PyTorch, ONNX weights) and the LLM data tools (pandas pickles)
    libcurl4-openssl-dev libcjson-dev libyajl-dev python3-fastapi python3-uvicorn python3-torch python3-onnx
    python3-pandas python3-aiohttp
    # llama.cpp's llama-server for the real-engine test: deploy/llama-server.sh fetches Debian
    # unstable's .debs with apt-get download (this keyring checks them) and unpacks them privately
    debian-archive-keyring
    # 3D-UNet: the synthetic KiTS19 cases (nifti) and the official accuracy_kits.py
    python3-nibabel python3-scipy
    # certificates for TLS tests, network namespaces for the fabric simulation, diagrams
    openssl iproute2 ethtool graphviz procps time
    # deployment tooling: the Kubernetes manifest check, systemd-analyze for the unit, lspci for
    # NIC models in the submission metadata
    python3-yaml systemd pciutils
)
case "${1:-}" in
    "") ;;
    --bench) packages+=(python3-torch python3-torchvision python3-onnx iperf3 hyperfine) ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
        missing+=("$p")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
        exec sudo -- "$0" "$@"
    fi
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
