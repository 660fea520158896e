"""An independent forward pass for raspc checkpoints, in numpy.

Reads a checkpoint with the `safetensors` package and its metadata alone (no raspc code), runs
it with hard or soft attention exactly as docs/checkpoint-format.md describes, and decodes the
output. Used by tests/tests/interop.rs to check that any framework reproduces `raspc run`.

    python forward.py JOB.json

JOB.json: {"cases": [{"checkpoint": PATH, "inputs": [[tok, ...], ...],
                      "expected": {"hard": [[out, ...], ...], "soft": [...]}}]}
Exits 1 and prints the first disagreements if any output differs.
"""

import json
import sys

import numpy as np
from safetensors import safe_open


def load(path):
    with safe_open(path, "np") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return json.loads(meta["config"]), json.loads(meta["output"]), tensors


def forward(cfg, t, ids, mode):
    n = len(ids)
    x = t["embed.token"][ids] + t["embed.position"][:n]
    visible = np.tril(np.ones((n, n), dtype=bool)) if cfg["causal"] else np.ones((n, n), dtype=bool)
    tol = cfg["attention"]["tie_tolerance"]
    beta = cfg["attention"]["soft_beta"]
    for l, layer in enumerate(cfg["layers"]):
        delta = np.zeros_like(x)
        for h in range(len(layer["heads"])):
            p = f"layers.{l}.attn.{h}."
            q, k, v = x @ t[p + "w_q"], x @ t[p + "w_k"], x @ t[p + "w_v"]
            s = np.where(visible, q @ k.T, -np.inf)
            top = s.max(axis=1, keepdims=True)
            if mode == "hard":
                w = (s >= top - tol).astype(x.dtype)
            else:
                w = np.exp(beta * (s - top))
            w = w / w.sum(axis=1, keepdims=True)
            delta = delta + (w @ v) @ t[p + "w_o"]
        x = x + delta
        if layer["mlp"] is not None:
            p = f"layers.{l}.mlp."
            hidden = np.maximum(x @ t[p + "w_in"] + t[p + "b_in"], 0.0)
            x = x + hidden @ t[p + "w_out"] + t[p + "b_out"]
    return x @ t["readout"]


def decode(output, y):
    enc = output["encoding"]
    rows = y[1:]  # position 0 is BOS
    if enc["kind"] == "categorical":
        return [enc["values"][int(np.argmax(r))] for r in rows]
    return [float(r[0]) for r in rows]


def same(a, b, tolerance):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= max(tolerance, 1e-9)
    return a == b


def main():
    job = json.load(open(sys.argv[1]))
    checked, bad = 0, []
    for case in job["cases"]:
        cfg, output, t = load(case["checkpoint"])
        ids = {json.dumps(v["token"]): v["id"] for v in cfg["vocab"] if v["id"] != cfg["bos_id"]}
        for mode, expected in case["expected"].items():
            for inp, want in zip(case["inputs"], expected):
                seq = [cfg["bos_id"]] + [ids[json.dumps(tok)] for tok in inp]
                got = decode(output, forward(cfg, t, seq, mode))
                checked += 1
                if len(got) != len(want) or not all(same(g, w, output.get("tolerance", 0.0)) for g, w in zip(got, want)):
                    bad.append((case["checkpoint"], mode, inp, want, got))
    finish("numpy forward", checked, bad)


def finish(what, checked, bad):
    """Prints the summary line and the first disagreements; exits 1 if there are any."""
    print(f"{what}: {checked} runs, {len(bad)} disagreements")
    for b in bad[:5]:
        print("disagreement:", *b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
