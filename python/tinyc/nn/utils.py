"""tinyc.nn.utils - torch.nn.utils.clip_grad_norm_ over libtinyc's
tc_clip_grad_norm: the norm of every gradient taken together, and the
gradients scaled in place (lazily: they run with the next optimizer step)
so that their norm is at most max_norm."""
import math
import numbers

from .. import _lib
from ..tensor import Tensor

__all__ = ["clip_grad_norm_"]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scales the gradients of parameters (a Tensor or an iterable of them) by
    min(max_norm / (total + 1e-6), 1), where total is their norm_type-norm
    (2, float('inf') or any q > 0) taken together, and returns total as a 0-d
    float32 Tensor (lazy: realize it with the step or call .item()).
    Parameters without a gradient are skipped."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError("tinyc: clip_grad_norm_: parameters[%d] is a %s, not a Tensor"
                            % (i, type(p).__name__))
    for name, v in (("max_norm", max_norm), ("norm_type", norm_type)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError("tinyc: clip_grad_norm_: %s must be a number, got %r" % (name, v))
    fn = _lib.need("tc_clip_grad_norm", "nn.utils.clip_grad_norm_")
    q = math.inf if norm_type in ("inf", math.inf) else float(norm_type)
    hs = _lib.handle_array([p._h for p in params])
    return Tensor._wrap(fn(hs, len(params), float(max_norm), q))
