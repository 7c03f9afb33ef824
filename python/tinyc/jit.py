"""jit.py - TinyJit: tinygrad's decorator that captures a step's kernels once
and replays them, over libtinyc's tc_jit.

    @TinyJit
    def train_step(x, y):
        ...                       # builds forward, backward, optimizer update
        return loss

Call 1 runs the function normally (kernels compile), call 2 runs it again
while libtinyc records every kernel launch, later calls replay the recording
with the new input tensors' buffers: the Python function is not called, no
scheduling, no compiling. So a jitted function must take every tensor that
changes between calls as an argument (Tensor arguments, positional or by
keyword), must not depend on Python values that change (they are baked in),
and must return a Tensor, a tuple/list of Tensors, or None. A change in the
inputs' count, shapes, dtypes or devices captures again. Outputs of a replay
are new handles on the same buffers each call (the next call overwrites
them, as in tinygrad): copy what you keep (`.numpy()`, `.item()`).
"""
import functools

from . import _lib
from ._lib import check_status, lib
from .tensor import Tensor

__all__ = ["TinyJit"]

_ERR = 1  # the status a failing step returns (TC_ERR_INVALID); the Python error is re-raised


def _free_jit(j, _free=getattr(lib, "tc_jit_free", None)):
    try:
        if _free is not None:
            _free(j)
    except Exception:  # the library may be gone at interpreter shutdown
        pass


class TinyJit:
    """captures fxn's kernels on its second call and replays them after"""

    def __init__(self, fxn):
        _lib.need("tc_jit_new", "TinyJit")
        self.fxn = fxn
        self._cb = _lib.JIT_FN(self._step)  # kept alive as long as the jit
        self._j = _lib.check(lib.tc_jit_new(self._cb, None))
        self._n_out = None      # outputs the function returns (known after call 1)
        self._kind = None       # "none", "tensor" or the sequence type it returns
        self._args = None       # the call's arguments with Tensor slots to fill
        self._first = None      # call 1's result, returned directly
        self._exc = None        # an exception the function raised inside the step
        self.cnt = 0            # calls so far
        functools.update_wrapper(self, fxn)

    def __del__(self, _free=_free_jit):
        j = getattr(self, "_j", None)
        if j:
            self._j = None
            _free(j)

    def __get__(self, obj, objtype=None):  # as a method: bind like a function
        return functools.partial(self.__call__, obj) if obj is not None else self

    @property
    def kernel_count(self):
        """kernels a replay launches (0 before the capture)"""
        return lib.tc_jit_kernel_count(self._j)

    def reset(self):
        """forget the capture: the next call runs normally again"""
        lib.tc_jit_free(self._j)
        self._j = _lib.check(lib.tc_jit_new(self._cb, None))
        self._n_out, self._kind, self.cnt = None, None, 0

    # ---- the step libtinyc calls ----

    def _outputs(self, ret):
        if ret is None:
            return "none", []
        if isinstance(ret, Tensor):
            return "tensor", [ret]
        if isinstance(ret, (tuple, list)) and all(isinstance(t, Tensor) for t in ret):
            return type(ret), list(ret)
        raise TypeError("tinyc: TinyJit: the function must return a Tensor, a tuple or list "
                        "of Tensors, or None; got %s" % type(ret).__name__)

    def _step(self, user, inputs, n_in, outputs, n_out):
        try:
            ins = iter([Tensor._wrap(lib.tc_retain(inputs[i])) for i in range(n_in)])
            args, kwargs = self._args
            args = [next(ins) if isinstance(a, Tensor) else a for a in args]
            kwargs = {k: next(ins) if isinstance(v, Tensor) else v
                      for k, v in sorted(kwargs.items())}
            kind, outs = self._outputs(self.fxn(*args, **kwargs))
            if self._n_out is None:  # call 1: nothing goes back through C
                self._n_out, self._kind = len(outs), kind
                self._first = outs
            elif len(outs) != n_out:
                raise ValueError("tinyc: TinyJit: the function returned %d tensors, before %d"
                                 % (len(outs), n_out))
            else:
                for i, t in enumerate(outs):
                    outputs[i] = lib.tc_retain(t._h)
            return 0
        except BaseException as e:  # noqa: B902 (re-raised by __call__)
            self._exc = e
            return _ERR

    def __call__(self, *args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)] + \
            [v for _, v in sorted(kwargs.items()) if isinstance(v, Tensor)]
        self._args = (args, kwargs)
        n_out = self._n_out or 0
        in_arr = _lib.handle_array([t._h for t in tensors])
        out_arr = (_lib.vp * max(n_out, 1))()
        try:
            st = lib.tc_jit_run(self._j, in_arr, len(tensors), out_arr, n_out)
        finally:
            self._args = None
        if self._exc is not None:
            e, self._exc = self._exc, None
            self._first = None
            raise e
        check_status(st)
        self.cnt += 1
        if self._first is not None:
            outs, self._first = self._first, None
            if outs:
                Tensor.realize(*outs)
        else:
            outs = [Tensor._wrap(out_arr[i]) for i in range(n_out)]
        if self._kind == "none":
            return None
        if self._kind == "tensor":
            return outs[0]
        return self._kind(outs)
