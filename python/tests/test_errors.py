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
    with pytest.raises(ValueError):
        t.clip()
    with pytest.raises(TypeError):
        t.realize(3)
    with pytest.raises(ValueError):
        t.dropout(1.5)
    with pytest.raises(TypeError):
        Tensor.manual_seed(1.5)
    with pytest.raises(TypeError):
        t.requires_grad = "yes"


def test_missing_c_functions_name_the_symbol(monkeypatch):
    monkeypatch.setattr(_lib, "_missing", _lib._missing | {"tc_matmul", "tc_backward"})
    t = Tensor.ones(2, 2)
    with pytest.raises(NotImplementedError, match="tc_matmul"):
        t @ t
    with pytest.raises(NotImplementedError, match="tc_backward"):
        t.sum().backward()


@pytest.mark.parametrize("name,call", [
    ("tc_matmul", lambda t: t.matmul(t)), ("tc_softmax", lambda t: t.softmax()),
    ("tc_log_softmax", lambda t: t.log_softmax()), ("tc_layernorm", lambda t: t.layernorm()),
    ("tc_conv2d", lambda t: t.reshape(1, 1, 2, 2).conv2d(t.reshape(1, 1, 2, 2))),
    ("tc_max_pool2d", lambda t: t.reshape(1, 1, 2, 2).max_pool2d()),
    ("tc_cross_entropy_ex", lambda t: t.sparse_categorical_crossentropy(Tensor([0, 1]))),
    ("tc_backward", lambda t: t.sum().backward()), ("tc_assign", lambda t: t.assign(t))])
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
