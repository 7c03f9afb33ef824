"""test_second_device.py - this branch's ops on a second device (OPENCL, where
there is one; skipped otherwise), against torch and the CPU: cumprod forward
and backward (a product reduce on that device), the sign of zero of the
rounding ops, bitcast (every 16-bit pattern through float16 and bfloat16:
non-NaN bits exact, a NaN stays a NaN), and to_ / to between the CPU and it
with real values, gradients and history."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires_autograd
from tinyc import Tensor, TinycError, dtypes


@pytest.fixture(scope="module")
def dev():
    try:
        Tensor([1.0], device="OPENCL").numpy()
    except TinycError:
        pytest.skip("no OPENCL device")
    return "OPENCL"


@requires_autograd
def test_cumprod(dev):
    a = np.random.default_rng(0).uniform(-2, 2, (3, 7)).astype(np.float32)
    a[1, 2] = a[2, 1] = a[2, 4] = 0.0
    w = np.random.default_rng(1).uniform(-1, 1, a.shape).astype(np.float32)
    x = Tensor(a, device=dev, requires_grad=True)
    y = x.cumprod(1)
    assert len(y.schedule()) == 1
    (y * Tensor(w, device=dev)).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    yt = torch.cumprod(xt, 1)
    (yt * torch.tensor(w)).sum().backward()
    assert_close(y, yt, atol=1e-6)
    assert_close(x.grad, xt.grad, rtol=1e-5, atol=1e-5)
    big = np.array([3, 1000, 1000, 1000, 7], np.int64)
    assert Tensor(big, device=dev).cumprod(0).tolist() == torch.cumprod(torch.tensor(big), 0).tolist()
    b = np.random.default_rng(2).uniform(0.99, 1.01, (2, 1300)).astype(np.float32)
    assert_close(Tensor(b, device=dev).cumprod(1), np.cumprod(b.astype(np.float64), 1), rtol=1e-5)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_rounding_sign_of_zero(dev, dt):
    s = np.array([-0.0, -0.3, -0.5, -0.7, 0.0, 0.3, -2.5, 0.5], np.float32)
    for name in ("floor", "ceil", "trunc", "round"):
        got = getattr(Tensor(s, device=dev).cast(getattr(dtypes, dt)), name)().float().numpy()
        want = getattr(torch, name)(torch.tensor(s)).numpy()
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want)), name


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_bitcast_every_16_bit_pattern(dev, dt):
    u = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    back = Tensor(u, device=dev).bitcast(getattr(dtypes, dt)).bitcast(dtypes.uint16).numpy()
    em = np.uint16(0x7c00 if dt == "float16" else 0x7f80)
    nan = ((u & em) == em) & ((u & ~em & 0x7fff) != 0)
    assert np.array_equal(back[~nan], u[~nan])
    assert (((back[nan] & em) == em) & ((back[nan] & ~em & 0x7fff) != 0)).all()


def test_bitcast_wide(dev):
    for src, dst in ((np.float32, np.int32), (np.float64, np.int64), (np.float64, np.uint64),
                     (np.int64, np.float64), (np.uint32, np.float32)):
        v = np.array([1.5, -2.25, np.inf, -0.0, 3e-40, np.nan]).astype(np.float64)
        v = v.astype(src) if np.dtype(src).kind == "f" else v.view(np.int64).astype(src)
        got = Tensor(v, device=dev).bitcast(getattr(dtypes, np.dtype(dst).name))
        assert got.numpy().tobytes() == v.view(dst).tobytes(), (src, dst)


@requires_autograd
def test_to_in_place_between_devices(dev):
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.to_(dev)
    assert x.device == dev and x.grad.device == dev
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    (x * 3).sum().backward()  # a leaf on dev: accumulates there
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0, 9.0])
    x.to_("CPU")
    assert x.device == "CPU" and x.grad.device == "CPU"
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0, 9.0])
    a = Tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = a.exp()
    y.to_(dev)  # a result: its history stays, behind the copy
    (y * Tensor([1.0, 2.0, 3.0], device=dev)).sum().backward()
    assert a.grad.device == "CPU"
    assert_close(a.grad, np.exp([1.0, -2.0, 0.5]) * [1.0, 2.0, 3.0], rtol=1e-6)
    e = np.arange(6, dtype=np.float32).reshape(2, 3)
    for t in (Tensor(e).T, Tensor(e)[1], Tensor(e)[:, ::2], Tensor(2.0), Tensor.full((2, 2), 1.5)):
        want = t.numpy()
        np.testing.assert_array_equal(t.to(dev).numpy(), want)
        t.to_(dev)
        assert t.device == dev
        np.testing.assert_array_equal(t.numpy(), want)
