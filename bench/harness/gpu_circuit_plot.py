#!/usr/bin/env python3
"""Plots and tabulates bench/harness/gpu_circuit_bench.c's JSON: forward time vs K at each batch for
fuse, int and gemm, next to PyJuice 2.6.3's best mode (CUDA graph) on the same GPU model, as
measured for the project's targets card, TARGETS.md (PyJuice is not installed on the benchmark
machine), and the targets (3x PyJuice, 5x at batch 512 for K <= 128). Given the JSON of
bench/lab/gpu_product_floor.cu, also the exact product alone: cuBLAS's faster of SGEMM (FP32) and
DGEMM (FP64 tensor cores) over every sum group at once, a floor under any forward pass.

usage: gpu_circuit_plot.py RESULTS.json OUT.png [PRODUCT_FLOOR.json]
       (prints a Markdown table to stdout)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# PyJuice 2.6.3, HCLT on MNIST, forward, CUDA graph recorded; H200; ms (TARGETS.md).
PYJUICE_MS = {
    (16, 512): 0.56,
    (32, 512): 0.54,
    (64, 512): 0.64,
    (128, 512): 1.45,
    (256, 512): 2.72,
    (16, 4096): 0.74,
    (32, 4096): 1.28,
    (64, 4096): 2.15,
    (128, 4096): 6.19,
    (256, 4096): 18.0,
}
FP32_PEAK = 67e12  # H200 plain FP32 FLOP/s
EXACT_MODES = ("sgemm", "dgemm")  # gpu_product_floor's exact products
READ_BW = 4.33e12  # H200 full-read bandwidth measured with torch.sum (TARGETS.md)


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


def target_ms(k, b):
    """TARGETS.md: 3x PyJuice's best mode, 5x at batch 512 for K <= 128."""
    pj = PYJUICE_MS.get((k, b))
    return pj / (5 if b == 512 and k <= 128 else 3) if pj else None


def exact_floor(path):
    """(K, batch) -> ms of the faster exact cuBLAS product, from gpu_product_floor's JSON."""
    floor = {}
    for r in json.load(open(path)) if path else []:
        if r["mode"] in EXACT_MODES:
            key = (r["K"], r["batch"])
            floor[key] = min(floor.get(key, float("inf")), r["ms"])
    return floor


def main():
    res = json.load(open(sys.argv[1]))
    floor = exact_floor(sys.argv[3] if len(sys.argv) > 3 else None)
    timing = [r for r in res["results"] if r["kind"] == "timing"]
    batches = sorted({r["batch"] for r in timing})
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    print(f"GPU: {res['gpu']}\n")
    print(
        "| backend | strategy | K | batch | ms | PyJuice ms | speed-up | TFLOP/s | % FP32 peak | "
        "compute floor ms | exact product (cuBLAS) ms | read floor ms | bound | peak MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    styles = (
        ("fuse", "o-"),
        ("fuse-persistent", "o:"),
        ("fuse-tile", "o--"),
        ("fuse-warp", "o-."),
        ("gemm", "s-"),
        ("int", "^-"),
    )
    for ax, b in zip(axes[0], batches):
        for be, style in styles:
            pts = sorted((r["K"], r) for r in timing if r["batch"] == b and r["backend"] == be)
            if not pts:
                continue
            ax.plot([k for k, _ in pts], [r["ms"] for _, r in pts], style, label=be)
            for k, r in pts:
                pj = PYJUICE_MS.get((k, b))
                c, m, what = bound(r)
                fl = floor.get((k, b))
                print(
                    f"| {be} | {r.get('strategy', '-')} | {k} | {b} | {r['ms']:.4f} | "
                    f"{pj if pj else '-'} | "
                    f"{(pj / r['ms']) if pj else float('nan'):.2f}x | "
                    f"{r['flop'] / r['ms'] * 1e-9:.2f} | "
                    f"{100 * r['flop'] / (r['ms'] * 1e-3) / FP32_PEAK:.1f} | {c * 1e3:.4f} | "
                    f"{f'{fl:.4f}' if fl else '-'} | "
                    f"{m * 1e3:.4f} | {what} | {r['peak_device_bytes'] / 2**20:.0f} |"
                )
        ks = sorted(k for (k, bb) in PYJUICE_MS if bb == b)
        ax.plot(ks, [PYJUICE_MS[(k, b)] for k in ks], "k--", label="PyJuice 2.6.3 (graph)")
        ax.plot(
            ks,
            [target_ms(k, b) for k in ks],
            "r_",
            markersize=14,
            mew=2,
            label="target (3x PyJuice; 5x at 512, K <= 128)",
        )
        fk = sorted(k for (k, bb) in floor if bb == b)
        if fk:
            ax.plot(
                fk,
                [floor[(k, b)] for k in fk],
                "x:",
                color="gray",
                label="exact product alone (cuBLAS)",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K (latent states)")
        ax.set_ylabel("forward ms per batch")
        ax.set_title(f"MNIST HCLT, batch {b}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(res["gpu"], fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    acc = [r for r in res["results"] if r["kind"] == "accuracy"]
    if acc:
        print(
            "\n| model | backend | images | mean abs Delta (nats) | max abs Delta | "
            "bits/dim (ref) | images/s end to end | peak MiB |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in acc:
            print(
                f"| {r['model']} | {r['backend']} | {r['images']} | {r['mean_abs_delta']:.2e} | "
                f"{r['max_abs_delta']:.2e} | {r['bits_per_dim']:.4f} | "
                f"{r['stream_images_per_s']:.0f} ({r['stream_images']}) | "
                f"{r['peak_device_bytes'] / 2**20:.0f} |"
            )


if __name__ == "__main__":
    main()
