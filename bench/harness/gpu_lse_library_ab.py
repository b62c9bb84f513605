#!/usr/bin/env python3
"""Two builds of the library's row-wise LSE (pc_lse_rows_cuda, fuse) against each other in one
process: for each shape, the error against an FP64 torch LSE, then 4 alternating rounds of the
GPU time per call (a CUDA graph of 20 calls) and the time of one call between two events
(bench/harness/gpu_lse_compare.py's timers; inputs over L2 rotate). Prints a line per shape and
writes the rounds and their medians to OUT.json.

    python3 bench/harness/gpu_lse_library_ab.py OUT.json new=build/src/libpcinfer.so \\
        old=/tmp/build-old/src/libpcinfer.so

Run from the repository root (bench/notebook/gpu_lse_split_h200.md has its runs).
"""

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from gpu_lse_compare import Lib, copies, graph_ms, median_ms  # noqa: E402

SHAPES = [
    (512, 128256, torch.float32),
    (512, 128256, torch.float16),
    (512, 256000, torch.float32),
    (256, 128256, torch.float32),
    (192, 128256, torch.float32),
    (128, 128256, torch.float32),
    (64, 128256, torch.float32),
    (8, 128256, torch.float32),
    (1, 128256, torch.float32),
    (1, 4194304, torch.float32),
    (512, 32768, torch.float32),
    (512, 8192, torch.float32),
]
ROUNDS = 4


def main():
    out_path = sys.argv[1]
    libs = {arg.split("=")[0]: Lib(arg.split("=", 1)[1]) for arg in sys.argv[2:]}
    results = []
    for b, n, dtype in SHAPES:
        x = torch.empty(b, n, device="cuda").uniform_(-4, 4).to(dtype)
        xs = copies(x)
        out = torch.empty(b, device="cuda")
        ref = torch.logsumexp(x.double(), 1)
        row = {"shape": f"{b}x{n} {str(dtype)[6:]}"}
        for name, lib in libs.items():
            out.fill_(float("nan"))  # an unwritten row fails the check
            lib.rows("fuse", x, out)
            torch.cuda.synchronize()
            err = (out.double() - ref).abs() / ref.abs().clamp(min=1)
            row[name + "_maxrel"] = float(err.max())
        for _ in range(ROUNDS):
            for name, lib in libs.items():
                run = lambda t, lib=lib: lib.rows("fuse", t, out)  # noqa: E731
                row.setdefault(name + "_graph", []).append(graph_ms(run, xs, 15))
                row.setdefault(name + "_call", []).append(median_ms(run, xs, 50))
        for name in libs:
            row[name + "_graph_med"] = statistics.median(row[name + "_graph"]) * 1e3
            row[name + "_call_med"] = statistics.median(row[name + "_call"]) * 1e3
        results.append(row)
        print(row["shape"], " ".join(
            f"{nm}: graph {row[nm + '_graph_med']:.2f} us call {row[nm + '_call_med']:.2f} us "
            f"err {row[nm + '_maxrel']:.1e}" for nm in libs), flush=True)
        del xs, x
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
