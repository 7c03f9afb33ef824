"""_util.py - small helpers the Tensor modules share: argument checks and
conversions of Python values (devices, shapes, scalars) to what the C calls
take."""
import numbers

import numpy as np

from .dtype import dtypes


class AxisError(ValueError, IndexError):
    """An axis (dim) outside -ndim..ndim-1, or given twice (like numpy's AxisError,
    it is both a ValueError and an IndexError)."""


class RepeatedAxisError(AxisError, RuntimeError):
    """An axis given twice to permute or flip: an AxisError that is also the
    RuntimeError tinygrad raises there."""


class IndexTypeError(TypeError, IndexError):
    """An index of a type indexing does not take (a float, a str): the
    IndexError tinygrad and torch raise, and a TypeError."""


class DataError(TypeError, RuntimeError):
    """Data a Tensor cannot be made from (a str, an object): a TypeError, and
    the RuntimeError tinygrad raises."""


def _dev(device):
    """C device argument: None (the default device) or bytes."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError("tinyc: device must be a str like 'CPU', got %r" % (device,))
    return device.encode()


def _shape_args(shape, what):
    """(ints...) or ((ints...),) -> a tuple of non-negative Python ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = []
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError("tinyc: %s: sizes must be ints, got %r" % (what, s))
        out.append(int(s))
    return tuple(out)


def _is_scalar(x):
    return isinstance(x, (bool, numbers.Number, np.bool_)) and not isinstance(x, complex)


def _py_scalar(x):
    """numpy scalars -> the Python scalar of the same kind."""
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    return float(x)


def _scalar_dtype(v):
    """tinygrad's dtype for a Python scalar: bool, int32 (int64 when it does not
    fit), float32."""
    if isinstance(v, bool):
        return dtypes.bool
    if isinstance(v, int):
        return dtypes.int32 if -2**31 <= v < 2**31 else dtypes.int64
    return dtypes.float32


def _pair(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError("tinyc: %s must be an int or a pair, got %r" % (what, v))
        return int(v[0]), int(v[1])
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError("tinyc: %s must be an int or a pair, got %r" % (what, v))
    return int(v), int(v)
