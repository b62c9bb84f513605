#!/usr/bin/env python3
"""Plots a result of bench/harness/cpu_lse_compare.py: ns per element vs row length for numpy,
scipy, torch and our fuse / int kernels (one thread), with the single-thread read floor when given.

    python3 bench/harness/cpu_lse_plot.py bench/results/current/cpu_lse_<machine>.json
        [--floor NS] [-o OUT.png]

Writes OUT.png (default: the JSON's name with .png) through a temporary file and a rename."""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "numpy": ("tab:gray", "s", "--"),
    "scipy": ("tab:brown", "v", "--"),
    "torch": ("tab:red", "^", "--"),
    "fuse-avx512": ("tab:blue", "o", "-"),
    "fuse-avx2": ("tab:purple", "o", "-."),
    "fuse-scalar": ("tab:cyan", "o", ":"),
    "int-avx512": ("tab:green", "D", "-"),
    "int-avx2": ("tab:pink", "D", "-."),
    "int-scalar": ("tab:olive", "D", ":"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--floor", type=float, help="single-thread DRAM read floor, ns per float")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    with open(a.json) as f:
        d = json.load(f)
    out = a.out or os.path.splitext(a.json)[0] + ".png"
    fig, ax = plt.subplots(figsize=(10, 5))
    for method, (color, marker, line) in STYLE.items():
        pts = sorted(
            (r["cols"] * r["rows"], r["ns_per_elem"], f"{r['rows']}x{r['cols']}")
            for r in d["results"]
            if r["method"] == method
        )
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts], [p[1] for p in pts], line, color=color, marker=marker, label=method
        )
    if a.floor:
        ax.axhline(a.floor, color="black", lw=0.8, ls="-.", label=f"DRAM read floor ({a.floor} ns)")
    shapes = sorted({(r["cols"] * r["rows"], f"{r['rows']}x{r['cols']}") for r in d["results"]})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([s[0] for s in shapes], [s[1] for s in shapes], rotation=20)
    ax.minorticks_off()
    ax.set_ylabel("ns per element (one thread)")
    cpu = d["meta"]["cpu"]["model"]
    ax.set_title(f"Row-wise log-sum-exp on {cpu}, {d['meta']['date']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    tmp = out + ".tmp"
    fig.savefig(tmp, format="png", dpi=120)
    os.replace(tmp, out)
    print("wrote", out)


if __name__ == "__main__":
    main()
