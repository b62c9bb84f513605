#!/usr/bin/env python3
"""One fuse f32 launch at 512 x 128256 (after two warm-up launches) for an ncu profile:
   ncu --clock-control none --kernel-name regex:rows_block --launch-skip 2 --launch-count 1 \
       --metrics dram__bytes_read.sum \
       python3 bench/profile/gpu_lse_ncu.py --lib build/src/libpcinfer.so
The input is 512 * 128256 * 4 = 262.7 MB; DRAM bytes read near that means one read."""

import argparse
import os
import sys

import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness")
)
from gpu_lse_compare import Lib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib", default="build/src/libpcinfer.so")
args = ap.parse_args()
lib = Lib(args.lib)
x = torch.randn(512, 128256, device="cuda") * 4.0
out = torch.empty(512, device="cuda")
for _ in range(3):
    lib.rows("fuse", x, out)
torch.cuda.synchronize()
print("input bytes", x.numel() * 4)
