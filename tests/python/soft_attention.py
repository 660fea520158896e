"""Soft-attention forward pass of a raspc checkpoint built from a framework's standard
attention op: JAX's `jax.nn.dot_product_attention` or PyTorch's
`torch.nn.functional.scaled_dot_product_attention` (scale = the checkpoint's soft_beta, causal
mask from the config), with the MLPs as plain linear layers and ReLU.

    python soft_attention.py jax|torch JOB.json [MAX_INPUTS_PER_CASE]
    python soft_attention.py jax-hard JOB.json [MAX_INPUTS_PER_CASE]

JOB.json as for forward.py; only the "soft" expectations are checked (`jax-hard`: the "hard"
ones, with hard attention written in jax.numpy: real-valued and gated checkpoints such as the
universal simulator). Exits 1 on disagreement.
"""

import json
import sys

import numpy as np
from forward import decode, embed, encode, finish, load, same, tolerance_of


def run_jax(cfg, t, seq):
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(embed(cfg, t, seq))
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
            x = x + jax_mlp(layer, t, f"layers.{l}.mlp.", x)
    return np.asarray(x @ jnp.asarray(t["readout"]))


def jax_mlp(layer, t, p, x):
    import jax
    import jax.numpy as jnp

    hidden = jax.nn.relu(x @ jnp.asarray(t[p + "w_in"]) + jnp.asarray(t[p + "b_in"]))
    if layer["mlp"]["kind"] == "reglu":
        hidden = hidden * (x @ jnp.asarray(t[p + "w_gate"]) + jnp.asarray(t[p + "b_gate"]))
    return hidden @ jnp.asarray(t[p + "w_out"]) + jnp.asarray(t[p + "b_out"])


def run_jax_hard(cfg, t, seq):
    """Hard attention (average of the keys within tie_tolerance of the row maximum) in JAX."""
    import jax.numpy as jnp

    n = len(seq)
    x = jnp.asarray(embed(cfg, t, seq))
    tol = cfg["attention"]["tie_tolerance"]
    visible = jnp.tril(jnp.ones((n, n), dtype=bool)) if cfg["causal"] else jnp.ones((n, n), dtype=bool)
    for l, layer in enumerate(cfg["layers"]):
        delta = jnp.zeros_like(x)
        for h in range(len(layer["heads"])):
            p = f"layers.{l}.attn.{h}."
            q, k, v = (x @ jnp.asarray(t[p + w]) for w in ("w_q", "w_k", "w_v"))
            s = jnp.where(visible, q @ k.T, -jnp.inf)
            w = (s >= s.max(axis=1, keepdims=True) - tol).astype(x.dtype)
            delta = delta + ((w / w.sum(axis=1, keepdims=True)) @ v) @ jnp.asarray(t[p + "w_o"])
        x = x + delta
        if layer["mlp"] is not None:
            x = x + jax_mlp(layer, t, f"layers.{l}.mlp.", x)
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
    run = {"jax": run_jax, "torch": run_torch, "jax-hard": run_jax_hard}[framework]
    mode = "hard" if framework == "jax-hard" else "soft"
    checked, bad = 0, []
    for case in job["cases"]:
        cfg, output, t = load(case["checkpoint"])
        for inp, want in list(zip(case["inputs"], case["expected"][mode]))[:limit]:
            got = decode(output, run(cfg, t, encode(cfg, inp)))
            checked += 1
            if len(got) != len(want) or not all(same(g, w, tolerance_of(cfg, output)) for g, w in zip(got, want)):
                bad.append((case["checkpoint"], inp, want, got))
    finish(f"{framework} {mode} attention", checked, bad)


if __name__ == "__main__":
    main()
