#!/usr/bin/env python3
"""The paper's timing figure: time per row-wise LSE call vs N at B = 512, on the machine it runs
on, for every variant (fuse f32/f16/bf16, int f32/q10.6; ref on the CPU up to N = 8192).
CPU: our kernels through `lsebench --json`; peers in this process on the same shapes: numpy's
max-shift recipe, scipy.special.logsumexp and torch.logsumexp (one thread each).
GPU: our kernels (through ctypes) and torch.logsumexp eager in f32, f16 and bf16 timed the same
way in this process (CUDA events, median of 30 after warm-up, a GPU sleep queued first so host
launch cost opens no gap), lsebench --json at N = 128256 as a cross-check, and the read floor
(bytes / the bandwidth torch.sum reaches over 1 GiB in the same run). lsebench computes an FP64
host reference for every configuration, too slow to sweep every GPU shape within a short run.

    bench/paper/paper_timing.py [build-dir] [--cpu] [--gpu] [--cols 128,1024,...] [--threads 1]

Without --cpu/--gpu: the CPU always, the GPU when pc_cuda_available(). Writes
bench/results/current/paper_timing_{cpu,cuda}_<machine>.json, .png and .md.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import bench_common as pc  # noqa: E402

COLS = [128, 1024, 8192, 32768, 128256]
GPU_COLS = [128, 1024, 8192, 32768, 128256, 256000]
VARIANTS = [("fuse", "f32"), ("fuse", "f16"), ("fuse", "bf16"), ("int", "f32"), ("int", "q10.6")]
ROWS = 512
RANGE = "-10,0"


def lsebench(build, device, kernel, dtype, cols, threads):
    cmd = [
        os.path.join(build, "lsebench"),
        "--device",
        device,
        "--kernel",
        kernel,
        "--dtype",
        dtype,
        "--rows",
        str(ROWS),
        "--cols",
        str(cols),
        "--range",
        RANGE,
        "--json",
    ]
    if device == "cpu":
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-300:]}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": "no JSON line in lsebench output"}


def median_time(f, budget_s=0.6, max_reps=50):
    f()
    times, t_end = [], time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < t_end and len(times) < max_reps):
        t0 = time.perf_counter_ns()
        f()
        times.append((time.perf_counter_ns() - t0) * 1e-6)
    return float(np.median(times))


def cpu_peers(x, torch):
    import scipy.special

    peers = {
        "numpy": lambda: (lambda m: m[:, 0] + np.log(np.exp(x - m).sum(axis=1)))(
            x.max(axis=1, keepdims=True)
        ),
        "scipy": lambda: scipy.special.logsumexp(x, axis=1),
    }
    if torch is not None:
        t = torch.from_numpy(x)
        peers["torch"] = lambda: torch.logsumexp(t, dim=1)
    return {k: median_time(f) for k, f in peers.items()}


def run_cpu(args, torch):
    res = {
        "benchmark": "paper_timing",
        "device": "cpu",
        "machine": pc.machine(),
        "rows": ROWS,
        "range": RANGE,
        "threads": args.threads,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "points": [],
    }
    rng = np.random.default_rng(1)
    for n in args.cols:
        x = rng.uniform(-10, 0, (ROWS, n)).astype(np.float32)
        for name, ms in cpu_peers(x, torch).items():
            res["points"].append(
                {
                    "impl": name,
                    "dtype": "f32",
                    "cols": n,
                    "ms": ms,
                    "ns_per_elem": ms * 1e6 / (ROWS * n),
                }
            )
        del x
        variants = VARIANTS + ([("ref", "f32")] if n <= 8192 else [])
        for k, d in variants:
            r = lsebench(args.build, "cpu", k, d, n, args.threads)
            p = {"impl": "%s-%s" % (k, d), "kernel": k, "dtype": d, "cols": n, "lsebench": r}
            if "ns_per_elem" in r:
                p["ns_per_elem"] = r["ns_per_elem"]
                p["ms"] = r["ns_per_elem"] * ROWS * n * 1e-6
            res["points"].append(p)
        print(
            "cpu N=%-7d " % n
            + "  ".join(
                "%s %.3g" % (p["impl"], p.get("ns_per_elem", float("nan")))
                for p in res["points"]
                if p["cols"] == n
            )
            + " ns/elem",
            flush=True,
        )
    return res


def cuda_time(torch, f, reps=30):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        f(0)
    times = []
    for i in range(reps):
        torch.cuda._sleep(100000)  # ~50 us of GPU work: host launch cost opens no gap in the span
        start.record()
        f(i)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


def read_bandwidth(torch):
    """Bytes per ms that torch.sum reads from a 1 GiB tensor (the read floor's denominator)."""
    x = torch.ones(1 << 28, device="cuda", dtype=torch.float32)
    ms = cuda_time(torch, lambda i: x.sum(), reps=10)
    del x
    torch.cuda.empty_cache()
    return (1 << 30) / ms


def gpu_input(torch, x, dtype):
    """A float32 CUDA tensor -> the tensor of `dtype` bits that pc_lse_rows_cuda reads."""
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.half().view(torch.int16)
    if dtype == "bf16":
        return x.bfloat16().view(torch.int16)
    return torch.round(x * (64 / 0.6931471805599453)).clamp(-32768, 32767).to(torch.int16)


def run_gpu(args, torch, lib):
    """Our variants and torch timed the same way (CUDA events around one call from Python, a GPU
    sleep queued first); lsebench (C, its own events) at N = 128256 as a cross-check."""
    res = {
        "benchmark": "paper_timing",
        "device": "cuda",
        "machine": pc.machine(gpu=True),
        "rows": ROWS,
        "range": RANGE,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "points": [],
        "method": "CUDA events around one call, median of 30 after 3 warm-up calls; inputs under "
        "256 MB "
        "rotate over copies; lsebench-* points are lsebench --json (C, CUDA events)",
    }
    bw = read_bandwidth(torch)
    res["read_bytes_per_ms"] = bw
    out = torch.empty(ROWS, device="cuda")
    for n in args.gpu_cols:
        copies = max(1, min(8, (256 << 20) // (ROWS * n * 4)))
        base = [torch.rand(ROWS, n, device="cuda") * -10 for _ in range(copies)]
        for k, d in VARIANTS:
            xs = [gpu_input(torch, b, d) for b in base]
            need = lib.lse_rows_cuda(k, d, xs[0].data_ptr(), ROWS, n, n, out.data_ptr(), None, 0)
            scratch = torch.empty(max(need, 16), dtype=torch.uint8, device="cuda")
            call = lambda i: lib.lse_rows_cuda(
                k,
                d,
                xs[i % copies].data_ptr(),
                ROWS,
                n,
                n,  # noqa: E731
                out.data_ptr(),
                scratch.data_ptr(),
                need,
            )
            res["points"].append(
                {
                    "impl": "%s-%s" % (k, d),
                    "kernel": k,
                    "dtype": d,
                    "cols": n,
                    "ms": cuda_time(torch, call),
                }
            )
            del xs, scratch
        for d, tdt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
            xs = [b.to(tdt) for b in base]
            ms = cuda_time(torch, lambda i: torch.logsumexp(xs[i % copies], dim=1))
            res["points"].append({"impl": "torch-" + d, "dtype": d, "cols": n, "ms": ms})
            del xs
        del base
        torch.cuda.empty_cache()
        for d, size in (("f32", 4), ("f16", 2)):
            res["points"].append(
                {"impl": "read-floor-" + d, "dtype": d, "cols": n, "ms": ROWS * n * size / bw}
            )
        if n == 128256:
            for k, d in VARIANTS:
                r = lsebench(args.build, "cuda", k, d, n, 1)
                res["points"].append(
                    {
                        "impl": "lsebench-%s-%s" % (k, d),
                        "kernel": k,
                        "dtype": d,
                        "cols": n,
                        "lsebench": r,
                        **({"ms": r["ms"]} if "ms" in r else {}),
                    }
                )
        print(
            "gpu N=%-7d " % n
            + "  ".join(
                "%s %.4f" % (p["impl"], p.get("ms", float("nan")))
                for p in res["points"]
                if p["cols"] == n
            )
            + " ms",
            flush=True,
        )
    return res


def plot(res, path, unit_ns):
    plt = pc.pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    impls = []
    for p in res["points"]:
        if p["impl"] not in impls:
            impls.append(p["impl"])
    for impl in impls:
        pts = [
            (p["cols"], p["ns_per_elem"] if unit_ns else p["ms"])
            for p in res["points"]
            if p["impl"] == impl and ("ns_per_elem" if unit_ns else "ms") in p
        ]
        if pts:
            style = (
                ":"
                if impl.startswith("read-floor")
                else ("--" if impl.split("-")[0] in ("numpy", "scipy", "torch") else "-")
            )
            ax.loglog(*zip(*pts), style, marker="o", ms=3, label=impl)
    ax.set_xlabel("N (columns), B = %d rows" % ROWS)
    ax.set_ylabel("ns per element" if unit_ns else "ms per call (median)")
    m = res["machine"]
    ax.set_title("Row-wise LSE, %s: %s" % (res["device"], m.get("gpu", m["cpu"])), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    pc.save_png(fig, path)
    return True


def table(res, unit_ns):
    cols = sorted({p["cols"] for p in res["points"]})
    impls = []
    for p in res["points"]:
        if p["impl"] not in impls:
            impls.append(p["impl"])
    key = "ns_per_elem" if unit_ns else "ms"
    lines = [
        "| impl | " + " | ".join("N=%d" % c for c in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for impl in impls:
        vals = {p["cols"]: p.get(key) for p in res["points"] if p["impl"] == impl}
        lines.append(
            "| %s | " % impl
            + " | ".join("%.4g" % vals[c] if vals.get(c) is not None else "-" for c in cols)
            + " |"
        )
    return lines


def write(res, unit_ns):
    m = res["machine"]
    base = pc.result_base("paper_timing", res)
    pc.write_json(base + ".json", res)
    res["plot"] = plot(res, base + ".png", unit_ns)
    head = [
        "# Row-wise LSE time vs N, B = %d, %s" % (ROWS, res["device"]),
        "",
        "Machine: "
        + ", ".join("%s %s" % (k, v) for k, v in m.items())
        + ". Inputs U(%s). %s"
        % (
            res["range"],
            "ns per element (lower is better); one thread."
            if unit_ns
            else "ms per call, CUDA events, median; read floor = bytes / torch.sum read bandwidth "
            "(%.2f TB/s in this run)." % ((res.get("read_bytes_per_ms") or 0) / 1e9),
        ),
        "",
    ]
    pc.write_text(base + ".md", "\n".join(head + table(res, unit_ns)) + "\n")
    print("wrote", base + ".json")


def main():
    ap = pc.device_parser(__doc__)
    ap.add_argument("--cols", default=",".join(map(str, COLS)))
    ap.add_argument("--gpu-cols", default=",".join(map(str, GPU_COLS)))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    args.cols = [int(c) for c in args.cols.split(",")]
    args.gpu_cols = [int(c) for c in args.gpu_cols.split(",")]
    lib = pc.Lib(args.build)
    try:
        import torch
    except ImportError:
        torch = None
    do_cpu, do_gpu = pc.devices(args, lib)
    if do_cpu:
        if torch is not None:
            torch.set_num_threads(args.threads)
        write(run_cpu(args, torch), True)
    if do_gpu:
        if not lib.cuda_available():
            sys.exit("paper_timing: --gpu asked but no GPU is available to this build")
        if torch is None or not torch.cuda.is_available():
            sys.exit("paper_timing: the GPU part needs torch with CUDA (inputs, events, the peer)")
        write(run_gpu(args, torch, lib), False)


if __name__ == "__main__":
    main()
