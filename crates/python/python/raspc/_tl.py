"""A raspc checkpoint as a TransformerLens ``HookedTransformer`` (``Model.to_transformer_lens()``).

How the raspc forward pass maps onto TransformerLens (tested against ``raspc run``):

- No LayerNorm (``normalization_type=None``), all attention biases 0, and ``attn_scale =
  1 / soft_beta``: TransformerLens divides scores by ``attn_scale``, so its softmax is raspc's
  soft attention. No weight processing is applied (the weights are loaded with
  ``load_state_dict``; ``fold_ln``, ``center_writing_weights`` and ``center_unembed`` would
  change a compiled model's outputs).
- TransformerLens needs uniform shapes: every layer gets ``n_heads`` = the most heads of any layer,
  and every head ``d_head`` = the widest head; MLPs get ``d_mlp`` = the widest MLP. The padding
  is zeros: a padded head attends uniformly and writes nothing, a padded MLP unit is always 0.
  ``hooked.raspc_heads[l]`` is the number of real heads of layer ``l`` (they come first), and
  ``hooked.raspc_d_head[l][h]`` the real width of head ``h``; activations of padded heads are in
  the cache but are not part of the model (``raspc_run_with_cache`` drops them from
  ``hook_attn_scores`` / ``hook_pattern``).
- Gated (ReGLU) MLPs: TransformerLens computes ``act(x W_gate) * (x W_in) + b_in`` where raspc
  computes ``relu(x w_in + b_in) * (x w_gate + b_gate)``. So ``W_gate`` holds raspc's ``w_in``,
  ``W_in`` raspc's ``w_gate``, and both biases are folded into one extra residual dim (the last,
  ``d_model`` = raspc's + 1) that every token embedding sets to 1 and nothing else reads or writes.
- Hooks (``hooked.raspc_hooks(key_mask, values, attention)``, used by ``raspc_run``): hard
  attention (each ``hook_attn_scores`` keeps the keys within the tie tolerance of the row maximum,
  equally weighted), key masks for padded batches (TransformerLens ignores ``attention_mask`` in
  bidirectional models) and real-valued inputs (``hook_embed`` adds ``value * embed.value``).
"""

import numpy as np
import torch

from . import RaspcError


def to_hooked_transformer(model, device="cpu"):
    from transformer_lens import HookedTransformerConfig

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise RaspcError(f"to_transformer_lens: {device!r} is not a torch device ({e})") from None

    cfg = model._config
    w = model.weights
    layers = cfg["layers"]
    gated = any(l["mlp"] is not None and l["mlp"]["kind"] == "reglu" for l in layers)
    d = cfg["d_model"]
    D = d + 1 if gated else d
    n_heads = max([len(l["heads"]) for l in layers] + [1])
    d_head = max([dh for l in layers for dh in l["heads"]] + [1])
    d_mlp = max([l["mlp"]["hidden"] for l in layers if l["mlp"] is not None] + [1])
    beta = float(cfg["attention"]["soft_beta"])
    tol = float(cfg["attention"]["tie_tolerance"])
    tcfg = HookedTransformerConfig(
        n_layers=max(len(layers), 1),
        d_model=D,
        n_ctx=cfg["max_seq_len"] + 1,
        d_head=d_head,
        n_heads=n_heads,
        d_mlp=d_mlp,
        d_vocab=len(cfg["vocab"]),
        d_vocab_out=cfg["readout_dims"],
        act_fn="relu",
        normalization_type=None,
        attention_dir="causal" if cfg["causal"] else "bidirectional",
        positional_embedding_type="standard",
        gated_mlp=gated,
        use_attn_scale=True,
        attn_scale=1.0 / beta,
        default_prepend_bos=False,
        device=device,
        dtype=torch.float32,
    )
    hooked = _hooked_class()(tcfg, move_to_device=False)
    z = np.zeros
    st = {}
    emb = z((len(cfg["vocab"]), D), np.float32)
    emb[:, :d] = w["embed.token"]
    if gated:
        emb[:, d] = 1.0
    pos = z((cfg["max_seq_len"] + 1, D), np.float32)
    pos[:, :d] = w["embed.position"]
    st["embed.W_E"] = emb
    st["pos_embed.W_pos"] = pos
    unembed = z((D, cfg["readout_dims"]), np.float32)
    unembed[:d] = w["readout"]
    st["unembed.W_U"] = unembed
    st["unembed.b_U"] = z((cfg["readout_dims"],), np.float32)
    for l in range(tcfg.n_layers):
        layer = layers[l] if l < len(layers) else {"heads": [], "mlp": None}
        pre = f"blocks.{l}."
        W = {k: z((n_heads, D, d_head), np.float32) for k in ("W_Q", "W_K", "W_V")}
        WO = z((n_heads, d_head, D), np.float32)
        for h, dh in enumerate(layer["heads"]):
            p = f"layers.{l}.attn.{h}."
            W["W_Q"][h, :d, :dh] = w[p + "w_q"]
            W["W_K"][h, :d, :dh] = w[p + "w_k"]
            W["W_V"][h, :d, :dh] = w[p + "w_v"]
            WO[h, :dh, :d] = w[p + "w_o"]
        for k, v in W.items():
            st[pre + "attn." + k] = v
        st[pre + "attn.W_O"] = WO
        for k in ("b_Q", "b_K", "b_V"):
            st[pre + "attn." + k] = z((n_heads, d_head), np.float32)
        st[pre + "attn.b_O"] = z((D,), np.float32)
        w_in = z((D, d_mlp), np.float32)
        b_in = z((d_mlp,), np.float32)
        w_out = z((d_mlp, D), np.float32)
        b_out = z((D,), np.float32)
        w_gate = z((D, d_mlp), np.float32)
        mlp = layer["mlp"]
        if mlp is not None:
            p = f"layers.{l}.mlp."
            n = mlp["hidden"]
            w_out[:n, :d] = w[p + "w_out"]
            b_out[:d] = w[p + "b_out"]
            if gated:
                # TL: relu(x W_gate) * (x W_in) + b_in.
                w_gate[:d, :n] = w[p + "w_in"]
                w_gate[d, :n] = w[p + "b_in"]
                if mlp["kind"] == "reglu":
                    w_in[:d, :n] = w[p + "w_gate"]
                    w_in[d, :n] = w[p + "b_gate"]
                else:
                    w_in[d, :n] = 1.0
            else:
                w_in[:d, :n] = w[p + "w_in"]
                b_in[:n] = w[p + "b_in"]
        st[pre + "mlp.W_in"] = w_in
        st[pre + "mlp.b_in"] = b_in
        st[pre + "mlp.W_out"] = w_out
        st[pre + "mlp.b_out"] = b_out
        if gated:
            st[pre + "mlp.W_gate"] = w_gate
    own = hooked.state_dict()
    missing = [k for k in st if k not in own]
    if missing:
        raise RaspcError(f"internal error: TransformerLens has no parameters {missing}")
    for k, v in st.items():
        if tuple(own[k].shape) != v.shape:
            raise RaspcError(f"internal error: TransformerLens parameter {k} has shape {tuple(own[k].shape)}, not {v.shape}")
    unset = [k for k, v in own.items() if k not in st and v.dtype.is_floating_point and ".attn." not in k and "IGNORE" not in k]
    if unset:
        raise RaspcError(f"internal error: TransformerLens parameters left unset: {unset}")
    hooked.load_state_dict({k: torch.from_numpy(v) for k, v in st.items()}, strict=False)
    hooked.eval()
    # The weights where the config says they are (TransformerLens moves its inputs there).
    try:
        hooked.to(dev)
    except (RuntimeError, AssertionError) as e:
        raise RaspcError(f"to_transformer_lens: cannot move the model to {device!r}: {e}") from None

    hooked.raspc_model = model
    hooked.raspc_heads = [len(l["heads"]) for l in layers]
    hooked.raspc_d_head = [list(l["heads"]) for l in layers]
    hooked._raspc_beta = beta
    hooked._raspc_tol = tol
    hooked._raspc_ev = None
    if cfg.get("real_input") is not None:
        ev = torch.zeros(D)
        ev[:d] = torch.from_numpy(w["embed.value"].copy())
        hooked._raspc_ev = ev
    return hooked


_CLASS = None


def _hooked_class():
    """``RaspcHookedTransformer``: a ``HookedTransformer`` whose raspc helpers are methods, so
    that a copy (``copy.deepcopy``, ``torch.save``/``torch.load``) runs its own weights. Made on
    first use (TransformerLens is imported only then) and found by pickle as
    ``raspc._tl.RaspcHookedTransformer``."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from transformer_lens import HookedTransformer

    class RaspcHookedTransformer(HookedTransformer):
        def forward(self, input, *args, **kwargs):
            # Token ids without BOS first run to a plausible but meaningless readout (helper
            # py24); strings go through TransformerLens's own tokenizer path, unchecked here.
            if isinstance(input, torch.Tensor) and input.dim() == 2 and input.shape[0] and input.shape[1] and not input.is_floating_point():
                bos = int(self.raspc_model._config["bos_id"])
                wrong = input[:, 0] != bos
                if bool(wrong.any()):
                    i = int(wrong.nonzero()[0, 0])
                    raise RaspcError(f"tokens[{i}, 0] is {int(input[i, 0])}, not the BOS id {bos}: every input starts with BOS (model.encode adds it)")
            return super().forward(input, *args, **kwargs)

        def raspc_hooks(self, key_mask=None, values=None, attention="hard"):
            """Forward hooks for ``hooked.run_with_hooks(tokens, fwd_hooks=...)``: key masking,
            hard attention, real-valued inputs."""
            if attention not in ("hard", "soft"):
                raise RaspcError(f'attention must be "hard" or "soft", not {attention!r}')
            hooks = []
            km = None if key_mask is None else torch.as_tensor(key_mask) != 0
            tol, beta, ev = self._raspc_tol, self._raspc_beta, self._raspc_ev

            def scores_hook(s, hook):
                if km is not None:
                    s = s.masked_fill(~km.to(s.device)[:, None, None, :], float("-inf"))
                if attention == "hard":
                    mx = s.amax(dim=-1, keepdim=True)
                    # Scores here are raspc's times beta (attn_scale = 1/beta).
                    keep = s >= mx - tol * beta
                    s = torch.where(keep, torch.zeros_like(s), torch.full_like(s, float("-inf")))
                return s

            if km is not None or attention == "hard":
                for l in range(self.cfg.n_layers):
                    hooks.append((f"blocks.{l}.attn.hook_attn_scores", scores_hook))
            if ev is not None:
                if values is None:
                    raise RaspcError("this model reads real numbers: pass values")
                vals = torch.as_tensor(values, dtype=torch.float32).clone()
                # Numbers count at input positions only: column 0 (BOS) adds nothing, whatever
                # ``values`` holds there.
                vals[..., 0] = 0

                def embed_hook(e, hook):
                    return e + vals.to(e.device)[..., None] * ev.to(e.device)

                hooks.append(("hook_embed", embed_hook))
            return hooks

        @torch.no_grad()
        def raspc_readout(self, inputs, attention="hard"):
            """The readout (before decoding) of a batch of inputs, and their lengths."""
            tokens, mask, values, lengths = self.raspc_model.encode(inputs)
            hooks = self.raspc_hooks(mask, values, attention)
            r = self.run_with_hooks(torch.from_numpy(tokens).to(self.cfg.device), fwd_hooks=hooks)
            return r.to("cpu", torch.float64).numpy(), lengths

        def raspc_run(self, inputs, attention="hard", *, batch=None):
            """Pads a batch, runs it with the hooks, decodes each input as ``raspc run``
            (``batch`` as for ``Model.run``)."""
            from . import _batch

            model = self.raspc_model
            batch, single = _batch(inputs, model.vocab, False, batch)
            r, lengths = self.raspc_readout(batch, attention)
            out = [model.decode(r[i, : n + 1]) for i, n in enumerate(lengths)]
            return out[0] if single else out

        @torch.no_grad()
        def raspc_run_with_cache(self, inputs, attention="hard", *, batch=None):
            """(outputs, cache): the ActivationCache as a dict, with ``hook_attn_scores`` and
            ``hook_pattern`` cut to each layer's real heads (``batch`` as for ``Model.run``)."""
            from . import _batch

            model = self.raspc_model
            batch, single = _batch(inputs, model.vocab, False, batch)
            tokens, mask, values, lengths = model.encode(batch)
            with self.hooks(fwd_hooks=self.raspc_hooks(mask, values, attention)):
                r, cache = self.run_with_cache(torch.from_numpy(tokens).to(self.cfg.device))
            r = r.to("cpu", torch.float64).numpy()
            out = [model.decode(r[i, : n + 1]) for i, n in enumerate(lengths)]
            c = {}
            for k, v in cache.items():
                if k.endswith("hook_attn_scores") or k.endswith("hook_pattern"):
                    l = int(k.split(".")[1])
                    v = v[:, : self.raspc_heads[l] if l < len(self.raspc_heads) else 0]
                c[k] = v
            return (out[0] if single else out), c

    RaspcHookedTransformer.__module__ = __name__
    RaspcHookedTransformer.__qualname__ = "RaspcHookedTransformer"
    _CLASS = RaspcHookedTransformer
    return _CLASS


def __getattr__(name):
    # Unpickling a saved model looks the class up here (PEP 562).
    if name == "RaspcHookedTransformer":
        return _hooked_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
