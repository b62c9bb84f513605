"""from_pyjuice: an HCLT built and trained by PyJuice 2.x, converted, scores the same images
as PyJuice does (where PyJuice, torch and a GPU are present: PyJuice's forward pass runs on
CUDA only), and as PyJuice's node graph does, evaluated node by node here (where PyJuice and
torch are present, GPU or not)."""

import numpy as np
import pytest

import pcinfer

torch = pytest.importorskip("torch")
juice = pytest.importorskip("pyjuice")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="PyJuice's forward pass needs a GPU")


def _numpy(t):
    return t.detach().cpu().double().numpy()


def node_graph_loglik(root, x):
    """log p(x) [n] of a PyJuice node graph, node by node in FP64: an input node is its
    categorical's log-probability of x_v, a product node the sum of the logs of the child
    nodes its edges pair it with, a sum node the log-sum-exp of its weights' logs plus its
    children's values. A reference that shares nothing with the converter's reading of the
    HCLT (which variable owns which row); parameter layouts are checked (rows sum to 1)."""
    values = {}

    def value(ns):  # [n, ns.num_nodes] log values
        if id(ns) in values:
            return values[id(ns)]
        if ns.is_input():
            p = _numpy(ns.get_params()).reshape(ns.num_nodes, -1)
            assert np.allclose(p.sum(1), 1)
            with np.errstate(divide="ignore"):
                out = np.log(p[:, x[:, int(list(ns.scope)[0])]]).T
        elif ns.is_prod():
            edges = ns.edge_ids.cpu().numpy()  # [node blocks, children]: child node blocks
            bs, node = ns.block_size, np.arange(ns.num_nodes)
            out = sum(value(ch)[:, edges[node // bs, c] * bs + node % bs]
                      for c, ch in enumerate(ns.chs))
        else:
            w = _numpy(ns.get_params(as_matrix=True))  # [nodes, all children's nodes]
            assert w.shape[0] == ns.num_nodes and np.allclose(w.sum(1), 1)
            kids = np.concatenate([value(ch) for ch in ns.chs], axis=1)
            with np.errstate(divide="ignore"):
                terms = np.log(w)[None] + kids[:, None, :]
            top = terms.max(2, keepdims=True)
            out = (top + np.log(np.exp(terms - top).sum(2, keepdims=True)))[:, :, 0]
        values[id(ns)] = out
        return out

    return value(root)[:, 0]


def test_converted_hclt_scores_like_its_node_graph(mnist_test):
    """An HCLT PyJuice builds on 7 x 7 MNIST (49 variables, K = 6, its random initial
    parameters), converted: pcinfer's ref equals the node graph's log p(x) to 1e-12 relative,
    cpu-fuse to its usual 1e-6 nats; no GPU needed."""
    small = mnist_test[:1200].reshape(-1, 28, 28)[:, 2::4, 2::4].reshape(-1, 49)
    torch.manual_seed(3)
    ns = juice.structures.HCLT(torch.from_numpy(small[:1000].astype(np.float32)), num_latents=6)
    ns.init_parameters()
    model = pcinfer.from_pyjuice(ns)
    assert (model.num_vars, model.num_cats, model.num_latents) == (49, 256, 6)
    test = np.ascontiguousarray(small[1000:])
    want = node_graph_loglik(ns, test)
    ours = model.log_likelihood(test, kernel="ref")
    assert np.abs(ours - want).max() <= 1e-12 * np.abs(want).max(), np.abs(ours - want).max()
    fuse = model.log_likelihood(test, kernel="cpu-fuse")
    assert np.abs(fuse - ours).max() < 1e-5


@needs_gpu
def test_converted_hclt_scores_like_pyjuice(mnist_test, rng):
    x = torch.from_numpy(mnist_test[:3000].astype(np.int64)).cuda()
    ns = juice.structures.HCLT(x[:2000].float(), num_latents=8)
    pc = juice.compile(ns)
    pc.to(torch.device("cuda"))
    for b in range(4):  # a few mini-batch EM steps: parameters away from their initial values
        batch = x[b * 500 : (b + 1) * 500]
        lls = pc(batch)
        lls.mean().backward()
        pc.mini_batch_em(step_size=0.5, pseudocount=0.1)
    model = pcinfer.from_pyjuice(pc)
    assert (model.num_vars, model.num_cats, model.num_latents) == (784, 256, 8)
    test = x[2000:]
    theirs = pc(test).detach().double().cpu().numpy().reshape(-1)
    ours = model.log_likelihood(mnist_test[2000:3000], kernel="ref")
    delta = np.abs(ours - theirs)
    print("from_pyjuice: mean LL pcinfer %.6f PyJuice %.6f nats; |delta| mean %.2e max %.2e"
          % (ours.mean(), theirs.mean(), delta.mean(), delta.max()))
    # PyJuice computes in FP32 over 784 variables: ~1e-4 relative to |log p(x)| ~ 700.
    assert delta.max() <= 1e-4 * np.abs(ours).max(), delta.max()
    fuse = model.log_likelihood(mnist_test[2000:3000], kernel="fuse")
    assert np.abs(fuse - ours).max() < 1e-2


def test_refuses_circuits_that_are_not_hclts():
    ni = juice.inputs(0, num_node_blocks=2, block_size=1,
                      dist=juice.distributions.Categorical(num_cats=2))
    with pytest.raises(pcinfer.Error, match="not an HCLT"):
        pcinfer.from_pyjuice(ni)
