#!/usr/bin/env python3
"""bertrt's CUDA engine against PyTorch, in one run on the GPU machine.

Anchors (transformers BertForSequenceClassification, fp16, SDPA, random weights,
token ids already on the GPU, CUDA-event timing, median): eager; torch.compile
(batch 128); torch.compile with CUDA graphs (mode="reduce-overhead", batch 1).
bertrt: `bertrt bench --device cuda --precision fp16 --json` (ids in host memory
to logits in host memory, so its numbers include both copies).

Cases: BERT-base seq 128 at batch 1, 8, 128; a ragged batch of 32 with lengths
16..128 (bertrt packed, PyTorch padded with a mask: the same lengths, which
`bertrt bench --json` reports as it draws them) next to bertrt's 32x128; BERT-large
seq 384 batch 256 when time is left. Prints a table (with each case's peak device
memory beyond the weights) and bertrt's per-operation profile at batch 128 (each
GEMM's TFLOP/s, the time outside GEMMs and attention), and appends both to
RESULTS.md (--results). Time-bounded: --deadline-s caps the whole run; a
torch.compile step is skipped when too little time is left for it.

  python3 bench/cuda_bench.py --bertrt .carry/bin/bertrt --results $OUT/RESULTS.md
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

START = time.monotonic()


def elapsed():
    return time.monotonic() - START


def log(msg):
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


def make_model(preset, workdir):
    path = os.path.join(workdir, f"{preset}-seqcls")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "..", "scripts", "make_random_model.py"),
                        "--preset", preset, "--head", "seq-cls", "--num-labels", "2",
                        "--dtype", "f16", "-o", path], check=True, stdout=subprocess.DEVNULL)
    return path


def run_bertrt(binary, model, batch, seq_len=None, lengths=None, iterations=50, warmup=10,
               gelu="exact", profile=False):
    cmd = [binary, "bench", model, "--device", "cuda", "--precision", "fp16", "--batch-size",
           str(batch), "--iterations", str(iterations), "--warmup", str(warmup), "--json",
           "--gelu", gelu]
    cmd += ["--lengths", lengths] if lengths else ["--seq-len", str(seq_len)]
    cmd += ["--profile"] if profile else []
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["command"] = " ".join(cmd)
    return result


def time_cuda(torch, fn, warmup, iters):
    """Median ms, and the peak device memory the calls took beyond what was
    allocated before them (activations and workspace; weights excluded)."""
    with torch.inference_mode():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        at_rest = torch.cuda.memory_allocated()
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times), torch.cuda.max_memory_allocated() - at_rest


class Torch:
    """The PyTorch anchors on one model directory."""

    def __init__(self, model_dir):
        import torch
        from transformers import BertForSequenceClassification
        self.torch = torch
        self.model = BertForSequenceClassification.from_pretrained(
            model_dir, torch_dtype=torch.float16, attn_implementation="sdpa").cuda().eval()
        self.vocab = self.model.config.vocab_size

    def inputs(self, batch, seq_len, lengths=None):
        torch = self.torch
        g = torch.Generator(device="cuda").manual_seed(0)
        ids = torch.randint(1000, self.vocab, (batch, seq_len), device="cuda", generator=g)
        if lengths is None:
            return dict(input_ids=ids)
        mask = (torch.arange(seq_len, device="cuda")[None, :] <
                torch.tensor(lengths, device="cuda")[:, None]).to(torch.int64)
        return dict(input_ids=ids, attention_mask=mask)

    def time(self, fn_model, inputs, warmup, iters):
        return time_cuda(self.torch, lambda: fn_model(**inputs).logits, warmup, iters)


def profile_table(p):
    """bertrt's per-operation profile (`bertrt bench --profile`) as Markdown."""
    lines = [f"bertrt at base s128 b128, per operation (in the CUDA graph, GPU timer stamps "
             f"between operations, mean of {p['runs']} forwards):", "",
             "| op | calls | ms | share | TFLOP/s |", "|---|---:|---:|---:|---:|"]
    for op in p["ops"]:
        share = 100 * op["ms_per_forward"] / p["sum_of_ops_ms"] if p["sum_of_ops_ms"] else 0
        tflops = f"{op['tflops']:.0f}" if op["tflops"] else ""
        lines.append(f"| {op['op']} | {op['calls_per_forward']} | {op['ms_per_forward']:.3f} | "
                     f"{share:.1f}% | {tflops} |")
    lines += ["", f"GEMMs {p['gemm_ms']:.3f} ms + attention {p['attention_ms']:.3f} ms of a "
              f"{p['graph_median_ms']:.3f} ms forward (graph median): "
              f"{p['outside_gemm_and_attention_ms']:.3f} ms outside them"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--workdir", default="/tmp/bertrt-bench")
    ap.add_argument("--results", help="append the section to this Markdown file")
    ap.add_argument("--json-out", help="write every measurement here")
    ap.add_argument("--deadline-s", type=float, default=330.0)
    ap.add_argument("--compile-reserve-s", type=float, default=100.0,
                    help="time a torch.compile step needs; skipped when less is left")
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--gelu", default="exact,tanh",
                    help="bertrt's --gelu modes to run, comma-separated; anchors are compared "
                         "with the first (exact, the default, is the model's own function)")
    args = ap.parse_args()
    modes = args.gelu.split(",")

    def label(mode):
        return "bertrt" if mode == modes[0] else f"bertrt --gelu {mode}"
    os.makedirs(args.workdir, exist_ok=True)
    # rows: (case, system, batch, mean_len, ms, peak MiB beyond the weights)
    rows, notes = [], []
    mib = 1 / (1 << 20)

    def left():
        return args.deadline_s - elapsed()

    base = make_model("bert-base", args.workdir)
    log("bert-base model ready")

    # bertrt first: it is what this run is for.
    devices, profile = [], None
    for mode in modes:
        for b in (1, 8, 128):
            # Batch 128's run also times each operation (after its median).
            r = run_bertrt(args.bertrt, base, b, seq_len=128, gelu=mode,
                           profile=b == 128 and profile is None)
            profile = profile or r.get("profile")
            rows.append((f"base s128 b{b}", label(mode), b, 128, r["median_ms"],
                         r["peak_memory_bytes"] * mib))
            log(f"bertrt --gelu {mode} b{b}: {r['median_ms']:.3f} ms ({r['device']})")
        devices.append(r["device"])
        r = run_bertrt(args.bertrt, base, 32, lengths="16:128", gelu=mode)
        ragged_lengths = r["sequence_lengths"]
        ragged_mean = r["total_tokens"] / 32
        rows.append(("base ragged 32x16..128", label(mode), 32, ragged_mean, r["median_ms"],
                     r["peak_memory_bytes"] * mib))
        r32 = run_bertrt(args.bertrt, base, 32, seq_len=128, gelu=mode)
        rows.append(("base 32x128", label(mode), 32, 128, r32["median_ms"],
                     r32["peak_memory_bytes"] * mib))
        log(f"bertrt --gelu {mode} ragged {rows[-2][4]:.3f} ms, 32x128 {r32['median_ms']:.3f} ms")
    device_name = "`, `".join(devices)

    import torch
    import transformers
    gpu = torch.cuda.get_device_name(0)
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    tb = Torch(base)
    for b in (1, 8, 128):
        ms, peak = tb.time(tb.model, tb.inputs(b, 128), 10, 50 if b < 128 else 30)
        rows.append((f"base s128 b{b}", "PyTorch eager", b, 128, ms, peak * mib))
        log(f"eager b{b}: {ms:.3f} ms")
    # bertrt's ragged batch, padded to its longest sequence.
    ms, peak = tb.time(tb.model, tb.inputs(32, max(ragged_lengths), ragged_lengths), 10, 30)
    rows.append(("base ragged 32x16..128", "PyTorch eager (padded + mask)", 32,
                 sum(ragged_lengths) / 32, ms, peak * mib))
    log(f"eager ragged: {ms:.3f} ms")

    if left() > args.compile_reserve_s:
        t0 = time.monotonic()
        graphed = torch.compile(tb.model, mode="reduce-overhead", dynamic=False)
        ms, peak = tb.time(graphed, tb.inputs(1, 128), 15, 50)
        rows.append(("base s128 b1", "torch.compile + CUDA graphs", 1, 128, ms, peak * mib))
        log(f"compile reduce-overhead b1: {ms:.3f} ms (compile + timing {time.monotonic() - t0:.0f} s)")
    else:
        notes.append("torch.compile + CUDA graphs (batch 1) skipped: out of time")
    if left() > args.compile_reserve_s:
        t0 = time.monotonic()
        torch._dynamo.reset()
        compiled = torch.compile(tb.model, dynamic=False)
        ms, peak = tb.time(compiled, tb.inputs(128, 128), 5, 30)
        rows.append(("base s128 b128", "torch.compile", 128, 128, ms, peak * mib))
        log(f"compile b128: {ms:.3f} ms (compile + timing {time.monotonic() - t0:.0f} s)")
    else:
        notes.append("torch.compile (batch 128) skipped: out of time")
    del tb
    torch.cuda.empty_cache()

    if not args.no_large and left() > 60:
        large = make_model("bert-large", args.workdir)
        log("bert-large model ready")
        for mode in modes:
            r = run_bertrt(args.bertrt, large, 256, seq_len=384, iterations=10, warmup=3,
                           gelu=mode)
            rows.append(("large s384 b256", label(mode), 256, 384, r["median_ms"],
                         r["peak_memory_bytes"] * mib))
            log(f"bertrt --gelu {mode} large: {r['median_ms']:.2f} ms")
        if left() > 30:
            tl = Torch(large)
            ms, peak = tl.time(tl.model, tl.inputs(256, 384), 3, 10)
            rows.append(("large s384 b256", "PyTorch eager", 256, 384, ms, peak * mib))
            log(f"eager large: {ms:.2f} ms")
            del tl
    elif not args.no_large:
        notes.append("BERT-large skipped: out of time")

    # Table: each anchor's time over bertrt's for the same case (> 1: bertrt faster).
    brt_ms = {case: ms for case, system, _, _, ms, _ in rows if system == "bertrt"}
    lines = ["| case | system | batch | mean len | median ms | seq/s | anchor ms / bertrt ms "
             "| peak MiB |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for case, system, b, mean_len, ms, peak in rows:
        ratio = "" if system == "bertrt" else f"{ms / brt_ms[case]:.2f}x"
        if system.startswith("bertrt --gelu"):
            ratio = f"{ms / brt_ms[case]:.2f}x (of bertrt)"
        lines.append(f"| {case} | {system} | {b} | {mean_len:.1f} | {ms:.3f} | "
                     f"{b / ms * 1000:,.0f} | {ratio} | {peak:,.1f} |")
    table = "\n".join(lines)
    if profile:
        table += "\n\n" + profile_table(profile)
    print("\n" + table + "\n" + "\n".join(notes))

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        "", f"## CUDA engine vs PyTorch — BERT fp16 on {gpu} ({now[:10]})", "",
        f"- date: {now}",
        f"- machine: {gpu}; bertrt reports `{device_name}`",
        f"- command: `python3 bench/cuda_bench.py --bertrt {args.bertrt} --gelu {args.gelu}`",
        f"- anchors measured in the same run: {versions}; BertForSequenceClassification fp16, "
        "SDPA, ids already on the GPU, CUDA-event median; bertrt: `bertrt bench --device cuda "
        "--precision fp16 --json --gelu MODE`, ids in host memory to logits in host memory, "
        "median of 50 (10 for BERT-large); ratios are over the first bertrt row of each case",
        "- random weights (scripts/make_random_model.py); the ragged case's lengths are drawn "
        "uniform in 16..128 by `bertrt bench`, and PyTorch runs the same lengths padded to the "
        "longest (mean length in the table); peak MiB: device memory beyond the weights "
        "(bertrt: its engine's buffers at their highest; PyTorch: max_memory_allocated over "
        "the timed calls minus what was allocated before them)",
        *[f"- {n}" for n in notes], "", table, ""])
    if args.results:
        with open(args.results, "a") as f:
            f.write(section)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"rows": rows, "notes": notes, "gpu": gpu, "versions": versions}, f, indent=1)
    log("done")


if __name__ == "__main__":
    main()
