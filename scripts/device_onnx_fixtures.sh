#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root: the ONNX
# fixtures that need torch and onnxruntime (scripts/make_onnx_models.py NAMES),
# packed into $OUT/onnx_fixtures.tgz with each run's report.json.
#   onnx_distilbert_seq_cls        torch.onnx.export with the machine's transformers
#   onnx_optimum_roberta_seq_cls   optimum's export: optimum-onnx pins
#                                  transformers < 4.58, so that release and the
#                                  wheels it needs come from .whl/ (carried; made
#                                  here by `pip download --no-deps optimum==2.1.0
#                                  optimum-onnx==0.1.0 transformers==4.57.3
#                                  huggingface_hub==0.36.0 tokenizers==0.22.1`),
#                                  installed into a folder of their own
set -uo pipefail
out=/tmp/onnx_fixtures
rm -rf "$out" && mkdir -p "$out/plain" "$out/optimum"
python3 scripts/make_onnx_models.py "$out/plain" onnx_distilbert_seq_cls 2>&1 | tail -5
python3 -m pip install -q --no-deps --target /tmp/optimum_site .whl/*.whl 2>&1 | tail -3
PYTHONPATH=/tmp/optimum_site python3 scripts/make_onnx_models.py "$out/optimum" \
  onnx_optimum_roberta_seq_cls 2>&1 | grep -v Warning | tail -8
tar -czf "$OUT/onnx_fixtures.tgz" -C "$out" .
