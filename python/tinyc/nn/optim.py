"""tinyc.nn.optim - optimizers with tinygrad's names and PyTorch's math:

    SGD(params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False)
    Adam(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8)
    AdamW(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)

opt.zero_grad() clears the gradients, opt.step() updates the parameters in
place and realizes them (with the optimizer state and BatchNorm's running
statistics, the "buffers") in one tc_realize.

Where the C library has the optimizer (tc_sgd_ex / tc_sgd, tc_adam,
tc_adamw) and the options fit it, the C one runs (set USE_C = False to use
the Python ones); otherwise the update is written here with Tensor.assign
(needs tc_assign). Step-dependent scalars (learning rate, b1^t, b2^t) live in
one-element tensors, so every step reuses the same compiled kernels.
"""

import ctypes

import numpy as np

from .. import _lib
from ..tensor import Tensor, take_pending_losses

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "LAMB"]

USE_C = True  # use the C optimizers when the library has them


def _dedup(ts):
    seen, out = set(), []
    for t in ts:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


class Optimizer:
    """Base: params whose requires_grad is None become trainable (tinygrad's
    rule); those with requires_grad False are buffers, realized with each step."""

    def __init__(self, params, lr):
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("tinyc: optimizer params must be Tensors, got %r" % (p,))
        for p in params:
            if p.requires_grad is None:
                p.requires_grad = True
        self.params = _dedup([p for p in params if p.requires_grad])
        self.buffers = _dedup([p for p in params if not p.requires_grad])
        if not self.params:
            raise ValueError("tinyc: optimizer got no trainable parameters")
        self._lr_value = float(lr)
        self._lr = None
        self._c = None  # tc_optimizer * when the C optimizer runs

    @property
    def lr(self):
        """the learning rate (a float; setting it takes effect at the next step)"""
        return self._lr_value

    @lr.setter
    def lr(self, value):
        if self._c is not None:
            fn = _lib.need("tc_optimizer_set_lr", "setting the C optimizer's lr")
            _lib.check_status(fn(self._c, float(value)))
        elif self._lr is not None:
            self._lr.assign(Tensor([float(value)])).realize()
        self._lr_value = float(value)

    def _lr_tensor(self):
        if self._lr is None:
            self._lr = Tensor([self._lr_value], requires_grad=False)
        return self._lr

    def zero_grad(self):
        if self._c is not None:
            _lib.check_status(_lib.lib.tc_optimizer_zero_grad(self._c))
            return
        for p in self.params:
            p.grad = None

    def step(self):
        """updates the parameters; losses that backward() ran on are realized
        first (with the update in one tc_realize when the step is written here),
        so they keep the value from before the step"""
        losses = take_pending_losses()
        if self._c is not None:
            also = losses + self.buffers
            if _lib.has("tc_optimizer_step_with"):
                arr = _lib.handle_array([t._h for t in also])
                _lib.check_status(_lib.lib.tc_optimizer_step_with(self._c, arr, len(also)))
                return
            if also:
                Tensor.realize(*also)
            _lib.check_status(_lib.lib.tc_optimizer_step(self._c))
            return
        ts = self.schedule_step() + losses + self._lazy_grads()
        Tensor.realize(*ts)

    def _lazy_grads(self):
        """the gradients not realized yet: realized with the update (the
        kernel computing each also stores it), so .grad after the step holds
        the values the step used and no graph keeps the step's activations"""
        return [g for g in self._grads() if g is not None and not g.is_realized()]

    def schedule_step(self):
        """assigns the update lazily; returns the tensors to realize (the
        parameters and the optimizer's state, then the buffers): realizing
        them is the step, tinyc.export_c of them exports it. The gradients
        stay lazy, as tinygrad's (no buffer for them: less memory than
        step(), which stores each beside its update so .grad keeps it)"""
        if self._c is not None:
            fn = _lib.need("tc_optimizer_schedule_step", "%s.schedule_step" % type(self).__name__)
            cap = 3 * len(self.params) + 2
            arr = (ctypes.c_void_p * cap)()
            n = fn(self._c, arr, cap)
            if n < 0:
                raise _lib.error()
            return [Tensor._wrap(_lib.lib.tc_retain(arr[i])) for i in range(n)] + self.buffers
        _lib.need("tc_assign", "%s.step" % type(self).__name__)
        return self._update() + self.buffers

    def _grads(self):
        out = []
        for p in self.params:
            g = p.grad
            out.append(g)
        return out

    def _make_c(self, ctor, *args):
        arr = _lib.handle_array([p._h for p in self.params])
        self._c_params = arr
        self._c = _lib.check(ctor(arr, len(self.params), *args))

    def __del__(self, _free=getattr(_lib.lib, "tc_optimizer_free", None)):
        c = getattr(self, "_c", None)
        if c and _free is not None:
            self._c = None
            try:
                _free(c)
            except Exception:
                pass

    def _state(self):
        """a zero tensor per parameter (realized, not trainable)"""
        return [Tensor(np.zeros(p.shape, p.dtype.np), device=p.device, requires_grad=False)
                for p in self.params]


class SGD(Optimizer):
    """p -= lr * g with optional momentum (b = momentum*b + g), nesterov
    (g + momentum*b) and weight decay (g += wd*p), as torch.optim.SGD."""

    def __init__(self, params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False,
                 classic=False):
        super().__init__(params, lr)
        self.momentum, self.wd, self.nesterov = float(momentum), float(weight_decay), nesterov
        if nesterov and momentum <= 0:
            raise ValueError("tinyc: SGD: nesterov needs a momentum")
        if USE_C and _lib.has("tc_sgd_ex"):
            self._make_c(_lib.lib.tc_sgd_ex, self._lr_value, self.momentum, 0.0, self.wd,
                         bool(nesterov))
        elif USE_C and _lib.has("tc_sgd") and self.wd == 0 and not nesterov:
            self._make_c(_lib.lib.tc_sgd, self._lr_value, self.momentum)
        else:
            self.b = self._state() if self.momentum else []

    def _update(self):
        lr = self._lr_tensor()
        out = []
        for i, (p, g) in enumerate(zip(self.params, self._grads())):
            if g is None:
                continue
            if self.wd:
                g = g + self.wd * p
            if self.momentum:
                b = self.b[i]
                b.assign(self.momentum * b + g)
                g = g + self.momentum * b if self.nesterov else b
                out.append(b)
            p.assign(p - lr * g)
            out.append(p)
        return [lr] + out


class LAMB(Optimizer):
    """Adam/AdamW (adam=True) and LAMB as in tinygrad; the math of
    torch.optim.Adam/AdamW when adam=True:
        m = b1*m + (1-b1)*g        v = b2*v + (1-b2)*g^2
        up = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*p      p -= lr*up"""

    def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0,
                 adam=False):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
        if USE_C and adam and weight_decay == 0 and _lib.has("tc_adam"):
            self._make_c(_lib.lib.tc_adam, self._lr_value, b1, b2, eps)
            return
        if USE_C and adam and _lib.has("tc_adamw"):  # torch's AdamW: the same update
            self._make_c(_lib.lib.tc_adamw, self._lr_value, b1, b2, eps, weight_decay)
            return
        self.b1_t = Tensor([1.0], requires_grad=False)
        self.b2_t = Tensor([1.0], requires_grad=False)
        self.m, self.v = self._state(), self._state()

    def _update(self):
        lr = self._lr_tensor()
        self.b1_t.assign(self.b1_t * self.b1)
        self.b2_t.assign(self.b2_t * self.b2)
        out = [lr, self.b1_t, self.b2_t]
        for p, g, m, v in zip(self.params, self._grads(), self.m, self.v):
            if g is None:
                continue
            m.assign(self.b1 * m + (1.0 - self.b1) * g)
            v.assign(self.b2 * v + (1.0 - self.b2) * (g * g))
            m_hat = m / (1.0 - self.b1_t)
            v_hat = v / (1.0 - self.b2_t)
            up = m_hat / (v_hat.sqrt() + self.eps)
            if self.wd:
                up = up + self.wd * p
            if not self.adam:  # LAMB's trust ratio
                r1 = (p * p).sum().sqrt()
                r2 = (up * up).sum().sqrt()
                r = ((r1 > 0) & (r2 > 0)).where(r1 / r2, 1.0)
                up = up * r
            p.assign(p - lr * up)
            out += [p, m, v]
        return out


def Adam(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
    return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)


def AdamW(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01):
    return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)
