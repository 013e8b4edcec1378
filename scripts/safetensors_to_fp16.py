#!/usr/bin/env python3
"""Rewrite a safetensors file with its F32 tensors stored as F16 (numpy only).

Used to carry a real model to the GPU machine within the transfer limit
(scripts/pack_for_device.sh PARITY_DATA=1); both bertrt and transformers then
load the same fp16-rounded weights. With --keep-token-ids FILE (one id per
line), the rows of the word embeddings of every other token are zeroed, so
that the file compresses to what texts made of those tokens need.

  safetensors_to_fp16.py IN.safetensors OUT.safetensors [--keep-token-ids FILE]
"""
import json
import struct
import sys

import numpy as np


def main(src, dst, keep=None):
    with open(src, "rb") as f:
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
            values = np.frombuffer(raw, dtype="<f4").astype("<f2")
            if keep is not None and name.endswith("word_embeddings.weight"):
                rows = values.reshape(meta["shape"]).copy()
                mask = np.ones(len(rows), dtype=bool)
                mask[keep] = False
                rows[mask] = 0
                values = rows
            raw = values.tobytes()
            dtype = "F16"
        out_header[name] = {"dtype": dtype, "shape": meta["shape"],
                            "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(out_header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[3] == "--keep-token-ids":
        with open(sys.argv[4]) as f:
            ids = sorted({int(line) for line in f if line.strip()})
        main(sys.argv[1], sys.argv[2], ids)
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
