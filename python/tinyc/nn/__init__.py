"""tinyc.nn - layers in the style of tinygrad.nn (PyTorch's default
initialisation), built from Tensor ops:

    Linear(in_features, out_features, bias=True)
    Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
           groups=1, bias=True)
    BatchNorm2d(sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1)
    LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)

A layer is called like a function (`layer(x)`); its tensors are attributes,
so tinyc.nn.state.get_parameters(model) finds them. Training needs the C
library's autograd (tc_backward, tc_grad) and tc_assign (BatchNorm's running
statistics, the optimizers).
"""
import math

import numpy as np

from .. import _lib
from ..dtype import dtypes
from ..tensor import Tensor
from . import optim, state  # noqa: F401

__all__ = ["Linear", "Conv2d", "BatchNorm2d", "BatchNorm", "LayerNorm", "optim", "state"]


def _buffer(shape, value, dtype=dtypes.float32, requires_grad=None):
    """a realized tensor of shape filled with value (uploaded: no kernel)"""
    return Tensor(np.full(shape, value, dtype=dtype.np), requires_grad=requires_grad)


def _uniform(shape, bound):
    """U(-bound, bound), realized, as PyTorch's kaiming_uniform_(a=sqrt(5)) gives
    for bound = 1/sqrt(fan_in)."""
    return Tensor.uniform(*shape, low=-bound, high=bound).realize()


class Linear:
    """y = x @ weight.T + bias; weight (out, in), both U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(self, in_features, out_features, bias=True):
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def __call__(self, x):
        if _lib.has("tc_linear"):
            return Tensor._wrap(_lib.lib.tc_linear(
                x._h, self.weight._h, self.bias._h if self.bias is not None else None))
        return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
    """2-d convolution; weight (out, in/groups, kh, kw) and bias U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) with fan_in = in/groups*kh*kw."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True):
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) \
            else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        if isinstance(padding, str):
            raise NotImplementedError("tinyc: Conv2d: string paddings are not supported")
        fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
        self.weight = _uniform((out_channels, in_channels // groups) + self.kernel_size, bound)
        self.bias = _uniform((out_channels,), bound) if bias else None

    def __call__(self, x):
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                        dilation=self.dilation, padding=self.padding)


def _nograd(t):
    """t cut from the autograd graph when the library can do that."""
    return t.detach() if _lib.has("tc_detach") else t


class BatchNorm:
    """Batch normalisation over axis 1 (PyTorch's BatchNorm2d): in training
    (Tensor.training) normalises with the batch's mean and biased variance and
    updates running_mean/running_var (momentum, unbiased variance) with assign;
    in evaluation it uses the running statistics."""

    def __init__(self, sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1):
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.num_features = sz
        self.weight = _buffer((sz,), 1.0) if affine else None
        self.bias = _buffer((sz,), 0.0) if affine else None
        self.num_batches_tracked = _buffer((1,), 0, dtypes.int32, requires_grad=False)
        self.running_mean = self.running_var = None
        if track_running_stats:
            self.running_mean = _buffer((sz,), 0.0, requires_grad=False)
            self.running_var = _buffer((sz,), 1.0, requires_grad=False)

    def calc_stats(self, x):
        axes = tuple(a for a in range(x.ndim) if a != 1)
        batch_mean = x.mean(axis=axes)
        y = x - batch_mean.reshape((1, -1) + (1,) * (x.ndim - 2))
        batch_var = (y * y).mean(axis=axes)
        return batch_mean, batch_var

    def __call__(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ValueError("tinyc: BatchNorm: input %s does not have %d channels in dim 1"
                             % (x.shape, self.num_features))
        if _lib.has("tc_batchnorm") and x.ndim in (2, 4) and \
                (self.track_running_stats or Tensor.training):
            training = Tensor.training
            rm = self.running_mean if self.track_running_stats else None
            rv = self.running_var if self.track_running_stats else None
            out = Tensor._wrap(_lib.lib.tc_batchnorm(
                x._h, self.weight._h if self.weight is not None else None,
                self.bias._h if self.bias is not None else None, rm._h if rm is not None else None,
                rv._h if rv is not None else None, training, float(self.momentum), float(self.eps)))
            if training and self.track_running_stats:
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
            return out
        if Tensor.training or not self.track_running_stats:
            batch_mean, batch_var = self.calc_stats(x)
            if Tensor.training and self.track_running_stats:
                m, n = self.momentum, x.numel() // x.shape[1]
                self.running_mean.assign((1 - m) * self.running_mean + m * _nograd(batch_mean))
                self.running_var.assign((1 - m) * self.running_var +
                                        m * n / max(n - 1, 1) * _nograd(batch_var))
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        else:
            batch_mean, batch_var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, batch_mean, (batch_var + self.eps).rsqrt())


BatchNorm2d = BatchNorm


class Embedding:
    """a lookup table: Embedding(n, d)(idx) is weight[idx], shape idx.shape + (d,);
    weight initialised as tinygrad's glorot_uniform; one kernel forward (fused with
    what reads it) and one for the gradient (tc_index)."""

    def __init__(self, vocab_size, embed_size):
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        bound = math.sqrt(6.0 / (vocab_size + embed_size))
        self.weight = _uniform((vocab_size, embed_size), bound)

    def __call__(self, idx):
        if not isinstance(idx, Tensor):
            idx = Tensor(idx)
        return self.weight[idx]


class LayerNorm:
    """layer normalisation over the trailing normalized_shape dims."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = _buffer(self.normalized_shape, 1.0)
            self.bias = _buffer(self.normalized_shape, 0.0)
        else:
            self.weight = self.bias = None

    def __call__(self, x):
        k = len(self.normalized_shape)
        if x.shape[-k:] != self.normalized_shape:
            raise ValueError("tinyc: LayerNorm%s got input of shape %s"
                             % (self.normalized_shape, x.shape))
        axes = tuple(range(-k, 0))
        x = x.layernorm(axis=axes if k > 1 else -1, eps=self.eps)
        return x * self.weight + self.bias if self.elementwise_affine else x
