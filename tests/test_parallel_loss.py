"""parallel_softmax_with_cross_entropy: on column shards, the same loss and logits gradient as
softmax_with_cross_entropy on the whole logits (ops/parallel_loss.py)."""
import numpy as np
import pytest

from placegroup.ops.registry import KernelContext, get_op_def
from tests.test_collective_ops import run_op, run_ranks


def _whole(x, label):
    ref = get_op_def("softmax_with_cross_entropy")
    out = ref.kernels["cpu"](np, {"Logits": x, "Label": label}, dict(ref.attrs), KernelContext())
    grad = get_op_def("softmax_with_cross_entropy_grad")
    return out, grad


@pytest.mark.parametrize("k", [1, 2, 3])
def test_loss_and_gradient_equal_the_whole_logits(k):
    rng = np.random.default_rng(k)
    n, c = 7, 6 * k
    x = rng.normal(size=(n, c)) * 4
    label = rng.integers(0, c, size=(n, 1))
    label[3, 0] = -100  # ignored row: loss 0, no gradient
    dloss = rng.normal(size=(n, 1))
    ref = get_op_def("softmax_with_cross_entropy")
    want = ref.kernels["cpu"](np, {"Logits": x, "Label": label}, dict(ref.attrs), KernelContext())
    # the gradient of sum(dloss * loss) w.r.t. the logits: (softmax - onehot) * dloss
    onehot = np.zeros_like(x)
    keep = label[:, 0] != -100
    onehot[np.arange(n)[keep], label[keep, 0]] = 1
    want_grad = (want["Softmax"] - onehot) * np.where(keep[:, None], dloss, 0)
    w = c // k

    def rank(r, comm):
        mine = x[:, r * w:(r + 1) * w]
        out = run_op("parallel_softmax_with_cross_entropy", {"Logits": mine, "Label": label},
                     {"nranks": k}, comm)
        # every row's loss gradient is held by one member only (c_split upstream): split dloss
        part = np.zeros_like(dloss)
        rows = np.array_split(np.arange(n), k)[r]
        part[rows] = dloss[rows]
        g = run_op("parallel_softmax_with_cross_entropy_grad",
                   {"Softmax": out["Softmax"], "Label": label, "Loss@GRAD": part}, {"nranks": k}, comm, tag="bwd")
        return out, g["Logits@GRAD"]

    results = run_ranks(k, rank)
    for r, (out, g) in enumerate(results):
        np.testing.assert_allclose(out["Loss"], want["Loss"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(out["Softmax"], want["Softmax"][:, r * w:(r + 1) * w], rtol=1e-12)
        np.testing.assert_allclose(g, want_grad[:, r * w:(r + 1) * w], rtol=1e-12, atol=1e-14)
