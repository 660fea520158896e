"""Checks the `raspc` Python package against `raspc run` (tests/tests/python.rs writes the job).

    python python_api.py JOB.json

For each case: the Python API compiles the program to the same weights as the Rust compiler,
`raspc.load` reads the Rust checkpoint, and `Model.run`, the torch module, the TransformerLens
HookedTransformer and ONNX Runtime reproduce the expected outputs (computed by the Rust runtime)
on one padded batch of mixed lengths, hard and soft attention (ONNX: the CLI's soft export and
`to_onnx(attention="hard")`). Then U built with `raspc.universal` simulates random attention
layers within its certified bound. Prints one line per case and finally
`python: C cases, K checks, F failures`; exits 1 on any failure.
"""

import json
import pickle
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnx
import onnxruntime as ort
import torch

import raspc

checks = 0
failures = []


def same(a, b, tol):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= tol
    return a == b


def check(name, what, got, want, tol):
    global checks
    checks += 1
    if not same(got, want, tol):
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not same(g, w, tol)][:2]
        failures.append(f"{name}: {what}: {len(bad)}+ outputs differ, e.g. {bad}")


def ort_run(model, path, inputs):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tokens, mask, values, lengths = model.encode(inputs)
    feed = {"tokens": tokens, "key_mask": mask}
    if model.is_real:
        feed["values"] = values.astype(np.float32)
    r = sess.run(["readout"], feed)[0].astype(np.float64)
    return [model.decode(r[i, : n + 1]) for i, n in enumerate(lengths)]


def main(job_path):
    job = json.load(open(job_path))
    t0 = time.time()
    for case in job["cases"]:
        name = case["name"]
        t = time.time()
        loaded = raspc.load(case["checkpoint"])
        if "universal" in case:
            model = raspc.universal(*case["universal"])
        else:
            model = raspc.compile_file(case["program"], vocab=case["vocab"], max_len=case["max_len"], causal=case["causal"], entry=case["entry"])
        # Same weights and config as the Rust compiler.
        global checks
        checks += 1
        if loaded.config != model.config or loaded.layout != model.layout or set(loaded.weights) != set(model.weights) or any(
            not np.array_equal(loaded.weights[k], model.weights[k]) for k in loaded.weights
        ):
            failures.append(f"{name}: Python-compiled weights differ from the Rust compiler's")
        tol = model.tolerance
        inputs, expected = case["inputs"], case["expected"]
        module = model.to_torch()
        hooked = model.to_transformer_lens()
        for mode in ("hard", "soft"):
            check(name, f"Model.run ({mode})", model.run(inputs, attention=mode), expected[mode], tol)
            check(name, f"raspc.load + run ({mode})", loaded.run(inputs, attention=mode), expected[mode], tol)
            check(name, f"torch ({mode}, padded batch)", module.run(inputs, attention=mode), expected[mode], tol)
            check(name, f"TransformerLens ({mode}, padded batch)", hooked.raspc_run(inputs, attention=mode), expected[mode], tol)
        # Unpadded, one input at a time, straight through the module's forward.
        tokens, mask, values, lengths = model.encode(inputs[:1])
        r = module(torch.from_numpy(tokens), values=torch.from_numpy(values)).double().numpy()
        check(name, "torch forward, no mask", [model.decode(r[0])], expected["hard"][:1], tol)
        onnx.checker.check_model(onnx.load(case["onnx_soft"]))
        # The ONNX file carries what building inputs and decoding need.
        meta = {p.key: p.value for p in onnx.load(case["onnx_soft"]).metadata_props}
        checks += 1
        cfg = model.config
        if (
            json.loads(meta.get("raspc_vocab", "null")) != cfg["vocab"]
            or json.loads(meta.get("raspc_output", "null")) != model.output
            or int(meta.get("raspc_max_seq_len", -1)) != cfg["max_seq_len"]
            or int(meta.get("raspc_bos_id", -1)) != cfg["bos_id"]
            or meta.get("raspc_causal") != str(cfg["causal"]).lower()
            or meta.get("raspc_attention") != "soft"
            or (cfg.get("real_input") is not None and json.loads(meta["raspc_real_input"]) != cfg["real_input"])
        ):
            failures.append(f"{name}: ONNX metadata_props {sorted(meta)} do not match the checkpoint's config and output")
        check(name, "ONNX Runtime (soft, raspc export)", ort_run(model, case["onnx_soft"], inputs), expected["soft"], tol)
        hard_path = str(case["onnx_soft"]).replace(".onnx", ".hard.onnx")
        model.to_onnx(hard_path, attention="hard")
        check(name, "ONNX Runtime (hard, to_onnx)", ort_run(model, hard_path, inputs), expected["hard"], tol)
        print(f"{name}: {len(inputs)} inputs (lengths {min(map(len, inputs))}..{max(map(len, inputs))}), {time.time() - t:.2f} s", flush=True)

    # U from Python simulates random T within its certified bound.
    for shape in [(2, 2, 2, 1), (3, 2, 2, 2)]:
        u = raspc.universal(*shape)
        n, d, dv, h = shape
        rng = np.random.default_rng(sum(shape))
        worst = 0.0
        for trial in range(10):
            x = rng.uniform(-1, 1, (n, d))
            a = rng.uniform(-1, 1, (h, d, d))
            v = rng.uniform(-1, 1, (h, d, dv))
            want = []
            for t in range(h):
                s = x @ a[t] @ x.T
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                want.append(p @ x @ v[t])
            got = u.simulate(x, a, v)
            err = float(np.abs(got - np.array(want)).max())
            worst = max(worst, err)
            if h == 1:
                # One head's A and V may be given without the head axis.
                checks += 1
                if not np.array_equal(u.simulate(x, a[0], v[0]), got):
                    failures.append(f"universal{shape}: 2-D A and V for one head give another output")
            checks += 1
            if not err <= u.bound:
                failures.append(f"universal{shape}: trial {trial}: error {err:.3e} exceeds the bound {u.bound:.3e}")
        print(f"universal{shape}: 10 trials, max |U - T| {worst:.3e}, bound {u.bound:.3e}", flush=True)

    # U on the split input: the same T(X) within its (smaller) bound, pickled with its layout,
    # and an entry past the bounds named as given.
    plain, split = raspc.universal(4, 6, 3, 1), raspc.universal(4, 6, 3, 1, split=True)
    checks += 2
    if not (split.split == -6 and plain.split is None and split.bound < 0.7 * plain.bound):
        failures.append(f"universal split: grid {split.split}, bound {split.bound:.3e} against {plain.bound:.3e}")
    rng = np.random.default_rng(11)
    x, a, v = rng.uniform(-1, 1, (4, 6)), rng.uniform(-1, 1, (6, 6)), rng.uniform(-1, 1, (6, 3))
    s = x @ a @ x.T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ x @ v
    got = split.simulate(x, a, v)[0]
    again = pickle.loads(pickle.dumps(split))
    if not (float(np.abs(got - want).max()) <= split.bound and again.split == split.split and np.array_equal(again.simulate(x, a, v)[0], got)):
        failures.append(f"universal split: error {float(np.abs(got - want).max()):.3e} (bound {split.bound:.3e}), or lost in a pickle")
    try:
        split.simulate(np.full((4, 6), 1.5), a, v)
        failures.append("universal split: X of 1.5 accepted by U built for [-1, 1]")
    except raspc.RaspcError as e:
        if "X[0, 0] is 1.5" not in str(e):
            failures.append(f"universal split: {e}")
    # simulate_head on the split input: the same T(X), bounded by the data's own entries.
    sim = raspc.simulate_head(x * 3.0, a, v, split=True)
    checks += 1
    if not (np.abs(sim.output[0] - sim.expected[0]).max() <= sim.bound and sim.bound < raspc.simulate_head(x * 3.0, a, v).bound):
        failures.append(f"simulate_head(split=True): |U - T| {np.abs(sim.output[0] - sim.expected[0]).max():.3e}, bound {sim.bound:.3e}")
    print(f"universal split (4, 6, 3): |U - T| {float(np.abs(got - want).max()):.3e}, bound {split.bound:.3e} (plain {plain.bound:.3e})", flush=True)

    # A head as a model holds it (torch tensors requiring grad, bfloat16, TransformerLens's
    # [heads, d, d_head] W_Q/W_K/W_V, a 1/sqrt(d_head) scale): simulate_head builds U for each
    # block's own largest entry, and its bound is tighter than one bound for all three blocks.
    g = torch.Generator().manual_seed(3)
    n, d, dh, h = 4, 4, 2, 2
    xt = torch.randn(n, d, generator=g) * 2.0
    wq = torch.nn.Parameter(torch.randn(h, d, dh, generator=g) * 0.3)
    wk = (torch.randn(h, d, dh, generator=g) * 0.3).to(torch.bfloat16)
    wv = torch.nn.Parameter(torch.randn(h, d, dh, generator=g) * 0.2)
    sim = raspc.simulate_head(xt, w_q=wq, w_k=wk, w_v=wv, scale=dh ** -0.5)
    xs, q, k, vv = (t.detach().to(torch.float64).numpy() for t in (xt, wq, wk, wv))
    want = []
    for t in range(h):
        s_ = (xs @ (q[t] @ k[t].T) * dh ** -0.5) @ xs.T
        p_ = np.exp(s_ - s_.max(axis=1, keepdims=True))
        p_ /= p_.sum(axis=1, keepdims=True)
        want.append(p_ @ xs @ vv[t])
    want = np.array(want)
    checks += 4
    if not np.allclose(sim.expected, want, rtol=1e-12, atol=1e-12):
        failures.append(f"simulate_head: expected {sim.expected[0][0]} vs {want[0][0]}")
    if not float(np.abs(sim.output - want).max()) <= sim.bound or sim.vacuous:
        failures.append(f"simulate_head: error {float(np.abs(sim.output - want).max()):.3e}, bound {sim.bound:.3e}, vacuous {sim.vacuous}")
    if sim.bounds["x"] != float(np.abs(xs).max()):
        failures.append(f"simulate_head: X bound {sim.bounds}")
    one = raspc.universal(n, d, dh, h, bound=max(sim.bounds.values()))
    if not sim.bound < one.bound:
        failures.append(f"simulate_head: per-block bound {sim.bound:.3e} not below one bound's {one.bound:.3e}")
    print(f"simulate_head: max |U - T| {sim.max_abs_err:.3e}, bound {sim.bound:.3e} (one bound for all blocks: {one.bound:.3e})", flush=True)

    # A real-valued program compiled from Python (gated MLPs): within its certified bound of the
    # interpreter (verify), and the torch / TransformerLens / ONNX forms agree with Model.run.
    real = raspc.compile("y = softmax_rows(tokens_float, 0, 2, 3, 1);", max_len=6, input_bounds=(-1, 1), mlp="gated")
    report = real.verify(samples=40, seed=3)
    checks += 1
    if report["checked"] != 40 or report["failed"] != 0 or not report["max_err"] <= real.tolerance:
        failures.append(f"real-valued verify: {report}")
    rng = np.random.default_rng(5)
    xs = [rng.uniform(-1, 1, 6).tolist() for _ in range(6)]
    want = real.run(xs)
    for what, got in (("torch", real.to_torch().run(xs)), ("TransformerLens", real.to_transformer_lens().raspc_run(xs))):
        checks += 1
        if not same(got, want, 1e-5):
            failures.append(f"real-valued {what}: {got[:1]} vs {want[:1]}")
    # Every dim of a categorical or multi-hot entry is named `label=value` (helper t22: the
    # `.unselected` helper, a set of key groups, was declared categorical; then only its first
    # dim would have been named had it been declared anything but a one-hot).
    checks += 1
    names = real.dim_names
    kinds = {e["encoding"]["kind"] for e in real.layout}
    misnamed = [(e["label"], i) for e in real.layout if e["encoding"]["kind"] != "numerical" for i, v in enumerate(e["encoding"]["values"]) if names[e["offset"] + i] != f"{e['label']}={v}"]
    if "multi_hot" not in kinds or misnamed:
        failures.append(f"real-valued layout: kinds {sorted(kinds)}, misnamed dims {misnamed[:3]}")
    path = str(job_path).replace("job.json", "real.onnx")
    real.to_onnx(path, attention="hard")
    check("real-valued", "ONNX Runtime (hard)", ort_run(real, path, xs), want, 1e-5)
    # What `values` holds at BOS (column 0) is not read by any of the three forms (helper b13:
    # a 1 there moved a 2x2 matmul's outputs by 2, its tolerance 7e-7: the product's heads read
    # the row of BOS).
    mm = raspc.compile("x = tokens_float;\nc = matmul(x, 0, x, 4, 2, 2, 2, 8);", max_len=12, input_bounds=(-1, 1), mlp="gated")
    tokens, mask, values, lengths = mm.encode([rng.uniform(-1, 1, 12).tolist() for _ in range(3)])
    dirty = values.copy()
    dirty[:, 0] = 1.0
    module = mm.to_torch(dtype="float64")
    hooked = mm.to_transformer_lens()
    mm_path = path.replace("real.onnx", "matmul.onnx")
    mm.to_onnx(mm_path, attention="hard")
    sess = ort.InferenceSession(mm_path, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for what, run in (
            ("torch module", lambda v: module(torch.from_numpy(tokens), torch.from_numpy(mask), torch.from_numpy(v)).numpy()),
            ("TransformerLens hooks", lambda v: hooked.run_with_hooks(torch.from_numpy(tokens), fwd_hooks=hooked.raspc_hooks(mask, v)).to(torch.float64).numpy()),
            ("ONNX graph", lambda v: sess.run(["readout"], {"tokens": tokens, "key_mask": mask, "values": v.astype(np.float32)})[0].astype(np.float64)),
        ):
            checks += 1
            clean, moved = run(values), run(dirty)
            if not np.array_equal(clean, moved):
                failures.append(f"real-valued {what}: a number at BOS moved the readout by {np.abs(clean - moved).max():.3e}")
    print(f"real-valued softmax_rows: max |model - program| {report['max_err']:.3e}, bound {real.tolerance:.3e}", flush=True)

    # Errors are exceptions carrying the diagnostic text.
    for what, call, needle in [
        ("syntax error", lambda: raspc.compile("x = select(tokens, tokens, ==", vocab="ab", max_len=3), "expected"),
        ("unknown token", lambda: model_sort.run(["z"]), "not in the model's vocabulary"),
        ("too long", lambda: model_sort.run(["a" * 99]), "at most"),
        ("bad attention", lambda: model_sort.run(["a"], attention="medium"), "hard"),
        ("verify without program", lambda: raspc.load(job["cases"][0]["checkpoint"]).verify(), "needs the program"),
        ("bad file", lambda: raspc.load(job_path), "safetensors"),
        ("bad shape", lambda: raspc.universal(0, 1, 1, 1), "positive"),
    ]:
        expect_error(f"errors: {what}", call, needle)
    # Plots: matplotlib figures of the true matrices, labelled, with a colorbar, PNG and SVG.
    import io

    from matplotlib.figure import Figure

    w = model_sort.weights
    for l, layer in enumerate(model_sort.config["layers"]):
        for h in range(len(layer["heads"])):
            for circuit, m in (("qk", w[f"layers.{l}.attn.{h}.w_q"].astype(float) @ w[f"layers.{l}.attn.{h}.w_k"].astype(float).T),
                               ("ov", w[f"layers.{l}.attn.{h}.w_v"].astype(float) @ w[f"layers.{l}.attn.{h}.w_o"].astype(float))):
                for symlog in (False, True):
                    fig = model_sort.plot_head(l, h, circuit, symlog=symlog)
                    checks += 1
                    names = model_sort.dim_names
                    rows = [names.index(r) for r in fig.raspc_rows]
                    cols = [names.index(c) for c in fig.raspc_cols]
                    shown = [t.get_text() for t in fig.axes[0].get_yticklabels()]
                    if not isinstance(fig, Figure) or len(fig.axes) != 2 or not np.allclose(fig.raspc_matrix, m[np.ix_(rows, cols)]) or shown != fig.raspc_rows:
                        failures.append(f"plot_head({l}, {h}, {circuit}, symlog={symlog}): wrong figure")
                    if np.count_nonzero(m) != np.count_nonzero(fig.raspc_matrix):
                        failures.append(f"plot_head({l}, {h}, {circuit}): nonzero weights left out")
        if layer["mlp"] is not None:
            fig = model_sort.plot_mlp(l, "in", symlog=True)
            checks += 1
            if fig.raspc_matrix.shape[1] != layer["mlp"]["hidden"]:
                failures.append(f"plot_mlp({l}): {fig.raspc_matrix.shape[1]} of {layer['mlp']['hidden']} units shown")
            # Its bias is the last row (a gate of its bias alone drew empty; helper e10).
            checks += 1
            b_in = model_sort.weights[f"layers.{l}.mlp.b_in"]
            if np.any(b_in) and (fig.raspc_rows[-1] != "bias" or not np.allclose(fig.raspc_matrix[-1], b_in)):
                failures.append(f"plot_mlp({l}): b_in is not the last row {fig.raspc_rows[-1:]}")
    for fmt, magic in (("svg", b"<svg"), ("png", b"\x89PNG")):
        buf = io.BytesIO()
        model_sort.plot_head(0, 0, "ov").savefig(buf, format=fmt)
        checks += 1
        if magic not in buf.getvalue()[:400]:
            failures.append(f"plot: savefig({fmt}) wrote no {fmt}")

    report = model_sort.verify(samples=100, seed=1)
    checks += 1
    if report["checked"] != 100 or report["failed"] != 0 or report["ok"] is not True or report["asked"] != 100:
        failures.append(f"verify: {report}")
    misuse()
    interpreter_and_notes(job)
    errors_as_data()
    notebook_and_stubs()
    real_model_with_bos_elsewhere()

    for f in failures[:20]:
        print("FAIL", f)
    print(f"checks took {time.time() - t0:.1f} s")
    print(f"python: {len(job['cases'])} cases, {checks} checks, {len(failures)} failures")
    return 1 if failures else 0


def expect_error(what, call, needle):
    """``call()`` must raise a RaspcError whose message contains ``needle``."""
    global checks
    checks += 1
    try:
        call()
        failures.append(f"{what}: no exception")
    except raspc.RaspcError as e:
        if needle not in str(e):
            failures.append(f"{what}: message {str(e)!r} lacks {needle!r}")
    except Exception as e:  # noqa: BLE001 - any other exception class is the failure
        failures.append(f"{what}: {type(e).__name__}: {e}")


def interpreter_and_notes(job):
    """``raspc.eval`` is the interpreter ``raspc eval`` runs (helper c13: there was none in
    Python); ``compile`` says what ``raspc compile`` says besides the model, as warnings."""
    import warnings

    global checks
    for case in job["cases"]:
        for inp, want in case.get("eval", []):
            checks += 1
            with open(case["program"]) as f:
                src = f.read()
            try:
                got = raspc.eval(src, inp, case["entry"], path=case["program"])
            except raspc.RaspcError as e:
                got = f"RaspcError: {e}"
            if got != want:
                failures.append(f"raspc.eval: {case['name']} on {inp}: {got} but raspc eval printed {want}")
    # A selector is rows of 0/1 (one per query; query q selects key k when key < query: "b"
    # selects "a", "c" selects "b" and "a", "a" nothing); a numpy array is an input as its list.
    checks += 1
    if raspc.eval("s = select(tokens, tokens, <);", "bca") != [[0, 0, 1], [1, 0, 1], [0, 0, 0]] or raspc.eval("y = tokens_int + 1;", np.array([3, 1])) != [4, 2]:
        failures.append("raspc.eval of a selector or a numpy input")
    expect_error("eval: a runtime error names the input", lambda: raspc.eval("y = tokens + 1;", "ab"), "input: ['a', 'b']")
    # causal=True: position i's value on the prefix ending at i (a global count differs).
    checks += 1
    src = 'd = selector_width(select(tokens, "a", ==)) - selector_width(select(tokens, "b", ==));'
    per_prefix = [raspc.eval(src, "aabbb"[: i + 1])[i] for i in range(5)]
    if raspc.eval(src, "aabbb", causal=True) != per_prefix or per_prefix == raspc.eval(src, "aabbb"):
        failures.append(f"raspc.eval(causal=True): {raspc.eval(src, 'aabbb', causal=True)} against {per_prefix}")
    expect_error("eval: an unknown entry", lambda: raspc.eval("y = tokens;", "ab", entry="nope"), "nope")
    # Errors end without blank lines (a traceback shows them as they are).
    checks += 1
    try:
        raspc.compile("x = select(tokens, tokens, ==", vocab="ab", max_len=3)
    except raspc.RaspcError as e:
        if str(e) != str(e).rstrip():
            failures.append(f"an error message ends with blank lines: {str(e)[-20:]!r}")
    # Notes and warnings of `raspc compile` reach Python.
    for what, call, needle in [
        ("two statements on one line", lambda: raspc.compile("x = tokens; y = x;", vocab="ab", max_len=3), "two statements on one line"),
        ("a number of two types", lambda: raspc.compile("y = aggregate(select(indices, indices, <=), tokens_int);", vocab=[1, 2], max_len=3), "one number as values of different types"),
        ("a note from eval", lambda: raspc.eval("x = tokens; y = x;", "ab"), "two statements on one line"),
        # The command line's flags become arguments whole (helper p22: `--bounds` read as
        # `--bound` + "s" gave "`raspc compile bounds`", `--encoding x=categorical` gave
        # "numerical/categorical x=categorical").
        ("the --bounds command named whole", lambda: raspc.compile("y = aggregate(select(indices, indices, <=), tokens_float) * 2;", input_bounds=(-1e-300, 1e-300), max_len=3), "`raspc compile --bounds` shows"),
    ]:
        checks += 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        if not any(needle in str(w.message) for w in caught):
            failures.append(f"warnings: {what}: none says {needle!r} ({[str(w.message)[:60] for w in caught]})")
    # compile_file's warnings point at the caller's line (helper p22: at raspc/__init__.py).
    import os
    import tempfile

    checks += 1
    with tempfile.TemporaryDirectory() as d:
        two = os.path.join(d, "two.rasp")
        with open(two, "w") as f:
            f.write("x = tokens; y = x;\n")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            raspc.compile_file(two, vocab="ab", max_len=3)
        if not caught or any(w.filename != __file__ for w in caught):
            failures.append(f"compile_file's warnings point at {[w.filename for w in caught]}, not at {__file__}")
    # Ctrl-C stops the work itself, not only the wait for it (helper c13: interrupted calls
    # went on in the background and piled up): the worker thread ends soon after.
    import _thread
    import os
    import threading

    checks += 1
    before = len(os.listdir(f"/proc/{os.getpid()}/task"))
    # (universal(64, 64, 64) takes seconds; its worker stops within about 0.1 s of the interrupt,
    # and ran on to the end before: 2 s tells the two apart with room on a slow machine.)
    threading.Timer(0.5, _thread.interrupt_main).start()
    try:
        raspc.universal(64, 64, 64)
        failures.append("Ctrl-C: universal(64, 64, 64) finished before the interrupt")
    except KeyboardInterrupt:
        deadline = time.time() + 2
        while len(os.listdir(f"/proc/{os.getpid()}/task")) > before and time.time() < deadline:
            time.sleep(0.01)
        if len(os.listdir(f"/proc/{os.getpid()}/task")) > before:
            failures.append("Ctrl-C: the interrupted universal's worker thread is still running 2 s later")
    # A float16 torch module warns that it rounds what raspc's tolerances assume.
    checks += 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raspc.compile("y = aggregate(select(indices, indices, <=), tokens_int);", vocab=[1, 2], max_len=3).to_torch(dtype=torch.float16)
    if not any("float16" in str(w.message) for w in caught):
        failures.append("to_torch(float16) gave no warning")


def misuse():
    """What a notebook user gets wrong: each is a RaspcError with the reason, nothing is lost."""
    import os
    import tempfile

    global checks
    rev = "reverse = aggregate(select(indices, length - indices - 1, ==), tokens);"
    words = raspc.compile(rev, vocab=["the", "cat", "sat"], max_len=4)
    m = raspc.compile(rev, vocab="abc", max_len=np.int64(4), categorical="reverse")
    runs = [
        (words.run(["the", "cat", "sat"]), ["sat", "cat", "the"]),
        (m.run(list("abc")), ["c", "b", "a"]),
        (m.run(["ab", "ba"]), [["b", "a"], ["a", "b"]]),
    ]
    # batch=True: every element is an input, even one-character strings that are tokens;
    # batch=False: one input (helper py24: zip(batch, model.run(batch)) paired the wrong items).
    runs += [
        (m.run(["a", "b", "c"], batch=True), [["a"], ["b"], ["c"]]),
        (m.run(["ab", "c"], batch=True), [["b", "a"], ["c"]]),
        (m.run(["a", "b", "c"], batch=False), ["c", "b", "a"]),
        (m.to_torch().run(["a", "b"], batch=True), [["a"], ["b"]]),
        ([r.shape for r in m.readout(["a", "bc"], batch=True)], [(2, m.config["readout_dims"]), (3, m.config["readout_dims"])]),
    ]
    for got, want in runs:
        checks += 1
        if got != want:
            failures.append(f"run: {got} instead of {want}")
    # A batch past one part (1,024 inputs per native call, for Ctrl-C) keeps its order.
    import random

    rng = random.Random(1)
    many = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 4))) for _ in range(2600)]
    checks += 1
    if m.run(many) != [list(reversed(x)) for x in many] or [r.shape[0] for r in m.readout(many)] != [len(x) + 1 for x in many]:
        failures.append("a batch of 2,600 inputs run in parts must keep its order")
    expect_error("bytes as inputs", lambda: m.run(b"abc"), "decode them first")
    expect_error("bytes in a batch", lambda: m.run([b"ab", "c"]), "decode it first")
    expect_error("bytes in a batch", lambda: m.run([b"ab", "c"], batch=True), "decode it first")
    expect_error("batch of another kind", lambda: m.run(["a"], batch=1), "batch must be True, False or None")
    checks += 1
    if not issubclass(raspc.RaspcError, ValueError):
        failures.append("RaspcError must be a ValueError")
    checks += 1
    if "_stacklevel" in str(__import__("inspect").signature(raspc.compile)) or "vocab" not in str(__import__("inspect").signature(raspc.compile_file)):
        failures.append(f"signatures: compile{__import__('inspect').signature(raspc.compile)}, compile_file{__import__('inspect').signature(raspc.compile_file)}")
    # Token ids without BOS first, or BOS where key_mask does not hide it, give a meaningless
    # readout: refused by the torch module and by TransformerLens's forward.
    mod = m.to_torch()
    bos = m.config["bos_id"]
    ids = [v for v in m.token_ids.values()]
    expect_error("torch forward without BOS", lambda: mod(torch.tensor([[ids[0], ids[1]]])), f"not the BOS id {bos}")
    expect_error("torch forward with BOS inside", lambda: mod(torch.tensor([[bos, ids[0], bos]])), "BOS comes only first")
    checks += 1
    padded = mod(torch.tensor([[bos, ids[0], bos]]), torch.tensor([[1, 1, 0]]))
    if tuple(padded.shape) != (1, 3, m.config["readout_dims"]):
        failures.append(f"a padded batch (BOS as padding, hidden) must run: {tuple(padded.shape)}")
    hooked = m.to_transformer_lens()
    expect_error("TransformerLens forward without BOS", lambda: hooked(torch.tensor([[ids[0], ids[1]]])), f"not the BOS id {bos}")
    mean = raspc.compile('m = aggregate(select(indices, indices, <=), tokens == "(");', vocab="()", max_len=8)
    r = mean.verify(samples=300)
    checks += 1
    if r["ok"] is not False or r["asked"] != 300 or r["checked"] + r["rejected"] != 300:
        failures.append(f"verify with rejected inputs must not be ok: {r}")
    real_double = raspc.compile("y = tokens_float * 2;", input_bounds=(-1, 1), max_len=4)
    # Inputs read the same way by run and encode (numpy scalars, words), in any thread, and a
    # model survives pickling.
    import concurrent.futures
    import copy
    import pickle

    srt = raspc.compile("sorted = sort(tokens_int, tokens_int);", vocab=[1, 2, 3, 4], max_len=6)
    words = raspc.compile("x = tokens;", vocab=["the", "cat"], max_len=3)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda s: m.run(s), ["ab", "cab", "b"]))
    same = {
        "numpy scalars": (srt.run(list(np.array([3, 1, 2]))), [1, 2, 3]),
        "a word vocabulary, encoded": (words.encode(["the", "cat"])[0].shape, (1, 3)),
        "a character input, encoded": (m.encode(list("abc"))[0].shape, (1, 4)),
        "runs in worker threads": (threaded, [["b", "a"], ["b", "a", "c"], ["b"]]),
        "pickled": (pickle.loads(pickle.dumps(m)).run("abc"), ["c", "b", "a"]),
        "deep-copied": (copy.deepcopy(m).run("ab"), ["b", "a"]),
        "to_onnx(path) returns None": (m.to_onnx(os.path.join(tempfile.gettempdir(), f"raspc-{os.getpid()}.onnx")), None),
    }
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raspc.compile("x = 1 / (tokens_int - 1);", vocab=[1, 2], max_len=4)
        raspc.compile(rev, vocab="ab", max_len=4)
    same["a warning for a program the interpreter rejects on samples (and none otherwise)"] = (
        [("rejects" in str(w.message) and "division by zero" in str(w.message), w.category.__name__) for w in caught],
        [(True, "RuntimeWarning")],
    )
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "lib.rasp"), "w") as f:
            f.write("def f(s) {\n    return aggregate(select(indices, length - indices - 1, ==), s);\n}\n")
        main_path = os.path.join(d, "main.rasp")
        with open(main_path, "w") as f:
            f.write('load "lib";\nout = f(tokens);\n')
        loaded = raspc.compile_file(main_path, vocab="abc", max_len=5)
        same["verify of a program with a loaded file"] = (loaded.verify(samples=50)["ok"], True)
        with open(os.path.join(d, "lib.rasp"), "w") as f:
            f.write("def f(s) {\n    return s;\n}\n")
        expect_error("verify after a loaded file changed", lambda: loaded.verify(samples=50), "changed since it was compiled")
    # A model's metadata are copies and its weights read-only: nothing a notebook edits changes
    # what one part of the model computes and not another.
    cfg = m.config
    cfg["bos_id"] = 99
    m.layout.clear()
    same["config and layout are copies"] = ((m.config["bos_id"] != 99, len(m.layout) > 0, m.run("ab")), (True, True, ["b", "a"]))
    try:
        m.weights["embed.token"] = np.zeros((1, 1), dtype=np.float32)
        same["weights cannot be replaced"] = ("assigned", "TypeError")
    except TypeError:
        same["weights cannot be replaced"] = ("TypeError", "TypeError")
    for what, (got, want) in same.items():
        checks += 1
        if got != want:
            failures.append(f"{what}: {got!r} instead of {want!r}")
    import pathlib

    other = tempfile.mkdtemp()
    fifo, latin1 = os.path.join(other, "pipe"), os.path.join(other, "latin1.rasp")
    os.mkfifo(fifo)
    with open(latin1, "wb") as f:
        f.write("y = tokens; # caf\u00e9\n".encode("latin-1"))
    main_rasp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "load", "main.rasp")
    with tempfile.TemporaryDirectory() as d:
        notes = os.path.join(d, "notes.txt")
        with open(notes, "w") as f:
            f.write("precious")
        refused = {
            "save over a text file": (lambda: m.save(notes), "not a raspc checkpoint"),
            "to_onnx over a text file": (lambda: m.to_onnx(notes), "not an ONNX file raspc wrote"),
            "samples over the budget": (lambda: m.verify(samples=10**12), "over the budget"),
            "negative seed": (lambda: m.verify(seed=-1), "seed must be"),
            "samples as a string": (lambda: m.verify(samples="10"), "samples must be"),
            "vocab with input_bounds": (lambda: raspc.compile(rev, vocab="ab", input_bounds=(0, 1), max_len=4), "not both"),
            "huge max_len": (lambda: raspc.compile(rev, vocab="abc", max_len=2**70), "max_len must be"),
            "verify without a program": (lambda: raspc.universal(2, 2, 2, 1).verify(), "verify needs the program"),
            "NaN in the vocabulary": (lambda: raspc.compile(rev, vocab=[float("nan"), 1.0], max_len=4), "finite number"),
            "causal as a string": (lambda: raspc.compile(rev, vocab="ab", max_len=4, causal="no"), "causal must be"),
            "a file descriptor for a path": (lambda: raspc.load(3), "file path"),
            "an input past max_len (named as the argument)": (lambda: m.run("abcab"), "(max_len)"),
            "NaN in an input": (lambda: real_double.run([0.5, float("nan")]), "position 1 is nan"),
            "entry as an int": (lambda: raspc.compile(rev, vocab="ab", max_len=4, entry=3), "entry must be the name of an s-op"),
            "mlp as None": (lambda: raspc.compile(rev, vocab="ab", max_len=4, mlp=None), "mlp must be"),
            "vocab as an int": (lambda: raspc.compile(rev, vocab=5, max_len=4), "vocab must be"),
            "input_bounds of strings": (lambda: raspc.compile("y = tokens_float;", input_bounds=("a", "b"), max_len=4), "input_bounds must be"),
            "save to an int": (lambda: m.save(5), "save needs a file path"),
            # Helper p22: a dict's keys were evaluated, a set in its process's order; any truthy
            # `exhaustive` ran exhaustively; samples past 64 bits raised OverflowError; digits
            # as numbers against a vocabulary of digit strings were refused without a reason.
            # Lone surrogates (os.fsdecode's undecodable bytes) are named, not a
            # UnicodeEncodeError or a JSON escape error (helper p22).
            "a lone surrogate in the source": (lambda: raspc.compile("y = tokens; # \udc80", vocab="ab", max_len=4), "source holds a lone surrogate"),
            "a lone surrogate in the vocabulary": (lambda: raspc.compile(rev, vocab="a\udc80", max_len=4), "vocab holds a lone surrogate"),
            "a lone surrogate in an input": (lambda: m.run(["a", "\udc80"]), "holds a lone surrogate"),
            "a lone surrogate in eval's input": (lambda: raspc.eval(rev, "a\udc80"), "an input holds a lone surrogate"),
            "a lone surrogate in a label": (lambda: raspc.compile(rev, vocab="ab", max_len=4, numerical=["x\udc80"]), "numerical holds a lone surrogate"),
            "a string for a real-valued model": (lambda: real_double.run(["0.5"]), "not strings ('0.5')"),
            "a dict as eval's input": (lambda: raspc.eval(rev, {"a": 1, "b": 2}), "not a dict"),
            "a set as eval's input": (lambda: raspc.eval(rev, {"a", "b"}), "not a set"),
            "exhaustive as a string": (lambda: m.verify(exhaustive="no"), "exhaustive must be True or False"),
            "samples past 64 bits": (lambda: m.verify(samples=2**64), "samples must be below 2**64"),
            "numbers against digit strings": (lambda: raspc.compile(rev, vocab="0123", max_len=4).run([0, 1, 2]), 'the vocabulary has the string "0"'),
            "a categorical encoding named as an argument": (lambda: raspc.compile("x = tokens_int + 0.00000001 * indices;", vocab=[1, 2], max_len=4), 'categorical=["x"]'),
            "an int as the inputs": (lambda: m.run(5), "not int"),
            "exhaustive on real inputs": (lambda: real_double.verify(exhaustive=True), "cannot be enumerated"),
            "a set as the vocabulary (unordered)": (lambda: raspc.compile(rev, vocab={"a", "b"}, max_len=4), "must be ordered"),
            "an empty batch": (lambda: m.run([]), "the batch is empty"),
            "an unknown word with a word vocabulary": (lambda: words.run(["the", "dog"]), '"dog" at position 1'),
            "an empty batch's readout": (lambda: m.readout([]), "the batch is empty"),
            "a NaN readout decoded": (lambda: m.decode(np.full((3, len(m.output["encoding"]["values"])), np.nan)), "NaN or infinity"),
            "a readout longer than max_len": (lambda: m.decode(np.zeros((50, len(m.output["encoding"]["values"])))), "len from 1 to max_len = 4"),
            "a negative bound for U (no x_bound named)": (lambda: raspc.universal(2, 2, 2, 1, bound=-1), "bound must be a positive finite number, not -1.0"),
            "NaN in U's X": (lambda: raspc.universal(2, 2, 2, 1).simulate([[float("nan"), 0], [0, 0]], [[[0, 0], [0, 0]]], [[[0, 0], [0, 0]]]), "not finite"),
            "an entry of A past U's bound (named as given, 2-D)": (lambda: raspc.universal(2, 2, 2, 1).simulate([[0, 0], [0, 0]], [[0.5, -7.0], [0, 0]], [[0, 0], [0, 0]]), "A[0, 1] is -7.0, outside [-1.0, 1.0]"),
            "an entry of X past x_bound": (lambda: raspc.universal(2, 2, 2, 1, x_bound=0.5).simulate([[0, 0], [0, 0.75]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]), "X[1, 1] is 0.75, outside [-0.5, 0.5]"),
            # Checked before reading: a device or a pipe would exhaust memory or hang.
            "a device loaded": (lambda: raspc.load("/dev/zero"), "is not a regular file"),
            "a pipe loaded": (lambda: raspc.load(fifo), "is not a regular file"),
            # compile_file reads as `raspc compile` does (it read /dev/zero until memory ran out
            # and waited on a pipe forever).
            "a device compiled": (lambda: raspc.compile_file("/dev/zero", vocab="ab", max_len=4), "not a regular file"),
            "a pipe compiled": (lambda: raspc.compile_file(fifo, vocab="ab", max_len=4), "not a regular file"),
            # The bound holds under hard attention only (it returned ok for soft, unchecked).
            "soft verify of a real-valued model": (lambda: real_double.verify(samples=5, attention="soft"), "hard attention only"),
            "an unknown device for TransformerLens": (lambda: m.to_transformer_lens(device="xyz"), "is not a torch device"),
            # The torch form: a dtype by name is read, a wrong one refused; 1-D tokens and ids
            # outside the vocabulary (a negative one read the last row) refused.
            "an int dtype for torch": (lambda: m.to_torch(dtype="int32"), "dtype must be a floating torch dtype"),
            "1-D tokens to the torch module": (lambda: m.to_torch()(np.array([0, 1, 2])), "must be [batch, seq]"),
            "a negative token id to the torch module": (lambda: m.to_torch()(np.array([[0, -1]])), "token id -1 is outside"),
            "verify of a copy": (lambda: copy.deepcopy(m).verify(samples=5), "copied or unpickled"),
            "a numpy NaN in the vocabulary": (lambda: raspc.compile(rev, vocab=[np.float32("nan"), 1.0], max_len=4), "finite number"),
            "an integer past 64 bits in the vocabulary": (lambda: raspc.compile(rev, vocab=[2**63, 1], max_len=4), "fit in 64 bits"),
            "bytes as the vocabulary": (lambda: raspc.compile(rev, vocab=b"ab", max_len=4), "not bytes"),
            "a file that is not UTF-8": (lambda: raspc.compile_file(latin1, vocab="ab", max_len=4), "line 1, column 18"),
            "None as a program file": (lambda: raspc.compile_file(None, vocab="ab", max_len=4), "file path"),
            "a path as the entry": (lambda: raspc.compile(rev, vocab="ab", max_len=4, entry=pathlib.Path("reverse")), "entry must be"),
            "a string bound for U": (lambda: raspc.universal(2, 2, 2, 1, bound="a"), "bound must be a number"),
            "a split U with ReLU MLPs": (lambda: raspc.universal(2, 2, 2, 1, mlp="relu", split=True), 'split=True needs mlp="gated"'),
            "a split flag that is not a bool": (lambda: raspc.universal(2, 2, 2, 1, split=1), "split must be True or False, not 1"),
            "complex entries for U": (lambda: raspc.universal(2, 2, 2, 1).simulate([[1j, 0], [0, 0]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]), "X holds complex numbers"),
            "strings for U": (lambda: raspc.universal(2, 2, 2, 1).simulate([["a", "b"], ["c", "d"]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]), "X must be an array of numbers"),
            "simulate_head without A or W_Q": (lambda: raspc.simulate_head([[0.5, 0], [0, 0.5]], v=[[1, 0], [0, 1]]), "give either a (with v) or w_q and w_k"),
            # Helper c10: each of these named a bound the caller never gave, raised a numpy or
            # Python error, was accepted silently, or read 2**70 as a float token.
            "a NaN in X for simulate_head": (lambda: raspc.simulate_head([[0.5, float("nan")], [0.1, 0.2]], np.eye(2), np.eye(2)), "X[0, 1] is nan"),
            "an infinity in V for simulate_head": (lambda: raspc.simulate_head(np.full((2, 2), 0.5), np.eye(2), [[-np.inf, 0], [0, 0]]), "V[0, 0] is -inf"),
            "a NaN scale for simulate_head": (lambda: raspc.simulate_head(np.full((2, 2), 0.5), np.eye(2), np.eye(2), scale=float("nan")), "scale must be a finite number"),
            "a string scale for simulate_head": (lambda: raspc.simulate_head(np.full((2, 2), 0.5), np.eye(2), np.eye(2), scale="2"), "scale must be a number"),
            "an empty X for simulate_head": (lambda: raspc.simulate_head(np.zeros((0, 2)), np.eye(2), np.eye(2)), "at least 1"),
            "a string bound given as a number": (lambda: raspc.universal(2, 2, 2, bound="1"), "bound must be a number"),
            "None as U's MLP kind": (lambda: raspc.universal(2, 2, 2, mlp=None), "mlp must be"),
            "a bad attention for U": (lambda: raspc.universal(2, 2, 2).simulate(np.full((2, 2), 0.5), np.eye(2), np.eye(2), attention="bad"), "attention must be"),
            "an integer past 64 bits as an input": (lambda: raspc.compile(rev, vocab=[float(2**70), 0.5], max_len=4).run([2**70]), "does not fit in 64 bits"),
            "a string layer for plot_head": (lambda: m.plot_head("0", 0), "layer must be"),
            "an int8 dtype is named": (lambda: m.to_torch(dtype="int8"), "not 'int8'"),
            "fractional token ids to the torch module": (lambda: m.to_torch()(np.array([[0, 1.7]])), "integer token ids"),
            "no positions to the torch module": (lambda: m.to_torch()(np.zeros((1, 0), dtype=np.int64)), "at least the BOS position"),
            "a key mask of another shape": (lambda: m.to_torch()(np.array([[0, 1]]), key_mask=np.ones((1, 3))), "key_mask must have the shape"),
            "a key mask hiding BOS": (lambda: m.to_torch()(np.array([[0, 1]]), key_mask=np.zeros((1, 2))), "nonzero at BOS"),
            "an int as the ONNX path": (lambda: m.to_onnx(3), "to_onnx needs a file path"),
            "a dict as the inputs": (lambda: m.run({1: 2}), "not a dict"),
            "inf as a program value": (lambda: raspc.compile("a = tokens_float * 10;", vocab=[1e308, 1.0], max_len=2), "compile::non_finite"),
            "a grid with HI off it": (lambda: raspc.compile("y = tokens_float;", input_grid=(0, 1, 0.3), max_len=2), "HI is not on the grid"),
            "pl_error on a token program": (lambda: raspc.compile(rev, vocab="ab", max_len=4, pl_error=0.01), "pl_error is for real-valued"),
        }
        for what, (call, says) in refused.items():
            expect_error(what, call, says)
        checks += 1
        if m.to_torch(dtype="float64").run(["ab"]) != [["b", "a"]]:
            failures.append("to_torch(dtype='float64') must run as torch.float64 does")
        both = real_double.verify(samples=5)
        checks += 1
        if both.get("not_checked") != ["soft"] or not both["ok"]:
            failures.append(f"a real-valued model's verify must say soft attention was not checked: {both}")
        # An ablation on a copy of the TransformerLens form runs the copy (the helpers were
        # closures over the original), and the original is untouched; torch.save round-trips.
        srt_tl = srt.to_transformer_lens()
        before = srt_tl.raspc_run([3, 1, 2])
        ablated = copy.deepcopy(srt_tl)
        with torch.no_grad():
            for l in range(ablated.cfg.n_layers):
                ablated.blocks[l].attn.W_O.zero_()
        path = os.path.join(other, "hooked.pt")
        torch.save(srt_tl, path)
        reloaded = torch.load(path, weights_only=False)
        tl = {
            "the original": (srt_tl.raspc_run([3, 1, 2]), [1, 2, 3]),
            "an ablated copy differs": (ablated.raspc_run([3, 1, 2]) != before, True),
            "the copy's cache is its own": (float(ablated.raspc_run_with_cache([3, 1, 2])[1]["blocks.0.hook_attn_out"].abs().max()), 0.0),
            "torch.save / torch.load": (reloaded.raspc_run([3, 1, 2]), [1, 2, 3]),
            "the weights on the device asked for": (str(srt_tl.W_E.device), "cpu"),
        }
        for what, (got, want) in tl.items():
            checks += 1
            if got != want:
                failures.append(f"TransformerLens {what}: {got!r} instead of {want!r}")
        # What those refusals leave working: a grid as typed, a bytes path with `load` inside,
        # a numpy vocabulary.
        grid = raspc.compile("y = tokens_float * 2;", input_grid="0,1,0.1", max_len=2)
        checks += 1
        if grid.run([0.3, 0.7]) != [0.6, 1.4] or 0.3 not in grid.vocab:
            failures.append(f"input_grid 0,1,0.1: vocab {grid.vocab}, run {grid.run([0.3, 0.7])}")
        loaded = raspc.compile_file(os.fsencode(main_rasp), vocab="0123", max_len=2)
        checks += 1
        if loaded.run("12") != raspc.compile_file(main_rasp, vocab="0123", max_len=2).run("12"):
            failures.append("compile_file with a bytes path differs from a str path")
        checks += 1
        if not repr(raspc.universal(2, 2, 2, 1)).startswith("<raspc.Universal "):
            failures.append(f"repr of U: {raspc.universal(2, 2, 2, 1)!r}")
        nv = raspc.compile("y = tokens_int + 1;", vocab=np.array([1, 2, 3], dtype=np.int8), max_len=2)
        checks += 1
        if nv.run([2, 3]) != [3, 4]:
            failures.append(f"numpy int8 vocabulary: {nv.run([2, 3])}")
        checks += 1
        if open(notes).read() != "precious":
            failures.append("a refused write changed the file")
        # Our own outputs are replaced.
        ck, ox = os.path.join(d, "m.safetensors"), os.path.join(d, "m.onnx")
        m.save(ck)
        m.save(ck)
        m.to_onnx(ox)
        m.to_onnx(ox)
        checks += 1
        if raspc.load(ck).run("abc") != ["c", "b", "a"] or sorted(os.listdir(d)) != ["m.onnx", "m.safetensors", "notes.txt"]:
            failures.append(f"save/to_onnx twice: {sorted(os.listdir(d))}")
    import shutil

    shutil.rmtree(other, ignore_errors=True)


def errors_as_data():
    """A RaspcError about a place in a program says where, as attributes (helper py24: only the
    message text had the line): ``code``, ``file``, ``line``, ``column`` and ``diagnostics``."""
    import os
    import tempfile

    global checks

    def caught(call):
        try:
            call()
        except raspc.RaspcError as e:
            return e
        return None

    # An undefined name on line 3, column 12 (1-based, in characters: "é" is one).
    src = "# é\nx = tokens;\ny = x + tokenz;\n"
    want_col = src.splitlines()[2].index("tokenz") + 1
    e = caught(lambda: raspc.compile(src, vocab="ab", max_len=4))
    checks += 1
    if e is None or (e.file, e.line, e.column) != ("<source>", 3, want_col) or not e.code or e.code not in str(e):
        failures.append(f"undefined name: {e and (e.code, e.file, e.line, e.column)}, want ('<source>', 3, {want_col})")
    elif not (isinstance(e.diagnostics, list) and e.diagnostics[0]["labels"][0]["line"] == 3 and e.diagnostics[0]["severity"] == "error"):
        failures.append(f"undefined name: diagnostics {e.diagnostics!r}")
    # A parse error in a file names the file; eval's errors too.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "broken.rasp")
        with open(path, "w") as f:
            f.write("x = tokens;\ny = select(x, x, ==;\n")
        e = caught(lambda: raspc.compile_file(path, vocab="ab", max_len=4))
        checks += 1
        if e is None or (e.file, e.line) != (path, 2) or not (e.code or "").startswith("parse"):
            failures.append(f"parse error in a file: {e and (e.code, e.file, e.line, e.column)}")
    e = caught(lambda: raspc.eval("y = tokens + ;", "ab"))
    checks += 1
    if e is None or (e.line, e.column) != (1, 14):
        failures.append(f"eval's parse error: {e and (e.code, e.line, e.column)}")
    # A compiler refusal points at the s-op it refuses.
    refused = "hist = selector_width(select(tokens, tokens, ==));\nfirst = aggregate(select(hist, 2, ==), tokens);\n"
    e = caught(lambda: raspc.compile(refused, vocab="ab", max_len=4, causal=True))
    checks += 1
    if e is None or not (e.code or "").startswith("compile::") or (e.line, e.column) != (2, 19):
        failures.append(f"compiler refusal: {e and (e.code, e.line, e.column, str(e)[:200])}")
    # An entry that is not an s-op points at its assignment: a function assigned, not called
    # (helper ed25: no place at all), in compile and eval alike.
    forgot = "def make_hist() {\n  return selector_width(select(tokens, tokens, ==));\n}\nhist = make_hist;\n"
    for what, call in [("compile", lambda: raspc.compile(forgot, vocab="ab", max_len=4)), ("eval", lambda: raspc.eval(forgot, "ab"))]:
        e = caught(call)
        checks += 1
        if e is None or (e.code, e.line, e.column) != ("eval::entry", 4, 1) or "make_hist();" not in str(e):
            failures.append(f"{what}: entry assigned a function: {e and (e.code, e.line, e.column, str(e)[:200])}")
    # Errors about no place have none (but the attributes exist).
    e = caught(lambda: raspc.compile("y = tokens;", vocab="ab", max_len=0))
    checks += 1
    if e is None or (e.code, e.file, e.line, e.column, e.diagnostics) != (None, None, None, None, None):
        failures.append(f"an error with no place: {e and (e.code, e.file, e.line, e.column, e.diagnostics)}")


def notebook_and_stubs():
    """``Model._repr_html_`` (what Jupyter shows) lists the output and each layer's computations;
    the type stubs (``raspc/__init__.pyi``) have the implementation's names, parameters and
    defaults (helper py24: there were neither)."""
    import ast
    import html
    import inspect
    import os

    global checks
    m = raspc.compile("n = selector_width(select(tokens, tokens, ==));\ny = n < 2;", vocab="ab<", max_len=5)
    page = m._repr_html_()
    whats = [x["what"] for layer in m.config["layers"] for x in layer.get("head_info", []) + layer.get("mlp_info", [])]
    checks += 1
    if "y: categorical over False, True" not in page or not all(html.escape(w) in page for w in whats) or page.count("<tr><td>") != len(m.config["layers"]):
        failures.append(f"_repr_html_: {page[:400]!r}")
    checks += 1
    if "<<" in page or "vocab a b &lt;" not in page:
        failures.append(f"_repr_html_ does not escape the vocabulary: {page[:400]!r}")

    stub = ast.parse(open(os.path.join(os.path.dirname(raspc.__file__), "__init__.pyi")).read())

    def params(args):
        """Each parameter's name, kind and whether it has a default."""
        pos = args.posonlyargs + args.args
        defaults = [False] * (len(pos) - len(args.defaults)) + [True] * len(args.defaults)
        out = [(a.arg, "positional", dflt) for a, dflt in zip(pos, defaults)]
        out += [(a.arg, "keyword", dflt is not None) for a, dflt in zip(args.kwonlyargs, args.kw_defaults)]
        return out

    def real(f):
        kinds = {inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional", inspect.Parameter.POSITIONAL_ONLY: "positional", inspect.Parameter.KEYWORD_ONLY: "keyword"}
        return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in inspect.signature(f).parameters.values()]

    stubbed = {}
    for node in stub.body:
        if isinstance(node, ast.FunctionDef):
            stubbed[node.name] = params(node.args)
        elif isinstance(node, ast.ClassDef):
            stubbed[node.name] = None
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                    stubbed[f"{node.name}.{item.name}"] = params(item.args)
    for name in raspc.__all__:
        obj = getattr(raspc, name)
        checks += 1
        if name not in stubbed:
            failures.append(f"stubs: {name} is missing")
            continue
        if inspect.isclass(obj):
            for meth, f in vars(obj).items():
                if callable(f) and not isinstance(f, property) and (not meth.startswith("_") or meth in ("__init__", "_repr_html_")):
                    checks += 1
                    if stubbed.get(f"{name}.{meth}") != real(f):
                        failures.append(f"stubs: {name}.{meth} is {stubbed.get(f'{name}.{meth}')}, the implementation {real(f)}")
        elif stubbed[name] != real(obj):
            failures.append(f"stubs: {name} is {stubbed[name]}, the implementation {real(obj)}")


def real_model_with_bos_elsewhere():
    """A real-valued checkpoint whose BOS is id 1 and number token id 0 (the format allows any
    ids): ``encode`` uses the file's ids, so torch, TransformerLens and ONNX Runtime agree with
    ``Model.run`` (helper ck25: ``encode`` wrote id 1, all BOS, and TransformerLens returned 0s)."""
    import hashlib
    import struct

    global checks
    m = raspc.compile("y = aggregate(select(indices, indices, <=), tokens_float);", input_bounds=(-1, 1), max_len=4)
    raw = m.to_bytes()
    meta = json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
    cfg = json.loads(meta["config"])
    bos = cfg["bos_id"]
    other = next(v["id"] for v in cfg["vocab"] if v["id"] != bos)
    # Swap the two ids: the entries' ids, bos_id, and the embedding's rows.
    for v in cfg["vocab"]:
        v["id"] = other if v["id"] == bos else bos
    cfg["bos_id"] = other
    cfg["vocab"].sort(key=lambda v: v["id"])
    tensors = {k: np.array(v) for k, v in m.weights.items()}
    emb = tensors["embed.token"]
    emb[[bos, other]] = emb[[other, bos]]
    meta = dict(meta, config=json.dumps(cfg))
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    data = b"".join(blobs)
    meta["tensor_sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
    # As docs/checkpoint-format.md says a tool that edits the metadata computes it.
    meta["metadata_sha256"] = "sha256:" + hashlib.sha256(b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in sorted(meta.items()) if k != "metadata_sha256")).hexdigest()
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    swapped = raspc.from_bytes(struct.pack("<Q", len(h)) + h + data)
    xs = [[0.5, -0.5, 0.25, 1.0], [-1.0, 0.75]]
    want = m.run(xs)
    tok, km, vals, _ = swapped.encode(xs)
    got = {
        "run": swapped.run(xs),
        "torch": swapped.to_torch().run(xs),
        "transformer_lens": swapped.to_transformer_lens().raspc_run(xs),
    }
    sess = ort.InferenceSession(swapped.to_onnx(attention="hard"))
    readout = sess.run(["readout"], {"tokens": tok, "key_mask": km, "values": vals.astype(np.float32)})[0]
    got["onnx"] = [swapped.decode(readout[i, : len(x) + 1]) for i, x in enumerate(xs)]
    checks += 1
    if (tok[0, 0], tok[0, 1]) != (other, bos):
        failures.append(f"real model, BOS id {other}: encode gave {tok[0].tolist()}")
    for what, out in got.items():
        checks += 1
        # Each is within the certified bound of the program's value, so of the other.
        if not same(out, want, 2 * m.tolerance):
            failures.append(f"real model, BOS id {other}: {what} {out} != {want}")


if __name__ == "__main__":
    model_sort = raspc.compile("reverse = aggregate(select(indices, length - indices - 1, ==), tokens);", vocab="abc", max_len=4)
    sys.exit(main(sys.argv[1]))
