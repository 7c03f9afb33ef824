"""test_nn.py - tinyc.nn layers (PyTorch default init, forward and backward;
the N-d and transposed convolutions at rtol/atol 1e-3 for weight gradients
against torch.nn with the same weights), nn.state, and the optimizers (SGD,
Adam, AdamW) step by step against torch.optim; an Adam training run of a
small MLP follows torch's loss curve to 1e-4 over 20 steps."""
import numpy as np
import pytest
import torch

from helpers import assert_close, requires, skip_unless
from tinyc import Tensor, dtypes, nn
from tinyc import _lib
from tinyc.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

requires_training = requires("tc_set_requires_grad", "tc_backward", "tc_grad", "tc_assign")


def test_linear_init():
    Tensor.manual_seed(0)
    lin = nn.Linear(64, 32)
    assert lin.weight.shape == (32, 64) and lin.bias.shape == (32,)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    bound = 1 / np.sqrt(64)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.1 * bound  # U(-b, b) has std b/sqrt(3)
    assert nn.Linear(3, 2, bias=False).bias is None


def test_conv2d_init():
    c = nn.Conv2d(4, 8, 3)
    assert c.weight.shape == (8, 4, 3, 3) and c.bias.shape == (8,)
    assert np.abs(c.weight.numpy()).max() <= 1 / np.sqrt(36)
    assert nn.Conv2d(4, 8, (3, 5), groups=2).weight.shape == (8, 2, 3, 5)


def test_batchnorm_init():
    bn = nn.BatchNorm2d(5)
    assert bn.weight.tolist() == [1.0] * 5 and bn.bias.tolist() == [0.0] * 5
    assert bn.running_mean.tolist() == [0.0] * 5 and bn.running_var.tolist() == [1.0] * 5
    assert bn.running_mean.requires_grad is False


def test_state_dict_and_parameters():
    class Model:
        def __init__(self):
            self.layers = [nn.Conv2d(1, 2, 3), Tensor.relu, nn.BatchNorm2d(2),
                           lambda x: x.flatten(1), nn.Linear(8, 3)]
            self.scale = Tensor([1.0])
    m = Model()
    sd = get_state_dict(m)
    assert list(sd) == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias",
                        "layers.2.num_batches_tracked", "layers.2.running_mean",
                        "layers.2.running_var", "layers.4.weight", "layers.4.bias", "scale"]
    params = get_parameters(m)
    assert len(params) == len(sd) and all(isinstance(p, Tensor) for p in params)
    assert get_parameters([m.scale, m.scale]) == [m.scale]


@requires("tc_assign")
def test_load_state_dict():
    lin = nn.Linear(3, 2)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    load_state_dict(lin, {"weight": w, "bias": Tensor([1.0, 2.0])})
    assert lin.weight.numpy().tolist() == w.tolist() and lin.bias.tolist() == [1.0, 2.0]
    with pytest.raises(KeyError):
        load_state_dict(lin, {"weight": w})
    with pytest.raises(ValueError):
        load_state_dict(lin, {"weight": w.T, "bias": [0.0, 0.0]})


def test_safetensors_roundtrip(tmp_path):
    ts = {"w": Tensor.randn(3, 4), "i": Tensor([[1, 2]], dtype=dtypes.int64),
          "h": Tensor(np.array([1.5, -2], np.float16)), "b": Tensor([True, False]),
          "u": Tensor(np.array([7], np.uint8)), "s": Tensor(2.5)}
    fn = str(tmp_path / "m.safetensors")
    safe_save(ts, fn, metadata={"step": 3})
    back = safe_load(fn)
    assert set(back) == set(ts)
    for k, t in ts.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape
        np.testing.assert_array_equal(back[k].numpy(), t.numpy())
    with open(fn, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    assert n % 8 == 0


@requires("tc_safe_load", "tc_safe_save", "tc_assign")
def test_safetensors_match_the_c_library(tmp_path):
    import ctypes
    fn = str(tmp_path / "py.safetensors")
    src = {"a": Tensor.randn(2, 3), "b": Tensor([1, 2, 3])}
    safe_save(src, fn)
    dst = [Tensor.zeros(2, 3).contiguous().realize(), Tensor.zeros(3, dtype=dtypes.int32)
           .contiguous().realize()]
    names = (ctypes.c_char_p * 2)(b"a", b"b")
    _lib.check_status(_lib.lib.tc_safe_load(fn.encode(), names, _lib.handle_array(
        [t._h for t in dst]), 2))
    np.testing.assert_array_equal(dst[0].numpy(), src["a"].numpy())
    np.testing.assert_array_equal(dst[1].numpy(), src["b"].numpy())
    fn2 = str(tmp_path / "c.safetensors")
    _lib.check_status(_lib.lib.tc_safe_save(fn2.encode(), names, _lib.handle_array(
        [t._h for t in dst]), 2))
    back = safe_load(fn2)
    np.testing.assert_array_equal(back["a"].numpy(), src["a"].numpy())
    assert back["b"].tolist() == [1, 2, 3]


def copy_linear(lin, tl):
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(lin.weight.numpy()))
        tl.bias.copy_(torch.tensor(lin.bias.numpy()))


@requires("tc_matmul")
def test_linear_forward_backward():
    lin, tl = nn.Linear(5, 3), torch.nn.Linear(5, 3)
    copy_linear(lin, tl)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert_close(lin(Tensor(x)), tl(torch.tensor(x)), atol=1e-5)
    assert_close(lin(Tensor(x[0])), tl(torch.tensor(x[0])), atol=1e-5)  # 1-d input
    skip_unless("tc_backward", "tc_grad")
    lin.weight.requires_grad = lin.bias.requires_grad = True
    lin(Tensor(x)).square().sum().backward()
    tl(torch.tensor(x)).square().sum().backward()
    assert_close(lin.weight.grad, tl.weight.grad, atol=1e-4)
    assert_close(lin.bias.grad, tl.bias.grad, atol=1e-4)


@requires("tc_conv2d")
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(groups=2),
                                dict(bias=False)], ids=str)
def test_conv2d_layer(kw):
    if "groups" in kw:
        skip_unless("tc_conv2d_ex")
    conv, tconv = nn.Conv2d(4, 6, 3, **kw), torch.nn.Conv2d(4, 6, 3, **kw)
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.numpy()))
        if conv.bias is not None:
            tconv.bias.copy_(torch.tensor(conv.bias.numpy()))
    x = np.random.default_rng(1).standard_normal((2, 4, 7, 7)).astype(np.float32)
    assert_close(conv(Tensor(x)), tconv(torch.tensor(x)), atol=1e-4)


def test_conv_nd_layer_init():
    c1, c3 = nn.Conv1d(4, 8, 3, groups=2), nn.Conv3d(2, 4, (3, 2, 2))
    assert c1.weight.shape == (8, 2, 3) and c1.bias.shape == (8,)
    assert np.abs(c1.weight.numpy()).max() <= 1 / np.sqrt(6)
    assert c3.weight.shape == (4, 2, 3, 2, 2)
    t = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert t.weight.shape == (4, 3, 3, 3) and t.bias.shape == (6,)
    assert np.abs(t.weight.numpy()).max() <= 1 / np.sqrt(27)  # fan_in = out/groups * k*k
    assert nn.ConvTranspose1d(2, 3, 4).weight.shape == (2, 3, 4)
    assert nn.ConvTranspose3d(2, 3, 2, bias=False).bias is None


LAYERS = [  # tinyc layer, torch layer, constructor args, x shape
    ("Conv1d", "Conv1d", (4, 6, 3), dict(stride=2, padding=1), (2, 4, 9)),
    ("Conv3d", "Conv3d", (2, 4, 3), dict(padding=1, dilation=(1, 2, 1)), (1, 2, 5, 6, 5)),
    ("ConvTranspose1d", "ConvTranspose1d", (4, 2, 3), dict(stride=2, output_padding=1, groups=2),
     (2, 4, 5)),
    ("ConvTranspose2d", "ConvTranspose2d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 4, 5)),
    ("ConvTranspose3d", "ConvTranspose3d", (2, 2, 2), dict(stride=(1, 2, 2), bias=False),
     (1, 2, 3, 3, 2)),
]


@requires("tc_conv_nd", "tc_conv_transpose_nd")
@pytest.mark.parametrize("layer", LAYERS, ids=lambda c: c[0])
def test_conv_nd_layers(layer):
    name, th_name, args, kw, xs = layer
    conv, tconv = getattr(nn, name)(*args, **kw), getattr(torch.nn, th_name)(*args, **kw)
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.numpy()))
        if conv.bias is not None:
            tconv.bias.copy_(torch.tensor(conv.bias.numpy()))
    x = np.random.default_rng(3).standard_normal(xs).astype(np.float32)
    assert_close(conv(Tensor(x)), tconv(torch.tensor(x)), atol=1e-4)
    skip_unless("tc_backward", "tc_grad")
    conv.weight.requires_grad = True
    conv(Tensor(x)).square().sum().backward()
    tconv(torch.tensor(x)).square().sum().backward()
    assert_close(conv.weight.grad, tconv.weight.grad, rtol=1e-3, atol=1e-3)


@requires("tc_assign")
@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 3)], ids=str)
def test_batchnorm_train_and_eval(shape):
    bn = nn.BatchNorm2d(3)
    tbn = torch.nn.BatchNorm2d(3) if len(shape) == 4 else torch.nn.BatchNorm1d(3)
    rng = np.random.default_rng(2)
    for step in range(3):
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        with Tensor.train():
            out = bn(Tensor(x))
            out.realize(bn.running_mean, bn.running_var)
        tbn.train()
        want = tbn(torch.tensor(x))
        assert_close(out, want, atol=1e-4, what="train step %d" % step)
        assert_close(bn.running_mean, tbn.running_mean, atol=1e-5)
        assert_close(bn.running_var, tbn.running_var, atol=1e-5)
    assert bn.num_batches_tracked.item() == 3
    tbn.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    assert_close(bn(Tensor(x)), tbn(torch.tensor(x)), atol=1e-4, what="eval")


@requires_training
def test_batchnorm_backward():
    bn, tbn = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    xt, tt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    bn.weight.requires_grad = bn.bias.requires_grad = True
    w = np.random.default_rng(4).standard_normal((4, 3, 3, 3)).astype(np.float32)
    with Tensor.train():
        (bn(xt) * Tensor(w)).sum().backward()
    (tbn(tt) * torch.tensor(w)).sum().backward()
    assert_close(xt.grad, tt.grad, atol=1e-4)
    assert_close(bn.weight.grad, tbn.weight.grad, atol=1e-4)
    assert_close(bn.bias.grad, tbn.bias.grad, atol=1e-4)


# ---- optimizers: a model made only of elementwise ops and reduces ------------

C_OPTIMIZER = {"SGD": "tc_sgd_ex", "Adam": "tc_adam", "AdamW": "tc_adamw"}


@pytest.fixture(params=["c", "python"])
def impl(request, monkeypatch):
    """runs a test with the C optimizers (skipped while the library lacks them)
    and with the Python ones written with assign"""
    if request.param == "python":
        monkeypatch.setattr(nn.optim, "USE_C", False)
    return request.param


def need_c(impl, name):
    if impl == "c":
        skip_unless(C_OPTIMIZER[name])


def regression_data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal(16).astype(np.float32)
    w0 = rng.standard_normal((1, 4)).astype(np.float32)
    b0 = rng.standard_normal(1).astype(np.float32)
    return x, y, w0, b0


def run_optimizer(make_tc, make_th, steps=8):
    x, y, w0, b0 = regression_data()
    w, b = Tensor(w0, requires_grad=True), Tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt, topt = make_tc([w, b]), make_th([tw, tb])
    X, Y, TX, TY = Tensor(x), Tensor(y), torch.tensor(x), torch.tensor(y)
    for step in range(steps):
        opt.zero_grad()
        loss = ((X * w).sum(axis=1) + b - Y).square().mean()
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = ((TX * tw).sum(dim=1) + tb - TY).square().mean()
        tloss.backward()
        topt.step()
        assert_close(loss, tloss, rtol=1e-4, atol=1e-5, what="loss at step %d" % step)
        assert_close(w, tw, rtol=1e-4, atol=1e-5, what="w after step %d" % step)
        assert_close(b, tb, rtol=1e-4, atol=1e-5, what="b after step %d" % step)
        # .grad after the step holds the gradient the step used (torch's rule),
        # stored by the step, not a graph recomputed from the updated weights
        for p, tp, name in ((w, tw, "w"), (b, tb, "b")):
            assert p.grad.is_realized(), "%s.grad is lazy after step %d" % (name, step)
            assert_close(p.grad, tp.grad, rtol=1e-4, atol=1e-5,
                         what="%s.grad after step %d" % (name, step))


@requires_training
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True),
                                dict(weight_decay=0.1), dict(momentum=0.5, weight_decay=0.01)],
                         ids=str)
def test_sgd(kw, impl):
    need_c(impl, "SGD")
    run_optimizer(lambda p: nn.optim.SGD(p, lr=0.05, **kw),
                  lambda p: torch.optim.SGD(p, lr=0.05, **kw))


@requires_training
def test_adam(impl):
    need_c(impl, "Adam")
    run_optimizer(lambda p: nn.optim.Adam(p, lr=0.01),
                  lambda p: torch.optim.Adam(p, lr=0.01))


@requires_training
def test_adamw(impl):
    need_c(impl, "AdamW")
    run_optimizer(lambda p: nn.optim.AdamW(p, lr=0.01, weight_decay=0.1),
                  lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1))


@requires_training
def test_optimizer_lr_can_change(impl):
    need_c(impl, "Adam")
    if impl == "c":
        skip_unless("tc_optimizer_set_lr")
    run_optimizer(lambda p: _with_lr(nn.optim.Adam(p, lr=0.5), 0.01),
                  lambda p: torch.optim.Adam(p, lr=0.01), steps=3)


def _with_lr(opt, lr):
    opt.lr = lr
    assert opt.lr == lr
    return opt


@requires_training
def test_optimizer_params_rules():
    a = Tensor([1.0])
    frozen = Tensor([2.0], requires_grad=False)
    opt = nn.optim.SGD([a, frozen, a], lr=0.1)
    assert opt.params == [a] and opt.buffers == [frozen] and a.requires_grad is True
    with pytest.raises(ValueError):
        nn.optim.SGD([frozen], lr=0.1)
    with pytest.raises(TypeError):
        nn.optim.Adam([np.zeros(3)])


@requires_training
def test_requires_grad_states():
    t = Tensor.zeros(3, requires_grad=True)
    assert t.requires_grad is True and (t * 2).requires_grad is True
    assert Tensor([1.0]).requires_grad is None
    assert t.detach().requires_grad is False
    y = t * 3
    z = y.detach() * t
    z.sum().backward()
    assert t.grad.tolist() == [0.0, 0.0, 0.0]  # d(detached(3t) * t)/dt = 3t = 0
    with pytest.raises(TypeError):
        Tensor([1, 2], requires_grad=True)  # only float leaves
    import tinyc
    with tinyc.no_grad():
        assert (t * 2).requires_grad is None
    assert tinyc.is_grad_enabled()


@requires_training
def test_zero_grad_and_accumulation():
    a = Tensor([1.0, 2.0], requires_grad=True)
    (a * 3).sum().backward()
    (a * 3).sum().backward()
    assert a.grad.tolist() == [6.0, 6.0]  # two backward calls accumulate, as in torch
    nn.optim.SGD([a], lr=0.1).zero_grad()
    assert a.grad is None or a.grad.tolist() == [0.0, 0.0]


# ---- the MLP run ------------------------------------------------------------

class MLP:
    def __init__(self):
        self.l1, self.l2, self.l3 = nn.Linear(10, 32), nn.Linear(32, 16), nn.Linear(16, 4)

    def __call__(self, x):
        return self.l3(self.l2(self.l1(x).relu()).tanh())


@requires_training
@requires("tc_matmul", "tc_cross_entropy")
def test_mlp_adam_matches_torch(impl):
    need_c(impl, "Adam")
    Tensor.manual_seed(1)
    model = MLP()
    tmodel = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(),
                                 torch.nn.Linear(32, 16), torch.nn.Tanh(),
                                 torch.nn.Linear(16, 4))
    for lin, tl in zip((model.l1, model.l2, model.l3), (tmodel[0], tmodel[2], tmodel[4])):
        copy_linear(lin, tl)
    opt = nn.optim.Adam(get_parameters(model), lr=1e-2)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-2)
    rng = np.random.default_rng(6)
    X = rng.standard_normal((64, 10)).astype(np.float32)
    Y = rng.integers(0, 4, 64).astype(np.int32)
    losses, tlosses = [], []
    for step in range(20):
        idx = rng.integers(0, 64, 32)
        with Tensor.train():
            opt.zero_grad()
            loss = model(Tensor(X[idx])).sparse_categorical_crossentropy(Tensor(Y[idx]))
            loss.backward()
            opt.step()
        losses.append(loss.item())
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(tmodel(torch.tensor(X[idx])),
                                                  torch.tensor(Y[idx].astype(np.int64)))
        tloss.backward()
        topt.step()
        tlosses.append(tloss.item())
        for lin, tl in zip((model.l1, model.l2, model.l3), (tmodel[0], tmodel[2], tmodel[4])):
            assert lin.weight.grad.is_realized()
            assert_close(lin.weight.grad, tl.weight.grad, rtol=1e-3, atol=1e-5,
                         what="weight gradient after step %d" % step)
    np.testing.assert_allclose(losses, tlosses, rtol=0, atol=1e-4)
    assert losses[-1] < losses[0]
    assert all(p.dtype == dtypes.float32 for p in get_parameters(model))
