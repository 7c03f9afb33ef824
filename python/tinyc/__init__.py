"""tinyc - Python binding of libtinyc, an embeddable tensor compiler modelled
on tinygrad. A pure-Python package: ctypes over libtinyc.so.

    from tinyc import Tensor
    a = Tensor([[1.0, 2.0], [3.0, 4.0]])
    print((a * 2 + 1).sum(axis=1).numpy())

The library is found through TINYC_LIB, the build tree next to this
checkout, or the installed library (see tinyc/_lib.py).
"""
from . import _lib
from ._lib import TinycError, TinycIOError, TinycMemoryError, TinycValueError
from .dtype import DType, dtypes
from .tensor import AxisError, Tensor

__all__ = ["Tensor", "GlobalCounters", "TinycError", "TinycValueError", "TinycMemoryError",
           "TinycIOError", "AxisError", "dtypes", "DType",
           "nn", "version", "set_flag", "get_flag", "library_path", "where", "no_grad",
           "set_grad_enabled", "is_grad_enabled", "TinyJit", "synchronize", "export_c"]

library_path = _lib.path


def version():
    """libtinyc's version string, "MAJOR.MINOR.PATCH"."""
    return _lib.lib.tc_version().decode()


def set_flag(name, value):
    """tc_set_flag: TC_DEBUG, TC_NOOPT, TC_NOFUSE, TC_BEAM, TC_NOROWS."""
    _lib.check_status(_lib.lib.tc_set_flag(name.encode(), int(value)))


def get_flag(name):
    v = _lib.lib.tc_get_flag(name.encode())
    if v == -1:  # unknown name
        raise _lib.error()
    return v


def synchronize(device=None):
    """Waits for the work queued on device (None: the default device); GPU
    launches return once queued (torch.cuda.synchronize)."""
    from ._util import _dev
    _lib.check_status(_lib.lib.tc_synchronize(_dev(device)))


def export_c(dir, name, outs, ins=()):
    """tc_export_c: writes <dir>/<name>.c and <dir>/<name>.h, standalone C that
    computes the tensors `outs` from the realized tensors `ins` (run-time
    arguments, in that order); other realized tensors the graph reads are
    embedded, and what it assigns to (an optimizer's schedule_step()) becomes
    state the generated code updates on each run. Nothing runs here."""
    outs, ins = list(outs), list(ins)
    for t in outs + ins:
        if not isinstance(t, Tensor):
            raise TypeError("tinyc.export_c: outs and ins must be Tensors, got %r" % (t,))
    if not outs:
        raise ValueError("tinyc.export_c: nothing to export (outs is empty)")
    fn = _lib.need("tc_export_c", "tinyc.export_c")
    o = _lib.handle_array([t._h for t in outs])
    i = _lib.handle_array([t._h for t in ins])
    _lib.check_status(fn(str(dir).encode(), str(name).encode(), o, len(outs), i, len(ins)))


def where(cond, x, y):
    """tinyc.where(cond, x, y): x where cond, else y (torch.where)."""
    if not isinstance(cond, Tensor):
        cond = Tensor(cond)
    return cond.where(x, y)


class _CountersMeta(type):
    """class-level properties: GlobalCounters.kernel_count reads tc_get_counters."""

    @staticmethod
    def _read():
        c = _lib.Counters()
        _lib.lib.tc_get_counters(c)
        return c

    @property
    def kernel_count(cls):
        return cls._read().kernel_count

    @property
    def global_ops(cls):
        return cls._read().global_ops

    @property
    def global_mem(cls):
        return cls._read().global_mem

    @property
    def time_sum_s(cls):
        return cls._read().time_sum_s


# where the time and memory went (tc_counters' later fields), read the same way
for _field in ("schedule_s", "lower_s", "codegen_s", "render_s", "compile_s", "launch_s",
               "compile_count", "graph_nodes", "mem_used", "mem_peak", "mem_cached"):
    setattr(_CountersMeta, _field, property(lambda cls, f=_field: getattr(cls._read(), f)))


class GlobalCounters(metaclass=_CountersMeta):
    """tinygrad's GlobalCounters: kernel_count, global_ops, global_mem,
    time_sum_s since start or the last reset() (read from tc_get_counters);
    also schedule_s, lower_s (codegen_s + render_s and cache lookups), compile_s,
    launch_s, compile_count, graph_nodes (nodes the schedules walked), mem_used,
    mem_peak and mem_cached (device memory in bytes)."""

    @staticmethod
    def reset():
        _lib.lib.tc_reset_counters()


from . import nn  # noqa: E402  (nn imports Tensor from here)
from .jit import TinyJit  # noqa: E402


class no_grad:
    """`with tinyc.no_grad():` (or as a decorator) - ops record no history
    (tc_set_grad_enabled(false)), like torch.no_grad."""

    def __enter__(self):
        fn = _lib.need("tc_set_grad_enabled", "tinyc.no_grad")
        self._prev = fn(False)

    def __exit__(self, *exc):
        _lib.lib.tc_set_grad_enabled(self._prev)

    def __call__(self, f):
        import functools

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            with no_grad():
                return f(*args, **kwargs)
        return wrapper


def set_grad_enabled(on):
    """turns recording on or off; returns the previous setting"""
    return bool(_lib.need("tc_set_grad_enabled", "tinyc.set_grad_enabled")(bool(on)))


def is_grad_enabled():
    return bool(_lib.lib.tc_is_grad_enabled()) if _lib.has("tc_is_grad_enabled") else True
