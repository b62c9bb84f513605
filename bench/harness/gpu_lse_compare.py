#!/usr/bin/env python3
"""Row-wise LSE on one GPU: pcinfer's CUDA kernels (through ctypes on libpcinfer.so) against
torch.logsumexp (eager and torch.compile) on the same tensors and stream.

Times are CUDA-event medians of many runs after warm-up; inputs larger than L2 rotate through
enough copies (>= 256 MiB in all) that every run reads from DRAM. The read floor of a shape is
its bytes over the bandwidth of torch.sum on 4 GiB, measured in the same run. Accuracy is
checked against torch.logsumexp in FP64 of the exact values each kernel reads (f16/bf16 inputs
are compared with the FP64 LSE of the rounded values).

Writes gpu_lse_<machine>.json, .png and .md (e.g. gpu_lse_h200.*; bench/machine.py names the
machine) into --out, by default bench/results/current.
"""

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from machine import CURRENT, gpu_name  # noqa: E402

SHAPES = [
    (512, 128),
    (512, 1024),
    (512, 8192),
    (512, 32768),
    (512, 128256),
    (512, 256000),
    (8, 128256),
    (1, 4194304),
    (65536, 64),
    (1048576, 16),
]
PLOT_N = [128, 1024, 8192, 32768, 128256, 256000]  # B = 512
RANGES = [
    ("U(-1,0)", "u", -1.0, 0.0),
    ("U(-10,0)", "u", -10.0, 0.0),
    ("U(-100,0)", "u", -100.0, 0.0),
    ("N(0,4^2)", "n", 0.0, 4.0),
]
KERNEL = {"fuse": 1, "int": 2}
DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
OURS = [
    ("fuse_f32", "fuse", torch.float32),
    ("fuse_f16", "fuse", torch.float16),
    ("fuse_bf16", "fuse", torch.bfloat16),
    ("int_f32", "int", torch.float32),
]
ROTATE_BYTES = 256 << 20
L2_BYTES = 60 << 20


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.pc_lse_rows_cuda
        f.restype = ctypes.c_int
        f.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_void_p,
        ]
        self.lib.pc_last_error.restype = ctypes.c_char_p
        self.lib.pc_cuda_describe.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.scratch = {}

    def describe(self):
        buf = ctypes.create_string_buffer(256)
        self.lib.pc_cuda_describe(buf, 256)
        return buf.value.decode()

    def rows(self, kernel, x, out):
        """out[r] = LSE(x[r, :]) queued on torch's current stream; scratch cached per shape."""
        rows, cols = x.shape
        key = (kernel, x.dtype, rows, cols)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)
        if key not in self.scratch:
            st = self.lib.pc_lse_rows_cuda(
                KERNEL[kernel],
                DTYPE[x.dtype],
                None,
                rows,
                cols,
                x.stride(0),
                None,
                None,
                ctypes.byref(size),
                stream,
            )
            if st != 0:
                raise RuntimeError(self.lib.pc_last_error().decode())
            self.scratch[key] = (
                torch.empty(size.value, dtype=torch.uint8, device="cuda"),
                size.value,
            )
        buf, nbytes = self.scratch[key]
        size.value = nbytes
        st = self.lib.pc_lse_rows_cuda(
            KERNEL[kernel],
            DTYPE[x.dtype],
            x.data_ptr(),
            rows,
            cols,
            x.stride(0),
            out.data_ptr(),
            buf.data_ptr(),
            ctypes.byref(size),
            stream,
        )
        if st != 0:
            raise RuntimeError(self.lib.pc_last_error().decode())


def median_ms(fn, inputs, reps):
    """Median CUDA-event time of fn(inputs[i % len(inputs)]) over reps runs after warm-up."""
    for i in range(3):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    ev = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(inputs[i % len(inputs)])
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2]


def graph_ms(fn, inputs, reps, calls=20):
    """GPU time per call: `calls` calls captured in one CUDA graph (no host work between them),
    replayed reps times; median over replays divided by calls. None if capture fails."""
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(calls):
                fn(inputs[i % len(inputs)])
        g.replay()
        torch.cuda.synchronize()
        ev = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(reps)
        ]
        for a, b in ev:
            a.record()
            g.replay()
            b.record()
        torch.cuda.synchronize()
        t = sorted(a.elapsed_time(b) for a, b in ev)
        del g
        return t[len(t) // 2] / calls
    except Exception as e:  # noqa: BLE001 - a method that cannot be captured is reported as such
        print("graph capture failed:", repr(e)[:200], flush=True)
        torch.cuda.synchronize()
        return None


def copies(x):
    """The input and enough clones of it that rotating through them defeats L2."""
    nbytes = x.numel() * x.element_size()
    if nbytes <= L2_BYTES // 2:
        return [x]
    n = max(2, math.ceil(ROTATE_BYTES / nbytes))
    return [x] + [x.clone() for _ in range(n - 1)]


def fmt(v, digits=4):
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return "n/a" if a is None or b is None else f"{a / b:.2f}"


def gen(b, n, kind, lo, hi):
    if kind == "u":
        return torch.empty(b, n, device="cuda").uniform_(lo, hi)
    return torch.randn(b, n, device="cuda") * hi


def rel_errors(got, ref):
    err = (got.double() - ref).abs() / ref.abs().clamp(min=1.0)
    return float(err.max()), float(err.mean())


def read_bandwidth():
    x = torch.ones(1 << 30, device="cuda")  # 4 GiB
    ms = median_ms(lambda t: torch.sum(t), [x], 20)
    del x
    return (1 << 32) / (ms * 1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/src/libpcinfer.so")
    ap.add_argument("--out", default=CURRENT)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--graph-reps", type=int, default=15)
    ap.add_argument(
        "--compile-budget-s",
        type=float,
        default=60.0,
        help="stop timing torch.compile once its compilations took this long in all",
    )
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lib = Lib(args.lib)
    torch.manual_seed(int(time.time()))
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        driver = "unknown"
    bw = read_bandwidth()
    result = {
        "gpu": torch.cuda.get_device_name(),
        "describe": lib.describe(),
        "driver": driver,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "read_bandwidth_TBps": bw / 1e12,
        "reps": args.reps,
        "graph_reps": args.graph_reps,
        "shapes": [],
        "ranges": [],
    }
    compiled = torch.compile(lambda t: torch.logsumexp(t, dim=1))
    compile_spent = 0.0

    for b, n in SHAPES:
        x = torch.randn(b, n, device="cuda") * 4.0
        row = {"B": b, "N": n, "bytes_f32": b * n * 4, "floor_ms": b * n * 4 / bw * 1e3}
        xs = copies(x)
        out = torch.empty(b, device="cuda")
        row["torch_eager_ms"] = median_ms(lambda t: torch.logsumexp(t, dim=1), xs, args.reps)
        row["torch_eager_graph_ms"] = graph_ms(
            lambda t: torch.logsumexp(t, dim=1), xs, args.graph_reps
        )
        if compile_spent < args.compile_budget_s:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            compiled(x)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            compile_spent += first
            row["torch_compile_first_call_ms"] = first * 1e3
            row["torch_compile_ms"] = median_ms(compiled, xs, args.reps)
            row["torch_compile_graph_ms"] = graph_ms(compiled, xs, args.graph_reps)
        ref = torch.logsumexp(x.double(), dim=1)
        for name, kernel, dt in OURS:
            xd = [t.to(dt) for t in xs] if dt != torch.float32 else xs
            row[name + "_ms"] = median_ms(lambda t: lib.rows(kernel, t, out), xd, args.reps)
            row[name + "_graph_ms"] = graph_ms(
                lambda t: lib.rows(kernel, t, out), xd, args.graph_reps
            )
            lib.rows(kernel, xd[0], out)
            r = ref if dt == torch.float32 else torch.logsumexp(xd[0].double(), dim=1)
            row[name + "_max_rel_err"], row[name + "_mean_rel_err"] = rel_errors(out, r)
            del xd
        if (b, n) == (512, 128256):
            xh = [t.half() for t in xs]
            row["torch_eager_f16_ms"] = median_ms(
                lambda t: torch.logsumexp(t, dim=1), xh, args.reps
            )
            row["torch_eager_f16_graph_ms"] = graph_ms(
                lambda t: torch.logsumexp(t, dim=1), xh, args.graph_reps
            )
            del xh
        result["shapes"].append(row)
        del xs, x
        torch.cuda.empty_cache()
        print(
            f"{b:>8} x {n:<8} call: eager {row['torch_eager_ms']:.4f} compile "
            f"{row.get('torch_compile_ms', float('nan')):.4f}"
            f" fuse {row['fuse_f32_ms']:.4f} f16 {row['fuse_f16_ms']:.4f} int "
            f"{row['int_f32_ms']:.4f} | graph: eager "
            f"{fmt(row['torch_eager_graph_ms'])} compile {fmt(row.get('torch_compile_graph_ms'))} "
            "fuse "
            f"{fmt(row['fuse_f32_graph_ms'])} f16 {fmt(row['fuse_f16_graph_ms'])} bf16 "
            f"{fmt(row['fuse_bf16_graph_ms'])}"
            f" int {fmt(row['int_f32_graph_ms'])} | floor {row['floor_ms']:.4f} ms",
            flush=True,
        )

    for name, kind, lo, hi in RANGES:
        x = gen(512, 128256, kind, lo, hi)
        ref = torch.logsumexp(x.double(), dim=1)
        out = torch.empty(512, device="cuda")
        entry = {"range": name, "B": 512, "N": 128256}
        for oname, kernel, dt in OURS:
            xd = x.to(dt)
            lib.rows(kernel, xd, out)
            r = ref if dt == torch.float32 else torch.logsumexp(xd.double(), dim=1)
            entry[oname + "_max_rel_err"], entry[oname + "_mean_rel_err"] = rel_errors(out, r)
        tout = torch.logsumexp(x, dim=1)
        entry["torch_eager_max_rel_err"], entry["torch_eager_mean_rel_err"] = rel_errors(tout, ref)
        result["ranges"].append(entry)

    base = os.path.join(args.out, "gpu_lse_" + gpu_name(result["gpu"]))
    with open(base + ".json.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    plot(result, base + ".png")
    write_note(result, base + ".md")


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {(r["B"], r["N"]): r for r in result["shapes"]}
    ns = [n for n in PLOT_N if (512, n) in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in [
        ("torch_eager_graph_ms", "torch eager"),
        ("torch_compile_graph_ms", "torch.compile"),
        ("fuse_f32_graph_ms", "fuse f32"),
        ("int_f32_graph_ms", "int f32"),
        ("fuse_f16_graph_ms", "fuse f16"),
        ("floor_ms", "read floor (f32)"),
    ]:
        pts = [(n, rows[(512, n)][key]) for n in ns if rows[(512, n)].get(key) is not None]
        if pts:
            ax.plot(
                *zip(*pts), marker="o", label=label, linestyle="--" if key == "floor_ms" else "-"
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("N (B = 512)")
    ax.set_ylabel("GPU ms per call (CUDA graph, median)")
    ax.set_title(f"Row-wise LSE on {result['gpu']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=120)
    os.replace(path + ".tmp.png", path)


def write_note(result, path):
    lines = [
        f"# Row-wise LSE on {result['gpu']}",
        "",
        f"{result['describe']}; driver {result['driver']}; torch {result['torch']} (CUDA "
        f"{result['torch_cuda']}). "
        f"Read floor: torch.sum over 4 GiB at {result['read_bandwidth_TBps']:.2f} TB/s. "
        f"CUDA-event medians of {result['reps']} runs; inputs over L2 rotate.",
        "",
        "GPU time: 20 calls captured in one CUDA graph, median of replays / 20 (no host time). "
        "Per call: one call between two events, host overhead of the Python call included.",
        "",
        "| B x N | GPU ms: eager | compile | fuse f32 | f16 | bf16 | int f32 | floor | "
        "eager / fuse | fuse / floor | f16 / f32 | per call ms: eager | compile (first call) | "
        "fuse f32 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["shapes"]:
        comp = (
            f"{r['torch_compile_ms']:.4f} ({r['torch_compile_first_call_ms']:.0f} ms)"
            if "torch_compile_ms" in r
            else "not run"
        )
        lines.append(
            f"| {r['B']} x {r['N']} | {fmt(r['torch_eager_graph_ms'])} | "
            f"{fmt(r.get('torch_compile_graph_ms'))} | "
            f"{fmt(r['fuse_f32_graph_ms'])} | {fmt(r['fuse_f16_graph_ms'])} | "
            f"{fmt(r['fuse_bf16_graph_ms'])} | "
            f"{fmt(r['int_f32_graph_ms'])} | {r['floor_ms']:.4f} | "
            f"{ratio(r['torch_eager_graph_ms'], r['fuse_f32_graph_ms'])} | "
            f"{ratio(r['fuse_f32_graph_ms'], r['floor_ms'])} | "
            f"{ratio(r['fuse_f16_graph_ms'], r['fuse_f32_graph_ms'])} | "
            f"{r['torch_eager_ms']:.4f} | {comp} | {r['fuse_f32_ms']:.4f} |"
        )
    for r in result["shapes"]:
        if "torch_eager_f16_graph_ms" in r:
            lines += [
                "",
                f"f16 input at {r['B']} x {r['N']}: torch eager "
                f"{fmt(r['torch_eager_f16_graph_ms'])} ms GPU, "
                f"fuse f16 {fmt(r['fuse_f16_graph_ms'])} ms GPU "
                f"({ratio(r['torch_eager_f16_graph_ms'], r['fuse_f16_graph_ms'])}x).",
            ]
    lines += [
        "",
        "Accuracy at 512 x 128256 (relative to max(1, |ref|), FP64 torch reference of the values "
        "read):",
        "",
        "| range | fuse f32 max / mean | fuse f16 | fuse bf16 | int f32 | torch eager f32 |",
        "|---|---|---|---|---|---|",
    ]
    for e in result["ranges"]:
        cells = [
            f"{e[k + '_max_rel_err']:.1e} / {e[k + '_mean_rel_err']:.1e}"
            for k in ("fuse_f32", "fuse_f16", "fuse_bf16", "int_f32", "torch_eager")
        ]
        lines.append(f"| {e['range']} | " + " | ".join(cells) + " |")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
