"""conftest.py - makes `import tinyc` find the package and the library, and
gives the session a private kernel cache.

- python/ goes on sys.path, so the tests run from a checkout without
  installing the package;
- TINYC_LIB, when unset, points at the first build tree holding libtinyc.so
  (<repo>/build, then the other names tinyc/_lib.py knows);
- TC_CACHEDIR is a fresh temporary folder, removed at the end, so the tests
  neither read nor fill the user's kernel cache.
Both must be set before tinyc is first imported (libtinyc reads its
environment once)."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PYROOT)

if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

if not os.environ.get("TINYC_LIB"):
    for d in ("build", "build-release", "cmake-build-release", "cmake-build-debug"):
        p = os.path.join(REPO, d, "libtinyc.so")
        if os.path.isfile(p):
            os.environ["TINYC_LIB"] = p
            break

_CACHE = tempfile.mkdtemp(prefix="tinyc-pytest-kcache-")
os.environ["TC_CACHEDIR"] = _CACHE


def pytest_report_header(config):
    try:
        import tinyc
        return "tinyc: libtinyc %s from %s" % (tinyc.version(), tinyc.library_path)
    except ImportError as e:
        return "tinyc: %s" % e


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """TC_PY_SHARD=k/n keeps the k-th of every n tests (0-based), so n
    pytest processes at once run the suite between them (tools/test.sh
    runs two: a pytest runs on one core); tests taken alternately, not
    files, so the halves take about as long"""
    shard = os.environ.get("TC_PY_SHARD")
    if not shard:
        return
    k, n = (int(x) for x in shard.split("/"))
    config.hook.pytest_deselected(items=[t for i, t in enumerate(items) if i % n != k])
    items[:] = [t for i, t in enumerate(items) if i % n == k]
