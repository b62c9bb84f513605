#!/usr/bin/env python3
"""Plots and tabulates bench/gpu_circuit_bench.c's JSON: forward time vs K at each batch for
fuse, int and gemm, next to PyJuice 2.6.3's best mode (CUDA graph) on the same GPU model, as
measured for the project's targets card, TARGETS.md (PyJuice is not installed on the benchmark machine).

usage: gpu_circuit_plot.py RESULTS.json OUT.png     (prints a Markdown table to stdout)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# PyJuice 2.6.3, HCLT on MNIST, forward, CUDA graph recorded; H200; ms (TARGETS.md).
PYJUICE_MS = {
    (16, 512): 0.56, (32, 512): 0.54, (64, 512): 0.64, (128, 512): 1.45, (256, 512): 2.72,
    (16, 4096): 0.74, (32, 4096): 1.28, (64, 4096): 2.15, (128, 4096): 6.19, (256, 4096): 18.0,
}
FP32_PEAK = 67e12   # H200 plain FP32 FLOP/s
READ_BW = 4.33e12   # H200 full-read bandwidth measured with torch.sum (TARGETS.md)


def bound(r):
    """Which floor limits this point: compute (FP32 FMA), memory (parameters + samples read
    once) or neither (the tree's dependency chain and synchronisation)."""
    t = r["ms"] * 1e-3
    compute = r["flop"] / FP32_PEAK
    memory = (r["weight_bytes"] + r["batch"] * 784 + r["batch"] * 8) / READ_BW
    if compute / t >= 0.25:
        return compute, memory, "compute"
    if memory / t >= 0.25:
        return compute, memory, "memory"
    return compute, memory, "latency"


def main():
    res = json.load(open(sys.argv[1]))
    timing = [r for r in res["results"] if r["kind"] == "timing"]
    batches = sorted({r["batch"] for r in timing})
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    print(f"GPU: {res['gpu']}\n")
    print("| backend | strategy | K | batch | ms | PyJuice ms | speed-up | TFLOP/s | % FP32 peak | "
          "compute floor ms | read floor ms | bound | peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    styles = (("fuse", "o-"), ("fuse-persistent", "o:"), ("fuse-tile", "o--"),
              ("fuse-warp", "o-."), ("gemm", "s-"), ("int", "^-"))
    for ax, b in zip(axes[0], batches):
        for be, style in styles:
            pts = sorted((r["K"], r) for r in timing if r["batch"] == b and r["backend"] == be)
            if not pts:
                continue
            ax.plot([k for k, _ in pts], [r["ms"] for _, r in pts], style, label=be)
            for k, r in pts:
                pj = PYJUICE_MS.get((k, b))
                c, m, what = bound(r)
                print(f"| {be} | {r.get('strategy', '-')} | {k} | {b} | {r['ms']:.4f} | {pj if pj else '-'} | "
                      f"{(pj / r['ms']) if pj else float('nan'):.2f}x | "
                      f"{r['flop'] / r['ms'] * 1e-9:.2f} | "
                      f"{100 * r['flop'] / (r['ms'] * 1e-3) / FP32_PEAK:.1f} | {c * 1e3:.4f} | "
                      f"{m * 1e3:.4f} | {what} | {r['peak_device_bytes'] / 2**20:.0f} |")
        ks = sorted(k for (k, bb) in PYJUICE_MS if bb == b)
        ax.plot(ks, [PYJUICE_MS[(k, b)] for k in ks], "k--", label="PyJuice 2.6.3 (graph)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K (latent states)")
        ax.set_ylabel("forward ms per batch")
        ax.set_title(f"MNIST HCLT, batch {b}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(res["gpu"], fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    acc = [r for r in res["results"] if r["kind"] == "accuracy"]
    if acc:
        print("\n| model | backend | images | mean abs Delta (nats) | max abs Delta | "
              "bits/dim (ref) | images/s end to end | peak MiB |")
        print("|---|---|---|---|---|---|---|---|")
        for r in acc:
            print(f"| {r['model']} | {r['backend']} | {r['images']} | {r['mean_abs_delta']:.2e} | "
                  f"{r['max_abs_delta']:.2e} | {r['bits_per_dim']:.4f} | "
                  f"{r['stream_images_per_s']:.0f} ({r['stream_images']}) | "
                  f"{r['peak_device_bytes'] / 2**20:.0f} |")


if __name__ == "__main__":
    main()
