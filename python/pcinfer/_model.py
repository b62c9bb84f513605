"""pcinfer.Model: an HCLT, scored and queried through the library's evaluators."""

import numpy as np

from . import _arrays, _core
from ._errors import Error

# Rows per evaluator call when `batch` is not given: the defaults of the pcinfer tool.
_GPU_BATCH = 16384
_CPU_BATCH = 1024

_gpu_present = []


def gpu_available():
    """True when this build has CUDA and a usable GPU is present (asked once)."""
    if not _gpu_present:
        _gpu_present.append(_core.cuda_available())
    return _gpu_present[0]


def _backend(kernel, queries=False):
    """The backend for a kernel name; "auto" is fuse with a GPU, else cpu (queries: cpu, the
    GPU backends answer only log p(x))."""
    if kernel == "auto":
        kernel = "fuse" if gpu_available() and not queries else "cpu"
    return _arrays.parse("backend", kernel)


class Model:
    """A Hidden Chow-Liu Tree: V variables with C categories and K latent states per latent.

    Load one with ``pcinfer.load(path)``, learn one with ``pcinfer.learn(x, latents=K)``, build
    one from arrays with ``Model.from_arrays(...)`` or convert one with
    ``pcinfer.from_pyjuice(pc)``. A model is immutable. It may be used from several threads at
    once: each call takes an evaluator of its own from the model's pool (an evaluator serves
    one call at a time, pc/eval.h), so concurrent calls run in parallel.
    """

    def __init__(self, core):
        self._core = core
        self._pool = {}  # (backend, threads, batch) -> idle evaluators

    @classmethod
    def from_arrays(cls, parent, trans_index, root_logw, trans_logw, input_logp, name="model"):
        """A model from the arrays of the HDF5 schema (docs/format.md): parent and trans_index
        int [V], root_logw [K], trans_logw [T, K, K] and input_logp [V, K, C], natural logs.
        The library validates it; `name` starts its messages."""
        input_logp = np.ascontiguousarray(input_logp, dtype=np.float64)
        if input_logp.ndim != 3:
            raise Error(
                "%s: input_logp must be [V, K, C], not of shape %s" % (name, input_logp.shape),
                _core.ERR_MODEL,
            )
        core = _core.Model.from_arrays(
            np.ascontiguousarray(parent, dtype=np.int32),
            np.ascontiguousarray(trans_index, dtype=np.int32),
            np.ascontiguousarray(root_logw, dtype=np.float64),
            np.ascontiguousarray(trans_logw, dtype=np.float64),
            input_logp,
            input_logp.shape[2],
            name,
        )
        return cls(core)

    num_vars = property(lambda self: self._core.num_vars, doc="V, variables per sample")
    num_cats = property(lambda self: self._core.num_cats, doc="C, categories per variable")
    num_latents = property(lambda self: self._core.num_latents, doc="K, states per latent")
    num_trans = property(lambda self: self._core.num_trans, doc="T, rows of trans_logw")

    def _param(self, name, dtype, shape):
        return np.frombuffer(self._core.param(name), dtype=dtype).reshape(shape)

    @property
    def parent(self):
        """int32 [V]: the parent variable of each variable in the tree, -1 for the root."""
        return self._param("parent", np.int32, (self.num_vars,))

    @property
    def trans_index(self):
        """int32 [V]: row of trans_logw for the edge into each variable, -1 where it shares its
        parent's latent (and for the root)."""
        return self._param("trans_index", np.int32, (self.num_vars,))

    @property
    def root_logw(self):
        """float64 [K]: log p(Z_root = k)."""
        return self._param("root_logw", np.float64, (self.num_latents,))

    @property
    def trans_logw(self):
        """float64 [T, K, K]: log p(Z_v = k | Z_parent(v) = j) at [trans_index[v], j, k]."""
        K = self.num_latents
        return self._param("trans_logw", np.float64, (self.num_trans, K, K))

    @property
    def input_logp(self):
        """float64 [V, K, C]: log p(X_v = c | latent of v = k)."""
        shape = (self.num_vars, self.num_latents, self.num_cats)
        return self._param("input_logp", np.float64, shape)

    def save(self, path, float64=False):
        """Writes the model as an HDF5 file (float32 parameters unless float64), through a
        temporary file renamed into place."""
        self._core.save(path, float64)

    def __repr__(self):
        return "pcinfer.Model(num_vars=%d, num_cats=%d, num_latents=%d)" % (
            self.num_vars,
            self.num_cats,
            self.num_latents,
        )

    def _run(self, backend, threads, batch, call, *args):
        """call(evaluator, *args) on an idle evaluator of the pool (made when none is idle)."""
        if batch is None:
            batch = _GPU_BATCH if _core.backend_is_gpu(backend) else _CPU_BATCH
        key = (backend, threads or 0, batch)
        idle = self._pool.get(key)
        if idle is None:
            idle = self._pool.setdefault(key, [])
        try:
            evaluator = idle.pop()
        except IndexError:
            evaluator = _core.Evaluator(self._core, backend, batch, threads or 0)
        try:
            return call(evaluator, *args)
        finally:
            idle.append(evaluator)

    def log_likelihood(self, x, missing=None, kernel="auto", threads=None, batch=None):
        """log p(x) in nats of every row of x, float64 [n].

        x: integers [n, V] (uint8 C-contiguous is used without a copy); values must be < C.
        missing: None, or bools / integers [n, V] (nonzero: marginalise that entry).
        kernel: "auto" (fuse with a GPU, else cpu), ref, cpu, cpu-fuse, fuse, int or gemm, as
        in ``pcinfer --kernel``. threads: CPU threads (None: all cores). batch: rows per
        library call (None: 16384 on a GPU, 1024 on the CPU)."""
        x = _arrays.evidence(x)
        m = _arrays.mask(missing)
        out = np.empty(x.shape[0])
        self._run(_backend(kernel), threads, batch, _core.Evaluator.evaluate, x, m, out)
        return out

    def conditional(self, x, missing, kernel="auto", threads=None, batch=None,
                    dtype=np.float64, return_log_likelihood=False):
        """p(X_v = c | the observed entries of row i), as [n, V, C] of `dtype` (float64 or
        float32); observed entries are one-hot. With return_log_likelihood, also log p(x_obs)
        [n]. A row whose evidence has probability 0 gets NaN and -inf. Kernels: ref, cpu,
        cpu-fuse ("auto": cpu)."""
        x = _arrays.evidence(x)
        m = _arrays.mask(missing)
        f32 = np.dtype(dtype) == np.float32
        if not f32 and np.dtype(dtype) != np.float64:
            raise Error("dtype must be float64 or float32, not %s" % np.dtype(dtype), _core.ERR_ARG)
        probs = np.empty((x.shape[0], x.shape[1], self.num_cats), np.float32 if f32 else np.float64)
        logp = np.empty(x.shape[0]) if return_log_likelihood else None
        backend = _backend(kernel, True)
        self._run(backend, threads, batch, _core.conditionals, x, m, probs, logp, f32)
        return (probs, logp) if return_log_likelihood else probs

    def mpe(self, x, missing, kernel="auto", threads=None, batch=None, return_log_prob=False):
        """The most probable completion of each row's missing entries, uint8 [n, V] (observed
        entries kept); ties go to the lowest value. With return_log_prob, also the joint
        log-probability of each completion with its best latent states [n]."""
        x = _arrays.evidence(x)
        m = _arrays.mask(missing)
        out = np.empty_like(x)
        logp = np.empty(x.shape[0]) if return_log_prob else None
        self._run(_backend(kernel, True), threads, batch, _core.mpe, x, m, out, logp)
        return (out, logp) if return_log_prob else out

    def sample(self, count=None, seed=0, evidence=None, missing=None, first=0, kernel="auto",
               threads=None, batch=None):
        """Exact samples, uint8 [count, V]: from p(x), or with `evidence` ([n, V] with a
        `missing` mask) one sample of each row's missing entries from p(x_mis | x_obs). Row i
        is drawn from the stream (seed, first + i), so a seed gives the same rows whatever the
        batch, thread count or split of a run into calls."""
        backend = _backend(kernel, True)
        if evidence is None:
            if count is None or count < 0:
                raise Error("count must be a number of samples >= 0", _core.ERR_ARG)
            out = np.empty((count, self.num_vars), np.uint8)
            self._run(backend, threads, batch, _core.sample, out, seed, first)
            return out
        x = _arrays.evidence(evidence, "evidence")
        if count is not None and count != x.shape[0]:
            raise Error(
                "count = %d but evidence has %d rows (one sample per row)" % (count, x.shape[0]),
                _core.ERR_ARG,
            )
        m = _arrays.mask(missing)
        out = np.empty_like(x)
        self._run(backend, threads, batch, _core.sample_conditional, x, m, out, seed, first)
        return out


def load(path):
    """Reads, validates and compiles an HCLT file (HDF5, docs/format.md)."""
    return Model(_core.Model.load(path))
