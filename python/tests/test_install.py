"""test_install.py - `pip install --no-build-isolation --no-deps ./python`
works offline (Debian's setuptools) into a fresh virtual environment, and the
installed package finds the library through TINYC_LIB."""
import os
import shutil
import subprocess
import sys

import pytest

import tinyc

PYROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _has_venv_and_pip():
    import importlib.util
    if not all(importlib.util.find_spec(m) for m in ("ensurepip", "setuptools")):
        return False  # python3-venv, python3-setuptools
    return subprocess.run([sys.executable, "-m", "pip", "--version"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_venv_and_pip(), reason="needs python3-venv, python3-pip and "
                    "python3-setuptools")
def test_pip_install_offline(tmp_path):
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(PYROOT, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                                "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", str(src)], capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    env["TINYC_LIB"] = tinyc.library_path
    r = subprocess.run([py, "-c", "import tinyc, sys; print(tinyc.__file__); "
                        "print((tinyc.Tensor([1.0, 2.0]) * 3).tolist())"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    where, value = r.stdout.strip().splitlines()
    assert where.startswith(str(venv)) and value == "[3.0, 6.0]"
