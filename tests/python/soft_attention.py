"""Soft-attention forward pass of a raspc checkpoint built from a framework's standard
attention op: JAX's `jax.nn.dot_product_attention` or PyTorch's
`torch.nn.functional.scaled_dot_product_attention` (scale = the checkpoint's soft_beta, causal
mask from the config), with the MLPs as plain linear layers and ReLU.

    python soft_attention.py jax|torch JOB.json [MAX_INPUTS_PER_CASE]

JOB.json as for forward.py; only the "soft" expectations are checked. Exits 1 on disagreement.
"""

import json
import sys

import numpy as np
from forward import decode, finish, load, same


def run_jax(cfg, t, seq):
    import jax
    import jax.numpy as jnp

    n = len(seq)
    x = jnp.asarray(t["embed.token"][seq] + t["embed.position"][:n])
    beta = cfg["attention"]["soft_beta"]
    for l, layer in enumerate(cfg["layers"]):
        delta = jnp.zeros_like(x)
        for h in range(len(layer["heads"])):
            p = f"layers.{l}.attn.{h}."
            q, k, v = (x @ jnp.asarray(t[p + w]) for w in ("w_q", "w_k", "w_v"))
            # [batch, time, heads, dim]
            out = jax.nn.dot_product_attention(q[None, :, None, :], k[None, :, None, :], v[None, :, None, :], scale=beta, is_causal=cfg["causal"])
            delta = delta + out[0, :, 0, :] @ jnp.asarray(t[p + "w_o"])
        x = x + delta
        if layer["mlp"] is not None:
            p = f"layers.{l}.mlp."
            hidden = jax.nn.relu(x @ jnp.asarray(t[p + "w_in"]) + jnp.asarray(t[p + "b_in"]))
            x = x + hidden @ jnp.asarray(t[p + "w_out"]) + jnp.asarray(t[p + "b_out"])
    return np.asarray(x @ jnp.asarray(t["readout"]))


def run_torch(cfg, t, seq):
    import torch
    import torch.nn.functional as F

    n = len(seq)
    T = lambda a: torch.from_numpy(np.ascontiguousarray(a))
    x = T(t["embed.token"][seq] + t["embed.position"][:n])
    beta = cfg["attention"]["soft_beta"]
    with torch.no_grad():
        for l, layer in enumerate(cfg["layers"]):
            delta = torch.zeros_like(x)
            for h in range(len(layer["heads"])):
                p = f"layers.{l}.attn.{h}."
                # F.linear(x, W) computes x @ W.T; checkpoint matrices are [in, out].
                q, k, v = (F.linear(x, T(t[p + w]).T) for w in ("w_q", "w_k", "w_v"))
                out = F.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], is_causal=cfg["causal"], scale=beta)
                delta = delta + F.linear(out[0, 0], T(t[p + "w_o"]).T)
            x = x + delta
            if layer["mlp"] is not None:
                p = f"layers.{l}.mlp."
                hidden = torch.relu(F.linear(x, T(t[p + "w_in"]).T, T(t[p + "b_in"])))
                x = x + F.linear(hidden, T(t[p + "w_out"]).T, T(t[p + "b_out"]))
        return F.linear(x, T(t["readout"]).T).numpy()


def main():
    framework, job = sys.argv[1], json.load(open(sys.argv[2]))
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    run = {"jax": run_jax, "torch": run_torch}[framework]
    checked, bad = 0, []
    for case in job["cases"]:
        cfg, output, t = load(case["checkpoint"])
        ids = {json.dumps(v["token"]): v["id"] for v in cfg["vocab"] if v["id"] != cfg["bos_id"]}
        for inp, want in list(zip(case["inputs"], case["expected"]["soft"]))[:limit]:
            seq = [cfg["bos_id"]] + [ids[json.dumps(tok)] for tok in inp]
            got = decode(output, run(cfg, t, seq))
            checked += 1
            if len(got) != len(want) or not all(same(g, w, output.get("tolerance", 0.0)) for g, w in zip(got, want)):
                bad.append((case["checkpoint"], inp, want, got))
    finish(f"{framework} soft attention", checked, bad)


if __name__ == "__main__":
    main()
