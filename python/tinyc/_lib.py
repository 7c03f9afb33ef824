"""_lib.py - finds libtinyc, loads it with ctypes and declares every C function
the package calls (restype and argtypes), so ctypes never guesses.

Where the library is looked for, in order:
  1. the TINYC_LIB environment variable: a path to libtinyc.so, or a folder
     holding it;
  2. when this package sits in a source checkout (python/tinyc/ with
     include/tinyc.h two levels up), its build trees: <repo>/build, then
     <repo>/build-release, <repo>/cmake-build-release, <repo>/cmake-build-debug;
  3. the installed library: <sys.prefix>/lib, /usr/local/lib, then the
     system's search path (ctypes.util.find_library("tinyc")).
A library that is not found raises ImportError naming every place tried.

Functions that later versions of the library add (autograd, composites,
optimizers) are optional here: `has(name)` says whether the loaded library
exports one and `need(name, what)` returns it or raises NotImplementedError
naming the missing C symbol.
"""
import ctypes
import ctypes.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))  # python/tinyc/ -> repository root
_BUILD_DIRS = ("build", "build-release", "cmake-build-release", "cmake-build-debug")
_NAMES = ("libtinyc.so", "libtinyc.so.0", "libtinyc.dylib")


def _candidates():
    """(path, why) pairs in the order they are tried."""
    env = os.environ.get("TINYC_LIB")
    if env:
        if os.path.isdir(env):
            for n in _NAMES:
                yield os.path.join(env, n), "TINYC_LIB"
        else:
            yield env, "TINYC_LIB"
        return  # an explicit choice is never silently replaced by another library
    if os.path.isfile(os.path.join(_REPO, "include", "tinyc.h")):  # a source checkout
        for d in _BUILD_DIRS:
            for n in _NAMES:
                yield os.path.join(_REPO, d, n), "build tree"
    for d in (os.path.join(sys.prefix, "lib"), "/usr/local/lib"):
        for n in _NAMES:
            yield os.path.join(d, n), "install prefix"
    found = ctypes.util.find_library("tinyc")
    if found:
        yield found, "system"


def _load():
    tried = []
    for path, why in _candidates():
        is_file = os.path.isfile(path)
        if not is_file and why != "system":
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    if os.environ.get("TINYC_LIB"):
        where = "TINYC_LIB=%s" % os.environ["TINYC_LIB"]
    else:
        where = "the build trees, the install prefix and the system path"
    raise ImportError(
        "tinyc: cannot find libtinyc (looked in %s):\n  %s\n"
        "Build it from the repository root with\n"
        "  cmake -B build && cmake --build build\n"
        "or point TINYC_LIB at libtinyc.so." % (where, "\n  ".join(tried) or "(nowhere)"))


lib, path = _load()

# ---- C types ----------------------------------------------------------------
T = ctypes.c_void_p  # tc_tensor * (opaque handle, an int in Python)
O = ctypes.c_void_p  # tc_optimizer *
I64P = ctypes.POINTER(ctypes.c_int64)
IP = ctypes.POINTER(ctypes.c_int)
TP = ctypes.POINTER(ctypes.c_void_p)
i32, i64, u64, f64 = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
b, s, sz, vp = ctypes.c_bool, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p


# tc_jit_fn: tc_status (*)(void *user, tc_tensor *const *inputs, int n_inputs,
#                          tc_tensor **outputs, int n_outputs)
JIT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)


class Counters(ctypes.Structure):
    """tc_counters"""
    _fields_ = [("kernel_count", ctypes.c_int64), ("global_ops", ctypes.c_int64),
                ("global_mem", ctypes.c_int64), ("time_sum_s", ctypes.c_double),
                ("schedule_s", ctypes.c_double), ("lower_s", ctypes.c_double),
                ("codegen_s", ctypes.c_double), ("render_s", ctypes.c_double),
                ("compile_s", ctypes.c_double), ("launch_s", ctypes.c_double),
                ("compile_count", ctypes.c_int64), ("graph_nodes", ctypes.c_int64),
                ("mem_used", ctypes.c_int64),
                ("mem_peak", ctypes.c_int64), ("mem_cached", ctypes.c_int64)]


_UNARY = ("neg exp log exp2 log2 sqrt sin cos relu sigmoid tanh recip abs square "
          "contiguous logical_not trunc floor ceil round sign sinh cosh asinh acosh atanh "
          "softsign hardswish mish quick_gelu").split()
_BINARY = ("add sub mul div idiv mod maximum minimum pow lt gt le ge eq ne "
           "logical_and logical_or logical_xor lshift rshift").split()
_REDUCE = "sum max min mean any all logsumexp".split()

# name -> (restype, argtypes). Everything the package calls is listed here.
SIGNATURES = {
    "tc_last_error": (s, []), "tc_last_status": (i32, []),
    "tc_status_string": (s, [i32]), "tc_version": (s, []), "tc_shutdown": (None, []),
    "tc_dtype_size": (sz, [i32]), "tc_dtype_name": (s, [i32]),
    "tc_set_flag": (i32, [s, i64]), "tc_get_flag": (i64, [s]),
    "tc_from_data": (T, [vp, i32, i32, I64P, s]),
    "tc_full": (T, [i32, I64P, f64, i32, s]), "tc_zeros": (T, [i32, I64P, i32, s]),
    "tc_ones": (T, [i32, I64P, i32, s]), "tc_full_like": (T, [T, f64]),
    "tc_arange": (T, [i64, i64, i64, i32, s]), "tc_eye": (T, [i64, i32, s]),
    "tc_rand": (T, [i32, I64P, i32, s]), "tc_randn": (T, [i32, I64P, i32, s]),
    "tc_uniform": (T, [i32, I64P, f64, f64, i32, s]),
    "tc_normal": (T, [i32, I64P, f64, f64, i32, s]),
    "tc_randint": (T, [i32, I64P, i64, i64, i32, s]),
    "tc_multinomial": (T, [T, i64, b]),
    "tc_manual_seed": (None, [u64]), "tc_retain": (T, [T]), "tc_release": (None, [T]),
    "tc_ndim": (i32, [T]), "tc_shape": (I64P, [T]), "tc_get_dtype": (i32, [T]),
    "tc_numel": (i64, [T]), "tc_device": (s, [T]), "tc_is_realized": (b, [T]),
    "tc_where": (T, [T, T, T]), "tc_cast": (T, [T, i32]), "tc_bitcast": (T, [T, i32]), "tc_celu": (T, [T, f64]),
    "tc_var": (T, [T, i32, IP, b, i32]), "tc_std": (T, [T, i32, IP, b, i32]),
    "tc_reshape": (T, [T, i32, I64P]), "tc_permute": (T, [T, IP]),
    "tc_transpose": (T, [T, i32, i32]), "tc_expand": (T, [T, i32, I64P]),
    "tc_pad": (T, [T, I64P]), "tc_shrink": (T, [T, I64P]), "tc_flip": (T, [T, i32, IP]),
    "tc_realize": (i32, [TP, i32]), "tc_to_host": (i32, [T, vp, sz]),
    "tc_schedule_kernel_count": (i32, [TP, i32]), "tc_to_device": (T, [T, s]),
    "tc_move_to_device": (i32, [T, s]), "tc_contiguous_backward": (T, [T]),
    "tc_synchronize": (i32, [s]),
    "tc_get_counters": (None, [ctypes.POINTER(Counters)]), "tc_reset_counters": (None, []),
    # composites (optional until the library has them)
    "tc_matmul": (T, [T, T]), "tc_dot": (T, [T, T]), "tc_linear": (T, [T, T, T]),
    "tc_softmax": (T, [T, i32]), "tc_log_softmax": (T, [T, i32]),
    "tc_layernorm": (T, [T, i32, f64]),
    "tc_batchnorm": (T, [T, T, T, T, T, b, f64, f64]),
    "tc_conv2d": (T, [T, T, T, i32, i32]),
    "tc_conv2d_ex": (T, [T, T, T, i32, i32, i32, i32, i32, i32]),
    "tc_conv_nd": (T, [T, T, T, i32, I64P, I64P, I64P, i64]),
    "tc_conv_transpose_nd": (T, [T, T, T, i32, I64P, I64P, I64P, I64P, i64]),
    "tc_max_pool2d": (T, [T, i32, i32]), "tc_avg_pool2d": (T, [T, i32, i32]),
    "tc_cross_entropy": (T, [T, T]), "tc_gather": (T, [T, i32, T]), "tc_index": (T, [T, i32, T]),
    "tc_interpolate": (T, [T, i32, I64P, i32, ctypes.c_bool]),
    "tc_max_pool_nd": (T, [T, i32, I64P, I64P, I64P]), "tc_avg_pool_nd": (T, [T, i32, I64P, I64P, I64P]),
    "tc_argmax": (T, [T, i32, b]),
    "tc_cumsum": (T, [T, i32]), "tc_cumprod": (T, [T, i32]), "tc_einsum": (T, [s, i32, TP]),
    "tc_empty": (T, [i32, I64P, i32, s]),
    "tc_dropout": (T, [T, f64, b]),
    # autograd and training (optional until the library has them)
    "tc_set_requires_grad": (i32, [T, b]), "tc_requires_grad": (b, [T]),
    "tc_backward": (i32, [T]), "tc_backward_ex": (i32, [T, T]),
    "tc_backward_opts": (i32, [T, T, ctypes.c_bool]), "tc_grad": (T, [T]), "tc_zero_grad": (i32, [T]),
    "tc_detach": (T, [T]), "tc_set_grad_enabled": (b, [b]), "tc_is_grad_enabled": (b, []),
    "tc_assign": (i32, [T, T]), "tc_index_copy": (i32, [T, i32, T, T]),
    # optimizers (optional until the library has them)
    "tc_sgd": (O, [TP, i32, f64, f64]),
    "tc_sgd_ex": (O, [TP, i32, f64, f64, f64, f64, b]),
    "tc_adam": (O, [TP, i32, f64, f64, f64, f64]),
    "tc_adamw": (O, [TP, i32, f64, f64, f64, f64, f64]),
    "tc_optimizer_zero_grad": (i32, [O]), "tc_optimizer_step": (i32, [O]),
    "tc_optimizer_step_with": (i32, [O, TP, i32]),
    "tc_optimizer_set_lr": (i32, [O, f64]), "tc_optimizer_get_lr": (f64, [O]),
    "tc_optimizer_free": (None, [O]),
    "tc_optimizer_schedule_step": (i32, [O, TP, i32]),
    # ahead-of-time export
    "tc_export_c": (i32, [s, s, TP, i32, TP, i32]),
    "tc_safe_save": (i32, [s, ctypes.POINTER(ctypes.c_char_p), TP, i32]),
    "tc_safe_load": (i32, [s, ctypes.POINTER(ctypes.c_char_p), TP, i32]),
    # JIT: capture a step once, replay its kernels
    "tc_jit_new": (vp, [vp, vp]), "tc_jit_run": (i32, [vp, TP, i32, TP, i32]),
    "tc_jit_kernel_count": (i32, [vp]), "tc_jit_free": (None, [vp]),
    # datasets
    "tc_idx_load": (T, [s, s]), "tc_mnist_load": (i32, [s, s, vp]),
    "tc_mnist_release": (None, [vp]),
}
# transformer ops, losses and gradient clipping (optional until the library has them)
SIGNATURES.update({
    "tc_erf": (T, [T]), "tc_gelu": (T, [T, b]),
    "tc_tril": (T, [T, i64]), "tc_triu": (T, [T, i64]), "tc_masked_fill": (T, [T, T, f64]),
    "tc_scaled_dot_product_attention": (T, [T, T, T, T, b]),
    "tc_scaled_dot_product_attention_ex": (T, [T, T, T, T, b, f64]),
    "tc_cross_entropy_ex": (T, [T, T, i32, i64, f64]),
    "tc_clip_grad_norm": (T, [TP, i32, f64, f64]),
})
for _n in _UNARY:
    SIGNATURES["tc_" + _n] = (T, [T])
for _n in _BINARY:
    SIGNATURES["tc_" + _n] = (T, [T, T])
for _n in _REDUCE:
    SIGNATURES["tc_" + _n] = (T, [T, i32, IP, b])

_missing = set()
for _name, (_res, _args) in SIGNATURES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        _missing.add(_name)
        continue
    _f.restype, _f.argtypes = _res, _args


def has(name):
    """True when the loaded library exports the C function `name`."""
    return name not in _missing and name in SIGNATURES


def need(name, what):
    """The C function `name`, or NotImplementedError saying `what` needs it."""
    if name in _missing:
        raise NotImplementedError(
            "tinyc: %s needs the C function %s, which this libtinyc (%s) does not "
            "export yet" % (what, name, path))
    return getattr(lib, name)


class TinycError(RuntimeError):
    """A libtinyc call failed; the message is tc_last_error(), `status` the
    tc_error name ("TC_ERR_SHAPE", ...)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class TinycValueError(TinycError, ValueError):
    """A bad value, shape or argument (TC_ERR_INVALID, TC_ERR_SHAPE): the
    ValueError tinygrad raises for these (a negative size, a broadcast or
    reshape that does not fit), and a TinycError."""


class TinycMemoryError(TinycError, MemoryError):
    """Out of host or device memory (TC_ERR_MEMORY)."""


class TinycIOError(TinycError, OSError):
    """A file could not be read or written (TC_ERR_IO)."""


_ERROR_CLASSES = {"TC_ERR_INVALID": TinycValueError, "TC_ERR_SHAPE": TinycValueError,
                  "TC_ERR_MEMORY": TinycMemoryError, "TC_ERR_IO": TinycIOError}


def error():
    """The library's last failure on this thread as a TinycError (the subclass
    that also is the Python exception its code stands for)."""
    msg = lib.tc_last_error()
    code = lib.tc_last_status()
    name = lib.tc_status_string(code)
    name = name.decode() if name else None
    cls = _ERROR_CLASSES.get(name, TinycError)
    return cls((msg or b"libtinyc call failed").decode("utf-8", "replace"), name)


def check(handle):
    """handle if not NULL, else raise the library's error."""
    if not handle:
        raise error()
    return handle


def check_status(st):
    if st != 0:
        raise error()


def shape_arg(shape):
    """(ndim, int64_t array) for a shape tuple."""
    n = len(shape)
    return n, (ctypes.c_int64 * max(n, 1))(*shape)


def int_array(values):
    return (ctypes.c_int * max(len(values), 1))(*values)


def int64_array(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def handle_array(handles):
    return (ctypes.c_void_p * max(len(handles), 1))(*handles)
