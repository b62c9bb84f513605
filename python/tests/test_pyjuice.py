"""from_pyjuice: an HCLT built and trained by PyJuice 2.x, converted, scores the same images
as PyJuice does (where PyJuice, torch and a GPU are present: PyJuice runs on CUDA only)."""

import numpy as np
import pytest

import pcinfer

torch = pytest.importorskip("torch")
juice = pytest.importorskip("pyjuice")
if not torch.cuda.is_available():
    pytest.skip("PyJuice needs a GPU", allow_module_level=True)


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
