"""test_movement.py - reshape view permute transpose expand pad shrink flip
squeeze unsqueeze flatten contiguous and __getitem__ (ints, negative ints,
slices with any step, None, Ellipsis) against numpy/torch, on contiguous and
non-contiguous inputs; backward through views where autograd exists."""
import numpy as np
import pytest
import torch

from helpers import LAYOUTS, assert_close, base_shape, make_view, rand_array, requires_autograd
from tinyc import AxisError, Tensor, TinycError

SHAPE = (2, 3, 4)


def inputs(layout, shape=SHAPE, seed=0):
    a = rand_array(base_shape(shape, layout), np.random.default_rng(seed))
    x = make_view(Tensor(a), layout, len(shape))
    xt = make_view(torch.tensor(a), layout, len(shape))
    return x, xt.numpy()


MOVES = [
    ("reshape", lambda x: x.reshape(4, 6), lambda a: a.reshape(4, 6)),
    ("reshape_tuple", lambda x: x.reshape((6, -1)), lambda a: a.reshape(6, -1)),
    ("reshape_scalar", lambda x: x[0, 0, 0].reshape(()), lambda a: a[0, 0, 0].reshape(())),
    ("view", lambda x: x.view(-1), lambda a: a.reshape(-1)),
    ("permute", lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("permute_tuple", lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    ("transpose", lambda x: x.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    ("transpose_default", lambda x: x.transpose(), lambda a: a.swapaxes(1, 0)),
    ("T", lambda x: x.T, lambda a: a.T),
    ("expand", lambda x: x[:, :1].expand(2, 5, 4), lambda a: np.broadcast_to(a[:, :1], (2, 5, 4))),
    ("expand_new_dim", lambda x: x.expand(3, -1, -1, -1), lambda a: np.broadcast_to(a, (3,) + SHAPE)),
    ("pad", lambda x: x.pad(((0, 1), None, (2, 0))), lambda a: np.pad(a, ((0, 1), (0, 0), (2, 0)))),
    ("pad_value", lambda x: x.pad(((1, 1), (0, 0), (0, 0)), value=-3.0),
     lambda a: np.pad(a, ((1, 1), (0, 0), (0, 0)), constant_values=-3.0)),
    ("pad_torch_flat", lambda x: x.pad((1, 2)), lambda a: np.pad(a, ((0, 0), (0, 0), (1, 2)))),
    ("pad_negative", lambda x: x.pad(((0, 0), (-1, 1), (0, 0))),
     lambda a: np.pad(a[:, 1:], ((0, 0), (0, 1), (0, 0)))),
    ("shrink", lambda x: x.shrink(((0, 1), None, (1, 3))), lambda a: a[0:1, :, 1:3]),
    ("flip", lambda x: x.flip(1), lambda a: np.flip(a, 1)),
    ("flip_tuple", lambda x: x.flip((0, 2)), lambda a: np.flip(a, (0, 2))),
    ("squeeze", lambda x: x[:, :1].squeeze(), lambda a: a[:, :1].squeeze()),
    ("squeeze_dim", lambda x: x[:1, :1].squeeze(1), lambda a: a[:1, :1].squeeze(1)),
    ("squeeze_noop", lambda x: x.squeeze(0), lambda a: a),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unsqueeze_neg", lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    ("flatten", lambda x: x.flatten(), lambda a: a.reshape(-1)),
    ("flatten_1", lambda x: x.flatten(1), lambda a: a.reshape(2, -1)),
    ("flatten_0_1", lambda x: x.flatten(0, 1), lambda a: a.reshape(6, 4)),
    ("contiguous", lambda x: x.contiguous(), lambda a: a),
    ("repeat", lambda x: x.repeat(1, 2, 1), lambda a: np.tile(a, (1, 2, 1))),
    ("cat", lambda x: x.cat(x * 2, dim=1), lambda a: np.concatenate([a, a * 2], 1)),
    ("stack", lambda x: x.stack(x, dim=0), lambda a: np.stack([a, a], 0)),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("move", MOVES, ids=[m[0] for m in MOVES])
def test_movement(move, layout):
    name, f, g = move
    x, a = inputs(layout)
    got = f(x)
    assert_close(got, g(a), rtol=0, atol=0, what=name)


INDICES = [
    0, -1, 1, slice(None), slice(1, None), slice(None, -1), slice(None, None, 2),
    slice(None, None, -1), slice(2, 0, -1), slice(-1, None, -2), slice(5, 10), slice(3, 1),
    (0, 1), (-1, -2, -3), (slice(None), 2), (Ellipsis, 1), (0, Ellipsis), (None,),
    (None, 0, None), (Ellipsis, None), (slice(None, None, -2), None, slice(1, 3), -1),
    (1, slice(None, None, 3), slice(None, None, -3)), (Ellipsis,), (0, None, Ellipsis, None),
    (slice(0, 2), slice(None, None, 2), slice(1, None, 2)),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitem(idx, layout):
    x, a = inputs(layout)
    assert_close(x[idx], a[idx], rtol=0, atol=0, what="x%r" % (idx,))


def test_getitem_is_a_view():
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    y = x[1, ::-2, 1::2]
    assert len(y.schedule()) == 0  # a view of a realized buffer: nothing to run
    assert y.tolist() == [[21.0, 23.0], [13.0, 15.0]]


@pytest.mark.parametrize("bad,exc", [
    (5, IndexError), (-4, IndexError), ((0, 0, 0, 0), IndexError),
    ((Ellipsis, Ellipsis), IndexError), (1.5, TypeError), ("a", TypeError),
    (True, TypeError), ([0.5, 1], IndexError), ([0, 5], IndexError)], ids=repr)
def test_getitem_errors(bad, exc):
    x = Tensor.zeros(3, 3, 3)
    with pytest.raises(exc):
        x[bad]


def test_movement_errors():
    x = Tensor.zeros(2, 3)
    with pytest.raises(TinycError, match="tc_reshape"):
        x.reshape(4, 2)
    with pytest.raises(TypeError):
        x.reshape(2.0, 3)
    with pytest.raises(ValueError):
        x.permute(0)
    with pytest.raises(AxisError):
        x.permute(0, 0)
    with pytest.raises(AxisError):
        x.transpose(0, 2)
    with pytest.raises(TinycError):
        x.expand(3, 3)
    with pytest.raises(ValueError):
        x.pad(((1, 1),))
    with pytest.raises(TypeError):
        x.pad(((1, 1), "a"))
    with pytest.raises(TinycError):
        x.shrink(((0, 3), None))
    with pytest.raises(AxisError):
        x.unsqueeze(4)
    with pytest.raises(AxisError):
        x.flip(2)


@requires_autograd
@pytest.mark.parametrize("move", [m for m in MOVES if m[0] not in ("contiguous",)],
                         ids=[m[0] for m in MOVES if m[0] not in ("contiguous",)])
def test_movement_backward(move):
    name, f, _ = move
    a = rand_array(SHAPE, np.random.default_rng(1))
    t = Tensor(a, requires_grad=True)
    out = f(t)
    w = np.random.default_rng(2).uniform(0.5, 1.5, out.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    # the gradient of sum(f(x) * w) by finite structure: numpy's adjoint via torch
    tt = torch.tensor(a, requires_grad=True)
    th = {
        "reshape": lambda x: x.reshape(4, 6), "reshape_tuple": lambda x: x.reshape(6, -1),
        "reshape_scalar": lambda x: x[0, 0, 0].reshape(()), "view": lambda x: x.reshape(-1),
        "permute": lambda x: x.permute(2, 0, 1), "permute_tuple": lambda x: x.permute(1, 2, 0),
        "transpose": lambda x: x.transpose(0, 2), "transpose_default": lambda x: x.transpose(1, 0),
        "T": lambda x: x.permute(2, 1, 0), "expand": lambda x: x[:, :1].expand(2, 5, 4),
        "expand_new_dim": lambda x: x.expand(3, -1, -1, -1),
        "pad": lambda x: torch.nn.functional.pad(x, (2, 0, 0, 0, 0, 1)),
        "pad_value": lambda x: torch.nn.functional.pad(x, (0, 0, 0, 0, 1, 1), value=-3.0),
        "pad_torch_flat": lambda x: torch.nn.functional.pad(x, (1, 2)),
        "pad_negative": lambda x: torch.nn.functional.pad(x, (0, 0, -1, 1)),
        "shrink": lambda x: x[0:1, :, 1:3], "flip": lambda x: x.flip(1),
        "flip_tuple": lambda x: x.flip((0, 2)), "squeeze": lambda x: x[:, :1].squeeze(),
        "squeeze_dim": lambda x: x[:1, :1].squeeze(1), "squeeze_noop": lambda x: x.squeeze(0),
        "unsqueeze": lambda x: x.unsqueeze(1), "unsqueeze_neg": lambda x: x.unsqueeze(-1),
        "flatten": lambda x: x.flatten(), "flatten_1": lambda x: x.flatten(1),
        "flatten_0_1": lambda x: x.flatten(0, 1), "repeat": lambda x: x.repeat(1, 2, 1),
        "cat": lambda x: torch.cat([x, x * 2], 1), "stack": lambda x: torch.stack([x, x], 0),
    }[name]
    (th(tt) * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad, what="grad of " + name)


@requires_autograd
@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitem_backward(idx):
    a = rand_array(SHAPE, np.random.default_rng(3))
    t = Tensor(a, requires_grad=True)
    out = t[idx]
    w = np.random.default_rng(4).uniform(0.5, 1.5, out.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    g = np.zeros_like(a)  # basic indices select each element once: scatter w back
    g[idx] += w
    assert_close(t.grad, g, what="grad of x%r" % (idx,))


@requires_autograd
@pytest.mark.parametrize("layout", LAYOUTS)
def test_contiguous_backward(layout):
    # tinygrad's: forward the same values (no kernel); backward the same
    # gradient as without it (torch has none: the plain gradient is the
    # reference), realized in a buffer of its own
    a = rand_array(base_shape(SHAPE, layout), np.random.default_rng(3))
    t, tt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x, xt = make_view(t, layout, 3), make_view(tt, layout, 3)
    u = x.contiguous_backward()
    assert u.shape == x.shape and len(u.schedule()) == len(x.schedule())
    assert_close(u, xt.detach())
    w = rand_array(SHAPE, np.random.default_rng(4))
    (u.exp() * u.sin() * Tensor(w)).sum().backward()
    (xt.exp() * xt.sin() * torch.tensor(w)).sum().backward()
    assert_close(t.grad, tt.grad, rtol=1e-5, atol=1e-5)
    for edge in [np.float32(2.5), np.zeros((0, 3), np.float32), np.ones((1,), np.float32)]:
        e = Tensor(edge, requires_grad=True)
        (e.contiguous_backward() * 3).sum().backward()
        assert_close(e.grad, np.full(np.shape(edge), 3.0, np.float32))


@requires_autograd
def test_contiguous_backward_realizes_the_gradient():
    a = np.linspace(0.1, 0.6, 6, dtype=np.float32).reshape(2, 3)
    counts = []
    for cb in (False, True):
        x = Tensor(a, requires_grad=True)
        u = x.contiguous_backward() if cb else x
        (u.exp() * u.sin()).sum().backward()
        counts.append(len(x.grad.sum().schedule()))
    assert counts == [1, 2]  # the gradient's own kernel, then the sum that reads it
