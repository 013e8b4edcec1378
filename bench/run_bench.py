#!/usr/bin/env python3
"""`bertrt run` on a large file of texts against sentence-transformers' encode on the same
texts, same machine, same run (issue 28).

  python3 bench/run_bench.py --bertrt build/bertrt --model models/all-MiniLM-L6-v2 \\
      --device cpu --threads 2 --texts 15000
  python3 bench/run_bench.py --bertrt .carry/bin/bertrt --model /tmp/st-base \\
      --device cuda --precision fp16 --texts 60000 --results $OUT/RESULTS.md

The texts are the repository's multilingual corpus (tests/data/tokenizer/corpus.jsonl)
repeated, each numbered. bertrt reads them from a file and writes the embeddings to an
.npy file (--output-npy) and, timed apart, as JSON Lines to /dev/null; wall-clock time of
the whole command, model load and (on the GPU) the self-check included, and the same
without them (the run of one text, subtracted). sentence-transformers encodes the same
texts with batch_size 128 (fp16 on the GPU: model.half()), after a warm-up. Every
embedding is compared with sentence-transformers' by cosine.

Prints a table and appends it to --results with the machine, command, date and versions.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

root = Path(__file__).resolve().parent.parent


def machine(device):
    if device == "cuda":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()
            return f"{gpu}, {os.cpu_count()} CPUs"
        except OSError:
            pass
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs visible"
    return platform.processor()


def corpus(n):
    lines = [json.loads(x)["text"] for x in
             (root / "tests/data/tokenizer/corpus.jsonl").read_text(encoding="utf-8").split("\n") if x]
    return [f"{i}: {lines[i % len(lines)]}" for i in range(n)]


def timed(cmd, **kw):
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, **kw)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stderr.decode()[-3000:]}")
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--model", required=True, help="a sentence-transformers directory")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="", help="bertrt --precision (cuda: fp16)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads, bertrt and torch (0: all)")
    ap.add_argument("--texts", type=int, default=15000)
    ap.add_argument("--st-batch-size", type=int, default=128)
    ap.add_argument("--extra", nargs="*", default=[], help="more bertrt run arguments")
    ap.add_argument("--results", default=str(root / "bench/RESULTS.md"))
    args = ap.parse_args()

    import sentence_transformers
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    texts = corpus(args.texts)
    work = Path(tempfile.mkdtemp(prefix="run_bench_"))
    inputs = work / "texts.jsonl"
    inputs.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                      encoding="utf-8")
    one = work / "one.jsonl"
    one.write_text(json.dumps({"text": texts[0]}) + "\n")

    base = [args.bertrt, "run", args.model, "--device", args.device, "--quiet", *args.extra]
    if args.precision:
        base += ["--precision", args.precision]
    if args.threads:
        base += ["--threads", str(args.threads)]
    npy = work / "emb.npy"
    startup = min(timed([*base, str(one), "--output-npy", str(work / "one.npy")]) for _ in range(2))
    wall_npy = timed([*base, str(inputs), "--output-npy", str(npy)])
    with open(os.devnull, "wb") as null:
        start = time.perf_counter()
        proc = subprocess.run([*base, str(inputs)], stdout=null, stderr=subprocess.PIPE)
        wall_json = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(proc.stderr.decode()[-3000:])
    got = np.load(npy)

    st = sentence_transformers.SentenceTransformer(args.model, device=args.device)
    if args.device == "cuda" and args.precision in ("", "fp16"):
        st = st.half()
    st.encode(texts[:512], batch_size=args.st_batch_size)  # warm-up
    if args.device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    want = st.encode(texts, batch_size=args.st_batch_size, convert_to_numpy=True)
    if args.device == "cuda":
        torch.cuda.synchronize()
    st_wall = time.perf_counter() - start
    want = want.astype(np.float64)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))

    n = len(texts)
    rows = [
        ("bertrt run --output-npy", wall_npy, n / wall_npy, n / max(wall_npy - startup, 1e-9)),
        ("bertrt run (JSON Lines)", wall_json, n / wall_json, n / max(wall_json - startup, 1e-9)),
        (f"sentence-transformers encode(batch_size={args.st_batch_size})", st_wall, n / st_wall, n / st_wall),
    ]
    precision = args.precision or ("fp16" if args.device == "cuda" else "fp32")
    table = ["| run | wall s | texts/s | texts/s without startup | vs sentence-transformers |",
             "|---|---:|---:|---:|---:|"]
    for name, wall, rate, steady in rows:
        table.append(f"| {name} | {wall:.2f} | {rate:,.0f} | {steady:,.0f} | {steady / rows[2][3]:.2f}x |")
    summary = (f"{n:,} texts; bertrt startup (load{', self-check' if args.device == 'cuda' else ''}, "
               f"one text) {startup:.2f} s; embeddings against sentence-transformers: min cosine "
               f"{cos.min():.6f}, mean {cos.mean():.6f}")
    print("\n".join(table))
    print(summary)
    cmd = " ".join(["python3", "bench/run_bench.py", *sys.argv[1:]])
    section = (
        f"\n## `bertrt run` on a file of texts, {args.device} {precision} (issue 28)\n\n"
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n"
        f"- machine: {machine(args.device)}; threads {args.threads or 'all'}\n"
        f"- command: `{cmd}`\n"
        f"- model: {args.model}\n"
        f"- anchor measured in the same run: sentence-transformers {sentence_transformers.__version__}, "
        f"torch {torch.__version__}\n\n" + "\n".join(table) + "\n\n" + summary + "\n")
    with open(args.results, "a", encoding="utf-8") as f:
        f.write(section)


if __name__ == "__main__":
    main()
