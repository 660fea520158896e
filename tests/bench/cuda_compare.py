"""Compares `raspc simulate --target ... --json` objects of one T and X run on the GPU and on the
CPU (tests/bench/cuda_check.sh): prints one line per pair and exits 1 when a run failed, when
either is further from T(X) than its certified bound, or when the devices differ by more than the
two bounds together.

    python3 tests/bench/cuda_compare.py u_cuda_f64.json u_cpu_f64.json [more pairs...]"""

import json
import sys


def flat(x):
    if isinstance(x, list):
        for v in x:
            yield from flat(v)
    else:
        yield float(x)


def main(paths):
    ok = True
    summary = []
    for gpu_path, cpu_path in zip(paths[0::2], paths[1::2]):
        try:
            g, c = (json.load(open(p)) for p in (gpu_path, cpu_path))
        except (OSError, ValueError) as e:
            print(f"{gpu_path} / {cpu_path}: no result to compare ({e}): FAILED")
            ok = False
            continue
        go, co, t = list(flat(g["output"])), list(flat(c["output"])), list(flat(g["expected"]))
        assert len(go) == len(co) == len(t) > 0, "outputs of different sizes"
        dev = max(abs(a - b) for a, b in zip(go, co))
        err_g = max(abs(a - b) for a, b in zip(go, t))
        err_c = max(abs(a - b) for a, b in zip(co, t))
        tmax = max(abs(v) for v in t)
        bound = g["bound"]
        row = {
            "shape": [g["n"], g["d"], g["dv"], g["heads"]], "dtype": g["dtype"], "positions": g["seq_len"],
            "params": g["params"], "bound": bound, "max_abs_T": tmax,
            "gpu_err": err_g, "cpu_err": err_c, "gpu_vs_cpu": dev, "identical_entries": sum(a == b for a, b in zip(go, co)), "entries": len(go),
            "gpu_failures": g["failures"], "cpu_failures": c["failures"],
            "gpu_forward_ms": g["forward_ms"], "gpu_forward_warm_ms": g["forward_warm_ms"],
            "cpu_forward_ms": c["forward_ms"], "cpu_forward_warm_ms": c["forward_warm_ms"], "direct_ms": c["direct_ms"],
        }
        good = g["failures"] == 0 and c["failures"] == 0 and err_g <= bound and err_c <= bound and dev <= 2 * bound
        ok &= good
        summary.append(row)
        print(
            f"U n={g['n']} d={g['d']} dv={g['dv']} h={g['heads']} {g['dtype']}: |U_gpu - T| {err_g:.3e}, |U_cpu - T| {err_c:.3e}, "
            f"|U_gpu - U_cpu| {dev:.3e} ({row['identical_entries']}/{len(go)} entries identical), bound {bound:.3e}, max|T| {tmax:.3f}; "
            f"forward ms gpu {g['forward_ms']:.1f} (one more {g['forward_warm_ms']:.1f}), cpu {c['forward_ms']:.1f} (one more {c['forward_warm_ms']:.1f}): "
            f"{'ok' if good else 'FAILED'}"
        )
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
