#!/usr/bin/env bash
# The main command: installs what is needed, fetches the default model
# (all-MiniLM-L6-v2), builds bertrt, runs semantic search with it on the CPU
# (checked against sentence-transformers' numbers), then serves the model over
# HTTP until Ctrl-C. DEMO_SERVE=0 stops after the search; PORT picks the port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fetch_default_model.sh
# The binary alone: the tests and benchmarks are the test command's to build.
BUILD_TARGETS=bertrt bash scripts/build.sh
echo "[demo] semantic search with the default model"
python3 scripts/demo.py
if [ "${DEMO_SERVE:-1}" != 0 ]; then
  port=${PORT:-8000}
  echo "[demo] serving all-MiniLM-L6-v2 on http://127.0.0.1:$port (Ctrl-C stops it); from another terminal:"
  echo "  curl -s localhost:$port/embed -H 'Content-Type: application/json' -d '{\"inputs\": \"bertrt is fast\"}'"
  echo "  curl -s localhost:$port/v1/embeddings -H 'Content-Type: application/json' -d '{\"input\": [\"bertrt is fast\"], \"model\": \"all-MiniLM-L6-v2\"}'"
  exec build/bertrt serve models/all-MiniLM-L6-v2 --http-port "$port"
fi
