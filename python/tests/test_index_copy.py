"""test_index_copy.py - writing by integer indices in place against torch:
Tensor.index_copy_ (torch's, along every dim, int32/int64/uint8 and list
indices, broadcast and cast sources) and __setitem__ with one integer index
(a Tensor, list, array or int; negative indices, numpy's rules); the
store's kernel count (the values fuse into it); out-of-range indices
(IndexError where they are known on the host, nothing written in a
kernel); a TinyJit loop writing successive rows of a cache as a KV cache
does, next to torch's loop."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires
from tinyc import GlobalCounters, Tensor, TinyJit, dtypes

pytestmark = requires("tc_index_copy")

RNG = np.random.default_rng(7)


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("idtype", [np.int32, np.int64, np.uint8])
def test_index_copy_like_torch(dim, idtype):
    x = data(4, 5, 6)
    n = x.shape[dim]
    ids = np.array([n - 1, 0, 2], dtype=idtype)
    shape = list(x.shape)
    shape[dim] = 3
    src = data(*shape)
    a, b = Tensor(x).contiguous().realize(), torch.tensor(x)
    assert a.index_copy_(dim, Tensor(ids), Tensor(src)) is a
    b.index_copy_(dim, torch.tensor(ids.astype(np.int64)), torch.tensor(src))
    assert_close(a, b, rtol=0, atol=0, what="index_copy_ dim %d" % dim)


def test_index_copy_lists_broadcast_cast():
    x = data(3, 4)
    a, b = Tensor(x).contiguous().realize(), torch.tensor(x)
    a.index_copy_(1, [3, 1], Tensor(np.array([[5.0], [6.0], [7.0]], np.float32)))
    b.index_copy_(1, torch.tensor([3, 1]), torch.tensor([[5.0, 5.0], [6.0, 6.0], [7.0, 7.0]]))
    assert_close(a, b, rtol=0, atol=0, what="a list index, a broadcast source")
    i = Tensor(np.arange(6, dtype=np.int32)).contiguous().realize()
    i.index_copy_(0, Tensor(np.array(4, np.int64)), Tensor(np.array([9.7], np.float32)))
    assert i.dtype == dtypes.int32 and i.tolist() == [0, 1, 2, 3, 9, 5]


def test_index_copy_is_one_kernel_with_its_values():
    x, u, w = data(8, 16), data(2, 16), data(2, 16)
    a = Tensor(x).contiguous().realize()
    ua, wa = Tensor(u), Tensor(w)
    a.index_copy_(0, Tensor(np.array([6, 1], np.int32)), (ua * 2 + wa).exp())
    assert len(a.schedule()) == 1
    GlobalCounters.reset()
    a.realize()
    assert GlobalCounters.kernel_count == 1
    want = x.copy()
    want[[6, 1]] = np.exp(u * 2 + w)
    assert_close(a, want, what="exp(2u + w) at rows 6 and 1")


def test_index_copy_errors():
    a = Tensor(data(3, 2)).contiguous().realize()
    before = a.numpy()
    with pytest.raises(IndexError, match="index_copy: index\\[1\\] = 3 is outside"):
        a.index_copy_(0, Tensor(np.array([0, 3], np.int32)), Tensor(data(2, 2)))
    with pytest.raises(IndexError):
        a.index_copy_(0, [-1], Tensor(data(1, 2)))  # torch: no negative indices
    with pytest.raises(IndexError):
        a.index_copy_(0, Tensor(np.array([0.5], np.float32)), Tensor(data(1, 2)))
    with pytest.raises(ValueError, match="does not broadcast"):
        a.index_copy_(0, [0], Tensor(data(1, 3)))
    assert (a.numpy() == before).all()
    with pytest.raises(IndexError):  # torch raises too
        torch.tensor(before).index_copy_(0, torch.tensor([3]), torch.zeros(1, 2))
    # a lazy index out of range: nothing written there, the rest written
    lazy = Tensor(np.array([1, 3], np.int32)) + 1  # [2, 4]
    a.index_copy_(0, lazy, Tensor(np.full((2, 2), 8, np.float32)))
    want = before.copy()
    want[2] = 8
    assert_close(a, want, rtol=0, atol=0, what="row 4 (outside) nowhere")


SETITEM = {
    "x[idx]": lambda t: (t([4, 0, 2]),),
    "x[:, idx]": lambda t: (slice(None), t([1, -1])),
    "x[..., idx]": lambda t: (Ellipsis, t([0, 6, 3])),
    "x[idx2d]": lambda t: (t([[0, 1], [3, 2]]),),
    "x[:, :, idx0d]": lambda t: (slice(None), slice(None), t(5)),
    "x[int]": lambda t: (-2,),
    "x[:, list]": lambda t: (slice(None), [2, 0]),
}


@pytest.mark.parametrize("name", list(SETITEM))
@pytest.mark.parametrize("kind", ["tensor", "scalar"])
def test_setitem_like_torch(name, kind):
    x = data(5, 6, 7)

    def tinyc_idx(v):
        return Tensor(np.array(v, np.int32))

    def torch_idx(v):
        return torch.tensor(np.array(v, np.int64))

    ka, kb = SETITEM[name](tinyc_idx), SETITEM[name](torch_idx)
    b = torch.tensor(x)
    shape = tuple(b[kb].shape)
    v = data(*shape) if kind == "tensor" else np.float32(3.5)
    a = Tensor(x).contiguous().realize()
    a[ka] = Tensor(v) if kind == "tensor" else float(v)
    b[kb] = torch.tensor(v)
    assert_close(a, b, rtol=0, atol=0, what=name)


def test_setitem_numpy_rules():
    x = data(4, 3)
    a = Tensor(x).contiguous().realize()
    a[Tensor(np.array([1, 1, -4], np.int32))] = Tensor(data(3, 3) * 0 + np.arange(3)[:, None])
    want = x.copy()
    want[[1, 1, -4]] = np.arange(3, dtype=np.float32)[:, None]  # the last of equal ones stays
    assert_close(a, want, rtol=0, atol=0, what="equal and negative indices")
    with pytest.raises(IndexError):
        a[[4]] = 1.0
    with pytest.raises(IndexError):
        a[1:3] = 1.0  # slices other than ':' are not supported
    with pytest.raises(IndexError):
        a[[0], [1]] = 1.0
    with pytest.raises(ValueError):
        a[[0]] = Tensor(data(2, 3))
    a[...] = 2.0
    assert (a.numpy() == 2).all()


def test_jit_writes_successive_rows_like_torch():
    """a KV cache's write: each step puts one row of K at the position given
    as a tensor; the jit replays the step from its third call with the new
    position and the cache keeps every row"""
    H, S, hd = 2, 9, 4
    cache = Tensor.zeros(1, H, S, hd).contiguous().realize()
    tcache = torch.zeros(1, H, S, hd)
    calls = []

    @TinyJit
    def step(k, pos):
        calls.append(1)
        cache.index_copy_(2, pos, k * 2)
        out = cache.sum(axis=2)
        Tensor.realize(out, cache)
        return out

    for p in range(S):
        k = data(1, H, 1, hd)
        out = step(Tensor(k), Tensor(np.array([p], np.int32)))
        tcache.index_copy_(2, torch.tensor([p]), torch.tensor(k) * 2)
        assert_close(cache, tcache, what="cache after step %d" % p)
        assert_close(out, tcache.sum(dim=2), what="output of step %d" % p)
    assert len(calls) == 2 and step.kernel_count == 2  # the store, then the sum
