#!/usr/bin/env python3
"""Row-wise log-sum-exp on one CPU thread: pcinfer's fuse and int kernels against numpy, scipy
and torch, on the paper's shapes (B = 512 with N in {128, 1024, 8192, 32768, 128256}, and
1 x 2^20), float32 inputs U(-10, 0).

Peers (whichever are installed), all on one thread:
  numpy   the max-shift recipe m + log(sum(exp(x - m)))
  scipy   scipy.special.logsumexp(x, axis=1)
  torch   torch.logsumexp(x, dim=1)
Ours: `lsebench --json` for fuse and int on f32, with the best instruction set, AVX2 and the
scalar path. Every method: one warm-up call per input copy, then the median of up to 25 calls
(fewer when a call is slow, at least 3); inputs under 64 MB rotate over up to 8 copies for every
method alike.

The machine may be shared, so the whole measurement runs --runs times (5) and each cell is the
median pass; the JSON keeps every pass. Writes cpu_lse_<machine>.json (machine, date, versions,
every measurement) and cpu_lse_<machine>.md (ns per element and speed-ups over the fastest peer)
into --out (bench/results/current; bench/machine.py names the machine).

usage: bench/harness/cpu_lse_compare.py [--build build] [--out DIR] [--runs 5]
"""
import os

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[var] = "1"  # before numpy loads its BLAS

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from machine import CURRENT, machine_name, read_cpuinfo  # noqa: E402

SHAPES = [(512, 128), (512, 1024), (512, 8192), (512, 32768), (512, 128256), (1, 1 << 20)]
BUDGET_S = 0.5
MAX_REPEATS = 25


ROTATE_BYTES = 64 << 20  # as lsebench: inputs smaller than this rotate over copies
MAX_ROTATE = 8


def copies(x):
    """The buffers a timed loop rotates over, exactly as lsebench does for its own kernels."""
    n = max(1, min(MAX_ROTATE, ROTATE_BYTES // x.nbytes)) if x.nbytes < ROTATE_BYTES else 1
    return [x] + [x.copy() for _ in range(n - 1)]


def median_time(fn, bufs):
    """One warm-up call on every copy (the first pass over a freshly written copy is slower than
    the later ones), then the median of up to MAX_REPEATS timed calls (at least 3), call r on
    bufs[r % len(bufs)]. lsebench warms up the same way."""
    first = 0.0
    for b in bufs:
        t0 = time.perf_counter()
        fn(b)
        first = time.perf_counter() - t0
    reps = max(3, min(MAX_REPEATS, int(BUDGET_S / max(first, 1e-9))))
    times = []
    for r in range(reps):
        b = bufs[r % len(bufs)]
        t0 = time.perf_counter()
        fn(b)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), reps


def peers():
    """name -> (version, function of a float32 [B, N] array giving [B] results)."""
    found = {}

    def numpy_lse(x):
        m = x.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]

    found["numpy"] = (np.__version__, numpy_lse)
    try:
        import scipy
        import scipy.special

        found["scipy"] = (scipy.__version__, lambda x: scipy.special.logsumexp(x, axis=1))
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(1)
        # from_numpy shares the memory: no copy is timed.
        found["torch"] = (torch.__version__, lambda x: torch.logsumexp(torch.from_numpy(x), dim=1))
    except ImportError:
        pass
    return found


def reference(x):
    """FP64 max-shift LSE, row by row (for the peers' error)."""
    out = np.empty(x.shape[0])
    for r in range(x.shape[0]):
        row = x[r].astype(np.float64)
        m = row.max()
        out[r] = m + np.log(np.exp(row - m).sum())
    return out


def cpu_info():
    model, flags = read_cpuinfo()
    model = model or "unknown"
    simd = [fl for fl in flags if fl.startswith(("avx", "fma", "f16c", "sse4"))]
    return {"model": model, "simd_flags": simd, "logical_cpus": os.cpu_count()}


def run_ours(lsebench, kernel, isa, rows, cols):
    cmd = [lsebench, "--device", "cpu", "--kernel", kernel, "--dtype", "f32", "--rows", str(rows),
           "--cols", str(cols), "--threads", "1", "--range", "-10,0", "--json"]
    if isa:
        cmd += ["--isa", isa]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip()
    return json.loads(done.stdout.strip().splitlines()[-1]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="CMake build folder holding lsebench")
    ap.add_argument("--out", default=CURRENT)
    ap.add_argument("--runs", type=int, default=5,
                    help="passes over every shape and method; each cell reports the median pass "
                         "(the machine is shared: one pass can meet a busy neighbour)")
    args = ap.parse_args()
    lsebench = os.path.join(args.build, "lsebench")
    if not os.access(lsebench, os.X_OK):
        sys.exit(f"cpu_lse_compare: {lsebench} not found; build first (make build)")

    found = peers()
    cpu = cpu_info()
    load_before = open("/proc/loadavg").read().split()[:3]
    flags = cpu["simd_flags"]
    best = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "scalar"
    isas = [best] + [i for i in ("avx2", "scalar")
                     if i != best and (i != "avx2" or "avx2" in flags)]
    rng = np.random.default_rng(1)
    inputs = {shape: rng.uniform(-10.0, 0.0, size=shape).astype(np.float32) for shape in SHAPES}
    refs = {shape: reference(x) for shape, x in inputs.items()}
    passes = []  # every measurement of every pass
    for run in range(args.runs):
        for rows, cols in SHAPES:
            x, ref = inputs[(rows, cols)], refs[(rows, cols)]
            bufs = copies(x)
            for name, (version, fn) in found.items():
                sec, reps = median_time(fn, bufs)
                err = np.abs(np.asarray(fn(x), dtype=np.float64) - ref)
                passes.append({"pass": run, "method": name, "version": version, "rows": rows,
                               "cols": cols, "ns_per_elem": sec * 1e9 / (rows * cols),
                               "repeats": reps, "mean_abs_err": float(err.mean()),
                               "max_abs_err": float(err.max())})
                print(f"pass {run} {name:14s} {rows:4d} x {cols:7d}: "
                      f"{passes[-1]['ns_per_elem']:.3f} ns/elem", flush=True)
            for kernel in ("fuse", "int"):
                for isa in isas:
                    got, why = run_ours(lsebench, kernel, isa, rows, cols)
                    if got is None:
                        print(f"cpu_lse_compare: lsebench {kernel} {isa} failed: {why}",
                              file=sys.stderr)
                        continue
                    passes.append({"pass": run, "method": f"{kernel}-{isa}", "version": "pcinfer",
                                   "rows": rows, "cols": cols, "ns_per_elem": got["ns_per_elem"],
                                   "repeats": got["repeats"], "mean_abs_err": got["mean_abs_err"],
                                   "max_abs_err": got["max_abs_err"]})
                    print(f"pass {run} {kernel + '-' + isa:14s} {rows:4d} x {cols:7d}: "
                          f"{got['ns_per_elem']:.3f} ns/elem", flush=True)
    results = []  # per (method, shape): the median pass
    for key in dict.fromkeys((r["method"], r["rows"], r["cols"]) for r in passes):
        same = [r for r in passes if (r["method"], r["rows"], r["cols"]) == key]
        med = dict(sorted(same, key=lambda r: r["ns_per_elem"])[len(same) // 2])
        med["ns_per_elem_passes"] = [r["ns_per_elem"] for r in same]
        del med["pass"]
        results.append(med)

    date = datetime.date.today().isoformat()
    load_after = open("/proc/loadavg").read().split()[:3]
    meta = {"date": date, "cpu": cpu, "os_kernel": platform.release(),
            "python": platform.python_version(), "peers": {k: v[0] for k, v in found.items()},
            "threads": 1, "input": "U(-10,0) float32", "runs": args.runs,
            "loadavg_before": load_before, "loadavg_after": load_after,
            "method": f"one warm-up call per input copy, median of up to 25 calls (at least 3, "
                      f"about 0.25-0.5 s each); inputs under 64 MB rotate over up to 8 copies, "
                      f"for every method; {args.runs} passes over everything, each cell the "
                      f"median pass"}
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"cpu_lse_{machine_name()}")
    tmp = stem + ".json.tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "results": results, "passes": passes}, f, indent=1)
    os.replace(tmp, stem + ".json")
    tmp = stem + ".md.tmp"
    with open(tmp, "w") as f:
        f.write(markdown(meta, results, list(found), isas))
    os.replace(tmp, stem + ".md")
    print(f"wrote {stem}.json and {stem}.md")


def markdown(meta, results, peer_names, isas):
    ours = [f"{k}-{i}" for k in ("fuse", "int") for i in isas]
    by = {(r["method"], r["rows"], r["cols"]): r for r in results}
    lines = [
        f"# CPU row-wise log-sum-exp, one thread ({meta['date']})",
        "",
        f"CPU: {meta['cpu']['model']} ({meta['cpu']['logical_cpus']} logical CPUs); SIMD flags: "
        f"{' '.join(meta['cpu']['simd_flags'])}.",
        f"Peers: {', '.join(f'{k} {v}' for k, v in meta['peers'].items())}; "
        f"Python {meta['python']}.",
        f"Load average (1, 5, 15 min) before {' '.join(meta['loadavg_before'])}, after "
        f"{' '.join(meta['loadavg_after'])}: the machine is shared, so busy neighbours slow every "
        "column alike.",
        f"Input {meta['input']}; {meta['method']}. Numbers in ns per element; "
        "`x faster` = fastest peer's time / ours. Full data: the JSON file of the same name.",
        "",
        "| B x N | " + " | ".join(peer_names + ours)
        + " | fastest peer | fuse x faster | int x faster |",
        "|---" * (len(peer_names) + len(ours) + 4) + "|",
    ]
    for rows, cols in SHAPES:
        cells = []
        for m in peer_names + ours:
            r = by.get((m, rows, cols))
            cells.append(f"{r['ns_per_elem']:.3f}" if r else "-")
        peer_ns = [by[(p, rows, cols)]["ns_per_elem"] for p in peer_names if (p, rows, cols) in by]
        fastest = min(peer_ns) if peer_ns else float("nan")
        fp = min((p for p in peer_names if (p, rows, cols) in by),
                 key=lambda p: by[(p, rows, cols)]["ns_per_elem"])
        fuse = by.get((f"fuse-{isas[0]}", rows, cols))
        intk = by.get((f"int-{isas[0]}", rows, cols))
        lines.append(f"| {rows} x {cols} | " + " | ".join(cells) + f" | {fp} | "
                     + (f"{fastest / fuse['ns_per_elem']:.1f}" if fuse else "-") + " | "
                     + (f"{fastest / intk['ns_per_elem']:.1f}" if intk else "-") + " |")
    lines += ["", "Mean absolute error against FP64 (nats), largest over the shapes:", ""]
    for m in peer_names + ours:
        errs = [r["mean_abs_err"] for r in results if r["method"] == m]
        if errs:
            lines.append(f"- {m}: {max(errs):.2e}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
