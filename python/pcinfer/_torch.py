"""torch tensors through the library: CPU tensors on the CPU kernels (through NumPy views of
the same memory), CUDA tensors on the GPU kernels on the tensor's device and torch's current
stream of that device, with results on the same device and no host copy. A tensor that needs
a gradient goes through a torch.autograd.Function whose backward is the library's
pc_lse_backward / pc_lse_backward_cuda.

The CUDA calls are asynchronous, as torch's own kernels are: they are queued on the current
stream and the function returns. Scratch memory of the kernels is kept per (device, stream)
and reused in stream order (the way torch keeps cuBLAS workspaces); while a CUDA graph is
being captured each call allocates its own, which the graph's memory pool keeps.
"""

import numpy as np
import torch

from . import _arrays, _core, _lse
from ._errors import Error

_DTYPES = {torch.float32: _lse.F32, torch.float16: _lse.F16, torch.bfloat16: _lse.BF16}
_REF = 0  # pc_lse_kernel of the FP64 reference, whose results are float64
_LOGPROB_DTYPES = (torch.float32, torch.bfloat16)

# The current stream as an integer without making a Stream object (what torch's own C++
# extensions and Triton read); torch.cuda.current_stream(...).cuda_stream where it is absent.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device):
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


# The same functions torch.cuda.current_device and is_current_stream_capturing call, without
# their Python wrappers: a small call's overhead is mostly such layers (bench/harness/
# python_overhead.py).
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_capturing = (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
              or torch.cuda.is_current_stream_capturing)

_needs = {}  # (call, kernel, dtype, rows, cols, device) -> scratch bytes the library asked for


def _scratch_need(key, query):
    """The scratch bytes of a call's shape, asked of the library once per shape: the size
    depends only on the shape and the device."""
    need = _needs.get(key)
    if need is None:
        need = _needs[key] = query()
    return need


_scratch = {}  # (device, stream) -> uint8 tensor on that device


def _scratch_ptr(device, stream, nbytes):
    """Device scratch of at least nbytes for one call queued on `stream`."""
    if _capturing():
        # Freed after the call, the block stays in the graph's private pool, which later
        # captures reuse in stream order only.
        return torch.empty(nbytes, dtype=torch.uint8, device=device).data_ptr()
    buf = _scratch.get((device, stream))
    if buf is None or buf.numel() < nbytes:
        buf = torch.empty(max(nbytes, 1 << 12), dtype=torch.uint8, device=device)
        _scratch[(device, stream)] = buf
    return buf.data_ptr()


def _on_device(device, launch, *args):
    """launch(*args) with `device` as the current CUDA device (the library's CUDA calls run
    on the calling thread's current device)."""
    if device == _current_device():
        return launch(*args)
    with torch.cuda.device(device):
        return launch(*args)


def _dtype_code(t, what, allowed=_DTYPES):
    code = _DTYPES.get(t.dtype)
    if code is None or t.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise Error(
            "%s: %s is not an input type of this kernel (%s)" % (what, t.dtype, names),
            _core.ERR_ARG,
        )
    return code


def _rows(x, dim, keepdim):
    """x as [rows, cols] with the reduced dims last, and the result's shape (None when it is
    [rows]). A view when the library can read it as it is (elements of a row adjacent, rows
    >= cols apart), else a contiguous copy."""
    if x.dim() == 2 and (dim == -1 or dim == 1) and not keepdim:
        rows, cols = x.shape
        shape = None
        x2 = x
    else:
        dims = _lse.reduced_dims(x.dim(), dim)
        kept = [d for d in range(x.dim()) if d not in dims]
        cols = 1
        for d in dims:
            cols *= x.shape[d]
        x2 = x.permute(kept + dims).reshape(-1, cols) if cols else x.new_empty(
            (int(np.prod([x.shape[d] for d in kept])), 0)
        )
        rows = x2.shape[0]
        if keepdim:
            shape = tuple(1 if d in dims else x.shape[d] for d in range(x.dim()))
        else:
            shape = tuple(x.shape[d] for d in kept)
    s0, s1 = x2.stride()
    if (cols > 1 and s1 != 1) or (rows > 1 and s0 < cols):
        x2 = x2.contiguous()
    return x2, rows, cols, shape


def _host(t):
    """A NumPy view of a CPU tensor's memory (f16/bf16 as uint16 bits where NumPy lacks the
    type)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _launch_lse(device, x2, rows, cols, kern, code, out):
    stream = _stream(device)
    need = _scratch_need(("lse", kern, code, rows, cols, device),
                         lambda: _core.lse_rows_cuda(kern, code, 0, rows, cols, cols, 0, 0, 0,
                                                     stream))
    scratch = _scratch_ptr(device, stream, need)
    _core.lse_rows_cuda(kern, code, x2.data_ptr(), rows, cols, x2.stride(0) if rows > 1 else cols,
                        out.data_ptr(), scratch, need, stream)


def _lse_forward(x2, rows, cols, kern, code, threads, isa):
    """LSE of every row of x2 [rows, cols] as float32 [rows] on x2's device."""
    if x2.is_cuda:
        out = torch.empty(rows, dtype=torch.float32, device=x2.device)
        device = x2.get_device()
        _on_device(device, _launch_lse, device, x2, rows, cols, kern, code, out)
        return out
    out = torch.empty(rows, dtype=torch.float64 if kern == _REF else torch.float32)
    _core.lse_rows(kern, code, _host(x2), out.numpy(), *_lse._cpu_opts(threads, isa))
    return out


def _launch_backward(device, x2, lse, rows, cols, grad):
    _core.lse_backward_cuda(x2.data_ptr(), lse.data_ptr(), rows, cols,
                            x2.stride(0) if rows > 1 else cols, grad.data_ptr(), cols,
                            _stream(device))


def _softmax(x2, lse, rows, cols, threads, isa):
    """exp(x2 - lse[:, None]) as float32 [rows, cols] (the library's LSE backward)."""
    if x2.dtype != torch.float32:
        x2 = x2.float()
    grad = torch.empty((rows, cols), dtype=torch.float32, device=x2.device)
    if rows == 0 or cols == 0:
        return grad
    if x2.is_cuda:
        device = x2.get_device()
        _on_device(device, _launch_backward, device, x2, lse, rows, cols, grad)
    else:
        _core.lse_backward(_host(x2), _host(lse), grad.numpy(), *_lse._cpu_opts(threads, isa))
    return grad


def _unrows(g, x, dim, keepdim):
    """A [rows, cols] gradient back in x's layout (the inverse of _rows' permute)."""
    dims = _lse.reduced_dims(x.dim(), dim)
    kept = [d for d in range(x.dim()) if d not in dims]
    order = kept + dims
    g = g.reshape([x.shape[d] for d in order])
    inverse = [order.index(d) for d in range(x.dim())]
    return g.permute(inverse)


def _result(lse, shape, x, kern):
    """The LSE in the result's shape and dtype: the input's, float64 for ref."""
    out = lse if shape is None else lse.view(shape)
    return out if x.dtype == torch.float32 or kern == _REF else out.to(x.dtype)


class _LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim, kern, code, threads, isa):
        x2, rows, cols, shape = _rows(x, dim, keepdim)
        lse = _lse_forward(x2, rows, cols, kern, code, threads, isa)
        ctx.save_for_backward(x2, lse)
        ctx.args = (x, dim, keepdim, threads, isa, rows, cols)
        return _result(lse, shape, x, kern)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        x2, lse = ctx.saved_tensors
        x, dim, keepdim, threads, isa, rows, cols = ctx.args
        g = _softmax(x2, lse.float(), rows, cols, threads, isa)
        g.mul_(grad_out.reshape(rows, 1).float())
        return _unrows(g, x, dim, keepdim).to(x.dtype), None, None, None, None, None, None


def logsumexp(x, dim=-1, keepdim=False, kernel="fuse", threads=None, isa="auto"):
    kern = _arrays.parse("lse_kernel", kernel)
    code = _dtype_code(x, "x")
    if x.requires_grad and torch.is_grad_enabled():
        return _LogSumExp.apply(x, dim, keepdim, kern, code, threads, isa)
    x2, rows, cols, shape = _rows(x, dim, keepdim)
    return _result(_lse_forward(x2, rows, cols, kern, code, threads, isa), shape, x, kern)


def _launch_logprob(device, x2, t, rows, vocab, code, out):
    stream = _stream(device)
    logits, stride = x2.data_ptr(), x2.stride(0) if rows > 1 else vocab
    # The size query checks the other arguments too, so it gets the real pointers.
    need = _scratch_need(("logprob", 0, code, rows, vocab, device),
                         lambda: _core.logprob_rows_cuda(code, logits, rows, vocab, stride,
                                                         t.data_ptr(), out.data_ptr(), 0, 0,
                                                         stream))
    scratch = _scratch_ptr(device, stream, need)
    _core.logprob_rows_cuda(code, logits, rows, vocab, stride, t.data_ptr(), out.data_ptr(),
                            scratch, need, stream)


def _logprob_forward(x2, t, rows, vocab, kern, code, threads, isa, check):
    if x2.is_cuda:
        if kern != _arrays.parse("lse_kernel", "fuse"):
            raise Error("token_logprob on the GPU offers kernel fuse only", _core.ERR_ARG)
        if check:
            _core.logprob_check_targets(t.cpu().numpy(), vocab)
        out = torch.empty(rows, dtype=torch.float32, device=x2.device)
        device = x2.get_device()
        _on_device(device, _launch_logprob, device, x2, t, rows, vocab, code, out)
        return out
    out = torch.empty(rows, dtype=torch.float64 if kern == _REF else torch.float32)
    _core.logprob_rows(kern, code, _host(x2), t.numpy(), out.numpy(),
                       *_lse._cpu_opts(threads, isa))
    return out


def _targets(targets, logits):
    """targets as a contiguous int64 tensor [rows] on the logits' device."""
    if not isinstance(targets, torch.Tensor):
        targets = torch.as_tensor(np.asarray(targets))
    not_int = targets.dtype.is_floating_point or targets.is_complex() or targets.dtype == torch.bool
    if targets.shape != logits.shape[:-1] or not_int:
        raise Error(
            "targets must be integers of shape %s, not %s of shape %s"
            % (tuple(logits.shape[:-1]), targets.dtype, tuple(targets.shape)),
            _core.ERR_ARG,
        )
    if targets.device != logits.device:
        raise Error(
            "targets are on %s but logits on %s" % (targets.device, logits.device), _core.ERR_ARG
        )
    return targets.reshape(-1).to(torch.int64).contiguous()


class _TokenLogprob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, t, kern, code, threads, isa, check):
        x2, rows, vocab, shape = _rows(logits, -1, False)
        out = _logprob_forward(x2, t, rows, vocab, kern, code, threads, isa, check)
        ctx.save_for_backward(x2, t, out)
        ctx.args = (logits, threads, isa, rows, vocab)
        return out if shape is None else out.view(shape)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        # d logprob[r] / d logits[r, i] = [i == t_r] - softmax(logits[r])_i; the row's LSE is
        # logits[r, t_r] - logprob[r].
        x2, t, out = ctx.saved_tensors
        logits, threads, isa, rows, vocab = ctx.args
        picked = x2.gather(1, t.view(-1, 1)).view(-1).float()
        lse = (picked - out.float()).contiguous()
        g = _softmax(x2, lse, rows, vocab, threads, isa)
        go = grad_out.reshape(rows, 1).float()
        g.mul_(-go)
        g.scatter_add_(1, t.view(-1, 1), go)
        return g.view(logits.shape).to(logits.dtype), None, None, None, None, None, None


def token_logprob(logits, targets, kernel="fuse", threads=None, isa="auto", check=False):
    kern = _arrays.parse("lse_kernel", kernel)
    code = _dtype_code(logits, "logits", _LOGPROB_DTYPES)
    if logits.dim() < 1:
        raise Error("logits must have a vocabulary dimension", _core.ERR_ARG)
    t = _targets(targets, logits)
    if logits.requires_grad and torch.is_grad_enabled():
        return _TokenLogprob.apply(logits, t, kern, code, threads, isa, check)
    x2, rows, vocab, shape = _rows(logits, -1, False)
    out = _logprob_forward(x2, t, rows, vocab, kern, code, threads, isa, check)
    return out if shape is None else out.view(shape)
