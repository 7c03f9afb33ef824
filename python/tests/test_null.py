"""test_null.py - the NULL device from Python: Tensor(..., device="NULL")
and TC_DEVICE=NULL schedule and count kernels like the CPU, compile nothing,
and read back zeros."""
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
