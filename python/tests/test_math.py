"""test_math.py - the elementwise ops of the breadth issue against torch 1.13:
rounding (trunc floor ceil round sign, half to even, special values, integer
dtypes kept), hyperbolic functions and their inverses, softsign, hardswish,
mish, quick_gelu (by hand: torch has none), celu, lshift/rshift, logical_not
on every dtype, div(upcast=False). Forward on contiguous, transposed, flipped
and strided views and on edge shapes (0-size, 1-element, 0-d); backward
through the views; the zero gradients of the rounding ops, sign and x**0;
one kernel for a chain of them."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import LAYOUTS, assert_close, base_shape, rand_array, requires_autograd, run_both
from tinyc import Tensor, dtypes


def leaf(shape, layout, lohi, seed=0):
    return rand_array(base_shape(shape, layout), np.random.default_rng(seed), *lohi)


def th_quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


# name, tinyc fn, torch fn, input range (kept where the op is smooth)
SMOOTH = [
    ("sinh", Tensor.sinh, torch.sinh, (-3, 3)),
    ("cosh", Tensor.cosh, torch.cosh, (-3, 3)),
    ("asinh", Tensor.asinh, torch.asinh, (-5, 5)),
    ("acosh", Tensor.acosh, torch.acosh, (1.2, 6)),
    ("atanh", Tensor.atanh, torch.atanh, (-0.9, 0.9)),
    ("softsign", Tensor.softsign, F.softsign, (-4, 4)),
    ("hardswish", Tensor.hardswish, F.hardswish, (-5, 5)),
    ("mish", Tensor.mish, F.mish, (-5, 5)),
    ("quick_gelu", Tensor.quick_gelu, th_quick_gelu, (-4, 4)),
    ("celu", lambda x: x.celu(), torch.celu, (-3, 3)),
    ("celu_alpha", lambda x: x.celu(0.5), lambda x: torch.celu(x, 0.5), (-3, 3)),
]
STEP = [
    ("trunc", Tensor.trunc, torch.trunc), ("floor", Tensor.floor, torch.floor),
    ("ceil", Tensor.ceil, torch.ceil), ("round", Tensor.round, torch.round),
    ("sign", Tensor.sign, torch.sign),
]
EDGE_SHAPES = [(), (1,), (0, 3), (2, 0), (1, 1, 1)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", SMOOTH, ids=[o[0] for o in SMOOTH])
def test_smooth_forward(op, layout):
    name, f_tc, f_th, lohi = op
    run_both(f_tc, f_th, [leaf((3, 4), layout, lohi)], [(3, 4)], [layout], grad=False)


@requires_autograd
@pytest.mark.parametrize("layout", ("contig", "transposed", "strided"))
@pytest.mark.parametrize("op", SMOOTH, ids=[o[0] for o in SMOOTH])
def test_smooth_backward(op, layout):
    name, f_tc, f_th, lohi = op
    run_both(f_tc, f_th, [leaf((3, 4), layout, lohi)], [(3, 4)], [layout], grad=True,
             rtol=2e-4, atol=2e-5)


@requires_autograd
@pytest.mark.parametrize("shape", EDGE_SHAPES, ids=str)
@pytest.mark.parametrize("op", SMOOTH + [(n, f, g, (-3, 3)) for n, f, g in STEP],
                         ids=[o[0] for o in SMOOTH] + [o[0] for o in STEP])
def test_edge_shapes(op, shape):
    name, f_tc, f_th, lohi = op
    if name == "acosh":
        lohi = (1.2, 6)
    if name == "atanh":
        lohi = (-0.9, 0.9)
    run_both(f_tc, f_th, [leaf(shape, "contig", lohi)], [shape], ["contig"], grad=True)


SPECIAL = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0.49999997, -0.49999997,
                    0.50000006, 2.4999998, 1e10, -1e10, -3.7, 3.7, 8388607.5, -8388607.5,
                    4194303.5, 16777215.0, np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30],
                   np.float32)


@pytest.mark.parametrize("op", STEP, ids=[o[0] for o in STEP])
def test_step_special_values(op):
    name, f_tc, f_th = op
    got, want = f_tc(Tensor(SPECIAL)).numpy(), f_th(torch.tensor(SPECIAL)).numpy()
    assert got.dtype == np.float32
    assert np.array_equal(got, want, equal_nan=True), (name, got, want)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op", STEP, ids=[o[0] for o in STEP])
def test_step_sign_of_zero(op, dt):
    # floor(-0.0), ceil(-0.5), trunc(-0.3), round(-0.4) are -0 in torch (and C);
    # torch.sign(-0.0) is +0. Torch 1.13 has no half rounding on the CPU: its
    # reference runs on the input rounded to dt, in float32 (exact for these)
    name, f_tc, f_th = op
    a = np.array([-0.0, -0.3, -0.5, -0.7, 0.0, 0.3, -1e-30, 0.5, -2.5, -1.5, 0.7, 1e-30,
                  -1e-3, 1e-3], np.float32)
    x = Tensor(a).cast(getattr(dtypes, dt))
    xin = torch.tensor(x.float().numpy() if dt != "float64" else x.numpy())
    got = torch.tensor(f_tc(x).float().numpy() if dt != "float64" else f_tc(x).numpy())
    want = f_th(xin)
    assert f_tc(x).dtype == getattr(dtypes, dt)
    assert torch.equal(got, want.to(got.dtype)), (name, dt, got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want)), (name, dt, got, want)


@pytest.mark.parametrize("op", STEP, ids=[o[0] for o in STEP])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_step_views(op, layout):
    name, f_tc, f_th = op
    a = leaf((3, 4), layout, (-3, 3)) * 2  # many halves after rounding to float32
    a[..., 0] = 0.5
    run_both(f_tc, f_th, [np.round(a * 2) / 2], [(3, 4)], [layout], grad=False, atol=0)


def test_step_half():
    x = np.array([-2.5, -1.5, 0.5, 1.5, 2.4, -0.7, 1024.5, 3000.0], np.float16)
    for name, f_tc, f_th in STEP:
        got = f_tc(Tensor(x))
        assert got.dtype == dtypes.float16
        assert_close(got, f_th(torch.tensor(x).float()).half(), atol=0, what=name)


@pytest.mark.parametrize("np_dt", [np.int32, np.int64, np.uint8, np.bool_])
def test_step_integers_keep_value_and_dtype(np_dt):
    a = np.array([0, 1, 5, 3], np_dt) if np_dt in (np.uint8, np.bool_) else \
        np.array([-3, 0, 7, -1], np_dt)
    for name, f_tc, f_th in STEP:
        got = f_tc(Tensor(a))
        assert got.dtype.np == np.dtype(np_dt), name
        want = f_th(torch.tensor(a)) if np_dt != np.bool_ or name == "sign" else torch.tensor(a)
        assert_close(got, want, atol=0, what=name)


@requires_autograd
@pytest.mark.parametrize("op", STEP + [("pow0", lambda x: x ** 0, lambda x: x ** 0),
                                        ("pow0.0", lambda x: x ** 0.0, lambda x: x ** 0.0)],
                         ids=[o[0] for o in STEP] + ["pow0", "pow0.0"])
def test_zero_gradients_not_a_cut_graph(op):
    name, f_tc, f_th = op
    a = np.array([[-1.5, 0.0, 2.3], [0.5, -0.2, 4.0]], np.float32)
    x = Tensor(a, requires_grad=True)
    y = f_tc(x) * 3 + x
    assert y.requires_grad
    y.sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    (f_th(xt) * 3 + xt).sum().backward()
    assert_close(x.grad, xt.grad, atol=0, what=name)
    x2 = Tensor(a, requires_grad=True)
    f_tc(x2).sum().backward()  # the op alone: a zero gradient, not "loss does not require grad"
    assert_close(x2.grad, np.zeros_like(a), atol=0)
    assert_close(x ** 0, np.ones_like(a), atol=0)


def test_nonfinite_inputs():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 100.0, -100.0, 1e20, -1e20], np.float32)
    ref = torch.tensor(x)
    for name, f_tc, f_th, _ in SMOOTH:
        with np.errstate(all="ignore"):
            assert_close(f_tc(Tensor(x)), f_th(ref), rtol=1e-5, atol=1e-5, what=name)
    y = np.array([1.0, 0.5, -1.0, 1.5, -2.0], np.float32)
    assert_close(Tensor(y).acosh(), torch.acosh(torch.tensor(y)), what="acosh domain")
    assert_close(Tensor(y).atanh(), torch.atanh(torch.tensor(y)), what="atanh domain")


def test_int_inputs_compute_in_float32():
    a = np.array([-2, 0, 3], np.int32)
    for name, f_tc, f_th, _ in SMOOTH:
        if name in ("acosh", "atanh"):
            continue
        got = f_tc(Tensor(a))
        assert got.dtype == dtypes.float32, name
        assert_close(got, f_th(torch.tensor(a).float()), what=name)


def test_chain_is_one_kernel():
    x = Tensor(np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)).realize()
    y = (x.floor() + x.round().mish() * x.sinh().asinh() - x.hardswish().quick_gelu().celu()
         ).softsign().sign() + x.trunc().ceil()
    assert len(y.schedule()) == 1
    xt = torch.tensor(x.numpy())
    want = (xt.floor() + F.mish(xt.round()) * xt.sinh().asinh() -
            torch.celu(th_quick_gelu(F.hardswish(xt)))).sign() + xt.trunc().ceil()
    assert_close(y, want)


# ---- shifts, logical_not, div(upcast=) -----------------------------------------

@pytest.mark.parametrize("np_dt", [np.int32, np.int64, np.uint8])
def test_shifts(np_dt):
    rng = np.random.default_rng(5)
    lo = 0 if np_dt == np.uint8 else -100
    a = rng.integers(lo, 100, (3, 4)).astype(np_dt)
    bits = np.dtype(np_dt).itemsize * 8
    n = rng.integers(0, bits, (1, 4)).astype(np_dt)
    ta, tn = torch.tensor(a), torch.tensor(n)
    assert_close(Tensor(a) << Tensor(n), torch.bitwise_left_shift(ta, tn), atol=0)
    assert_close(Tensor(a) >> Tensor(n), torch.bitwise_right_shift(ta, tn), atol=0)
    assert_close(Tensor(a).lshift(3), ta << 3, atol=0)
    assert_close(Tensor(a).rshift(2), ta >> 2, atol=0)
    assert_close(Tensor(a).T << 1, ta.T << 1, atol=0)  # non-contiguous
    assert (Tensor(a) << 2).dtype.np == np.dtype(np_dt)


def test_shift_counts_out_of_range():
    a = Tensor(np.array([5, -5, 1, -1], np.int32))
    assert (a << 32).tolist() == [0, 0, 0, 0]
    assert (a << -1).tolist() == [0, 0, 0, 0]
    assert (a >> 40).tolist() == [0, -1, 0, -1]
    assert (a >> 31).tolist() == [0, -1, 0, -1]
    u = Tensor(np.array([255, 1], np.uint8))
    assert (u << 8).tolist() == [0, 0] and (u >> 8).tolist() == [0, 0]
    assert (u << 7).tolist() == [128, 128] and (u >> 7).tolist() == [1, 0]


def test_shift_errors():
    from tinyc import TinycError
    with pytest.raises(TinycError, match="tc_lshift: needs integer tensors, got float32"):
        Tensor([1.0]) << 1
    with pytest.raises(TinycError, match="tc_rshift"):
        Tensor([True]) >> Tensor([True])


@pytest.mark.parametrize("np_dt", [np.float32, np.float16, np.int32, np.int64, np.uint8,
                                   np.bool_])
def test_logical_not_any_dtype(np_dt):
    a = np.array([[0, 1, 2], [3, 0, 1]]).astype(np_dt)
    if np.dtype(np_dt).kind == "f":
        a = np.array([[0.0, -0.0, 0.5], [np.nan, np.inf, 1.0]], np_dt)
    got = Tensor(a).logical_not()
    assert got.dtype == dtypes.bool
    assert_close(got, torch.logical_not(torch.tensor(a)), atol=0)
    assert_close(Tensor(a).T.logical_not(), torch.logical_not(torch.tensor(a).T), atol=0)


def test_invert():
    assert (~Tensor([True, False])).tolist() == [False, True]
    assert (~Tensor(np.array([0, 5, -3], np.int32))).tolist() == [-1, -6, 2]
    assert (~Tensor(np.array([0, 5], np.uint8))).tolist() == [255, 250]
    with pytest.raises(TypeError):
        ~Tensor([1.0])


def test_div_upcast():
    a, b = np.array([7, -7, 9, 5], np.int32), np.array([2, 2, -4, 5], np.int32)
    ta, tb = torch.tensor(a), torch.tensor(b)
    got = Tensor(a).div(Tensor(b), upcast=False)
    assert got.dtype == dtypes.int32
    assert_close(got, torch.div(ta, tb, rounding_mode="trunc"), atol=0)
    assert_close(Tensor(a).div(2, upcast=False), torch.div(ta, 2, rounding_mode="trunc"), atol=0)
    assert_close(Tensor(a).div(Tensor(b)), ta / tb)
    assert Tensor(a).div(Tensor(b)).dtype == dtypes.float32
    f = np.array([1.0, 3.0], np.float32)
    assert_close(Tensor(f).div(2, upcast=False), f / 2)  # floats divide as floats
    assert_close(Tensor(a).div(2.5, upcast=False), a / 2.5)  # int / float promotes to float
    assert_close(Tensor(a).div(Tensor(b), reverse=True, upcast=False),
                 torch.div(tb, ta, rounding_mode="trunc"), atol=0)
