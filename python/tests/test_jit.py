"""test_jit.py - TinyJit over tc_jit: replays give the same results as plain
calls (with new inputs each time), run exactly the captured kernels,
capture again on a new shape, pass exceptions through, and a jitted Adam
training step follows the un-jitted one."""
import numpy as np
import pytest

from helpers import assert_close, requires
from tinyc import GlobalCounters, Tensor, TinyJit, nn
from tinyc.nn.state import get_parameters

pytestmark = requires("tc_jit_new", "tc_jit_run")


def test_replay_matches_plain_calls():
    calls = []

    @TinyJit
    def f(a, b):
        calls.append(1)
        return (a * b + 1).sum(axis=1)

    rng = np.random.default_rng(0)
    for i in range(6):
        a = rng.standard_normal((5, 3)).astype(np.float32)
        b = rng.standard_normal(3).astype(np.float32)
        GlobalCounters.reset()
        out = f(Tensor(a), Tensor(b))
        assert_close(out, (a * b + 1).sum(1), what="call %d" % i)
        assert GlobalCounters.kernel_count == 1
    assert len(calls) == 2  # warm-up and capture; then replays
    assert f.kernel_count == 1 and f.cnt == 6


def test_outputs_and_arguments():
    @TinyJit
    def g(x, scale=None, *, y):
        return x + y, (x * y).sum()

    for i in range(4):
        x, y = Tensor([1.0 * i, 2.0]), Tensor([3.0, 4.0])
        s, p = g(x, y=y)
        assert s.tolist() == [3.0 + i, 6.0] and p.item() == 3.0 * i + 8.0

    @TinyJit
    def h(x):
        return None
    assert h(Tensor([1.0])) is None and h(Tensor([2.0])) is None


def test_new_shape_captures_again():
    @TinyJit
    def f(a):
        return (a * 2).sum()

    for n in (3, 3, 3, 5, 5, 5, 3):
        a = np.arange(n, dtype=np.float32)
        assert f(Tensor(a)).item() == 2 * a.sum()


def test_views_as_inputs():
    @TinyJit
    def f(a):
        return a + 1

    for i in range(4):
        base = np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)
        assert_close(f(Tensor(base).T[::2]), base.T[::2] + 1)


def test_exceptions_pass_through():
    @TinyJit
    def f(a):
        if a.shape[0] == 2:
            raise KeyError("boom")
        return a * 3

    with pytest.raises(KeyError):
        f(Tensor([1.0, 2.0]))
    for i in range(3):
        assert f(Tensor([1.0, 2.0, float(i)])).tolist() == [3.0, 6.0, 3.0 * i]
    with pytest.raises(TypeError):
        TinyJit(lambda a: 3)(Tensor([1.0]))


class MLP:
    def __init__(self):
        self.l1, self.l2 = nn.Linear(6, 16), nn.Linear(16, 3)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


@requires("tc_backward", "tc_assign", "tc_matmul", "tc_cross_entropy")
@pytest.mark.parametrize("use_c", [True, False], ids=["c-adam", "python-adam"])
def test_jitted_training_step_matches(use_c, monkeypatch):
    monkeypatch.setattr(nn.optim, "USE_C", use_c)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 6)).astype(np.float32)
    Y = rng.integers(0, 3, 40).astype(np.int32)
    batches = [rng.integers(0, 40, 8) for _ in range(6)]

    def run(jit):
        Tensor.manual_seed(7)
        model = MLP()
        opt = nn.optim.Adam(get_parameters(model), lr=0.01)

        def step(x, y):
            with Tensor.train():
                opt.zero_grad()
                loss = model(x).sparse_categorical_crossentropy(y)
                loss.backward()
                opt.step()
            return loss
        f = TinyJit(step) if jit else step
        return [f(Tensor(X[i]), Tensor(Y[i])).item() for i in batches], model.l1.weight.numpy()

    plain, w_plain = run(False)
    jitted, w_jit = run(True)
    np.testing.assert_allclose(jitted, plain, rtol=1e-5, atol=1e-6)
    assert_close(w_jit, w_plain, rtol=1e-5, atol=1e-6)
