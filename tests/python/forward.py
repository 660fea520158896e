"""An independent forward pass for raspc checkpoints, in numpy.

Reads a checkpoint with the `safetensors` package and its metadata alone (no raspc code), runs
it with hard or soft attention exactly as docs/checkpoint-format.md describes, and decodes the
output. Used by tests/tests/interop.rs to check that any framework reproduces `raspc run`.

    python forward.py JOB.json

JOB.json: {"cases": [{"checkpoint": PATH, "inputs": [[tok, ...], ...],
                      "expected": {"hard": [[out, ...], ...], "soft": [...]}}]}
Checkpoints with `real_input` read numbers: token id 1 at every position plus the number times
`embed.value`. Gated (`reglu`) MLPs multiply the ReLU units by `x @ w_gate + b_gate`.
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


def embed(cfg, t, seq):
    """Residual stream after the embeddings; `seq` is BOS first (ids, or numbers after BOS)."""
    n = len(seq)
    if cfg.get("real_input"):
        ids = [cfg["bos_id"]] + [1] * (n - 1)
        values = np.array([0.0] + [float(v) for v in seq[1:]], dtype=np.float32)
        return t["embed.token"][ids] + t["embed.position"][:n] + values[:, None] * t["embed.value"][None, :]
    return t["embed.token"][seq] + t["embed.position"][:n]


def mlp(layer, t, p, x, relu=lambda z: np.maximum(z, 0.0)):
    hidden = relu(x @ t[p + "w_in"] + t[p + "b_in"])
    if layer["mlp"]["kind"] == "reglu":
        hidden = hidden * (x @ t[p + "w_gate"] + t[p + "b_gate"])
    return hidden @ t[p + "w_out"] + t[p + "b_out"]


def forward(cfg, t, ids, mode):
    n = len(ids)
    x = embed(cfg, t, ids)
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
            x = x + mlp(layer, t, f"layers.{l}.mlp.", x)
    return x @ t["readout"]


def decode(output, y):
    enc = output["encoding"]
    rows = y[1:]  # position 0 is BOS
    if enc["kind"] == "categorical":
        return [enc["values"][int(np.argmax(r))] for r in rows]
    return [float(r[0]) for r in rows]


def encode(cfg, inp):
    """BOS, then token ids (or, for real-valued models, the numbers themselves)."""
    if cfg.get("real_input"):
        return [cfg["bos_id"]] + list(inp)
    ids = {json.dumps(v["token"]): v["id"] for v in cfg["vocab"] if v["id"] != cfg["bos_id"]}
    return [cfg["bos_id"]] + [ids[json.dumps(tok)] for tok in inp]


def tolerance_of(cfg, output):
    """Two runs of a real-valued model are each within the certified bound of the program."""
    t = output.get("tolerance", 0.0)
    return 2 * t if cfg.get("real_input") else t


def same(a, b, tolerance):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= max(tolerance, 1e-9)
    return a == b


def main():
    job = json.load(open(sys.argv[1]))
    checked, bad = 0, []
    for case in job["cases"]:
        cfg, output, t = load(case["checkpoint"])
        for mode, expected in case["expected"].items():
            for inp, want in zip(case["inputs"], expected):
                got = decode(output, forward(cfg, t, encode(cfg, inp), mode))
                checked += 1
                if len(got) != len(want) or not all(same(g, w, tolerance_of(cfg, output)) for g, w in zip(got, want)):
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
