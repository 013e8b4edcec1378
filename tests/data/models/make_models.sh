#!/usr/bin/env bash
# Regenerates the tiny random-weight test models (needs python3 + numpy).
# Goldens are separate: /opt/gold/bin/python scripts/make_goldens.py
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gen="python3 $here/../../../scripts/make_random_model.py"
# hidden 32, 2 layers, 4 heads, intermediate 37 (odd on purpose), vocab 512, 64 positions
tiny="--preset tiny"

make() {  # make NAME ARGS...
  local name="$1"; shift
  rm -rf "${here:?}/$name"
  $gen $tiny "$@" -o "$here/$name"
}

make base            --head base      --act gelu     --seed 1
make base_prefixed   --head base      --act gelu_new --seed 2 --prefix bert
make seq_cls         --head seq-cls   --act gelu     --seed 3 --num-labels 3
make token_cls       --head token-cls --act relu     --seed 4 --num-labels 9 --tokenizer-json
make qa              --head qa        --act gelu_new --seed 5
make sentence_mean   --head sentence  --act gelu     --seed 6 --pooling mean --normalize --max-seq-length 48
make sentence_cls    --head sentence  --act relu     --seed 7 --pooling cls --tokenizer-json
make sentence_max    --head sentence  --act gelu_pytorch_tanh --seed 8 --pooling max --normalize
# Same seed as seq_cls: the tensors are seq_cls's rounded to fp16 / bf16.
make seq_cls_f16     --head seq-cls   --act gelu     --seed 3 --num-labels 3 --dtype f16
make seq_cls_bf16    --head seq-cls   --act gelu     --seed 3 --num-labels 3 --dtype bf16
make sharded         --head seq-cls   --act gelu_new --seed 9 --num-labels 2 --shards 2
make training_junk   --head seq-cls   --act gelu     --seed 10 --num-labels 2 --add-training-junk
