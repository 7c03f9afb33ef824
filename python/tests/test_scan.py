"""test_scan.py - the scans and reductions of the breadth issue against torch
1.13: cumsum and cumprod (every axis, views, broadcast inputs, dtypes, edge
shapes, long rows scanned in blocks, backward (cumprod's with zeros in the
rows), and one kernel for a row of up to 512 and for cumsum's gradient), any/all with axis tuples, std/var with correction=, logsumexp,
reductions, softmax, log_softmax, logsumexp, argmax and cumsum on 0-d
tensors with axis 0/-1, and the finite gradient of std over size-1 axes."""
import numpy as np
import pytest
import torch

from helpers import LAYOUTS, assert_close, base_shape, make_view, rand_array, requires_autograd
from tinyc import AxisError, Tensor, dtypes


def views(shape, layout, seed=0, lo=-2.0, hi=2.0):
    a = rand_array(base_shape(shape, layout), np.random.default_rng(seed), lo, hi)
    t = Tensor(a, requires_grad=True)
    tt = torch.tensor(a, requires_grad=True)
    return t, tt, make_view(t, layout, len(shape)), make_view(tt, layout, len(shape))


def backward_both(got, want, t, tt, seed=1):
    w = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
    (got * Tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad, rtol=1e-4, atol=1e-4, what="grad")


# ---- cumsum ------------------------------------------------------------------

@requires_autograd
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1),
                                        ((2, 3, 4), -1), ((4, 1, 3), -2)], ids=str)
def test_cumsum(shape, axis, layout):
    t, tt, x, xt = views(shape, layout)
    got, want = x.cumsum(axis), torch.cumsum(xt, axis)
    assert_close(got, want, what="cumsum")
    backward_both(got, want, t, tt)


@requires_autograd
@pytest.mark.parametrize("shape,axis", [((), 0), ((), -1), ((1,), 0), ((0,), 0), ((3, 0), 1),
                                        ((0, 4), 1), ((2, 1), 1), ((1, 1, 1), 1)], ids=str)
def test_cumsum_edge_shapes(shape, axis):
    t, tt, x, xt = views(shape, "contig")
    got, want = x.cumsum(axis), torch.cumsum(xt, axis)
    assert got.shape == tuple(want.shape)
    assert_close(got, want)
    backward_both(got, want, t, tt)


@requires_autograd
@pytest.mark.parametrize("n", [513, 1000, 2048, 70000])
def test_cumsum_long_rows_in_blocks(n):
    a = rand_array((2, n), np.random.default_rng(n), 0.0, 1.0)
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, dtype=torch.float64,
                                                         requires_grad=True)
    got, want = t.cumsum(1), torch.cumsum(tt, 1)
    assert len(got.schedule()) == 3  # blocks' scans, the totals' scan, the sum
    assert_close(got, want, rtol=2e-5, atol=1e-3 * n ** 0.5 / 30)
    got.sum().backward()
    want.sum().backward()
    assert_close(t.grad, tt.grad, rtol=2e-5, atol=1e-3 * n ** 0.5 / 30)


@pytest.mark.parametrize("np_dt,want_dt", [(np.int32, dtypes.int32), (np.int64, dtypes.int64),
                                           (np.uint8, dtypes.int32), (np.bool_, dtypes.int32),
                                           (np.float16, dtypes.float16)])
def test_cumsum_dtypes(np_dt, want_dt):
    a = np.array([[1, 0, 3, 1], [2, 2, 0, 1]]).astype(np_dt)
    got = Tensor(a).cumsum(1)
    assert got.dtype == want_dt  # tinygrad's (and tc_sum's) accumulation dtypes
    ref = torch.tensor(a.astype(np.float32) if np_dt == np.float16 else a)  # torch: no half
    assert_close(got, torch.cumsum(ref, 1).numpy().astype(want_dt.np), atol=0)


@requires_autograd
@pytest.mark.parametrize("n", [2, 33, 300, 512])
def test_cumsum_row_is_one_kernel(n):
    a = rand_array((4, n), np.random.default_rng(2))
    x = Tensor(a, requires_grad=True)
    y = x.cumsum(1)
    assert len(y.schedule()) == 1
    assert len(Tensor(a.T.copy()).cumsum(0).schedule()) == 1  # along a strided axis too
    assert len((y * 2 + 1).relu().schedule()) == 1  # and with elementwise consumers
    assert_close(y, np.cumsum(a, 1), rtol=1e-5, atol=1e-4)
    (y * Tensor(a)).sum().backward()
    g = x.grad
    assert len(g.schedule()) == 1  # the running sums from the end
    assert len((x.detach() - 0.1 * g).schedule()) == 1  # and its reader, in the same kernel
    assert_close(g, np.flip(np.cumsum(np.flip(a, 1), 1), 1), rtol=1e-5, atol=1e-4)


def test_cumsum_bad_axis():
    with pytest.raises(AxisError):
        Tensor.ones(2, 3).cumsum(2)
    with pytest.raises(AxisError):
        Tensor(1.0).cumsum(1)


# ---- cumprod -----------------------------------------------------------------

@requires_autograd
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1),
                                        ((2, 3, 4), -1), ((4, 1, 3), -2)], ids=str)
def test_cumprod(shape, axis, layout):
    t, tt, x, xt = views(shape, layout, lo=-1.8, hi=1.8)
    got, want = x.cumprod(axis), torch.cumprod(xt, axis)
    assert_close(got, want, what="cumprod")
    backward_both(got, want, t, tt)


def zeroed(shape, where, seed=4):
    a = rand_array(shape, np.random.default_rng(seed), -1.8, 1.8)
    for i in where:
        a.flat[i] = 0.0
    return a


@requires_autograd
@pytest.mark.parametrize("where", [(2,), (2, 4), (0,), (5,), (0, 5), (1, 7, 9, 16), ()], ids=str)
@pytest.mark.parametrize("axis", [1, 0])
def test_cumprod_backward_with_zeros(where, axis):
    # torch's gradient: at a row's first zero the product of the others, 0 after it
    a = zeroed((3, 6), where)
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = t.cumprod(axis), torch.cumprod(tt, axis)
    assert_close(got, want, atol=0)
    backward_both(got, want, t, tt)
    assert np.isfinite(t.grad.numpy()).all()


@requires_autograd
def test_cumprod_broadcast_and_views():
    # a broadcast input (expand) and a product of two leaves: both get gradients
    a = zeroed((1, 5), (2,))
    b = rand_array((4, 1), np.random.default_rng(5), 0.5, 1.5)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    got, want = (ta * tb).cumprod(1), torch.cumprod(xa * xb, 1)
    assert_close(got, want)
    got2, want2 = ta.expand(4, 5).cumprod(0)[:, ::2], torch.cumprod(xa.expand(4, 5), 0)[:, ::2]
    assert_close(got2, want2)
    w = np.random.default_rng(6).uniform(0.5, 1.5, (4, 5)).astype(np.float32)
    ((got * Tensor(w)).sum() + got2.sum()).backward()
    ((want * torch.tensor(w)).sum() + want2.sum()).backward()
    assert_close(ta.grad, xa.grad, rtol=1e-4, atol=1e-4)
    assert_close(tb.grad, xb.grad, rtol=1e-4, atol=1e-4)


@requires_autograd
@pytest.mark.parametrize("shape,axis", [((), 0), ((), -1), ((1,), 0), ((0,), 0), ((3, 0), 1),
                                        ((0, 4), 1), ((2, 1), 1), ((1, 1, 1), 1)], ids=str)
def test_cumprod_edge_shapes(shape, axis):
    t, tt, x, xt = views(shape, "contig")
    got, want = x.cumprod(axis), torch.cumprod(xt, axis)
    assert got.shape == tuple(want.shape)
    assert_close(got, want)
    backward_both(got, want, t, tt)


@requires_autograd
@pytest.mark.parametrize("n", [513, 2048, 70000])
def test_cumprod_long_rows_in_blocks(n):
    a = rand_array((2, n), np.random.default_rng(n), 0.999, 1.001)
    a[1, n // 3] = 0.0
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, dtype=torch.float64,
                                                         requires_grad=True)
    got, want = t.cumprod(1), torch.cumprod(tt, 1)
    assert len(got.schedule()) == 2  # the blocks' scans; the totals' scan and the product
    assert_close(got, want, rtol=1e-4, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    assert_close(t.grad, tt.grad, rtol=2e-4, atol=1e-3 * n ** 0.5 / 30)


@pytest.mark.parametrize("np_dt,want_dt", [(np.int32, dtypes.int32), (np.int64, dtypes.int64),
                                           (np.uint8, dtypes.int32), (np.bool_, dtypes.int32),
                                           (np.float16, dtypes.float16),
                                           (np.float64, dtypes.float64)])
def test_cumprod_dtypes(np_dt, want_dt):
    # cumsum's accumulation dtypes (tinygrad's); integers exact (torch: int64)
    a = np.array([[1, 3, 2, 5, 7, 11], [2, 2, 0, 1, 3, 3]]).astype(np_dt)
    got = Tensor(a).cumprod(1)
    assert got.dtype == want_dt
    ref = torch.tensor(a.astype(np.float32) if np_dt == np.float16 else a)  # torch: no half
    assert_close(got, torch.cumprod(ref, 1).numpy().astype(want_dt.np), atol=0)
    big = np.array([3, 1000, 1000, 1000, 7], np.int64)
    assert Tensor(big).cumprod(0).tolist() == torch.cumprod(torch.tensor(big), 0).tolist()


@pytest.mark.parametrize("n", [2, 33, 300, 512])
def test_cumprod_row_is_one_kernel(n):
    a = rand_array((4, n), np.random.default_rng(2), 0.99, 1.01)
    y = Tensor(a).cumprod(1)
    assert len(y.schedule()) == 1
    assert len(Tensor(a.T.copy()).cumprod(0).schedule()) == 1  # along a strided axis too
    assert len((y * 2 + 1).relu().sum(1).schedule()) == 1  # and with its readers
    assert_close(y, np.cumprod(a.astype(np.float64), 1), rtol=1e-5)


@requires_autograd
def test_cumprod_backward_kernels():
    # two kernels: the scans the rule reads, then the reversed sums and the rule
    a = zeroed((4, 300), (5, 700))
    x = Tensor(a, requires_grad=True)
    (x.cumprod(1) * Tensor(a)).sum().backward()
    assert len(x.grad.schedule()) == 2
    xt = torch.tensor(a, requires_grad=True)
    (torch.cumprod(xt, 1) * torch.tensor(a)).sum().backward()
    assert_close(x.grad, xt.grad, rtol=1e-4, atol=1e-4)


def test_cumprod_bad_axis():
    with pytest.raises(AxisError):
        Tensor.ones(2, 3).cumprod(-3)
    with pytest.raises(AxisError):
        Tensor(1.0).cumprod(1)


# ---- any / all ---------------------------------------------------------------

@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (2, 1, 0), ()], ids=str)
@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all(name, axis, keepdim):
    rng = np.random.default_rng(3)
    a = (rng.random((3, 4, 5)) > 0.3).astype(np.float32) * rng.uniform(-1, 1, (3, 4, 5))
    a[0] = 1.0  # rows that are all true, and rows with zeros
    a[1, 2] = 0.0
    x = make_view(Tensor(a.astype(np.float32)), "transposed", 3)
    xt = make_view(torch.tensor(a.astype(np.float32)), "transposed", 3)
    got = getattr(x, name)(axis=axis, keepdim=keepdim)
    assert got.dtype == dtypes.bool
    if axis == ():
        want = xt != 0
    else:
        dims = tuple(range(3)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        want = xt != 0
        for d in sorted(((d + 3) % 3 for d in dims), reverse=True):
            want = getattr(torch, name)(want, dim=d, keepdim=keepdim)
    assert_close(got, want, atol=0)


@pytest.mark.parametrize("np_dt", [np.int32, np.uint8, np.bool_, np.float16])
def test_any_all_dtypes_and_empty(np_dt):
    a = np.array([[0, 1, 2], [0, 0, 0]]).astype(np_dt)
    assert Tensor(a).any(1).tolist() == [True, False]
    assert Tensor(a).all(1).tolist() == [False, False]
    assert Tensor(a).any().item() is True and Tensor(a).all().item() is False
    e = np.zeros((0, 3), np_dt)
    assert Tensor(e).any().item() is False and Tensor(e).all().item() is True  # torch's
    assert Tensor(e).any(0).tolist() == [False] * 3
    assert Tensor(np.array([np.nan], np.float32)).all().item() is True  # NaN is nonzero


# ---- std / var correction, logsumexp -----------------------------------------

@requires_autograd
@pytest.mark.parametrize("correction", [0, 1, 2, 5])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["std", "var"])
def test_std_var_correction(name, axis, correction):
    t, tt, x, xt = views((3, 4, 5), "transposed")
    got = getattr(x, name)(axis=axis, keepdim=True, correction=correction)
    dim = tuple(range(3)) if axis is None else axis
    want = getattr(torch, name)(xt, dim=dim, keepdim=True, correction=correction)
    assert_close(got, want, what="%s correction=%d" % (name, correction))
    backward_both(got, want, t, tt)


@requires_autograd
@pytest.mark.parametrize("correction", [0, 1])
def test_std_over_size_one_axes_has_finite_gradient(correction):
    a = rand_array((1, 3, 4, 1), np.random.default_rng(4))
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got = t.std(axis=(0, 3), correction=correction)
    want = torch.std(tt, dim=(0, 3), correction=correction)
    assert_close(got, want)  # 0, or NaN (no degrees of freedom) for correction=1
    got.sum().backward()
    want.sum().backward()
    assert_close(t.grad, tt.grad)  # zeros (torch), or NaN like torch when std is NaN
    if correction == 0:
        assert np.isfinite(t.grad.numpy()).all()
    c = Tensor(np.ones((2, 3), np.float32), requires_grad=True)  # all equal: std 0
    c.std(axis=1).sum().backward()
    assert_close(c.grad, np.zeros((2, 3)), atol=0)


@requires_autograd
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("layout", ["contig", "flipped", "strided"])
def test_logsumexp(axis, keepdim, layout):
    t, tt, x, xt = views((2, 3, 4), layout, lo=-5, hi=5)
    dim = tuple(range(3)) if axis is None else axis
    got, want = x.logsumexp(axis, keepdim), torch.logsumexp(xt, dim, keepdim)
    assert_close(got, want)
    backward_both(got, want, t, tt)


def test_logsumexp_infinities_and_kernels():
    inf = float("inf")
    a = np.array([[inf, 1.0], [-inf, -inf], [-inf, 2.0], [1000.0, 1000.0]], np.float32)
    assert_close(Tensor(a).logsumexp(1), torch.logsumexp(torch.tensor(a), 1))
    x = Tensor(rand_array((16, 33), np.random.default_rng(5))).realize()
    assert len(x.logsumexp(1).schedule()) == 1  # max and sum of exp: one kernel
    assert Tensor(np.array([1, 2], np.int32)).logsumexp().dtype == dtypes.float32


# ---- 0-d tensors with axis 0 / -1 -----------------------------------------------

ZERO_D = [
    ("sum", lambda x, a: x.sum(a), lambda x, a: x.sum(a)),
    ("mean", lambda x, a: x.mean(a), lambda x, a: x.mean(a)),
    ("max", lambda x, a: x.max(a), lambda x, a: x.amax(a)),
    ("min", lambda x, a: x.min(a), lambda x, a: x.amin(a)),
    ("max_keepdim", lambda x, a: x.max(a, keepdim=True), lambda x, a: x.amax(a, keepdim=True)),
    ("std0", lambda x, a: x.std(a, correction=0), lambda x, a: torch.std(x, a, correction=0)),
    ("var", lambda x, a: x.var(a), lambda x, a: torch.var(x, a)),
    ("softmax", lambda x, a: x.softmax(a), lambda x, a: torch.softmax(x, a)),
    ("log_softmax", lambda x, a: x.log_softmax(a), lambda x, a: torch.log_softmax(x, a)),
    ("logsumexp", lambda x, a: x.logsumexp(a), lambda x, a: torch.logsumexp(x, a)),
    ("cumsum", lambda x, a: x.cumsum(a), lambda x, a: torch.cumsum(x, a)),
    ("sum_tuple", lambda x, a: x.sum((a,)), lambda x, a: x.sum((a,))),
]


@requires_autograd
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("op", ZERO_D, ids=[o[0] for o in ZERO_D])
def test_zero_d_with_axis(op, axis):
    name, f_tc, f_th = op
    t, tt = Tensor(1.5, requires_grad=True), torch.tensor(1.5, requires_grad=True)
    got, want = f_tc(t, axis), f_th(tt, axis)
    assert got.shape == tuple(want.shape) == ()
    assert_close(got, want, what=name)
    if name != "var":  # var of one element is NaN
        (got * 2).backward()
        (want * 2).backward()
        assert_close(t.grad, tt.grad, what="grad of " + name)


def test_zero_d_any_all_argmax():
    x = Tensor(2.0)
    assert x.any(0).item() is True and x.all(-1).item() is True
    assert Tensor(0.0).any(0).item() is False
    assert x.argmax(0).item() == 0 and x.argmax(-1).shape == () and x.argmin(0).item() == 0
    for bad in (1, -2):
        with pytest.raises(AxisError):
            x.sum(bad)
        with pytest.raises(AxisError):
            x.softmax(bad)
