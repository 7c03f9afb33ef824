"""movement.py - the movement methods of Tensor (a mixin): reshape, permute,
transpose, expand, pad, shrink, flip, squeeze/unsqueeze, flatten, repeat,
cat/stack/split and __getitem__. All are views (libtinyc's movement ops make
no copies) except contiguous(); cat pads each part and adds them, so it
fuses into its consumer."""
import numbers

import numpy as np

from . import _lib
from ._lib import lib
from ._util import AxisError, IndexTypeError, RepeatedAxisError, _shape_args
from .dtype import dtypes


Tensor = None  # the Tensor class; tensor.py sets it once the class exists


class TinycIndexError(_lib.TinycError, IndexError):
    """An index outside its axis that the library found (index_copy_): the
    IndexError torch raises, and a TinycError."""


class Movement:
    """movement ops; mixed into Tensor"""
    __slots__ = ()

    # ---- movement ---------------------------------------------------------

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        out = []
        for i, s in enumerate(shape):
            if s is None:  # tinygrad: None keeps that dim
                if i >= self.ndim:
                    raise ValueError("tinyc: reshape: None at dim %d, but the tensor has %d dims"
                                     % (i, self.ndim))
                s = self.shape[i]
            if isinstance(s, bool) or not isinstance(s, numbers.Integral):
                raise TypeError("tinyc: reshape sizes must be ints, got %r" % (s,))
            out.append(int(s))
        n, arr = _lib.shape_arg(out)
        return self._wrap(lib.tc_reshape(self._h, n, arr))

    view = reshape

    def permute(self, *order):
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        if len(order) != self.ndim:
            raise ValueError("tinyc: permute needs %d axes, got %d" % (self.ndim, len(order)))
        axes = [self._axis(a) for a in order]
        if len(set(axes)) != len(axes):
            raise RepeatedAxisError("tinyc: permute order %r repeats an axis" % (tuple(order),))
        return self._wrap(lib.tc_permute(self._h, _lib.int_array(axes)))

    def transpose(self, dim0=1, dim1=0):
        a, b = self._axis(dim0), self._axis(dim1)
        return self._wrap(lib.tc_transpose(self._h, a, b))

    @property
    def T(self):
        return self.permute(tuple(range(self.ndim))[::-1])

    def expand(self, *shape):
        shape = _shape_args(shape, "expand") if not (
            len(shape) == 1 and isinstance(shape[0], (tuple, list))) else tuple(shape[0])
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, numbers.Integral):
                raise TypeError("tinyc: expand sizes must be ints, got %r" % (s,))
        n, arr = _lib.shape_arg([int(s) for s in shape])
        return self._wrap(lib.tc_expand(self._h, n, arr))

    def expand_as(self, other):
        return self.expand(other.shape)

    def _pairs(self, arg, what):
        """tinygrad's ((before, after) or None per dim) -> [(b, e)] * ndim; also
        PyTorch's flat (last_before, last_after, prev_before, ...) form."""
        arg = tuple(arg)
        if arg and all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in arg):
            if len(arg) % 2 or len(arg) // 2 > self.ndim:
                raise ValueError("tinyc: %s: a flat padding needs 2 values per dim, at most %d"
                                 % (what, 2 * self.ndim))
            k = len(arg) // 2
            pairs = [(0, 0)] * (self.ndim - k) + [
                (int(arg[2 * i]), int(arg[2 * i + 1])) for i in reversed(range(k))]
            return pairs
        if len(arg) != self.ndim:
            raise ValueError("tinyc: %s needs one (before, after) pair or None per dim (%d), "
                             "got %d" % (what, self.ndim, len(arg)))
        out = []
        for p in arg:
            if p is None:
                out.append(None)
                continue
            if not isinstance(p, (tuple, list)) or len(p) != 2 or not all(
                    isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in p):
                raise TypeError("tinyc: %s: each entry must be a pair of ints or None, got %r"
                                % (what, p))
            out.append((int(p[0]), int(p[1])))
        return out

    def pad(self, padding, value=0.0):
        """padding: ((before, after) or None per dim), tinygrad's form; a flat
        PyTorch-style tuple (last dim first) also works. Negative amounts cut."""
        pairs = [p or (0, 0) for p in self._pairs(padding, "pad")]
        x = self
        if any(b < 0 or e < 0 for b, e in pairs):  # negative padding shrinks
            x = x.shrink(tuple((-min(b, 0), s + min(e, 0)) for (b, e), s in
                               zip(pairs, self.shape)))
            pairs = [(max(b, 0), max(e, 0)) for b, e in pairs]
        if all(b == 0 and e == 0 for b, e in pairs):
            return x
        flat = [v for p in pairs for v in p]
        out = self._wrap(lib.tc_pad(x._h, _lib.int64_array(flat)))
        if value != 0:
            mask = type(self).ones(*x.shape, dtype=dtypes.bool, device=x.device)
            mask = self._wrap(lib.tc_pad(mask._h, _lib.int64_array(flat)))
            out = mask.where(out, value)
        return out

    def pad2d(self, padding, value=0.0):
        """tinygrad's pad2d: padding = (left, right, top, bottom, ...) for the
        last dims, last dim first (torch's F.pad order); negative values crop"""
        padding = tuple(padding)
        if len(padding) % 2 or len(padding) // 2 > self.ndim:
            raise ValueError("tinyc: pad2d needs pairs of ints for at most %d dims, got %r"
                             % (self.ndim, padding))
        return self.pad(padding, value=value)

    def shrink(self, arg):
        """arg: ((begin, end) or None per dim)."""
        pairs = self._pairs(arg, "shrink")
        flat = []
        for p, s in zip(pairs, self.shape):
            flat += list(p) if p is not None else [0, s]
        return self._wrap(lib.tc_shrink(self._h, _lib.int64_array(flat)))

    def flip(self, axis=None):
        axes = self._axes(axis, RepeatedAxisError) if not (isinstance(axis, (tuple, list))
                                                            and not axis) else ()
        if not axes:
            return self.reshape(self.shape)
        return self._wrap(lib.tc_flip(self._h, len(axes), _lib.int_array(axes)))

    def squeeze(self, dim=None):
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        if self.ndim == 0:
            if dim not in (0, -1):
                raise AxisError("tinyc: squeeze: axis %r is out of range for 0 dims" % (dim,))
            return self.reshape(())
        axes = self._axes(dim)
        return self.reshape(tuple(s for i, s in enumerate(self.shape)
                                  if not (i in axes and s == 1)))

    def unsqueeze(self, dim):
        ax = self._axis(dim, self.ndim + 1)
        s = self.shape
        return self.reshape(s[:ax] + (1,) + s[ax:])

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        a, b = self._axis(start_dim), self._axis(end_dim)
        if a > b:
            raise ValueError("tinyc: flatten: start_dim comes after end_dim")
        s = self.shape
        return self.reshape(s[:a] + (int(np.prod(s[a:b + 1], dtype=np.int64)),) + s[b + 1:])

    def unflatten(self, dim, sizes):
        ax = self._axis(dim)
        return self.reshape(self.shape[:ax] + tuple(sizes) + self.shape[ax + 1:])

    def contiguous(self):
        return self._wrap(lib.tc_contiguous(self._h))

    def contiguous_backward(self):
        """the same values (no kernel); in backward() the gradient flowing
        through here is realized in a buffer of its own (tinygrad's)"""
        fn = _lib.need("tc_contiguous_backward", "Tensor.contiguous_backward")
        return self._wrap(fn(self._h))

    def repeat(self, *repeats):
        repeats = _shape_args(repeats, "repeat")
        if len(repeats) < self.ndim:
            raise ValueError("tinyc: repeat needs at least %d sizes" % self.ndim)
        x = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
        base = x.shape
        x = x.reshape(tuple(v for s in base for v in (1, s)))
        x = x.expand(tuple(v for r, s in zip(repeats, base) for v in (r, s)))
        return x.reshape(tuple(r * s for r, s in zip(repeats, base)))

    def repeat_interleave(self, repeats, dim=None):
        """each element repeated `repeats` times along dim (None: of the
        flattened tensor): a reshape, an expand and a reshape, all views"""
        if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral):
            raise TypeError("tinyc: repeat_interleave: repeats must be an int, got %r"
                            % (repeats,))
        if repeats < 0:
            raise ValueError("tinyc: repeat_interleave: repeats must be >= 0, got %d" % repeats)
        x, ax = (self.flatten(), 0) if dim is None else (self, self._axis(dim))
        if x.ndim == 0:
            x, ax = x.reshape(1), 0
        s = x.shape
        y = x.reshape(s[:ax + 1] + (1,) + s[ax + 1:])
        y = y.expand(s[:ax + 1] + (int(repeats),) + s[ax + 1:])
        return y.reshape(s[:ax] + (s[ax] * int(repeats),) + s[ax + 1:])

    def chunk(self, chunks, dim=0):
        ax = self._axis(dim)
        step = -(-self.shape[ax] // chunks)
        return self.split(step, ax)

    def split(self, sizes, dim=0):
        ax = self._axis(dim)
        n = self.shape[ax]
        if isinstance(sizes, numbers.Integral):
            sizes = [min(sizes, n - i) for i in range(0, max(n, 1), max(sizes, 1))]
        out, start = [], 0
        for s in sizes:
            arg = [None] * self.ndim
            arg[ax] = (start, start + s)
            out.append(self.shrink(arg))
            start += s
        return out

    def cat(self, *others, dim=0):
        ts = (self,) + others
        ax = self._axis(dim)
        total = sum(t.shape[ax] for t in ts)
        out, start = None, 0
        for t in ts:
            pads = [None] * self.ndim
            pads[ax] = (start, total - start - t.shape[ax])
            start += t.shape[ax]
            p = t.pad(pads)
            out = p if out is None else out + p
        return out

    def stack(self, *others, dim=0):
        ax = self._axis(dim, self.ndim + 1)
        return type(self).cat(*[t.unsqueeze(ax) for t in (self,) + others], dim=ax)

    # ---- indexing ---------------------------------------------------------

    def gather(self, dim, index):
        """tinygrad's and torch's gather: out[i] = self[i with i[dim] = index[i]];
        index has self's ndim and fits it off dim (an index outside reads 0)."""
        if not isinstance(index, Tensor):
            raise TypeError("tinyc: gather needs an int Tensor index, got %s" % type(index).__name__)
        return self._wrap(lib.tc_gather(self._h, self._axis(dim), index._h))

    def index_copy_(self, dim, index, source):
        """torch's index_copy_: self[..., index[j], ...] = source[..., j, ...]
        along dim, in place (tc_index_copy: a kernel over source's rows only,
        lazily, as assign; inside a TinyJit a new index writes new rows).
        index: a 0-d or 1-d int Tensor (or a list); source (a Tensor, array or
        scalar) broadcasts to self's shape with dim at len(index). Indices must
        be in [0, size) as in torch: IndexError when they are known on the
        host; in a kernel an index outside writes nothing. Returns self; not
        differentiable (self loses its history)."""
        fn = _lib.need("tc_index_copy", "Tensor.index_copy_")
        ax = self._axis(dim)
        if not isinstance(index, Tensor):
            a = np.asarray(index)
            if a.dtype == np.bool_ or (a.size and not np.issubdtype(a.dtype, np.integer)):
                raise IndexError("tinyc: index_copy_: index must hold ints, got %s" % a.dtype)
            index = Tensor(a.astype(np.int64), device=self.device)
        elif not index.dtype.is_int:
            raise IndexError("tinyc: index_copy_: index must be an integer tensor, got %s"
                             % index.dtype)
        if not isinstance(source, Tensor):
            source = Tensor(np.asarray(source, dtype=self.dtype.np), device=self.device)
        st = fn(self._h, ax, index._h, source._h)
        if st != 0:
            err = _lib.error()
            if isinstance(err, _lib.TinycValueError) and "is outside" in str(err):
                raise TinycIndexError(str(err), err.status)
            raise err
        return self

    def __setitem__(self, idx, value):
        """x[..., idx, ...] = value for one integer index (a Tensor, list or
        array of any shape, or an int) on one axis, every other item a full
        slice (:) or ...: numpy's assignment (value broadcast to x[idx]'s
        shape, negative indices from the end, of equal indices the last one
        stays), done in place by index_copy_ (one kernel over value's rows);
        x[:] = value and x[...] = value are assign(value). Other forms raise
        IndexError."""
        items = list(idx) if isinstance(idx, tuple) else [idx]
        if sum(1 for i in items if i is Ellipsis) > 1:
            raise IndexError("tinyc: an index can only have one ellipsis (...)")
        ells = [k for k, i in enumerate(items) if i is Ellipsis]
        if ells:
            k = ells[0]
            items[k:k + 1] = [slice(None)] * (self.ndim - len(items) + 1)
        full = slice(None)
        picks = [k for k, i in enumerate(items) if not (isinstance(i, slice) and i == full)]
        if len(items) <= self.ndim and not picks:  # x[:] = value, x[...] = value
            self.assign(value)
            return
        if len(items) > self.ndim or len(picks) != 1:
            raise IndexError("tinyc: __setitem__ takes one int, int Tensor, list or array "
                             "index on one axis, the others ':' or '...'; got %r" % (idx,))
        ax, i = picks[0], items[picks[0]]
        n = self.shape[ax]
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (numbers.Integral, Tensor,
                                                                   list, np.ndarray)):
            raise IndexError("tinyc: __setitem__: invalid index %r on axis %d" % (i, ax))
        if isinstance(i, Tensor):
            if not i.dtype.is_int:
                raise IndexError("tinyc: tensors used as indices must be integer tensors, "
                                 "got %s" % i.dtype)
            t = i if i.dtype in (dtypes.int32, dtypes.int64) else i.cast(dtypes.int32)
            t = (t < 0).where(t + n, t)  # in the store's kernel
        else:
            a = np.asarray(i)
            if a.size and not np.issubdtype(a.dtype, np.integer):
                raise IndexError("tinyc: index arrays must hold ints, got %s" % a.dtype)
            if a.size and (a.min() < -n or a.max() >= n):
                bad = a.min() if a.min() < -n else a.max()
                raise IndexError("tinyc: index %d is out of bounds for axis %d with size %d"
                                 % (bad, ax, n))
            t = Tensor(np.where(a < 0, a + n, a).astype(np.int64), device=self.device)
        shape = self.shape[:ax] + t.shape + self.shape[ax + 1:]
        if not isinstance(value, Tensor):
            value = Tensor(np.asarray(value, dtype=self.dtype.np), device=self.device)
        try:
            shape_b = np.broadcast_shapes(value.shape, shape)
        except ValueError:
            shape_b = None
        if shape_b != shape:
            raise ValueError("tinyc: cannot broadcast value of shape %s to the indexed shape %s"
                             % (value.shape, shape))
        m = int(np.prod(t.shape))
        v = value.expand(shape) if value.shape != shape else value
        v = v.reshape(self.shape[:ax] + (m,) + self.shape[ax + 1:])
        self.index_copy_(ax, t.reshape(m), v)

    def _index_tensor(self, i, axis):
        """a list/array/Tensor index of axis as an int Tensor; host values are
        bounds-checked here (IndexError, as numpy and tinygrad raise)"""
        if isinstance(i, Tensor):
            if not i.dtype.is_int:
                raise IndexError("tinyc: tensors used as indices must be integer tensors, "
                                 "got %s" % i.dtype)
            return i
        a = np.asarray(i)
        if a.dtype == np.bool_ or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise IndexError("tinyc: index arrays must hold ints, got %s" % a.dtype)
        n = self.shape[axis]
        if a.size and (a.min() < -n or a.max() >= n):
            bad = a.min() if a.min() < -n else a.max()
            raise IndexError("tinyc: index %d is out of bounds for axis %d with size %d"
                             % (bad, axis, n))
        return Tensor(a.astype(np.int32), device=self.device)

    def _advanced(self, idx):
        """integer-array indexing as tinygrad and torch do it: the basic items
        first (ints drop their axes; tensor places are kept as full slices),
        then one lookup: a single index in place of its axis; several are
        broadcast, flattened into one index over their axes, and their dims put
        where the first one was when they are next to each other, else first"""
        items = list(idx)
        dims = [k for k, i in enumerate(items)
                if isinstance(i, (Tensor, list, np.ndarray))]
        basic = tuple(slice(None) if k in dims else i for k, i in enumerate(items))
        # the axis each item indexes, counted before the basic indexing removes any
        n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
        axis_of, d = {}, 0
        for k, i in enumerate(items):
            if i is Ellipsis:
                d += self.ndim - n_real
            elif i is not None:
                axis_of[k] = d
                d += 1
        idxs = [self._index_tensor(items[k], axis_of[k]) for k in dims]
        x = self[basic]
        # where the tensor axes sit after the basic indexing (ints removed)
        kept, d = {}, 0
        for k, i in enumerate(basic):
            if i is Ellipsis:
                d += self.ndim - n_real
            elif i is None:
                d += 1
            elif isinstance(i, slice):
                kept[k] = d
                d += 1
        pos = [kept[k] for k in dims]
        if len(idxs) == 1:
            return x._wrap(lib.tc_index(x._h, pos[0], idxs[0]._h))
        # several: move their axes to the front, flatten them, one flat index
        order = pos + [a for a in range(x.ndim) if a not in pos]
        xp = x.permute(tuple(order))
        sizes = [x.shape[a] for a in pos]
        bshape = np.broadcast_shapes(*(t.shape for t in idxs))
        flat, ok = None, None
        for t, n in zip(idxs, sizes):
            t = t.cast(dtypes.int64)
            t = (t < 0).where(t + n, t).expand(bshape)
            inside = (t >= 0) * (t < n)
            ok = inside if ok is None else ok * inside
            flat = t if flat is None else flat * n + t
        total = int(np.prod(sizes))
        flat = ok.where(flat, total)  # a component outside its axis: outside the whole
        xf = xp.reshape((total,) + xp.shape[len(pos):])
        out = x._wrap(lib.tc_index(xf._h, 0, flat._h))
        if pos == list(range(pos[0], pos[-1] + 1)):  # next to each other: where the first was
            k, p0 = len(bshape), pos[0]
            rest = list(range(k, out.ndim))
            out = out.permute(tuple(rest[:p0]) + tuple(range(k)) + tuple(rest[p0:]))
        return out

    def __getitem__(self, idx):
        """ints (negative count from the end), slices with any step (views:
        shrink, flip, and a pad+reshape+shrink for strides), None and Ellipsis;
        int Tensors, lists and arrays index as numpy does (tc_index: a load at
        the index's values, fused with what reads it)."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(isinstance(i, (Tensor, list, np.ndarray)) for i in idx):
            return self._advanced(idx)
        items = []
        for i in idx:
            if isinstance(i, (bool, np.bool_)):
                raise IndexTypeError("tinyc: indexing with a bool is not supported")
            if i is None or i is Ellipsis or isinstance(i, (slice, numbers.Integral)):
                items.append(int(i) if isinstance(i, numbers.Integral) else i)
            else:
                raise IndexTypeError("tinyc: invalid index %r (ints, slices, None and ... "
                                "are supported)" % (i,))
        n_ell = sum(1 for i in items if i is Ellipsis)
        if n_ell > 1:
            raise IndexError("tinyc: an index can only have one ellipsis (...)")
        n_dims = sum(1 for i in items if i is not None and i is not Ellipsis)
        if n_dims > self.ndim:
            raise IndexError("tinyc: too many indices for a tensor of %d dims" % self.ndim)
        fill = [slice(None)] * (self.ndim - n_dims)
        if n_ell:
            k = items.index(Ellipsis)
            items = items[:k] + fill + items[k + 1:]
        else:
            items = items + fill
        shrink, flips, strides, out_shape = [], [], [], []
        d = 0
        for i in items:
            if i is None:
                out_shape.append(1)
                continue
            n = self.shape[d]
            if isinstance(i, int):
                j = i + n if i < 0 else i
                if not 0 <= j < n:
                    raise IndexError("tinyc: index %d is out of bounds for axis %d with size %d"
                                     % (i, d, n))
                shrink.append((j, j + 1))
                strides.append(1)
            else:
                start, stop, step = i.indices(n)
                count = len(range(start, stop, step))
                if count == 0:
                    shrink.append((0, 0))
                elif step > 0:
                    shrink.append((start, start + (count - 1) * step + 1))
                else:
                    shrink.append((start + (count - 1) * step, start + 1))
                    flips.append(d)
                strides.append(abs(step) if count > 1 else 1)
                out_shape.append(count)
            d += 1
        x = self
        if any(p != (0, s) for p, s in zip(shrink, self.shape)):
            x = x.shrink(shrink)
        if flips:
            x = x.flip(tuple(flips))
        if any(s > 1 for s in strides):
            # stride s on a dim of length L: pad to ceil(L/s)*s, split into
            # (ceil(L/s), s) and keep the first of each s
            pads = [(0, (-L) % s) for L, s in zip(x.shape, strides)]
            x = x.pad(pads)
            x = x.reshape(tuple(v for L, s in zip(x.shape, strides) for v in (L // s, s)))
            x = x.shrink(tuple(p for L, s in zip(x.shape[::2], strides)
                               for p in ((0, L), (0, 1))))
        return x.reshape(tuple(out_shape))
