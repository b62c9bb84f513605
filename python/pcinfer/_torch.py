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
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda device: torch.cuda.current_stream(device).cuda_stream
)

# The same functions torch.cuda.current_device and is_current_stream_capturing call, without
# their Python wrappers: a small call's overhead is mostly such layers (bench/harness/
# python_overhead.py).
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_capturing = (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
              or torch.cuda.is_current_stream_capturing)

_scratch = {}  # (device, stream) -> (uint8 tensor on that device, its address, its bytes)
_NO_SCRATCH = (None, 0, 0)


def _queue(call, device, args):
    """Queues call(*args, scratch, scratch_bytes, stream), an extension's CUDA call that
    returns the scratch bytes it needs, queuing nothing, when given fewer, on the current
    stream of `device`, made the current device first where it is not (the library's CUDA
    calls run on the calling thread's current device). Once the stream's scratch is big
    enough for the shape, that is one call into the extension."""
    if device != _current_device():
        with torch.cuda.device(device):
            return _queue(call, device, args)
    stream = _raw_stream(device)
    capturing = _capturing()
    _, ptr, nbytes = _NO_SCRATCH if capturing else _scratch.get((device, stream), _NO_SCRATCH)
    need = call(*args, ptr, nbytes, stream)
    if need is not None:
        buf = torch.empty(max(need, 1 << 12), dtype=torch.uint8, device=device)
        # While a graph is captured, each call has a buffer of its own: freed after the call,
        # the block stays in the graph's private pool, which later captures reuse in stream
        # order only.
        if not capturing:
            _scratch[(device, stream)] = (buf, buf.data_ptr(), buf.numel())
        call(*args, buf.data_ptr(), buf.numel(), stream)


def _on_device(device, launch, *args):
    """launch(*args) with `device` as the current CUDA device (as in _queue)."""
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
    """x as [rows, cols] with the reduced dims last, the elements its row starts are apart
    (cols when rows <= 1) and the result's shape (None when it is [rows]). A view when the
    library can read it as it is (elements of a row adjacent, rows >= cols apart), else a
    contiguous copy."""
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
        s0 = cols
    return x2, rows, cols, s0 if rows > 1 else cols, shape


def _host(t):
    """A NumPy view of a CPU tensor's memory (f16/bf16 as uint16 bits where NumPy lacks the
    type)."""
    if t.requires_grad:  # numpy() refuses it; detach() (~0.3 us) only where it must
        t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _lse_cuda(x2, rows, cols, stride, kern, code, out=None):
    """_lse_forward of a CUDA tensor, queued on the current stream of its device."""
    if out is None:
        out = x2.new_empty(rows, dtype=torch.float32)
    _queue(_core.lse_rows_cuda, x2.get_device(),
           (kern, code, x2.data_ptr(), rows, cols, stride, out.data_ptr()))
    return out


def _lse_forward(x2, rows, cols, stride, kern, code, threads, isa, out=None):
    """LSE of every row of x2 [rows, cols] (row starts `stride` elements apart) as float32
    [rows] on x2's device (float64 for ref), into `out` [rows] when given."""
    if x2.is_cuda:
        return _lse_cuda(x2, rows, cols, stride, kern, code, out)
    if out is None:
        out = torch.empty(rows, dtype=torch.float64 if kern == _REF else torch.float32)
    _core.lse_rows(kern, code, _host(x2), out.numpy(), *_lse._cpu_opts(threads, isa))
    return out


def _out_rows(out, x, shape, rows, kern):
    """The caller's `out` as [rows]: a contiguous tensor of the result's shape (shape None:
    [rows]) on x's device, float32 (float64 for ref), the kernels' own output type. The checks
    are attribute reads that cost less than the allocation they replace (4 us on CUDA)."""
    want = torch.float64 if kern == _REF else torch.float32
    shape = (rows,) if shape is None else tuple(shape)
    if (not isinstance(out, torch.Tensor) or out.dtype != want or out.shape != shape
            or out.get_device() != x.get_device()):
        got = ("%s of shape %s on %s" % (str(out.dtype).replace("torch.", ""), tuple(out.shape),
                                         out.device) if isinstance(out, torch.Tensor)
               else type(out).__name__)
        raise Error("out must be %s of shape %s on %s (the kernel's results), not %s"
                    % (str(want).replace("torch.", ""), shape, x.device, got), _core.ERR_ARG)
    if not out.is_contiguous():
        raise Error("out must be contiguous", _core.ERR_ARG)
    if out.requires_grad and torch.is_grad_enabled():
        raise Error("out must not require a gradient (out= is not differentiable)",
                    _core.ERR_ARG)
    return out if len(shape) == 1 else out.view(rows)


def _launch_backward(device, x2, lse, rows, cols, grad):
    _core.lse_backward_cuda(x2.data_ptr(), lse.data_ptr(), rows, cols,
                            x2.stride(0) if rows > 1 else cols, grad.data_ptr(), cols,
                            _raw_stream(device))


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
        x2, rows, cols, stride, shape = _rows(x, dim, keepdim)
        lse = _lse_forward(x2, rows, cols, stride, kern, code, threads, isa)
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


def logsumexp(x, dim=-1, keepdim=False, kernel="fuse", threads=None, isa="auto", out=None):
    kern = _arrays.parse("lse_kernel", kernel)
    code = _dtype_code(x, "x")
    if x.requires_grad and torch.is_grad_enabled():
        if out is not None:
            raise Error("out= is not differentiable: x requires a gradient", _core.ERR_ARG)
        return _LogSumExp.apply(x, dim, keepdim, kern, code, threads, isa)
    if x.dim() == 2 and (dim == -1 or dim == 1) and not keepdim and x.is_contiguous():
        # The common call, a contiguous [rows, cols] reduced over cols, without the general
        # cases of _rows and _result: their layers were a third of the Python work of a CUDA
        # call, and at 512 x 128 that work takes longer than the kernel (2.3 us). On the CPU
        # the tensors' addresses go to the library as they are, not through NumPy views.
        rows, cols = x.shape
        res = None if out is None else _out_rows(out, x, None, rows, kern)
        if x.is_cuda:
            res = _lse_cuda(x, rows, cols, cols, kern, code, res)
        elif rows and cols:
            if res is None:
                res = torch.empty(rows, dtype=torch.float64 if kern == _REF else torch.float32)
            _core.lse_rows_at(kern, code, x.data_ptr(), rows, cols, cols, res.data_ptr(),
                              *_lse._cpu_opts(threads, isa))
        else:
            res = _lse_forward(x, rows, cols, cols, kern, code, threads, isa, res)
        if out is not None:
            return out
        return res if code == _lse.F32 or kern == _REF else res.to(x.dtype)
    x2, rows, cols, stride, shape = _rows(x, dim, keepdim)
    if out is not None:
        _lse_forward(x2, rows, cols, stride, kern, code, threads, isa,
                     _out_rows(out, x, shape, rows, kern))
        return out
    return _result(_lse_forward(x2, rows, cols, stride, kern, code, threads, isa), shape, x, kern)


def _logprob_forward(x2, t, rows, vocab, stride, kern, code, threads, isa, check):
    if x2.is_cuda:
        if kern != _arrays.parse("lse_kernel", "fuse"):
            raise Error("token_logprob on the GPU offers kernel fuse only", _core.ERR_ARG)
        if check:
            _core.logprob_check_targets(t.cpu().numpy(), vocab)
        out = x2.new_empty(rows, dtype=torch.float32)
        _queue(_core.logprob_rows_cuda, x2.get_device(),
               (code, x2.data_ptr(), rows, vocab, stride, t.data_ptr(), out.data_ptr()))
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
        x2, rows, vocab, stride, shape = _rows(logits, -1, False)
        out = _logprob_forward(x2, t, rows, vocab, stride, kern, code, threads, isa, check)
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
    x2, rows, vocab, stride, shape = _rows(logits, -1, False)
    out = _logprob_forward(x2, t, rows, vocab, stride, kern, code, threads, isa, check)
    return out if shape is None else out.view(shape)
