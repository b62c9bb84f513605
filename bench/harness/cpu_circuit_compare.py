#!/usr/bin/env python3
"""pcinfer's CPU circuit backends (cpu-fuse, cpu, ref) against the torch peer
(cpu_torch_hclt.py) on MNIST HCLTs, side by side in one process: images/s, the multiply-add
rate against one core's measured FP32 peak, and the error against FP64 on the MNIST test set.

Timing: every round times one pass of each method over the same images, methods interleaved,
rounds repeated (--rounds); each cell is the median round. On one thread the clock is the
thread's CPU time (time.thread_time: pc_evaluate and torch both run on the calling thread
then), so other jobs on a shared machine do not count; on several threads it is wall time.
torch runs at its best batch size, found first by a sweep per model and thread count. ref is
timed on the first --ref-images images only (it is 10-100x slower). pcinfer is called through
ctypes on BUILD/src/libpcinfer.so with one pc_evaluate call per pass.

Peak: one thread's FP32 multiply-add rate in MKL's sgemm (torch.mm of 2048 x 2048, the best of
3), i.e. what this core sustains in practice; the nominal peak is printed beside it.

usage: cpu_circuit_compare.py [--build B] [--data T10K] [--models K=PATH,...] [--rounds 5]
                              [--images 10000] [--kernels cpu-fuse,cpu,ref,torch] [--threads 1,2]
                              [--no-write]
--models defaults to the shipped K = 16 model; give learned K = 32 and K = 64 models (pclearn).
Writes bench/results/current/cpu_circuit_<machine>.json and .md (bench/machine.py names it).
"""
import argparse
import ctypes
import datetime
import json
import os
import re
import statistics
import sys
import time

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # bench/
from cpu_torch_hclt import TorchHclt, read_idx_images  # noqa: E402
from machine import CURRENT, cpu_name, read_cpuinfo  # noqa: E402

BACKENDS = {"ref": 0, "cpu": 1, "cpu-fuse": 2}
TORCH_BATCHES = (64, 128, 256, 512, 1024, 2048)


class EvalOpts(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("max_batch", ctypes.c_int64), ("threads", ctypes.c_int)]


class Pcinfer:
    """ctypes binding of the evaluator API (include/pc/eval.h)."""

    def __init__(self, build):
        self.lib = L = ctypes.CDLL(os.path.join(build, "src", "libpcinfer.so"))
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        L.pc_last_error.restype = ctypes.c_char_p
        L.pc_hclt_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp)]
        L.pc_circuit_compile.argtypes = [vp, ctypes.POINTER(vp)]
        L.pc_evaluator_create.argtypes = [vp, ctypes.POINTER(EvalOpts), ctypes.POINTER(vp)]
        L.pc_evaluator_free.argtypes = [vp]
        # pc_evaluate gained the data's width after this script was written: read which form
        # this tree declares.
        with open(os.path.join(ROOT, "include", "pc", "eval.h")) as f:
            decl = re.search(r"pc_evaluate\(([^;]*)\);", f.read()).group(1)
        self.with_width = "width" in decl
        L.pc_evaluate.argtypes = [vp, vp, vp, i64] + ([i64] if self.with_width else []) + [vp]

    def check(self, status, what):
        if status != 0:
            sys.exit("%s: %s" % (what, self.lib.pc_last_error().decode()))

    def circuit(self, path):
        m, c = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.pc_hclt_load(path.encode(), ctypes.byref(m)), path)
        self.check(self.lib.pc_circuit_compile(m, ctypes.byref(c)), path)
        return c

    def evaluator(self, circuit, kernel, n, threads):
        e = ctypes.c_void_p()
        opts = EvalOpts(BACKENDS[kernel], n, threads)
        self.check(self.lib.pc_evaluator_create(circuit, ctypes.byref(opts), ctypes.byref(e)),
                   kernel)
        return e

    def evaluate(self, e, x):
        out = np.empty(len(x), dtype=np.float64)
        args = [e, x.ctypes.data, None, len(x)] + ([x.shape[1]] if self.with_width else [])
        self.check(self.lib.pc_evaluate(*args, out.ctypes.data), "pc_evaluate")
        return out


def timed(fn, threads):
    """(wall seconds, CPU seconds) of fn(): the calling thread's CPU time on one thread, the
    process's (every thread's, spinning included) on more."""
    cpu = time.thread_time if threads == 1 else time.process_time
    w0, c0 = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - w0, cpu() - c0


def sgemm_peak():
    """One thread's FP32 multiply-adds per second in sgemm (2048^3), best of 3."""
    torch.set_num_threads(1)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a, b)
    best = min(timed(lambda: torch.mm(a, b), 1)[1] for _ in range(3))
    return 2048.0**3 / best


def model_macs(path):
    """Multiply-adds per image in the sum layers: K^2 per transition row, K for the root."""
    with h5py.File(path, "r") as f:
        T, K = f["params/trans_logw"].shape[0], int(f.attrs["num_latents"])
    return T * K * K + K, K


def find_mnist():
    for d in ("datasets/mnist", "../shared/datasets/mnist"):
        p = os.path.join(ROOT, d, "t10k-images-idx3-ubyte.gz")
        if os.path.exists(p):
            return p
    sys.exit("MNIST test images not found: pass --data")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=None)
    ap.add_argument("--models", default="16=" + os.path.join(ROOT, "models", "mnist.h5"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--ref-images", type=int, default=2000)
    ap.add_argument("--kernels", default="cpu-fuse,cpu,ref,torch")
    ap.add_argument("--threads", default="1,%d" % os.cpu_count())
    ap.add_argument("--note", default="", help="how the models were made (goes into the .md)")
    ap.add_argument("--merge", action="store_true",
                    help="replace only the measured (K, threads) rows of the current result file")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    x = np.ascontiguousarray(read_idx_images(a.data or find_mnist(), a.images))
    lib = Pcinfer(os.path.abspath(a.build))
    kernels = a.kernels.split(",")
    thread_counts = [int(t) for t in a.threads.split(",")]
    peak = sgemm_peak()
    model_name, flags = read_cpuinfo()
    res = {"date": datetime.date.today().isoformat(), "cpu": model_name, "cores": os.cpu_count(),
           "flags": [f for f in flags if f.startswith("avx") or f == "fma"],
           "isa": os.environ.get("PC_CPU_ISA", "best"), "torch": torch.__version__,
           "sgemm_fma_per_s": peak, "load_before": os.getloadavg(), "rounds": a.rounds,
           "images": len(x), "ref_images": min(a.ref_images, len(x)), "note": a.note, "models": []}
    print("sgemm peak, 1 thread: %.1f G FMA/s" % (peak / 1e9), file=sys.stderr)
    for spec in a.models.split(","):
        K, path = spec.split("=", 1)
        macs, _ = model_macs(path)
        circuit = lib.circuit(path)
        ref_all = lib.evaluate(lib.evaluator(circuit, "ref", len(x), 0), x)
        entry = {"K": int(K), "model": os.path.basename(path), "macs_per_image": macs,
                 "accuracy": {}, "timing": []}
        for t in thread_counts:
            methods = {}
            for k in kernels:
                if k == "torch":
                    peer = TorchHclt(path, t)
                    sub = x[:2000]
                    rates = {b: len(sub) / timed(lambda: peer.score(sub, b), t)[0 if t > 1 else 1]
                             for b in TORCH_BATCHES}
                    best = max(rates, key=rates.get)
                    methods["torch"] = (lambda p=peer, b=best: p.score(x, b), len(x), best)
                    if t == thread_counts[0]:
                        d = np.abs(peer.score(x, best).numpy() - ref_all)
                        entry["accuracy"]["torch"] = [float(d.mean()), float(d.max())]
                    continue
                e = lib.evaluator(circuit, k, len(x), t)
                xs = x[: a.ref_images] if k == "ref" else x
                methods[k] = (lambda e=e, xs=xs: lib.evaluate(e, xs), len(xs), None)
                if k != "ref" and t == thread_counts[0]:
                    d = np.abs(lib.evaluate(e, x) - ref_all)
                    entry["accuracy"][k] = [float(d.mean()), float(d.max())]
            runs = {k: [] for k in methods}
            for _ in range(a.rounds):
                torch.set_num_threads(t)
                for k, (fn, n, _) in methods.items():
                    wall, cpu = timed(fn, t)
                    runs[k].append((n / wall, n / cpu))
            for k, (fn, n, batch) in methods.items():
                # One thread: the thread's CPU time (other jobs do not count); more: wall time,
                # and per core the images per CPU second of all the process's threads.
                ips = statistics.median(r[1] if t == 1 else r[0] for r in runs[k])
                per_core = statistics.median(r[1] for r in runs[k])
                row = {"threads": t, "method": k, "images_per_second": ips,
                       "images_per_cpu_second": per_core, "runs_wall_cpu": runs[k],
                       "fma_per_s": ips * macs, "fraction_of_sgemm_peak": per_core * macs / peak,
                       "clock": "thread CPU" if t == 1 else "wall"}
                if batch:
                    row["batch"] = batch
                entry["timing"].append(row)
                print("K=%s threads=%d %-8s %9.0f images/s %9.0f per core  %5.1f%% of peak" %
                      (K, t, k, ips, per_core, 100 * row["fraction_of_sgemm_peak"]),
                      file=sys.stderr)
        res["models"].append(entry)
        for k, (mean, mx) in entry["accuracy"].items():
            print("K=%s %-8s |delta| vs ref mean %.2e max %.2e" % (K, k, mean, mx), file=sys.stderr)
    res["load_after"] = os.getloadavg()
    if a.merge:
        res = merge(res)
    if not a.no_write:
        write(res)


def result_base(cpu, cores):
    return os.path.join(CURRENT, "cpu_circuit_" + cpu_name(cpu, cores))


def merge(new):
    """The current result file with new's (K, threads) rows put in place of its own (a re-run
    of some points, e.g. the all-thread ones once the shared machine is quiet); each replaced
    point keeps the load average of its own run."""
    with open(result_base(new["cpu"], new["cores"]) + ".json") as f:
        old = json.load(f)
    for m in new["models"]:
        for row in m["timing"]:
            row["load"] = [new["load_before"][0], new["load_after"][0]]
        into = next((o for o in old["models"] if o["K"] == m["K"]), None)
        if into is None:
            old["models"].append(m)
            continue
        done = {r["threads"] for r in m["timing"]}
        into["timing"] = [r for r in into["timing"] if r["threads"] not in done] + m["timing"]
        into["accuracy"].update(m["accuracy"])
    old.setdefault("merged_runs", []).append(
        {"date": new["date"], "load": [new["load_before"][0], new["load_after"][0]],
         "points": [[m["K"], sorted({r["threads"] for r in m["timing"]})]
                    for m in new["models"]]})
    return old


def write(res):
    base = result_base(res["cpu"], res["cores"])
    with open(base + ".json.tmp", "w") as f:
        json.dump(res, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    lines = [
        "# CPU circuit backends against a torch implementation, MNIST HCLTs",
        "",
        "%s, %s; %d logical CPUs; torch %s (MKL); %s; pcinfer ISA: %s." % (
            res["date"], res["cpu"], res["cores"], res["torch"], " ".join(res["flags"]),
            res["isa"]),
        "%d MNIST test images (ref: the first %d), %d interleaved rounds, median; 1 thread: "
        "thread CPU time, more: wall time (per core: images per CPU second of all threads). "
        "Peak: 1 thread's sgemm rate, %.1f G FMA/s; %% of peak per core. Load average before "
        "%.1f, after %.1f." % (
            res["images"], res["ref_images"], res["rounds"], res["sgemm_fma_per_s"] / 1e9,
            res["load_before"][0], res["load_after"][0]),
        res["note"],
        "",
        "| K | threads | torch (batch) | cpu-fuse | cpu (IntLSE) | ref | fuse / torch | "
        "per core | cpu / fuse | fuse % of peak | cpu % | torch % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in res["models"]:
        for t in sorted({r["threads"] for r in m["timing"]}):
            r = {x["method"]: x for x in m["timing"] if x["threads"] == t}

            def cell(k, key="images_per_second"):
                return "%.0f" % r[k][key] if k in r else "-"

            def ratio(a, b, key="images_per_second"):
                return "%.2f" % (r[a][key] / r[b][key]) if a in r and b in r else "-"

            def pct(k):
                return "%.1f" % (100 * r[k]["fraction_of_sgemm_peak"]) if k in r else "-"

            lines.append("| %d | %d | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m["K"], t, cell("torch"), r.get("torch", {}).get("batch", "-"), cell("cpu-fuse"),
                cell("cpu"), cell("ref"), ratio("cpu-fuse", "torch"),
                ratio("cpu-fuse", "torch", "images_per_cpu_second"), ratio("cpu", "cpu-fuse"),
                pct("cpu-fuse"), pct("cpu"), pct("torch")))
    if res.get("merged_runs"):
        lines.append("")
    for run in res.get("merged_runs", []):
        lines.append("Re-run %s (load average %.1f, %.1f): %s." % (
            run["date"], run["load"][0], run["load"][1],
            ", ".join("K = %d at %s threads" % (k, "/".join(map(str, t)))
                      for k, t in run["points"])))
    lines += ["", "Mean and max |delta| against ref (FP64), nats per image, all images:", "",
              "| K | method | mean | max |", "|---|---|---|---|"]
    for m in res["models"]:
        for k, (mean, mx) in m["accuracy"].items():
            lines.append("| %d | %s | %.2e | %.2e |" % (m["K"], k, mean, mx))
    with open(base + ".md.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(base + ".md.tmp", base + ".md")
    print(base + ".md", file=sys.stderr)


if __name__ == "__main__":
    main()
