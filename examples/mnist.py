#!/usr/bin/env python3
"""mnist.py - tinygrad's beautiful_mnist convnet, trained with tinyc from Python.

The model (two 5x5 and two 3x3 convolutions with ReLU, BatchNorm and 2x2 max
pooling, then a linear layer) and the recipe are those of the C example and
of tinygrad's examples/beautiful_mnist.py: Adam with lr 1e-3, batches of 512
drawn at random, raw 0-255 pixels (no normalisation), Fashion-MNIST read
from the four gzip'ed IDX files with gzip + numpy.

    python3 examples/mnist.py [--model conv|mlp] [--steps 70] [--batch 512] [--lr 1e-3]
                              [--seed 42] [--device CPU] [--jit 1]
                              [--data /usr/share/datasets/fashion-mnist]

--model mlp is the C example's small model: Linear(784,128), ReLU,
Linear(128,10) on the flattened pixels (defaults: 200 steps, batch 128).
With --jit 1 (the default) the training step is a TinyJit: its kernels are
captured on the second step and replayed after.

Prints one progress line per step and `test accuracy: NN.NN%` at the end
(over the 10000 test images; --test-images N for the first N only).
Run from a checkout (python/ is added to sys.path) or with tinyc installed;
TINYC_LIB may point at libtinyc.so.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from tinyc import GlobalCounters, Tensor, TinyJit, nn  # noqa: E402


def read_idx(path):
    """an IDX file (gzip'ed or plain) as a numpy array of its shape"""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError("%s: not an IDX file" % path)
    dtype = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
             0x0E: ">f8"}[data[2]]
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    arr = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise ValueError("%s: %d values for shape %s" % (path, arr.size, shape))
    return arr.reshape(shape)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError("%s: no %s(.gz)" % (data_dir, stem))


def load_mnist(data_dir):
    """(X_train (N,1,28,28) uint8, Y_train (N) uint8, X_test, Y_test)"""
    x_tr = read_idx(find(data_dir, "train-images-idx3-ubyte"))
    y_tr = read_idx(find(data_dir, "train-labels-idx1-ubyte"))
    x_te = read_idx(find(data_dir, "t10k-images-idx3-ubyte"))
    y_te = read_idx(find(data_dir, "t10k-labels-idx1-ubyte"))
    return x_tr.reshape(-1, 1, 28, 28), y_tr, x_te.reshape(-1, 1, 28, 28), y_te


class MLP:
    def __init__(self):
        self.layers = [lambda x: x.flatten(1), nn.Linear(784, 128), Tensor.relu,
                       nn.Linear(128, 10)]

    def __call__(self, x):
        return x.sequential(self.layers)


class Model:
    def __init__(self):
        self.layers = [
            nn.Conv2d(1, 32, 5), Tensor.relu,
            nn.Conv2d(32, 32, 5), Tensor.relu,
            nn.BatchNorm2d(32), Tensor.max_pool2d,
            nn.Conv2d(32, 64, 3), Tensor.relu,
            nn.Conv2d(64, 64, 3), Tensor.relu,
            nn.BatchNorm2d(64), Tensor.max_pool2d,
            lambda x: x.flatten(1), nn.Linear(576, 10)]

    def __call__(self, x):
        return x.sequential(self.layers)


def batch_tensors(x, y):
    """pixels go up as uint8 and become float32 in the graph; labels as int32"""
    return Tensor(np.ascontiguousarray(x)).float(), Tensor(y.astype(np.int32))


def test_accuracy(model, x_test, y_test, batch):
    correct = 0
    for i in range(0, len(x_test), batch):
        x, y = batch_tensors(x_test[i:i + batch], y_test[i:i + batch])
        correct += int((model(x).argmax(axis=1) == y).sum().item())
    return 100.0 * correct / len(x_test)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("conv", "mlp"), default="conv",
                    help="beautiful_mnist's convnet (default) or a small MLP")
    ap.add_argument("--steps", type=int, default=None, help="training steps (conv: 70, mlp: 200)")
    ap.add_argument("--batch", type=int, default=None, help="batch size (conv: 512, mlp: 128)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    ap.add_argument("--seed", type=int, default=42, help="seed of the init and the batches")
    ap.add_argument("--device", default=None,
                    help="the device every tensor goes to (sets TC_DEVICE; default CPU)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="folder with the four (gzip'ed) IDX files")
    ap.add_argument("--jit", type=int, choices=(0, 1), default=1,
                    help="1: capture the step's kernels once and replay them (TinyJit)")
    ap.add_argument("--test-batch", type=int, default=1000, help="batch size of the test pass")
    ap.add_argument("--test-images", type=int, default=0,
                    help="test on the first N test images only (default: all)")
    args = ap.parse_args(argv)
    if args.device:
        os.environ["TC_DEVICE"] = args.device  # read by libtinyc at its first call
    if args.steps is None:
        args.steps = 70 if args.model == "conv" else 200
    if args.batch is None:
        args.batch = 512 if args.model == "conv" else 128
    if args.steps < 0 or args.batch <= 0 or args.test_batch <= 0:
        ap.error("--steps must be >= 0, --batch and --test-batch > 0")

    x_train, y_train, x_test, y_test = load_mnist(args.data)
    print("%s: %d training images from %s, %d steps of batch %d, Adam lr %g, seed %d"
          % (args.model, len(x_train), args.data, args.steps, args.batch, args.lr, args.seed))
    Tensor.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Model() if args.model == "conv" else MLP()
    opt = nn.optim.Adam(nn.state.get_parameters(model), lr=args.lr)

    def train_step(x, y):
        with Tensor.train():
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y)
            loss.backward()
            opt.step()
        return loss
    step_fn = TinyJit(train_step) if args.jit else train_step

    for step in range(1, args.steps + 1):
        GlobalCounters.reset()
        t0 = time.perf_counter()
        idx = rng.integers(0, len(x_train), args.batch)
        x, y = batch_tensors(x_train[idx], y_train[idx])
        loss_value = step_fn(x, y).item()
        dt = time.perf_counter() - t0
        print("step %4d/%d  loss %7.4f  %6.2f s  %4d kernels  %8.2f GFLOP/s" % (
            step, args.steps, loss_value, dt, GlobalCounters.kernel_count,
            GlobalCounters.global_ops / max(dt, 1e-9) * 1e-9), flush=True)

    n_test = args.test_images if args.test_images > 0 else len(x_test)
    acc = test_accuracy(model, x_test[:n_test], y_test[:n_test], args.test_batch)
    print("test accuracy: %.2f%%" % acc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
