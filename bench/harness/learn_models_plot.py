#!/usr/bin/env python3
"""Tabulates and plots models learned by pclearn --json (one JSON file per model, as
bench/device/learn_gpu_device.sh leaves them): test bits/dim against K per data set, with the
time each took, against the goal for MNIST (every doubling of K better, <= 1.17 at K = 256).

usage: learn_models_plot.py OUT.png MODEL.json...   (a Markdown table to stdout)
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def dataset_of(m):
    return "fashion-mnist" if "fashion" in m["data"] else "mnist"


def main():
    out_png, paths = sys.argv[1], sys.argv[2:]
    models = []
    for p in paths:
        try:
            with open(p) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{p}: {e}", file=sys.stderr)
            continue
        m["name"] = os.path.basename(p)[:-5]
        models.append(m)
    models.sort(key=lambda m: (dataset_of(m), m["latents"], m["name"]))
    print("| model | data | K | EM | epochs (mini + full) | pseudocount | train bpd | test bpd "
          "| EM s | total s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        full = sum(1 for e in m["epochs"] if e["full_batch"])
        test = f"{m['test']['bits_per_dim']:.4f}" if "test" in m else "-"
        print(f"| {m['name']} | {dataset_of(m)} | {m['latents']} | {m['device']} "
              f"{m['em_precision']} | {len(m['epochs']) - full} + {full} | {m['pseudocount']} "
              f"| {m['train']['bits_per_dim']:.4f} | {test} | {m['em_s']:.1f} | "
              f"{m['total_s']:.1f} |")
    # One panel per data set: their bits/dim differ by 2, which would flatten either curve.
    sets = [ds for ds in sorted({dataset_of(m) for m in models})
            if any(dataset_of(m) == ds and "test" in m for m in models)]
    fig, axes = plt.subplots(1, max(len(sets), 1), figsize=(5.0 * max(len(sets), 1), 4.2),
                             squeeze=False)
    for ax, ds in zip(axes[0], sets):
        for split, style in (("test", "o-"), ("train", "s--")):
            pts = sorted((m["latents"], m[split]["bits_per_dim"], m["em_s"]) for m in models
                         if dataset_of(m) == ds and split in m
                         and not m["name"].startswith("sweep"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=split)
            if split == "test":
                for k, bpd, sec in pts:
                    ax.annotate(f"{sec:.0f} s", (k, bpd), textcoords="offset points",
                                xytext=(4, 4), fontsize=7)
        # the best test point per K over every run, the sweeps included (other pseudocounts and
        # schedules), where it beats the default schedule's
        best = {}
        for m in models:
            if dataset_of(m) == ds and "test" in m:
                k, bpd = m["latents"], m["test"]["bits_per_dim"]
                if k not in best or bpd < best[k][0]:
                    best[k] = (bpd, m["pseudocount"])
        pts = sorted((k, b, pc) for k, (b, pc) in best.items())
        if any(m["name"].startswith("sweep") and dataset_of(m) == ds for m in models):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "*:", color="g",
                    label="test, best of any run")
            for k, bpd, pc in pts:
                ax.annotate(f"pc {pc:g}", (k, bpd), textcoords="offset points", xytext=(4, -10),
                            fontsize=7, color="g")
        if ds == "mnist":
            ax.axhline(1.17, color="r", ls="--", alpha=0.5, label="goal at K = 256: 1.17")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K (latent states)")
        ax.set_ylabel("bits/dim")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{ds}: pclearn --device cuda (EM seconds at each test point)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


if __name__ == "__main__":
    main()
