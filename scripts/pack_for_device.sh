#!/usr/bin/env bash
# Copies the built binaries (bertrt, bertrt_tests, bertrt_parity_runner) and the shared libraries
# they link that the GPU machine lacks (Debian's oneDNN, utf8proc, spdlog,
# fmt, ...) into .carry/, which the device tool carries (`carry: [".carry"]`).
# glibc, the C++ runtime and the CUDA libraries stay behind: the GPU machine's
# are newer and compatible (and cuBLAS alone would exceed the carry limit).
# BUILD_DIR picks the build (default build; build-cuda for a CUDA build).
# The result is .carry/payload.tar.xz; scripts/device_unpack.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rm -rf .carry && mkdir -p .carry/bin .carry/lib
# SLIM=1: bertrt alone (or BINS), stripped, and without the libraries Ubuntu 24.04's
# base has (OpenSSL, zlib, libgomp): 2 MB less, for when the payload must
# travel beside a model (FP8_DATA=1).
# BINS: which binaries (default all three; with SLIM=1, bertrt), e.g.
# SLIM=1 BINS="bertrt bertrt_parity_runner" for a parity call that carries the
# QA pipeline's wheels (.whl/) too.
bins=${BINS:-"bertrt bertrt_tests bertrt_parity_runner"}
[ "${SLIM:-0}" = 1 ] && bins=${BINS:-bertrt}
for bin in $bins; do
  [ -x "$build/$bin" ] || continue
  cp "$build/$bin" .carry/bin/
  [ "${SLIM:-0}" = 1 ] && strip ".carry/bin/$bin"
  ldd "$build/$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
      libcuda.so*|libcudart.so*|libcublas*|libnvidia*) ;;
      libssl.so*|libcrypto.so*|libz.so*|libgomp.so*) [ "${SLIM:-0}" = 1 ] || cp -L "$lib" .carry/lib/ ;;
      *) cp -L "$lib" .carry/lib/ ;;
    esac
  done
done
# ALSO_BUILD_DIR: a second build (another CMAKE_CUDA_ARCHITECTURES, say) whose
# bertrt and bertrt_parity_runner go to .carry/bin/<its name>/, beside the first.
if [ -n "${ALSO_BUILD_DIR:-}" ]; then
  mkdir -p ".carry/bin/$(basename "$ALSO_BUILD_DIR")"
  cp "$ALSO_BUILD_DIR/bertrt" "$ALSO_BUILD_DIR/bertrt_parity_runner" \
    ".carry/bin/$(basename "$ALSO_BUILD_DIR")/"
fi
# PROBES=1: also the GPU probes the next measurement needs, built here
# (bench/probes/*.cu name their build lines; CUTLASS from fetch_cutlass.sh).
if [ "${PROBES:-0}" = 1 ]; then
  for probe in power_cap_gemm_probe; do
    nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG -I include -I src \
      -I third_party/cutlass-4.2.0.0/include -I third_party/cutlass-4.2.0.0/tools/util/include \
      "bench/probes/$probe.cu" -lcublasLt -ldl -o ".carry/bin/$probe"
  done
fi
# The device tool carries at most 64 MiB with the working tree; oneDNN and
# gRPC alone are more, so the payload travels compressed and
# scripts/device_unpack.sh opens it there.
tar -cf - -C .carry bin lib | xz -9 -T"$(nproc)" > .carry/payload.tar.xz
rm -rf .carry/bin .carry/lib
# The default model's tokenizer into .carry/parity/tokenizer (the parity
# suite's --tokenizer: a real vocabulary for its random models).
copy_tokenizer() {
  mkdir -p .carry/parity/tokenizer
  for f in tokenizer.json vocab.txt tokenizer_config.json special_tokens_map.json; do
    cp "$1/$f" .carry/parity/tokenizer/
  done
}
# PARITY_DATA=1: what scripts/device_parity.sh needs besides the binaries: the
# default model's tokenizer (a real 30,522-token vocabulary for the random
# models) and the model itself, a trained one, with its weights in fp16 and
# the embeddings of tokens the suite's texts never use zeroed, to fit the
# carry limit (the suite's reference loads the same weights).
if [ "${PARITY_DATA:-0}" = 1 ]; then
  src=models/all-MiniLM-L6-v2
  [ -f "$src/model.safetensors" ] || bash scripts/fetch_default_model.sh
  mkdir -p .carry/parity/all-MiniLM-L6-v2
  copy_tokenizer "$src"
  (cd "$src" && find . -type f ! -name model.safetensors -exec cp --parents {} \
    "$OLDPWD/.carry/parity/all-MiniLM-L6-v2/" \;)
  python3 - "$src/tokenizer.json" tests/data/tokenizer/corpus.jsonl > .carry/token_ids.txt <<'PY'
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
ids = set(range(1000))  # specials and unused slots
for line in open(sys.argv[2], encoding="utf-8"):
    rec = json.loads(line)
    for key in ("text", "text_pair"):
        if key in rec:
            ids.update(tok.encode(rec[key]).ids)
print("\n".join(map(str, sorted(ids))))
PY
  python3 scripts/shrink_safetensors.py "$src/model.safetensors" \
    .carry/parity/all-MiniLM-L6-v2/model.safetensors --keep-token-ids .carry/token_ids.txt
  rm .carry/token_ids.txt
  tar -cf - -C .carry parity | xz -6 -T"$(nproc)" > .carry/parity.tar.xz
  rm -rf .carry/parity
fi
# FP8_DATA=1: tests/cli/test_fp8_gpu.py's trained model instead (its parity
# data cannot travel beside the payload): all-MiniLM-L6-v2 in bf16, the word
# embeddings of the first 96 corpus texts' tokens alone, positions past its
# 256 zeroed, no vocab.txt (tokenizer.json serves), into .carry/parity.tar.xz,
# which scripts/device_fp8.sh's gate step finds; with the default model's
# tokenizer beside it (parity/tokenizer, as PARITY_DATA's), so that
# scripts/device_parity.sh runs on the same carry (its real-model cases on
# this model, the fp8 budget case among them).
if [ "${FP8_DATA:-0}" = 1 ]; then
  src=models/all-MiniLM-L6-v2
  [ -f "$src/model.safetensors" ] || bash scripts/fetch_default_model.sh
  dst=.carry/parity/all-MiniLM-L6-v2
  mkdir -p "$dst"
  copy_tokenizer "$src"
  (cd "$src" && find . -type f ! -name model.safetensors ! -name vocab.txt -exec cp --parents {} \
    "$OLDPWD/$dst/" \;)
  python3 - "$src/tokenizer.json" tests/data/tokenizer/corpus.jsonl > .carry/token_ids.txt <<'PY'
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
ids = set(range(104))  # [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]
for line in list(open(sys.argv[2], encoding="utf-8"))[:96]:
    ids.update(tok.encode(json.loads(line)["text"]).ids)
print("\n".join(map(str, sorted(ids))))
PY
  python3 scripts/shrink_safetensors.py "$src/model.safetensors" "$dst/model.safetensors" \
    --keep-token-ids .carry/token_ids.txt --positions 256 --bf16
  rm .carry/token_ids.txt
  tar -cf - -C .carry parity | xz -9e -T"$(nproc)" > .carry/parity.tar.xz
  rm -rf .carry/parity
fi
du -sh .carry
