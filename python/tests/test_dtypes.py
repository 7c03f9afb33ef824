"""test_dtypes.py - tinygrad's dtypes helpers (min, max, from_py,
is_unsigned, is_float, is_int) against numpy's and torch's facts, and the
Tensor methods around dtypes and values: is_floating_point, replace,
bitcast (against numpy's and torch's view(dtype))."""
import math

import numpy as np
import pytest
import torch

from helpers import assert_close
from tinyc import Tensor, dtypes


@pytest.mark.parametrize("name", ["int32", "int64", "uint8"])
def test_integer_limits(name):
    info = torch.iinfo(getattr(torch, name))
    assert dtypes.min(getattr(dtypes, name)) == info.min
    assert dtypes.max(getattr(dtypes, name)) == info.max
    assert dtypes.is_unsigned(name) == (info.min == 0)
    assert dtypes.is_int(name) and not dtypes.is_float(name)


def test_float_and_bool_limits():
    for dt in (dtypes.float32, dtypes.float16):
        assert dtypes.min(dt) == -math.inf and dtypes.max(dt) == math.inf
        assert dtypes.is_float(dt) and not dtypes.is_unsigned(dt)
    assert dtypes.min(dtypes.bool) is False and dtypes.max(dtypes.bool) is True
    assert not dtypes.is_unsigned(dtypes.bool)


def test_from_py():
    assert dtypes.from_py(1.5) == dtypes.default_float
    assert dtypes.from_py(3) == dtypes.default_int
    assert dtypes.from_py(True) == dtypes.bool
    assert dtypes.from_py([]) == dtypes.default_float
    assert dtypes.from_py([True, False]) == dtypes.bool
    assert dtypes.from_py([1, True]) == dtypes.default_int
    assert dtypes.from_py([[1, 2], [3.0]]) == dtypes.default_float
    assert dtypes.from_py((1, (2, 3))) == dtypes.default_int
    with pytest.raises(RuntimeError, match="could not infer dtype"):
        dtypes.from_py("a")
    # what Tensor() makes of the same values
    for v in ([1, 2], [1.0, 2], [True]):
        assert Tensor(v).dtype == dtypes.from_py(v)


def test_is_floating_point():
    assert Tensor([1.0]).is_floating_point()
    assert Tensor([1.0]).half().is_floating_point()
    assert not Tensor([1]).is_floating_point()
    assert not Tensor([True]).is_floating_point()


def test_replace():
    a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = Tensor(np.ones((2, 3), np.int32))
    lazy = a * 2  # reads a's old value
    assert a.replace(b) is a
    assert a.dtype == dtypes.int32 and a.numpy().tolist() == [[1, 1, 1], [1, 1, 1]]
    assert lazy.numpy().tolist() == [[0, 2, 4], [6, 8, 10]]
    with pytest.raises(AssertionError, match="replace shape mismatch"):
        a.replace(Tensor(np.zeros(6, np.float32)))
    with pytest.raises(AssertionError, match="must not require grad"):
        a.replace(Tensor(np.zeros((2, 3), np.float32), requires_grad=True))
    with pytest.raises(TypeError):
        a.replace(np.zeros((2, 3)))


@pytest.mark.parametrize("name", ["int8", "int16", "uint16", "uint32"])
def test_integer_dtypes_against_numpy(name):
    """the new integer dtypes end to end: from/to numpy, wrapping arithmetic,
    bitwise ops, comparisons, casts, reductions and promotion, as numpy
    computes them (tests/diff/test_int_dtypes.c checks them against the
    reference evaluator and C semantics)"""
    npdt, dt = np.dtype(name), getattr(dtypes, name)
    info = np.iinfo(npdt)
    a = np.array([info.min, info.min + 1, 0, 1, 2, 3, 100, info.max // 3, info.max - 1,
                  info.max, 7, 64], dtype=npdt)
    b = a[::-1].copy()
    ta, tb = Tensor(a), Tensor(b)
    assert ta.dtype == dt and tb.numpy().dtype == npdt
    assert dtypes.min(dt) == info.min and dtypes.max(dt) == info.max
    with np.errstate(over="ignore"):
        for got, want in [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b),
                          (ta.maximum(tb), np.maximum(a, b)), (ta.minimum(tb), np.minimum(a, b)),
                          (ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (-ta, -a)]:
            assert got.dtype == dt
            np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)
    np.testing.assert_array_equal((ta == tb).numpy(), a == b)
    for to in ("float32", "int64", "int32", "uint8", "int8"):
        np.testing.assert_array_equal(ta.cast(getattr(dtypes, to)).numpy(), a.astype(to))
    m = a.reshape(3, 4)
    np.testing.assert_array_equal(Tensor(m).sum(1).numpy(), m.astype(np.int64).sum(1))
    np.testing.assert_array_equal(Tensor(m).max(1).numpy(), m.max(1))
    np.testing.assert_array_equal(Tensor(m).min(0).numpy(), m.min(0))
    for other in ("uint8", "int8", "int32", "uint32"):
        want = np.result_type(npdt, np.dtype(other))
        assert (ta + Tensor(np.zeros(12, other))).dtype.np == want, (name, other)
    assert (ta + Tensor(np.zeros(12, np.float32))).dtype == dtypes.float32  # numpy: float64


def test_uint64_against_numpy():
    """uint64 end to end: values past 2^63, unsigned order, division, modulo
    and right shift, wrapping, casts, reductions and promotion, as numpy
    computes them (tests/diff/test_int_dtypes.c checks the kernels against
    the reference evaluator and C semantics)"""
    top = np.iinfo(np.uint64).max
    a = np.array([0, 1, 2, 7, 100, 2**63 - 1, 2**63, 2**63 + 5, top - 1, top, 12345678901234567890,
                  64], np.uint64)
    b = np.array([3, top, 2**63, 1, 7, 2, 0, 2**62, 5, top, 10, 64], np.uint64)
    ta, tb = Tensor(a), Tensor(b)
    assert ta.dtype == dtypes.uint64 and ta.numpy().dtype == np.uint64
    np.testing.assert_array_equal(ta.numpy(), a)
    assert dtypes.max(dtypes.uint64) == top and dtypes.min(dtypes.ulong) == 0
    assert dtypes.is_unsigned(dtypes.uint64) and dtypes.is_int(dtypes.uint64)
    nz = np.where(b == 0, 1, b).astype(np.uint64)
    tnz = Tensor(nz)
    with np.errstate(over="ignore"):
        for got, want, what in [(ta + tb, a + b, "add"), (ta - tb, a - b, "sub"),
                                (ta * tb, a * b, "mul"), (ta // tnz, a // nz, "idiv"),
                                (ta % tnz, a % nz, "mod"), (ta.maximum(tb), np.maximum(a, b), "max"),
                                (ta.minimum(tb), np.minimum(a, b), "min"),
                                (ta & tb, a & b, "and"), (ta | tb, a | b, "or"),
                                (ta ^ tb, a ^ b, "xor"), (ta < tb, a < b, "lt"),
                                (ta == tb, a == b, "eq"), (ta > tb, a > b, "gt")]:
            np.testing.assert_array_equal(got.numpy(), want, err_msg=what)
    sh = np.array([0, 1, 3, 63, 5, 2, 1, 0, 7, 62, 4, 1], np.uint64)
    np.testing.assert_array_equal((ta >> Tensor(sh)).numpy(), a >> sh)
    np.testing.assert_array_equal((ta << Tensor(sh)).numpy(), a << sh)
    m = a.reshape(3, 4)
    np.testing.assert_array_equal(Tensor(m).max(1).numpy(), m.max(1))
    np.testing.assert_array_equal(Tensor(m).min(0).numpy(), m.min(0))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(Tensor(m).sum(1).numpy(), m.sum(1, dtype=np.uint64))
    assert Tensor(m).sum().dtype == dtypes.uint64
    np.testing.assert_array_equal(ta.cast(dtypes.float64).numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(ta.cast(dtypes.float32).numpy(), a.astype(np.float32))
    np.testing.assert_array_equal(ta.cast(dtypes.int64).numpy(), a.astype(np.int64))
    np.testing.assert_array_equal(ta.cast(dtypes.uint8).numpy(), a.astype(np.uint8))
    small = np.array([0.0, 1.5, 2.0**40, 2.0**63, 2.0**64 - 2048], np.float64)
    np.testing.assert_array_equal(Tensor(small).cast(dtypes.uint64).numpy(), small.astype(np.uint64))
    for other in ("uint8", "uint32", "int8", "int64", "float32", "bool"):
        want = np.result_type(np.uint64, np.dtype(other))
        if other == "float32":
            want = np.dtype(np.float32)  # a float over any integer, as tinygrad
        assert (ta + Tensor(np.zeros(12, other))).dtype.np == want, other
    assert Tensor([top]).dtype == dtypes.uint64 and Tensor([top]).numpy()[0] == top


def _bf16(x):
    """float32 values rounded to bfloat16 (nearest even) with torch"""
    return torch.tensor(np.asarray(x, np.float32)).to(torch.bfloat16).float().numpy()


def test_bfloat16_against_torch():
    """bfloat16: storage with casts (round to nearest even on the way down),
    elementwise math in float32 rounded after every op, as torch's bfloat16
    ops on the CPU give them; .numpy() is float32 (numpy has no bfloat16), as
    tinygrad (tests/diff/test_bfloat16.c checks the kernels bit for bit)"""
    f = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 0.1, -0.1, 3.3961775e38, 1e-40, 65504.0,
                  16777217.0, -0.0, 123.456, np.inf, -2.5], np.float32)
    t = Tensor(f).cast(dtypes.bfloat16)
    assert t.dtype == dtypes.bfloat16 and t.dtype.itemsize == 2 and t.nbytes == 2 * len(f)
    got = t.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, _bf16(f))
    np.testing.assert_array_equal(Tensor(f, dtype=dtypes.bfloat16).numpy(), _bf16(f))
    np.testing.assert_array_equal(Tensor(f.tolist(), dtype="bfloat16").numpy(), _bf16(f))
    a = _bf16(np.linspace(-3, 3, 12))
    b = _bf16(np.linspace(0.5, 7, 12))
    ta, tb = Tensor(a, dtype=dtypes.bfloat16), Tensor(b, dtype=dtypes.bfloat16)
    xa, xb = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
    for got, want, what in [(ta + tb, xa + xb, "add"), (ta * tb, xa * xb, "mul"),
                            (ta - tb, xa - xb, "sub"), (ta.maximum(tb), torch.maximum(xa, xb), "max"),
                            (-ta, -xa, "neg"), (tb.sqrt(), xb.sqrt(), "sqrt"),
                            (ta.sum(), xa.float().sum().bfloat16(), "sum"),
                            (ta.max(), xa.max(), "max all")]:
        assert got.dtype == dtypes.bfloat16, what
        np.testing.assert_array_equal(got.numpy(), want.float().numpy(), err_msg=what)
    # exp, sin: float32 math rounded after each step: within a couple of bfloat16 steps
    assert_close(ta.exp(), xa.float().exp(), rtol=3 * 2**-8, atol=0, what="exp")
    assert_close(ta.sin(), xa.float().sin(), rtol=2 * 2**-8, atol=2**-9, what="sin")
    # promotion: bfloat16 with float16 is float32, with ints bfloat16
    assert (ta + Tensor(np.zeros(12, np.float16))).dtype == dtypes.float32
    assert (ta + Tensor(np.zeros(12, np.int32))).dtype == dtypes.bfloat16
    assert (ta + Tensor(np.zeros(12, np.float32))).dtype == dtypes.float32
    assert (ta * 2).dtype == dtypes.bfloat16
    assert dtypes.is_float(dtypes.bfloat16) and dtypes.fields()["bfloat16"] is dtypes.bfloat16
    np.testing.assert_array_equal(ta.cast(dtypes.int32).numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(ta.cast(dtypes.float64).numpy(), a.astype(np.float64))


def test_safetensors_new_dtypes(tmp_path):
    """tinyc.nn.state.safe_save/safe_load keep every dtype (BF16 as its bits)"""
    from tinyc.nn.state import safe_load, safe_save
    ts = {"f64": Tensor(np.array([0.1, -1e300])),
          "u64": Tensor(np.array([2**64 - 1, 5], np.uint64)),
          "i8": Tensor(np.array([-128, 127], np.int8)),
          "u32": Tensor(np.array([4000000000, 1], np.uint32)),
          "bf16": Tensor(np.array([1.0 + 2**-8, -3.25], np.float32), dtype=dtypes.bfloat16)}
    fn = str(tmp_path / "new.safetensors")
    safe_save(ts, fn)
    back = safe_load(fn)
    for k, t in ts.items():
        assert back[k].dtype == t.dtype, k
        np.testing.assert_array_equal(back[k].numpy(), t.numpy(), err_msg=k)


NP_BY_SIZE = {1: ["uint8", "int8", "bool"], 2: ["int16", "uint16", "float16"],
              4: ["int32", "uint32", "float32"], 8: ["int64", "uint64", "float64"]}


def special_bits(size, n=12, seed=7):
    raw = np.random.default_rng(seed).integers(0, 256, size=n * size, dtype=np.uint8)
    u = raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
    specials = {2: [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x83ff, 0x3c00],
                4: [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 1, 0x807fffff, 0x3f800000],
                8: [0, 1 << 63, 0x7ff0000000000000, 0xfff8000000000000, 1, 0x3ff0000000000000]}
    for i, v in enumerate(specials.get(size, [])):
        u[i] = v
    return u


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_bitcast_against_numpy(size):
    bits = special_bits(size)
    for src in NP_BY_SIZE[size]:
        if src == "bool":
            continue
        a = bits.view(np.dtype(src))
        for dst in NP_BY_SIZE[size]:
            if dst == "bool":
                continue
            got = Tensor(a).bitcast(getattr(dtypes, dst))
            assert got.dtype == getattr(dtypes, dst) and got.shape == a.shape
            assert got.numpy().tobytes() == a.view(np.dtype(dst)).tobytes(), (src, dst)


def test_bitcast_bfloat16_against_torch():
    v = torch.tensor([1.5, -0.0, 3.140625, float("inf"), -1e-40, 65280.0, float("nan"), -2.0],
                     dtype=torch.bfloat16)
    x = Tensor(v.float().numpy()).cast(dtypes.bfloat16)
    for dst, tdt in ((dtypes.int16, torch.int16), (dtypes.uint16, None), (dtypes.float16, torch.float16)):
        got = x.bitcast(dst)
        want = v.view(tdt) if tdt is not None else v.view(torch.int16)
        if tdt is None:  # torch 1.13 has no uint16: compare the bits
            assert got.numpy().view(np.int16).tolist() == want.numpy().tolist()
        else:
            assert got.numpy().tobytes() == want.numpy().tobytes(), dst
        back = got.bitcast(dtypes.bfloat16)
        assert torch.equal(torch.tensor(back.numpy()).view(torch.int32),
                           v.float().view(torch.int32)), dst


@pytest.mark.parametrize("layout", ["transposed", "strided", "flipped"])
def test_bitcast_views_fuse_and_edges(layout):
    from helpers import make_view
    a = np.random.default_rng(8).uniform(-4, 4, (4, 6)).astype(np.float32)
    x, xt = make_view(Tensor(a), layout, 2), make_view(torch.tensor(a), layout, 2)
    y = (x * 2).bitcast(dtypes.int32) + 1
    assert len(y.schedule()) == 1  # the multiply, the bitcast and the add: one kernel
    assert y.numpy().tolist() == ((xt * 2).view(torch.int32) + 1).tolist()
    for shape in [(), (0,), (1,), (0, 3)]:
        e = np.full(shape, -1.5, np.float32)
        got = Tensor(e).bitcast(dtypes.uint32)
        assert got.shape == shape
        assert got.numpy().tobytes() == e.view(np.uint32).tobytes()
    assert Tensor([True, False]).bitcast(dtypes.uint8).tolist() == [1, 0]
    t = Tensor([1.0, 2.0])
    assert t.bitcast(dtypes.float32) is t  # tinygrad's: the same dtype is itself


def test_llvm_bf16_cast():
    v = np.array([1.5, -0.0, 3.140625, np.inf, -2.5e-39, 65280.0, np.nan], np.float32)
    x = Tensor(v).cast(dtypes.bfloat16)
    for dt in (dtypes.float32, dtypes.float16, dtypes.float64):
        got, want = x.llvm_bf16_cast(dt), x.cast(dt)
        assert got.dtype == dt
        assert got.numpy().tobytes() == want.numpy().tobytes(), dt
    with pytest.raises(AssertionError):
        Tensor([1.0]).llvm_bf16_cast(dtypes.float32)


def test_bitcast_errors():
    from tinyc import TinycError
    with pytest.raises(TinycError, match="tc_bitcast: float32 \\(4 bytes\\) to int16 \\(2 bytes\\)"):
        Tensor([1.0, 2.0]).bitcast(dtypes.int16)
    with pytest.raises(TinycError, match="uint8 to bool"):
        Tensor(np.array([2], np.uint8)).bitcast(dtypes.bool)
    with pytest.raises(RuntimeError, match="can't backprop through bitcast"):
        Tensor([1.0], requires_grad=True).bitcast(dtypes.int32)
    assert Tensor([1.0], requires_grad=True).detach().bitcast(dtypes.int32).tolist() == [1065353216]
