"""test_conv.py - Tensor.conv2d on 1-d and 3-d inputs (and 2-d with per-axis
dilation and cropping padding) against torch.nn.functional.conv1d/conv2d/
conv3d, and Tensor.conv_transpose2d in 1-d, 2-d and 3-d against
conv_transpose1d/2d/3d: forward, and backward (the gradients of x, weight and
bias of sum(out * w) for a random w), over stride, padding, dilation, groups
and output_padding; then the kernel count of a 1-d conv and the errors.
Tolerances: rtol 1e-4, atol 1e-4 for the forward, atol 1e-3 for gradients
(run_both's 10 * atol)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import (LAYOUTS, assert_close, base_shape, rand_array, requires, requires_autograd,
                     run_both)
from tinyc import Tensor, TinycError

GRAD = [False, pytest.param(True, marks=requires_autograd)]
GRAD_IDS = ["forward", "backward"]
TORCH_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TORCH_CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rand_array(s, rng, -2.0, 2.0) for s in shapes]


CONVS = [  # x shape, w shape, tinyc kwargs, torch kwargs (None: the same)
    ((2, 3, 11), (4, 3, 3), dict(), None),
    ((2, 3, 11), (4, 3, 3), dict(stride=2, padding=1), None),
    ((1, 4, 12), (6, 2, 3), dict(groups=2, dilation=3), None),
    ((2, 2, 9), (3, 2, 2), dict(stride=3, padding=2, dilation=2), None),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(), None),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=(1, 0, 1)), None),
    ((1, 4, 4, 5, 4), (4, 2, 2, 2, 3), dict(groups=2, dilation=(2, 1, 1), padding=1), None),
    ((1, 2, 5, 4, 6), (2, 2, 3, 1, 2), dict(stride=(2, 1, 3), dilation=(1, 1, 2)), None),
    ((1, 2, 7, 8), (3, 2, 3, 3), dict(dilation=(1, 2), padding=(2, 1)), None),
    # strided with symmetric padding: the own gradient rule (ResNet's downsampling)
    ((2, 3, 8, 7), (4, 3, 3, 3), dict(stride=2, padding=1), None),
    ((2, 4, 8, 8), (6, 4, 1, 1), dict(stride=2), None),
    ((1, 2, 10), (3, 2, 2), dict(stride=3, padding=1), None),
    # few rows, enough channels: the output rows by runs of the same taps
    # (nnops.c's conv_by_rows): the forward; the input gradient of a conv
    # without padding (dy padded 2: 5 runs); 1-d; grouped (the ops' gradient)
    ((2, 32, 4, 64), (4, 32, 3, 3), dict(padding=1), None),
    ((2, 4, 10, 64), (32, 4, 3, 3), dict(), None),
    ((128, 64, 4), (4, 64, 3), dict(padding=1), None),
    ((2, 64, 4, 64), (8, 32, 3, 3), dict(groups=2, padding=1), None),
]


@requires("tc_conv_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("conv", CONVS, ids=lambda c: "%dd-%s" % (len(c[0]) - 2, c[2] or "plain"))
def test_conv_nd(conv, bias, grad):
    xs, ws, kw, th_kw = conv
    shapes = [xs, ws] + ([(ws[0],)] if bias else [])
    th_conv = TORCH_CONV[len(xs) - 2]
    run_both(lambda x, w, b=None: x.conv2d(w, b, **kw),
             lambda x, w, b=None: th_conv(x, w, b, **(th_kw or kw)),
             arrays(shapes), shapes, ["contig"] * len(shapes), grad, atol=1e-4)


FLAT_PADDINGS = [  # x shape, w shape, tinygrad's flat padding (last dim first), F.pad's
    ((1, 2, 9), (3, 2, 3), (2, 1), (2, 1)),
    ((1, 2, 4, 5, 6), (2, 2, 2, 2, 3), (1, 0, 0, 2, 1, 1), (1, 0, 0, 2, 1, 1)),
    ((1, 2, 9, 8), (2, 2, 3, 3), (-1, 2, 1, -2), (-1, 2, 1, -2)),  # negative: crop
]


@requires("tc_conv_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("case", FLAT_PADDINGS, ids=lambda c: str(c[2]))
def test_conv_flat_padding(case, grad):
    xs, ws, pad, th_pad = case
    th_conv = TORCH_CONV[len(xs) - 2]
    run_both(lambda x, w: x.conv2d(w, padding=pad), lambda x, w: th_conv(F.pad(x, th_pad), w),
             arrays([xs, ws], 3), [xs, ws], ["contig", "contig"], grad, atol=1e-4)


@requires("tc_conv_nd")
def test_conv_on_views():
    x, w = arrays([(7, 3, 2), (2, 3, 3)], 4)  # x seen transposed: (2, 3, 7)
    got = Tensor(x).permute(2, 1, 0).conv2d(Tensor(w)[:, :, ::-1], stride=2, padding=1)
    want = F.conv1d(torch.tensor(x).permute(2, 1, 0), torch.tensor(w).flip(2), stride=2,
                    padding=1)
    assert_close(got, want, atol=1e-4)


CONVTS = [  # x shape, w shape (Cin, Cout/groups, *k), kwargs (torch's names)
    ((2, 3, 6), (3, 4, 3), dict()),
    ((2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((1, 2, 6), (2, 2, 2), dict(stride=3, padding=2, output_padding=2)),
    ((1, 2, 5), (2, 3, 3), dict(dilation=2, padding=3)),  # padding > d*(k-1): crops
    ((1, 2, 4, 5), (2, 3, 3, 3), dict()),
    ((2, 4, 3, 4), (4, 1, 3, 2), dict(stride=(2, 3), padding=(1, 0), groups=4)),
    ((1, 2, 4, 3), (2, 2, 2, 3), dict(stride=2, dilation=(1, 2), output_padding=(1, 1))),
    ((1, 2, 3, 2, 3), (2, 2, 2, 2, 2), dict()),
    ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), dict(stride=2, padding=(0, 1, 1),
                                            output_padding=(1, 0, 1))),
    ((1, 4, 2, 3, 2), (4, 1, 3, 2, 2), dict(stride=(1, 2, 2), dilation=(2, 1, 1), groups=2)),
]


@requires("tc_conv_transpose_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("conv", CONVTS, ids=lambda c: "%dd-%s" % (len(c[0]) - 2, c[2] or "plain"))
def test_conv_transpose(conv, bias, grad):
    xs, ws, kw = conv
    cout = ws[1] * kw.get("groups", 1)
    shapes = [xs, ws] + ([(cout,)] if bias else [])
    th_conv = TORCH_CONVT[len(xs) - 2]
    run_both(lambda x, w, b=None: x.conv_transpose2d(w, b, **kw),
             lambda x, w, b=None: th_conv(x, w, b, **kw),
             arrays(shapes, 5), shapes, ["contig"] * len(shapes), grad, atol=1e-4)


@requires("tc_conv_transpose_nd")
def test_conv_transpose_positional_order():
    """tinygrad's order: weight, bias, groups, stride, dilation, padding, output_padding"""
    x, w, b = arrays([(1, 4, 5), (4, 1, 3), (2,)], 6)
    got = Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), 2, 2, 1, 1, 1)
    want = F.conv_transpose1d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=2,
                              padding=1, output_padding=1, groups=2, dilation=1)
    assert_close(got, want, atol=1e-4)


VIEW_CASES = [  # x shape, w shape, kwargs: conv (1-d, 3-d) and conv_transpose
    ("conv", (2, 3, 9), (4, 3, 3), dict(stride=2, padding=1)),
    ("conv", (1, 2, 4, 3, 5), (3, 2, 2, 1, 3), dict(dilation=(1, 1, 2), padding=(1, 0, 0))),
    ("convt", (2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("convt", (1, 2, 3, 4), (2, 3, 2, 3), dict(stride=(2, 1), dilation=(1, 2))),
]


@requires("tc_conv_nd", "tc_conv_transpose_nd")
@requires_autograd
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("case", VIEW_CASES, ids=lambda c: "%s-%dd" % (c[0], len(c[1]) - 2))
def test_conv_backward_on_views(case, layout):
    # x and w both read through non-contiguous views (transposed, flipped,
    # strided), forward and the gradients of both leaves
    kind, xs, ws, kw = case
    shapes, lays = [xs, ws, (ws[1] * kw.get("groups", 1) if kind == "convt" else ws[0],)], \
        [layout, layout, "contig"]
    arrs = arrays([base_shape(s, lay) for s, lay in zip(shapes, lays)], 8)
    if kind == "conv":
        tc, th = (lambda x, w, b: x.conv2d(w, b, **kw),
                  lambda x, w, b: TORCH_CONV[len(xs) - 2](x, w, b, **kw))
    else:
        tc, th = (lambda x, w, b: x.conv_transpose2d(w, b, **kw),
                  lambda x, w, b: TORCH_CONVT[len(xs) - 2](x, w, b, **kw))
    run_both(tc, th, arrs, shapes, lays, True, atol=1e-4)


EDGE_CONVS = [  # x shape, w shape, kwargs: 0-size batch, 1 element, a kernel as big as x
    ("conv", (0, 3, 7), (2, 3, 3), dict(padding=1)),
    ("conv", (1, 1, 1), (1, 1, 1), dict()),
    ("conv", (1, 1, 1, 1, 1), (2, 1, 1, 1, 1), dict()),
    ("conv", (2, 2, 3, 4), (3, 2, 3, 4), dict()),
    ("convt", (0, 2, 4), (2, 3, 3), dict(stride=2)),
    ("convt", (1, 1, 1), (1, 1, 1), dict()),
    ("convt", (1, 2, 1, 1), (2, 2, 3, 3), dict(stride=2, padding=1)),
]


@requires("tc_conv_nd", "tc_conv_transpose_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("case", EDGE_CONVS, ids=lambda c: "%s-%s" % (c[0], c[1]))
def test_conv_edge_shapes(case, grad):
    kind, xs, ws, kw = case
    shapes = [xs, ws]
    th = (TORCH_CONV if kind == "conv" else TORCH_CONVT)[len(xs) - 2]
    tc = (lambda x, w: x.conv2d(w, **kw)) if kind == "conv" else \
        (lambda x, w: x.conv_transpose2d(w, **kw))
    run_both(tc, lambda x, w: th(x, w, **kw), arrays(shapes, 9), shapes, ["contig"] * 2, grad,
             atol=1e-4)


@requires("tc_conv_nd")
@requires_autograd
def test_conv_broadcast_input():
    # a batch broadcast from one sample (expand) and a weight shared by two
    # convs: the gradients sum over the broadcast and the uses
    x0, w0 = arrays([(1, 3, 8), (4, 3, 3)], 10)
    tx, tw = Tensor(x0, requires_grad=True), Tensor(w0, requires_grad=True)
    px, pw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    got = tx.expand(3, 3, 8).conv2d(tw, padding=1) + tx.conv2d(tw, stride=2).sum()
    want = F.conv1d(px.expand(3, 3, 8), pw, padding=1) + F.conv1d(px, pw, stride=2).sum()
    assert_close(got, want, atol=1e-4)
    got.sum().backward()
    want.sum().backward()
    assert_close(tx.grad, px.grad, atol=1e-3)
    assert_close(tw.grad, pw.grad, atol=1e-3)


@requires("tc_conv_nd")
def test_conv1d_one_kernel():
    x, w, b = (Tensor(a).realize() for a in arrays([(2, 3, 16), (4, 3, 3), (4,)], 7))
    y = x.conv2d(w, b, stride=2).relu()
    assert len(y.schedule()) == 1  # windows are views; multiply+sum one reduce
    # padded: x padded in a buffer of its own, then the conv (a padded view's
    # gated loads run 7-20x slower)
    y = x.conv2d(w, b, stride=2, padding=1).relu()
    assert len(y.schedule()) == 2


@requires("tc_conv_nd", "tc_conv_transpose_nd")
def test_conv_errors():
    x, w = Tensor.ones(1, 4, 6), Tensor.ones(2, 4, 3)
    with pytest.raises(ValueError, match="same rank"):
        x.conv2d(Tensor.ones(2, 4, 3, 3))
    with pytest.raises(ValueError, match="groups must be a positive int"):
        x.conv2d(w, groups=0)
    with pytest.raises(ValueError, match="stride must be an int or 1 ints"):
        x.conv2d(w, stride=(1, 1))
    with pytest.raises(TinycError, match="^tc_conv_nd: .*do not fit groups 3"):
        x.conv2d(w, groups=3)
    with pytest.raises(TinycError, match=r"^tc_conv_nd: kernel \(2,4,3\) .*does not fit"):
        x.conv2d(w, dilation=3)
    with pytest.raises(TinycError, match="^tc_conv_nd: stride"):
        x.conv2d(w, stride=0)
    with pytest.raises(TinycError, match="^tc_conv_transpose_nd: .*output_padding"):
        x.conv_transpose2d(Tensor.ones(4, 2, 3), stride=2, output_padding=2)
    with pytest.raises(TinycError, match="^tc_conv_transpose_nd: .*do not fit groups"):
        x.conv_transpose2d(w)
    with pytest.raises(ValueError, match="conv_transpose2d needs"):
        Tensor.ones(4, 6).conv_transpose2d(Tensor.ones(4, 2))
