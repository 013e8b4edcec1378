#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/
# from scripts/pack_for_device.sh (a CUDA build): the checkpoint formats
# (pytorch_model.bin, TensorFlow 1, ONNX) on the GPU against transformers'
# goldens, the formats at BERT-base size on CPU and GPU
# (scripts/check_formats_real_size.py), and the ONNX fixture with external data
# (scripts/make_onnx_models.py), packed into $OUT/onnx_external.tgz.
set -uo pipefail
source scripts/device_env.sh
rc=0
BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider tests/models/test_goldens.py \
  -k "cuda and (torch_ or tf_ or onnx_)" 2>&1 | tee "$OUT/formats_cuda_goldens.log" | tail -5
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
python3 scripts/check_formats_real_size.py --bertrt .carry/bin/bertrt --out "$OUT" 2>&1 \
  | grep -v Warning | tee "$OUT/formats_real_size.log" | tail -14
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
mkdir -p /tmp/onnx_fixtures
python3 scripts/make_onnx_models.py /tmp/onnx_fixtures onnx_external_sentence 2>&1 | tail -3
(cd /tmp/onnx_fixtures && tar -czf "$OUT/onnx_external.tgz" .)
exit "$rc"
