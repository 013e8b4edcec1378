#!/usr/bin/env python3
"""Tokenizer throughput, bertrt vs HF `tokenizers`, single thread, same texts.

Runs HF tokenizers on the corpus (every text and text_pair as a single text,
repeated to --mb MB): encode() one text at a time, and encode_batch() with
RAYON_NUM_THREADS=1 / TOKENIZERS_PARALLELISM=false; then the C++ bench
(build/tokenizer_bench, built by CMake with BERTRT_BUILD_BENCH=ON). Each --model
(repeatable: WordPiece, Unigram, BPE directories) gets its rows; prints a table
with the ratios and appends a section to bench/RESULTS.md.

Usage: python3 bench/tokenizer_bench.py [--model DIR ...] [--bench build/tokenizer_bench]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def load_texts(corpus, mb):
    base = []
    for line in pathlib.Path(corpus).read_text(encoding="utf-8").split("\n"):
        if line:
            item = json.loads(line)
            base += [item[k] for k in ("text", "text_pair") if isinstance(item.get(k), str)]
    texts, size = [], 0
    while size < mb * 1e6:
        texts += base
        size += sum(len(t.encode()) for t in base)
    return texts, size


def median_time(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", default=None,
                    help="model or tokenizer directory; repeat for several (default: the default model)")
    ap.add_argument("--corpus", default=str(ROOT / "tests/data/tokenizer/corpus.jsonl"))
    ap.add_argument("--bench", default=str(ROOT / "build/tokenizer_bench"))
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--results", default=str(ROOT / "bench/RESULTS.md"))
    args = ap.parse_args()

    models = args.model or [os.environ.get("BERTRT_DEFAULT_MODEL_DIR", str(ROOT / "models/all-MiniLM-L6-v2"))]
    load = os.getloadavg()[0]
    texts, size = load_texts(args.corpus, args.mb)
    lines = ["| tokenizer | implementation | MB/s | texts/s | bertrt speed-up |", "|---|---|---:|---:|---:|"]
    kinds = []
    for model in models:
        spec = json.loads((pathlib.Path(model) / "tokenizer.json").read_text(encoding="utf-8"))
        name = f"{pathlib.Path(model).name} ({spec['model'].get('type', '?')})"
        kinds.append(name)
        tok = Tokenizer.from_file(str(pathlib.Path(model) / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        rows = []
        t = median_time(lambda: [tok.encode(x) for x in texts], args.runs)
        rows.append(("HF tokenizers encode (one at a time)", t))
        t = median_time(lambda: tok.encode_batch(texts), args.runs)
        rows.append(("HF tokenizers encode_batch (1 thread)", t))
        out = subprocess.run([args.bench, model, args.corpus, str(args.mb), str(args.runs)],
                             capture_output=True, text=True, check=True).stdout
        mine = json.loads(out.strip().splitlines()[-1])
        assert mine["texts"] == len(texts), (mine["texts"], len(texts))
        rows.append(("bertrt Tokenizer::Encode (one at a time)", mine["seconds"]))
        ours = mine["seconds"]
        for impl, secs in rows:
            lines.append(f"| {name} | {impl} | {size / secs / 1e6:.2f} | {len(texts) / secs:,.0f} | {secs / ours:.2f}x |")
    table = "\n".join(lines)
    print(table)

    command = "python3 bench/tokenizer_bench.py " + " ".join(sys.argv[1:])
    section = f"""
## Tokenizer throughput, single thread ({datetime.date.today().isoformat()})

- machine: {cpu_model()}, {os.cpu_count()} cores (load average {load:.1f} at the start: a shared machine)
- command: `{command.strip()}`
- tokenizers {tokenizers.__version__}; tokenizers {", ".join(kinds)}; corpus {pathlib.Path(args.corpus).name} repeated to {size / 1e6:.2f} MB ({len(texts)} texts); median of {args.runs} runs

{table}
"""
    with open(args.results, "a", encoding="utf-8") as f:
        f.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
