"""Makes tests/data/default_model/golden.json: the default model's embeddings of
examples/search.json (and a few extra texts) from sentence-transformers itself,
so the demo and the tests can check bertrt's numbers against the reference.

Run once where sentence-transformers is installed:
    python scripts/make_default_golden.py models/all-MiniLM-L6-v2
"""
import json
import sys
from pathlib import Path

import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer

root = Path(__file__).resolve().parent.parent
model_dir = sys.argv[1] if len(sys.argv) > 1 else str(root / "models/all-MiniLM-L6-v2")
search = json.loads((root / "examples/search.json").read_text())
extra = [
    "A",
    "naïve café owners in Zürich",
    "東京タワーは高さ333メートルです。",
    "Привет, как дела?",
    "[CLS] literally inside the text [SEP]",
    " ".join(["long"] * 300),  # longer than max_seq_length 256: truncated
]
texts = [search["query"]] + search["documents"] + extra

torch.manual_seed(0)
model = SentenceTransformer(model_dir, device="cpu")
model.eval()
emb = model.encode(texts, convert_to_numpy=True, normalize_embeddings=False, batch_size=8)
tok = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
out = {
    "made_by": "scripts/make_default_golden.py",
    "versions": {
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    },
    "max_seq_length": model.max_seq_length,
    "texts": texts,
    "input_ids": tok["input_ids"],
    "embeddings": [[float(f"{x:.8g}") for x in row] for row in emb.tolist()],
}
dest = root / "tests/data/default_model/golden.json"
dest.write_text(json.dumps(out, ensure_ascii=False) + "\n")
print(f"wrote {dest}: {len(texts)} texts, dim {emb.shape[1]}")
