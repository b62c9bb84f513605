"""pcinfer.from_pyjuice: a PyJuice 2.x HCLT (pyjuice.structures.HCLT, compiled or not) as a
pcinfer model (the HDF5 schema of docs/format.md).

PyJuice builds an HCLT bottom-up over its Chow-Liu tree (structures/compilation.py): a tree
leaf v is K categorical input nodes; an inner variable v is the product of its children's
regions and its own K input nodes (last), followed, below the root, by K sum nodes over those
K products; the root is one sum node over its K products. Products pair node k of every child
with node k. So, in the schema's terms:

    sum node j of v's region, weight on product k  ->  trans_logw[t_v, j, k]  (t_v a new row)
    input node k of variable v                      ->  input_logp[v, k, :]
    a leaf's input nodes under v's product          ->  parent = v, trans_index = -1
    the root's weights                              ->  root_logw

Only the PyJuice node objects are read (``chs``, ``scope``, ``edge_ids``, ``get_params``):
PyJuice itself is not imported here.
"""

import numpy as np

from . import _core
from ._errors import Error
from ._model import Model


def _numpy(t):
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    return np.asarray(t, dtype=np.float64)


def _fail(what):
    raise Error("from_pyjuice: %s (not an HCLT as pyjuice.structures.HCLT builds it)" % what,
                _core.ERR_MODEL)


def _var_of(ns):
    scope = list(ns.scope)
    if len(scope) != 1:
        _fail("input nodes over %d variables" % len(scope))
    return int(scope[0])


class _Reader:
    """Walks the nodes from the root, filling the schema's arrays per variable."""

    def __init__(self, num_latents):
        self.K = num_latents
        self.parent, self.trans, self.inputs = {}, {}, {}

    def input(self, ns, parent):
        v = _var_of(ns)
        if v in self.parent:
            _fail("variable %d under two products" % v)
        probs = _numpy(ns.get_params())
        if probs.size % self.K:
            _fail("input nodes of variable %d have %d parameters" % (v, probs.size))
        self.inputs[v] = probs.reshape(self.K, -1)
        self.parent[v] = parent
        return v

    def product(self, prod, parent):
        """Reads a product region; returns its owner variable."""
        if not prod.is_prod() or prod.num_nodes != self.K:
            _fail("a product region of %d nodes, expected %d" % (prod.num_nodes, self.K))
        edges = prod.edge_ids
        edges = edges.cpu().numpy() if hasattr(edges, "cpu") else np.asarray(edges)
        blocks = prod.num_node_blocks
        if edges.shape != (blocks, len(prod.chs)) or (edges != np.arange(blocks)[:, None]).any():
            _fail("products that do not pair node k of every child with node k")
        own = prod.chs[-1]
        if not own.is_input():
            _fail("a product whose last child is not the variable's input nodes")
        v = self.input(own, parent)
        for ch in prod.chs[:-1]:
            if ch.is_input():
                self.input(ch, v)
            elif ch.is_sum():
                self.inner(ch, v)
            else:
                _fail("a product child that is a product")
        return v

    def inner(self, sums, parent):
        """A non-root sum region: K sum nodes over the K products of one variable."""
        if len(sums.chs) != 1 or sums.num_nodes != self.K:
            _fail("a sum region of %d nodes over %d children" % (sums.num_nodes, len(sums.chs)))
        weights = _numpy(sums.get_params(as_matrix=True))
        v = self.product(sums.chs[0], parent)
        self.trans[v] = weights.reshape(self.K, self.K)


def _root_of(pc):
    """The root nodes of a TensorCircuit (after copying its parameters back) or of nodes."""
    if hasattr(pc, "root_ns"):
        if hasattr(pc, "update_parameters"):
            pc.update_parameters()
        return pc.root_ns
    return pc


def _log(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def from_pyjuice(pc, name="pyjuice model"):
    """A pcinfer Model equal to a PyJuice HCLT: `pc` is the TensorCircuit (``juice.compile``
    of the nodes; its current parameters are copied back to the nodes first) or the root
    nodes that ``pyjuice.structures.HCLT`` returned. Categorical inputs only; one root node.
    The result is validated by the library (`name` starts its messages); score the same data
    in both to compare (tests/test_pyjuice.py does)."""
    root = _root_of(pc)
    if not root.is_sum() or root.num_nodes != 1 or len(root.chs) != 1:
        _fail("a root of %d sum nodes" % getattr(root, "num_nodes", 0))
    prod = root.chs[0]
    reader = _Reader(prod.num_nodes)
    reader.product(prod, -1)
    V = len(reader.parent)
    if sorted(reader.parent) != list(range(V)):
        _fail("variables that are not 0..%d" % (V - 1))
    K = reader.K
    cats = {p.shape[1] for p in reader.inputs.values()}
    if len(cats) != 1:
        _fail("input nodes with different numbers of categories %s" % sorted(cats))
    parent = np.array([reader.parent[v] for v in range(V)], np.int32)
    trans_index = np.full(V, -1, np.int32)
    rows = sorted(reader.trans)  # trans rows in increasing variable order, as pclearn numbers them
    trans_logw = np.empty((len(rows), K, K))
    for t, v in enumerate(rows):
        trans_index[v] = t
        trans_logw[t] = _log(reader.trans[v])
    input_logp = _log(np.stack([reader.inputs[v] for v in range(V)]))
    root_logw = _log(_numpy(root.get_params(as_matrix=True)).reshape(K))
    return Model.from_arrays(parent, trans_index, root_logw, trans_logw, input_logp, name)
