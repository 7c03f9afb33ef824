"""test_random_init.py - randint, normal, uniform, multinomial (with and
without replacement) and the initialisers (kaiming_uniform, kaiming_normal,
glorot_uniform, scaled_uniform): ranges, dtypes, moments and frequencies
against the distributions (torch's RNG differs from ours, so torch serves
for the formulas: nn.init's bounds), determinism under manual_seed, the
errors, and the same values on every device (the counter-based generator
runs on the host)."""
import math

import numpy as np
import pytest
import torch

from helpers import assert_close
from tinyc import Tensor, TinycError, dtypes


def test_randint():
    Tensor.manual_seed(3)
    t = Tensor.randint(20000, low=-3, high=5)
    assert t.dtype == dtypes.int32 and t.shape == (20000,)
    v = t.numpy()
    assert v.min() == -3 and v.max() == 4
    freq = np.bincount(v + 3, minlength=8) / v.size
    assert np.abs(freq - 1 / 8).max() < 0.01
    assert Tensor.randint(2, 3, high=3).shape == (2, 3)
    assert Tensor.randint(5, low=0, high=256, dtype=dtypes.uint8).dtype == dtypes.uint8
    big = Tensor.randint(1000, low=-2**62, high=2**62, dtype=dtypes.int64).numpy()
    assert big.min() >= -2**62 and big.max() < 2**62 and np.abs(big).max() > 2**60
    Tensor.manual_seed(3)
    assert (Tensor.randint(20000, low=-3, high=5).numpy() == v).all()


def test_randint_errors():
    with pytest.raises(TypeError):
        Tensor.randint(3, low=0.5, high=4)
    with pytest.raises(TypeError):
        Tensor.randint(3, dtype=dtypes.float32)
    with pytest.raises(TinycError, match="tc_randint: low 4 must be below high 4"):
        Tensor.randint(3, low=4, high=4)
    with pytest.raises(TinycError, match=r"tc_randint: \[0, 300\) does not fit in uint8"):
        Tensor.randint(3, low=0, high=300, dtype=dtypes.uint8)


def test_normal_is_randn_scaled():
    Tensor.manual_seed(7)
    z = Tensor.randn(3, 1000).numpy()
    Tensor.manual_seed(7)
    n = Tensor.normal(3, 1000, mean=2.0, std=0.5)
    assert n.dtype == dtypes.float32 and n.shape == (3, 1000)
    assert_close(n, 2.0 + 0.5 * z, rtol=1e-6, atol=1e-6)
    big = Tensor.normal(200000, mean=-1.0, std=3.0).numpy()
    assert abs(big.mean() + 1.0) < 0.03 and abs(big.std() - 3.0) < 0.03
    assert Tensor.normal(4, dtype=dtypes.float16).dtype == dtypes.float16
    assert (Tensor.normal(5, std=0.0, mean=1.5).numpy() == 1.5).all()
    with pytest.raises(TinycError, match="tc_normal: mean 0 and std -1 must be finite"):
        Tensor.normal(3, std=-1.0)


def test_uniform():
    u = Tensor.uniform(100000, low=-2.0, high=3.0).numpy()
    assert u.min() >= -2.0 and u.max() < 3.0
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.std() - 5 / math.sqrt(12)) < 0.02
    h = Tensor.uniform(50000, low=0.0, high=1.0, dtype=dtypes.float16)
    assert h.dtype == dtypes.float16 and h.numpy().max() < 1.0
    tight = Tensor.uniform(50000, low=1.0, high=1.0000002).numpy()  # two float32 values apart
    assert tight.min() >= 1.0 and tight.max() < np.float32(1.0000002)
    assert (Tensor.uniform(4, low=2.0, high=2.0).numpy() == 2.0).all()
    i = Tensor.uniform(1000, low=0, high=10, dtype=dtypes.int32)
    assert i.dtype == dtypes.int32 and i.numpy().min() >= 0 and i.numpy().max() <= 9
    with pytest.raises(TinycError, match="tc_uniform"):
        Tensor.uniform(3, low=1.0, high=0.0)


@pytest.mark.parametrize("shape", [(64, 32), (16, 8, 3, 3)])
def test_initialisers(shape):
    fan_in = int(np.prod(shape[1:]))
    a = 0.01
    gain = math.sqrt(2.0 / (1 + a * a))
    ref = torch.empty(shape)  # torch's formulas for the same bounds
    torch.nn.init.kaiming_uniform_(ref, a=a)
    bound = gain * math.sqrt(3.0 / fan_in)
    assert ref.abs().max() <= bound
    w = Tensor.kaiming_uniform(*shape, a=a).numpy()
    assert w.shape == shape and np.abs(w).max() < bound and np.abs(w).max() > 0.9 * bound
    w = Tensor.kaiming_normal(*shape).numpy()
    assert abs(w.std() - gain / math.sqrt(fan_in)) < 0.1 * gain / math.sqrt(fan_in)
    g = Tensor.glorot_uniform(*shape).numpy()
    gb = math.sqrt(6 / (shape[0] + fan_in))
    assert np.abs(g).max() < gb and np.abs(g).max() > 0.9 * gb
    s = Tensor.scaled_uniform(*shape).numpy()
    sb = np.prod(shape) ** -0.5
    assert np.abs(s).max() < sb and np.abs(s).max() > 0.9 * sb
    assert Tensor.kaiming_uniform(shape, dtype=dtypes.float16).dtype == dtypes.float16
    k = Tensor.kaiming_uniform(*shape, requires_grad=True)
    assert k.requires_grad and k.is_realized()


# ---- multinomial -------------------------------------------------------------

def test_multinomial_with_replacement_frequencies():
    Tensor.manual_seed(11)
    p = np.array([[0.1, 0.2, 0.0, 0.7], [2.0, 2.0, 2.0, 2.0]], np.float32)  # unnormalised
    s = Tensor(p).multinomial(40000, replacement=True)
    assert s.dtype == dtypes.int32 and s.shape == (2, 40000)
    v = s.numpy()
    for r in range(2):
        freq = np.bincount(v[r], minlength=4) / v.shape[1]
        assert np.abs(freq - p[r] / p[r].sum()).max() < 0.01, freq
    assert (v[0] != 2).all()  # weight 0 is never drawn
    one = Tensor(p[0]).multinomial(5, replacement=True)
    assert one.shape == (5,)
    assert Tensor(p[0]).multinomial().shape == (1,)  # tinygrad's defaults: 1, no replacement


def test_multinomial_without_replacement():
    Tensor.manual_seed(12)
    p = np.array([0.1, 0.2, 0.7, 0.0], np.float32)
    perm = Tensor(np.array([[1, 5, 2, 3, 9]], np.float32)).multinomial(5).numpy()
    assert sorted(perm[0].tolist()) == [0, 1, 2, 3, 4]  # k = n: a permutation
    first, second = np.zeros(4), np.zeros(4)
    trials = 400
    rows = np.tile(p, (trials, 1))  # many rows at once: one draw of 3 per row
    v = Tensor(rows).multinomial(3).numpy()
    assert all(len(set(r)) == 3 for r in v.tolist()) and (v != 3).all()
    for r in v:
        first[r[0]] += 1
        second[r[1]] += 1
    assert np.abs(first / trials - [0.1, 0.2, 0.7, 0]).max() < 0.06
    # second draw: P(j) = sum_i p_i p_j / (1 - p_i)
    want2 = [sum(p[i] * p[j] / (1 - p[i]) for i in range(3) if i != j) for j in range(4)]
    assert np.abs(second / trials - want2).max() < 0.07


def test_multinomial_no_rows():
    """(0, n) weights draw an empty (0, k) result, as torch's; (r, 0) has nothing to draw"""
    for replace in (True, False):
        got = Tensor.zeros(0, 3).multinomial(2, replacement=replace)
        want = torch.zeros(0, 3).multinomial(2, replacement=replace)
        assert got.shape == tuple(want.shape) == (0, 2)
        assert got.numpy().shape == (0, 2)
    with pytest.raises(ValueError, match="no categories"):
        Tensor.zeros(2, 0).multinomial(1, replacement=True)


def test_multinomial_lazy_weights_and_dtypes():
    x = Tensor(np.array([[0.0, 3.0], [1.0, 0.0]], np.float32))
    assert (x * 2).multinomial(4, replacement=True).tolist() == [[1] * 4, [0] * 4]
    assert Tensor(np.array([0, 7], np.int32)).multinomial(2, True).tolist() == [1, 1]


@pytest.mark.parametrize("call,match", [
    (lambda: Tensor([0.5, 0.5]).multinomial(3), "cannot draw 3 samples without replacement "
                                                "from 2 categories"),
    (lambda: Tensor([0.5, 0.0]).multinomial(2), "row 0 has 1 positive weights, too few"),
    (lambda: Tensor([0.5, -0.1]).multinomial(1), "weight -0.1 at row 0, column 1"),
    (lambda: Tensor([0.0, 0.0]).multinomial(1, True), "row 0 has no positive weight"),
    (lambda: Tensor([float("inf"), 1.0]).multinomial(1), "weight inf at row 0, column 0 is not a finite value"),
    (lambda: Tensor.ones(2, 2, 2).multinomial(1), r"probs must have 1 or 2 dims, got \(2,2,2\)"),
    (lambda: Tensor([0.5]).multinomial(0), "num_samples 0 must be >= 1"),
    (lambda: Tensor([True]).multinomial(1), "probs must be numbers, got bool"),
])
def test_multinomial_errors(call, match):
    with pytest.raises(TinycError, match="tc_multinomial: " + match):
        call()


def test_multinomial_backward_is_cut():
    w = Tensor([0.3, 0.7], requires_grad=True)
    s = w.multinomial(1)
    assert not s.requires_grad


# ---- the same values on every device --------------------------------------------

def other_device():
    try:
        Tensor([1.0], device="OPENCL").numpy()
        return "OPENCL"
    except TinycError:
        pytest.skip("no OPENCL device")


@pytest.mark.parametrize("make", [
    lambda d: Tensor.rand(5, 7, device=d), lambda d: Tensor.randn(33, device=d),
    lambda d: Tensor.normal(9, mean=1, std=2, device=d),
    lambda d: Tensor.uniform(4, 4, low=-1, high=2, device=d),
    lambda d: Tensor.randint(50, low=-5, high=100, device=d),
    lambda d: Tensor.kaiming_uniform(8, 4, device=d),
    lambda d: Tensor(np.array([[1, 2, 3, 4], [4, 1, 1, 0]], np.float32),
                     device=d).multinomial(64, True),
    lambda d: Tensor(np.array([[1, 2, 3, 4], [4, 1, 1, 1]], np.float32),
                     device=d).multinomial(4)])
def test_same_values_on_every_device(make):
    dev = other_device()
    Tensor.manual_seed(5)
    a = make(None).numpy()
    Tensor.manual_seed(5)
    b = make(dev)
    assert b.device.startswith("OPENCL")
    assert (a == b.numpy()).all()
