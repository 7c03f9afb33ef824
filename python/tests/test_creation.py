"""test_creation.py - Tensors from numpy arrays of every dtype (float64 stays
float64, as in tinygrad), non-contiguous arrays, nested lists and scalars;
zeros ones full arange rand randn eye manual_seed; attributes; numpy() item()
tolist()."""
import numpy as np
import pytest

from helpers import assert_close
from tinyc import Tensor, dtypes


@pytest.mark.parametrize("npdt,dt", [
    (np.float32, dtypes.float32), (np.float16, dtypes.float16), (np.int32, dtypes.int32),
    (np.int64, dtypes.int64), (np.uint8, dtypes.uint8), (np.bool_, dtypes.bool),
    (np.float64, dtypes.float64), (np.int16, dtypes.int16), (np.int8, dtypes.int8),
    (np.uint16, dtypes.uint16), (np.uint32, dtypes.uint32)])
def test_from_numpy(npdt, dt):
    a = (np.arange(12).reshape(3, 4) % 5).astype(npdt)
    t = Tensor(a)
    assert t.dtype == dt and t.shape == (3, 4) and t.ndim == 2 and t.numel() == 12
    got = t.numpy()
    assert got.dtype == dt.np and got.flags.c_contiguous
    np.testing.assert_array_equal(got, a.astype(dt.np))


def test_from_numpy_non_contiguous_and_copy():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = a[::2, ::-3]
    t = Tensor(v)
    np.testing.assert_array_equal(t.numpy(), v)
    a[:] = 0  # the tensor holds its own copy
    assert t.numpy().sum() != 0
    out = Tensor(a.T).numpy()
    out[0, 0] = 5  # numpy() gives a fresh writable array
    assert Tensor(np.zeros(3)).numpy().flags.writeable


def test_from_lists_and_scalars():
    assert Tensor([[1, 2], [3, 4]]).dtype == dtypes.int32
    assert Tensor([1.0, 2]).dtype == dtypes.float32
    assert Tensor([True, False]).dtype == dtypes.bool
    assert Tensor([2**40]).dtype == dtypes.int64
    assert Tensor((1, 2, 3)).tolist() == [1, 2, 3]
    s = Tensor(2.5)
    assert s.shape == () and s.item() == 2.5 and s.dtype == dtypes.float32
    assert Tensor(3).dtype == dtypes.int32 and Tensor(3).item() == 3
    assert Tensor(True).item() is True
    assert Tensor(np.float32(1.5)).item() == 1.5
    assert Tensor([]).shape == (0,)
    assert Tensor([[1, 2]], dtype=dtypes.float16).dtype == dtypes.float16
    assert Tensor([1, 2], dtype="int64").dtype == dtypes.int64
    assert Tensor(np.array([1.5]), dtype=np.int32).tolist() == [1]


def test_from_tensor():
    a = Tensor([1.0, 2.0])
    b = Tensor(a, dtype=dtypes.int32)
    assert b.dtype == dtypes.int32 and b.tolist() == [1, 2]


@pytest.mark.parametrize("bad,exc", [
    ("abc", TypeError), (object(), TypeError), ([[1, 2], [3]], ValueError),
    (np.array(["a"]), TypeError), (np.array([1 + 2j]), TypeError), ([None], TypeError)])
def test_from_bad_data(bad, exc):
    with pytest.raises(exc):
        Tensor(bad)


def test_bad_dtype_and_device():
    with pytest.raises(TypeError):
        Tensor([1.0], dtype="float128")
    with pytest.raises(TypeError):
        Tensor([1.0], device=3)


def test_zeros_ones_full():
    assert Tensor.zeros(2, 3).tolist() == [[0, 0, 0], [0, 0, 0]]
    assert Tensor.zeros((2, 3)).shape == (2, 3)
    assert Tensor.ones(3, dtype=dtypes.int32).tolist() == [1, 1, 1]
    assert Tensor.full((2,), 7).dtype == dtypes.int32
    assert Tensor.full((2, 2), 1.5).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert Tensor.full(3, True).dtype == dtypes.bool
    assert Tensor.zeros().shape == ()
    t = Tensor([[1, 2]])
    assert t.zeros_like().tolist() == [[0, 0]] and t.ones_like().dtype == dtypes.int32
    assert t.full_like(3.0, dtype=dtypes.float32).tolist() == [[3.0, 3.0]]
    with pytest.raises(TypeError):
        Tensor.zeros(2.5)


def test_arange():
    assert Tensor.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert Tensor.arange(5).dtype == dtypes.int32
    assert Tensor.arange(2, 10, 3).tolist() == [2, 5, 8]
    assert Tensor.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert Tensor.arange(0).shape == (0,)
    assert_close(Tensor.arange(0, 1, 0.25), np.arange(0, 1, 0.25))
    assert Tensor.arange(0, 1, 0.25).dtype == dtypes.float32
    assert_close(Tensor.arange(1.5, -1, -0.5), np.arange(1.5, -1, -0.5))
    assert Tensor.arange(3, dtype=dtypes.float32).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        Tensor.arange(0, 3, 0)


def test_eye():
    np.testing.assert_array_equal(Tensor.eye(4).numpy(), np.eye(4, dtype=np.float32))
    np.testing.assert_array_equal(Tensor.eye(3, 5).numpy(), np.eye(3, 5, dtype=np.float32))
    np.testing.assert_array_equal(Tensor.eye(4, 2).numpy(), np.eye(4, 2, dtype=np.float32))
    assert Tensor.eye(2, dtype=dtypes.int32).dtype == dtypes.int32


def test_rand_randn_seed():
    Tensor.manual_seed(42)
    a = Tensor.rand(1000).numpy()
    b = Tensor.randn(1000).numpy()
    Tensor.manual_seed(42)
    np.testing.assert_array_equal(Tensor.rand(1000).numpy(), a)
    np.testing.assert_array_equal(Tensor.randn(1000).numpy(), b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    assert abs(b.mean()) < 0.15 and abs(b.std() - 1) < 0.1
    assert Tensor.rand(2, 3).shape == (2, 3) and Tensor.randn((4,)).shape == (4,)
    assert not np.array_equal(Tensor.rand(100).numpy(), Tensor.rand(100).numpy())
    u = Tensor.uniform(500, low=-2, high=3).numpy()
    assert u.min() >= -2 and u.max() < 3


def test_attributes_and_conversions():
    t = Tensor([[1.0, 2.0, 3.0]])
    assert t.device == "CPU" and t.grad is None and t.requires_grad is None
    assert len(t) == 1 and t.size() == (1, 3) and t.size(1) == 3 and t.nbytes == 12
    assert t.tolist() == [[1.0, 2.0, 3.0]]
    assert np.asarray(t).shape == (1, 3)
    assert float(t[0, 1]) == 2.0 and int(t[0, 2]) == 3
    assert [r.tolist() for r in t[0]] == [1.0, 2.0, 3.0]
    assert "shape=(1, 3)" in repr(t)
    with pytest.raises(ValueError):
        t.item()
    with pytest.raises(ValueError):
        bool(t)
    assert bool(Tensor([1.0]))
    with pytest.raises(TypeError):
        len(Tensor(1.0))


def test_to_device_and_realize():
    t = (Tensor([1.0, 2.0]) * 2).realize()
    assert t.is_realized()
    assert t.to("CPU").tolist() == [2.0, 4.0] and t.to("CPU").device == "CPU"
    a, b = Tensor([1.0]) + 1, Tensor([2.0]) + 1
    a.realize(b)
    assert a.is_realized() and b.is_realized()
