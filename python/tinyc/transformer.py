"""transformer.py - the transformer methods of Tensor (a mixin): erf, gelu
(both forms), tril, triu, masked_fill and scaled_dot_product_attention, each
one libtinyc call (tc_erf, tc_gelu, tc_tril, tc_triu, tc_masked_fill,
tc_scaled_dot_product_attention_ex), differentiable and fused like any other
op. Python-side misuse raises TypeError / ValueError; what the C call rejects
raises TinycError with its message."""
import numbers

import numpy as np

from . import _lib
from .dtype import dtypes

Tensor = None  # the Tensor class; tensor.py sets it once the class exists

_GELU_FORMS = {"tanh": True, "none": False}


def _int(v, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError("tinyc: %s must be an int, got %r" % (what, v))
    return int(v)


class TransformerOps:
    """transformer ops; mixed into Tensor"""
    __slots__ = ()

    def erf(self):
        fn = _lib.need("tc_erf", "Tensor.erf")
        return self._wrap(fn(self._h))

    def gelu(self, approximate="tanh"):
        """x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh',
        tinygrad's gelu and the default here) or x/2 (1 + erf(x/sqrt 2))
        (approximate='none', torch's default)."""
        if approximate not in _GELU_FORMS:
            raise ValueError("tinyc: gelu: approximate must be 'tanh' or 'none', got %r"
                             % (approximate,))
        fn = _lib.need("tc_gelu", "Tensor.gelu")
        return self._wrap(fn(self._h, _GELU_FORMS[approximate]))

    def tril(self, diagonal=0):
        fn = _lib.need("tc_tril", "Tensor.tril")
        return self._wrap(fn(self._h, _int(diagonal, "tril: diagonal")))

    def triu(self, diagonal=0):
        fn = _lib.need("tc_triu", "Tensor.triu")
        return self._wrap(fn(self._h, _int(diagonal, "triu: diagonal")))

    def masked_fill(self, mask, value):
        """self with value where mask (bool, broadcast to self's shape) is true."""
        fn = _lib.need("tc_masked_fill", "Tensor.masked_fill")
        if not isinstance(mask, Tensor):
            mask = Tensor(np.asarray(mask, dtype=bool), device=self.device)
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise ValueError("tinyc: masked_fill: value must be a scalar or a 0-d "
                                 "tensor, got shape %s" % (value.shape,))
            value = value.item()
        if not isinstance(value, (numbers.Real, np.number)) or isinstance(value, complex):
            raise TypeError("tinyc: masked_fill: value must be a number, got %r" % (value,))
        return self._wrap(fn(self._h, mask._h, float(value)))

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False):
        """softmax(self @ key^T / sqrt(E) + mask) @ value (tinygrad's and torch's
        signature): self (..., L, E), key (..., S, E), value (..., S, Ev). A bool
        attn_mask keeps the scores where true, a float one is added; is_causal
        masks as tril of ones (L, S). dropout_p drops attention weights only
        while Tensor.training (tinygrad's rule)."""
        fn = _lib.need("tc_scaled_dot_product_attention_ex",
                       "Tensor.scaled_dot_product_attention")
        for name, t in (("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError("tinyc: scaled_dot_product_attention: %s must be a Tensor"
                                % name)
        if attn_mask is not None and not isinstance(attn_mask, Tensor):
            attn_mask = Tensor(np.asarray(attn_mask), device=self.device)
        if not 0 <= dropout_p <= 1:
            raise ValueError("tinyc: scaled_dot_product_attention: dropout_p must be in "
                             "[0, 1], got %r" % (dropout_p,))
        p = float(dropout_p) if Tensor.training else 0.0
        m = attn_mask._h if attn_mask is not None else None
        return self._wrap(fn(self._h, key._h, value._h, m, bool(is_causal), p))

    # ---- losses ---------------------------------------------------------------

    def sparse_categorical_crossentropy(self, Y, ignore_index=-1, label_smoothing=0.0,
                                        reduction="mean"):
        """cross-entropy of logits self (..., C) against int class ids Y (...)
        (tinygrad's: ignore_index -1 by default), with label_smoothing and
        reduction 'mean' | 'sum' | 'none' (then shaped as Y)."""
        return _cross_entropy(self, Y, ignore_index, label_smoothing, reduction,
                              "sparse_categorical_crossentropy")

    def cross_entropy(self, Y, reduction="mean", label_smoothing=0.0, ignore_index=-100):
        """torch.nn.functional.cross_entropy: logits self (N, C) or (N, C, d...)
        with the classes in dim 1; Y integer class ids (N) or (N, d...)
        (ignore_index -100 by default) or float class probabilities shaped as
        self."""
        if not isinstance(Y, Tensor):
            Y = Tensor(np.asarray(Y), device=self.device)
        x = self.unsqueeze(0) if self.ndim == 1 else self
        if Y.dtype.is_float:
            if Y.shape != self.shape:
                raise ValueError("tinyc: cross_entropy: probabilities %s must have the "
                                 "logits' shape %s" % (Y.shape, self.shape))
            y = Y.unsqueeze(0) if self.ndim == 1 else Y
            return _soft_cross_entropy(x, y, reduction, label_smoothing, self.ndim == 1)
        y = Y.unsqueeze(0) if self.ndim == 1 else Y
        if x.ndim > 2:  # classes last: (N, d..., C)
            x = x.permute((0,) + tuple(range(2, x.ndim)) + (1,))
        out = _cross_entropy(x, y, ignore_index, label_smoothing, reduction, "cross_entropy")
        return out.reshape(()) if self.ndim == 1 and reduction == "none" else out


_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}  # tc_reduction


def _check_reduction(reduction, api):
    if reduction not in _REDUCTIONS:
        raise ValueError("tinyc: %s: reduction must be 'mean', 'sum' or 'none', got %r"
                         % (api, reduction))


def _cross_entropy(x, Y, ignore_index, label_smoothing, reduction, api):
    """x (..., C) logits, Y (...) int ids: tc_cross_entropy_ex over (N, C)."""
    fn = _lib.need("tc_cross_entropy_ex", "Tensor." + api)
    _check_reduction(reduction, api)
    if not isinstance(Y, Tensor):
        Y = Tensor(np.asarray(Y), device=x.device)
    if Y.dtype.is_float or Y.dtype == dtypes.bool:
        raise TypeError("tinyc: %s: labels must be integer class ids, got %s"
                        % (api, Y.dtype.name))
    if x.ndim < 1 or Y.shape != x.shape[:-1]:
        raise ValueError("tinyc: %s: logits %s and labels %s: labels must have the logits' "
                         "shape without the class dim" % (api, x.shape, Y.shape))
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError("tinyc: %s: label_smoothing must be in [0, 1], got %r"
                         % (api, label_smoothing))
    C = x.shape[-1]
    x2 = x.reshape(-1, C) if x.ndim != 2 else x
    y1 = Y.reshape(-1) if Y.ndim != 1 else Y
    out = x._wrap(fn(x2._h, y1._h, _REDUCTIONS[reduction], _int(ignore_index, "ignore_index"),
                     float(label_smoothing)))
    return out.reshape(Y.shape) if reduction == "none" and Y.ndim != 1 else out


def _soft_cross_entropy(x, y, reduction, label_smoothing, squeeze):
    """torch's cross-entropy against class probabilities y, classes in dim 1."""
    _check_reduction(reduction, "cross_entropy")
    C = x.shape[1]
    if label_smoothing:
        y = y * (1 - label_smoothing) + label_smoothing / C
    rows = -(x.log_softmax(1) * y).sum(1)
    if reduction == "none":
        return rows.reshape(()) if squeeze else rows
    total = rows.sum()
    return total / (rows.numel() or float("nan")) if reduction == "mean" else total
