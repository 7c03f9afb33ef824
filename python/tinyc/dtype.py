"""dtype.py - tinyc's dtypes as Python objects (tinygrad's `dtypes` namespace)
and their mapping to tc_dtype values and numpy dtypes.

    from tinyc import dtypes
    dtypes.float32, dtypes.float16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.bool,
    dtypes.int8, dtypes.int16, dtypes.uint16, dtypes.uint32, dtypes.float64,
    dtypes.uint64, dtypes.bfloat16 (numpy has none: its arrays travel as float32)
    (aliases: float, half, double, int, long, char, short, ushort, uint, uchar,
    ulong, default_float, default_int)

`to_dtype(x)` accepts a DType, a name ("float32"), a numpy dtype or type, a
torch dtype, or the Python types float/int/bool.
"""
import numpy as np


class DType:
    """One tinyc dtype: `name`, `itemsize` (bytes), `value` (the tc_dtype enum),
    `np` (the numpy dtype)."""
    __slots__ = ("value", "name", "itemsize", "np", "is_float", "is_int")

    def __init__(self, value, name, np_dtype, is_float, is_int, itemsize=None):
        self.value, self.name, self.np = value, name, np.dtype(np_dtype)
        self.itemsize = itemsize or self.np.itemsize
        self.is_float, self.is_int = is_float, is_int

    def __repr__(self):
        return "dtypes.%s" % self.name

    def __reduce__(self):
        return (to_dtype, (self.name,))


class dtypes:
    """tinygrad-style namespace of the dtypes libtinyc has."""
    float32 = DType(0, "float32", np.float32, True, False)
    float16 = DType(1, "float16", np.float16, True, False)
    int32 = DType(2, "int32", np.int32, False, True)
    int64 = DType(3, "int64", np.int64, False, True)
    uint8 = DType(4, "uint8", np.uint8, False, True)
    bool = DType(5, "bool", np.bool_, False, False)
    int8 = DType(6, "int8", np.int8, False, True)
    int16 = DType(7, "int16", np.int16, False, True)
    uint16 = DType(8, "uint16", np.uint16, False, True)
    uint32 = DType(9, "uint32", np.uint32, False, True)
    float64 = DType(10, "float64", np.float64, True, False)
    uint64 = DType(11, "uint64", np.uint64, False, True)
    # numpy has no bfloat16: `np` is the float32 its values travel as
    bfloat16 = DType(12, "bfloat16", np.float32, True, False, itemsize=2)
    char = int8
    uchar = uint8
    short = int16
    ushort = uint16
    uint = uint32
    ulong = uint64
    float = float32
    half = float16
    double = float64
    int = int32
    long = int64
    default_float = float32
    default_int = int32

    @staticmethod
    def is_float(dt):
        return to_dtype(dt).is_float

    @staticmethod
    def is_int(dt):
        return to_dtype(dt).is_int

    @staticmethod
    def is_unsigned(dt):
        return to_dtype(dt).name.startswith("uint")

    @staticmethod
    def min(dt):
        """the smallest value of dt: -inf for floats, False for bool"""
        dt = to_dtype(dt)
        if dt.is_float:
            return -float("inf")
        return False if dt.name == "bool" else int(np.iinfo(dt.np).min)

    @staticmethod
    def max(dt):
        """the largest value of dt: inf for floats, True for bool"""
        dt = to_dtype(dt)
        if dt.is_float:
            return float("inf")
        return True if dt.name == "bool" else int(np.iinfo(dt.np).max)

    @staticmethod
    def fields():
        """{name: DType} of every dtype and alias (tinygrad's dtypes.fields())"""
        return dict(BY_NAME)

    @staticmethod
    def as_const(val, dt):
        """val as the Python value dt holds: int, float or bool"""
        dt = to_dtype(dt)
        if dt.is_int:
            return int(val)
        return float(val) if dt.is_float else bool(val)

    @staticmethod
    def from_py(x):
        """tinygrad's dtype of a Python value: float -> default_float, bool ->
        bool, int -> default_int; a list or tuple: the highest of its items'
        (default_float when empty)"""
        if isinstance(x, float):
            return dtypes.default_float
        if isinstance(x, bool):
            return dtypes.bool
        if isinstance(x, int):
            return dtypes.default_int
        if isinstance(x, (list, tuple)):
            out = dtypes.default_float if not x else dtypes.bool
            for v in x:
                out = least_upper(out, dtypes.from_py(v))
            return out
        raise RuntimeError("tinyc: could not infer dtype of %r with type %s" % (x, type(x)))


ALL = (dtypes.float32, dtypes.float16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.bool,
       dtypes.int8, dtypes.int16, dtypes.uint16, dtypes.uint32, dtypes.float64, dtypes.uint64,
       dtypes.bfloat16)
BY_VALUE = {d.value: d for d in ALL}
BY_NAME = {d.name: d for d in ALL}
BY_NAME.update(float=dtypes.float32, half=dtypes.float16, double=dtypes.float64, int=dtypes.int32,
               long=dtypes.int64, char=dtypes.int8, uchar=dtypes.uint8, short=dtypes.int16,
               ushort=dtypes.uint16, uint=dtypes.uint32, ulong=dtypes.uint64)
# numpy dtypes libtinyc does not have -> the one they are converted to (none
# now: float64 arrays stay float64, as in tinygrad)
NP_FALLBACK = {}
BY_NP = {d.np: d for d in ALL if d is not dtypes.bfloat16}


def from_numpy_dtype(npdt):
    """The tinyc dtype numpy arrays of npdt become, or TypeError."""
    npdt = np.dtype(npdt)
    if npdt in BY_NP:
        return BY_NP[npdt]
    if npdt in NP_FALLBACK:
        return NP_FALLBACK[npdt]
    raise TypeError("tinyc: numpy dtype %s has no tinyc dtype (tinyc has %s)"
                    % (npdt, ", ".join(d.name for d in ALL)))


def to_dtype(x):
    """A DType from a DType, a name, a numpy/torch dtype or float/int/bool."""
    if isinstance(x, DType):
        return x
    if x is float:
        return dtypes.float32
    if x is int:
        return dtypes.int32
    if x is bool:
        return dtypes.bool
    if isinstance(x, str):
        if x in BY_NAME:
            return BY_NAME[x]
        raise TypeError("tinyc: unknown dtype %r (tinyc has %s)"
                        % (x, ", ".join(d.name for d in ALL)))
    mod = type(x).__module__
    if mod.startswith("torch"):  # torch.float32 -> "float32"
        return to_dtype(str(x).split(".")[-1])
    try:
        npdt = np.dtype(x)
    except TypeError:
        raise TypeError("tinyc: %r is not a dtype" % (x,)) from None
    if npdt in BY_NP:
        return BY_NP[npdt]
    raise TypeError("tinyc: dtype %s is not one tinyc has (%s)"
                    % (npdt, ", ".join(d.name for d in ALL)))


def least_upper(a, b):
    """libtinyc's promotion (src/util/dtype.c, numpy's rule): a float over any
    integer (float32 over float16); bool under everything; integers of one
    signedness: the wider; signed and unsigned: the signed one if wider, else
    the signed integer twice the unsigned one's width (uint8 + int8: int16;
    uint64 and a signed integer: float64, as numpy)."""
    if a is b or b is dtypes.bool:
        return a
    if a is dtypes.bool:
        return b
    if a.is_float or b.is_float:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return dtypes.float32  # neither holds the other, as torch and tinygrad
        if a.is_float and b.is_float:
            return a if a.itemsize >= b.itemsize else b
        return a if a.is_float else b
    ua, ub = dtypes.is_unsigned(a), dtypes.is_unsigned(b)
    if ua == ub:
        return a if a.itemsize >= b.itemsize else b
    u, sg = (a, b) if ua else (b, a)
    if sg.itemsize > u.itemsize:
        return sg
    return {1: dtypes.int16, 2: dtypes.int32, 4: dtypes.int64, 8: dtypes.float64}[u.itemsize]


def least_upper_dtype(*ds):
    """the promoted dtype of several (tinygrad's least_upper_dtype)"""
    ds = [to_dtype(d) for d in ds]
    out = ds[0]
    for d in ds[1:]:
        out = least_upper(out, d)
    return out


def least_upper_float(dt):
    """dt when it is a float, else the default float (tinygrad's least_upper_float)"""
    dt = to_dtype(dt)
    return dt if dt.is_float else least_upper(dt, dtypes.float32)
