"""test_float64.py - float64 from Python: numpy float64 arrays stay float64
(as in tinygrad; Python floats still default to float32), math, casts,
reductions, promotion and gradients against torch in float64, and the
dtypes helpers around it (tests/diff/test_float64.c checks the kernels
against the reference evaluator and C semantics)."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires_autograd
from tinyc import Tensor, dtypes
from tinyc.dtype import least_upper_dtype, least_upper_float

# tolerances float32 math (about 1e-7 relative) would not meet
RTOL, ATOL = 1e-12, 1e-14


def _vals(n=24, seed=0):
    return np.random.default_rng(seed).standard_normal(n) * 3


def test_numpy_float64_stays_float64():
    a = _vals()
    t = Tensor(a)
    assert t.dtype == dtypes.float64 and t.dtype is dtypes.double
    got = t.numpy()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, a)  # bit for bit
    # Python floats and lists of them keep tinygrad's default float
    assert Tensor(1.5).dtype == dtypes.float32 and Tensor([0.1, 2.0]).dtype == dtypes.float32
    assert Tensor([0.1], dtype=dtypes.float64).numpy()[0] == 0.1
    assert Tensor(0.1, dtype="float64").item() == 0.1
    assert Tensor(np.float32(0.5) * np.ones(3, np.float32)).dtype == dtypes.float32
    # a scalar takes the tensor's dtype, as tinygrad's: float64 stays float64
    assert (t * 2.5).dtype == dtypes.float64 and (1 - t).dtype == dtypes.float64
    np.testing.assert_array_equal((t + 0.1).numpy(), a + 0.1)


@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "sqrt", "tanh", "sigmoid",
                                  "exp2", "log2", "reciprocal", "abs", "relu", "square"])
def test_unary_against_torch(name):
    a = _vals()
    if name in ("log", "sqrt", "log2"):
        a = np.abs(a) + 1e-3
    got = getattr(Tensor(a), name)()
    assert got.dtype == dtypes.float64
    want = getattr(torch, name)(torch.tensor(a, dtype=torch.float64)) if name not in (
        "relu", "reciprocal", "square") else getattr(torch.tensor(a), name)()
    assert_close(got, want, rtol=RTOL, atol=ATOL, what=name)


def test_binary_matmul_reduce_against_torch():
    a, b = _vals(24, 1).reshape(4, 6), _vals(24, 2).reshape(4, 6)
    ta, tb = Tensor(a), Tensor(b)
    xa, xb = torch.tensor(a), torch.tensor(b)
    for got, want, what in [(ta + tb, xa + xb, "add"), (ta - tb, xa - xb, "sub"),
                            (ta * tb, xa * xb, "mul"), (ta / tb, xa / xb, "div"),
                            (ta.abs() ** tb, xa.abs() ** xb, "pow"),
                            (ta.maximum(tb), torch.maximum(xa, xb), "maximum"),
                            (ta @ tb.T, xa @ xb.T, "matmul"),
                            (ta.sum(1), xa.sum(1), "sum"), (ta.max(0), xa.max(0).values, "max"),
                            (ta.mean(), xa.mean(), "mean"), (ta.std(1), xa.std(1), "std"),
                            (ta.var(0), xa.var(0), "var"),
                            (ta.softmax(1), xa.softmax(1), "softmax"),
                            (ta.log_softmax(1), xa.log_softmax(1), "log_softmax"),
                            (ta.cumsum(1), xa.cumsum(1), "cumsum")]:
        assert got.dtype == dtypes.float64, what
        assert_close(got, want, rtol=RTOL, atol=ATOL, what=what)
    # a long sum in double: float32 would be off by about 1e-4
    n = 100000
    assert abs(Tensor(np.full(n, 0.1)).sum().item() - 0.1 * n) < 1e-8


def test_casts_and_promotion():
    a = np.array([-3.75, -1.0, -0.0, 0.0, 0.5, 1.0, 2.999, 100.5, 126.0], np.float64)
    t = Tensor(a)
    for name in ("float32", "float16", "int8", "int16", "int32", "int64", "bool"):
        got = t.cast(getattr(dtypes, name))
        assert got.dtype == getattr(dtypes, name)
        np.testing.assert_array_equal(got.numpy(), a.astype(name), err_msg=name)
        back = got.cast(dtypes.float64)
        np.testing.assert_array_equal(back.numpy(), a.astype(name).astype(np.float64))
    pos = np.abs(a)
    for name in ("uint8", "uint16", "uint32"):
        np.testing.assert_array_equal(Tensor(pos).cast(name).numpy(), pos.astype(name))
    assert Tensor(a.astype(np.float32)).double().dtype == dtypes.float64
    for other in ("float32", "float16", "int64", "int8", "uint32", "bool"):
        s = t + Tensor(np.zeros(len(a), other))
        assert s.dtype == dtypes.float64, other
        assert s.dtype.np == np.result_type(np.float64, np.dtype(other))


def test_dtypes_helpers():
    assert dtypes.is_float(dtypes.float64) and not dtypes.is_int(dtypes.float64)
    assert not dtypes.is_unsigned(dtypes.double)
    assert dtypes.min(dtypes.float64) == -np.inf and dtypes.max(dtypes.float64) == np.inf
    assert dtypes.float64.itemsize == 8 and dtypes.float64.np == np.float64
    fields = dtypes.fields()
    assert fields["float64"] is dtypes.float64 and fields["double"] is dtypes.float64
    assert fields["uchar"] is dtypes.uint8
    assert dtypes.as_const(2.7, dtypes.int32) == 2 and dtypes.as_const(2, dtypes.float64) == 2.0
    assert dtypes.as_const(3, dtypes.bool) is True
    assert least_upper_dtype(dtypes.float32, dtypes.float64) is dtypes.float64
    assert least_upper_dtype(dtypes.int8, dtypes.uint8, dtypes.int16) is dtypes.int16
    assert least_upper_float(dtypes.int64) is dtypes.float32
    assert least_upper_float(dtypes.float64) is dtypes.float64
    assert Tensor([1.0]).double().is_floating_point()


@requires_autograd
def test_grad_stays_float64():
    a = _vals(12, 3).reshape(3, 4)
    t = Tensor(a, requires_grad=True)
    x = torch.tensor(a, requires_grad=True)
    ((t.exp() * t).sum() + t.std(1).sum() + (t @ t.T).tanh().mean()).backward()
    ((x.exp() * x).sum() + x.std(1).sum() + (x @ x.T).tanh().mean()).backward()
    assert t.grad.dtype == dtypes.float64
    assert_close(t.grad, x.grad, rtol=RTOL, atol=ATOL, what="grad")
