#!/usr/bin/env python3
"""The paper's accuracy figures: absolute error of row-wise LSE against FP64, per input
distribution and per kernel/dtype variant, as p95 (and mean, max) over rows.

Two references per variant: `kernel` error is against the FP64 LSE of the very values the
kernel was given (pc_lse_rows_ref on the same f16/bf16/q10.6 bits: the arithmetic's own
error); `total` error is against the FP64 LSE of the original float32 values (numpy float64),
so it includes the rounding of the input to a reduced-bit type.

Distributions (B = 512 rows, N = 8192): U(-1,0), U(-10,0), U(-100,0), N(0,4^2), Student-t with
3 degrees of freedom times 4 (heavy tails), and U(-10,0) with 10% of the entries -inf (q10.6
cannot hold -inf: those entries get its most negative code, -512 log2 units). A sweep over N
(B = 64) for U(-1,0) and U(-10,0) shows how error grows with N.

CPU: pc_lse_rows through ctypes, plus numpy's max-shift recipe and torch.logsumexp in float32
as peers. GPU (when present, through torch tensors): pc_lse_rows_cuda and torch.logsumexp.

    bench/paper/paper_accuracy.py [build-dir] [--cpu] [--gpu] [--rows 512] [--cols 8192]

Writes bench/results/current/paper_accuracy_{cpu,cuda}_<machine>.json, .png and .md.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import bench_common as pc  # noqa: E402

VARIANTS = [("fuse", "f32"), ("fuse", "f16"), ("fuse", "bf16"), ("int", "f32"), ("int", "q10.6")]
SWEEP_COLS = [128, 1024, 8192, 32768, 128256]
LN2 = np.log(2.0)


def distribution(name, rows, cols, rng):
    if name == "U(-1,0)":
        return rng.uniform(-1, 0, (rows, cols))
    if name == "U(-10,0)":
        return rng.uniform(-10, 0, (rows, cols))
    if name == "U(-100,0)":
        return rng.uniform(-100, 0, (rows, cols))
    if name == "N(0,4^2)":
        return rng.normal(0, 4, (rows, cols))
    if name == "4*t(3)":
        return 4 * rng.standard_t(3, (rows, cols))
    if name == "U(-10,0)+10%-inf":
        x = rng.uniform(-10, 0, (rows, cols))
        x[rng.uniform(size=(rows, cols)) < 0.1] = -np.inf
        return x
    raise ValueError(name)


DISTS = ["U(-1,0)", "U(-10,0)", "U(-100,0)", "N(0,4^2)", "4*t(3)", "U(-10,0)+10%-inf"]


def encode(x32, dtype):
    """float32 array -> the array of `dtype` bits that the library reads."""
    if dtype == "f32":
        return np.ascontiguousarray(x32)
    if dtype == "f16":
        return np.ascontiguousarray(x32.astype(np.float16).view(np.uint16))
    if dtype == "bf16":
        return pc.to_bf16(x32)
    q = np.where(np.isneginf(x32), -32768, np.round(x32.astype(np.float64) / LN2 * 64))
    return np.ascontiguousarray(np.clip(q, -32768, 32767).astype(np.int16))


def fp64_lse(x):
    """FP64 max-shift LSE of each row of x (float64), -inf rows give -inf."""
    m = np.max(x, axis=1, keepdims=True)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return safe[:, 0] + np.log(np.exp(x - safe).sum(axis=1))


def stats(err):
    err = np.abs(err[np.isfinite(err)])
    if err.size == 0:
        return {"p95": None, "mean": None, "max": None}
    return {
        "p95": float(np.percentile(err, 95)),
        "mean": float(err.mean()),
        "max": float(err.max()),
    }


def cpu_errors(lib, x32, torch):
    """{impl: {"kernel": stats, "total": stats}} for one [rows, cols] float32 input."""
    total_ref = fp64_lse(x32.astype(np.float64))
    out = {}
    for k, d in VARIANTS:
        xb = encode(x32, d)
        got = lib.lse_rows(k, d, xb).astype(np.float64)
        own_ref = lib.lse_rows_ref(d, xb)
        out["%s-%s" % (k, d)] = {"kernel": stats(got - own_ref), "total": stats(got - total_ref)}
    ref_lib = lib.lse_rows_ref("f32", x32)
    out["ref-f32 (library FP64 vs numpy FP64)"] = {"kernel": stats(ref_lib - total_ref)}
    m = x32.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        npy = (m[:, 0] + np.log(np.exp(x32 - m).sum(axis=1))).astype(np.float64)
    out["numpy-f32"] = {"kernel": stats(npy - total_ref), "total": stats(npy - total_ref)}
    if torch is not None:
        t = torch.logsumexp(torch.from_numpy(x32), dim=1).double().numpy()
        out["torch-f32"] = {"kernel": stats(t - total_ref), "total": stats(t - total_ref)}
    return out


def gpu_errors(lib, x32, torch):
    rows, cols = x32.shape
    total_ref = fp64_lse(x32.astype(np.float64))
    out = {}
    d_out = torch.empty(rows, dtype=torch.float32, device="cuda")
    for k, d in VARIANTS:
        xb = encode(x32, d)
        own_ref = lib.lse_rows_ref(d, xb)
        d_x = torch.from_numpy(xb.view(np.int16) if xb.dtype == np.uint16 else xb).cuda()
        need = lib.lse_rows_cuda(k, d, d_x.data_ptr(), rows, cols, cols, d_out.data_ptr(), None, 0)
        scratch = torch.empty(max(need, 16), dtype=torch.uint8, device="cuda")
        d_out.fill_(float("nan"))
        lib.lse_rows_cuda(
            k, d, d_x.data_ptr(), rows, cols, cols, d_out.data_ptr(), scratch.data_ptr(), need
        )
        torch.cuda.synchronize()
        got = d_out.cpu().double().numpy()
        out["%s-%s" % (k, d)] = {"kernel": stats(got - own_ref), "total": stats(got - total_ref)}
    xt = torch.from_numpy(x32).cuda()
    for d, tdt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        t = torch.logsumexp(xt.to(tdt), dim=1).double().cpu().numpy()
        own = fp64_lse(xt.to(tdt).double().cpu().numpy())
        out["torch-" + d] = {"kernel": stats(t - own), "total": stats(t - total_ref)}
    return out


def run(device, lib, torch, rows, cols):
    f = cpu_errors if device == "cpu" else gpu_errors
    rng = np.random.default_rng(7)
    res = {
        "benchmark": "paper_accuracy",
        "device": device,
        "machine": pc.machine(gpu=device == "cuda"),
        "rows": rows,
        "cols": cols,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "distributions": {},
        "sweep": {},
    }
    for name in DISTS:
        res["distributions"][name] = f(
            lib, distribution(name, rows, cols, rng).astype(np.float32), torch
        )
        print(
            "%s %-18s " % (device, name)
            + "  ".join(
                "%s %.1e" % (k, v["kernel"]["p95"])
                for k, v in res["distributions"][name].items()
                if v["kernel"]["p95"] is not None and not k.startswith("ref")
            ),
            flush=True,
        )
    for name in ("U(-1,0)", "U(-10,0)"):
        res["sweep"][name] = {}
        for n in SWEEP_COLS:
            res["sweep"][name][n] = f(lib, distribution(name, 64, n, rng).astype(np.float32), torch)
    return res


def plot(res, path):
    plt = pc.pyplot()
    if plt is None:
        return False
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    dists = list(res["distributions"])
    impls = [k for k in res["distributions"][dists[0]] if not k.startswith("ref")]
    width = 0.8 / len(impls)
    for i, impl in enumerate(impls):
        vals = [res["distributions"][d][impl]["total"]["p95"] or 0 for d in dists]
        a1.bar(np.arange(len(dists)) + i * width, vals, width, label=impl)
    a1.set_yscale("log")
    a1.set_xticks(np.arange(len(dists)) + 0.4)
    a1.set_xticklabels(dists, rotation=20, fontsize=7)
    a1.set_ylabel("p95 |LSE - FP64 LSE of the f32 input| (nats)")
    a1.set_title("B=%d, N=%d, by input distribution" % (res["rows"], res["cols"]), fontsize=9)
    a1.legend(fontsize=6, ncol=2)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for name, style in (("U(-1,0)", "-"), ("U(-10,0)", "--")):
        sweep = res["sweep"][name]
        ns = sorted(int(n) for n in sweep)
        for i, impl in enumerate(impls):
            pts = [
                (n, sweep[n][impl]["kernel"]["p95"]) for n in ns if sweep[n][impl]["kernel"]["p95"]
            ]
            if pts:
                a2.loglog(
                    *zip(*pts),
                    style,
                    color=colors[i % len(colors)],
                    marker="o",
                    ms=3,
                    label="%s %s" % (impl, name),
                )
    a2.set_xlabel("N (B = 64)")
    a2.set_ylabel("p95 |LSE - FP64 LSE of the same input| (nats)")
    a2.set_title("error vs N", fontsize=9)
    a2.grid(True, which="both", alpha=0.3)
    a2.legend(fontsize=5, ncol=2)
    m = res["machine"]
    fig.suptitle(
        "LSE accuracy vs FP64, %s: %s" % (res["device"], m.get("gpu", m["cpu"])), fontsize=10
    )
    pc.save_png(fig, path)
    return True


def markdown(res):
    dists = list(res["distributions"])
    impls = list(res["distributions"][dists[0]])
    fmt = lambda v: "-" if v is None else "%.1e" % v  # noqa: E731
    lines = [
        "# LSE accuracy vs FP64 (%s)" % res["device"],
        "",
        "Machine: "
        + ", ".join("%s %s" % (k, v) for k, v in res["machine"].items())
        + ". B = %d, N = %d. Cells: p95 |error| in nats, `kernel` (vs FP64 of the same input "
        "bits) / `total` (vs FP64 of the float32 input)." % (res["rows"], res["cols"]),
        "",
        "| impl | " + " | ".join(dists) + " |",
        "|---" * (len(dists) + 1) + "|",
    ]
    for impl in impls:
        cells = []
        for d in dists:
            e = res["distributions"][d][impl]
            cells.append(
                fmt(e["kernel"]["p95"]) + (" / " + fmt(e["total"]["p95"]) if "total" in e else "")
            )
        lines.append("| %s | %s |" % (impl, " | ".join(cells)))
    lines += ["", "Error vs N (B = 64, p95 `kernel` error):", ""]
    for name, sweep in res["sweep"].items():
        ns = sorted(int(n) for n in sweep)
        lines += [
            "%s:" % name,
            "",
            "| impl | " + " | ".join("N=%d" % n for n in ns) + " |",
            "|---" * (len(ns) + 1) + "|",
        ]
        for impl in impls:
            lines.append(
                "| %s | %s |" % (impl, " | ".join(fmt(sweep[n][impl]["kernel"]["p95"]) for n in ns))
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def write(res):
    base = pc.result_base("paper_accuracy", res)
    res["sweep"] = {k: {str(n): v for n, v in s.items()} for k, s in res["sweep"].items()}
    pc.write_json(base + ".json", res)
    res["sweep"] = {k: {int(n): v for n, v in s.items()} for k, s in res["sweep"].items()}
    res["plot"] = plot(res, base + ".png")
    pc.write_text(base + ".md", markdown(res))
    print("wrote", base + ".json")


def main():
    ap = pc.device_parser(__doc__)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--cols", type=int, default=8192)
    args = ap.parse_args()
    lib = pc.Lib(args.build)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    do_cpu, do_gpu = pc.devices(args, lib)
    if do_cpu:
        write(run("cpu", lib, torch, args.rows, args.cols))
    if do_gpu:
        if not lib.cuda_available() or torch is None or not torch.cuda.is_available():
            sys.exit("paper_accuracy: the GPU part needs a GPU and torch with CUDA")
        write(run("cuda", lib, torch, args.rows, args.cols))


if __name__ == "__main__":
    main()
