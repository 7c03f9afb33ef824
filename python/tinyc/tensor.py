"""tensor.py - tinyc.Tensor: a Python handle on one libtinyc tc_tensor.

Every op calls the C library through ctypes and returns a new lazy Tensor;
nothing runs until realize(), numpy(), item() or tolist(). Names and
semantics follow tinygrad's Tensor (and PyTorch's where tinygrad has none).

Ownership: a Tensor owns exactly one tc_tensor reference (`_h`) and drops it
in __del__ (once; the handle is cleared first, so a released handle is never
touched again). Methods that libtinyc has no C function for are composed here
from C calls (clip, argmax, prod, ...). Movement and indexing live in
movement.py, the neural-network composites in nnops.py, the transformer's ops
and the cross-entropies in transformer.py (mixins of Tensor).
Methods whose C function this build of the library lacks raise
NotImplementedError naming the missing symbol (see _lib.need).

Python misuse (wrong argument types, axes out of range, bad indices) raises
TypeError / ValueError / IndexError before C is called; a failing C call
raises TinycError with tc_last_error()'s message.
"""
import contextlib
import math
import numbers
import weakref

import numpy as np

from . import _lib
from ._lib import check, check_status, lib
from ._util import (AxisError, DataError, _dev, _is_scalar, _py_scalar, _scalar_dtype,
                    _shape_args)
from .dtype import dtypes, from_numpy_dtype, least_upper, to_dtype
from . import movement, nnops, transformer
from .movement import Movement
from .nnops import NNOps
from .transformer import TransformerOps

__all__ = ["Tensor", "AxisError"]


def _release_handle(h, _release=lib.tc_release):
    try:
        _release(h)
    except Exception:  # the library may be gone at interpreter shutdown
        pass


# Losses that backward() ran on and that are not realized yet. An optimizer
# step realizes them in the same tc_realize as its in-place updates, so a loss
# read after the step still shows the value from before it (libtinyc, like
# tinygrad, lets a lazy reader realized after an assign see the new value).
_pending_losses = []


def take_pending_losses():
    """the still-alive, unrealized losses backward() ran on (and forget them)"""
    out = [t for t in (r() for r in _pending_losses) if t is not None and t._h]
    _pending_losses.clear()
    return [t for t in out if not t.is_realized()]


class _train(contextlib.ContextDecorator):
    """`with Tensor.train():` / `@Tensor.train()`: sets Tensor.training."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self.prev, Tensor.training = Tensor.training, self.mode

    def __exit__(self, *exc):
        Tensor.training = self.prev


class Schedule(list):
    """What schedule() returns: one entry per kernel realize would run now
    (len() is tc_schedule_kernel_count). Entries are ScheduleItem(index)."""


class ScheduleItem:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return "<ScheduleItem kernel %d>" % self.index


class Tensor(Movement, NNOps, TransformerOps):
    """A lazy tensor: tinygrad's Tensor over libtinyc."""
    __slots__ = ("_h", "_shape", "_dtype", "_requires_grad", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our reflected operators (np.float32(2) * t)
    __hash__ = object.__hash__  # __eq__ is elementwise, identity hashing like torch
    training = False  # dropout and BatchNorm train only when True (see Tensor.train())
    train = _train

    # ---- construction -----------------------------------------------------

    def __init__(self, data, dtype=None, device=None, requires_grad=None):
        self._h = None
        self._shape = self._dtype = None
        self._requires_grad = None
        dt = to_dtype(dtype) if dtype is not None else None
        if isinstance(data, Tensor):
            src = data if device is None else data.to(device)
            h = lib.tc_cast(src._h, dt.value) if dt is not None else lib.tc_retain(src._h)
            self._h = check(h)
        elif _is_scalar(data):
            v = _py_scalar(data)
            dt = dt or _scalar_dtype(v)
            self._h = check(lib.tc_full(0, None, float(v), dt.value, _dev(device)))
        else:
            self._h = _from_array(data, dt, device)
        if requires_grad is not None:
            self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls, h):
        """A Tensor owning the new reference h (NULL raises the library error)."""
        t = object.__new__(cls)
        t._h = None
        t._shape = t._dtype = t._requires_grad = None
        t._h = check(h)
        return t

    def __copy__(self):
        """copy.copy: a Tensor of its own on the same values (and the same graph
        node, so it sees later assigns, as tinygrad's copy does)"""
        out = Tensor._wrap(lib.tc_retain(self._h))
        out._requires_grad = self._requires_grad
        return out

    def __deepcopy__(self, memo):
        """copy.deepcopy: a realized copy of the values in a buffer of its own
        (later assigns to either do not reach the other), requires_grad kept"""
        out = self.detach().clone().realize()
        if self.requires_grad:
            out.requires_grad = True
        memo[id(self)] = out
        return out

    def __del__(self, _release=_release_handle):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            _release(h)

    @staticmethod
    def _creation_kwargs(dtype, default):
        return to_dtype(dtype) if dtype is not None else default

    @staticmethod
    def _filled(fn, shape, dtype, device, requires_grad):
        """tc_zeros / tc_ones"""
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        n, arr = _lib.shape_arg(_shape_args(shape, fn[3:]))
        t = Tensor._wrap(getattr(lib, fn)(n, arr, dt.value, _dev(device)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def zeros(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._filled("tc_zeros", shape, dtype, device, requires_grad)

    @staticmethod
    def ones(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._filled("tc_ones", shape, dtype, device, requires_grad)

    @staticmethod
    def full(shape, fill_value, dtype=None, device=None, requires_grad=None):
        shape = _shape_args((shape,), "full")
        if not _is_scalar(fill_value):
            raise TypeError("tinyc: full: fill_value must be a number, got %r" % (fill_value,))
        v = _py_scalar(fill_value)
        dt = to_dtype(dtype) if dtype is not None else _scalar_dtype(v)
        n, arr = _lib.shape_arg(shape)
        t = Tensor._wrap(lib.tc_full(n, arr, float(v), dt.value, _dev(device)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, device=None, requires_grad=None):
        if stop is None:
            start, stop = 0, start
        for v in (start, stop, step):
            if not _is_scalar(v) or isinstance(v, (bool, np.bool_)):
                raise TypeError("tinyc: arange: arguments must be numbers, got %r" % (v,))
        if step == 0:
            raise ValueError("tinyc: arange: step must not be 0")
        is_int = all(isinstance(v, numbers.Integral) for v in (start, stop, step))
        dt = to_dtype(dtype) if dtype is not None else (dtypes.int32 if is_int else
                                                         dtypes.float32)
        if is_int and dt != dtypes.bool:
            t = Tensor._wrap(lib.tc_arange(int(start), int(stop), int(step), dt.value,
                                           _dev(device)))
        else:  # float arguments: start + i*step for i < ceil((stop-start)/step), like torch
            n = max(0, math.ceil((stop - start) / step))
            i = Tensor._wrap(lib.tc_arange(0, n, 1, dtypes.float32.value, _dev(device)))
            t = (i * float(step) + float(start)).cast(dt)
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def eye(n, m=None, dtype=None, device=None, requires_grad=None):
        for v in (n, m):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
                raise TypeError("tinyc: eye: n and m must be ints, got %r" % (v,))
        if m is not None and m < 0:  # n < 0 is tc_eye's error
            raise ValueError("tinyc: eye: m must be >= 0, got %d" % m)
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        t = Tensor._wrap(lib.tc_eye(int(n), dt.value, _dev(device)))
        if m is not None and m != n:  # (n, m): cut or zero-pad the columns
            t = t[:, :m] if m < n else t.pad(((0, 0), (0, m - n)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def empty(*shape, dtype=None, device=None, requires_grad=None):
        """a realized tensor whose values are not set (a buffer, no kernel)"""
        shape = _shape_args(shape, "empty")
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        n, arr = _lib.shape_arg(shape)
        t = Tensor._wrap(_lib.need("tc_empty", "Tensor.empty")(n, arr, dt.value, _dev(device)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def einsum(formula, *operands, acc_dtype=None):
        """Einstein summation (numpy's and torch's formulas, "..." included),
        lowered to views, one broadcast multiply and one sum: "ij,jk->ik" is
        one kernel. acc_dtype casts the operands first."""
        if not isinstance(formula, str):
            raise TypeError("tinyc: einsum: the formula must be a str, got %r" % (formula,))
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        xs = [x if isinstance(x, Tensor) else Tensor(x) for x in operands]
        if acc_dtype is not None:
            xs = [x.cast(acc_dtype) for x in xs]
        fn = _lib.need("tc_einsum", "Tensor.einsum")
        return Tensor._wrap(fn(formula.encode(), len(xs), _lib.handle_array([x._h for x in xs])))

    @staticmethod
    def _random(fn, shape, dtype, device, requires_grad):
        shape = _shape_args(shape, fn)
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        n, arr = _lib.shape_arg(shape)
        t = Tensor._wrap(getattr(lib, fn)(n, arr, dt.value, _dev(device)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def rand(*shape, dtype=None, device=None, requires_grad=None):
        """U[0, 1)"""
        return Tensor._random("tc_rand", shape, dtype, device, requires_grad)

    @staticmethod
    def randn(*shape, dtype=None, device=None, requires_grad=None):
        """N(0, 1)"""
        return Tensor._random("tc_randn", shape, dtype, device, requires_grad)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, dtype=None, device=None, requires_grad=None):
        """U[low, high) (tc_uniform); an integer dtype truncates (high-low)*U[0,1)
        and adds low, as tinygrad does"""
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        if dt.is_float:
            shape = _shape_args(shape, "uniform")
            n, arr = _lib.shape_arg(shape)
            t = Tensor._wrap(lib.tc_uniform(n, arr, float(low), float(high), dt.value,
                                            _dev(device)))
        else:
            t = ((Tensor.rand(*shape, device=device) * float(high - low)).cast(dt) +
                 Tensor(low, dtype=dt, device=device)).contiguous()
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def normal(*shape, mean=0.0, std=1.0, dtype=None, device=None, requires_grad=None):
        """N(mean, std^2): tc_randn's stream scaled on the host (tc_normal)"""
        shape = _shape_args(shape, "normal")
        dt = to_dtype(dtype) if dtype is not None else dtypes.float32
        n, arr = _lib.shape_arg(shape)
        t = Tensor._wrap(lib.tc_normal(n, arr, float(mean), float(std), dt.value, _dev(device)))
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t

    @staticmethod
    def randint(*shape, low=0, high=10, dtype=None, device=None, requires_grad=None):
        """integers uniform in [low, high) (tc_randint), int32 by default"""
        for v in (low, high):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError("tinyc: randint: low=%r and high=%r must be integers"
                                % (low, high))
        dt = to_dtype(dtype) if dtype is not None else dtypes.int32
        if not dt.is_int:
            raise TypeError("tinyc: randint: dtype=%s must be an integer dtype" % dt.name)
        shape = _shape_args(shape, "randint")
        n, arr = _lib.shape_arg(shape)
        return Tensor._wrap(lib.tc_randint(n, arr, int(low), int(high), dt.value, _dev(device)))

    @staticmethod
    def _fans(shape, what):
        shape = _shape_args(shape, what)
        if not shape:
            raise ValueError("tinyc: %s needs at least one dim" % what)
        return shape, shape[0], int(np.prod(shape[1:], dtype=np.int64))

    @staticmethod
    def scaled_uniform(*shape, **kwargs):
        """U(-1, 1) / sqrt(numel)"""
        shape, _, _ = Tensor._fans(shape, "scaled_uniform")
        bound = float(np.prod(shape, dtype=np.float64)) ** -0.5
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def glorot_uniform(*shape, **kwargs):
        """U(-b, b), b = sqrt(6 / (shape[0] + prod(shape[1:]))) (Keras' GlorotUniform)"""
        shape, fan_out, fan_in = Tensor._fans(shape, "glorot_uniform")
        bound = (6 / (fan_out + fan_in)) ** 0.5
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def kaiming_uniform(*shape, a=0.01, **kwargs):
        """torch's kaiming_uniform_ (leaky_relu gain with slope a, fan_in = prod(shape[1:]))"""
        shape, _, fan_in = Tensor._fans(shape, "kaiming_uniform")
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(fan_in)
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def kaiming_normal(*shape, a=0.01, **kwargs):
        """torch's kaiming_normal_ (leaky_relu gain with slope a, fan_in = prod(shape[1:]))"""
        shape, _, fan_in = Tensor._fans(shape, "kaiming_normal")
        std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(fan_in)
        return Tensor.normal(*shape, mean=0.0, std=std, **kwargs)

    def multinomial(self, num_samples=1, replacement=False):
        """int32 indices drawn from the rows of self's non-negative weights
        (tc_multinomial); without replacement the indices of a row differ"""
        if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral):
            raise TypeError("tinyc: multinomial: num_samples must be an int, got %r"
                            % (num_samples,))
        fn = _lib.need("tc_multinomial", "Tensor.multinomial")
        return Tensor._wrap(fn(self._h, int(num_samples), bool(replacement)))

    @staticmethod
    def manual_seed(seed=0):
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError("tinyc: manual_seed: seed must be an int, got %r" % (seed,))
        lib.tc_manual_seed(int(seed) & 0xFFFFFFFFFFFFFFFF)

    def full_like(self, fill_value, dtype=None):
        return Tensor.full(self.shape, fill_value, dtype=dtype or self.dtype, device=self.device)

    def zeros_like(self, dtype=None):
        return self.full_like(0, dtype)

    def ones_like(self, dtype=None):
        return self.full_like(1, dtype)

    def rand_like(self, dtype=None):
        return Tensor.rand(*self.shape, dtype=dtype or self.dtype, device=self.device)

    # ---- properties -------------------------------------------------------

    @property
    def shape(self):
        if self._shape is None:
            n = lib.tc_ndim(self._h)
            p = lib.tc_shape(self._h)
            self._shape = tuple(p[i] for i in range(n))
        return self._shape

    @property
    def dtype(self):
        if self._dtype is None:
            from .dtype import BY_VALUE
            self._dtype = BY_VALUE[lib.tc_get_dtype(self._h)]
        return self._dtype

    @property
    def device(self):
        return lib.tc_device(self._h).decode()

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return lib.tc_numel(self._h)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[self._axis(dim)]

    def element_size(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def __len__(self):
        if not self.shape:
            raise TypeError("tinyc: len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        return "<Tensor shape=%s dtype=%s device=%s%s>" % (
            self.shape, self.dtype.name, self.device,
            " requires_grad=True" if self._requires_grad else "")

    def is_realized(self):
        return bool(lib.tc_is_realized(self._h))

    # ---- autograd ---------------------------------------------------------

    @property
    def requires_grad(self):
        """True/False as set on a leaf; True for results that record history
        (tc_requires_grad); None when undecided (tinygrad's three states)."""
        if self._requires_grad is not None:
            return self._requires_grad
        if _lib.has("tc_requires_grad") and lib.tc_requires_grad(self._h):
            return True
        return None

    @requires_grad.setter
    def requires_grad(self, on):
        if on is not None and not isinstance(on, (bool, np.bool_)):
            raise TypeError("tinyc: requires_grad must be True, False or None")
        if on and _lib.has("tc_set_requires_grad"):
            if not self.dtype.is_float:
                raise TypeError("tinyc: only float tensors can require gradients, not %s"
                                % self.dtype.name)
            check_status(lib.tc_set_requires_grad(self._h, True))
        elif on is False and _lib.has("tc_requires_grad") and lib.tc_requires_grad(self._h):
            check_status(lib.tc_set_requires_grad(self._h, False))
        self._requires_grad = None if on is None else bool(on)

    def requires_grad_(self, on=True):
        self.requires_grad = on
        return self

    @property
    def grad(self):
        if not _lib.has("tc_grad"):
            return None
        h = lib.tc_grad(self._h)
        return Tensor._wrap(h) if h else None

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise TypeError("tinyc: only `t.grad = None` is supported (zero_grad)")
        fn = _lib.need("tc_zero_grad", "Tensor.grad = None")
        check_status(fn(self._h))

    def backward(self, gradient=None, retain_graph=False):
        """gradients of this scalar, or of sum(self * gradient) for a
        gradient of self's shape (torch's backward(gradient)). Then frees
        what the graph recorded, as torch and tinygrad do, unless
        retain_graph: a second backward through it raises."""
        if gradient is not None:
            if not isinstance(gradient, Tensor):
                gradient = Tensor(gradient, device=self.device)
            if gradient.shape != self.shape:
                raise ValueError("tinyc: backward: gradient of shape %s for a tensor of shape %s"
                                 % (gradient.shape, self.shape))
        elif self.shape not in ((), (1,)):
            raise ValueError("tinyc: backward needs a scalar (one-element) loss or a "
                             "gradient, got shape %s" % (self.shape,))
        fn = _lib.need("tc_backward_opts", "Tensor.backward")
        check_status(fn(self._h, gradient._h if gradient is not None else None, bool(retain_graph)))
        if len(_pending_losses) > 64:  # nobody steps: keep the list short
            take_pending_losses()
        _pending_losses.append(weakref.ref(self))
        return self

    def detach(self):
        """the same values without history and without requires_grad"""
        if _lib.has("tc_detach"):
            out = Tensor._wrap(lib.tc_detach(self._h))
            out._requires_grad = False  # tinygrad's detach: requires_grad=False
            return out
        if _lib.has("tc_backward"):
            _lib.need("tc_detach", "Tensor.detach")
        # no autograd in this library: a new handle on the same graph node is detached
        return self.reshape(self.shape)

    def assign(self, x):
        """Writes x (a Tensor, array or scalar; broadcast and cast to self's shape
        and dtype) into self in place, lazily; returns self."""
        fn = _lib.need("tc_assign", "Tensor.assign")
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=self.dtype, device=self.device)
        if x.dtype != self.dtype:
            x = x.cast(self.dtype)
        if x.shape != self.shape:
            x = x.expand(self.shape)
        check_status(fn(self._h, x._h))
        return self

    # ---- running ----------------------------------------------------------

    def realize(self, *others):
        ts = (self,) + others
        for t in others:
            if not isinstance(t, Tensor):
                raise TypeError("tinyc: realize: arguments must be Tensors, got %r" % (t,))
        arr = _lib.handle_array([t._h for t in ts])
        check_status(lib.tc_realize(arr, len(ts)))
        return self

    def schedule(self, *others):
        """The kernels realize() would run now; len() is the kernel count."""
        ts = (self,) + others
        arr = _lib.handle_array([t._h for t in ts])
        n = lib.tc_schedule_kernel_count(arr, len(ts))
        if n < 0:
            raise _lib.error()
        return Schedule(ScheduleItem(i) for i in range(n))

    def numpy(self):
        if self.dtype is dtypes.bfloat16:  # numpy has none: float32, as tinygrad
            return self.float().numpy()
        out = np.empty(self.shape, dtype=self.dtype.np)
        check_status(lib.tc_to_host(self._h, out.ctypes.data_as(_lib.vp), out.nbytes))
        return out

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def item(self):
        if self.numel() != 1:
            raise ValueError("tinyc: item() needs a tensor of one element, got shape %s"
                             % (self.shape,))
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def data(self):
        return self.numpy()

    def to(self, device):
        return Tensor._wrap(lib.tc_to_device(self._h, _dev(device)))

    def to_(self, device):
        """moves self to device in place (tinygrad's to_), its gradient too; a
        leaf stays a leaf (later gradients land on device), a result keeps its
        history behind the copy. Returns None, as tinygrad's."""
        fn = _lib.need("tc_move_to_device", "Tensor.to_")
        check_status(fn(self._h, _dev(device)))

    def is_floating_point(self):
        return self.dtype.is_float

    def replace(self, x):
        """tinygrad's replace: self takes x's value (same shape; neither may
        carry autograd history); returns self"""
        if not isinstance(x, Tensor):
            raise TypeError("tinyc: replace: x must be a Tensor, got %s" % type(x).__name__)
        if x.shape != self.shape:
            raise AssertionError("replace shape mismatch %s != %s" % (self.shape, x.shape))
        if x.requires_grad:
            raise AssertionError("replace: x must not require grad")
        h = check(lib.tc_retain(x._h))
        old, self._h = self._h, h
        self._dtype = self._requires_grad = None
        _release_handle(old)
        return self

    def cpu(self):
        return self.to("CPU")

    def clone(self):
        return self.contiguous() if not self.is_realized() else (self + 0).contiguous()

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError("tinyc: the truth value of a tensor with %d elements is "
                             "ambiguous" % self.numel())
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_float or self.dtype == dtypes.bool:
            raise TypeError("tinyc: only integer tensors can be used as an index")
        return int(self.item())

    def __iter__(self):
        if not self.shape:
            raise TypeError("tinyc: iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- elementwise ------------------------------------------------------

    def _unary(self, name):
        return Tensor._wrap(getattr(lib, name)(self._h))

    def neg(self): return self._unary("tc_neg")
    def exp(self): return self._unary("tc_exp")
    def log(self): return self._unary("tc_log")
    def exp2(self): return self._unary("tc_exp2")
    def log2(self): return self._unary("tc_log2")
    def sqrt(self): return self._unary("tc_sqrt")
    def sin(self): return self._unary("tc_sin")
    def cos(self): return self._unary("tc_cos")
    def relu(self): return self._unary("tc_relu")
    def sigmoid(self): return self._unary("tc_sigmoid")
    def tanh(self): return self._unary("tc_tanh")
    def abs(self): return self._unary("tc_abs")
    def square(self): return self._unary("tc_square")
    def reciprocal(self): return self._unary("tc_recip")
    def logical_not(self): return self._unary("tc_logical_not")
    def trunc(self): return self._unary("tc_trunc")
    def floor(self): return self._unary("tc_floor")
    def ceil(self): return self._unary("tc_ceil")
    def round(self): return self._unary("tc_round")
    def sign(self): return self._unary("tc_sign")
    def sinh(self): return self._unary("tc_sinh")
    def cosh(self): return self._unary("tc_cosh")
    def asinh(self): return self._unary("tc_asinh")
    def acosh(self): return self._unary("tc_acosh")
    def atanh(self): return self._unary("tc_atanh")
    def softsign(self): return self._unary("tc_softsign")
    def hardswish(self): return self._unary("tc_hardswish")
    def mish(self): return self._unary("tc_mish")
    def quick_gelu(self): return self._unary("tc_quick_gelu")
    def celu(self, alpha=1.0): return Tensor._wrap(lib.tc_celu(self._h, float(alpha)))

    def rsqrt(self): return self.sqrt().reciprocal()
    def tan(self): return self.sin() / self.cos()
    def leakyrelu(self, neg_slope=0.01): return self.relu() - (-neg_slope * self).relu()
    def silu(self): return self * self.sigmoid()
    def swish(self): return self.silu()
    def softplus(self, beta=1): return (1 / beta) * (1 + (self * beta).exp()).log()
    def elu(self, alpha=1.0): return self.relu() - alpha * (1 - self.exp()).relu()
    def relu6(self): return self.relu() - (self - 6).relu()
    def hardtanh(self, min_val=-1, max_val=1): return self.clip(min_val, max_val)

    def _operand(self, y, reverse=False):
        """(x, y) as Tensors for a binary op: a Python scalar y takes self's dtype
        when that holds it (float tensors; int tensors with int scalars), else its
        own (tinygrad's rule); the C op promotes and broadcasts."""
        if isinstance(y, Tensor):
            return (y, self) if reverse else (self, y)
        if _is_scalar(y):
            v = _py_scalar(y)
            if self.dtype.is_float or (self.dtype.is_int and type(v) is int and
                                       _fits(v, self.dtype)):
                dt = self.dtype
            else:
                dt = _scalar_dtype(v)
            yt = Tensor._wrap(lib.tc_full(0, None, float(v), dt.value, _dev(self.device)))
        elif isinstance(y, (np.ndarray, list, tuple)):
            yt = Tensor(y, device=self.device)
        else:
            raise TypeError("tinyc: unsupported operand type %s for a Tensor op"
                            % type(y).__name__)
        return (yt, self) if reverse else (self, yt)

    def _binary(self, name, y, reverse=False):
        a, b = self._operand(y, reverse)
        return Tensor._wrap(getattr(lib, name)(a._h, b._h))

    def add(self, y, reverse=False): return self._binary("tc_add", y, reverse)
    def sub(self, y, reverse=False): return self._binary("tc_sub", y, reverse)
    def mul(self, y, reverse=False): return self._binary("tc_mul", y, reverse)
    def div(self, y, reverse=False, upcast=True):
        """true division; upcast=False divides integers as integers (truncating,
        tinygrad's rule), while floats divide as usual"""
        a, b = self._operand(y, reverse)
        if not upcast and not least_upper(a.dtype, b.dtype).is_float:
            return Tensor._wrap(lib.tc_idiv(a._h, b._h))
        return Tensor._wrap(lib.tc_div(a._h, b._h))
    def idiv(self, y, reverse=False): return self._binary("tc_idiv", y, reverse)
    def mod(self, y, reverse=False): return self._binary("tc_mod", y, reverse)
    def maximum(self, y): return self._binary("tc_maximum", y)
    def minimum(self, y): return self._binary("tc_minimum", y)
    def logical_and(self, y): return self._binary("tc_logical_and", y)
    def logical_or(self, y): return self._binary("tc_logical_or", y)
    def logical_xor(self, y): return self._binary("tc_logical_xor", y)
    def xor(self, y, reverse=False): return self._binary("tc_logical_xor", y, reverse)
    def bitwise_and(self, y, reverse=False): return self._binary("tc_logical_and", y, reverse)
    def bitwise_or(self, y, reverse=False): return self._binary("tc_logical_or", y, reverse)

    def lshift(self, x):
        """self << x on integer tensors (x an int or an integer Tensor)"""
        return self._binary("tc_lshift", x)

    def rshift(self, x):
        """arithmetic self >> x on integer tensors"""
        return self._binary("tc_rshift", x)

    def pow(self, y, reverse=False):
        if not reverse and _is_scalar(y) and not isinstance(y, (bool, np.bool_)):
            v = _py_scalar(y)
            if v == int(v) and abs(v) <= 16:  # repeated squaring: exact, keeps the dtype
                n = int(v)
                if n < 0:
                    return self.reciprocal().pow(-n)
                if n == 0:  # through tc_pow for floats: the gradient is 0, not a cut graph
                    return self._binary("tc_pow", 0) if self.dtype.is_float else self.ones_like()
                if n == 1:
                    return self * 1
                half = self.pow(n // 2)
                sq = half * half
                return sq * self if n % 2 else sq
            if v == 0.5:
                return self.sqrt()
        return self._binary("tc_pow", y, reverse)

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __floordiv__ = idiv
    __mod__ = mod
    __pow__ = pow
    def __radd__(self, y): return self._binary("tc_add", y, True)
    def __rsub__(self, y): return self._binary("tc_sub", y, True)
    def __rmul__(self, y): return self._binary("tc_mul", y, True)
    def __rtruediv__(self, y): return self._binary("tc_div", y, True)
    def __rfloordiv__(self, y): return self._binary("tc_idiv", y, True)
    def __rmod__(self, y): return self._binary("tc_mod", y, True)
    def __rpow__(self, y): return self._binary("tc_pow", y, True)
    def __neg__(self): return self.neg()
    def __abs__(self): return self.abs()
    def __lt__(self, y): return self._binary("tc_lt", y)
    def __gt__(self, y): return self._binary("tc_gt", y)
    def __le__(self, y): return self._binary("tc_le", y)
    def __ge__(self, y): return self._binary("tc_ge", y)
    def __eq__(self, y): return self._binary("tc_eq", y)
    def __ne__(self, y): return self._binary("tc_ne", y)
    def __and__(self, y): return self._binary("tc_logical_and", y)
    def __or__(self, y): return self._binary("tc_logical_or", y)
    def __xor__(self, y): return self._binary("tc_logical_xor", y)
    def __rand__(self, y): return self._binary("tc_logical_and", y, True)
    def __ror__(self, y): return self._binary("tc_logical_or", y, True)
    def __rxor__(self, y): return self._binary("tc_logical_xor", y, True)
    def __lshift__(self, y): return self.lshift(y)
    def __rshift__(self, y): return self.rshift(y)
    def __rlshift__(self, y): return self._binary("tc_lshift", y, True)
    def __rrshift__(self, y): return self._binary("tc_rshift", y, True)

    def __invert__(self):
        """bool: logical not; integers: bitwise not (as torch)"""
        if self.dtype == dtypes.bool:
            return self.logical_not()
        if self.dtype.is_float:
            raise TypeError("tinyc: ~ is not defined for %s tensors" % self.dtype.name)
        return self ^ (255 if self.dtype == dtypes.uint8 else -1)
    def __matmul__(self, y): return self.matmul(y)
    def __rmatmul__(self, y): return self._operand(y, True)[0].matmul(self)

    def eq(self, y): return self == y
    def ne(self, y): return self != y
    def lt(self, y): return self < y
    def gt(self, y): return self > y
    def le(self, y): return self <= y
    def ge(self, y): return self >= y

    def where(self, x, y):
        """self is the condition (tinygrad's cond.where(x, y)): x where true, else y."""
        if isinstance(x, Tensor) and isinstance(y, Tensor):
            a, b = x, y
        elif isinstance(x, Tensor):
            a, b = x._operand(y)
        elif isinstance(y, Tensor):
            b, a = y._operand(x)
        else:
            for v in (x, y):
                if not _is_scalar(v):
                    raise TypeError("tinyc: where: x and y must be Tensors or numbers")
            dt = least_upper(_scalar_dtype(_py_scalar(x)), _scalar_dtype(_py_scalar(y)))
            a = Tensor(x, dtype=dt, device=self.device)
            b = Tensor(y, dtype=dt, device=self.device)
        return Tensor._wrap(lib.tc_where(self._h, a._h, b._h))

    def clip(self, min_=None, max_=None):
        if min_ is None and max_ is None:  # tinygrad's RuntimeError
            raise RuntimeError("tinyc: clip needs min_ or max_")
        out = self
        if min_ is not None:
            out = out.maximum(min_)
        if max_ is not None:
            out = out.minimum(max_)
        return out

    clamp = clip

    def cast(self, dtype):
        return Tensor._wrap(lib.tc_cast(self._h, to_dtype(dtype).value))

    def bitcast(self, dtype):
        """self's bits read as dtype of the same itemsize (tinygrad's; torch's
        view(dtype)); RuntimeError for another size, or when self requires grad"""
        dt = to_dtype(dtype)
        if self.requires_grad:
            raise RuntimeError("can't backprop through bitcast")
        if dt == self.dtype:
            return self
        fn = _lib.need("tc_bitcast", "Tensor.bitcast")
        return Tensor._wrap(fn(self._h, dt.value))

    def llvm_bf16_cast(self, dtype):
        """tinygrad's bfloat16 cast through the bits (its LLVM workaround): the
        bits widened to a float32's top half, then cast; on self's device"""
        if self.dtype != dtypes.bfloat16:
            raise AssertionError("llvm_bf16_cast needs a bfloat16 tensor, got %s" % self.dtype.name)
        bits = self.bitcast(dtypes.uint16).cast(dtypes.uint32) * (1 << 16)
        return bits.bitcast(dtypes.float32).cast(dtype)

    def float(self): return self.cast(dtypes.float32)
    def half(self): return self.cast(dtypes.float16)
    def double(self): return self.cast(dtypes.float64)
    def int(self): return self.cast(dtypes.int32)
    def long(self): return self.cast(dtypes.int64)
    def bool(self): return self.cast(dtypes.bool)

    def lerp(self, end, weight):
        return self + (end - self) * weight

    # ---- axes -------------------------------------------------------------

    def _axis(self, axis, ndim=None):
        """one axis, negative counting from the end -> 0..ndim-1 (AxisError else)."""
        ndim = self.ndim if ndim is None else ndim
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError("tinyc: an axis must be an int, got %r" % (axis,))
        if ndim == 0 and axis in (0, -1):  # a 0-d tensor's one element (torch, tinygrad)
            return 0
        if not -ndim <= axis < ndim:
            raise AxisError("tinyc: axis %d is out of range for %d dims" % (axis, ndim))
        return int(axis) % ndim

    def _axes(self, axis, repeated=AxisError):
        """axis=None | int | tuple -> sorted tuple of distinct 0..ndim-1 axes
        (None means all); an axis given twice raises `repeated`."""
        if axis is None:
            return tuple(range(self.ndim))
        if self.ndim == 0:  # axis 0 or -1 names the one element: nothing to reduce
            for a in (axis if isinstance(axis, (tuple, list)) else (axis,)):
                self._axis(a)
            if isinstance(axis, (tuple, list)) and len(axis) > 1:
                raise AxisError("tinyc: axis %r repeats an axis" % (axis,))
            return ()
        if isinstance(axis, (tuple, list)):
            out = tuple(self._axis(a) for a in axis)
            if len(set(out)) != len(out):
                raise repeated("tinyc: axis %r repeats an axis" % (axis,))
            return tuple(sorted(out))
        return (self._axis(axis),)

    # ---- reduce -----------------------------------------------------------

    def _reduce(self, name, axis, keepdim, *extra):
        if not isinstance(keepdim, (bool, np.bool_)):
            raise TypeError("tinyc: keepdim must be a bool")
        axes = self._axes(axis)
        x = self
        if not axes:
            # nothing to reduce (a 0-d tensor, or axis=()): reduce a new size-1 axis
            # so the result has the reduce's dtype
            x, axes = self.reshape((1,) + self.shape), (0,)
            keepdim = False
        arr = _lib.int_array(axes)
        return Tensor._wrap(getattr(lib, name)(x._h, len(axes), arr, bool(keepdim), *extra))

    def sum(self, axis=None, keepdim=False): return self._reduce("tc_sum", axis, keepdim)
    def max(self, axis=None, keepdim=False): return self._reduce("tc_max", axis, keepdim)
    def min(self, axis=None, keepdim=False): return self._reduce("tc_min", axis, keepdim)
    def mean(self, axis=None, keepdim=False): return self._reduce("tc_mean", axis, keepdim)
    def any(self, axis=None, keepdim=False): return self._reduce("tc_any", axis, keepdim)
    def all(self, axis=None, keepdim=False): return self._reduce("tc_all", axis, keepdim)

    def cumsum(self, axis=0):
        """running sums along axis (one kernel for rows up to 512)"""
        return Tensor._wrap(lib.tc_cumsum(self._h, self._axis(axis)))

    def cumprod(self, axis=0):
        """running products along axis (torch's cumprod; one kernel for rows up
        to 512; the gradient is exact where there are zeros)"""
        fn = _lib.need("tc_cumprod", "Tensor.cumprod")
        return Tensor._wrap(fn(self._h, self._axis(axis)))

    def var(self, axis=None, keepdim=False, correction=1):
        return self._reduce("tc_var", axis, keepdim, int(correction))

    def std(self, axis=None, keepdim=False, correction=1):
        return self._reduce("tc_std", axis, keepdim, int(correction))

    def prod(self, axis=None, keepdim=False):
        # exp(sum(log|x|)) with the sign from the count of negatives; zeros give 0
        x = self.float()
        mag = x.abs().log().sum(axis, keepdim).exp()
        neg = (x < 0).cast(dtypes.int32).sum(axis, keepdim) % 2
        has_zero = (x == 0).max(axis, keepdim) if self.numel() else None
        out = (neg == 1).where(-mag, mag)
        return has_zero.where(0.0, out) if has_zero is not None else out

    def argmax(self, axis=None, keepdim=False):
        """index of the first maximum (int32): tc_argmax, else tinygrad's recipe."""
        if axis is None:
            return self.flatten().argmax(0, keepdim=False) if not keepdim else \
                self.flatten().argmax(0).reshape((1,) * self.ndim)
        ax = self._axis(axis)
        if _lib.has("tc_argmax"):
            return Tensor._wrap(lib.tc_argmax(self._h, ax, bool(keepdim)))
        n = self.shape[ax]
        is_max = self == self.max(axis=ax, keepdim=True)
        rev = Tensor.arange(n - 1, -1, -1, device=self.device).reshape(
            (n,) + (1,) * (self.ndim - ax - 1))
        idx = (is_max * rev).max(axis=ax, keepdim=keepdim)
        return (n - 1 - idx).cast(dtypes.int32)

    def argmin(self, axis=None, keepdim=False):
        flip = self.logical_not() if self.dtype == dtypes.bool else -self
        return flip.argmax(axis, keepdim)

    def logsumexp(self, axis=None, keepdim=False):
        return self._reduce("tc_logsumexp", axis, keepdim)

movement.Tensor = nnops.Tensor = transformer.Tensor = Tensor


def _fits(v, dt):
    """the Python int v is a value of the integer dtype dt"""
    info = np.iinfo(dt.np)
    return info.min <= v <= info.max


def _from_array(data, dt, device):
    """a new tc_tensor handle holding a copy of data (numpy array, nested
    lists/tuples of numbers); numpy arrays are copied at most once here."""
    if isinstance(data, np.ndarray):
        arr = data
        if arr.dtype.kind not in "biuf":
            raise DataError("tinyc: cannot make a Tensor from a numpy array of %s" % arr.dtype)
        target = dt or from_numpy_dtype(arr.dtype)
    elif isinstance(data, (list, tuple)):
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError("tinyc: ragged nested lists: %s" % e) from None
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise DataError("tinyc: a Tensor needs nested lists of numbers, got %r"
                            % (type(data).__name__,))
        if dt is None:
            if arr.dtype.kind == "b":
                dt = dtypes.bool
            elif arr.dtype.kind in "iu":
                fits = arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31)
                dt = dtypes.int32 if fits else (dtypes.uint64 if arr.dtype == np.uint64
                                                else dtypes.int64)
            else:
                dt = dtypes.float32
        target = dt
    else:
        raise DataError("tinyc: cannot make a Tensor from %s (numpy arrays, nested lists, "
                        "numbers and Tensors are supported)" % type(data).__name__)
    arr = arr.astype(target.np, order="C", copy=False)  # a copy only when needed
    n, shape = _lib.shape_arg(arr.shape)
    if target is dtypes.bfloat16:  # float32 values, rounded to bfloat16 by a cast
        f = check(lib.tc_from_data(arr.ctypes.data_as(_lib.vp), dtypes.float32.value, n, shape,
                                   _dev(device)))
        try:
            return check(lib.tc_cast(f, target.value))
        finally:
            lib.tc_release(f)
    return check(lib.tc_from_data(arr.ctypes.data_as(_lib.vp), target.value, n, shape,
                                  _dev(device)))
