"""Times Tracr's jitted JAX forward pass and raspc's forward pass on Tracr's library programs, in one run.

Usage (normally through tests/bench/tracr_compare.sh, which builds the venv and the bench):
    python tracr_compare.py --raspc-bench PATH [--max-len N]... [--program NAME]... [--write DOC]

For every program of Tracr's library (the ones in tests/corpus/tracr) and max-len (16 and 64 by
default): Tracr compiles its own version of the program (tracr.compiler.lib) in a subprocess (a
timeout stops a compile that does not finish), its forward pass (`assembled.forward`, returning
the unembedded output) is jitted and timed at batch 1 and 64 on random full-length inputs (BOS +
max-len tokens); right after, raspc's forward bench (tests/benches/forward.rs) times raspc on the
same program, length and batch sizes. Every figure is the median over 21 samples of the time per
call (a sample times as many calls as fill about 2 ms), after warm-up calls (JIT compile
included): wall-clock, and in parentheses CPU time (Tracr: the whole process, all of XLA's
threads; raspc: its forward on one thread). Prints a markdown table (ratio = Tracr time / raspc
time) and, with --write, puts it into the given markdown file between the `tracr-compare`
markers.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

PROGRAMS = [
    "length", "reverse", "histogram", "sort_unique", "sort", "sort_freq", "frac_prevs", "pair_balance",
    "dyck1", "dyck2", "shift_by", "detect_pattern", "count_less_freq", "count", "nary_sequencemap",
]


def tracr_program(name, n):
    """Tracr's version of a corpus program: (RASP program, vocabulary)."""
    from tracr.compiler import lib
    from tracr.rasp import rasp

    abc = {"a", "b", "c"}
    if name == "length":
        return lib.make_length(), abc
    if name == "reverse":
        return lib.make_reverse(rasp.tokens), abc
    if name == "histogram":
        return lib.make_hist(), abc
    if name == "sort_unique":
        return lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4}
    if name == "sort":
        return lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=n, min_key=1), {1, 2, 3, 4}
    if name == "sort_freq":
        return lib.make_sort_freq(max_seq_len=n), abc
    if name == "frac_prevs":
        return lib.make_frac_prevs(rasp.tokens == "x"), {"x", "y", "z"}
    if name == "pair_balance":
        return lib.make_pair_balance(rasp.tokens, "(", ")"), {"(", ")", "x"}
    if name == "dyck1":
        return lib.make_shuffle_dyck(["()"]), {"(", ")", "x"}
    if name == "dyck2":
        return lib.make_shuffle_dyck(["()", "{}"]), {"(", ")", "{", "}"}
    if name == "shift_by":
        return lib.shift_by(2, rasp.tokens), abc
    if name == "detect_pattern":
        return lib.detect_pattern(rasp.tokens, "abc"), abc
    if name == "count_less_freq":
        return lib.make_count_less_freq(2), abc
    if name == "count":
        return lib.make_count(rasp.tokens, "a"), abc
    if name == "nary_sequencemap":
        twice = rasp.Map(lambda x: 2 * x, rasp.tokens)
        return lib.make_nary_sequencemap(lambda x, y, z: x + y - z, rasp.tokens, rasp.indices, twice), {1, 2, 3}
    raise ValueError(name)


def per_call_ms(f):
    """Median ms per call of f, as the Rust bench measures: (wall-clock, CPU time of the process)."""
    t = time.perf_counter()
    for _ in range(3):
        f()
    once = max((time.perf_counter() - t) / 3, 1e-7)
    reps = min(max(int(2e-3 / once + 0.999), 1), 10_000)
    wall, cpu = [], []
    for _ in range(21):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(reps):
            f()
        wall.append((time.perf_counter() - t) * 1e3 / reps)
        cpu.append((time.process_time() - c) * 1e3 / reps)
    return statistics.median(wall), statistics.median(cpu)


def tracr_worker(name, n, batches):
    """Compiles and times one program in this process; prints one JSON object."""
    import jax
    import numpy as np
    from tracr.compiler import compiling

    program, vocab = tracr_program(name, n)
    t = time.perf_counter()
    model = compiling.compile_rasp_to_model(program, vocab=vocab, max_seq_len=n, compiler_bos="BOS")
    compile_s = time.perf_counter() - t
    params = sum(int(np.size(w)) for m in model.params.values() for w in m.values())
    nonzero = sum(int(np.count_nonzero(np.asarray(w))) for m in model.params.values() for w in m.values())
    fwd = jax.jit(lambda p, x: model.forward(p, x).unembedded_output)
    rng = random.Random(7)
    vocab = sorted(vocab, key=str)
    out = {"program": name, "max_len": n, "compile_s": compile_s, "d_model": len(model.residual_labels),
           "layers": model.model_config.num_layers, "params": params, "nonzero": nonzero, "ms": {}, "cpu_ms": {}}
    for b in batches:
        seqs = [model.input_encoder.encode(["BOS"] + [rng.choice(vocab) for _ in range(n)]) for _ in range(b)]
        x = jax.numpy.array(seqs)
        out["ms"][str(b)], out["cpu_ms"][str(b)] = per_call_ms(lambda: fwd(model.params, x).block_until_ready())
    print(json.dumps(out), flush=True)


def fmt(ms):
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.4f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raspc-bench", help="the compiled tests/benches/forward.rs executable")
    ap.add_argument("--max-len", type=int, action="append")
    ap.add_argument("--program", action="append")
    ap.add_argument("--batch", type=int, action="append")
    ap.add_argument("--timeout", type=int, default=900, help="seconds for one Tracr compile + timing")
    ap.add_argument("--write", help="markdown file to put the table into (between tracr-compare markers)")
    ap.add_argument("--worker", nargs=2, metavar=("PROGRAM", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    batches = a.batch or [1, 64]
    if a.worker:
        tracr_worker(a.worker[0], int(a.worker[1]), batches)
        return
    lens = a.max_len or [16, 64]
    names = a.program or PROGRAMS
    rows = []
    for n in lens:
        for name in names:
            cmd = [sys.executable, __file__, "--worker", name, str(n)] + sum((["--batch", str(b)] for b in batches), [])
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                tr = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr.strip().splitlines()[-1:]}
            except subprocess.TimeoutExpired:
                tr = {"error": f"no result within {a.timeout} s"}
            rcmd = [a.raspc_bench, "--json", "--program", name, "--max-len", str(n)] + sum((["--batch", str(b)] for b in batches), [])
            rs = [json.loads(l) for l in subprocess.run(rcmd, capture_output=True, text=True, check=True).stdout.splitlines() if l.startswith("{")]
            row = {"program": name, "max_len": n, "tracr": tr, "raspc": {str(r["batch"]): r for r in rs}}
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    head = "| program | max-len | Tracr d_model / params | raspc d_model / params | " + " | ".join(
        f"Tracr b={b} ms | raspc b={b} ms | ratio b={b}" for b in batches) + " |"
    lines = [head, "|" + "---|" * (4 + 3 * len(batches))]
    worst = {}
    for r in rows:
        tr, rs = r["tracr"], r["raspc"]
        any_r = next(iter(rs.values()))
        cells = [r["program"], str(r["max_len"]),
                 f"{tr['d_model']} / {tr['params']}" if "ms" in tr else "—",
                 f"{any_r['d_model']} / {any_r['params']}"]
        for b in batches:
            mine, mine_cpu = rs[str(b)]["fast_ms"], rs[str(b)]["fast_1t_cpu_ms"]
            if "ms" in tr:
                theirs, theirs_cpu = tr["ms"][str(b)], tr["cpu_ms"][str(b)]
                ratio, ratio_cpu = theirs / mine, theirs_cpu / mine_cpu
                w = worst.setdefault(b, [ratio, ratio_cpu])
                w[0], w[1] = min(w[0], ratio), min(w[1], ratio_cpu)
                cells += [f"{fmt(theirs)} ({fmt(theirs_cpu)})", f"{fmt(mine)} ({fmt(mine_cpu)})", f"{ratio:.1f}x ({ratio_cpu:.1f}x)"]
            else:
                cells += [f"Tracr failed: {tr['error']}", f"{fmt(mine)} ({fmt(mine_cpu)})", "—"]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    summary = "; ".join(f"smallest ratio at batch {b}: {w[0]:.1f}x wall-clock, {w[1]:.1f}x CPU time" for b, w in worst.items())
    print(table)
    print(summary)
    if a.write:
        text = open(a.write).read()
        start, end = "<!-- tracr-compare:start -->", "<!-- tracr-compare:end -->"
        i, j = text.find(start), text.find(end)
        if i < 0 or j < 0:
            sys.exit(f"markers not found in {a.write}")
        with open(a.write, "w") as f:
            f.write(text[:i] + start + "\n" + table + "\n" + summary + "\n" + text[j:])


if __name__ == "__main__":
    main()
