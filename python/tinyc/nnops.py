"""nnops.py - the neural-network methods of Tensor (a mixin): matmul, linear,
softmax, layernorm, batchnorm, conv2d, pooling, binary losses, dropout (the
cross-entropies are in transformer.py). Each calls
its libtinyc composite (tc_matmul, tc_conv2d, ...), which is differentiable
and fuses like any other op; options the C call lacks are composed here from
other ops, and a missing C function raises NotImplementedError naming it."""
import math
import numbers

import numpy as np

from . import _lib
from ._lib import lib
from .dtype import dtypes


Tensor = None  # the Tensor class; tensor.py sets it once the class exists

# interpolate's modes -> tc_interp_mode (torch's names; linear at any rank)
_INTERP_MODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2}


def _positive(v, fn, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
        raise ValueError("tinyc: %s: %s must be a positive int, got %r" % (fn, what, v))
    return int(v)


def _per_axis(v, nd, what):
    """an int or nd ints -> a tuple of nd ints"""
    if isinstance(v, (tuple, list)):
        if len(v) != nd:
            raise ValueError("tinyc: %s must be an int or %d ints, got %r" % (what, nd, v))
        vals = tuple(v)
    else:
        vals = (v,) * nd
    for x in vals:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise TypeError("tinyc: %s must be an int or %d ints, got %r" % (what, nd, v))
    return tuple(int(x) for x in vals)


def _conv_padding(padding, nd):
    """conv2d's padding as ((before, after) per spatial dim, in order): an int,
    one int per dim, or tinygrad's flat 2*nd form, last dim first"""
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * nd:
        flat = [int(v) for v in padding]
        return tuple((flat[2 * i], flat[2 * i + 1]) for i in reversed(range(nd)))
    return tuple((p, p) for p in _per_axis(padding, nd, "padding"))


class NNOps:
    """composite ops; mixed into Tensor"""
    __slots__ = ()

    # ---- composites (C when the library has them) ---------------------------

    def matmul(self, w):
        fn = _lib.need("tc_matmul", "Tensor.matmul")
        if not isinstance(w, Tensor):
            w = self._operand(w)[1]
        if self.ndim == 0 or w.ndim == 0:
            raise ValueError("tinyc: matmul needs tensors of at least 1 dim, got %s @ %s"
                             % (self.shape, w.shape))
        return self._wrap(fn(self._h, w._h))

    dot = matmul

    def linear(self, weight, bias=None):
        """self @ weight + bias (weight is (in, out), as tinygrad's)."""
        if weight.ndim == 2 and _lib.has("tc_linear"):  # tc_linear takes torch's (out, in)
            w = weight.transpose()  # a named temporary: it must outlive the call
            return self._wrap(lib.tc_linear(self._h, w._h, bias._h if bias is not None else None))
        x = self * weight if weight.ndim == 1 else self.matmul(weight)
        return x + bias if bias is not None else x

    def sequential(self, layers):
        x = self
        for f in layers:
            x = f(x)
        return x

    def softmax(self, axis=-1):
        fn = _lib.need("tc_softmax", "Tensor.softmax")
        return self._wrap(fn(self._h, self._axis(axis)))

    def log_softmax(self, axis=-1):
        fn = _lib.need("tc_log_softmax", "Tensor.log_softmax")
        return self._wrap(fn(self._h, self._axis(axis)))

    def layernorm(self, axis=-1, eps=1e-5):
        """(x - mean) / sqrt(var + eps) over axis, an int or a tuple (no weights,
        like tinygrad). tc_layernorm normalizes the trailing dims axis..ndim-1;
        other sets of axes are composed from reduces."""
        axes = self._axes(axis)
        if axes and axes == tuple(range(axes[0], self.ndim)):
            fn = _lib.need("tc_layernorm", "Tensor.layernorm")
            return self._wrap(fn(self._h, axes[0], float(eps)))
        y = self - self.mean(axes, keepdim=True)
        return y * ((y * y).mean(axes, keepdim=True) + eps).rsqrt()

    def batchnorm(self, weight, bias, mean, invstd, axis=1):
        shape = [1] * self.ndim
        shape[self._axis(axis)] = self.shape[self._axis(axis)]
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        ret = x * (invstd.reshape(shape) if invstd.ndim == 1 else invstd)
        return ret + bias.reshape(shape) if bias is not None else ret

    def conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0):
        """x (N, Cin, *spatial) with weight (Cout, Cin/groups, *k), any number of
        spatial dims (tinygrad's conv2d takes 3-d and 5-d too), tinygrad's
        argument order. stride, dilation: int or one per spatial dim; padding:
        int, one per spatial dim, or tinygrad's flat per-side form, last dim
        first ((left, right, top, bottom) for 2-d). tc_conv2d for the plain 2-d
        case, tc_conv2d_ex for the rest of 2-d with even padding (one dilation),
        tc_conv_nd otherwise."""
        if not isinstance(weight, Tensor):
            raise TypeError("tinyc: conv2d: weight must be a Tensor")
        nd = self.ndim - 2
        if nd < 1 or weight.ndim != self.ndim:
            raise ValueError("tinyc: conv2d needs x (N, Cin, *spatial) and a weight of the same "
                             "rank, got %s and %s" % (self.shape, weight.shape))
        groups = _positive(groups, "conv2d", "groups")
        st, dil = _per_axis(stride, nd, "stride"), _per_axis(dilation, nd, "dilation")
        sides = _conv_padding(padding, nd)  # ((before, after) per spatial dim, in order)
        bh = bias._h if bias is not None else None
        if nd == 2 and all(b == a >= 0 for b, a in sides) and dil[0] == dil[1]:
            (py, _), (px, _) = sides
            if groups == 1 and st[0] == st[1] and py == px and dil[0] == 1:
                fn = _lib.need("tc_conv2d", "Tensor.conv2d")
                return self._wrap(fn(self._h, weight._h, bh, st[0], py))
            fn = _lib.need("tc_conv2d_ex", "Tensor.conv2d with groups, dilation or (h, w) pairs")
            return self._wrap(fn(self._h, weight._h, bh, st[0], st[1], py, px, dil[0], groups))
        fn = _lib.need("tc_conv_nd", "Tensor.conv2d on %d spatial dims" % nd)
        flat = [v for side in sides for v in side]
        return self._wrap(fn(self._h, weight._h, bh, nd, _lib.int64_array(st),
                             _lib.int64_array(flat), _lib.int64_array(dil), groups))

    def conv_transpose2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0,
                         output_padding=0):
        """the transposed convolution (PyTorch's conv_transpose1d/2d/3d, tinygrad's
        name and argument order): x (N, Cin, *spatial), weight (Cin, Cout/groups,
        *k), any number of spatial dims. stride, dilation, padding,
        output_padding: int or one per spatial dim (tc_conv_transpose_nd)."""
        if not isinstance(weight, Tensor):
            raise TypeError("tinyc: conv_transpose2d: weight must be a Tensor")
        nd = self.ndim - 2
        if nd < 1 or weight.ndim != self.ndim:
            raise ValueError("tinyc: conv_transpose2d needs x (N, Cin, *spatial) and a weight "
                             "of the same rank, got %s and %s" % (self.shape, weight.shape))
        fn = _lib.need("tc_conv_transpose_nd", "Tensor.conv_transpose2d")
        groups = _positive(groups, "conv_transpose2d", "groups")
        vals = [_lib.int64_array(_per_axis(v, nd, name)) for v, name in
                ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
                 (dilation, "dilation"))]
        return self._wrap(fn(self._h, weight._h, bias._h if bias is not None else None, nd,
                             *vals, groups))

    def _pool_nd(self, name, kernel_size, stride, dilation, padding, pad_value):
        """(x padded, nd, fn args) for tc_max_pool_nd / tc_avg_pool_nd: a kernel
        of n ints pools the last n dims (tinygrad's pools work for more than
        2-d), an int the last 2; stride, dilation, padding: an int or n ints"""
        nd = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
        if nd < 1 or self.ndim < nd:
            raise ValueError("tinyc: %s: a kernel of %d dims needs at least that many, got %s"
                             % (name, nd, self.shape))
        k = _per_axis(kernel_size, nd, "%s: kernel_size" % name)
        st = _per_axis(stride if stride is not None else k, nd, "%s: stride" % name)
        dil = _per_axis(dilation, nd, "%s: dilation" % name)
        pad = _per_axis(padding, nd, "%s: padding" % name)
        x = self
        if any(pad):
            x = x.pad(((0, 0),) * (self.ndim - nd) + tuple((p, p) for p in pad), value=pad_value)
        args = (nd, _lib.int64_array(k), _lib.int64_array(st), _lib.int64_array(dil))
        square = nd == 2 and k[0] == k[1] and st[0] == st[1] and dil == (1, 1)
        return x, args, pad, square

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0):
        """the max of each window of the last 2 dims, or of as many as
        kernel_size has (padding with -inf, as torch); tc_max_pool2d for square
        2-d windows, tc_max_pool_nd for the rest"""
        x, args, _, square = self._pool_nd("max_pool2d", kernel_size, stride, dilation, padding,
                                           -math.inf)
        if square:
            fn = _lib.need("tc_max_pool2d", "Tensor.max_pool2d")
            return self._wrap(fn(x._h, int(args[1][0]), int(args[2][0])))
        fn = _lib.need("tc_max_pool_nd", "Tensor.max_pool2d with non-square or dilated windows")
        return self._wrap(fn(x._h, *args))

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0,
                   count_include_pad=True):
        """the mean of each window of the last 2 dims, or of as many as
        kernel_size has (tc_avg_pool2d for square 2-d windows, tc_avg_pool_nd for
        the rest); without count_include_pad the padded zeros are not counted:
        the window means of x over those of ones"""
        x, args, pad, square = self._pool_nd("avg_pool2d", kernel_size, stride, dilation,
                                             padding, 0.0)
        if square and (count_include_pad or not any(pad)):
            fn = _lib.need("tc_avg_pool2d", "Tensor.avg_pool2d")
            return self._wrap(fn(x._h, int(args[1][0]), int(args[2][0])))
        fn = _lib.need("tc_avg_pool_nd", "Tensor.avg_pool2d with non-square or dilated windows")
        mean = self._wrap(fn(x._h, *args))
        if count_include_pad or not any(pad):
            return mean
        nd = args[0]
        ones = Tensor.ones(*self.shape[-nd:], device=self.device).pad(tuple((p, p) for p in pad))
        return mean / self._wrap(fn(ones._h, *args))

    def binary_crossentropy(self, y):
        return (-y * self.log() - (1 - y) * (1 - self).log()).mean()

    def binary_crossentropy_logits(self, y):
        return (self.maximum(0) - y * self + (1 + self.abs().neg().exp()).log()).mean()

    def dropout(self, p=0.5):
        """zeroes each element with probability p and scales the rest by 1/(1-p);
        only while Tensor.training (tinygrad's rule)."""
        if not 0 <= p <= 1:
            raise ValueError("tinyc: dropout: p must be in [0, 1], got %r" % (p,))
        if not Tensor.training or p == 0:
            return self
        if p < 1 and _lib.has("tc_dropout"):
            return self._wrap(lib.tc_dropout(self._h, float(p), True))
        if p == 1:
            return self * 0
        keep = Tensor.rand(*self.shape, device=self.device) >= p
        return keep.where(self, 0) * (1.0 / (1.0 - p))

    def one_hot(self, num_classes):
        return (self.unsqueeze(-1) == Tensor.arange(num_classes, device=self.device)).cast(
            dtypes.int32)

    def interpolate(self, size, mode="linear", align_corners=False):
        """tinygrad's interpolate: the last len(size) axes resampled to size
        (torch's F.interpolate(x, size=size[-k:]) for mode "nearest",
        "nearest-exact", "linear"/"bilinear"/"trilinear"); tc_interpolate."""
        fn = _lib.need("tc_interpolate", "Tensor.interpolate")
        if isinstance(size, numbers.Integral) and not isinstance(size, bool):
            size = (size,)
        if not isinstance(size, (tuple, list)) or not all(
                isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in size):
            raise TypeError("tinyc: interpolate: size must be a tuple of ints, got %r" % (size,))
        if mode not in _INTERP_MODES:
            raise ValueError("tinyc: interpolate: mode must be one of %s, got %r"
                             % (", ".join(sorted(_INTERP_MODES)), mode))
        return self._wrap(fn(self._h, len(size), _lib.int64_array([int(v) for v in size]),
                             _INTERP_MODES[mode], bool(align_corners)))
