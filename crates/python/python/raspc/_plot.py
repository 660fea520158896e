"""Heatmaps of a model's heads and MLPs as matplotlib figures (``Model.plot_head``,
``Model.plot_mlp``), with axes named in the residual basis, a colorbar, and an optional
symmetric-log colour scale so that small weights show next to large ones.

Rows and columns that are entirely zero are left out (say ``all_dims=True`` to keep them); the
title says how many were left out. Nothing else is dropped: a wide MLP gives a wide figure.
The figures are ``matplotlib.figure.Figure`` objects (no pyplot state): a notebook shows them,
``fig.savefig("head.svg")`` writes SVG, PNG or PDF.
"""

import numpy as np

from . import RaspcError


def _norm(m, symlog, linthresh):
    from matplotlib import colors

    vmax = float(np.abs(m).max()) if m.size else 0.0
    vmax = vmax if vmax > 0 else 1.0
    if symlog:
        nz = np.abs(m[m != 0])
        lt = linthresh if linthresh is not None else (float(nz.min()) if nz.size else 1.0)
        lt = min(lt, vmax)
        return colors.SymLogNorm(linthresh=lt, vmin=-vmax, vmax=vmax, base=10)
    return colors.Normalize(vmin=-vmax, vmax=vmax)


def _keep(m, axis, all_dims):
    if all_dims:
        return np.arange(m.shape[axis])
    return np.flatnonzero(np.abs(m).sum(axis=1 - axis) != 0)


def heatmap(m, row_names, col_names, title, symlog=False, linthresh=None, all_dims=False, xlabel="", ylabel=""):
    """A labelled heatmap of matrix ``m`` with a colorbar; returns the Figure."""
    from matplotlib.figure import Figure

    m = np.asarray(m, dtype=np.float64)
    rows, cols = _keep(m, 0, all_dims), _keep(m, 1, all_dims)
    dropped = (m.shape[0] - len(rows), m.shape[1] - len(cols))
    sub = m[np.ix_(rows, cols)] if len(rows) and len(cols) else np.zeros((max(len(rows), 1), max(len(cols), 1)))
    cell = 0.28
    fig = Figure(figsize=(max(4.0, 2.5 + cell * sub.shape[1]), max(3.0, 1.8 + cell * sub.shape[0])), layout="constrained")
    ax = fig.add_subplot()
    im = ax.imshow(sub, cmap="RdBu_r", norm=_norm(sub, symlog, linthresh), aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), [col_names[c] for c in cols], rotation=90, fontsize=7)
    ax.set_yticks(range(len(rows)), [row_names[r] for r in rows], fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    note = f"\n({dropped[0]} all-zero rows and {dropped[1]} all-zero columns not shown)" if any(dropped) else ""
    ax.set_title(title + note, fontsize=9)
    fig.colorbar(im, ax=ax, label="weight" + (" (symmetric log scale)" if symlog else ""))
    fig.raspc_matrix = sub
    fig.raspc_rows = [row_names[r] for r in rows]
    fig.raspc_cols = [col_names[c] for c in cols]
    return fig


def plot_head(model, layer, head, circuit="qk", symlog=False, linthresh=None, all_dims=False):
    cfg = model._config["layers"]
    if not (0 <= layer < len(cfg)) or not (0 <= head < len(cfg[layer]["heads"])):
        raise RaspcError(f"layer {layer} has no head {head} (the model has {[len(l['heads']) for l in cfg]} heads per layer)")
    w = model.weights
    p = f"layers.{layer}.attn.{head}."
    names = model.dim_names
    info = cfg[layer].get("head_info", [])
    what = info[head]["what"] if head < len(info) else ""
    if circuit == "qk":
        m = w[p + "w_q"].astype(np.float64) @ w[p + "w_k"].astype(np.float64).T
        return heatmap(m, names, names, f"L{layer}H{head} QK: {what}", symlog, linthresh, all_dims, "key dim", "query dim")
    if circuit == "ov":
        m = w[p + "w_v"].astype(np.float64) @ w[p + "w_o"].astype(np.float64)
        return heatmap(m, names, names, f"L{layer}H{head} OV: {what}", symlog, linthresh, all_dims, "written dim", "read dim")
    raise RaspcError(f'circuit must be "qk" or "ov", not {circuit!r}')


def plot_mlp(model, layer, which="in", symlog=False, linthresh=None, all_dims=False):
    cfg = model._config["layers"]
    if not (0 <= layer < len(cfg)) or cfg[layer]["mlp"] is None:
        raise RaspcError(f"layer {layer} has no MLP")
    w = model.weights
    hidden = cfg[layer]["mlp"]["hidden"]
    units = [f"u{i}" for i in range(hidden)]
    for part in cfg[layer].get("mlp_info", []):
        a, b = part["hidden"]
        for i in range(a, b):
            units[i] = f"{part['writes']}:{i - a}"
    names = model.dim_names
    p = f"layers.{layer}.mlp."
    # Each matrix with its bias as a last row ("bias"): a gate made of its bias alone would
    # otherwise draw as an empty figure.
    rows = list(names) + ["bias"]
    if which == "in":
        return heatmap(np.vstack([w[p + "w_in"], w[p + "b_in"][None]]), rows, units, f"L{layer} MLP W_in", symlog, linthresh, all_dims, "hidden unit", "read dim")
    if which == "gate":
        if p + "w_gate" not in w:
            raise RaspcError(f"the MLP of layer {layer} is not gated")
        return heatmap(np.vstack([w[p + "w_gate"], w[p + "b_gate"][None]]), rows, units, f"L{layer} MLP W_gate", symlog, linthresh, all_dims, "hidden unit", "read dim")
    if which == "out":
        return heatmap(np.vstack([w[p + "w_out"], w[p + "b_out"][None]]), units + ["bias"], names, f"L{layer} MLP W_out", symlog, linthresh, all_dims, "written dim", "hidden unit")
    raise RaspcError(f'which must be "in", "gate" or "out", not {which!r}')
