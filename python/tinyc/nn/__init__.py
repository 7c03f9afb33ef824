"""tinyc.nn - layers in the style of tinygrad.nn (PyTorch's default
initialisation), built from Tensor ops:

    Linear(in_features, out_features, bias=True)
    Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
           groups=1, bias=True)           (also Conv1d, Conv3d)
    ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0,
                    output_padding=0, groups=1, bias=True, dilation=1)
                                          (also ConvTranspose1d, ConvTranspose3d)
    BatchNorm2d(sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1)
    LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)
    Embedding(vocab_size, embed_size)
    utils.clip_grad_norm_(parameters, max_norm, norm_type=2.0)

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
from . import optim, state, utils  # noqa: F401

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "BatchNorm2d", "BatchNorm", "LayerNorm", "Embedding", "optim",
           "state", "utils"]


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
    """convolution over the spatial dims of its kernel (2 for Conv2d, or as many
    as kernel_size has, as tinygrad's); weight (out, in/groups, *k) and bias
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups*prod(k)."""
    _nd = 2  # spatial dims an int kernel_size stands for

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True):
        self.kernel_size = (kernel_size,) * self._nd if isinstance(kernel_size, int) \
            else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        if isinstance(padding, str):
            raise NotImplementedError("tinyc: %s: string paddings are not supported"
                                      % type(self).__name__)
        shape, fan_in = self._weight_shape(in_channels, out_channels, groups)
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
        self.weight = _uniform(shape, bound)
        self.bias = _uniform((out_channels,), bound) if bias else None

    def _weight_shape(self, cin, cout, groups):
        """(weight shape, fan_in) as PyTorch's init computes it"""
        return (cout, cin // groups) + self.kernel_size, cin // groups * math.prod(self.kernel_size)

    def __call__(self, x):
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                        dilation=self.dilation, padding=self.padding)


class Conv1d(Conv2d):
    """Conv2d over one spatial dim: x (N, Cin, L)"""
    _nd = 1


class Conv3d(Conv2d):
    """Conv2d over three spatial dims: x (N, Cin, D, H, W)"""
    _nd = 3


class ConvTranspose2d(Conv2d):
    """transposed convolution (Tensor.conv_transpose2d); weight (in, out/groups, *k)
    and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = out/groups*prod(k),
    PyTorch's."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)
        self.output_padding = output_padding

    def _weight_shape(self, cin, cout, groups):
        fan_in = cout // groups * math.prod(self.kernel_size)
        return (cin, cout // groups) + self.kernel_size, fan_in

    def __call__(self, x):
        return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                                  dilation=self.dilation, padding=self.padding,
                                  output_padding=self.output_padding)


class ConvTranspose1d(ConvTranspose2d):
    """ConvTranspose2d over one spatial dim"""
    _nd = 1


class ConvTranspose3d(ConvTranspose2d):
    """ConvTranspose2d over three spatial dims"""
    _nd = 3


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

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = _buffer(self.normalized_shape, 1.0) if elementwise_affine else None
        self.bias = _buffer(self.normalized_shape, 0.0) if elementwise_affine and bias else None

    def __call__(self, x):
        k = len(self.normalized_shape)
        if x.shape[-k:] != self.normalized_shape:
            raise ValueError("tinyc: LayerNorm%s got input of shape %s"
                             % (self.normalized_shape, x.shape))
        axes = tuple(range(-k, 0))
        x = x.layernorm(axis=axes if k > 1 else -1, eps=self.eps)
        if self.weight is not None:
            x = x * self.weight
        return x + self.bias if self.bias is not None else x
