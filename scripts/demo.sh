#!/usr/bin/env bash
# The main command: installs what is needed, fetches the default model
# (all-MiniLM-L6-v2), builds bertrt and runs semantic search with it on the CPU,
# checked against sentence-transformers' numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fetch_default_model.sh
bash scripts/build.sh
echo "[demo] semantic search with the default model"
python3 scripts/demo.py
