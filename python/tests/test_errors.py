"""test_errors.py - library failures raise TinycError with tc_last_error()'s
message; Python misuse raises TypeError/ValueError before C; methods whose C
function is missing raise NotImplementedError naming it; a missing library is
an ImportError that says where it looked and how to build."""
import os
import subprocess
import sys

import pytest

import tinyc
from tinyc import Tensor, TinycError, _lib

PYROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tinyc_error_is_runtime_error_with_message():
    a, b = Tensor.zeros(2, 3), Tensor.zeros(4, 3)
    with pytest.raises(TinycError) as e:
        a + b
    assert isinstance(e.value, RuntimeError)
    assert "tc_add" in str(e.value) and "broadcast" in str(e.value)
    assert e.value.status == "TC_ERR_SHAPE"


def test_engine_failures_name_the_public_call(monkeypatch, tmp_path):
    """a failure deep in the engine (an allocation, the kernel compiler) is
    reported as the call the user made: tc_realize, not a helper's name"""
    with pytest.raises(TinycError) as e:
        Tensor.zeros(2 ** 22, 2 ** 22).contiguous().realize()
    assert e.value.status == "TC_ERR_MEMORY"
    assert str(e.value).startswith("tc_realize: ") and "out of memory" in str(e.value)
    monkeypatch.setenv("TC_CACHEDIR", str(tmp_path))
    monkeypatch.setenv("TC_CC", "false")
    with pytest.raises(TinycError) as e:
        (Tensor([1.0, 2.0]).exp() * 3.171875).realize()  # a kernel no test has built
    assert e.value.status == "TC_ERR_COMPILE"
    assert str(e.value).startswith("tc_realize: CPU compile of ")
    monkeypatch.delenv("TC_CC")
    assert (Tensor([1.0, 2.0]) * 3.171875).numpy().tolist() == [3.171875, 6.34375]


def test_dtype_errors_from_c():
    with pytest.raises(TinycError, match="tc_sub"):
        Tensor([True]) - Tensor([False])
    with pytest.raises(TinycError, match="tc_idiv"):
        Tensor([1.0]) // Tensor([2.0])
    with pytest.raises(TinycError, match="does not fit"):
        Tensor.full((2,), 300, dtype="uint8")


def test_unknown_device():
    with pytest.raises(TinycError) as e:
        Tensor([1.0], device="NOPE")
    assert e.value.status == "TC_ERR_DEVICE"
    with pytest.raises(TinycError, match="tc_synchronize") as e:
        tinyc.synchronize("NOPE")
    assert e.value.status == "TC_ERR_DEVICE"
    tinyc.synchronize()
    tinyc.synchronize("CPU")


def test_python_misuse():
    t = Tensor([1.0, 2.0])
    with pytest.raises(TypeError):
        t + "a"
    with pytest.raises(TypeError):
        t * object()
    with pytest.raises(TypeError):
        t.where(1, "b")
    with pytest.raises(RuntimeError):  # tinygrad's
        t.clip()
    with pytest.raises(TypeError):
        t.realize(3)
    with pytest.raises(ValueError):
        t.dropout(1.5)
    with pytest.raises(TypeError):
        Tensor.manual_seed(1.5)
    with pytest.raises(TypeError):
        t.requires_grad = "yes"


# misuse -> the exception tinygrad raises (and the message: the library's for
# errors found in C, which name the call)
TINYGRAD_ERRORS = [
    ("full(-3)", lambda: Tensor.full(-3, 1.0), ValueError, "tc_full: negative size -3"),
    ("full((2,-3))", lambda: Tensor.full((2, -3), 0), ValueError, "tc_full: negative size -3"),
    ("zeros(-1)", lambda: Tensor.zeros(-1), ValueError, "tc_zeros: negative size -1"),
    ("ones(2,-2)", lambda: Tensor.ones(2, -2), ValueError, "tc_ones: negative size -2"),
    ("rand(-3)", lambda: Tensor.rand(-3), ValueError, "tc_rand: negative size -3"),
    ("randn(-1)", lambda: Tensor.randn(4, -1), ValueError, "tc_randn: negative size -1"),
    ("empty(-2)", lambda: Tensor.empty(-2), ValueError, "tc_empty: negative size -2"),
    ("eye(-3)", lambda: Tensor.eye(-3), ValueError, "tc_eye: size -3 is out of range"),
    ("broadcast", lambda: Tensor.ones(2, 3) + Tensor.ones(4, 3), ValueError,
     r"tc_add: cannot broadcast \(2,3\) with \(4,3\)"),
    ("reshape", lambda: Tensor.ones(2, 3).reshape(5), ValueError,
     r"tc_reshape: cannot reshape \(2,3\) to \(5,\)"),
    ("expand", lambda: Tensor.ones(2, 3).expand(4, 3), ValueError, "tc_expand: cannot expand"),
    ("einsum", lambda: Tensor.einsum("ij,jk", Tensor.ones(2, 3), Tensor.ones(2, 3)), ValueError,
     "tc_einsum"),
    ("two -1", lambda: Tensor.ones(2, 3).reshape(-1, -1), RuntimeError,
     "tc_reshape: only one -1"),
    ("permute repeats", lambda: Tensor.ones(2, 3).permute(0, 0), RuntimeError, "repeats an axis"),
    ("flip repeats", lambda: Tensor.ones(2, 3).flip((1, 1)), RuntimeError, "repeats an axis"),
    ("clip", lambda: Tensor.ones(2).clip(), RuntimeError, "clip needs min_ or max_"),
    ("bad data", lambda: Tensor("abc"), RuntimeError, "cannot make a Tensor from str"),
    ("index", lambda: Tensor.ones(2, 3)[5], IndexError, "index 5 is out of bounds"),
    ("too many", lambda: Tensor.ones(2, 3)[0, 0, 0], IndexError, "too many indices"),
    ("ellipses", lambda: Tensor.ones(2, 3)[..., ...], IndexError, "one ellipsis"),
    ("float index", lambda: Tensor.ones(2, 3)[1.5], IndexError, "invalid index 1.5"),
    ("str index", lambda: Tensor.ones(2, 3)["a"], IndexError, "invalid index 'a'"),
    ("axis", lambda: Tensor.ones(2, 3).sum(axis=5), IndexError, "axis 5 is out of range"),
    ("softmax axis", lambda: Tensor.ones(2, 3).softmax(2), IndexError, "out of range"),
    ("cumsum axis", lambda: Tensor.ones(2, 3).cumsum(-3), IndexError, "out of range"),
    ("0-d axis", lambda: Tensor(1.0).sum(1), IndexError, "out of range for 0 dims"),
    ("transpose", lambda: Tensor.ones(2, 3).transpose(0, 2), IndexError, "out of range"),
    ("step 0", lambda: Tensor.ones(3)[::0], ValueError, "step cannot be zero"),
]


@pytest.mark.parametrize("what,call,exc,match", TINYGRAD_ERRORS,
                         ids=[e[0] for e in TINYGRAD_ERRORS])
def test_errors_as_tinygrad_raises_them(what, call, exc, match):
    with pytest.raises(exc, match=match) as e:
        call()
    if "tc_" in match:
        assert isinstance(e.value, TinycError)  # found in C: the library's message and code


def test_error_classes_by_status():
    with pytest.raises(tinyc.TinycValueError) as e:
        Tensor.ones(2).reshape(3)
    assert e.value.status == "TC_ERR_SHAPE" and isinstance(e.value, RuntimeError)
    with pytest.raises(tinyc.TinycValueError) as e:
        Tensor.ones(2).celu(0.0)
    assert e.value.status == "TC_ERR_INVALID"
    with pytest.raises(TinycError) as e:  # a dtype error is no ValueError
        Tensor([1.0]) << 1
    assert e.value.status == "TC_ERR_DTYPE" and not isinstance(e.value, ValueError)
    with pytest.raises(tinyc.TinycIOError) as e:
        _lib.check(_lib.lib.tc_idx_load(b"/nonexistent/file.idx", None))
    assert isinstance(e.value, OSError) and e.value.status == "TC_ERR_IO"


def test_missing_c_functions_name_the_symbol(monkeypatch):
    monkeypatch.setattr(_lib, "_missing", _lib._missing | {"tc_matmul", "tc_backward_opts"})
    t = Tensor.ones(2, 2)
    with pytest.raises(NotImplementedError, match="tc_matmul"):
        t @ t
    with pytest.raises(NotImplementedError, match="tc_backward_opts"):
        t.sum().backward()


@pytest.mark.parametrize("name,call", [
    ("tc_matmul", lambda t: t.matmul(t)), ("tc_softmax", lambda t: t.softmax()),
    ("tc_log_softmax", lambda t: t.log_softmax()), ("tc_layernorm", lambda t: t.layernorm()),
    ("tc_conv2d", lambda t: t.reshape(1, 1, 2, 2).conv2d(t.reshape(1, 1, 2, 2))),
    ("tc_max_pool2d", lambda t: t.reshape(1, 1, 2, 2).max_pool2d()),
    ("tc_cross_entropy_ex", lambda t: t.sparse_categorical_crossentropy(Tensor([0, 1]))),
    ("tc_backward_opts", lambda t: t.sum().backward()), ("tc_assign", lambda t: t.assign(t))])
def test_each_missing_symbol(monkeypatch, name, call):
    monkeypatch.setattr(_lib, "_missing", _lib._missing | {name})
    with pytest.raises(NotImplementedError, match=name):
        call(Tensor.ones(2, 2))


def run_py(code, **env):
    e = dict(os.environ, PYTHONPATH=PYROOT, **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                          timeout=120)


def test_missing_library_is_an_import_error():
    r = run_py("import tinyc", TINYC_LIB="/nonexistent/libtinyc.so")
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "/nonexistent/libtinyc.so" in r.stderr
    assert "cmake -B build && cmake --build build" in r.stderr


def test_tinyc_lib_may_name_a_folder():
    r = run_py("import tinyc; print(tinyc.library_path)",
               TINYC_LIB=os.path.dirname(tinyc.library_path))
    assert r.returncode == 0, r.stderr
    assert os.path.dirname(r.stdout.strip()) == os.path.dirname(tinyc.library_path)


def test_interpreter_shutdown_is_clean():
    code = """
import numpy as np
from tinyc import Tensor, nn
keep = [Tensor(np.ones((3, 3), np.float32)) * i for i in range(50)]
class Holder: pass
h = Holder(); h.t = Tensor([1.0]); h.me = h          # a cycle, collected at exit
Tensor.class_level = Tensor([2.0])                       # kept by the class
model = [nn.Linear(4, 3), nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)]
lazy = keep[3] + keep[4]
(keep[1] + 1).realize()
try:
    from tinyc import TinyJit
    jit = TinyJit(lambda a: a * 2)                      # a jit alive at exit
    for i in range(3):
        jit(Tensor([float(i)]))
except NotImplementedError:
    pass
print("done")
"""
    r = run_py(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done"
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_version():
    v = tinyc.version()
    assert len(v.split(".")) == 3
