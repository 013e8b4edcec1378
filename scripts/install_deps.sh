#!/usr/bin/env bash
# Installs what bertrt needs to build and test, idempotently: Debian packages
# (only when one is missing, so a ready machine does no network work) and the
# Python tools the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(build-essential cmake ninja-build pkg-config git unzip curl
      nlohmann-json3-dev libutf8proc-dev libonig-dev libcli11-dev libspdlog-dev libfmt-dev
      libdnnl-dev libcpp-httplib-dev libboost-dev zlib1g-dev libssl-dev openssl libgrpc++-dev libprotobuf-dev protobuf-compiler
      protobuf-compiler-grpc libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev libomp-14-dev
      python3 python3-pip
      # Debian's oneDNN CMake config looks for OpenCL, which libdnnl-dev does not pull in.
      ocl-icd-opencl-dev)

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[deps] Debian packages: all present"
fi

PY=${PYTHON:-python3}
PIP_PKGS=(numpy tokenizers pytest requests "tritonclient[http]" "tritonclient[grpc]" openai prometheus_client
          openapi-schema-validator huggingface_hub)
if ! $PY -c "import numpy, tokenizers, pytest, requests, tritonclient.http, tritonclient.grpc, grpc, openai, prometheus_client, openapi_schema_validator, huggingface_hub" 2>/dev/null; then
  echo "[deps] installing Python packages: ${PIP_PKGS[*]}"
  $PY -m pip install -q --disable-pip-version-check "${PIP_PKGS[@]}" 2>&1 | grep -v "WARNING: Running pip as the 'root' user" || true
else
  echo "[deps] Python packages: all present"
fi

# NVIDIA CUTLASS's headers, for the CUDA engine's fused erf GELU GEMM.
bash scripts/fetch_cutlass.sh
