#!/usr/bin/env python3
"""Compares two runs of the GPU circuit benchmark (bench/harness/gpu_circuit_bench.c JSON), such
as the tree before and after a change, each run in its own call on the same machine type.

Prints one table of every timing point both runs hold (variant, K, batch: the strategy, ms
before and after, after / before) and one of the accuracy points (mean |delta| against ref,
and the streamed images per second), and marks every point that lost more than the tolerance:
a time more than TOL slower, or an error more than TOL larger. Exits with 1 when one did.

usage: bench/harness/gpu_circuit_compare.py BEFORE.json AFTER.json [--tolerance 0.03]
"""

import argparse
import json
import sys


def load(path):
    res = json.load(open(path))["results"]
    timing = {(r["backend"], r["K"], r["batch"]): r for r in res if r["kind"] == "timing"}
    accuracy = {(r["model"], r["backend"]): r for r in res if r["kind"] == "accuracy"}
    return timing, accuracy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--tolerance", type=float, default=0.03)
    a = ap.parse_args()
    (t0, c0), (t1, c1) = load(a.before), load(a.after)
    tol, lost = a.tolerance, 0
    print("| variant | K | batch | strategy | before ms | after ms | after / before | |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(t0.keys() & t1.keys(), key=lambda k: (k[0], k[2], k[1])):
        b, n = t0[key], t1[key]
        ratio = n["ms"] / b["ms"]
        mark = "slower by more than %g %%" % (100 * tol) if ratio > 1 + tol else ""
        lost += bool(mark)
        strategy = (
            b["strategy"]
            if b["strategy"] == n["strategy"]
            else "%s -> %s" % (b["strategy"], n["strategy"])
        )
        print(
            "| %s | %d | %d | %s | %.4f | %.4f | %.3f | %s |"
            % (key[0], key[1], key[2], strategy, b["ms"], n["ms"], ratio, mark)
        )
    print()
    print("| model | backend | mean abs delta before | after | images/s before | after | |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(c0.keys() & c1.keys()):
        b, n = c0[key], c1[key]
        worse = n["mean_abs_delta"] > b["mean_abs_delta"] * (1 + tol)
        lost += worse
        print(
            "| %s | %s | %.3e | %.3e | %.0f | %.0f | %s |"
            % (
                key[0],
                key[1],
                b["mean_abs_delta"],
                n["mean_abs_delta"],
                b["stream_images_per_s"],
                n["stream_images_per_s"],
                "error larger by more than %g %%" % (100 * tol) if worse else "",
            )
        )
    only = (t0.keys() ^ t1.keys()) | (c0.keys() ^ c1.keys())
    if only:
        print(
            "\nIn one run only: " + ", ".join(" ".join(map(str, k)) for k in sorted(only, key=str))
        )
    print("\n%d point(s) lost more than %g %%" % (lost, 100 * tol))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
