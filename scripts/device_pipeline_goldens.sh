#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root: the HF pipeline goldens
# (scripts/make_pipeline_goldens.py) with transformers 4.57.3, the last release with the
# question-answering pipeline, from wheels carried in .whl/ (`pip download --no-deps
# transformers==4.57.3 huggingface_hub==0.36.0 tokenizers==0.22.1`), in a folder of their own;
# the goldens come back as $OUT/pipeline_goldens.tgz.
set -euo pipefail
python3 -m pip install -q --no-deps --target /tmp/pipeline_site .whl/transformers-*.whl \
  .whl/huggingface_hub-*.whl .whl/tokenizers-*.whl 2>&1 | tail -3
PYTHONPATH=/tmp/pipeline_site python3 scripts/make_pipeline_goldens.py "$@" 2>&1 | grep -v Warning
tar -czf "$OUT/pipeline_goldens.tgz" tests/data/models/*/pipeline_golden.json
