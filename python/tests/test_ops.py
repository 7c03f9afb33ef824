"""test_ops.py - every elementwise Tensor method against torch: forward on
contiguous, transposed, flipped and strided views with broadcasting, Python
scalars on either side; backward (the leaf's gradient through the view) where
the op is differentiable and the library has autograd."""
import numpy as np
import pytest
import torch

from helpers import (LAYOUTS, assert_close, base_shape, make_view, rand_array,
                     requires, requires_autograd, run_both)
from tinyc import Tensor, dtypes


def leaves(shapes, layouts, lohi, seed=0):
    rng = np.random.default_rng(seed)
    return [rand_array(base_shape(s, lay), rng, *lh) for s, lay, lh in zip(shapes, layouts, lohi)]


# name, tinyc fn, torch fn, input range
UNARY = [
    ("neg", lambda x: -x, lambda x: -x, (-2, 2)),
    ("exp", Tensor.exp, torch.exp, (-3, 3)),
    ("log", Tensor.log, torch.log, (0.1, 4)),
    ("exp2", Tensor.exp2, torch.exp2, (-3, 3)),
    ("log2", Tensor.log2, torch.log2, (0.1, 4)),
    ("sqrt", Tensor.sqrt, torch.sqrt, (0.1, 4)),
    ("rsqrt", Tensor.rsqrt, torch.rsqrt, (0.1, 4)),
    ("sin", Tensor.sin, torch.sin, (-6, 6)),
    ("cos", Tensor.cos, torch.cos, (-6, 6)),
    ("relu", Tensor.relu, torch.relu, (-2, 2)),
    ("sigmoid", Tensor.sigmoid, torch.sigmoid, (-6, 6)),
    ("tanh", Tensor.tanh, torch.tanh, (-3, 3)),
    ("abs", Tensor.abs, torch.abs, (-2, 2)),
    ("square", Tensor.square, torch.square, (-2, 2)),
    ("reciprocal", Tensor.reciprocal, torch.reciprocal, (0.5, 3)),
    ("clip", lambda x: x.clip(-0.5, 0.7), lambda x: x.clamp(-0.5, 0.7), (-2, 2)),
    ("clip_min", lambda x: x.clip(min_=0.3), lambda x: x.clamp(min=0.3), (-2, 2)),
    ("pow_scalar", lambda x: x ** 3, lambda x: x ** 3, (-2, 2)),
    ("pow_half", lambda x: x ** 0.5, lambda x: x ** 0.5, (0.1, 2)),
    ("pow_float", lambda x: x ** 1.7, lambda x: x ** 1.7, (0.1, 2)),
    ("rpow", lambda x: 2 ** x, lambda x: 2 ** x, (-2, 2)),
    ("radd", lambda x: 2 + x, lambda x: 2 + x, (-2, 2)),
    ("rsub", lambda x: 2 - x, lambda x: 2 - x, (-2, 2)),
    ("rmul", lambda x: 0.5 * x, lambda x: 0.5 * x, (-2, 2)),
    ("rdiv", lambda x: 2 / x, lambda x: 2 / x, (0.5, 2)),
    ("sub_scalar", lambda x: x - 1.5, lambda x: x - 1.5, (-2, 2)),
    ("div_scalar", lambda x: x / 4, lambda x: x / 4, (-2, 2)),
    ("maximum_scalar", lambda x: x.maximum(0.25), lambda x: torch.clamp(x, min=0.25), (-2, 2)),
    ("minimum_scalar", lambda x: x.minimum(0.25), lambda x: torch.clamp(x, max=0.25), (-2, 2)),
]
UNARY_IDS = [u[0] for u in UNARY]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", UNARY, ids=UNARY_IDS)
def test_unary_forward(op, layout):
    name, f_tc, f_th, lohi = op
    shape = (3, 4)
    run_both(f_tc, f_th, leaves([shape], [layout], [lohi]), [shape], [layout], grad=False)


@requires_autograd
@pytest.mark.parametrize("layout", ("contig", "transposed", "strided"))
@pytest.mark.parametrize("op", UNARY, ids=UNARY_IDS)
def test_unary_backward(op, layout):
    name, f_tc, f_th, lohi = op
    shape = (3, 4)
    run_both(f_tc, f_th, leaves([shape], [layout], [lohi]), [shape], [layout], grad=True)


BINARY = [
    ("add", lambda a, b: a + b, (-2, 2), (-2, 2)),
    ("sub", lambda a, b: a - b, (-2, 2), (-2, 2)),
    ("mul", lambda a, b: a * b, (-2, 2), (-2, 2)),
    ("div", lambda a, b: a / b, (-2, 2), (0.5, 2)),
    ("pow", lambda a, b: a ** b, (0.5, 2), (-2, 2)),
    ("maximum", lambda a, b: a.maximum(b) if isinstance(a, Tensor) else torch.maximum(a, b),
     (-2, 2), (-2, 2)),
    ("minimum", lambda a, b: a.minimum(b) if isinstance(a, Tensor) else torch.minimum(a, b),
     (-2, 2), (-2, 2)),
]
COMPARE = [
    ("lt", lambda a, b: a < b), ("gt", lambda a, b: a > b), ("le", lambda a, b: a <= b),
    ("ge", lambda a, b: a >= b), ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b),
]
SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)),
          ((), (2, 3))]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", BINARY, ids=[b[0] for b in BINARY])
def test_binary_forward(op, shapes, layout):
    name, f, lo_a, lo_b = op
    lays = [layout, "contig"]
    run_both(f, f, leaves(shapes, lays, [lo_a, lo_b]), shapes, lays, grad=False)


@requires_autograd
@pytest.mark.parametrize("layout", ("contig", "transposed"))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", BINARY, ids=[b[0] for b in BINARY])
def test_binary_backward(op, shapes, layout):
    name, f, lo_a, lo_b = op
    lays = [layout, "contig"]
    run_both(f, f, leaves(shapes, lays, [lo_a, lo_b]), shapes, lays, grad=True)


@pytest.mark.parametrize("shapes", SHAPES[:3], ids=str)
@pytest.mark.parametrize("op", COMPARE, ids=[c[0] for c in COMPARE])
def test_compare(op, shapes):
    name, f = op
    rng = np.random.default_rng(2)
    # small integers as floats, so equal values occur
    a, b = (rng.integers(-2, 3, s).astype(np.float32) for s in shapes)
    got = f(Tensor(a), Tensor(b))
    assert got.dtype == dtypes.bool
    assert_close(got, f(torch.tensor(a), torch.tensor(b)), what=name)


@pytest.mark.parametrize("op", COMPARE, ids=[c[0] for c in COMPARE])
def test_compare_scalar_both_sides(op):
    name, f = op
    a = np.array([[-1.0, 0.0, 1.0], [2.0, 1.0, -3.0]], np.float32)
    assert_close(f(Tensor(a), 1), f(torch.tensor(a), 1), what=name)
    assert_close(f(1, Tensor(a)), f(1, torch.tensor(a)), what=name + " reversed")


def test_scalar_dtypes_follow_tinygrad():
    i = Tensor([1, 2, 3])
    f = Tensor([1.0, 2.0])
    h = Tensor(np.array([1, 2], np.float16))
    b = Tensor([True, False])
    assert i.dtype == dtypes.int32 and f.dtype == dtypes.float32 and b.dtype == dtypes.bool
    assert (i + 1).dtype == dtypes.int32
    assert (i * 2.5).dtype == dtypes.float32
    assert (h * 2.5).dtype == dtypes.float16
    assert (b + 1).dtype == dtypes.int32
    assert (i / 2).dtype == dtypes.float32
    assert_close(i * 2.5, [2.5, 5.0, 7.5])
    assert_close(3 - i, [2, 1, 0])
    assert_close(np.float32(2) * f, [2.0, 4.0])  # numpy scalars defer to Tensor
    u = Tensor(np.array([1, 255], np.uint8))
    assert (u + 1).dtype == dtypes.uint8
    assert (u != -1).tolist() == [True, True]  # -1 is no uint8: the scalar stays int32
    assert (u - 300).dtype == dtypes.int32 and (u - 300).tolist() == [-299, -45]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_where(layout):
    rng = np.random.default_rng(3)
    cond = rng.random((3, 4)) > 0.5
    x = rand_array(base_shape((3, 4), layout), rng)
    y = rand_array((1, 4), rng)
    got = Tensor(cond).where(make_view(Tensor(x), layout, 2), Tensor(y))
    want = torch.where(torch.tensor(cond), make_view(torch.tensor(x), layout, 2),
                       torch.tensor(y))
    assert_close(got, want)
    assert_close(Tensor(cond).where(1.0, 0), cond.astype(np.float32))
    assert_close(Tensor(cond).where(Tensor(y), 0.5), np.where(cond, y, 0.5))


@requires_autograd
def test_where_backward():
    rng = np.random.default_rng(4)
    cond = rng.random((3, 4)) > 0.5
    x, y = rand_array((3, 4), rng), rand_array((1, 4), rng)
    run_both(lambda a, b: Tensor(cond).where(a, b),
             lambda a, b: torch.where(torch.tensor(cond), a, b),
             [x, y], [(3, 4), (1, 4)], ["contig", "contig"], grad=True)


@pytest.mark.parametrize("src,dst", [
    (np.float32, dtypes.int32), (np.float32, dtypes.float16), (np.float32, dtypes.bool),
    (np.int32, dtypes.float32), (np.int64, dtypes.int32), (np.uint8, dtypes.float32),
    (np.bool_, dtypes.float32), (np.float16, dtypes.float32), (np.int32, dtypes.uint8)])
def test_cast(src, dst):
    a = np.array([[0, 1.5, -2.7], [3.2, 100.9, -0.4]])
    if np.dtype(src).kind in "ub":
        a = np.abs(a)
    a = a.astype(src)
    got = Tensor(a).cast(dst)
    assert got.dtype == dst
    want = torch.tensor(a).to(getattr(torch, dst.name))
    assert_close(got, want, what="cast %s -> %s" % (np.dtype(src), dst.name))


def test_cast_names():
    t = Tensor([1.5, -2.5])
    assert t.int().dtype == dtypes.int32 and t.long().dtype == dtypes.int64
    assert t.half().dtype == dtypes.float16 and t.bool().dtype == dtypes.bool
    assert t.cast("int32").dtype == dtypes.int32 and t.cast(np.float16).dtype == dtypes.float16
    assert t.cast(torch.int64).dtype == dtypes.int64 and t.int().float().dtype == dtypes.float32


def test_integer_ops():
    a, b = np.array([7, -7, 9, 4], np.int32), np.array([2, 2, -4, 3], np.int32)
    assert_close(Tensor(a) // Tensor(b), np.trunc(a / b).astype(np.int32))  # C: toward zero
    assert_close(Tensor(a) % Tensor(b), np.fmod(a, b))                        # C: dividend's sign
    assert_close(Tensor(a) ** 2, a ** 2)
    assert (Tensor(a) ** 2).dtype == dtypes.int32
    x = Tensor([True, False, True])
    assert (~x).tolist() == [False, True, False]
    assert (x & Tensor([True, True, False])).tolist() == [True, False, False]
    assert (x | False).tolist() == [True, False, True]
    assert (x ^ True).tolist() == [False, True, False]


@requires("tc_backward_ex")
@pytest.mark.parametrize("shape", [(3, 4), (2, 1, 3), (5,)])
def test_backward_with_gradient(shape):
    """torch's y.backward(gradient) for a non-scalar y, through a view and a
    reduce; a second call (the first retained the graph) accumulates; a
    wrong gradient shape is refused"""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    t, tt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = (t.exp() * t).flip(0).cumsum(0)
    ty = (tt.exp() * tt).flip(0).cumsum(0)
    g = rng.standard_normal(shape).astype(np.float32)
    y.backward(Tensor(g), retain_graph=True)
    ty.backward(torch.tensor(g), retain_graph=True)
    assert_close(t.grad, tt.grad.numpy(), rtol=1e-5, atol=1e-5)
    y.backward(g)  # array-likes too; accumulates
    assert_close(t.grad, 2 * tt.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="gradient of shape"):
        y.backward(Tensor(np.zeros((7,), np.float32)))
    with pytest.raises(ValueError, match="scalar"):
        y.backward()
