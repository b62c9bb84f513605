"""Row-wise log-sum-exp and token log-probabilities over NumPy arrays (CPU kernels); torch
tensors go to _torch (CPU or CUDA kernels, autograd)."""

import sys

import numpy as np

from . import _arrays, _core
from ._errors import Error

F32, F16, BF16 = 0, 1, 2  # pc_dtype values


_torch = None  # pcinfer._torch once a torch tensor came (torch is imported by its users only)


def _torch_module(x):
    """pcinfer._torch for a torch.Tensor, else None; the import is done once, not per call."""
    global _torch
    if _torch is None:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, torch.Tensor):
            return None
        from . import _torch
    return _torch if isinstance(x, _torch.torch.Tensor) else None


def _np_dtype(a, what):
    """The pc_dtype of an array's elements and the array as the C call reads it (bf16 as its
    uint16 bits)."""
    if a.dtype == np.float32:
        return F32, a
    if a.dtype == np.float16:
        return F16, a
    if a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:  # ml_dtypes' bfloat16
        return BF16, a.view(np.uint16)
    raise Error(
        "%s: %s is not an input type of the LSE kernels (float32, float16, bfloat16); "
        "convert with .astype(numpy.float32)" % (what, a.dtype),
        _core.ERR_ARG,
    )


def reduced_dims(ndim, dim):
    """The dims reduced, each in 0..ndim-1, from an int or a tuple of ints."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not isinstance(d, int) or not -ndim <= d < ndim:
            raise Error("dim %r is out of range for %d dimensions" % (d, ndim), _core.ERR_ARG)
        out.append(d % ndim)
    if len(set(out)) != len(out) or not out:
        raise Error("dim %r: name each dimension once" % (dim,), _core.ERR_ARG)
    return out


def _rows(a, dim, keepdim):
    """a as [rows, cols] with the reduced dims last (a view when the strides allow), and the
    shape of the result."""
    if a.ndim == 2 and (dim == -1 or dim == 1) and not keepdim:
        rows, shape = a, a.shape[:1]
    else:
        dims = reduced_dims(a.ndim, dim)
        kept = [d for d in range(a.ndim) if d not in dims]
        cols = int(np.prod([a.shape[d] for d in dims]))
        moved = a.transpose(kept + dims)
        rows = moved.reshape(int(np.prod(moved.shape[: len(kept)])), cols)
        if keepdim:
            shape = tuple(1 if d in dims else a.shape[d] for d in range(a.ndim))
        else:
            shape = tuple(a.shape[d] for d in kept)
    n, cols = rows.shape
    s0, s1 = rows.strides
    item = rows.itemsize
    if (cols > 1 and s1 != item) or (n > 1 and (s0 < cols * item or s0 % item)):
        rows = np.ascontiguousarray(rows)
    return rows, shape


def _cpu_opts(threads, isa):
    return (1 if threads is None else threads), _arrays.parse("isa", isa)


def logsumexp(x, dim=-1, keepdim=False, kernel="fuse", threads=None, isa="auto", out=None):
    """log(sum(exp(x))) over `dim` (an int or a tuple of ints), like torch.logsumexp.

    NumPy arrays (float32, float16, ml_dtypes' bfloat16) run on the CPU kernels and give
    float32, or float64 with kernel="ref" (the FP64 reference); torch tensors (CPU or CUDA,
    float32 / float16 / bfloat16) give a tensor of the input's dtype on its device, and are
    differentiable. kernel: fuse (FP32, one pass), int (IntLSE, f32 only) or ref. threads:
    CPU threads (None: the calling thread only); isa: auto, scalar, avx2, avx512.
    out: an array or tensor of the result's shape to write into and return instead of a new
    one, C-contiguous, float32 (float64 for ref) whatever the input's dtype, on x's device; it
    saves the allocation (4 us of a 14 us CUDA call) and is not differentiable."""
    torch_module = _torch_module(x)
    if torch_module is not None:
        return torch_module.logsumexp(x, dim, keepdim, kernel, threads, isa, out)
    kern = _arrays.parse("lse_kernel", kernel)
    dtype, a = _np_dtype(np.asarray(x), "x")
    rows, shape = _rows(a, dim, keepdim)
    want = np.float64 if kern == 0 else np.float32
    if out is None:
        res = np.empty(rows.shape[0], want)
    elif (type(out) is not np.ndarray or out.dtype != want or out.shape != tuple(shape)
          or not out.flags.c_contiguous or not out.flags.writeable):
        raise Error(
            "out must be a writeable C-contiguous %s array of shape %s, not %s"
            % (np.dtype(want).name, tuple(shape),
               "%s of shape %s" % (out.dtype, out.shape) if isinstance(out, np.ndarray)
               else type(out).__name__),
            _core.ERR_ARG,
        )
    else:
        res = out.reshape(rows.shape[0])
    _core.lse_rows(kern, dtype, rows, res, *_cpu_opts(threads, isa))
    return res.reshape(shape) if out is None else out


def token_logprob(logits, targets, kernel="fuse", threads=None, isa="auto", check=False):
    """log softmax(logits)[target] over the last dim: logits [..., vocab], targets int [...]
    (token indices) -> [...], float32 (float64 with kernel="ref" on NumPy).

    NumPy arrays (float32, bfloat16) use the CPU kernels, which refuse a target outside
    [0, vocab). torch tensors (CPU or CUDA, float32 or bfloat16) give a float32 tensor on
    their device, differentiable in the logits; on CUDA a target outside [0, vocab) gives NaN
    unless check=True, which copies the targets to the host to refuse it."""
    torch_module = _torch_module(logits)
    if torch_module is not None:
        return torch_module.token_logprob(logits, targets, kernel, threads, isa, check)
    kern = _arrays.parse("lse_kernel", kernel)
    dtype, a = _np_dtype(np.asarray(logits), "logits")
    if a.ndim < 1:
        raise Error("logits must have a vocabulary dimension", _core.ERR_ARG)
    t = np.asarray(targets)
    if t.shape != a.shape[:-1] or t.dtype.kind not in "iu":
        raise Error(
            "targets must be integers of shape %s, not %s of shape %s"
            % (a.shape[:-1], t.dtype, t.shape),
            _core.ERR_ARG,
        )
    rows, shape = _rows(a, -1, False)
    out = np.empty(rows.shape[0], np.float64 if kern == 0 else np.float32)
    t64 = np.ascontiguousarray(t, dtype=np.int64).reshape(-1)
    _core.logprob_rows(kern, dtype, rows, t64, out, *_cpu_opts(threads, isa))
    return out.reshape(shape)
