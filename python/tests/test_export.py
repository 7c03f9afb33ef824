"""test_export.py - tinyc.export_c from Python: a small MLP's forward and its
Adam step are exported, built into shared objects with the system compiler
(the CPU runtime's flags), and called through ctypes with new data. The
forward matches the library bit for bit and PyTorch within float tolerance;
three exported Adam steps match three library steps bit for bit (the state
lives in the exported code); bad arguments raise."""
import ctypes
import os
import re
import subprocess

import numpy as np
import pytest
import torch

from helpers import assert_close, requires
import tinyc
from tinyc import Tensor, nn

pytestmark = requires("tc_export_c", "tc_optimizer_schedule_step")

# the CPU runtime's compiler flags (src/runtime/cpu.c), so the kernels are the library's
LIB_FLAGS = ["-O2", "-march=native", "-fno-predictive-commoning", "-fno-math-errno", "-fwrapv",
             "-fexcess-precision=standard", "-std=gnu11"]


class Exported:
    """<dir>/<name>.c built into a shared object: run(inputs, outputs) over numpy arrays"""

    def __init__(self, d, name):
        so = os.path.join(d, name + ".so")
        subprocess.run(["cc"] + LIB_FLAGS + ["-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                                             "-o", so, os.path.join(d, name + ".c"), "-lm"],
                       check=True, capture_output=True)
        header = open(os.path.join(d, name + ".h")).read()
        self.arena_bytes = int(re.search(r"#define %s_ARENA_BYTES (\d+)" % name.upper(),
                                         header).group(1))
        self.lib = ctypes.CDLL(so)
        self.fn = getattr(self.lib, name + "_run")
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.arena = np.zeros(self.arena_bytes + 64, np.uint8)
        self.reset = getattr(self.lib, name + "_reset")

    def run(self, inputs, outputs):
        ins = (ctypes.c_void_p * max(len(inputs), 1))(*[a.ctypes.data for a in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[a.ctypes.data for a in outputs])
        at = self.arena.ctypes.data
        at += (-at) % 64  # aligned as the header asks
        return self.fn(at, ins, outs)


class MLP:
    def __init__(self):
        Tensor.manual_seed(3)
        self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 3)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


def test_forward_matches_library_and_torch(tmp_path):
    m = MLP()
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((4, 8)).astype(np.float32)
    x = Tensor(x0)
    y = m(x)
    tinyc.export_c(str(tmp_path), "fwd", [y], [x])
    ex = Exported(str(tmp_path), "fwd")
    assert ex.arena_bytes >= 0
    for step in range(3):  # new data each call: the input is read at run time
        xs = rng.standard_normal((4, 8)).astype(np.float32)
        got = np.zeros((4, 3), np.float32)
        assert ex.run([xs], [got]) == 0
        want = m(Tensor(xs)).numpy()
        assert got.tobytes() == want.tobytes(), "step %d: not bit-identical" % step
        tl1, tl2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)
        with torch.no_grad():
            tl1.weight[:] = torch.tensor(m.l1.weight.numpy())
            tl1.bias[:] = torch.tensor(m.l1.bias.numpy())
            tl2.weight[:] = torch.tensor(m.l2.weight.numpy())
            tl2.bias[:] = torch.tensor(m.l2.bias.numpy())
            ref = tl2(tl1(torch.tensor(xs)).relu())
        assert_close(got, ref, rtol=1e-5, atol=1e-6, what="step %d vs torch" % step)


def test_adam_steps_match_library(tmp_path):
    m = MLP()
    params = [m.l1.weight, m.l1.bias, m.l2.weight, m.l2.bias]
    opt = nn.optim.Adam(params, lr=0.01)
    rng = np.random.default_rng(2)
    batches = [(rng.standard_normal((4, 8)).astype(np.float32),
                rng.integers(0, 3, 4).astype(np.int32)) for _ in range(3)]
    with Tensor.train():
        x, y = Tensor(batches[0][0]), Tensor(batches[0][1])
        opt.zero_grad()
        loss = m(x).sparse_categorical_crossentropy(y)
        loss.backward()
        ts = opt.schedule_step()
        tinyc.export_c(str(tmp_path), "step", [loss] + ts, [x, y])
        want = []
        Tensor.realize(loss, *ts)  # the library's first step: the exported graph
        want.append([loss.numpy()] + [p.numpy() for p in params])
        for bx, by in batches[1:]:
            opt.zero_grad()
            loss = m(Tensor(bx)).sparse_categorical_crossentropy(Tensor(by))
            loss.backward()
            opt.step()
            want.append([loss.numpy()] + [p.numpy() for p in params])
    ex = Exported(str(tmp_path), "step")
    for step, (bx, by) in enumerate(batches):
        outs = [np.zeros((), np.float32)] + [np.zeros(t.shape, np.float32) for t in ts]
        assert ex.run([bx, by], outs) == 0
        assert outs[0].tobytes() == want[step][0].tobytes(), "step %d: loss" % step
        for i, p in enumerate(params):
            k = next(j for j, t in enumerate(ts) if t._h == p._h)
            assert outs[1 + k].tobytes() == want[step][1 + i].tobytes(), \
                "step %d: parameter %d" % (step, i)
    ex.reset()  # back to the exported state: the first step again
    outs = [np.zeros((), np.float32)] + [np.zeros(t.shape, np.float32) for t in ts]
    assert ex.run(list(batches[0]), outs) == 0
    assert outs[0].tobytes() == want[0][0].tobytes()


def test_bad_arguments(tmp_path):
    x = Tensor(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError):
        tinyc.export_c(str(tmp_path), "m", [np.ones(2)], [x])
    with pytest.raises(ValueError):
        tinyc.export_c(str(tmp_path), "m", [], [x])
    with pytest.raises(tinyc.TinycError, match="not a C identifier"):
        tinyc.export_c(str(tmp_path), "no-name", [x * 2], [x])
    with pytest.raises(tinyc.TinycError, match="is not realized"):
        tinyc.export_c(str(tmp_path), "m", [x * 2], [x + 1])
    assert not os.listdir(str(tmp_path))
