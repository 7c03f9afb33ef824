"""test_example.py - examples/mnist.py runs end to end (one small step and
the test pass) and prints its progress line and the accuracy line."""
import os
import re
import subprocess
import sys

import pytest

from helpers import requires

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/datasets/fashion-mnist"


@requires("tc_conv2d", "tc_max_pool2d", "tc_batchnorm", "tc_cross_entropy", "tc_backward",
          "tc_assign")
@pytest.mark.skipif(not os.path.isdir(DATA), reason="no Fashion-MNIST in " + DATA)
def test_mnist_example_runs():
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "mnist.py"), "--steps", "2",
                        "--batch", "16", "--test-batch", "250", "--test-images", "500",
                        "--data", DATA],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert re.match(r"step +2/2 +loss +\d+\.\d+", lines[-2]), r.stdout
    m = re.fullmatch(r"test accuracy: (\d+\.\d\d)%", lines[-1])
    assert m and 0 <= float(m.group(1)) <= 100, r.stdout
