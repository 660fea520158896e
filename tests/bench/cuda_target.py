"""Writes a random attention layer T (tensors A and V, f32) as safetensors and an input X as JSON,
for `raspc simulate --target T --input X` (standard library only, so it runs on any Python 3).

    python3 tests/bench/cuda_target.py --n 64 --d 64 --dv 64 --heads 1 --seed 7 T.safetensors X.json

Entries are uniform in [-1, 1] and rounded to f32 (what U reads exactly)."""

import argparse
import json
import random
import struct


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--dv", type=int, required=True)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("target")
    p.add_argument("input")
    a = p.parse_args()
    rng = random.Random(a.seed)
    draw = lambda k: [f32(rng.uniform(-1.0, 1.0)) for _ in range(k)]
    h, n, d, dv = a.heads, a.n, a.d, a.dv
    tensors = {"A": ([h, d, d], draw(h * d * d)), "V": ([h, d, dv], draw(h * d * dv))}
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(a.target, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    x = draw(n * d)
    with open(a.input, "w") as f:
        json.dump([x[i * d:(i + 1) * d] for i in range(n)], f)


if __name__ == "__main__":
    main()
