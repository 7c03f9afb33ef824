"""test_null.py - the NULL device from Python: Tensor(..., device="NULL")
and TC_DEVICE=NULL schedule and count kernels like the CPU, compile nothing,
and read back zeros; to() and to_() (tinygrad's in-place move) between NULL
and the CPU, with gradients and history."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinyc
from tinyc import GlobalCounters, Tensor

from helpers import requires_autograd


def test_tensor_on_null_reads_zeros():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="NULL")
    assert x.device == "NULL"
    y = ((x @ x.T).relu() + 1).sum(axis=1)
    n = len(y.schedule())
    GlobalCounters.reset()
    built = GlobalCounters.compile_count
    y.realize()
    assert GlobalCounters.kernel_count == n
    assert GlobalCounters.compile_count == built  # nothing was compiled
    np.testing.assert_array_equal(y.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(x.to("CPU").numpy(), np.zeros((3, 4), np.float32))


def test_null_and_cpu_do_not_mix():
    a, b = Tensor([1.0, 2.0], device="NULL"), Tensor([1.0, 2.0], device="CPU")
    with pytest.raises(tinyc.TinycError, match="a is on NULL but b is on CPU"):
        (a + b).realize()
    with pytest.raises(tinyc.TinycError, match="NULL:3"):
        Tensor([1.0], device="NULL:3")


@pytest.mark.parametrize("make", [
    lambda: Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).T,
    lambda: Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))[1],
    lambda: Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))[:, ::2],
    lambda: Tensor(np.arange(6, dtype=np.float32)).reshape(3, 2),
    lambda: Tensor(2.0), lambda: Tensor.full((2, 2), 1.5), lambda: Tensor.ones(3) * 2,
], ids=["transposed", "row", "strided", "reshaped", "0-d", "full", "lazy"])
def test_to_copies_views_and_consts(make):
    x = make()
    y = x.to("NULL")
    assert y.device == "NULL" and y.shape == x.shape
    y.realize()
    x.to_("NULL")
    assert x.device == "NULL"
    np.testing.assert_array_equal(x.numpy(), np.zeros(x.shape, np.float32))


def test_to_in_place():
    # tinygrad's to_: the tensor itself moves and returns None; same device: no-op
    x = Tensor([1.0, 2.0, 3.0])
    assert x.to_("CPU") is None
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    x.to_("NULL")
    assert x.device == "NULL" and x.shape == (3,)
    x.to_(None)  # the default device
    assert x.device == "CPU"
    with pytest.raises(tinyc.TinycError, match="tc_move_to_device: unknown device 'NOPE'"):
        x.to_("NOPE")
    assert x.device == "CPU"
    with pytest.raises(TypeError):
        x.to_(3)


@requires_autograd
def test_to_in_place_moves_the_gradient():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.to_("CPU")
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    x.to_("NULL")
    assert x.device == "NULL" and x.grad.device == "NULL" and x.requires_grad
    (x * 2).sum().backward()  # a leaf still: the new gradient lands on NULL
    assert x.grad.device == "NULL"
    x.grad.realize()
    y = Tensor([1.0, 2.0], requires_grad=True)
    loss = (y * y).sum()
    y.to_("NULL")  # used on the CPU, moved, then differentiated
    loss.backward()
    assert y.grad.device == "NULL"
    y.grad.realize()


@requires_autograd
def test_to_in_place_keeps_history():
    # a result moved in place still differentiates into its inputs (their device)
    a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = a * 3
    y.to_("NULL")
    assert y.device == "NULL" and y.requires_grad
    y.to_("CPU")
    (y * 2).sum().backward()
    assert a.grad.device == "CPU"
    b = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = b * 3
    z.to_("CPU")
    (z * 2).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [6.0, 6.0, 6.0])


# an MLP trained with Adam, eagerly and through TinyJit, with TC_DEVICE=NULL
# (so nn.Linear's parameters are on NULL too); prints the kernel counts
_SCRIPT = textwrap.dedent("""
    from tinyc import Tensor, nn, GlobalCounters, TinyJit
    layers = [nn.Linear(16, 16) for _ in range(3)]
    params = nn.state.get_parameters(layers)
    opt = nn.optim.Adam(params, lr=1e-3)
    def step(x):
        opt.zero_grad()
        h = x
        for l in layers:
            h = l(h).gelu()
        loss = h.square().mean()
        loss.backward()
        opt.step()
        return loss
    assert layers[0].weight.device == "NULL"
    counts = []
    for i in range(2):
        GlobalCounters.reset()
        loss = step(Tensor.rand(8, 16))
        counts.append(GlobalCounters.kernel_count)
        assert loss.item() == 0.0
    jit = TinyJit(step)
    for i in range(4):
        GlobalCounters.reset()
        loss = jit(Tensor.rand(8, 16).realize())
        counts.append(GlobalCounters.kernel_count)
    print("kernels", *counts)
    print("built", GlobalCounters.compile_count)
""")


@requires_autograd
def test_training_with_tc_device_null():
    pyroot = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TC_DEVICE="NULL",
               PYTHONPATH=os.pathsep.join([pyroot, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    counts = [int(v) for v in lines["kernels"].split()]
    assert counts[0] > 6  # forward, backward and the update of 3 layers
    assert counts[1] == counts[0]  # the second eager step runs the same kernels
    assert counts[-1] == counts[-2] > 0  # jit replays launch the captured kernels
    assert lines["built"] == "0"
