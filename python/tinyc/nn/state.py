"""tinyc.nn.state - finding a model's tensors (tinygrad.nn.state):
get_state_dict(model) walks attributes, lists, tuples and dicts and names
every Tensor by its path ("layers.0.weight"); get_parameters(model) is the
list of those tensors (each once); load_state_dict copies values in."""
import functools
import types

from ..tensor import Tensor

__all__ = ["get_state_dict", "get_parameters", "load_state_dict"]


def get_state_dict(obj, prefix="", tensor_type=Tensor):
    if isinstance(obj, tensor_type):
        return {prefix.strip("."): obj}
    if hasattr(obj, "_asdict"):  # namedtuple
        return get_state_dict(obj._asdict(), prefix, tensor_type)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(get_state_dict(v, "%s%s." % (prefix, k), tensor_type))
        return out
    if isinstance(obj, (list, tuple)):
        out = {}
        for i, v in enumerate(obj):
            out.update(get_state_dict(v, "%s%d." % (prefix, i), tensor_type))
        return out
    if isinstance(obj, (type, types.ModuleType)) or _is_function(obj):
        return {}
    if hasattr(obj, "__dict__"):
        return get_state_dict(vars(obj), prefix, tensor_type)
    return {}


def _is_function(obj):
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                            functools.partial))


def get_parameters(obj):
    """every Tensor of obj, each once, in state-dict order"""
    seen, out = set(), []
    for t in get_state_dict(obj).values():
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def load_state_dict(model, state_dict, strict=True):
    """assigns state_dict's values (Tensors or arrays) to model's tensors"""
    mine = get_state_dict(model)
    if strict:
        missing = sorted(set(mine) - set(state_dict))
        if missing:
            raise KeyError("tinyc: load_state_dict: missing %s" % ", ".join(missing))
    for k, t in mine.items():
        if k in state_dict:
            v = state_dict[k]
            if tuple(getattr(v, "shape", ())) != t.shape:
                raise ValueError("tinyc: load_state_dict: %s has shape %s, the model %s"
                                 % (k, tuple(v.shape), t.shape))
            t.assign(v if isinstance(v, Tensor) else Tensor(v, dtype=t.dtype)).realize()
