"""The main job on the default model: semantic search with bertrt.

Embeds a query and a set of documents with `bertrt run` on the CPU, ranks the
documents by cosine similarity, and checks every embedding and the ranking
against sentence-transformers' own output (tests/data/default_model/golden.json).
Exits non-zero if bertrt disagrees with the reference.
"""
import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

root = Path(__file__).resolve().parent.parent


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bertrt", default=str(root / "build/bertrt"))
    ap.add_argument("--model", default=str(root / "models/all-MiniLM-L6-v2"))
    args = ap.parse_args()

    search = json.loads((root / "examples/search.json").read_text())
    golden = json.loads((root / "tests/data/default_model/golden.json").read_text())
    texts = [search["query"]] + search["documents"]
    stdin = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    cmd = [args.bertrt, "run", args.model, "--device", "cpu"]
    print("$ " + " ".join(cmd) + "  < query + documents as JSON Lines", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin.encode(), capture_output=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode())
        sys.exit(f"bertrt run failed with exit code {proc.returncode}")
    emb = [json.loads(line)["embedding"] for line in proc.stdout.decode().splitlines()]

    q, docs = emb[0], emb[1:]
    scores = [sum(x * y for x, y in zip(q, d)) for d in docs]  # embeddings are unit length
    order = sorted(range(len(docs)), key=lambda i: -scores[i])
    ref_q, ref_docs = golden["embeddings"][0], golden["embeddings"][1:len(texts)]
    ref_scores = [sum(x * y for x, y in zip(ref_q, d)) for d in ref_docs]
    ref_order = sorted(range(len(docs)), key=lambda i: -ref_scores[i])

    print(f"\nquery: {search['query']}\n")
    print(f"{'rank':>4}  {'bertrt':>8}  {'sentence-transformers':>21}  document")
    for rank, i in enumerate(order, 1):
        print(f"{rank:>4}  {scores[i]:8.5f}  {ref_scores[i]:21.5f}  {search['documents'][i]}")

    worst_cos = min(cosine(a, b) for a, b in zip(emb, golden["embeddings"]))
    worst_abs = max(abs(x - y) for a, b in zip(emb, golden["embeddings"]) for x, y in zip(a, b))
    print(f"\n{len(texts)} texts embedded in {elapsed * 1000:.0f} ms (process start included); "
          f"vs sentence-transformers: min cosine {worst_cos:.7f}, max abs diff {worst_abs:.2e}, "
          f"ranking {'identical' if order == ref_order else 'DIFFERENT'}")
    if worst_cos < 0.99999 or worst_abs > 1e-4 or order != ref_order:
        sys.exit("bertrt's embeddings differ from sentence-transformers beyond tolerance")


if __name__ == "__main__":
    main()
