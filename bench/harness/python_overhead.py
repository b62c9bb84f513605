#!/usr/bin/env python3
"""Per-call overhead of the Python package (python/, docs/python.md): what a call costs from
Python beyond the library's own work, and pcinfer.logsumexp on CUDA tensors against
torch.logsumexp.

CPU part (every machine): median wall time per call, over many calls, of
  - model.log_likelihood of one image (the shipped model, kernel cpu) and of one row of the
    3-variable example model (where the library's work is nearly nothing), each against the
    extension's own call (pcinfer._core, the C layer alone) on the same evaluator;
  - pcinfer.logsumexp of a 512 x 128 float32 array, NumPy and (with torch) a CPU tensor,
    against the extension's call and against torch.logsumexp;
  - a ctypes call of the same C function (pc_lse_rows, --lib), the technology the package
    replaces, and an empty call into the extension (the floor of any binding).
GPU part (with torch and a GPU): for 512 x 128 and 512 x 128256 float32,
  - ms per call the way docs/performance.md counts it: CUDA events around one call, host time
    of the call included, median over runs (inputs rotated past L2), pcinfer and torch in
    alternating rounds (the median of the rounds, and the least and largest ratio of a round);
  - host microseconds per call: back-to-back calls without synchronising, wall time / calls
    (the least over rounds of a few hundred calls, below a stream's queue depth);
  - GPU time per call: 20 calls captured in a CUDA graph, replayed;
  for pcinfer.logsumexp and torch.logsumexp, with the ratios the package is held to (>= 7x at
  512 x 128256, >= 4x at 512 x 128); and log_likelihood of one image with kernel fuse.

Writes python_overhead_<machine>.json and .md into --out (bench/results/current; the machine is
the GPU's name when the GPU part ran, else the CPU's), and prints the table.

    PYTHONPATH=build/python python3 bench/harness/python_overhead.py --lib build/src/libpcinfer.so
"""

import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # bench/
from machine import CURRENT, cpu_name, gpu_name, read_cpuinfo  # noqa: E402

import pcinfer  # noqa: E402
from pcinfer import _core  # noqa: E402


def per_call_us(fn, calls, rounds=7):
    """The least over rounds of (wall time of `calls` calls of fn) / calls, in microseconds:
    on a shared machine other work only ever adds time."""
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return min(times)


def ctypes_lse(lib_path, x, out):
    """pc_lse_rows(fuse, f32, x, ...) through ctypes, as a hand-written binding calls it."""
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    f = lib.pc_lse_rows
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    rows, cols = x.shape

    def call():
        if f(1, 0, x.ctypes.data, rows, cols, cols, out.ctypes.data, None) != 0:
            raise RuntimeError("pc_lse_rows failed")

    return call


def ctypes_lse_cuda(lib_path, torch, rows, cols, out=None):
    """pc_lse_rows_cuda(fuse, f32, x, ...) on torch's current stream through ctypes, as the
    hand-written binding the package replaces calls it (the issue's baseline): scratch made
    once; the result made per call unless `out` is given (then written into)."""
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    f = lib.pc_lse_rows_cuda
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    need = ctypes.c_size_t(0)
    stream = torch.cuda.current_stream().cuda_stream
    if f(1, 0, None, rows, cols, cols, None, None, ctypes.byref(need), stream) != 0:
        raise RuntimeError("pc_lse_rows_cuda size query failed")
    scratch = torch.empty(need.value, dtype=torch.uint8, device="cuda")
    nbytes = ctypes.c_size_t(need.value)

    def call(x):
        res = torch.empty(rows, device="cuda") if out is None else out
        if f(1, 0, x.data_ptr(), rows, cols, cols, res.data_ptr(), scratch.data_ptr(),
             ctypes.byref(nbytes), stream) != 0:
            raise RuntimeError("pc_lse_rows_cuda failed")
        return res

    return call


def cpu_part(args, torch):
    res = {}
    model = pcinfer.load(os.path.join(ROOT, "models", "mnist.h5"))
    tiny = pcinfer.load(os.path.join(ROOT, "tests", "data", "tiny_f64.h5"))
    for name, m, width in (("mnist_one_image", model, 784), ("tiny_one_row", tiny, 3)):
        x = np.zeros((1, width), np.uint8)
        out = np.empty(1)
        ev = _core.Evaluator(m._core, _core.backend_parse("cpu"), 1024, 1)
        res[name] = {
            "package_us": per_call_us(lambda: m.log_likelihood(x, kernel="cpu", threads=1),
                                      args.calls),
            "extension_us": per_call_us(lambda: ev.evaluate(x, None, out), args.calls),
        }
    for rows, cols in ((1, 16), (512, 128)):
        x = np.random.default_rng(1).normal(0, 4, (rows, cols)).astype(np.float32)
        out = np.empty(rows, np.float32)
        lse = {
            "package_numpy_us": per_call_us(lambda: pcinfer.logsumexp(x), args.calls),
            "extension_us": per_call_us(lambda: _core.lse_rows(1, 0, x, out, 1, 0), args.calls),
        }
        if args.lib:
            lse["ctypes_us"] = per_call_us(ctypes_lse(args.lib, x, out), args.calls)
        if torch is not None:
            t = torch.from_numpy(x)
            lse["package_torch_cpu_us"] = per_call_us(lambda: pcinfer.logsumexp(t), args.calls)
            lse["torch_logsumexp_cpu_us"] = per_call_us(lambda: torch.logsumexp(t, 1),
                                                         args.calls)
        res["lse_%dx%d" % (rows, cols)] = lse
    res["empty_extension_call_us"] = per_call_us(lambda: _core.status_str(0), args.calls * 10)
    return res


def gpu_part(args, torch):
    def events_ms(fn, inputs, reps):
        """Median CUDA-event time of one call between two events (host time included)."""
        for i in range(3):
            fn(inputs[i % len(inputs)])
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
        for i, (a, b) in enumerate(ev):
            a.record()
            fn(inputs[i % len(inputs)])
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in ev)

    def wall_us(fn, x, calls, drain, rounds=10):
        """The least over rounds of the wall time per call of `calls` back-to-back calls,
        synchronising between rounds. drain=False: the host's work alone (host us; a few
        hundred calls stay below a stream's queue depth of ~1,000 launches, so a round does
        not time the GPU draining a full queue). drain=True: also the wait for the last call's
        kernels, so what a call costs in a loop of calls, the host's work or the GPU's,
        whichever bounds; unlike events_ms it has no event of its own to record per call."""
        fn(x)
        best = float("inf")
        for _ in range(rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            if drain:
                torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
        return best

    def graph_ms(fn, x, reps, calls=20):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn(x)
        g.replay()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
        for a, b in ev:
            a.record()
            g.replay()
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in ev) / calls

    ours = lambda t: pcinfer.logsumexp(t, dim=1)  # noqa: E731
    theirs = lambda t: torch.logsumexp(t, dim=1)  # noqa: E731
    res = {"gpu": torch.cuda.get_device_name(), "describe": _core.cuda_describe(),
           "torch": torch.__version__, "rounds": args.rounds, "reps": args.reps,
           "gpu_calls": args.gpu_calls, "shapes": []}
    for rows, cols, target in ((512, 128, 4.0), (512, 128256, 7.0)):
        x = torch.randn(rows, cols, device="cuda") * 4
        nbytes = x.numel() * 4
        xs = [x] + [x.clone() for _ in range(max(0, -(-(256 << 20) // nbytes) - 1))] \
            if nbytes > (30 << 20) else [x]
        ref = torch.logsumexp(x.double(), 1)
        err = float(((ours(x).double() - ref).abs() / ref.abs().clamp(min=1)).max())
        row = {"rows": rows, "cols": cols, "target_ratio": target, "max_rel_err": err}
        # The two alternate, round by round, so that a change in the machine's other work
        # reaches both; each figure is the median of the rounds' medians, and the rounds'
        # ratios give the spread.
        # With out= (both take it, as torch.logsumexp does) the call skips the allocation of
        # its result, which is most of what the host does at 512 x 128 besides the launch.
        out_ours = torch.empty(rows, device="cuda")
        out_theirs = torch.empty(rows, device="cuda")
        fns = {"pcinfer": ours, "torch": theirs,
               "pcinfer_out": lambda t: pcinfer.logsumexp(t, dim=1, out=out_ours),
               "torch_out": lambda t: torch.logsumexp(t, dim=1, out=out_theirs)}
        if args.lib:
            out_ctypes = torch.empty(rows, device="cuda")
            fns["ctypes"] = ctypes_lse_cuda(args.lib, torch, rows, cols)
            fns["ctypes_out"] = ctypes_lse_cuda(args.lib, torch, rows, cols, out_ctypes)
        assert torch.equal(fns["pcinfer_out"](x), ours(x))
        for name in ("ctypes", "ctypes_out"):
            assert name not in fns or torch.equal(fns[name](x), ours(x))
        calls = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                calls[name].append(events_ms(fn, xs, args.reps))
        for name, fn in fns.items():
            row[name + "_call_ms"] = statistics.median(calls[name])
            row[name + "_host_us"] = wall_us(fn, x, args.gpu_calls, drain=False)
            row[name + "_loop_us"] = wall_us(fn, x, args.gpu_calls, drain=True)
            row[name + "_graph_ms"] = graph_ms(fn, x, 15)
        # The package's host time in layers, at 512 x 128 where it bounds: the extension's
        # call alone (scratch and result made once: the C layer and the launch) and the
        # result's allocation alone; the rest of pcinfer_host_us is the Python layer.
        if cols == 128:
            scratch = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
            stream = torch.cuda.current_stream().cuda_stream
            row["extension_host_us"] = wall_us(
                lambda t: _core.lse_rows_cuda(1, 0, t.data_ptr(), rows, cols, cols,
                                              out_ours.data_ptr(), scratch.data_ptr(),
                                              scratch.numel(), stream), x, args.gpu_calls,
                drain=False)
            row["alloc_host_us"] = wall_us(lambda t: t.new_empty(rows, dtype=torch.float32), x,
                                           args.gpu_calls, drain=False)
        for suffix in ("", "_out"):
            ratios = [t / p for t, p in zip(calls["torch" + suffix], calls["pcinfer" + suffix])]
            row["ratio_call_rounds" + suffix] = [min(ratios), max(ratios)]
            for what in ("call_ms", "loop_us"):
                row["ratio_%s%s" % (what.split("_")[0], suffix)] = (
                    row["torch%s_%s" % (suffix, what)] / row["pcinfer%s_%s" % (suffix, what)])
            row["met" + suffix] = row["ratio_call" + suffix] >= target
            row["met_loop" + suffix] = row["ratio_loop" + suffix] >= target
        row["ratio_graph"] = row["torch_graph_ms"] / row["pcinfer_graph_ms"]
        res["shapes"].append(row)
        del xs, x
        torch.cuda.empty_cache()
    model = pcinfer.load(os.path.join(ROOT, "models", "mnist.h5"))
    one = np.zeros((1, 784), np.uint8)
    res["mnist_one_image_fuse_us"] = per_call_us(lambda: model.log_likelihood(one, kernel="fuse"),
                                                 args.calls)
    return res


def note(result):
    lines = ["# Python package: per-call overhead", "",
             "%s; Python %s, NumPy %s%s." % (result["cpu"], result["python"], result["numpy"],
                                            ", torch " + result["torch"] if result["torch"]
                                            else ""), "",
             "Microseconds per call, the least over rounds of many calls, on the CPU "
             "(bench/harness/python_overhead.py):", "",
             "| call | package | extension alone (C layer) | Python layer |", "|---|---|---|---|"]
    c = result["cpu_part"]
    for name in ("tiny_one_row", "mnist_one_image"):
        r = c[name]
        lines.append("| log_likelihood, %s, kernel cpu | %.2f | %.2f | %.2f |" % (
            name.replace("_", " "), r["package_us"], r["extension_us"],
            r["package_us"] - r["extension_us"]))
    for shape in ("1x16", "512x128"):
        lse = c["lse_" + shape]
        label = shape.replace("x", " x ")
        lines.append("| logsumexp %s f32, NumPy | %.2f | %.2f | %.2f |" % (
            label, lse["package_numpy_us"], lse["extension_us"],
            lse["package_numpy_us"] - lse["extension_us"]))
        if "package_torch_cpu_us" in lse:
            lines.append("| logsumexp %s f32, torch CPU tensor (torch.logsumexp: %.2f) | %.2f | "
                         "%.2f | %.2f |" % (label, lse["torch_logsumexp_cpu_us"],
                                            lse["package_torch_cpu_us"], lse["extension_us"],
                                            lse["package_torch_cpu_us"] - lse["extension_us"]))
        if "ctypes_us" in lse:
            lines.append("| pc_lse_rows %s through ctypes | %.2f | %.2f | %.2f |" % (
                label, lse["ctypes_us"], lse["extension_us"],
                lse["ctypes_us"] - lse["extension_us"]))
    lines += ["", "An empty call into the extension: %.3f us. Calls of ~100 us and more vary "
              "with the machine's other work; the small calls show the layers' cost."
              % c["empty_extension_call_us"]]
    g = result.get("gpu_part")
    if g:
        lines += ["", "GPU: %s; torch %s. ms per call: CUDA events around one call (host time "
                  "included), the median over %d alternating rounds of %d (rounds: the least "
                  "and largest ratio of one round); host us: back-to-back calls, the least over "
                  "rounds of %d; GPU ms: CUDA graph of 20 calls." % (
                      g["describe"], g["torch"], g["rounds"], g["reps"], g["gpu_calls"]), "",
                  "| B x N f32 | pcinfer ms/call | torch ms/call | torch / pcinfer | rounds | "
                  "target | pcinfer host us | torch host us | pcinfer GPU ms | torch GPU ms | "
                  "max rel err |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in g["shapes"]:
            lines.append("| %d x %d | %.4f | %.4f | %.2f%s | %.2f-%.2f | >= %.0f | %.1f | %.1f "
                         "| %.4f | %.4f | %.1e |" % (r["rows"], r["cols"], r["pcinfer_call_ms"],
                                       r["torch_call_ms"], r["ratio_call"],
                                       "" if r["met"] else " (missed)",
                                       r["ratio_call_rounds"][0], r["ratio_call_rounds"][1],
                                       r["target_ratio"],
                                       r["pcinfer_host_us"], r["torch_host_us"],
                                       r["pcinfer_graph_ms"], r["torch_graph_ms"],
                                       r["max_rel_err"]))
        lines += ["", "In a loop (the wall time of %d back-to-back calls and the wait for the "
                  "last, per call, the least over 10 rounds: the host's work or the GPU's, "
                  "whichever bounds, without the closing event that each single call above "
                  "records), and "
                  "one call between events, without and with `out=` (a result tensor made once, "
                  "for both):" % g["gpu_calls"], "",
                  "| B x N f32 | call | pcinfer us/call in a loop | torch us/call in a loop | "
                  "torch / pcinfer in a loop | one call: torch / pcinfer (rounds) | target | "
                  "pcinfer host us | torch host us |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in g["shapes"]:
            if "pcinfer_loop_us" not in r:
                continue
            for suffix, label in (("", "new result"), ("_out", "out=")):
                lines.append(
                    "| %d x %d | %s | %.1f | %.1f | %.2f%s | %.2f (%.2f-%.2f)%s | >= %.0f | "
                    "%.1f | %.1f |" % (
                        r["rows"], r["cols"], label, r["pcinfer%s_loop_us" % suffix],
                        r["torch%s_loop_us" % suffix], r["ratio_loop" + suffix],
                        "" if r["met_loop" + suffix] else " (missed)", r["ratio_call" + suffix],
                        r["ratio_call_rounds" + suffix][0], r["ratio_call_rounds" + suffix][1],
                        "" if r["met" + suffix] else " (missed)", r["target_ratio"],
                        r["pcinfer%s_host_us" % suffix], r["torch%s_host_us" % suffix]))
        with_ctypes = [r for r in g["shapes"] if "ctypes_call_ms" in r]
        if with_ctypes:
            lines += ["", "The same calls through a hand-written ctypes binding of "
                      "pc_lse_rows_cuda (scratch made once; the result made per call, or "
                      "made once and passed, as `out=`), in the same alternating rounds:", "",
                      "| B x N f32 | call | ctypes ms/call | torch / ctypes (one call) | "
                      "pcinfer / ctypes (one call) | ctypes us/call in a loop | "
                      "torch / ctypes in a loop | ctypes host us |", "|---|---|---|---|---|---|---|---|"]
            for r in with_ctypes:
                for suffix, label in (("", "new result"), ("_out", "out=")):
                    c = "ctypes" + suffix
                    lines.append("| %d x %d | %s | %.4f | %.2f | %.2f | %.1f | %.2f | %.1f |" % (
                        r["rows"], r["cols"], label, r[c + "_call_ms"],
                        r["torch%s_call_ms" % suffix] / r[c + "_call_ms"],
                        r["pcinfer%s_call_ms" % suffix] / r[c + "_call_ms"], r[c + "_loop_us"],
                        r["torch%s_loop_us" % suffix] / r[c + "_loop_us"], r[c + "_host_us"]))
        for r in g["shapes"]:
            if "extension_host_us" in r:
                lines += ["", "Host time of one %d x %d call in layers: %.1f us in all, of which "
                          "the extension's call with its launch %.1f, the result's allocation "
                          "(`new_empty`) %.1f, the Python layer the remaining %.1f." % (
                              r["rows"], r["cols"], r["pcinfer_host_us"],
                              r["extension_host_us"], r["alloc_host_us"],
                              r["pcinfer_host_us"] - r["extension_host_us"]
                              - r["alloc_host_us"])]
        lines += ["", "log_likelihood of one image, kernel fuse: %.1f us per call."
                  % g["mnist_one_image_fuse_us"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=CURRENT)
    ap.add_argument("--lib", help="libpcinfer.so for the ctypes comparison")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--gpu-calls", type=int, default=200)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    model_name, _ = read_cpuinfo()
    result = {"cpu": model_name or platform.processor(), "cores": os.cpu_count(),
              "python": platform.python_version(), "numpy": np.__version__,
              "torch": torch.__version__ if torch is not None else None,
              "library": pcinfer.__version__, "cpu_part": cpu_part(args, torch)}
    gpu = torch is not None and torch.cuda.is_available() and pcinfer.gpu_available()
    if gpu:
        result["gpu_part"] = gpu_part(args, torch)
    machine = gpu_name(result["gpu_part"]["gpu"]) if gpu else cpu_name(result["cpu"],
                                                                       result["cores"])
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, "python_overhead_" + machine)
    with open(base + ".json.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    text = note(result)
    with open(base + ".md.tmp", "w") as f:
        f.write(text)
    os.replace(base + ".md.tmp", base + ".md")
    print(text)


if __name__ == "__main__":
    main()
