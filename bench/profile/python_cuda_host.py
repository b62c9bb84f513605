#!/usr/bin/env python3
"""Where the host time of a small pcinfer.logsumexp call on a CUDA tensor goes.

For one shape (default 512 x 128 float32, where the kernel takes ~2 us and the host path is
most of the call), the host microseconds per call of each step the package takes, timed alone
back to back (the least over rounds of 200 calls, no synchronisation inside a round), beside
the whole call, torch.logsumexp, and one torch kernel launch (x.neg()) as the floor of "a torch
op that allocates its result and launches one kernel". Then the event time of one call
(ms/call as bench/harness/python_overhead.py counts it) for the package, the extension call
alone with its output made beforehand, torch.logsumexp, and nothing at all between the two
events (the fixed cost of the method).

    PYTHONPATH=SITE python3 bench/profile/python_cuda_host.py [--rows 512 --cols 128] [--json F]
"""

import argparse
import json
import statistics
import time

import torch

import pcinfer
from pcinfer import _core, _torch


def host_us(fn, calls=200, rounds=25):
    """The least over rounds of the wall time per call of `calls` calls, synchronising between
    rounds: 200 launches stay below the depth of a stream's queue (about 1,000), so a round
    times the host, not the GPU draining a full queue."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def events_us(fn, reps=400):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--json")
    args = ap.parse_args()
    x = torch.randn(args.rows, args.cols, device="cuda") * 4
    dev = x.get_device()
    stream = _torch._raw_stream(dev)
    out = torch.empty(args.rows, device="cuda")
    kern = pcinfer._arrays.parse("lse_kernel", "fuse")
    code = _torch._DTYPES[torch.float32]
    need = _core.lse_rows_cuda(kern, code, x.data_ptr(), args.rows, args.cols, args.cols,
                               out.data_ptr(), 0, 0, stream, dev, 0)
    scratch = torch.empty(max(need, 4096), dtype=torch.uint8, device="cuda")
    sp, sn = scratch.data_ptr(), scratch.numel()
    xp, op = x.data_ptr(), out.data_ptr()
    R, C = args.rows, args.cols

    steps = {
        "pcinfer.logsumexp (whole call)": lambda: pcinfer.logsumexp(x, dim=1),
        "torch.logsumexp": lambda: torch.logsumexp(x, 1),
        "x.neg() (one torch op: alloc + 1 kernel)": lambda: x.neg(),
        "x.new_empty(rows, float32)": lambda: x.new_empty(R, dtype=torch.float32),
        "torch.empty(rows, device=x.device)": lambda: torch.empty(R, device=x.device),
        "_core.lse_rows_cuda, output made (C layer + launch)":
            lambda: _core.lse_rows_cuda(kern, code, xp, R, C, C, op, sp, sn, stream, dev, 0),
        "_core.lse_rows_cuda, size query only (no launch)":
            lambda: _core.lse_rows_cuda(kern, code, xp, R, C, C, op, 0, 0, stream, dev, 0),
        "_core.status_str (empty extension call)": lambda: _core.status_str(0),
        "_current_device()": lambda: _torch._current_device(),
        "_raw_stream(dev)": lambda: _torch._raw_stream(dev),
        "_capturing()": lambda: _torch._capturing(),
        "x.data_ptr()": lambda: x.data_ptr(),
        "x.get_device()": lambda: x.get_device(),
        "x.is_contiguous()": lambda: x.is_contiguous(),
        "x.shape unpack": lambda: tuple(x.shape),
        "x.requires_grad and torch.is_grad_enabled()":
            lambda: x.requires_grad and torch.is_grad_enabled(),
        "_arrays.parse('lse_kernel', 'fuse')": lambda: pcinfer._arrays.parse("lse_kernel", "fuse"),
    }
    res = {"rows": R, "cols": C, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "host_us": {}, "event_us": {}}
    for name, fn in steps.items():
        res["host_us"][name] = host_us(fn)
    ev = {
        "nothing between the events": lambda: None,
        "pcinfer.logsumexp": lambda: pcinfer.logsumexp(x, dim=1),
        "_core.lse_rows_cuda, output made":
            lambda: _core.lse_rows_cuda(kern, code, xp, R, C, C, op, sp, sn, stream, dev, 0),
        "torch.logsumexp": lambda: torch.logsumexp(x, 1),
        "x.neg()": lambda: x.neg(),
    }
    for name, fn in ev.items():
        res["event_us"][name] = events_us(fn)
    print("%d x %d f32 on %s, torch %s" % (R, C, res["gpu"], res["torch"]))
    print("host us per call (back to back):")
    for name, v in res["host_us"].items():
        print("  %8.2f  %s" % (v, name))
    print("event us per call (median):")
    for name, v in res["event_us"].items():
        print("  %8.2f  %s" % (v, name))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
