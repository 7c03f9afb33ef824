"""test_nn_utils.py - tinyc.nn.utils.clip_grad_norm_ against torch's (the
norm and the clipped gradients for norm_type 2, inf and 1.5, with an
optimizer step after it), and the transformer's layers nn.LayerNorm (with and
without affine and bias) and nn.Embedding against torch, forward and
backward."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tinyc
from tinyc import Tensor, TinycError
from helpers import assert_close, requires

pytestmark = requires("tc_clip_grad_norm", "tc_backward", "tc_index")


def rnd(shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("norm_type", [2.0, float("inf"), 1.5])
@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_clip_grad_norm(norm_type, max_norm):
    arrays = [rnd((3, 4), 23), rnd((5,), 24), rnd((2, 2, 2), 25)]
    ps = [Tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    sum((p * p).exp().sum() for p in ps).backward()
    sum((t * t).exp().sum() for t in ts).backward()
    got = tinyc.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
    want = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type)
    assert_close(got, want, rtol=1e-5, what="total norm")
    for p, t in zip(ps, ts):
        assert_close(p.grad, t.grad, rtol=1e-5, atol=1e-7, what="clipped gradient")


def test_clip_grad_norm_with_optimizer():
    """the clipped gradients are what the optimizer steps with"""
    a = rnd((4, 3), 26)
    p, t = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    opt, topt = tinyc.nn.optim.SGD([p], lr=0.5), torch.optim.SGD([t], lr=0.5)
    (p * p * p).sum().backward()
    (t * t * t).sum().backward()
    tinyc.nn.utils.clip_grad_norm_(p, 0.1)
    torch.nn.utils.clip_grad_norm_([t], 0.1)
    opt.step()
    topt.step()
    assert_close(p, t.detach(), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"parameters\[1\] is a ndarray"):
        tinyc.nn.utils.clip_grad_norm_([p, a], 1.0)
    with pytest.raises(TinycError, match="max_norm -1 must be finite and >= 0"):
        tinyc.nn.utils.clip_grad_norm_([p], -1)


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layernorm_layer(affine, bias):
    ln = tinyc.nn.LayerNorm(6, eps=1e-5, elementwise_affine=affine, bias=bias)
    tw = torch.ones(6, requires_grad=True) if affine else None
    tb = torch.zeros(6) if affine and bias else None  # this torch's LayerNorm has no bias=
    for p in (ln.weight, ln.bias):
        if p is not None:
            p.requires_grad = True
    x = rnd((2, 3, 6), 27)
    xt, tt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = ln(xt), F.layer_norm(tt, (6,), tw, tb, 1e-5)
    assert_close(y, ty, atol=1e-5)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert_close(xt.grad, tt.grad, rtol=1e-4, atol=1e-4)
    if affine:
        assert_close(ln.weight.grad, tw.grad, rtol=1e-4, atol=1e-4)
    assert (ln.bias is None) == (tb is None)


def test_embedding_layer():
    emb = tinyc.nn.Embedding(10, 4)
    emb.weight.requires_grad = True
    temb = torch.nn.Embedding(10, 4)
    with torch.no_grad():
        temb.weight.copy_(torch.tensor(emb.weight.numpy()))
    ids = np.array([[1, 9, 1], [0, 3, 3]], dtype=np.int64)
    y, ty = emb(Tensor(ids)), temb(torch.tensor(ids))
    assert_close(y, ty)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert_close(emb.weight.grad, temb.weight.grad)
