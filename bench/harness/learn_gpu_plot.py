#!/usr/bin/env python3
"""Plots and tabulates bench/harness/learn_gpu_bench.c's JSON: one mini-batch EM step against K
at each batch, FP64 and FP32 modes, next to PyJuice 2.6.3's best mode (measured in the same run
by learn_pyjuice.py when its JSON is given, else the issue's H200 figures), the goal (5x faster
than PyJuice, at most 3x our own forward pass), and the epoch times.

usage: learn_gpu_plot.py RESULTS.json OUT.png [PYJUICE.json]   (Markdown tables to stdout)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# PyJuice 2.6.3 on an MNIST HCLT, one mini-batch EM step, best of eager and CUDA-graph mode,
# H200, December 2026 (the issue's table, TARGETS.md).
PYJUICE_ISSUE_MS = {
    (16, 512): 2.82, (32, 512): 3.33, (64, 512): 4.53, (128, 512): 6.29,
    (16, 4096): 6.34, (32, 4096): 10.11, (64, 4096): 18.10, (128, 4096): 33.72,
}


def pyjuice_best(path):
    """(K, batch) -> (best ms, mode) from learn_pyjuice.py's JSON."""
    best = {}
    with open(path) as f:
        for p in json.load(f)["results"]:
            key = (p["K"], p["batch"])
            if key not in best or p["ms"] < best[key][0]:
                best[key] = (p["ms"], p["mode"])
    return best


def main():
    res = json.load(open(sys.argv[1]))
    out_png = sys.argv[2]
    measured = pyjuice_best(sys.argv[3]) if len(sys.argv) > 3 else {}
    steps = [r for r in res["results"] if r["kind"] == "step"]
    epochs = [r for r in res["results"] if r["kind"] == "epoch"]
    print(f"device: {res['device']}; medians of {res['reps']} runs\n")
    print("| K | batch | mode | EM step ms | pass ms (GPU): forward + downward + flows "
          "| engine forward ms | step / forward | PyJuice best ms | speed-up "
          "| goal (5x, <= 3x fwd) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(steps, key=lambda r: (r["batch"], r["K"], r["mode"])):
        key = (r["K"], r["batch"])
        pj, src = (measured[key][0], measured[key][1]) if key in measured else (
            PYJUICE_ISSUE_MS.get(key), "issue")
        ratio = r["step_ms"] / r["forward_ms"]
        speed = pj / r["step_ms"] if pj else None
        ok = speed is not None and speed >= 5 and ratio <= 3
        print(f"| {r['K']} | {r['batch']} | {r['mode']} | {r['step_ms']:.3f} | "
              f"{r['pass_ms']:.3f}: {r['em_forward_ms']:.3f} + {r['downward_ms']:.3f} + "
              f"{r['flows_ms']:.3f} | {r['forward_ms']:.3f} | {ratio:.2f} | "
              + (f"{pj:.2f} ({src}) | {speed:.1f}x | {'met' if ok else 'missed'} |"
                 if pj else "- | - | - |"))
    if epochs:
        print("\n| K | mode | mini-batch epoch (512) s | full-batch epoch s | rows |")
        print("|---|---|---|---|---|")
        for r in sorted(epochs, key=lambda r: (r["K"], r["mode"])):
            print(f"| {r['K']} | {r['mode']} | {r['minibatch_s']:.2f} | {r['full_s']:.2f} | "
                  f"{r['rows']} |")

    batches = sorted({r["batch"] for r in steps})
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    for ax, b in zip(axes[0], batches):
        for mode, style in (("f64", "o-"), ("f32", "s-")):
            pts = sorted((r["K"], r["step_ms"]) for r in steps
                         if r["batch"] == b and r["mode"] == mode)
            if pts:
                ax.plot(*zip(*pts), style, label=f"pcinfer EM step ({mode.upper()})")
        fwd = sorted({(r["K"], r["forward_ms"]) for r in steps if r["batch"] == b})
        ax.plot([k for k, _ in fwd], [3 * f for _, f in fwd], "k:", label="3x pcinfer forward")
        for table, style, label in ((measured, "^-", "PyJuice best (this run)"),
                                    (PYJUICE_ISSUE_MS, "^--", "PyJuice best (issue)")):
            pts = sorted((k, v[0] if isinstance(v, tuple) else v) for (k, bb), v in
                         table.items() if bb == b)
            if pts:
                ax.plot(*zip(*pts), style, alpha=0.7, label=label)
                ax.plot([k for k, _ in pts], [v / 5 for _, v in pts], "r--", alpha=0.5,
                        label=f"goal: {label.split(' (')[0]} / 5")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K (latent states)")
        ax.set_ylabel("ms per mini-batch EM step")
        ax.set_title(f"batch {b}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Mini-batch EM on an MNIST HCLT: {res['device']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


if __name__ == "__main__":
    main()
