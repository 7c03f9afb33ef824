"""test_shape.py - the shape ops of the breadth issue against torch 1.13:
einsum (matmul, batched, outer, transpose, trace and diagonals, "...",
implicit outputs, broadcasting, views, edge shapes; forward and backward;
one kernel for an einsum matmul), pad2d (negative pads crop, value=),
repeat_interleave, reshape with None, empty."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import LAYOUTS, assert_close, base_shape, make_view, rand_array, requires_autograd
from tinyc import Tensor, TinycError, dtypes


def arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rand_array(s, rng) for s in shapes]


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("i,i", [(5,), (5,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("iji->ij", [(3, 2, 3)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(2, 1, 3, 4), (3, 4, 5)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("ij,ij->ij", [(1, 4), (3, 4)]),
    ("Ab,bA->A", [(3, 2), (2, 3)]),
    (" ij , jk -> ik ", [(3, 4), (4, 5)]),
]


@requires_autograd
@pytest.mark.parametrize("formula,shapes", EINSUM, ids=[e[0].replace(" ", "_") for e in EINSUM])
def test_einsum(formula, shapes):
    arrs = arrays(shapes)
    ts = [Tensor(a, requires_grad=True) for a in arrs]
    tts = [torch.tensor(a, requires_grad=True) for a in arrs]
    got, want = Tensor.einsum(formula, *ts), torch.einsum(formula, *tts)
    assert got.shape == tuple(want.shape)
    assert_close(got, want, what=formula)
    w = np.random.default_rng(1).uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for i, (t, tt) in enumerate(zip(ts, tts)):
        assert_close(t.grad, tt.grad, what="%s: grad of operand %d" % (formula, i))


@requires_autograd
@pytest.mark.parametrize("layout", LAYOUTS)
def test_einsum_views(layout):
    a = rand_array(base_shape((3, 4), layout), np.random.default_rng(2))
    b = rand_array((5, 4), np.random.default_rng(3))
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x, xt = make_view(t, layout, 2), make_view(tt, layout, 2)
    got = Tensor.einsum("ij,kj->ik", x, Tensor(b).T.T)
    want = torch.einsum("ij,kj->ik", xt, torch.tensor(b))
    assert_close(got, want)
    got.sum().backward()
    want.sum().backward()
    assert_close(t.grad, tt.grad)


@requires_autograd
@pytest.mark.parametrize("formula,shapes", [("ij,jk->ik", [(0, 4), (4, 5)]),
                                            ("ij,jk->ik", [(3, 0), (0, 5)]),
                                            ("i,i->", [(1,), (1,)]), (",->", [(), ()]),
                                            ("i,->i", [(3,), ()]), ("->", [()])], ids=str)
def test_einsum_edge_shapes(formula, shapes):
    arrs = arrays(shapes)
    ts = [Tensor(a, requires_grad=True) for a in arrs]
    tts = [torch.tensor(a, requires_grad=True) for a in arrs]
    got, want = Tensor.einsum(formula, *ts), torch.einsum(formula, *tts)
    assert got.shape == tuple(want.shape)
    assert_close(got, want)
    w = np.random.default_rng(7).uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for t, tt in zip(ts, tts):
        assert_close(t.grad, tt.grad)


def test_einsum_kernel_counts():
    a, b = arrays([(16, 32), (32, 8)])
    x, w = Tensor(a).realize(), Tensor(b).realize()
    assert len(Tensor.einsum("ij,jk->ik", x, w).schedule()) == 1  # a matmul: one kernel
    assert len((Tensor.einsum("ij,jk->ik", x, w) + 1).relu().schedule()) == 1
    c, d = arrays([(4, 6, 7), (4, 7, 3)])
    assert len(Tensor.einsum("bij,bjk->bik", Tensor(c).realize(),
                             Tensor(d).realize()).schedule()) == 1
    assert len(Tensor.einsum("ij->ji", x).schedule()) == 0  # a view
    e = Tensor(arrays([(5, 5)])[0]).realize()
    assert len(Tensor.einsum("ii->i", e).schedule()) == 0  # the diagonal is a view too
    assert_close(Tensor.einsum("ij,jk->ik", x, w), a @ b)


def test_einsum_dtypes_and_acc_dtype():
    a = np.array([[1, 2], [3, 4]], np.int32)
    got = Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(a))
    assert got.dtype == dtypes.int32 and got.tolist() == (a @ a).tolist()
    assert Tensor.einsum("ij->", Tensor(a), acc_dtype=dtypes.float32).dtype == dtypes.float32
    assert Tensor.einsum("ij,jk", [Tensor(a), Tensor(a)]).tolist() == (a @ a).tolist()


@pytest.mark.parametrize("formula,shapes,match", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "subscript j is 5 in operand 1 but 4 before"),
    ("ij,jk->ik", [(3, 4)], "names 2 operands, got 1"),
    ("ij->ik", [(3, 4)], "output subscript k is in no operand"),
    ("ij->ii", [(3, 4)], "output subscript i appears twice"),
    ("ij1->i", [(3, 4)], "bad character '1'"),
    ("i.j->i", [(3, 4)], "one \"...\" per term"),
    ("ijk->i", [(3, 4)], "operand 0 has 2 dims but its term names 3"),
    ("ii->i", [(3, 4)], "operand 0 repeats i over sizes 3 and 4"),
    ("i->i->i", [(3,)], "more than one \"->\""),
], ids=lambda v: v if isinstance(v, str) else "")
def test_einsum_errors(formula, shapes, match):
    ts = [Tensor(a) for a in arrays(shapes)]
    with pytest.raises(TinycError, match="tc_einsum: .*" + match.replace("(", r"\(")):
        Tensor.einsum(formula, *ts)


# ---- pad2d, repeat_interleave, reshape(None), empty ---------------------------

@requires_autograd
@pytest.mark.parametrize("value", [0.0, -1.5])
@pytest.mark.parametrize("pads", [(1, 1), (1, 2, 0, 3), (-1, 1, 2, -1), (0, 0, 0, 0, 1, 1),
                                  (-2, 0)], ids=str)
def test_pad2d(pads, value):
    a = rand_array(base_shape((2, 3, 4), "transposed"), np.random.default_rng(4))
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x, xt = make_view(t, "transposed", 3), make_view(tt, "transposed", 3)
    got, want = x.pad2d(pads, value=value), F.pad(xt, pads, value=value)
    assert_close(got, want)
    (got * 2).sum().backward()
    (want * 2).sum().backward()
    assert_close(t.grad, tt.grad)
    with pytest.raises(ValueError):
        x.pad2d((1, 2, 3))


@requires_autograd
@pytest.mark.parametrize("repeats", [0, 1, 3])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_repeat_interleave(dim, repeats, layout):
    a = rand_array(base_shape((3, 4), layout), np.random.default_rng(5))
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x, xt = make_view(t, layout, 2), make_view(tt, layout, 2)
    got, want = x.repeat_interleave(repeats, dim), torch.repeat_interleave(xt, repeats, dim)
    assert_close(got, want)
    w = np.random.default_rng(6).uniform(size=tuple(want.shape)).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad)
    assert len(Tensor(a).realize().repeat_interleave(2, 0).schedule()) == 0  # views only


def test_repeat_interleave_edges():
    assert_close(Tensor(2.0).repeat_interleave(3), torch.repeat_interleave(torch.tensor(2.0), 3))
    e = np.zeros((0, 2), np.float32)
    assert Tensor(e).repeat_interleave(2, 1).shape == (0, 4)
    with pytest.raises(ValueError):
        Tensor([1.0]).repeat_interleave(-1)
    with pytest.raises(TypeError):
        Tensor([1.0]).repeat_interleave(Tensor([2]))


def test_reshape_none_keeps_dims():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert Tensor(a).reshape(None, 12).shape == (2, 12)
    assert Tensor(a).reshape(None, None, 2, 2).shape == (2, 3, 2, 2)
    assert Tensor(a).reshape((None, -1)).shape == (2, 12)
    assert_close(Tensor(a).reshape(None, 4, 3), a.reshape(2, 4, 3))
    with pytest.raises(ValueError):
        Tensor(a).reshape(6, 2, 2, None)


def test_empty():
    t = Tensor.empty(2, 3)
    assert t.shape == (2, 3) and t.dtype == dtypes.float32 and t.is_realized()
    assert len(t.schedule()) == 0  # a buffer: nothing to run
    assert Tensor.empty((4,), dtype=dtypes.int32).dtype == dtypes.int32
    assert Tensor.empty().shape == () and Tensor.empty(0, 5).shape == (0, 5)
    t.assign(Tensor(np.ones((2, 3), np.float32)))  # written in place
    assert_close(t, np.ones((2, 3)))
    with pytest.raises(TinycError, match="tc_empty: negative size -1"):
        Tensor.empty(2, -1)
