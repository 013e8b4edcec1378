#!/usr/bin/env python3
"""Rewrite a safetensors file smaller: its F32 tensors stored as F16 (or BF16), numpy only.

Used to carry a real model to the GPU machine within the transfer limit
(scripts/pack_for_device.sh PARITY_DATA=1 or FP8_DATA=1); bertrt and the
references then load the same rounded weights. --keep-token-ids FILE (one id
per line) zeroes the rows of the word embeddings of every other token, and
--positions N the position embeddings from N on, so that the file compresses
to what the texts at hand need. BF16 compresses a fifth smaller than F16.

  shrink_safetensors.py IN.safetensors OUT.safetensors [--keep-token-ids FILE]
                        [--positions N] [--bf16]
"""
import argparse
import json
import struct

import numpy as np


def to_bf16(values):
    """fp32 -> bf16 bits, rounded to nearest even."""
    bits = values.view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--keep-token-ids")
    ap.add_argument("--positions", type=int)
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args()
    keep = None
    if args.keep_token_ids:
        with open(args.keep_token_ids) as f:
            keep = sorted({int(line) for line in f if line.strip()})
    with open(args.src, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    out_header, chunks, offset = {}, [], 0
    for name, meta in header.items():
        if name == "__metadata__":
            out_header[name] = meta
            continue
        begin, end = meta["data_offsets"]
        raw = data[begin:end]
        dtype = meta["dtype"]
        if dtype == "F32":
            values = np.frombuffer(raw, dtype="<f4").reshape(meta["shape"]).copy()
            if keep is not None and name.endswith("word_embeddings.weight"):
                mask = np.ones(len(values), dtype=bool)
                mask[keep] = False
                values[mask] = 0
            if args.positions is not None and name.endswith("position_embeddings.weight"):
                values[args.positions:] = 0
            raw = (to_bf16(values) if args.bf16 else values.astype("<f2")).tobytes()
            dtype = "BF16" if args.bf16 else "F16"
        out_header[name] = {"dtype": dtype, "shape": meta["shape"],
                            "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(out_header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(args.dst, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)


if __name__ == "__main__":
    main()
