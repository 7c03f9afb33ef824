"""test_reduce.py - sum max min mean std var argmax with axis= (None, int,
negative, tuple) and keepdim=, on contiguous and non-contiguous inputs,
against torch; backward where differentiable."""
import numpy as np
import pytest
import torch

from helpers import LAYOUTS, assert_close, base_shape, make_view, rand_array, requires_autograd
from tinyc import AxisError, Tensor, dtypes

AXES = [None, 0, 1, -1, (0, 2), (2, 0, 1)]
SHAPE = (2, 3, 4)


def th_reduce(name, x, axis, keepdim):
    dim = tuple(range(x.ndim)) if axis is None else axis
    if name == "sum":
        return x.sum(dim=dim, keepdim=keepdim)
    if name == "mean":
        return x.mean(dim=dim, keepdim=keepdim)
    if name == "max":
        return x.amax(dim=dim, keepdim=keepdim)
    if name == "min":
        return x.amin(dim=dim, keepdim=keepdim)
    if name == "std":
        return x.std(dim=dim, keepdim=keepdim, unbiased=True)
    if name == "var":
        return x.var(dim=dim, keepdim=keepdim, unbiased=True)
    raise ValueError(name)


def inputs(layout, seed=0):
    a = rand_array(base_shape(SHAPE, layout), np.random.default_rng(seed))
    return a, make_view(Tensor(a), layout, 3), make_view(torch.tensor(a), layout, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "std", "var"])
def test_reduce_forward(name, axis, keepdim, layout):
    _, x, xt = inputs(layout)
    got = getattr(x, name)(axis=axis, keepdim=keepdim)
    assert_close(got, th_reduce(name, xt, axis, keepdim), what=name)


@requires_autograd
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "std", "var"])
def test_reduce_backward(name, axis, keepdim):
    a = rand_array(base_shape(SHAPE, "transposed"), np.random.default_rng(5))
    t = Tensor(a, requires_grad=True)
    tt = torch.tensor(a, requires_grad=True)
    got = getattr(make_view(t, "transposed", 3), name)(axis=axis, keepdim=keepdim)
    want = th_reduce(name, make_view(tt, "transposed", 3), axis, keepdim)
    w = np.random.default_rng(6).uniform(0.5, 1.5, want.shape).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad, what="grad of " + name)


def test_std_var_correction():
    a = rand_array((5, 6), np.random.default_rng(7))
    assert_close(Tensor(a).var(axis=1, correction=0), a.var(axis=1))
    assert_close(Tensor(a).std(correction=0), a.std())
    assert_close(Tensor(a).std(axis=0), a.std(axis=0, ddof=1))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax_argmin(axis, keepdim, layout):
    rng = np.random.default_rng(8)
    a = rng.integers(0, 4, base_shape(SHAPE, layout)).astype(np.float32)  # ties: first wins
    x, xt = make_view(Tensor(a), layout, 3), make_view(torch.tensor(a), layout, 3)
    want_max = xt.reshape(-1).argmax() if axis is None else xt.argmax(dim=axis, keepdim=keepdim)
    want_min = xt.reshape(-1).argmin() if axis is None else xt.argmin(dim=axis, keepdim=keepdim)
    if axis is None and keepdim:
        want_max, want_min = want_max.reshape((1, 1, 1)), want_min.reshape((1, 1, 1))
    got = x.argmax(axis=axis, keepdim=keepdim)
    assert got.dtype == dtypes.int32
    assert_close(got, want_max)
    assert_close(x.argmin(axis=axis, keepdim=keepdim), want_min)


def test_reduce_dtypes():
    i = Tensor([[1, 2], [3, 4]])
    assert i.sum().dtype == dtypes.int32 and i.sum().item() == 10
    assert i.mean().dtype == dtypes.float32 and i.mean().item() == 2.5
    assert i.max(axis=0).tolist() == [3, 4]
    b = Tensor([True, True, False])
    assert b.sum().item() == 2
    h = Tensor(np.array([1, 2, 3], np.float16))
    assert h.sum().dtype == dtypes.float16 and h.sum().item() == 6
    assert Tensor(np.array([1, 2, 3], np.int64)).sum().dtype == dtypes.int64


def test_reduce_scalar_and_empty():
    s = Tensor(3.5)
    assert s.shape == () and s.sum().item() == 3.5 and s.max().item() == 3.5
    assert s.sum(axis=()).item() == 3.5
    e = Tensor(np.zeros((0, 3), np.float32))
    assert e.sum(axis=0).tolist() == [0.0, 0.0, 0.0]
    assert e.sum().item() == 0.0


@pytest.mark.parametrize("axis", [3, -4, (0, 0), (1, 5)], ids=str)
def test_bad_axes(axis):
    x = Tensor.zeros(2, 3, 4)
    with pytest.raises(AxisError):
        x.sum(axis=axis)
    with pytest.raises(ValueError):
        x.max(axis=axis)
    with pytest.raises(IndexError):  # AxisError is both, like numpy's
        x.mean(axis=axis)


def test_axis_types():
    x = Tensor.zeros(2, 3)
    with pytest.raises(TypeError):
        x.sum(axis=1.0)
    with pytest.raises(TypeError):
        x.sum(axis="0")
    with pytest.raises(TypeError):
        x.sum(axis=0, keepdim="yes")
