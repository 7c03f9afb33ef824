"""test_composites.py - matmul dot linear softmax log_softmax layernorm conv2d
max_pool2d avg_pool2d sparse_categorical_crossentropy dropout argmax against
torch, forward and backward, on broadcast and non-contiguous inputs. Each
test skips while the library lacks the C function it wraps."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import (assert_close, base_shape, rand_array, requires,
                     requires_autograd, run_both, skip_unless)
from tinyc import Tensor, _lib, dtypes

GRAD = [False, pytest.param(True, marks=requires_autograd)]
GRAD_IDS = ["forward", "backward"]


def leaves(shapes, layouts, seed=0, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    return [rand_array(base_shape(s, lay), rng, lo, hi) for s, lay in zip(shapes, layouts)]


MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                 ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((1, 7), (7, 1))]


@requires("tc_matmul")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, layout, grad):
    lays = [layout, "contig"]
    run_both(lambda a, b: a @ b, lambda a, b: a @ b, leaves(shapes, lays), shapes, lays, grad,
             rtol=1e-4, atol=1e-4)


@requires("tc_matmul")
def test_dot_and_rmatmul():
    a, b = leaves([(2, 3), (3, 2)], ["contig", "contig"])
    assert_close(Tensor(a).dot(Tensor(b)), a @ b, atol=1e-5)
    assert_close(Tensor(a).matmul(Tensor(b)), a @ b, atol=1e-5)
    assert_close(a @ Tensor(b), a @ b, atol=1e-5)  # numpy defers to Tensor.__rmatmul__
    with pytest.raises(ValueError):
        Tensor(1.0) @ Tensor(a)


@requires("tc_matmul")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias, grad):
    shapes = [(5, 3), (3, 4), (4,)] if bias else [(5, 3), (3, 4)]
    arrays = leaves(shapes, ["contig"] * len(shapes))
    run_both(lambda x, w, *b: x.linear(w, *b),
             lambda x, w, *b: F.linear(x, w.T, *b),
             arrays, shapes, ["contig"] * len(shapes), grad)


@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("layout", ["contig", "transposed", "flipped"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(name, axis, layout, grad):
    skip_unless("tc_" + name)
    shape = (4, 6)
    run_both(lambda x: getattr(x, name)(axis), lambda x: getattr(torch, name)(x, axis),
             leaves([shape], [layout], lo=-5, hi=5), [shape], [layout], grad)


@requires("tc_layernorm")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("axis", [-1, (1, 2), 1, (0, 2)], ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_layernorm(axis, layout, grad):
    shape = (2, 3, 5)

    def th(x):  # tinygrad's layernorm: normalise over exactly `axis`
        dims = axis if isinstance(axis, tuple) else (axis,)
        m = x.mean(dim=dims, keepdim=True)
        v = ((x - m) ** 2).mean(dim=dims, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-5)
    run_both(lambda x: x.layernorm(axis), th, leaves([shape], [layout]), [shape], [layout],
             grad, atol=1e-4)


CONVS = [  # x shape, w shape, kwargs
    ((2, 3, 7, 7), (4, 3, 3, 3), dict()),
    ((1, 2, 8, 6), (3, 2, 3, 2), dict(stride=2)),
    ((2, 1, 5, 5), (2, 1, 3, 3), dict(padding=1)),
    ((1, 2, 9, 9), (2, 2, 3, 3), dict(stride=2, padding=2)),
    ((1, 4, 6, 6), (4, 2, 3, 3), dict(groups=2)),
    ((1, 2, 9, 9), (2, 2, 3, 3), dict(dilation=2)),
    ((1, 2, 8, 7), (2, 2, 3, 3), dict(stride=(2, 1), padding=(1, 0))),
]


@requires("tc_conv2d")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("conv", CONVS, ids=lambda c: str(c[2]) or "plain")
def test_conv2d(conv, bias, grad):
    xs, ws, kw = conv
    if set(kw) - {"padding", "stride"} or isinstance(kw.get("stride"), tuple):
        skip_unless("tc_conv2d_ex")
    shapes = [xs, ws] + ([(ws[0],)] if bias else [])
    lays = ["contig"] * len(shapes)

    def th(x, w, b=None):
        return F.conv2d(x, w, b, **kw)

    def tc(x, w, b=None):
        return x.conv2d(w, b, **kw)
    run_both(tc, th, leaves(shapes, lays), shapes, lays, grad, atol=1e-4)


@requires("tc_conv2d")
def test_conv2d_on_a_view_and_uneven_padding():
    x, w = leaves([(1, 2, 6, 5), (3, 2, 3, 3)], ["transposed", "contig"])
    tx, tw = Tensor(x).permute(3, 2, 1, 0), Tensor(w)
    got = tx.conv2d(tw, padding=(1, 0, 2, 1))  # tinygrad's (left, right, top, bottom)
    want = F.conv2d(F.pad(torch.tensor(x).permute(3, 2, 1, 0), (1, 0, 2, 1)), torch.tensor(w))
    assert_close(got, want, atol=1e-4)


POOLS = [(2, None, 0), (3, 2, 0), (2, 1, 0), (3, 3, 1)]


@requires("tc_max_pool2d")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("pool", POOLS, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_max_pool2d(pool, layout, grad):
    k, s, p = pool
    shape = (2, 3, 8, 7)
    run_both(lambda x: x.max_pool2d(k, s, padding=p),
             lambda x: F.max_pool2d(x, k, s if s is not None else k, padding=p),
             leaves([shape], [layout]), [shape], [layout], grad)


@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("pool", POOLS + [((2, 3), (1, 2), 0)], ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_avg_pool2d(pool, layout, grad):
    k, s, p = pool
    shape = (2, 3, 8, 7)
    run_both(lambda x: x.avg_pool2d(k, s, padding=p),
             lambda x: F.avg_pool2d(x, k, s if s is not None else k, padding=p),
             leaves([shape], [layout]), [shape], [layout], grad)


# non-square windows, strides other than the kernel, dilation, padding:
# (kernel, stride, dilation, padding); tc_max_pool_nd / tc_avg_pool_nd
POOLS_ND = [((2, 3), (1, 2), 1, 0), ((3, 2), 2, (2, 1), (1, 0)), (3, 1, 2, 1),
            ((1, 3), (2, 1), 1, (0, 1))]


@requires("tc_max_pool_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("pool", POOLS_ND, ids=str)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
def test_max_pool2d_general(pool, layout, grad):
    k, s, d, p = pool
    shape = (2, 3, 9, 8)
    run_both(lambda x: x.max_pool2d(k, s, dilation=d, padding=p),
             lambda x: F.max_pool2d(x, k, s, padding=p, dilation=d),
             leaves([shape], [layout]), [shape], [layout], grad)


@requires("tc_avg_pool_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("pool", [q for q in POOLS_ND if q[2] == 1], ids=str)
@pytest.mark.parametrize("count_pad", [True, False])
def test_avg_pool2d_general(pool, count_pad, grad):
    """torch's avg_pool2d has no dilation: the cases without it"""
    k, s, _, p = pool
    shape = (2, 3, 9, 8)
    run_both(lambda x: x.avg_pool2d(k, s, padding=p, count_include_pad=count_pad),
             lambda x: F.avg_pool2d(x, k, s, padding=p, count_include_pad=count_pad),
             leaves([shape], ["contig"]), [shape], ["contig"], grad)


POOLS_ANY_RANK = [  # x shape, kernel, stride, dilation, padding: a kernel of n ints pools n dims
    ((2, 3, 11), (3,), (2,), 2, 1), ((2, 2, 5, 6, 7), (2, 3, 2), (1, 2, 1), 1, (1, 1, 0)),
    ((2, 2, 5, 6, 7), (2, 2, 2), None, (1, 2, 1), 0), ((1, 2, 3, 5, 6, 7), (3, 2, 2), 1, 1, 1)]


@requires("tc_max_pool_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("case", POOLS_ANY_RANK, ids=str)
def test_pools_any_rank(case, grad):
    """tinygrad's pools take kernels of any length: 1-d and 3-d against torch's"""
    shape, k, s, d, p = case
    nd = len(k)
    tmax = {1: F.max_pool1d, 3: F.max_pool3d}[nd]
    tavg = {1: F.avg_pool1d, 3: F.avg_pool3d}[nd]

    def torch_in(x):  # torch's 3-d pools take (N, C, D, H, W): extra batch dims folded
        return x.reshape(-1, *x.shape[-nd - 1:]) if x.ndim > nd + 2 else x

    def back(x, y):
        return y.reshape(*x.shape[:-nd], *y.shape[-nd:])
    ts = s if s is not None else k
    run_both(lambda x: x.max_pool2d(k, s, dilation=d, padding=p),
             lambda x: back(x, tmax(torch_in(x), k, ts, padding=p, dilation=d)),
             leaves([shape], ["contig"]), [shape], ["contig"], grad)
    if d == 1:
        for cip in (True, False):
            run_both(lambda x: x.avg_pool2d(k, s, padding=p, count_include_pad=cip),
                     lambda x: back(x, tavg(torch_in(x), k, ts, padding=p, count_include_pad=cip)),
                     leaves([shape], ["contig"]), [shape], ["contig"], grad)


@requires("tc_max_pool_nd")
def test_pool_kernels():
    """a general pool is one kernel, as the square one"""
    x = Tensor(np.random.default_rng(3).random((2, 3, 9, 8), dtype=np.float32)).realize()
    assert len(x.max_pool2d((2, 3), (1, 2), dilation=(2, 1)).schedule()) == 1
    assert len(x.avg_pool2d((3, 2), 2).schedule()) == 1


POOL_EDGES = [  # x shape, kernel, stride, padding: 0-size batch, 1 element, a window of all
    ((0, 2, 5, 4), 2, None, 0), ((1, 1, 1, 1), 1, None, 0), ((2, 1, 3, 4), (3, 4), None, 0),
    ((1, 2, 1, 5), (1, 3), (1, 2), (0, 1)),
]


@requires("tc_max_pool_nd", "tc_avg_pool_nd")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("pool", POOL_EDGES, ids=str)
def test_pool_edge_shapes(pool, kind, grad):
    shape, k, s, p = pool
    stride = s if s is not None else k
    if kind == "max":
        fns = (lambda x: x.max_pool2d(k, s, padding=p),
               lambda x: F.max_pool2d(x, k, stride, padding=p))
    else:
        fns = (lambda x: x.avg_pool2d(k, s, padding=p),
               lambda x: F.avg_pool2d(x, k, stride, padding=p))
    run_both(*fns, leaves([shape], ["contig"], 11), [shape], ["contig"], grad)


@requires("tc_max_pool_nd", "tc_avg_pool_nd")
@requires_autograd
@pytest.mark.parametrize("layout", ["flipped", "strided"])
def test_pool_broadcast_and_views(layout):
    # a channel broadcast (expand) of a non-contiguous view, both pools, and
    # the gradient summed back over the broadcast
    a = leaves([(1, 1, 7, 6)], [layout], 12)[0]
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    view = (lambda v: v.flip((2, 3))) if layout == "flipped" else (lambda v: v[..., ::2])
    x, xt = view(t).expand(2, 3, 7, 6), view(tt).expand(2, 3, 7, 6)
    got = x.max_pool2d((3, 2), (2, 1), dilation=(1, 2), padding=(1, 0)) + \
        x.avg_pool2d((3, 2), (2, 1), padding=(1, 0))[..., :4]
    want = F.max_pool2d(xt, (3, 2), (2, 1), padding=(1, 0), dilation=(1, 2)) + \
        F.avg_pool2d(xt, (3, 2), (2, 1), padding=(1, 0))[..., :4]
    assert_close(got, want)
    w = np.random.default_rng(13).uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad, atol=1e-4)


def test_avg_pool2d_without_padding_count():
    x = leaves([(1, 1, 5, 5)], ["contig"])[0]
    got = Tensor(x).avg_pool2d(3, 2, padding=1, count_include_pad=False)
    want = F.avg_pool2d(torch.tensor(x), 3, 2, padding=1, count_include_pad=False)
    assert_close(got, want)


@requires("tc_cross_entropy")
@pytest.mark.parametrize("grad", GRAD, ids=GRAD_IDS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64, np.uint8])
def test_sparse_categorical_crossentropy(label_dtype, smoothing, grad):
    if smoothing:
        skip_unless("tc_log_softmax")
    rng = np.random.default_rng(9)
    logits = rand_array((6, 5), rng, -3, 3)
    labels = rng.integers(0, 5, 6).astype(label_dtype)
    run_both(lambda x: x.sparse_categorical_crossentropy(Tensor(labels),
                                                         label_smoothing=smoothing),
             lambda x: F.cross_entropy(x, torch.tensor(labels.astype(np.int64)),
                                       label_smoothing=smoothing),
             [logits], [(6, 5)], ["contig"], grad)


@requires("tc_cross_entropy")
def test_crossentropy_transposed_logits():
    rng = np.random.default_rng(10)
    logits = rand_array((5, 6), rng, -3, 3)
    labels = rng.integers(0, 5, 6).astype(np.int32)
    got = Tensor(logits).T.sparse_categorical_crossentropy(labels)
    want = F.cross_entropy(torch.tensor(logits).T, torch.tensor(labels.astype(np.int64)))
    assert_close(got, want)


def test_dropout():
    x = Tensor.ones(200, 100)
    assert x.dropout(0.5) is x  # not training: identity
    with Tensor.train():
        Tensor.manual_seed(3)
        y = x.dropout(0.25).numpy()
        kept = y != 0
        assert abs(kept.mean() - 0.75) < 0.02
        np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
        assert x.dropout(0.0) is x
        assert (x.dropout(1.0).numpy() == 0).all()
    assert not Tensor.training


@requires_autograd
def test_dropout_backward():
    a = Tensor.ones(50, 40, requires_grad=True)
    with Tensor.train():
        Tensor.manual_seed(4)
        y = a.dropout(0.5)
        y.sum().backward()
        mask = y.numpy() != 0
    np.testing.assert_allclose(a.grad.numpy(), mask * 2.0, rtol=1e-6)


@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_with_c_or_python(keepdim, monkeypatch):
    a = np.random.default_rng(11).integers(0, 3, (4, 5)).astype(np.float32)
    want = torch.tensor(a).argmax(1, keepdim=keepdim)
    assert_close(Tensor(a).argmax(1, keepdim=keepdim), want)
    monkeypatch.setattr(_lib, "_missing", _lib._missing | {"tc_argmax"})
    assert_close(Tensor(a).argmax(1, keepdim=keepdim), want)  # the composed fallback
    assert Tensor(a).argmax(1).dtype == dtypes.int32


@pytest.mark.parametrize("name,th", [
    ("silu", F.silu), ("gelu", lambda x: F.gelu(x, approximate="tanh")),
    ("softplus", F.softplus), ("elu", F.elu), ("relu6", F.relu6), ("leakyrelu", F.leaky_relu),
    ("sign", torch.sign), ("tan", torch.tan)])
def test_activations(name, th):
    x = leaves([(3, 4)], ["contig"], lo=-1.4, hi=1.4)[0]
    assert_close(getattr(Tensor(x), name)(), th(torch.tensor(x)), atol=1e-4)


def test_logsumexp_and_prod():
    x = leaves([(3, 4)], ["contig"])[0]
    assert_close(Tensor(x).logsumexp(1), torch.logsumexp(torch.tensor(x), 1))
    assert_close(Tensor(x).logsumexp(), torch.logsumexp(torch.tensor(x).reshape(-1), 0))
    assert_close(Tensor(x).prod(0), torch.tensor(x).prod(0), atol=1e-5)
    z = np.array([[1.0, 0.0], [2.0, -3.0]], np.float32)
    assert_close(Tensor(z).prod(1), [0.0, -6.0], atol=1e-5)
