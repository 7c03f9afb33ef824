"""test_eager.py - an eager (no TinyJit) training loop: every step builds its
graph again with the same structure over new batches, so from the second
step on libtinyc runs the plan it cached for the first (tests/engine/
test_scache.c pins that with the engine's counters). Here the loop must
follow PyTorch step by step: the loss of every step and the weights at the
end, with the C and the Python Adam, and with a batch shape that changes
half-way (a new plan, then reused)."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires
from tinyc import Tensor, nn
from tinyc.nn.state import get_parameters

pytestmark = requires("tc_backward", "tc_assign", "tc_matmul")

WIDTH, DEPTH = 16, 4


class MLP:
    def __init__(self):
        self.layers = [nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x).gelu()
        return x


def torch_twin(model):
    layers = []
    for layer in model.layers:
        tl = torch.nn.Linear(WIDTH, WIDTH)
        with torch.no_grad():
            tl.weight.copy_(torch.tensor(layer.weight.numpy()))
            tl.bias.copy_(torch.tensor(layer.bias.numpy()))
        layers += [tl, torch.nn.GELU(approximate="tanh")]
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("use_c", [True, False], ids=["c-adam", "python-adam"])
def test_eager_training_matches_torch(use_c, monkeypatch):
    monkeypatch.setattr(nn.optim, "USE_C", use_c)
    Tensor.manual_seed(5)
    model = MLP()
    twin = torch_twin(model)
    opt = nn.optim.Adam(get_parameters(model), lr=1e-2)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-2)
    rng = np.random.default_rng(6)
    for step in range(8):
        batch = 8 if step < 5 else 12  # a new shape: a new plan, then reused
        x = rng.standard_normal((batch, WIDTH)).astype(np.float32)
        with Tensor.train():
            opt.zero_grad()
            loss = model(Tensor(x)).square().mean()
            loss.backward()
            opt.step()
        topt.zero_grad()
        tloss = twin(torch.tensor(x)).square().mean()
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-4, atol=1e-6,
                                   err_msg="loss of step %d" % step)
    for layer, tl in zip(model.layers, twin[::2]):
        assert_close(layer.weight, tl.weight, rtol=1e-3, atol=1e-5, what="weight")
        assert_close(layer.bias, tl.bias, rtol=1e-3, atol=1e-5, what="bias")
