"""A raspc checkpoint as a plain ``torch.nn.Module`` (``Model.to_torch()``).

The forward pass is the one docs/checkpoint-format.md defines, as ``raspc run`` computes it: no
LayerNorm, no attention biases, no 1/sqrt(d_head) scaling, a d_head per head; hard attention
averages the keys whose score is within the tie tolerance of the row maximum, soft attention is
softmax(soft_beta * scores); causal checkpoints mask later keys; ``key_mask`` hides padding.
"""

import torch
from torch import nn

from . import RaspcError


class RaspcModule(nn.Module):
    """``forward(tokens, key_mask=None, values=None, attention="hard")`` -> readout
    ``[batch, seq, readout_dims]``. ``tokens``: int64 ``[batch, seq]`` ids with BOS first;
    ``key_mask``: ``[batch, seq]``, nonzero for real positions (padding is never attended to);
    ``values``: real-valued models' input numbers ``[batch, seq]`` (what it holds at BOS and
    padding is not read).
    ``run(inputs, attention)`` pads a batch, runs it and decodes each input as ``raspc run``."""

    def __init__(self, model, dtype=None):
        super().__init__()
        given = dtype
        dtype = dtype or torch.float32
        if isinstance(dtype, str):
            # "float64" as well as torch.float64.
            dtype = getattr(torch, dtype, None) if dtype in ("float16", "bfloat16", "float32", "float64", "half", "float", "double") else None
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise RaspcError(f"to_torch: dtype must be a floating torch dtype (torch.float32, torch.float64, or their names), not {given!r}")
        if dtype in (torch.float16, torch.bfloat16):
            import warnings

            warnings.warn(
                f"to_torch({dtype}): raspc's weights and tolerances are for float32 and float64; in {dtype} numbers such as means and fractions round to other values, so the model may decode other tokens (33 of 40 outputs of a mean differed in float16 in a test)",
                RuntimeWarning,
                stacklevel=3,
            )
        self._model = model
        cfg = model._config
        self.causal = bool(cfg["causal"])
        self.tie_tolerance = float(cfg["attention"]["tie_tolerance"])
        self.soft_beta = float(cfg["attention"]["soft_beta"])
        self.real = cfg.get("real_input") is not None
        self.bos_id = int(cfg["bos_id"])
        w = model.weights

        def p(name):
            return nn.Parameter(torch.tensor(w[name].copy(), dtype=dtype), requires_grad=False)

        self.embed_token = p("embed.token")
        self.embed_position = p("embed.position")
        self.embed_value = p("embed.value") if self.real else None
        self.readout = p("readout")
        self.layers = nn.ModuleList()
        for l, layer in enumerate(cfg["layers"]):
            m = nn.Module()
            m.heads = nn.ModuleList()
            for h in range(len(layer["heads"])):
                head = nn.Module()
                for k in ("w_q", "w_k", "w_v", "w_o"):
                    setattr(head, k, p(f"layers.{l}.attn.{h}.{k}"))
                m.heads.append(head)
            m.mlp = None
            if layer["mlp"] is not None:
                mlp = nn.Module()
                for k in ("w_in", "b_in", "w_out", "b_out"):
                    setattr(mlp, k, p(f"layers.{l}.mlp.{k}"))
                mlp.gated = layer["mlp"]["kind"] == "reglu"
                if mlp.gated:
                    mlp.w_gate = p(f"layers.{l}.mlp.w_gate")
                    mlp.b_gate = p(f"layers.{l}.mlp.b_gate")
                m.mlp = mlp
            self.layers.append(m)

    def attention_weights(self, scores, visible, attention):
        """Attention weights from scores ``[batch, q, k]`` and a boolean visibility mask."""
        s = scores.masked_fill(~visible, float("-inf"))
        mx = s.amax(dim=-1, keepdim=True)
        if attention == "hard":
            keep = (s >= mx - self.tie_tolerance).to(s.dtype)
            return keep / keep.sum(dim=-1, keepdim=True)
        if attention == "soft":
            e = torch.exp((s - mx) * self.soft_beta)
            return e / e.sum(dim=-1, keepdim=True)
        raise RaspcError(f'attention must be "hard" or "soft", not {attention!r}')

    def visible(self, key_mask, b, t, device):
        """Boolean ``[batch, q, k]``: which keys each query sees."""
        if key_mask is None:
            vis = torch.ones((b, 1, t), dtype=torch.bool, device=device)
        else:
            vis = (key_mask != 0).reshape(b, 1, t)
        if self.causal:
            vis = vis & torch.ones((t, t), dtype=torch.bool, device=device).tril()
        return vis.expand(b, t, t)

    def embed(self, tokens, values=None):
        b, t = tokens.shape
        if t > self.embed_position.shape[0]:
            raise RaspcError(f"sequences of {t - 1} tokens are longer than max_len {self.embed_position.shape[0] - 1}")
        x = self.embed_token[tokens] + self.embed_position[:t]
        if self.real:
            if values is None:
                raise RaspcError("this model reads real numbers: pass values")
            # Numbers count at input positions only: BOS (and padding, which has BOS's id)
            # adds nothing, whatever ``values`` holds there.
            counted = values.to(x.dtype) * (tokens != self.bos_id).to(x.dtype)
            x = x + counted.unsqueeze(-1) * self.embed_value
        return x

    def forward(self, tokens, key_mask=None, values=None, attention="hard"):
        tokens = torch.as_tensor(tokens, device=self.embed_token.device)
        # (A cast to int64 would truncate an id of 1.7 to 1 without a word.)
        if tokens.is_floating_point() or tokens.is_complex():
            if tokens.is_complex() or bool((tokens != tokens.round()).any()):
                raise RaspcError("tokens must be integer token ids (model.encode gives them)")
        tokens = tokens.to(torch.long)
        if tokens.dim() != 2:
            raise RaspcError(f"tokens must be [batch, seq] token ids (BOS first), not of shape {tuple(tokens.shape)}: one input is tokens[None]")
        if tokens.shape[1] == 0:
            raise RaspcError("tokens must hold at least the BOS position (model.encode gives it)")
        # An id outside the vocabulary would read another row (a negative one counts from the end).
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.embed_token.shape[0]):
            bad = int(tokens.min()) if int(tokens.min()) < 0 else int(tokens.max())
            raise RaspcError(f"token id {bad} is outside the vocabulary's ids 0..{self.embed_token.shape[0] - 1} (model.token_ids, model.encode)")
        b, t = tokens.shape
        # Ids built by hand without BOS first (or with BOS among the inputs) run to a plausible
        # but meaningless readout (helper py24: a sort decoded [2, 2, 2]).
        if b and bool((tokens[:, 0] != self.bos_id).any()):
            i = int((tokens[:, 0] != self.bos_id).nonzero()[0, 0])
            raise RaspcError(f"tokens[{i}, 0] is {int(tokens[i, 0])}, not the BOS id {self.bos_id}: every input starts with BOS (model.encode adds it)")
        if key_mask is not None:
            key_mask = torch.as_tensor(key_mask, device=tokens.device)
            if tuple(key_mask.shape) != (b, t):
                raise RaspcError(f"key_mask must have the shape of tokens, {(b, t)}, not {tuple(key_mask.shape)}")
            # Every query sees BOS: a row of no visible keys has no attention to compute.
            if b and bool((key_mask[:, 0] == 0).any()):
                raise RaspcError("key_mask must be nonzero at BOS (position 0) of every input")
        # BOS past position 0 is padding, which key_mask must hide.
        late = tokens[:, 1:] == self.bos_id
        if key_mask is not None:
            late = late & (key_mask[:, 1:] != 0)
        if bool(late.any()):
            i, p = (int(x) for x in late.nonzero()[0])
            raise RaspcError(f"tokens[{i}, {p + 1}] is the BOS id {self.bos_id} at a position key_mask does not hide: BOS comes only first, and padding needs key_mask 0 (model.encode gives both)")
        if values is not None:
            values = torch.as_tensor(values, device=tokens.device)
        x = self.embed(tokens, values)
        vis = self.visible(key_mask, b, t, tokens.device)
        for layer in self.layers:
            delta = None
            for h in layer.heads:
                q, k, v = x @ h.w_q, x @ h.w_k, x @ h.w_v
                w = self.attention_weights(q @ k.transpose(1, 2), vis, attention)
                out = (w @ v) @ h.w_o
                delta = out if delta is None else delta + out
            if delta is not None:
                x = x + delta
            m = layer.mlp
            if m is not None:
                hid = torch.relu(x @ m.w_in + m.b_in)
                if m.gated:
                    hid = hid * (x @ m.w_gate + m.b_gate)
                x = x + hid @ m.w_out + m.b_out
        return x @ self.readout

    @torch.no_grad()
    def run(self, inputs, attention="hard", *, batch=None):
        """Pads ``inputs`` into one batch (key mask on the padding), runs it and decodes each
        input as ``raspc run`` does (``batch`` as for ``Model.run``)."""
        from . import _batch

        batch, single = _batch(inputs, self._model.vocab, False, batch)
        tokens, mask, values, lengths = self._model.encode(batch)
        r = self.forward(torch.from_numpy(tokens), torch.from_numpy(mask), torch.from_numpy(values), attention=attention)
        r = r.detach().to("cpu", torch.float64).numpy()
        out = [self._model.decode(r[i, : n + 1]) for i, n in enumerate(lengths)]
        return out[0] if single else out
