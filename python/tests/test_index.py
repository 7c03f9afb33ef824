"""test_index.py - indexing by integer tensors (x[idx], x[:, idx], several
tensor indices, lists and arrays), Tensor.gather and nn.Embedding against
torch, forward and backward; kernel counts of a lookup and of its gradient;
out-of-bounds host indices raise IndexError."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires
from tinyc import Tensor, dtypes, nn

pytestmark = requires("tc_index", "tc_gather")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 6, 7)).astype(np.float32)


def both(index_fn, shape=(5, 6, 7)):
    """index_fn(tensor, is_torch) on the same data, forward and backward"""
    x = X if shape == X.shape else RNG.standard_normal(shape).astype(np.float32)
    a, b = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = index_fn(a, False), index_fn(b, True)
    assert_close(ya, yb, what="forward")
    w = RNG.standard_normal(tuple(yb.shape)).astype(np.float32)
    (ya * Tensor(w)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    assert_close(a.grad, b.grad, what="backward")


def idx(values, is_torch, dtype=np.int32):
    a = np.asarray(values, dtype=dtype)
    return torch.tensor(a.astype(np.int64)) if is_torch else Tensor(a)


CASES = {
    "x[idx]": lambda x, t: x[idx([0, 4, -1, 2], t)],
    "x[idx2d]": lambda x, t: x[idx([[0, 2], [3, 4]], t)],
    "x[:, idx]": lambda x, t: x[:, idx([1, 1, 5], t)],
    "x[..., idx]": lambda x, t: x[..., idx([0, 3, 3, 6], t)],
    "x[1, :, idx]": lambda x, t: x[1, :, idx([0, 6], t)],
    "x[idx, 1:3, 2]": lambda x, t: x[idx([0, 4], t), 1:3, 2],
    "x[idx, idx]": lambda x, t: x[idx([0, 4, 2], t), idx([1, 5, -1], t)],
    "x[:, idx, idx]": lambda x, t: x[:, idx([0, 1], t), idx([2, 3], t)],
    "x[idx, :, idx]": lambda x, t: x[idx([1, 2], t), :, idx([3, 4], t)],
    "x[bcast idx]": lambda x, t: x[idx([[0], [4]], t), idx([1, 5, 2], t)],
    "x[list]": lambda x, t: x[[3, 1, 1]] if not t else x[torch.tensor([3, 1, 1])],
    "x[int64 idx]": lambda x, t: x[idx([2, 0], t, np.int64)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_indexing(name):
    both(CASES[name])


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather(dim):
    n = X.shape[dim]
    shape = tuple(max(1, s - 1) for s in X.shape)
    ids = RNG.integers(0, n, shape)

    def f(x, t):
        i = torch.tensor(ids) if t else Tensor(ids.astype(np.int32))
        if t:  # torch's gather reads index.shape off dim too
            return torch.gather(x, dim, i)
        return x.gather(dim, i)
    both(f)


def test_embedding_against_torch():
    emb = nn.Embedding(11, 4)
    ids = np.array([[1, 3, 3], [10, 0, 1]], dtype=np.int32)
    te = torch.nn.Embedding(11, 4)
    with torch.no_grad():
        te.weight.copy_(torch.tensor(emb.weight.numpy()))
    emb.weight.requires_grad = True
    ya, yb = emb(Tensor(ids)), te(torch.tensor(ids.astype(np.int64)))
    assert ya.shape == (2, 3, 4)
    assert_close(ya, yb, what="embedding forward")
    ya.square().sum().backward()
    yb.square().sum().backward()
    assert_close(emb.weight.grad, te.weight.grad, what="embedding backward")


def test_kernel_counts():
    w, pos = Tensor(RNG.standard_normal((50, 8)).astype(np.float32)), Tensor.randn(3, 8)
    w.requires_grad = True
    ids = Tensor(np.array([[1, 2, 49], [0, 0, 7]], dtype=np.int32))
    h = w[ids] + pos
    assert len(h.schedule()) == 1  # the lookup is a load inside the add's kernel
    h.square().sum().backward()
    assert len(w.grad.schedule()) == 1  # zeroes and adds in one kernel
    wn, pn, i = w.numpy(), pos.numpy(), ids.numpy()
    g = np.zeros_like(wn)
    np.add.at(g, i, 2 * (wn[i] + pn))
    assert_close(w.grad, g, what="scatter-add")


def test_errors():
    t = Tensor(X)
    with pytest.raises(IndexError):
        t[[0, 5]]  # axis 0 has 5
    with pytest.raises(IndexError):
        t[:, [-7]]
    with pytest.raises(IndexError):
        t[Tensor(np.array([0.5], dtype=np.float32))]
    with pytest.raises(IndexError):
        t[[0.5, 1.0]]
    with pytest.raises(TypeError):
        t.gather(0, [0, 1])
    assert t[Tensor(np.array([1], dtype=np.int32))].dtype == dtypes.float32
