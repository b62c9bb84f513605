"""Helpers shared by the paper-reproduction (bench/paper), particle-filter and log-probability
(bench/harness) benchmarks: the machine description every result carries, the ctypes binding of
libpcinfer.so, result file names (bench/machine.py's scheme) and atomic writes."""

import argparse
import ctypes
import json
import os
import platform
import re
import subprocess
import tempfile

import numpy as np

from machine import CURRENT, cpu_name, current_base, gpu_name, nvidia_smi, read_cpuinfo

RESULTS = CURRENT

KERNELS = {"ref": 0, "fuse": 1, "int": 2}
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "q10.6": 3}


def cpu_info():
    model, name, flags = platform.processor() or "unknown", *read_cpuinfo()
    if name and model in ("unknown", "x86_64", ""):
        model = name
    wanted = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile"]
    return {"cpu": model, "cpu_flags": [f for f in wanted if f in flags], "cores": os.cpu_count()}


def gpu_info():
    """GPU name, driver and CUDA version, or None when there is no GPU."""
    values = nvidia_smi(["name", "driver_version"])
    if not values:
        return None
    info = {"gpu": values[0], "driver": values[1]}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        nv = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30)
        m = re.search(r"release ([0-9.]+)", nv.stdout)
        if m:
            info["nvcc"] = m.group(1)
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def machine(gpu=False):
    m = cpu_info()
    m["numpy"] = np.__version__
    if gpu:
        g = gpu_info()
        if g:
            m.update(g)
    return m


def machine_name(m):
    """The name of the machine description m in result files: its GPU's when it has one."""
    return gpu_name(m["gpu"]) if "gpu" in m else cpu_name(m["cpu"], m["cores"])


def result_base(name, res):
    """results/current/<name>_<device>_<machine>, without an extension."""
    return current_base("%s_%s" % (name, res["device"]), machine_name(res["machine"]))


def device_parser(doc):
    """Arguments of a script that measures on the CPU, the GPU or both: the build folder,
    --cpu and --gpu (see devices)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    return ap


def devices(args, lib):
    """(CPU part, GPU part) to run: what --cpu and --gpu ask for; with neither, the CPU, and the
    GPU too where this build has one."""
    return args.cpu or not args.gpu, args.gpu or (not args.cpu and lib.cuda_available())


def write_json(path, obj):
    """Writes to a temporary name in the same folder, then renames."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for everyone to read
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def write_text(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.chmod(tmp, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def save_png(fig, path):
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    os.replace(tmp, path)


def pyplot():
    """matplotlib's pyplot with a file-only backend, or None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        return None


class Lib:
    """The entry points of libpcinfer.so (BUILD/src/libpcinfer.so) that the benchmarks call, with
    argument types."""

    def __init__(self, build_dir):
        path = os.path.join(build_dir, "src", "libpcinfer.so")
        self.lib = ctypes.CDLL(os.path.abspath(path))
        L, i64, vp, sz = self.lib, ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
        L.pc_lse_rows.argtypes = [ctypes.c_int, ctypes.c_int, vp, i64, i64, i64, vp, vp]
        L.pc_lse_rows_ref.argtypes = [ctypes.c_int, vp, i64, i64, i64, vp]
        L.pc_last_error.restype = ctypes.c_char_p
        L.pc_cuda_available.restype = ctypes.c_int
        L.pc_lse_rows_cuda.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            vp,
            i64,
            i64,
            i64,
            vp,
            vp,
            ctypes.POINTER(sz),
            vp,
        ]
        self.has_logprob = hasattr(L, "pc_logprob_rows")
        if self.has_logprob:
            L.pc_logprob_rows.argtypes = [ctypes.c_int, ctypes.c_int, vp, i64, i64, i64, vp, vp, vp]
            L.pc_logprob_rows_ref.argtypes = [ctypes.c_int, vp, i64, i64, i64, vp, vp]
            L.pc_logprob_rows_cuda.argtypes = [
                ctypes.c_int,
                ctypes.c_int,
                vp,
                i64,
                i64,
                i64,
                vp,
                vp,
                vp,
                ctypes.POINTER(sz),
                vp,
            ]

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(
                "%s: status %d: %s" % (what, status, self.lib.pc_last_error().decode())
            )

    def lse_rows(self, kernel, dtype, x, cols=None):
        """x: C-contiguous 2-D numpy array (float32, or uint16 / int16 holding f16, bf16, q10.6)."""
        rows, stride = x.shape
        out = np.empty(rows, np.float32)
        self.check(
            self.lib.pc_lse_rows(
                KERNELS[kernel],
                DTYPES[dtype],
                x.ctypes.data,
                rows,
                cols or stride,
                stride,
                out.ctypes.data,
                None,
            ),
            "pc_lse_rows",
        )
        return out

    def lse_rows_ref(self, dtype, x, cols=None):
        rows, stride = x.shape
        out = np.empty(rows, np.float64)
        self.check(
            self.lib.pc_lse_rows_ref(
                DTYPES[dtype], x.ctypes.data, rows, cols or stride, stride, out.ctypes.data
            ),
            "pc_lse_rows_ref",
        )
        return out

    def cuda_available(self):
        return bool(self.lib.pc_cuda_available())

    def lse_rows_cuda(self, kernel, dtype, x_ptr, rows, cols, stride, out_ptr, scratch_ptr, nbytes):
        """Device pointers (ints). With scratch_ptr None returns the scratch bytes needed."""
        n = ctypes.c_size_t(nbytes)
        self.check(
            self.lib.pc_lse_rows_cuda(
                KERNELS[kernel],
                DTYPES[dtype],
                x_ptr,
                rows,
                cols,
                stride,
                out_ptr,
                scratch_ptr,
                ctypes.byref(n),
                None,
            ),
            "pc_lse_rows_cuda",
        )
        return n.value

    def logprob_rows_cuda(
        self, dtype, x_ptr, rows, vocab, stride, t_ptr, out_ptr, scratch_ptr, nbytes
    ):
        n = ctypes.c_size_t(nbytes)
        self.check(
            self.lib.pc_logprob_rows_cuda(
                KERNELS["fuse"],
                DTYPES[dtype],
                x_ptr,
                rows,
                vocab,
                stride,
                t_ptr,
                out_ptr,
                scratch_ptr,
                ctypes.byref(n),
                None,
            ),
            "pc_logprob_rows_cuda",
        )
        return n.value

    def logprob_rows_ref(self, dtype, x, targets):
        rows, vocab = x.shape
        out = np.empty(rows, np.float64)
        t = np.ascontiguousarray(targets, dtype=np.int64)
        self.check(
            self.lib.pc_logprob_rows_ref(
                DTYPES[dtype], x.ctypes.data, rows, vocab, vocab, t.ctypes.data, out.ctypes.data
            ),
            "pc_logprob_rows_ref",
        )
        return out


def to_bf16(x):
    """float32 array -> uint16 bfloat16 bits, round to nearest even (no NaN inputs)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    return (b.astype(np.uint32) << 16).view(np.float32)
