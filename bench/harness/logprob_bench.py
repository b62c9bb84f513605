#!/usr/bin/env python3
"""Token log-probabilities on the GPU: pc_logprob_rows_cuda against torch on the same tensors.

Peers: torch.log_softmax + gather (the usual RLHF code), and gather - torch.logsumexp. Inputs:
logits N(0, 3^2) in f32 or bf16 (bf16 peers run natively in bf16), uniform random targets.
Time: CUDA events around one call, median of --reps after warm-up; a GPU sleep is queued before
each timed call so that host-side launch cost (ctypes, Python) does not open gaps inside the
timed span; inputs under 256 MB rotate over copies so calls read from DRAM, not the 60 MB L2.
Read floor: logit bytes / the bandwidth torch.sum reaches over 1 GiB in the same run. Error:
|logprob - FP64| with the FP64 value from torch in float64 on the GPU (row chunks), checked
against the library's CPU FP64 reference (pc_logprob_rows_ref) on a few rows.

    bench/harness/logprob_bench.py [build-dir] [--rows 1,64,512,4096,16384]
        [--vocab 32000,50257,128256,256000]

Writes bench/results/current/logprob_bench_<machine>.json, .png and .md.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import bench_common as pc  # noqa: E402

import torch  # noqa: E402


def timed(f, copies, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(3):
        f(i % copies)
    times = []
    for i in range(reps):
        torch.cuda._sleep(100000)  # ~50 us of GPU work: the launches below queue behind it
        start.record()
        f(i % copies)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


def read_bandwidth():
    x = torch.ones(1 << 28, device="cuda", dtype=torch.float32)
    ms = timed(lambda i: x.sum(), 1, 10)
    del x
    torch.cuda.empty_cache()
    return (1 << 30) / ms


def fp64_logprob(x, t, chunk_elems=1 << 27):
    rows, vocab = x.shape
    step = max(1, chunk_elems // vocab)
    out = torch.empty(rows, dtype=torch.float64, device="cuda")
    for r0 in range(0, rows, step):
        xd = x[r0 : r0 + step].double()
        out[r0 : r0 + step] = xd.gather(1, t[r0 : r0 + step, None])[:, 0] - torch.logsumexp(xd, 1)
        del xd
    return out


def err_stats(got, ref):
    e = (got.double() - ref).abs()
    return {"mean_abs_err": float(e.mean()), "max_abs_err": float(e.max())}


def bench_one(lib, rows, vocab, dtype, reps, bw):
    tdt = torch.float32 if dtype == "f32" else torch.bfloat16
    esize = 4 if dtype == "f32" else 2
    nbytes = rows * vocab * esize
    copies = max(1, min(4, (256 << 20) // nbytes))
    xs = [(torch.randn(rows, vocab, device="cuda") * 3).to(tdt) for _ in range(copies)]
    t = torch.randint(0, vocab, (rows,), device="cuda", dtype=torch.int64)
    out = torch.full((rows,), float("nan"), device="cuda")
    need = lib.logprob_rows_cuda(
        dtype, xs[0].data_ptr(), rows, vocab, vocab, t.data_ptr(), out.data_ptr(), None, 0
    )
    scratch = torch.empty(need, dtype=torch.uint8, device="cuda")
    ours = lambda i: lib.logprob_rows_cuda(
        dtype,
        xs[i].data_ptr(),
        rows,
        vocab,
        vocab,
        t.data_ptr(),  # noqa: E731
        out.data_ptr(),
        scratch.data_ptr(),
        need,
    )

    def ls_gather(i):
        return torch.log_softmax(xs[i], -1).gather(-1, t[:, None])[:, 0]

    def gather_lse(i):
        return xs[i].gather(-1, t[:, None])[:, 0] - torch.logsumexp(xs[i], -1)

    r = {
        "rows": rows,
        "vocab": vocab,
        "dtype": dtype,
        "bytes": nbytes,
        "copies": copies,
        "ours_ms": timed(ours, copies, reps),
    }
    ours(0)
    torch.cuda.synchronize()
    got = out.clone()
    ref = fp64_logprob(xs[0], t)
    r.update({"ours_" + k: v for k, v in err_stats(got, ref).items()})
    r["torch_log_softmax_gather_ms"] = timed(ls_gather, copies, reps)
    r.update({"torch_log_softmax_gather_" + k: v for k, v in err_stats(ls_gather(0), ref).items()})
    r["torch_gather_logsumexp_ms"] = timed(gather_lse, copies, reps)
    r.update({"torch_gather_logsumexp_" + k: v for k, v in err_stats(gather_lse(0), ref).items()})
    # The torch FP64 reference against the library's own CPU FP64 reference, on up to 4 rows.
    k = min(rows, 4)
    host = xs[0][:k].contiguous().cpu()
    host_np = host.numpy() if dtype == "f32" else host.view(torch.int16).numpy().view(np.uint16)
    lib_ref = lib.logprob_rows_ref(dtype, np.ascontiguousarray(host_np), t[:k].cpu().numpy())
    r["fp64_refs_max_diff"] = float(np.abs(lib_ref - ref[:k].cpu().numpy()).max())
    if bw:
        r["floor_ms"] = nbytes / bw
        r["ours_vs_floor"] = r["ours_ms"] / r["floor_ms"]
    r["speedup_vs_log_softmax_gather"] = r["torch_log_softmax_gather_ms"] / r["ours_ms"]
    r["speedup_vs_gather_logsumexp"] = r["torch_gather_logsumexp_ms"] / r["ours_ms"]
    del xs, scratch
    torch.cuda.empty_cache()
    return r


def plot(res, path):
    plt = pc.pyplot()
    if plt is None:
        return False
    vocabs = sorted({r["vocab"] for r in res["runs"]})
    fig, axes = plt.subplots(1, len(vocabs), figsize=(4 * len(vocabs), 3.8), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, v in zip(axes, vocabs):
        for dtype, style in (("f32", "-"), ("bf16", "--")):
            runs = sorted(
                (r for r in res["runs"] if r["vocab"] == v and r["dtype"] == dtype),
                key=lambda r: r["rows"],
            )
            if not runs:
                continue
            rows = [r["rows"] for r in runs]
            ax.loglog(
                rows,
                [r["ours_ms"] for r in runs],
                style,
                color="C0",
                marker="o",
                ms=3,
                label="ours " + dtype,
            )
            ax.loglog(
                rows,
                [r["torch_log_softmax_gather_ms"] for r in runs],
                style,
                color="C1",
                marker="s",
                ms=3,
                label="torch log_softmax+gather " + dtype,
            )
            ax.loglog(
                rows,
                [r["torch_gather_logsumexp_ms"] for r in runs],
                style,
                color="C2",
                marker="^",
                ms=3,
                label="torch gather-logsumexp " + dtype,
            )
            if "floor_ms" in runs[0]:
                ax.loglog(
                    rows,
                    [r["floor_ms"] for r in runs],
                    style,
                    color="gray",
                    lw=1,
                    label="read floor " + dtype,
                )
        ax.set_title("vocab %d" % v, fontsize=9)
        ax.set_xlabel("rows")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per call (median)")
    axes[-1].legend(fontsize=6)
    fig.suptitle("Token log-probabilities, %s" % res["machine"].get("gpu", "?"), fontsize=10)
    pc.save_png(fig, path)
    return True


def markdown(res):
    lines = [
        "# Token log-probabilities on the GPU",
        "",
        "Machine: "
        + ", ".join("%s %s" % (k, v) for k, v in res["machine"].items())
        + ". Read bandwidth (torch.sum, 1 GiB) %.2f TB/s. ms per call, CUDA events, median of %d."
        % ((res["read_bytes_per_ms"] or 0) / 1e9, res["reps"]),
        "",
        "| dtype | rows | vocab | ours ms | x floor | torch ls+gather ms | torch gather-lse ms | "
        "speedup vs ls+gather | ours max err | torch ls+gather max err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        lines.append(
            "| %s | %d | %d | %.4f | %s | %.4f | %.4f | %.1fx | %.1e | %.1e |"
            % (
                r["dtype"],
                r["rows"],
                r["vocab"],
                r["ours_ms"],
                "%.2f" % r["ours_vs_floor"] if "ours_vs_floor" in r else "-",
                r["torch_log_softmax_gather_ms"],
                r["torch_gather_logsumexp_ms"],
                r["speedup_vs_log_softmax_gather"],
                r["ours_max_abs_err"],
                r["torch_log_softmax_gather_max_abs_err"],
            )
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rows", default="1,64,512,4096,16384")
    ap.add_argument("--vocab", default="32000,50257,128256,256000")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    lib = pc.Lib(args.build)
    if not lib.cuda_available() or not torch.cuda.is_available():
        sys.exit("logprob_bench: needs a GPU (and torch with CUDA)")
    torch.manual_seed(0)
    bw = read_bandwidth()
    res = {
        "benchmark": "logprob_bench",
        "machine": pc.machine(gpu=True),
        "read_bytes_per_ms": bw,
        "reps": args.reps,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": [],
    }
    for dtype in args.dtypes.split(","):
        for v in [int(s) for s in args.vocab.split(",")]:
            for rows in [int(s) for s in args.rows.split(",")]:
                r = bench_one(lib, rows, v, dtype, args.reps, bw)
                res["runs"].append(r)
                print(
                    "%-4s rows %5d vocab %6d: ours %.4f ms (%.2fx floor)  torch ls+gather %.4f  "
                    "gather-lse %.4f"
                    "  | err ours %.1e torch %.1e | refs agree %.1e"
                    % (
                        dtype,
                        rows,
                        v,
                        r["ours_ms"],
                        r.get("ours_vs_floor", float("nan")),
                        r["torch_log_softmax_gather_ms"],
                        r["torch_gather_logsumexp_ms"],
                        r["ours_max_abs_err"],
                        r["torch_log_softmax_gather_max_abs_err"],
                        r["fp64_refs_max_diff"],
                    ),
                    flush=True,
                )
    base = pc.current_base("logprob_bench", pc.machine_name(res["machine"]))
    pc.write_json(base + ".json", res)
    plot(res, base + ".png")
    pc.write_text(base + ".md", markdown(res))
    print("wrote", base + ".json")


if __name__ == "__main__":
    main()
