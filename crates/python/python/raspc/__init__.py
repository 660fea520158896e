"""raspc for Python: compile RASP programs to transformer weights, run and verify them, and load
them in PyTorch, TransformerLens and ONNX Runtime.

    >>> import raspc
    >>> m = raspc.compile("reverse = aggregate(select(indices, length - indices - 1, ==), tokens);",
    ...                   vocab="abc", max_len=8)
    >>> m.run(["abc", "ba"])
    [['c', 'b', 'a'], ['a', 'b']]

Every failure is a :class:`RaspcError` whose message is raspc's diagnostic text.
"""

import copy as _copy
import json as _json
import math as _math
import os as _os
import types as _types

from . import _raspc
from ._raspc import RaspcError

try:  # tracebacks name it raspc.RaspcError, where users import it from
    RaspcError.__module__ = "raspc"
except (AttributeError, TypeError):
    pass

__all__ = ["compile", "compile_file", "eval", "load", "from_bytes", "universal", "simulate_head", "Model", "Universal", "HeadSimulation", "RaspcError"]
__version__ = _raspc.__version__


def _text(name, s):
    """``s`` when it is text raspc can read: a lone surrogate (``"\\udc80"``, as
    ``os.fsdecode`` makes of undecodable bytes) is refused naming the argument, where it gave
    UnicodeEncodeError or a JSON escape error the caller never wrote (helper p22)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RaspcError(f"{name} holds a lone surrogate, {s[e.start]!r}, at index {e.start}: not text raspc can read (UTF-8)") from None
    return s


def _atom(x):
    """A token as a JSON-able atom (numpy scalars become Python numbers)."""
    if isinstance(x, str):
        return _text("a token", x)
    if isinstance(x, (bool, int, float)) or x is None:
        return x
    if isinstance(x, (bytes, bytearray)):
        raise RaspcError(f"a token must be a string, number or bool, not {type(x).__name__} (decode it first: .decode())")
    item = getattr(x, "item", None)
    if item is not None:
        return item()
    raise RaspcError(f"a token must be a string, number or bool, not {type(x).__name__}")


def _json_batch(batch):
    """The batch as JSON for the native side; NaN and infinities (which JSON cannot hold) are
    refused naming the input and position, as ``encode`` does."""
    import math

    for i, seq in enumerate(batch):
        for p, x in enumerate(seq):
            if isinstance(x, float) and not math.isfinite(x):
                raise RaspcError(f"input {i}, position {p} is {x}: inputs must be finite numbers")
            # (JSON would carry it as a float: 2**70 read as the token 1.1805916207174113e+21.)
            if isinstance(x, int) and not isinstance(x, bool) and not -(2**63) <= x < 2**63:
                raise RaspcError(f"input {i}, position {p} is the integer {x}, which does not fit in 64 bits (raspc's integers are 64-bit)")
    return _json.dumps(batch)


def _seq(inp):
    """One input sequence as a list of atoms: a string is split into characters."""
    if isinstance(inp, str):
        return list(_text("an input", inp))
    if isinstance(inp, (bytes, bytearray)):
        raise RaspcError(f"an input is {type(inp).__name__}, not text: decode it first (.decode())")
    if isinstance(inp, (dict, set, frozenset)):
        # (A dict's keys or a set's order, which changes between processes: helper p22.)
        raise RaspcError(f"an input must be a string or a sequence of tokens, not a {type(inp).__name__}")
    tolist = getattr(inp, "tolist", None)
    if tolist is not None:
        inp = tolist()
    try:
        return [_atom(x) for x in inp]
    except TypeError:
        raise RaspcError(f"an input must be a string or a sequence of tokens, not {type(inp).__name__}") from None


def _batch(inputs, vocab=(), real=False, batch=None):
    """(list of sequences, whether a single sequence was given). A list of strings that are all
    tokens of ``vocab`` is one sequence (``["the", "cat"]``, ``list("abc")``); other strings in
    a list are inputs of a batch, each split into characters. ``real``: the model reads
    numbers, and a string anywhere is refused as one (helper p22: ``["0.5"]`` was split into
    characters and ``"0"`` reported)."""
    if real:
        flat = [inputs] if isinstance(inputs, str) else [y for x in (inputs if isinstance(inputs, (list, tuple)) else []) for y in (x if isinstance(x, (list, tuple)) else [x])]
        text = next((x for x in flat if isinstance(x, str)), None)
        if text is not None:
            raise RaspcError(f"this model reads numbers, not text: give them as numbers ([0.5, -1.0]), not strings ({text!r})")
    if isinstance(inputs, (bytes, bytearray)):
        raise RaspcError(f"inputs are {type(inputs).__name__}, not text: decode them first (inputs.decode())")
    if batch is False:
        return [_seq(inputs)], True
    if isinstance(inputs, str) and batch is None:
        return [_seq(inputs)], True
    if isinstance(inputs, (dict, set, frozenset)):
        raise RaspcError(f"inputs must be a string, a sequence of tokens or a batch of them, not a {type(inputs).__name__}")
    tolist = getattr(inputs, "tolist", None)
    if tolist is not None:
        inputs = tolist()
    try:
        inputs = list(inputs)
    except TypeError:
        raise RaspcError(f"inputs must be a string, a sequence of tokens or a batch of them, not {type(inputs).__name__}") from None
    # numpy scalars (``list(np.array([3, 1]))``) are the Python numbers they hold.
    inputs = [x.item() if getattr(x, "ndim", None) == 0 and hasattr(x, "item") else x for x in inputs]
    if batch is True:
        # Every element is an input, whatever it holds (helper py24: a batch of one-character
        # strings read as one input).
        return [_seq(x) for x in inputs], False
    if batch is not None:
        raise RaspcError(f"batch must be True, False or None, not {batch!r}")
    tokens = {t for t in vocab if isinstance(t, str)}
    atom = lambda x: not isinstance(x, (list, tuple)) and getattr(x, "tolist", None) is None
    # A list of atoms is one sequence: numbers and booleans, and strings that are tokens of the
    # vocabulary (``["the", "cat"]``, ``[1, "a"]``); a list holding other strings is a batch.
    if inputs and all(atom(x) and (not isinstance(x, str) or x in tokens) for x in inputs):
        return [_seq(inputs)], True
    # A list of atoms holding a word of a word vocabulary is one sequence too, whatever else it
    # holds (``["the", "dog"]``: "dog" is then reported as not a token, not "t" and "h").
    if inputs and all(atom(x) for x in inputs) and any(isinstance(x, str) and len(x) > 1 and x in tokens for x in inputs):
        return [_seq(inputs)], True
    return [_seq(x) for x in inputs], False


def _parts(batch, size=1024):
    """The batch in parts of ``size`` inputs, run one native call each: Ctrl-C (a kernel's stop
    button) takes effect between parts, not only after the whole batch (helper py24: 6-10 s
    late on 60,000 inputs)."""
    return [batch[i : i + size] for i in range(0, len(batch), size)]


def _needs(module, message):
    """A RaspcError with ``message`` when the optional package ``module`` is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise RaspcError(message)


def _np_bool_type():
    """numpy's bool scalar type (``np.True_``), or bool when numpy is missing."""
    try:
        import numpy

        return numpy.bool_
    except ImportError:
        return bool


def _count(name, x, minimum=0):
    """``x`` as a Python int (numpy integers too), or a RaspcError naming the argument."""
    import numbers

    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or int(x) < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise RaspcError(f"{name} must be {kind}, not {x!r}")
    return int(x)


def _attention(attention):
    if attention not in ("hard", "soft"):
        raise RaspcError(f'attention must be "hard" or "soft", not {attention!r}')
    return attention


class Model:
    """A compiled raspc checkpoint.

    Attributes: ``config`` (dict, the checkpoint's model config), ``layout`` (list of residual
    slots: ``{"label", "offset", "encoding"}``), ``output`` (the output spec) (these three are
    copies: editing them changes nothing), ``weights`` (read-only mapping
    tensor name -> numpy float32 array), ``dim_names`` (a name per residual dim),
    ``vocab`` (the input tokens, BOS excluded), ``summary`` (size figures).
    """

    def __init__(self, native, summary=None):
        self._native = native
        self._config = _json.loads(native.config_json())
        self._layout = _json.loads(native.layout_json())["sops"]
        self._output = _json.loads(native.output_json())
        self.summary = summary or native.summary()
        self._weights = None

    # ---- description -------------------------------------------------------------------
    # The checkpoint's metadata, as copies: editing one changes nothing the model computes (a
    # model is immutable; compile or load another to change it).
    @property
    def config(self):
        """The checkpoint's ``config`` (a copy)."""
        return _copy.deepcopy(self._config)

    @property
    def layout(self):
        """The residual layout: one entry per s-op slot (a copy)."""
        return _copy.deepcopy(self._layout)

    @property
    def output(self):
        """The output s-op: label, encoding, tolerance (a copy)."""
        return _copy.deepcopy(self._output)

    @property
    def vocab(self):
        """The tokens the model accepts, in id order (BOS excluded; empty for a real-valued model)."""
        bos = self._config["bos_id"]
        return [v["token"] for v in self._config["vocab"] if v["id"] != bos]

    @property
    def token_ids(self):
        """Token (as JSON text) -> id, BOS excluded."""
        bos = self._config["bos_id"]
        return {_json.dumps(v["token"]): v["id"] for v in self._config["vocab"] if v["id"] != bos}

    @property
    def is_real(self):
        """True when the model reads real numbers rather than vocabulary tokens."""
        return self._config.get("real_input") is not None

    @property
    def causal(self):
        """True when attention is masked to earlier positions (the program on each prefix)."""
        return bool(self._config["causal"])

    @property
    def max_len(self):
        """The longest input the model accepts (BOS not counted)."""
        return self._config["max_seq_len"]

    @property
    def tolerance(self):
        """Numerical outputs: the certified bound on |model - program| (0 for categorical)."""
        return self._output.get("tolerance", 0.0)

    @property
    def dim_names(self):
        """A name for every residual dim: `label=value` for a categorical (or multi-hot) s-op's
        dims, `label (numeric)` for a numerical one, `dimI` for a dim no s-op lists."""
        names = [f"dim{i}" for i in range(self._config["d_model"])]
        for s in self._layout:
            enc = s["encoding"]
            if enc["kind"] in ("categorical", "multi_hot"):
                for i, v in enumerate(enc["values"]):
                    names[s["offset"] + i] = f"{s['label']}={v}"
            else:
                names[s["offset"]] = f"{s['label']} (numeric)"
        return names

    @property
    def weights(self):
        """Tensor name -> numpy float32 array, named as in the checkpoint; read-only, both the
        mapping and the arrays (the model computes with its own weights: to experiment, copy,
        ``{k: v.copy() for k, v in model.weights.items()}``)."""
        if self._weights is None:
            import numpy as np

            w = {}
            for name, shape, data in self._native.tensors():
                a = np.frombuffer(data, dtype="<f4").reshape(shape)
                a.setflags(write=False)
                w[name] = a
            self._weights = _types.MappingProxyType(w)
        return self._weights

    def __repr__(self):
        return f"<raspc.{type(self).__name__} {self._output['label']!r}: {self.summary}>"

    def _repr_html_(self):
        """What a notebook shows for a model: its input, output and size, and what each layer's
        heads and MLP compute (each as ``writes = op(reads)``, as ``raspc inspect`` lists them)."""
        import html

        esc = html.escape
        out = self._output
        enc = out["encoding"]
        if enc["kind"] in ("categorical", "multi_hot"):
            vals = [repr(v) for v in enc["values"]]
            shown = ", ".join(vals[:12]) + (f", … ({len(vals)} values)" if len(vals) > 12 else "")
            output = f"{enc['kind']} over {shown}"
        else:
            output = f"numerical, certified to ±{out.get('tolerance', 0.0):.3g}"
        if self.is_real:
            real = self._config["real_input"]
            inputs = f"real numbers in [{real.get('lo')}, {real.get('hi')}]" if isinstance(real, dict) else "real numbers"
        else:
            toks = [t if isinstance(t, str) else repr(t) for t in self.vocab]
            inputs = "vocab " + " ".join(toks[:24]) + (f" … ({len(toks)} tokens)" if len(toks) > 24 else "")
        rows = [
            ("output", f"{out['label']}: {output}"),
            ("input", f"{inputs}; up to {self.max_len} tokens{', causal' if self.causal else ''}"),
            ("size", self.summary),
        ]
        head = "".join(f"<tr><th style='text-align:left'>{esc(k)}</th><td style='text-align:left'>{esc(v)}</td></tr>" for k, v in rows)
        layers = []
        for i, layer in enumerate(self._config.get("layers", [])):
            heads = [h.get("what", "") for h in layer.get("head_info", [])]
            mlps = [m.get("what", "") for m in layer.get("mlp_info", [])]
            cell = lambda xs: "<br>".join(esc(x) for x in xs) or "—"  # noqa: E731
            layers.append(f"<tr><td>{i}</td><td style='text-align:left'>{cell(heads)}</td><td style='text-align:left'>{cell(mlps)}</td></tr>")
        body = ""
        if layers:
            body = "<details><summary>layers</summary><table><tr><th>layer</th><th>attention heads</th><th>MLP</th></tr>" + "".join(layers) + "</table></details>"
        return f"<div><b>raspc.{type(self).__name__}</b><table>{head}</table>{body}</div>"

    # ---- running -----------------------------------------------------------------------
    def run(self, inputs, attention="hard", *, batch=None):
        """Runs a batch of inputs (each a string, or a list of tokens / numbers; lengths may
        differ) and returns one decoded output list per input, exactly as ``raspc run`` does.
        A single input (a string or a flat list of tokens) returns a single output list.
        ``batch=True``: ``inputs`` is a batch, one output per element (``["a", "b"]`` is two
        inputs even where "a" and "b" are tokens); ``batch=False``: one input; ``None`` (the
        default): a list of strings that are all tokens is one input, other lists a batch."""
        batch, single = _batch(inputs, self.vocab, self._config.get("real_input") is not None, batch)
        if not batch:
            raise RaspcError("the batch is empty: give an input (a string or a list of tokens) or a list of inputs")
        attention = _attention(attention)
        out = [y for part in _parts(batch) for y in _json.loads(self._native.run(_json_batch(part), attention))]
        return out[0] if single else out

    def readout(self, inputs, attention="hard", *, batch=None):
        """The raw readout of each input: a numpy array ``[len + 1, readout_dims]``, BOS first
        (``batch`` as for :meth:`run`)."""
        import numpy as np

        batch, single = _batch(inputs, self.vocab, self._config.get("real_input") is not None, batch)
        if not batch:
            raise RaspcError("the batch is empty: give an input (a string or a list of tokens) or a list of inputs")
        attention = _attention(attention)
        out = [np.asarray(r, dtype=np.float64) for part in _parts(batch) for r in _json.loads(self._native.readout(_json_batch(part), attention))]
        return out[0] if single else out

    def decode(self, readout):
        """Decodes one readout ``[len + 1, readout_dims]`` (BOS first; any array-like) as
        ``raspc run`` does: categorical outputs by argmax, numerical ones snapped to the nearest
        known value within the output's tolerance."""
        import numpy as np

        r = np.asarray(readout, dtype=np.float64)
        dims = self._config["readout_dims"]
        if r.ndim != 2 or not 2 <= r.shape[0] <= self.max_len + 1 or r.shape[1] != dims:
            raise RaspcError(f"decode expects a [len + 1, {dims}] array (BOS first, len from 1 to max_len = {self.max_len}), got shape {r.shape}")
        if not np.isfinite(r).all():
            raise RaspcError("decode: the readout holds NaN or infinity, which decodes to no value")
        return _json.loads(self._native.decode(r.reshape(-1).tolist(), r.shape[0] - 1))

    def encode(self, inputs):
        """Pads a batch for the torch / TransformerLens / ONNX forms: ``(tokens, key_mask,
        values, lengths)`` as numpy arrays ``[batch, max_len_in_batch + 1]`` (BOS first; padding
        uses token id BOS with key_mask 0; values are 0 except real-valued inputs)."""
        import numpy as np

        batch, _ = _batch(inputs, self.vocab)
        if not batch:
            raise RaspcError("the batch is empty")
        lengths = [len(s) for s in batch]
        for i, s in enumerate(batch):
            if not s:
                raise RaspcError(f"input {i}: the input is empty; RASP programs need at least one token")
            if len(s) > self.max_len:
                raise RaspcError(f"input {i}: input has {len(s)} tokens but the model was compiled for at most {self.max_len} (max_len)")
        t = max(lengths) + 1
        bos = self._config["bos_id"]
        tokens = np.full((len(batch), t), bos, dtype=np.int64)
        mask = np.zeros((len(batch), t), dtype=np.float32)
        values = np.zeros((len(batch), t), dtype=np.float64)
        ids = self.token_ids
        real = self._config.get("real_input")
        # A real-valued model's one token besides BOS carries the numbers: its id is the
        # vocabulary's, not 1 (helper ck25: a checkpoint with BOS at id 1 read as all BOS).
        number_id = next((v["id"] for v in self._config["vocab"] if v["id"] != bos), None)
        for i, s in enumerate(batch):
            mask[i, : len(s) + 1] = 1
            for p, tok in enumerate(s):
                if real is not None:
                    lo, hi = real["lo"], real["hi"]
                    for b in real.get("blocks", []):
                        if b["start"] <= p < b["end"]:
                            lo, hi = b["lo"], b["hi"]
                    if isinstance(tok, bool) or not isinstance(tok, (int, float)) or not (lo <= tok <= hi):
                        raise RaspcError(f"input {i}: input at position {p} is {tok!r}; this model reads numbers in [{lo}, {hi}]")
                    tokens[i, p + 1] = number_id
                    values[i, p + 1] = tok
                else:
                    key = _json.dumps(tok)
                    if key not in ids:
                        hint = ""
                        if isinstance(tok, (int, float)) and not isinstance(tok, bool) and _json.dumps(str(tok)) in ids:
                            hint = f"; the vocabulary has the string {_json.dumps(str(tok))}: give the input as strings, or compile with a vocabulary of numbers"
                        # (In id order, the first 24: helper perf24 saw a 31 KB line at 4,096 tokens.)
                        listed = sorted(ids, key=ids.get)
                        shown = ", ".join(listed[:24]) + (f", ... ({len(listed)} tokens)" if len(listed) > 24 else "")
                        raise RaspcError(f"input {i}: input token {key} at position {p} is not in the model's vocabulary ({shown}){hint}")
                    tokens[i, p + 1] = ids[key]
        return tokens, mask, values, lengths

    def verify(self, samples=1000, seed=0, attention="both", exhaustive=False):
        """Compares the model with the reference interpreter on ``samples`` random inputs (as
        ``raspc verify``; every input once when there are no more than ``samples``). Returns a dict: ``ok`` (no mismatch and every input asked for was
        checked: ``raspc verify``'s exit status), ``asked``, ``checked``, ``failed``,
        ``per_mode`` (mismatches per attention mode), ``rejected`` (inputs the interpreter
        rejects, so not checked), ``rejections``, ``examples``. Needs the program: models from
        :func:`compile`, not from :func:`load`."""
        modes = ["hard", "soft"] if attention == "both" else [_attention(attention)]
        if not isinstance(exhaustive, (bool, _np_bool_type())):
            raise RaspcError(f"exhaustive must be True or False, not {exhaustive!r}")
        real = self._config.get("real_input") is not None
        if exhaustive and real:
            raise RaspcError("exhaustive=True enumerates token inputs; a real-valued model's inputs cannot be enumerated: give samples=N (random inputs within its bounds)")
        if real and modes == ["soft"]:
            raise RaspcError('a real-valued model\'s certified bound holds under hard attention only: verify it with attention="hard" (or "both", which checks hard attention and reports soft as not checked)')
        samples = _count("samples", samples, 0 if exhaustive else 1)
        if samples >= 2**64:
            raise RaspcError(f"samples must be below 2**64, not {samples} (and within the samples budget, which RASPC_LIMITS=samples=N sets)")
        seed = _count("seed", seed)
        if seed >= 2**64:
            raise RaspcError(f"seed must be below 2**64, not {seed}")
        result = _json.loads(self._native.verify(samples, seed, modes, bool(exhaustive)))
        if real:
            # As ``raspc verify`` says it: the bound holds under hard attention only.
            result["not_checked"] = ["soft"] if attention == "both" else []
        return result

    # ---- files and other frameworks ------------------------------------------------------
    def to_bytes(self):
        """The checkpoint file's bytes (safetensors)."""
        return self._native.to_bytes()

    def __reduce__(self):
        # pickle and copy.deepcopy: the checkpoint's bytes (the program, which only ``verify``
        # needs, is not kept).
        return (from_bytes, (self.to_bytes(),))

    def save(self, path, force=False):
        """Writes the checkpoint (a safetensors file; docs/checkpoint-format.md) as ``raspc
        compile -o`` does: through a temporary file renamed into place, and never over a file
        that is not a raspc checkpoint (a RaspcError says why); ``force=True`` also replaces a
        raspc checkpoint this raspc cannot read."""
        if not isinstance(path, (str, bytes, _os.PathLike)):
            raise RaspcError(f"save needs a file path (a str or a path-like object), not {path!r}")
        path = _os.fspath(path)
        self._native.save(path.decode() if isinstance(path, bytes) else path, bool(force))

    def to_onnx(self, path=None, attention=None):
        """The model as an ONNX graph (the same as ``raspc export --to onnx``): inputs
        ``tokens`` (int64 [batch, seq], BOS first), ``key_mask`` (float [batch, seq]) and, for
        real-valued models, ``values`` (float [batch, seq]); output ``readout``. Writes it to
        ``path`` when given (never over a file that is not an ONNX file raspc wrote) and returns
        None, as ``save`` does; without a path, returns the bytes. ``attention``: "soft" or
        "hard"; by default soft, or hard for a real-valued model (its certified bound holds for
        hard attention only)."""
        if attention is None:
            attention = "hard" if self.is_real else "soft"
        if path is not None and not isinstance(path, (str, bytes, _os.PathLike)):
            raise RaspcError(f"to_onnx needs a file path (a str or a path-like object) or None, not {path!r}")
        if path is not None:
            # Replaces only an ONNX file raspc wrote (as ``raspc export``), atomically.
            self._native.save_onnx(_os.fsdecode(path), _attention(attention))
            return None
        return self._native.to_onnx_bytes(_attention(attention))

    def plot_head(self, layer, head, circuit="qk", symlog=False, linthresh=None, all_dims=False):
        """A matplotlib Figure of head ``head`` of layer ``layer``: its QK circuit (``w_q w_kᵀ``,
        query dims by key dims) or OV circuit (``w_v w_o``, read dims by written dims), axes named
        in the residual basis, with a colorbar; ``symlog=True`` for a symmetric-log colour scale
        (``linthresh`` defaults to the smallest nonzero weight). All-zero rows and columns are left
        out unless ``all_dims`` (the title says how many). Needs matplotlib."""
        _needs("matplotlib", "plot_head needs matplotlib (pip install matplotlib)")
        layer, head = _count("layer", layer), _count("head", head)
        if linthresh is not None and not (isinstance(linthresh, (int, float)) and not isinstance(linthresh, bool) and _math.isfinite(linthresh) and linthresh > 0):
            raise RaspcError(f"linthresh must be a positive finite number, not {linthresh!r}")
        from ._plot import plot_head

        return plot_head(self, layer, head, circuit, symlog, linthresh, all_dims)

    def plot_mlp(self, layer, which="in", symlog=False, linthresh=None, all_dims=False):
        """A matplotlib Figure of the MLP of layer ``layer``: ``which`` is ``"in"`` (``w_in``),
        ``"gate"`` (``w_gate``, gated MLPs) or ``"out"`` (``w_out``); hidden units are named by the
        computation owning them (``mlp_info``). Every unit is shown (a wide MLP gives a wide
        figure). Needs matplotlib."""
        _needs("matplotlib", "plot_mlp needs matplotlib (pip install matplotlib)")
        layer = _count("layer", layer)
        if linthresh is not None and not (isinstance(linthresh, (int, float)) and not isinstance(linthresh, bool) and _math.isfinite(linthresh) and linthresh > 0):
            raise RaspcError(f"linthresh must be a positive finite number, not {linthresh!r}")
        from ._plot import plot_mlp

        return plot_mlp(self, layer, which, symlog, linthresh, all_dims)

    def to_torch(self, dtype=None):
        """A plain ``torch.nn.Module`` computing the readout (see :class:`raspc._torch.RaspcModule`)."""
        _needs("torch", "to_torch needs PyTorch (pip install torch)")
        from ._torch import RaspcModule

        return RaspcModule(self, dtype=dtype)

    def to_transformer_lens(self, device="cpu"):
        """A TransformerLens ``HookedTransformer`` with the same outputs (see
        :mod:`raspc._tl`)."""
        pin = "pip install torch transformer_lens==3.9.0 transformers==5.24.0, or the package's [transformer-lens] extra; plain `pip install transformer_lens` gets 4.x, which has no HookedTransformer"
        _needs("torch", f"to_transformer_lens needs PyTorch and TransformerLens ({pin})")
        _needs("transformer_lens", f"to_transformer_lens needs TransformerLens ({pin})")
        from ._tl import to_hooked_transformer

        return to_hooked_transformer(self, device=device)


class Universal(Model):
    """The universal simulator U for attention layers of a given shape (``raspc.universal``)."""

    def __init__(self, native, shape, bound, summary, split=None):
        super().__init__(native, summary)
        self.shape = shape
        self.bound = bound
        # The split layout's grid exponent e (``universal(..., split=True)``), or None.
        self.split = split

    def __reduce__(self):
        return (_universal_from_bytes, (self.to_bytes(), self.shape, self.bound, self.split))

    def encode_instance(self, x, a, v):
        """⟨T, X⟩, U's input sequence: X (n×d), A (h×d×d), V (h×d×dv), zero-padded. With one
        head, A (d×d) and V (d×dv) may be given without the head axis."""
        import numpy as np

        n, d, dv, h = self.shape
        x, a, v = _real_array("X", x), _real_array("A", a), _real_array("V", v)
        # Indices in messages are those of the arrays as given.
        given = {"X": x.ndim, "A": a.ndim, "V": v.ndim}
        if h == 1 and a.ndim == 2:
            a = a[None]
        if h == 1 and v.ndim == 2:
            v = v[None]

        def at(name, idx):
            return list(idx[len(idx) - given[name] :])
        if x.shape != (n, d) or a.shape != (h, d, d) or v.shape != (h, d, dv):
            one = f" (or A {d}x{d} and V {d}x{dv}: one head)" if h == 1 else ""
            raise RaspcError(f"U was built for X {n}x{d}, A {h}x{d}x{d}, V {h}x{d}x{dv}{one}; got {x.shape}, {a.shape}, {v.shape}")
        for name, m in (("X", x), ("A", a), ("V", v)):
            if not np.all(np.isfinite(m)):
                bad = tuple(int(i) for i in np.argwhere(~np.isfinite(m))[0])
                raise RaspcError(f"{name}{at(name, bad)} is {float(m[bad])!r}, not finite: entries must be finite numbers")
        # The bounds U was certified for, from its checkpoint (X's block, then A's and V's).
        real = self._config.get("real_input") or {}
        if self.split is not None:
            return self._encode_split(x, a, v, real, at)
        seq = 0
        for name, m in (("X", x), ("A", a), ("V", v)):
            lo, hi = real.get("lo", -_math.inf), real.get("hi", _math.inf)
            for b in real.get("blocks", []):
                if b["start"] <= seq < b["end"]:
                    lo, hi = b["lo"], b["hi"]
            out = np.argwhere((m < lo) | (m > hi))
            if len(out):
                bad = tuple(int(i) for i in out[0])
                raise RaspcError(f"{name}{at(name, bad)} is {float(m[bad])!r}, outside [{lo}, {hi}], the entries this U was built and certified for (raspc.universal(..., bound=, x_bound=))")
            seq += m.size
        return _raspc.universal_encode(x.tolist(), a.tolist(), v.tolist())

    def _encode_split(self, x, a, v, real, at):
        """The split layout [Xh; Xl; Ah; Al; V]: every position within its block's certified
        bounds (high parts on the grid, remainders within half a step), else the entry named."""
        import numpy as np

        seq = _raspc.universal_encode(x.tolist(), a.tolist(), v.tolist(), self.split)
        # Which entry each position of the input blocks holds.
        owners = []
        for part in ("high part", "remainder"):
            owners += [("X", idx, part) for idx in np.ndindex(x.shape)]
        for part in ("high part", "remainder"):
            owners += [("A", idx, part) for idx in np.ndindex(a.shape)]
        owners += [("V", idx, None) for idx in np.ndindex(v.shape)]
        arrays = {"X": x, "A": a, "V": v}
        for p, (name, idx, part) in enumerate(owners):
            lo, hi = real.get("lo", -_math.inf), real.get("hi", _math.inf)
            for b in real.get("blocks", []):
                if b["start"] <= p < b["end"]:
                    lo, hi = b["lo"], b["hi"]
            if not lo <= seq[p] <= hi:
                what = f" (its {part} {seq[p]!r} is outside [{lo}, {hi}])" if part else f", outside [{lo}, {hi}]"
                raise RaspcError(f"{name}{at(name, idx)} is {float(arrays[name][idx])!r}{what}: outside the entries this U was built and certified for (raspc.universal(..., bound=, x_bound=))")
        return seq

    def simulate(self, x, a, v, attention="hard"):
        """U(⟨T, X⟩): the output of the attention layer T (softmax(X A_t Xᵀ) X V_t per head), as
        an array ``[heads, n, dv]``. ``bound`` holds for hard attention (U's own, the default)."""
        import numpy as np

        _attention(attention)
        if attention != "hard":
            import warnings

            warnings.warn("U's certified bound holds for hard attention only; under soft attention its error is not bounded", stacklevel=2)
        n, d, dv, h = self.shape
        out = self.run([self.encode_instance(x, a, v)], attention=attention)[0]
        return np.asarray(out[: h * n * dv], dtype=float).reshape(h, n, dv)


def compile(source, vocab=None, max_len=None, causal=False, input_bounds=None, entry=None, *, path=None, mlp="relu", numerical=(), categorical=(), input_grid=None, pl_error=None):
    """Compiles RASP source text to a :class:`Model`.

    ``vocab``: the tokens the model accepts (a string of characters or a list of tokens);
    ``max_len``: the longest input; ``causal``: causal masking; ``input_bounds``: a real-valued
    program's input bounds (``(lo, hi)`` or the CLI's ``"lo,hi;lo,hi@start:end"`` string);
    ``entry``: the s-op to compile (default: ``prog`` or the last assigned); ``path``: the
    file the source came from (for ``load`` statements); ``mlp``: ``"relu"`` or ``"gated"``
    (real-valued programs); ``numerical`` / ``categorical``: labels whose encoding to force;
    ``input_grid``: instead of ``vocab``, the numbers lo, lo + step, .., hi as tokens
    (``(lo, hi, step)`` or the CLI's ``"lo,hi,step"``); ``pl_error``: a real-valued program's
    interpolation target (the CLI's ``--pl-error``)."""
    return _compile(source, vocab, max_len, causal, input_bounds, entry, path, mlp, numerical, categorical, input_grid, pl_error, 3)


def _compile(source, vocab, max_len, causal, input_bounds, entry, path, mlp, numerical, categorical, input_grid, pl_error, _stacklevel):
    """:func:`compile`, its warnings ``_stacklevel`` frames up (the user's line; helper py24: a
    private parameter of ``compile`` showed in its signature)."""
    if not isinstance(source, str):
        raise RaspcError("source must be the program's text (a string); use raspc.compile_file for a path")
    _text("source", source)
    if max_len is None:
        raise RaspcError("give max_len, the longest input the model must accept")
    max_len = _count("max_len", max_len, 1)
    if not isinstance(causal, bool):
        raise RaspcError(f"causal must be True or False, not {causal!r}")
    if entry is not None and not isinstance(entry, str):
        raise RaspcError(f"entry must be the name of an s-op (a string), not {entry!r}")
    if entry is not None:
        _text("entry", entry)
    if isinstance(vocab, str):
        _text("vocab", vocab)
    if path is not None and not isinstance(path, (str, bytes, _os.PathLike)):
        raise RaspcError(f"path must be a file path (a str or a path-like object), not {path!r}")
    if path is not None:
        path = _os.fsdecode(path)
    if mlp not in ("relu", "gated"):
        raise RaspcError(f'mlp must be "relu" or "gated", not {mlp!r}')
    if vocab is not None and not isinstance(vocab, str) and not hasattr(vocab, "__iter__"):
        raise RaspcError(f"vocab must be a string of one-character tokens or a list of tokens, not {vocab!r}")
    if isinstance(vocab, (set, frozenset, dict)):
        # Token ids follow the vocabulary's order: a set's order changes from one Python process
        # to the next (string hashing), and so would the checkpoint.
        raise RaspcError(f"vocab must be ordered (a string or a list): a {type(vocab).__name__}'s order changes between Python processes, and the token ids with it; pass sorted(vocab)")
    if isinstance(vocab, (bytes, bytearray)):
        raise RaspcError(f"vocab must be a string of one-character tokens or a list of tokens, not {type(vocab).__name__} (decode it first: vocab.decode())")
    if vocab is not None and not isinstance(vocab, str):
        # Once, as atoms (numpy scalars become Python numbers; a generator is read once).
        vocab = _seq(vocab)
        for t in vocab:
            if isinstance(t, float) and not _math.isfinite(t):
                raise RaspcError(f"vocab: every token must be a string or a finite number, not {t!r}")
            if isinstance(t, int) and not isinstance(t, bool) and not -(2**63) <= t < 2**63:
                raise RaspcError(f"vocab: integer tokens must fit in 64 bits (RASP's integers), not {t}")
    if input_grid is not None:
        if vocab is not None or input_bounds is not None:
            raise RaspcError("give one of vocab, input_grid and input_bounds")
        if not isinstance(input_grid, str):
            try:
                lo, hi, step = input_grid
                input_grid = f"{float(lo)!r},{float(hi)!r},{float(step)!r}"
            except (TypeError, ValueError):
                raise RaspcError(f'input_grid must be (lo, hi, step) or a string like "0,1,0.25", not {input_grid!r}') from None
    if pl_error is not None:
        try:
            pl_error = float(pl_error)
        except (TypeError, ValueError):
            raise RaspcError(f"pl_error must be a number, not {pl_error!r}") from None
    if max_len > 4096:
        raise RaspcError(f"max_len must be between 1 and 4096 (got {max_len})")
    if vocab is not None and input_bounds is not None:
        raise RaspcError("give vocab (token inputs) or input_bounds (real-valued inputs), not both")
    numerical, categorical = _labels("numerical", numerical), _labels("categorical", categorical)
    if input_bounds is not None and not isinstance(input_bounds, str):
        try:
            lo, hi = input_bounds
            input_bounds = f"{float(lo)!r},{float(hi)!r}"
        except (TypeError, ValueError):
            raise RaspcError(f"input_bounds must be (lo, hi) with two numbers or a string like \"-1,1\", not {input_bounds!r}") from None
    vocab_json = None
    if vocab is not None:
        vocab_json = _json.dumps(_seq(vocab))
    native, summary, said = _raspc.compile(
        source, vocab_json, max_len, bool(causal), input_bounds, entry, path, mlp, numerical, categorical, input_grid, pl_error
    )
    import warnings

    if mlp == "gated" and input_bounds is None:
        warnings.warn('mlp="gated" changes nothing here: it is for real-valued programs (input_bounds); a token program\'s MLPs are exact lookups either way', RuntimeWarning, stacklevel=_stacklevel)
    # What `raspc compile` prints besides the model: the program's notes (what the reference
    # interpreter would do differently), rejected sample inputs, an output of two types for one
    # number, a loose certified bound.
    for w in said:
        warnings.warn(w, RuntimeWarning, stacklevel=_stacklevel)
    return Model(native, summary)


def _restore_floats(v):
    """The native side's JSON for a non-finite float (``{"float": "inf"}``) as the float."""
    if isinstance(v, dict) and set(v) == {"float"}:
        return float(v["float"])
    if isinstance(v, list):
        return [_restore_floats(x) for x in v]
    return v


def eval(source, input, entry=None, *, path=None, causal=False):
    """The program's own output on one input, from raspc's reference interpreter (what
    ``raspc eval`` prints): a list of values, or for a selector a list of 0/1 rows (one per
    query). ``input``: a string (one token per character) or a sequence of tokens (strings,
    numbers, booleans; a numpy array too). ``entry``: the s-op or selector to evaluate (default
    ``prog``, else the last name assigned); ``path``: where ``load`` statements are relative to.
    ``causal=True``: what a model compiled with ``causal=True`` outputs, the program's value at
    each position i on the prefix ending at i (``raspc eval --causal``).
    The program's notes come as ``RuntimeWarning``; a failure raises ``RaspcError`` with the
    diagnostic and the input."""
    if not isinstance(source, str):
        raise RaspcError(f"eval: source must be the program's text (a str), not {type(source).__name__}; raspc.compile_file reads a file")
    if entry is not None and not isinstance(entry, str):
        raise RaspcError(f"eval: entry must be a name (a str), not {type(entry).__name__}")
    _text("eval: source", source)
    if entry is not None:
        _text("eval: entry", entry)
    seq = _seq(input)
    if not seq:
        raise RaspcError("eval: the input is empty (RASP programs need at least one token)")
    # (`_json_batch` checks the tokens as `run` does; its one input is the array inside.)
    out, said = _raspc.eval(source, _json_batch([seq])[1:-1], entry, None if path is None else str(path), bool(causal))
    import warnings

    for w in said:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return _restore_floats(_json.loads(out))


def _labels(name, labels):
    """A list of s-op labels (a single label given as a string is one label, not characters)."""
    if isinstance(labels, str):
        return [labels]
    try:
        out = list(labels)
    except TypeError:
        raise RaspcError(f"{name} must be a label or a list of labels, not {labels!r}") from None
    if not all(isinstance(x, str) for x in out):
        raise RaspcError(f"{name} must be a label or a list of labels (strings), not {labels!r}")
    return [_text(name, x) for x in out]


def compile_file(path, vocab=None, max_len=None, causal=False, input_bounds=None, entry=None, *, mlp="relu", numerical=(), categorical=(), input_grid=None, pl_error=None):
    """:func:`compile` on the program in ``path`` (a str, bytes or path-like object), with the
    same options (``load`` statements are relative to the file)."""
    if not isinstance(path, (str, bytes, _os.PathLike)):
        raise RaspcError(f"compile_file needs a file path (a str or a path-like object), not {path!r}")
    path = _os.fsdecode(path)
    # Read natively, as ``raspc compile`` reads a program: a regular file (a FIFO or a device
    # such as /dev/zero would block or never end) within the text_bytes budget.
    data = _raspc.read_program_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise RaspcError(f"`{path}` is not valid UTF-8 (first bad byte at line {line}, column {column}, byte offset {e.start})") from None
    # (Warnings point at the caller's line, not at this one: helper p22.)
    return _compile(text, vocab, max_len, causal, input_bounds, entry, path, mlp, numerical, categorical, input_grid, pl_error, 3)


def load(path):
    """Loads a checkpoint file (validated as ``raspc run`` does); ``path`` is a str or a
    path-like object."""
    if not isinstance(path, (str, bytes, _os.PathLike)):
        raise RaspcError(f"load needs a file path (a str or a path-like object), not {path!r}")
    # The native side checks the file (a regular file within the file_bytes budget: not a
    # device or a pipe) before it reads it.
    return Model(_raspc.load_file(_os.fsdecode(path)))


def from_bytes(data):
    """A model from a checkpoint file's bytes (``Model.to_bytes()``, or a file read by you),
    validated as :func:`load` does."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RaspcError(f"from_bytes needs the checkpoint's bytes, not {type(data).__name__}")
    return Model(_raspc.load_bytes(bytes(data)))


def _universal_from_bytes(data, shape, bound, split=None):
    m = from_bytes(data)
    return Universal(m._native, tuple(shape), bound, m.summary, split)


def _real_array(name, value):
    """``value`` as a float64 numpy array: numpy arrays of any real dtype, nested lists, and torch
    tensors as a model holds them (requiring grad, bfloat16, on another device)."""
    import numpy as np

    if hasattr(value, "detach") and hasattr(value, "cpu"):
        if getattr(value, "is_complex", lambda: False)():
            raise RaspcError(f"{name} holds complex numbers: T's entries are real")
        try:
            import torch

            value = value.detach().to("cpu", torch.float64).numpy()
        except Exception as e:  # a meta tensor has no data
            raise RaspcError(f"{name}: cannot read this tensor's values ({type(e).__name__}: {e})") from None
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise RaspcError(f"{name} must be an array of numbers ({e})") from None
    if arr.dtype.kind == "c":
        raise RaspcError(f"{name} holds complex numbers: T's entries are real")
    if arr.dtype.kind not in "biuf":
        raise RaspcError(f"{name} must be an array of numbers, not of {arr.dtype}")
    return arr.astype(float)


class HeadSimulation:
    """What :func:`simulate_head` measured: ``output`` (U's, ``[heads, n, dv]``), ``expected``
    (T(X) computed directly in float64), ``bound`` (the certified bound on |U - T|, f32
    evaluation), ``max_abs_err``, ``vacuous`` (the bound is at least max|T(X)|: it certifies
    nothing about these entries), ``bounds`` (the X, A and V bounds U was built for) and ``u``
    (the :class:`Universal` model)."""

    def __init__(self, output, expected, u, bounds):
        import numpy as np

        self.output, self.expected, self.u, self.bounds = output, expected, u, bounds
        self.bound = u.bound
        self.max_abs_err = float(np.abs(output - expected).max())
        self.vacuous = bool(self.bound >= float(np.abs(expected).max()))

    def __repr__(self):
        n, d, dv, h = self.u.shape
        note = ", vacuous" if self.vacuous else ""
        return f"<raspc.HeadSimulation n={n} d={d} dv={dv} heads={h}: max |U - T| {self.max_abs_err:.3e}, bound {self.bound:.3e}{note}>"


def simulate_head(x, a=None, v=None, *, w_q=None, w_k=None, w_v=None, scale=1.0, mlp="gated", split=False):
    """Simulates an attention layer as a model holds it: ``x`` (n×d), and either ``a`` and ``v``
    (d×d and d×dv, or [heads, d, ·]) or ``w_q``, ``w_k``, ``w_v`` (d×d_head, or [heads, d,
    d_head], TransformerLens's layout), with A = scale·W_Q W_Kᵀ (``scale``: e.g. 1/√d_head, which
    T itself does not apply). U is built for each block's own largest entry (X, A, V) and run;
    returns a :class:`HeadSimulation`. Biases, the output map and masks are not part of T.
    ``split=True``: U on the split input (:func:`universal`), a smaller f32 bound at large d."""
    import numpy as np

    scale = _number("scale", scale)
    if not _math.isfinite(scale):
        raise RaspcError(f"scale must be a finite number, not {scale!r}")
    xs = _real_array("X", x)
    if (a is None) == (w_q is None and w_k is None):
        raise RaspcError("give either a (with v) or w_q and w_k (with w_v)")
    if a is None:
        if w_q is None or w_k is None:
            raise RaspcError("w_q and w_k go together (A = scale·W_Q W_Kᵀ)")
        q, k = _real_array("W_Q", w_q), _real_array("W_K", w_k)
        if q.shape != k.shape or q.ndim not in (2, 3):
            raise RaspcError(f"W_Q {q.shape} and W_K {k.shape} must have one shape, [d, d_head] or [heads, d, d_head]")
        a = np.einsum("...ik,...jk->...ij", q, k) * scale
        if v is not None and w_v is not None:
            raise RaspcError("give v or w_v, not both")
        if v is None:
            v = w_v
    elif w_v is not None:
        raise RaspcError("give v or w_v, not both")
    else:
        a = _real_array("A", a) * scale
    if v is None:
        raise RaspcError("V (or w_v) is missing")
    vs = _real_array("V", v)
    a = a[None] if a.ndim == 2 else a
    vs = vs[None] if vs.ndim == 2 else vs
    if xs.ndim != 2 or a.ndim != 3 or vs.ndim != 3 or a.shape[0] != vs.shape[0] or a.shape[1:] != (xs.shape[1], xs.shape[1]) or vs.shape[1] != xs.shape[1]:
        raise RaspcError(f"X {xs.shape}, A {a.shape} and V {vs.shape} do not fit: X is n×d, A [heads, d, d], V [heads, d, dv]")
    n, d = xs.shape
    h, dv = a.shape[0], vs.shape[2]
    if min(n, d, dv, h) == 0:
        raise RaspcError(f"X {xs.shape}, A {a.shape} and V {vs.shape}: every dimension must be at least 1")
    # A NaN or infinity is named by its index (here, before it becomes a bound).
    for name, m in (("X", xs), ("A", a if a.shape[0] > 1 else a[0]), ("V", vs if vs.shape[0] > 1 else vs[0])):
        bad = np.argwhere(~np.isfinite(m))
        if len(bad):
            idx = ", ".join(str(int(i)) for i in bad[0])
            raise RaspcError(f"{name}[{idx}] is {m[tuple(bad[0])]}: T's entries must be finite numbers" + (" (A = scale·W_Q W_Kᵀ)" if name == "A" and w_q is not None else ""))
    # Each block's largest entry (U charges the entries' rounding to f32), and no less than a
    # tiny positive bound.
    top = lambda m: max(float(np.abs(m).max()), 1e-6)
    bounds = {"x": top(xs), "a": top(a), "v": top(vs)}
    u = universal(n, d, dv, h, mlp=mlp, bound=bounds["a"], x_bound=bounds["x"], v_bound=bounds["v"], split=split)
    output = u.simulate(xs, a, vs)
    expected = []
    for t in range(h):
        s = xs @ a[t] @ xs.T
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        expected.append(p @ xs @ vs[t])
    return HeadSimulation(output, np.array(expected), u, bounds)


def _number(name, x):
    """``x`` as a float: Python and numpy numbers (not strings, which ``float`` would parse)."""
    if isinstance(x, (str, bytes)) or isinstance(x, bool):
        raise RaspcError(f"{name} must be a number, not {x!r}")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise RaspcError(f"{name} must be a number, not {x!r}") from None


def universal(n, d, dv, heads=1, mlp="gated", bound=1.0, x_bound=None, v_bound=None, *, split=False):
    """Builds the universal simulator U (docs/universal-simulator.md) for attention layers T with
    ``heads`` heads over X of n×d, values of width dv, entries of A in [-bound, bound], of X in
    [-x_bound, x_bound] and of V in [-v_bound, v_bound] (both default to ``bound``).
    ``u.simulate(x, a, v)`` runs it; ``u.bound`` is the certified bound on |U(⟨T,X⟩) - T(X)|
    (f32). ``split=True``: U on the split input (X and A as a coarse high part plus the
    remainder, the scores' high part exact: a much smaller f32 bound at large d, for 7 layers
    and about 1.7x the positions; the CLI's ``simulate --split``). :func:`simulate_head` builds
    U for a given layer's own entries."""
    n, d, dv, heads = (_count(name, v, 1) for name, v in (("n", n), ("d", d), ("dv", dv), ("heads", heads)))
    if max(n, d, dv, heads) > 4096:
        raise RaspcError(f"n, d, dv and heads must be at most 4096 (got {n}, {d}, {dv}, {heads})")
    if not isinstance(mlp, str):
        raise RaspcError(f'mlp must be "gated" or "relu", not {mlp!r}')
    bound = _number("bound", bound)
    x_bound = None if x_bound is None else _number("x_bound", x_bound)
    v_bound = None if v_bound is None else _number("v_bound", v_bound)
    for name, x in (("bound", bound), ("x_bound", x_bound), ("v_bound", v_bound)):
        if x is not None and not (_math.isfinite(x) and x > 0):
            raise RaspcError(f"{name} must be a positive finite number, not {x!r}")
    if not isinstance(split, bool):
        raise RaspcError(f"split must be True or False, not {split!r}")
    if split and mlp != "gated":
        raise RaspcError('split=True needs mlp="gated": the split input\'s exact scores come from exact products, which ReLU MLPs interpolate')
    native, b, summary, e = _raspc.universal(n, d, dv, heads, mlp, bound, x_bound, v_bound, split)
    return Universal(native, (n, d, dv, heads), b, summary, e)
