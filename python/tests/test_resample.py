"""test_resample.py - Tensor.interpolate (tc_interpolate) against
torch.nn.functional.interpolate with a size, forward and backward: nearest,
nearest-exact and linear at 1 to 3 resized axes, align_corners, up and
down, whole-number factors (views) and others (indexed loads), a permuted
(non-contiguous) input; kernel counts; errors. Tolerance 1e-5 absolute."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_close, requires
from tinyc import Tensor

pytestmark = requires("tc_interpolate")

CASES = [
    ((2, 3, 5), (8,), "linear", False),
    ((2, 3, 5), (8,), "linear", True),
    ((1, 2, 9), (4,), "linear", False),
    ((2, 3, 5, 7), (9, 4), "bilinear", False),
    ((2, 3, 5, 7), (9, 4), "bilinear", True),
    ((1, 2, 4, 4), (1, 1), "bilinear", True),
    ((1, 1, 3, 4, 5), (5, 2, 7), "trilinear", False),
    ((1, 2, 6), (3,), "nearest", False),
    ((1, 2, 5, 5), (7, 3), "nearest", False),
    ((1, 2, 4, 6), (8, 18), "nearest", False),
    ((1, 2, 8, 6), (4, 3), "nearest", False),
    ((1, 2, 5, 5), (7, 3), "nearest-exact", False),
    ((1, 2, 8, 6), (24, 2), "nearest-exact", False),
]


@pytest.mark.parametrize("shape,size,mode,align", CASES)
@pytest.mark.parametrize("permuted", [False, True])
def test_interpolate(shape, size, mode, align, permuted):
    rng = np.random.default_rng(len(shape) * 100 + sum(size))
    x = rng.standard_normal(shape).astype(np.float32)
    if permuted:  # the same values, read through a transposing view
        base = np.ascontiguousarray(np.swapaxes(x, 0, 1))
        tx = Tensor(base, requires_grad=True)
        ours = tx.transpose(0, 1)
    else:
        tx = Tensor(x, requires_grad=True)
        ours = tx
    y = ours.interpolate(size, mode=mode, align_corners=align)
    tt = torch.tensor(x, requires_grad=True)
    kw = {"align_corners": align} if "linear" in mode else {}
    want = F.interpolate(tt, size=size, mode=mode, **kw)
    assert y.shape == tuple(want.shape)
    assert_close(y, want.detach().numpy(), atol=1e-5, rtol=0)
    g = rng.standard_normal(want.shape).astype(np.float32)
    (y * Tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    got = tx.grad.numpy()
    if permuted:
        got = np.swapaxes(got, 0, 1)
    assert_close(got, tt.grad.numpy(), atol=1e-5, rtol=0)


EDGES = [  # 0-size batch, one element in, one element out, an expanded (broadcast) input
    ((0, 2, 5), (8,), "linear", False), ((1, 1, 1), (4,), "linear", False),
    ((1, 1, 1), (3,), "nearest", False), ((2, 1, 5, 4), (1, 1), "bilinear", False),
    ((1, 2, 1, 1), (3, 2), "bilinear", True), ((1, 1, 4), (1,), "nearest-exact", False),
]


@pytest.mark.parametrize("shape,size,mode,align", EDGES, ids=str)
@pytest.mark.parametrize("broadcast", [False, True])
def test_interpolate_edges_and_broadcast(shape, size, mode, align, broadcast):
    rng = np.random.default_rng(sum(shape) + sum(size))
    x = rng.standard_normal(shape).astype(np.float32)
    tx, tt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = tx, tt
    if broadcast:  # three channels read from one: the gradient sums back
        ours, theirs = tx[:, :1].expand(shape[0], 3, *shape[2:]), tt[:, :1].expand(
            shape[0], 3, *shape[2:])
    y = ours.interpolate(size, mode=mode, align_corners=align)
    kw = {"align_corners": align} if "linear" in mode else {}
    want = F.interpolate(theirs, size=size, mode=mode, **kw)
    assert y.shape == tuple(want.shape)
    assert_close(y, want.detach().numpy(), atol=1e-5, rtol=0)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (y * Tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    assert_close(tx.grad, tt.grad.numpy(), atol=1e-5, rtol=0)


def test_tinygrad_form_and_identity():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert x.interpolate((4,)).numpy().tolist() == x.numpy().tolist()  # same size: itself
    y = x.interpolate((2, 8), mode="nearest")  # the last len(size) axes, any rank
    want = F.interpolate(torch.arange(12.0).reshape(1, 1, 3, 4), size=(2, 8), mode="nearest")
    assert_close(y, want[0, 0].numpy(), atol=0, rtol=0)
    assert x.interpolate(6, mode="nearest").shape == (3, 6)


def test_kernel_counts():
    x = Tensor(np.random.default_rng(0).random((2, 3, 8, 8), dtype=np.float32)).realize()
    w = Tensor(np.random.default_rng(1).random((4, 3, 3, 3), dtype=np.float32)).realize()
    assert len(x.interpolate((13,)).relu().schedule()) == 1
    assert len(x.interpolate((16, 13)).schedule()) == 2
    # a whole-number nearest factor is a view: it fuses into the conv (no
    # padding: a padded conv copies its input first)
    assert len(x.interpolate((16, 4), mode="nearest").conv2d(w).schedule()) == 1
    # other sizes read x through an indexed load per resized axis; the last
    # axis's loads (the lerp with them) fuse into the conv's windows, an
    # earlier axis's result is realized (a gather reads its source anywhere)
    assert len(x.interpolate((13,)).conv2d(w).schedule()) == 1
    assert len(x.interpolate((13,), mode="nearest").conv2d(w).schedule()) == 1
    assert len(x.interpolate((13, 13)).conv2d(w).schedule()) == 2
    assert len(x.interpolate((6, 6), mode="nearest").conv2d(w).schedule()) == 2
    # padded, the resized values go to the padded copy: one more kernel
    assert len(x.interpolate((13,)).conv2d(w, padding=1).schedule()) == 2


def test_errors():
    x = Tensor(np.zeros((1, 3, 4), np.float32))
    with pytest.raises(ValueError, match="mode"):
        x.interpolate((2,), mode="bicubic")
    with pytest.raises(TypeError):
        x.interpolate((2.5,))
    with pytest.raises(Exception, match="tc_interpolate: align_corners"):
        x.interpolate((2,), mode="nearest", align_corners=True)
    with pytest.raises(Exception, match="tc_interpolate: 4 sizes"):
        x.interpolate((2, 2, 2, 2))
    with pytest.raises(Exception, match="linear mode needs a float x"):
        Tensor(np.zeros((2, 3), np.int32)).interpolate((4,))
