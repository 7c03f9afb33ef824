"""tinyc.nn.state - finding, saving and loading a model's tensors
(tinygrad.nn.state): get_state_dict(model) walks attributes, lists, tuples
and dicts and names every Tensor by its path ("layers.0.weight");
get_parameters(model) is the list of those tensors (each once);
load_state_dict copies values in; safe_save / safe_load write and read the
safetensors format (the same files as tinygrad's and libtinyc's
tc_safe_save)."""
import functools
import json
import struct
import types

import numpy as np

from ..dtype import dtypes
from ..tensor import Tensor

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load"]

_SAFE_DTYPES = {"F32": dtypes.float32, "F16": dtypes.float16, "I32": dtypes.int32,
                "I64": dtypes.int64, "U8": dtypes.uint8, "BOOL": dtypes.bool,
                "I8": dtypes.int8, "I16": dtypes.int16, "U16": dtypes.uint16,
                "U32": dtypes.uint32, "U64": dtypes.uint64, "F64": dtypes.float64,
                "BF16": dtypes.bfloat16}
_SAFE_NAMES = {v.name: k for k, v in _SAFE_DTYPES.items()}


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


def safe_save(tensors, fn, metadata=None):
    """writes {name: Tensor} to the safetensors file fn"""
    header, arrays, offset = {}, [], 0
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError("tinyc: safe_save: %s is not a Tensor" % name)
        a = t.numpy().astype(t.dtype.np.newbyteorder("<"), copy=False)
        if t.dtype is dtypes.bfloat16:  # float32 values that are bfloat16s: their top halves
            a = (a.view(np.uint32) >> 16).astype("<u2")
        header[name] = {"dtype": _SAFE_NAMES[t.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        arrays.append(a)
        offset += a.nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(fn, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays:
            f.write(a.tobytes())


def safe_load(fn):
    """{name: Tensor} from the safetensors file fn"""
    with open(fn, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("tinyc: safe_load: %s is too short" % fn)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("tinyc: safe_load: %s: header of %d bytes does not fit" % (fn, n))
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _SAFE_DTYPES:
            raise ValueError("tinyc: safe_load: %s has dtype %s" % (name, info["dtype"]))
        dt = _SAFE_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        if not 0 <= b <= e <= len(data) - 8 - n:
            raise ValueError("tinyc: safe_load: %s: offsets %s out of the file" % (name, [b, e]))
        if dt is dtypes.bfloat16:  # the bits, widened to float32 exactly
            a = np.frombuffer(data, dtype="<u2", count=(e - b) // 2, offset=8 + n + b)
            a = (a.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
            out[name] = Tensor(a, dtype=dt)
            continue
        a = np.frombuffer(data, dtype=dt.np.newbyteorder("<"), count=(e - b) // dt.itemsize,
                          offset=8 + n + b).reshape(info["shape"])
        out[name] = Tensor(a.astype(dt.np, copy=False))
    return out
