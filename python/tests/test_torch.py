"""torch tensors: pcinfer.logsumexp and token_logprob against torch on CPU tensors here and
CUDA tensors where a GPU is present (f32, f16, bf16, any stride, any dim), gradients through
the library's backward, results on the input's device, work on the current stream."""

import pytest

import pcinfer

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and pcinfer.gpu_available() else [])
# FP32 math in every kernel: within a few FP32 ulps of |LSE|, and the input type's rounding of
# the result for f16 / bf16 (what torch.logsumexp returns too).
TOL = {torch.float32: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.fixture
def gen(rng):
    g = torch.Generator().manual_seed(int(rng.integers(0, 1 << 31)))
    return g


def randn(gen, shape, device, dtype=torch.float32, scale=4.0):
    return (torch.randn(shape, generator=gen) * scale).to(device=device, dtype=dtype)


def assert_close(got, ref, tol):
    """|got - ref| <= tol * max(1, |ref|) where ref is finite; the same -inf, +inf, NaN
    elsewhere."""
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    finite = torch.isfinite(ref)
    err = (got - ref).abs() / ref.abs().clamp(min=1)
    assert float(err[finite].max()) <= tol if finite.any() else True
    assert torch.equal(got[~finite].nan_to_num(0), ref[~finite].nan_to_num(0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(512, 128), (3, 4099), (1, 1), (7, 0)])
def test_logsumexp_equals_torch(gen, device, dtype, shape):
    x = randn(gen, shape, device, dtype)
    got = pcinfer.logsumexp(x, dim=-1)
    assert got.device == x.device and got.dtype == dtype and got.shape == shape[:1]
    assert_close(got, torch.logsumexp(x.double(), dim=-1), TOL[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_dims_strides_and_hard_values(gen, device):
    x = randn(gen, (6, 5, 300), device)
    for dim in (0, 1, -1, (0, 2)):
        assert_close(pcinfer.logsumexp(x, dim), torch.logsumexp(x.double(), dim), 2e-6)
    kd = pcinfer.logsumexp(x, (0, 2), keepdim=True)
    assert kd.shape == (1, 5, 1)
    view = x[:, 1, 10:250]  # rows 1500 floats apart: read in place
    assert_close(pcinfer.logsumexp(view), torch.logsumexp(view.double(), -1), 2e-6)
    t = x[:, :, 0].t()  # elements of a row apart: a contiguous copy first
    assert_close(pcinfer.logsumexp(t), torch.logsumexp(t.double(), -1), 2e-6)
    hard = torch.tensor([[float("-inf")] * 3, [float("nan"), 0, 1], [float("inf"), 0, 1],
                         [3e38, 3e38, 0]], device=device)
    got = pcinfer.logsumexp(hard)
    assert got[0] == float("-inf") and got[1].isnan() and got[2] == float("inf")
    assert torch.isfinite(got[3])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_equal_torch(gen, device, dtype):
    x = randn(gen, (4, 9, 70), device, dtype).requires_grad_()
    w = randn(gen, (4, 70), device, torch.float32)
    ours = pcinfer.logsumexp(x, dim=1)
    (ours.float() * w).sum().backward()
    g_ours = x.grad.clone()
    x.grad = None
    (torch.logsumexp(x.float(), dim=1) * w).sum().backward()
    assert_close(g_ours, x.grad, 1e-5 if dtype == torch.float32 else 1e-2)
    assert g_ours.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_token_logprob_equals_torch(gen, device, dtype):
    logits = randn(gen, (3, 5, 1000), device, dtype).requires_grad_()
    targets = torch.randint(0, 1000, (3, 5), generator=gen).to(device)
    got = pcinfer.token_logprob(logits, targets)
    assert got.device == logits.device and got.dtype == torch.float32 and got.shape == (3, 5)
    expect = torch.log_softmax(logits.double(), -1).gather(-1, targets[..., None])[..., 0]
    assert_close(got, expect, 3e-5)
    w = randn(gen, (3, 5), device)
    (got * w).sum().backward()
    g = logits.grad.clone()
    logits.grad = None
    (torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None])[..., 0] * w).sum(
    ).backward()
    assert_close(g, logits.grad, 1e-5 if dtype == torch.float32 else 1e-2)


def test_ref_kernel_gives_float64_on_cpu_tensors(gen):
    x = randn(gen, (5, 300), "cpu", torch.float16).requires_grad_()
    got = pcinfer.logsumexp(x, kernel="ref")
    assert got.dtype == torch.float64
    assert_close(got, torch.logsumexp(x.double(), -1), 1e-12)
    got.sum().backward()
    assert_close(x.grad, torch.softmax(x.double(), -1), 1e-3)
    t = torch.randint(0, 300, (5,), generator=gen)
    lp = pcinfer.token_logprob(x.detach().float(), t, kernel="ref")
    assert lp.dtype == torch.float64
    assert_close(lp, torch.log_softmax(x.double(), -1).gather(1, t[:, None])[:, 0], 1e-12)


@pytest.mark.parametrize("kernel", ["fuse", "int", "ref"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(37, 300), (1, 5000), (0, 4), (3, 0)])
def test_cpu_tensor_addresses_give_the_views_bits(gen, kernel, dtype, shape):
    """A contiguous 2-D CPU tensor goes to the library by its address; a strided one (rows
    2 cols apart) through NumPy views of the same values: the same call, the same bits."""
    x = randn(gen, shape, "cpu", dtype)
    strided = torch.cat([x, x], dim=1)[:, : shape[1]]
    assert x.is_contiguous() and (min(shape) == 0 or shape[0] < 2 or not strided.is_contiguous())
    if kernel == "int" and dtype != torch.float32:
        for t in (x, strided):
            with pytest.raises(pcinfer.Error, match="int"):
                pcinfer.logsumexp(t, kernel=kernel)
        return
    got, want = pcinfer.logsumexp(x, kernel=kernel), pcinfer.logsumexp(strided, kernel=kernel)
    assert got.dtype == want.dtype == (torch.float64 if kernel == "ref" else dtype)
    assert got.shape == want.shape == shape[:1]
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_out_is_written_and_returned(gen, device, dtype):
    """out= (float32 whatever x's dtype) gets the bits of the call without it, poisoned first,
    on the fast path (contiguous 2-D, last dim) and the general one; on CUDA with the scratch
    of long rows too (3 x 128256). A wrong out, or out with a gradient, raises."""
    for shape, dim, keepdim in (((512, 128), -1, False), ((3, 128256), 1, False),
                                ((6, 5, 300), (0, 2), True), ((6, 5, 300), 1, False)):
        x = randn(gen, shape, device, dtype)
        ref = pcinfer.logsumexp(x.float() if dtype == torch.float32 else x, dim, keepdim)
        out = torch.full(ref.shape, float("nan"), device=device)
        assert pcinfer.logsumexp(x, dim, keepdim, out=out) is out
        if dtype == torch.float32:
            assert torch.equal(out, ref)
        else:  # the float32 results, before the rounding to bf16 of the call without out
            assert torch.equal(out.to(dtype), ref)
    x = randn(gen, (4, 9), device)
    for out in (torch.empty(5, device=device), torch.empty(4, dtype=torch.float16, device=device),
                torch.empty(8, device=device)[::2], torch.empty(4, dtype=torch.float64)):
        with pytest.raises(pcinfer.Error, match="out must be"):
            pcinfer.logsumexp(x, out=out)
    with pytest.raises(pcinfer.Error, match="out= is not differentiable"):
        pcinfer.logsumexp(x.requires_grad_(), out=torch.empty(4, device=device))
    with pytest.raises(pcinfer.Error, match="float64 of shape"):
        pcinfer.logsumexp(x.detach().cpu(), kernel="ref", out=torch.empty(4))


def test_refuses_what_the_kernels_do_not_take(gen):
    with pytest.raises(pcinfer.Error, match="float64 is not an input type"):
        pcinfer.logsumexp(torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(pcinfer.Error, match="float16 is not an input type"):
        pcinfer.token_logprob(torch.zeros(2, 3, dtype=torch.float16), torch.zeros(2).long())
    with pytest.raises(pcinfer.Error, match="targets must be integers"):
        pcinfer.token_logprob(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(pcinfer.Error, match=r"targets\[1\] = 3"):
        pcinfer.token_logprob(torch.zeros(2, 3), torch.tensor([0, 3]))


def test_cuda_calls_keep_scratch_per_stream(monkeypatch):
    """The bookkeeping of _queue, with the extension's CUDA call and torch's CUDA queries
    replaced (no GPU needed): a call given too little scratch answers the bytes it needs and is
    repeated with a buffer kept for its (device, stream); later calls that fit take one call;
    while a graph is captured every call gets a buffer of its own, which is not kept."""
    from pcinfer import _torch as pt

    calls = []

    def call(need, ptr, nbytes, stream):
        calls.append((need, nbytes, stream))
        return need if nbytes < need else None

    capturing = []
    stream = {0: 70, 1: 71}
    monkeypatch.setattr(pt, "_scratch", {})
    monkeypatch.setattr(pt, "_current_device", lambda: 0)
    monkeypatch.setattr(pt, "_raw_stream", lambda device: stream[device])
    monkeypatch.setattr(pt, "_capturing", lambda: bool(capturing))
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda n, dtype, device: empty(n, dtype=dtype))

    pt._queue(call, 0, (16,))
    assert calls == [(16, 0, 70), (16, 4096, 70)]
    pt._queue(call, 0, (4096,))
    assert calls[2:] == [(4096, 4096, 70)]
    pt._queue(call, 0, (9000,))
    assert calls[3:] == [(9000, 4096, 70), (9000, 9000, 70)]
    pt._queue(call, 0, (16,))
    assert calls[5:] == [(16, 9000, 70)]
    stream[0] = 72  # another stream of the device: a buffer of its own
    pt._queue(call, 0, (16,))
    assert calls[6:] == [(16, 0, 72), (16, 4096, 72)]
    capturing.append(True)
    pt._queue(call, 0, (16,))
    pt._queue(call, 0, (16,))
    assert calls[8:] == [(16, 0, 72), (16, 4096, 72)] * 2
    assert sorted(pt._scratch) == [(0, 70), (0, 72)] and pt._scratch[(0, 70)][2] == 9000


cuda = pytest.mark.skipif("cuda" not in DEVICES, reason="no GPU")


@cuda
def test_cuda_runs_on_the_current_stream(gen):
    """Work queued on a side stream is ordered on it: the input is written there just before
    the call, and the result read there after it, with no host synchronisation."""
    s = torch.cuda.Stream()
    x = torch.empty(512, 128256, device="cuda")
    src = randn(gen, (512, 128256), "cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x.copy_(src)
        got = pcinfer.logsumexp(x)
        first = got.clone()
    s.synchronize()
    assert_close(first, torch.logsumexp(src.double(), -1), 2e-6)


@cuda
def test_cuda_tensors_on_a_second_device(gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x = randn(gen, (64, 1000), "cuda:1")
    got = pcinfer.logsumexp(x)
    assert got.device == x.device
    assert_close(got, torch.logsumexp(x.double(), -1), 2e-6)


@cuda
def test_cuda_graph_capture(gen):
    """Captured calls replay on new inputs: a shape of a block per row and one cut into
    segments, whose partial states live in a scratch buffer of the captured call's own, not in
    the one kept for the stream, which an eager call uses between the capture and the replay."""
    x, y = randn(gen, (512, 128256), "cuda"), randn(gen, (8, 128256), "cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        pcinfer.logsumexp(x), pcinfer.logsumexp(y)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        out_x, out_y = pcinfer.logsumexp(x), pcinfer.logsumexp(y)
    x.copy_(randn(gen, (512, 128256), "cuda"))
    y.copy_(randn(gen, (8, 128256), "cuda"))
    z = randn(gen, (3, 1 << 20), "cuda")
    eager = pcinfer.logsumexp(z)
    g.replay()
    torch.cuda.synchronize()
    assert_close(out_x, torch.logsumexp(x.double(), -1), 2e-6)
    assert_close(out_y, torch.logsumexp(y.double(), -1), 2e-6)
    assert_close(eager, torch.logsumexp(z.double(), -1), 2e-6)


@cuda
def test_cuda_bad_targets_give_nan_unless_checked():
    logits = torch.zeros(2, 5, device="cuda")
    t = torch.tensor([1, 7], device="cuda")
    got = pcinfer.token_logprob(logits, t)
    assert torch.isnan(got[1]) and not torch.isnan(got[0])
    with pytest.raises(pcinfer.Error, match=r"targets\[1\] = 7"):
        pcinfer.token_logprob(logits, t, check=True)


@cuda
def test_cuda_layouts_and_scratch_sizes(gen):
    """The contiguous [rows, cols] call and the general one (strided views, other dims, empty
    shapes) on a stream of their own, whose scratch grows for a shape of several blocks per
    row and then serves the small shapes again."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for shape in ((512, 128), (1, 1 << 22), (3, 1 << 20), (512, 128), (0, 5), (4, 1)):
            x = randn(gen, shape, "cuda")
            assert_close(pcinfer.logsumexp(x, dim=1), torch.logsumexp(x.double(), 1), 2e-6)
        x = randn(gen, (300, 700), "cuda")
        for view in (x[:, 10:500], x.t(), x[::2], x[:1, :0]):
            assert_close(pcinfer.logsumexp(view), torch.logsumexp(view.double(), -1), 2e-6)
        for dtype in (torch.float16, torch.bfloat16):
            got = pcinfer.logsumexp(x.to(dtype), dim=-1)
            assert got.dtype == dtype
            assert_close(got, torch.logsumexp(x.to(dtype).double(), -1), TOL[dtype])
        kd = pcinfer.logsumexp(x, dim=1, keepdim=True)
        assert kd.shape == (300, 1)
        assert_close(kd, torch.logsumexp(x.double(), 1, keepdim=True), 2e-6)
    s.synchronize()


@cuda
def test_cuda_extension_answers_its_scratch_bytes():
    """lse_rows_cuda with too little scratch (none, or a buffer too small) queues nothing and
    returns the bytes it needs; given them it queues the LSE and returns None."""
    from pcinfer import _core

    x = torch.randn(1, 1 << 22, device="cuda")
    out = torch.full((1,), float("nan"), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    args = (1, 0, x.data_ptr(), 1, x.shape[1], x.shape[1], out.data_ptr())
    need = _core.lse_rows_cuda(*args, 0, 0, stream)
    assert need >= 16
    buf = torch.empty(need, dtype=torch.uint8, device="cuda")
    if need > 16:
        assert _core.lse_rows_cuda(*args, buf.data_ptr(), need - 1, stream) == need
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
    assert _core.lse_rows_cuda(*args, buf.data_ptr(), need, stream) is None
    assert_close(out, torch.logsumexp(x.double(), -1), 2e-6)


@cuda
def test_cuda_errors_keep_their_messages():
    x = torch.zeros(4, 8, device="cuda")
    with pytest.raises(pcinfer.Error, match="kernel ref with dtype f32 is not offered on the GPU"):
        pcinfer.logsumexp(x, kernel="ref")
    with pytest.raises(pcinfer.Error, match="kernel int with dtype f16 is not offered on the GPU"):
        pcinfer.logsumexp(x.half(), kernel="int")
    with pytest.raises(pcinfer.Error, match=r"unknown LSE kernel 'nope' \(ref, fuse, int\)"):
        pcinfer.logsumexp(x, kernel="nope")
    with pytest.raises(pcinfer.Error, match="float64 is not an input type"):
        pcinfer.logsumexp(x.double())
    with pytest.raises(pcinfer.Error, match="token_logprob on the GPU offers kernel fuse only"):
        pcinfer.token_logprob(x, torch.zeros(4, dtype=torch.long, device="cuda"), kernel="int")
    # the error left nothing behind: the next calls are right
    y = torch.randn(4, 8, device="cuda")
    assert_close(pcinfer.logsumexp(y), torch.logsumexp(y.double(), -1), 2e-6)


@cuda
def test_cuda_tensor_off_the_current_device(gen):
    """A tensor on another GPU than the current one: the call runs on the tensor's device and
    stream, and the current device is the same after it."""
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x = randn(gen, (512, 128), "cuda:0")
    t = torch.randint(0, 128, (512,), generator=gen).to("cuda:0")
    with torch.cuda.device(1):
        for view in (x, x.t(), x[:, 3:100]):
            got = pcinfer.logsumexp(view)
            assert got.device == x.device
            assert_close(got, torch.logsumexp(view.double(), -1), 2e-6)
        lp = pcinfer.token_logprob(x, t)
        assert torch.cuda.current_device() == 1
    assert_close(lp, torch.log_softmax(x.double(), -1).gather(1, t[:, None])[:, 0], 3e-5)
