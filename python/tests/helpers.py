"""helpers.py - shared test helpers: skips for C functions the library lacks,
comparisons against numpy/torch that print the first mismatches and the max
difference, and builders for broadcast and non-contiguous inputs."""
import numpy as np
import pytest
import torch

from tinyc import Tensor, _lib

HAS_AUTOGRAD = _lib.has("tc_backward") and _lib.has("tc_grad") and \
    _lib.has("tc_set_requires_grad")


def requires(*symbols):
    """skip unless the library exports every C function in symbols"""
    missing = [s for s in symbols if not _lib.has(s)]
    return pytest.mark.skipif(bool(missing), reason="libtinyc lacks %s" % ", ".join(missing))


requires_autograd = requires("tc_set_requires_grad", "tc_backward", "tc_grad")


def skip_unless(*symbols):
    """pytest.skip() inside a test unless the library has symbols"""
    missing = [s for s in symbols if not _lib.has(s)]
    if missing:
        pytest.skip("libtinyc lacks %s" % ", ".join(missing))


def to_np(x):
    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_close(got, want, rtol=1e-4, atol=1e-5, what="", check_shape=True):
    """allclose that reports the first mismatches and the max difference"""
    g, w = to_np(got), to_np(want)
    if check_shape:
        assert g.shape == w.shape, "%s: shape %s, want %s" % (what, g.shape, w.shape)
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    ok = np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        lines = ["  at %s: got %r want %r" % (tuple(i), g64[tuple(i)], w64[tuple(i)])
                 for i in bad]
        diff = np.nanmax(np.abs(g64 - w64)) if g64.size else 0
        raise AssertionError("%s: %d of %d values differ (max diff %g):\n%s"
                             % (what, (~ok).sum(), ok.size, diff, "\n".join(lines)))


# ---- inputs: the same values as a tinyc view and a torch view -------------

LAYOUTS = ("contig", "transposed", "flipped", "strided")


def base_shape(shape, layout):
    """the shape of the leaf array a view of `shape` is cut from"""
    if layout == "transposed":
        return tuple(shape[::-1])
    if layout == "strided" and shape:
        return shape[:-1] + (2 * shape[-1],)
    return tuple(shape)


def make_view(t, layout, ndim):
    """the same non-contiguous view of a tinyc or torch tensor"""
    if layout == "contig" or ndim == 0:
        return t
    if layout == "transposed":
        return t.permute(*reversed(range(ndim))) if isinstance(t, torch.Tensor) \
            else t.permute(tuple(reversed(range(ndim))))
    if layout == "flipped":
        return t.flip(tuple(range(ndim))) if isinstance(t, torch.Tensor) \
            else t.flip(tuple(range(ndim)))
    if layout == "strided":
        return t[..., ::2]
    raise ValueError(layout)


def rand_array(shape, rng, low=-2.0, high=2.0, dtype=np.float32):
    return rng.uniform(low, high, size=shape).astype(dtype)


def run_both(fn_tc, fn_th, arrays, shapes, layouts, grad, rtol=1e-4, atol=1e-5):
    """fn on views (layouts) of leaves holding arrays; compares the outputs and,
    with grad, the leaves' gradients of sum(out * w) for a random w"""
    tc_leaves = [Tensor(a, requires_grad=True if grad else None) for a in arrays]
    th_leaves = [torch.tensor(a, requires_grad=grad) for a in arrays]
    tc_in = [make_view(t, lay, len(s)) for t, lay, s in zip(tc_leaves, layouts, shapes)]
    th_in = [make_view(t, lay, len(s)) for t, lay, s in zip(th_leaves, layouts, shapes)]
    for t, s in zip(tc_in, shapes):
        assert t.shape == tuple(s)
    out_tc, out_th = fn_tc(*tc_in), fn_th(*th_in)
    assert_close(out_tc, out_th, rtol, atol, "forward")
    if grad:
        w = np.random.default_rng(1).uniform(0.5, 1.5, out_th.shape).astype(np.float32)
        (out_tc * Tensor(w)).sum().backward()
        (out_th * torch.tensor(w)).sum().backward()
        for i, (a, b) in enumerate(zip(tc_leaves, th_leaves)):
            assert a.grad is not None, "input %d got no gradient" % i
            assert_close(a.grad, b.grad, rtol, atol * 10, "grad of input %d" % i)
