#!/usr/bin/env python3
"""Tabulates and plots models learned by pclearn --json (one JSON file per model, as
bench/device/learn_gpu_device.sh leaves them, or files of {"models": [...]} such as
learn_models_<gpu>.json): test bits/dim against K per data set, with the time each took,
against the goal for MNIST (every doubling of K better, <= 1.17 at K = 256). Runs of the
default schedule are drawn with their input smoothing and, where present, without it (runs
older than pclearn --smooth have none); sweep_* and tuned_* runs count for the best point of
any run per K.

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
                got = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{p}: {e}", file=sys.stderr)
            continue
        for m in got.get("models", [got]):
            m["name"] = os.path.basename(m["model"] if "models" in got else p).rsplit(".", 1)[0]
            m.setdefault("smooth", 0)  # pclearn before --smooth
            models.append(m)
    models.sort(key=lambda m: (dataset_of(m), m["latents"], m["smooth"] > 0, m["name"]))
    print("| model | data | K | EM | epochs (mini + full) | pseudocount | smooth (share, width) "
          "| train bpd | test bpd | EM s | total s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        full = sum(1 for e in m["epochs"] if e["full_batch"])
        test = f"{m['test']['bits_per_dim']:.4f}" if "test" in m else "-"
        smooth = f"{m['smooth']:g}, {m['smooth_width']:g}" if m["smooth"] else "none"
        print(f"| {m['name']} | {dataset_of(m)} | {m['latents']} | {m['device']} "
              f"{m['em_precision']} | {len(m['epochs']) - full} + {full} | {m['pseudocount']} "
              f"| {smooth} | {m['train']['bits_per_dim']:.4f} | {test} | {m['em_s']:.1f} | "
              f"{m['total_s']:.1f} |")
    # One panel per data set: their bits/dim differ by 2, which would flatten either curve.
    sets = [ds for ds in sorted({dataset_of(m) for m in models})
            if any(dataset_of(m) == ds and "test" in m for m in models)]
    fig, axes = plt.subplots(1, max(len(sets), 1), figsize=(5.6 * max(len(sets), 1), 5.2),
                             squeeze=False)
    for ax, ds in zip(axes[0], sets):
        series = (("test", True, "o-", "C0", "test"), ("train", True, "s--", "C0", "train"),
                  ("test", False, "o-", "0.6", "test, inputs not smoothed (before --smooth)"))
        for split, smoothed, style, color, label in series:
            pts = sorted((m["latents"], m[split]["bits_per_dim"], m["em_s"]) for m in models
                         if dataset_of(m) == ds and split in m and (m["smooth"] > 0) == smoothed
                         and not m["name"].startswith(("sweep", "tuned")))
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=label)
            if split == "test" and smoothed:
                for k, bpd, sec in pts:
                    ax.annotate(f"{sec:.0f} s", (k, bpd), textcoords="offset points",
                                xytext=(4, 4), fontsize=7)
        # the best test point per K over every run, the sweeps and tuned recipes included
        # (other pseudocounts, schedules and smoothing)
        best = {}
        for m in models:
            if dataset_of(m) == ds and "test" in m:
                k, bpd = m["latents"], m["test"]["bits_per_dim"]
                if k not in best or bpd < best[k][0]:
                    best[k] = (bpd, m["pseudocount"], m["smooth"], m.get("smooth_width", 0))
        pts = sorted((k,) + v for k, v in best.items())
        if any(m["name"].startswith(("sweep", "tuned")) and dataset_of(m) == ds for m in models):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "*:", color="g",
                    label="test, best of any run")
            for k, bpd, pc, sm, w in pts:
                what = f"pc {pc:g}" + (f", smooth {sm:g}/{w:g}" if sm else "")
                ax.annotate(what, (k, bpd), textcoords="offset points", xytext=(4, -10),
                            fontsize=7, color="g")
        if ds == "mnist":
            ax.axhline(1.17, color="r", ls="--", alpha=0.5, label="goal at K = 256: 1.17")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K (latent states)")
        ax.set_ylabel("bits/dim")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        ax.set_title(f"{ds}: pclearn --device cuda (EM seconds at each test point)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


if __name__ == "__main__":
    main()
