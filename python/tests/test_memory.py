"""test_memory.py - creating and dropping 100k tensors keeps the process's
resident memory flat: every Tensor releases its tc_tensor reference."""
import gc
import os

import numpy as np
import pytest

from helpers import requires_autograd
from tinyc import Tensor

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def churn(n, base, arr):
    for i in range(n):
        kind = i % 4
        if kind == 0:
            t = Tensor(arr)  # a buffer uploaded from numpy
        elif kind == 1:
            t = base + 1.5  # a lazy op with a scalar constant
        elif kind == 2:
            t = base.reshape(8, 2)[::2].permute(1, 0)  # a chain of views
        else:
            t = (base * base).sum(axis=0)  # a lazy reduce
        del t


def test_100k_tensors_keep_rss_flat():
    arr = np.arange(16, dtype=np.float32).reshape(4, 4)
    base = Tensor(arr)
    churn(20_000, base, arr)  # warm up allocators and caches
    gc.collect()
    before = rss_bytes()
    churn(100_000, base, arr)
    gc.collect()
    after = rss_bytes()
    grown = after - before
    # a leaked handle or node per tensor would be >= 32 bytes * 100k = 3.2 MB
    assert grown < 2 * 1024 * 1024, "RSS grew by %.1f MiB over 100k tensors" % (grown / 2**20)


def test_realized_tensors_are_freed():
    arr = np.ones((256, 256), np.float32)  # 256 KiB per tensor
    base = Tensor(arr)
    for _ in range(50):
        (base + 1).realize()
    gc.collect()
    before = rss_bytes()
    for _ in range(2000):  # 500 MiB in total if buffers leaked
        t = (base + 1).realize()
        del t
    gc.collect()
    assert rss_bytes() - before < 16 * 1024 * 1024


@requires_autograd
def test_training_steps_keep_rss_flat():
    """forward, backward and an assign-based update, many times: the recorded
    history and the gradients are freed with their tensors"""
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    w = Tensor(rng.standard_normal((4,)).astype(np.float32), requires_grad=True)

    def step():
        loss = ((x * w).sum(axis=1).tanh() - 0.5).square().mean()
        loss.backward()
        w.assign(w.detach() - 0.01 * w.grad).realize()
        w.grad = None
        return loss

    for _ in range(200):
        step()
    gc.collect()
    before = rss_bytes()
    for _ in range(3000):
        step()
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 2 * 1024 * 1024, "RSS grew by %.1f MiB over 3000 steps" % (grown / 2**20)


def test_copy_and_deepcopy():
    """copy.copy shares the values (a handle of its own: dropping the original
    keeps it alive); copy.deepcopy owns a buffer later assigns do not reach"""
    import copy
    t = Tensor([1.0, -0.0, 3.0], requires_grad=True)
    c, d = copy.copy(t), copy.deepcopy(t)
    assert c.requires_grad and d.requires_grad
    t.assign(Tensor([5.0, 5.0, 5.0])).realize()
    np.testing.assert_array_equal(d.numpy(), [1.0, -0.0, 3.0])
    assert np.signbit(d.numpy()[1])
    del t
    gc.collect()
    np.testing.assert_array_equal(c.numpy(), [5.0, 5.0, 5.0])
    (d * 2).sum().backward()
    np.testing.assert_array_equal(d.grad.numpy(), [2.0, 2.0, 2.0])


def test_deepcopy_model():
    import copy
    from tinyc import nn
    m = nn.Linear(3, 2)
    m2 = copy.deepcopy(m)
    w = m.weight.numpy()
    np.testing.assert_array_equal(m2.weight.numpy(), w)
    m.weight.assign(m.weight * 0).realize()
    np.testing.assert_array_equal(m2.weight.numpy(), w)
    x = Tensor.ones(4, 3)
    np.testing.assert_allclose(m2(x).numpy(), np.ones((4, 3)) @ w.T + m2.bias.numpy(), rtol=1e-6)


@requires_autograd
def test_backward_frees_the_graph_like_torch():
    """backward() frees what the graph recorded (torch's default): a
    realized activation the loss's graph kept for its rule goes once the
    gradient is realized, though the loss lives on; a second backward
    raises as torch's does; retain_graph=True keeps the graph"""
    import torch

    from tinyc import GlobalCounters
    from tinyc._lib import TinycError

    v = np.linspace(-1, 1, 4096, dtype=np.float32)

    def kept(retain):
        before = GlobalCounters.mem_used
        x = Tensor(v, requires_grad=True)
        e = x.exp().realize()
        loss = e.sum().realize()
        del e
        loss.backward(retain_graph=retain)
        x.grad.realize()
        after = GlobalCounters.mem_used
        del x, loss
        return after - before

    assert kept(True) - kept(False) == 4096 * 4
    x, xt = Tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    loss, lt = (x * x).sum(), (xt * xt).sum()
    loss.backward(retain_graph=True)
    lt.backward(retain_graph=True)
    loss.backward()
    lt.backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError):
        lt.backward()
    with pytest.raises(TinycError, match="graph an earlier backward freed"):
        loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * v, rtol=1e-6)


@requires_autograd
def test_backward_runs_in_program_order():
    """a realize runs its kernels in the order the program made their values
    (of those ready): a layer's weight gradient right after its input
    gradient, so each layer's saved activations go as the backward passes
    it, as in an eager framework. Six residual conv + BatchNorm layers
    (activations of 1 MB): 12.4 MB at the peak; 27.2 MB when the weight
    gradients ran after the whole backward (the order of the kernels'
    creation, before)"""
    from tinyc import GlobalCounters, nn

    n_layers, b, c, hw = 6, 8, 32, 32
    convs = [nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(n_layers)]
    bns = [nn.BatchNorm2d(c) for _ in range(n_layers)]
    params = [m.weight for m in convs] + [m.weight for m in bns] + [m.bias for m in bns]
    for p in params:
        p.requires_grad = True
    Tensor.realize(*params, *[m.running_mean for m in bns], *[m.running_var for m in bns])
    training = Tensor.training
    Tensor.training = True
    try:
        h = Tensor(np.random.default_rng(0).random((b, c, hw, hw), dtype=np.float32)).realize()
        for conv, bn in zip(convs, bns):
            h = bn(conv(h)).relu() + h
        loss = (h * h).mean()
        loss.backward()
        GlobalCounters.reset()
        Tensor.realize(loss, *[p.grad for p in params])
        peak = GlobalCounters.mem_peak
    finally:
        Tensor.training = training
    activation = b * c * hw * hw * 4
    assert peak <= 16 * activation, peak / activation
