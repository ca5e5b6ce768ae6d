"""numpy-style indexing: ``x[idx]`` (``getitem``), functional updates ``x.at[idx].set(v)`` / ``.add`` / ... (
``IndexUpdateHelper``), ``take``, ``take_along_axis``, ``put_along_axis`` and the eager-only ``nonzero`` family.

Static slices, ints and ``None`` become slice / rev / reshape; integer arrays and traced scalar indices become one
``gather`` (or ``scatter``), placed by numpy's rule for advanced indices. Boolean masks need concrete values.
"""
from typing import NamedTuple

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import ConcretizationError, Tracer, short
from flfun.numpy._creation import _leaves, asarray
from flfun.numpy._manipulation import _arr, _flat_axis
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.common import broadcast_to_shape
from flfun.primitives.indexing import gather, scatter
from flfun.util import canonical_axis

__all__ = ["getitem", "IndexUpdateHelper", "take", "take_along_axis", "put_along_axis", "nonzero", "argwhere",
           "flatnonzero", "compress"]

_INDEX_HELP = ("only integers, slices (`:`), ellipsis (`...`), None (newaxis) and integer or boolean arrays "
               "are valid indices")
_MODES = (None, "clip", "fill", "promise_in_bounds")


# ------------------------------------------------------------------------------------------------ index parsing
# Parsed entries: ("new",) | ("slice", dim, start, step, count) | ("int", dim, i) | ("adv", dims, array) |
# ("ellipsis",) (only when it stands for no dims), where an "adv" array is a host numpy int array (wrapped,
# checked) or a traced one, and dims has 0 or 1 entry.

def _classify(item):
    """(kind, payload, number of dims it consumes) for one index item."""
    if item is None:
        return "new", None, 0
    if item is Ellipsis:
        return "ellipsis", None, 0
    if isinstance(item, slice):
        return "slice", item, 1
    if isinstance(item, (int, np.integer)) and type(item) is not bool:
        return "int", int(item), 1
    if isinstance(item, Tracer):
        if item.dtype == dtypes.bool_:
            raise ConcretizationError(
                f"getitem: a boolean mask index needs concrete values (the result's shape depends on them), "
                f"but the mask {short(item)} is traced; use fnp.where(mask, x, other) to keep the shape static")
        if not dtypes.is_int(item.dtype):
            raise IndexError(f"getitem: {_INDEX_HELP}, got an array of {short(item)}")
        return "arr", item, 1
    if isinstance(item, (list, tuple)) and any(isinstance(e, Tracer) for e in _leaves(item)):
        return _classify(asarray(item))
    if isinstance(item, (Array, np.ndarray, list, tuple, bool, np.bool_)):     # a scalar bool is a 0-d mask
        a = np.asarray(item)
        if a.size == 0 and a.dtype.kind == "f" and not isinstance(item, (Array, np.ndarray)):
            a = a.astype(np.int64)      # [] indexes like an empty integer array (as in numpy)
        if a.dtype.kind == "b":
            return "bool", a, a.ndim
        if a.dtype.kind not in "iu":
            raise IndexError(f"getitem: {_INDEX_HELP}, got an array of dtype {a.dtype}")
        return "arr", a, 1
    raise IndexError(f"getitem: {_INDEX_HELP}, got {item!r} ({type(item).__name__})")


def _slice_bounds(s: slice, n: int, dim: int):
    if any(isinstance(b, Tracer) for b in (s.start, s.stop, s.step)):
        raise ConcretizationError(
            f"getitem: slice bounds along axis {dim} must be concrete (they fix the result's shape), got "
            f"{s}; for a traced start with a static size use lax.dynamic_slice(x, starts, sizes)")
    start, stop, step = s.indices(n)
    return start, step, len(range(start, stop, step))


def _check_host(a, n: int, dim: int, mode):
    """Wrap negative host indices; with the default mode, out-of-range ones raise IndexError as in numpy."""
    if a.size and mode is None:
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            raise IndexError(f"index {lo if lo < -n else hi} is out of bounds for axis {dim} with size {n}")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        a = np.where(a < 0, a + n, a)
    return a


def _parse(shape, idx, mode) -> list:
    items = [_classify(it) for it in (idx if isinstance(idx, tuple) else (idx,))]
    n_ell = sum(k == "ellipsis" for k, _, _ in items)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(c for _, _, c in items)
    if used > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {used} were indexed")
    entries, dim = [], 0
    for kind, val, count in items:
        if kind == "ellipsis":
            if used == len(shape):
                entries.append(("ellipsis",))   # no dims, but it still separates advanced indices (numpy)
            entries += [("slice", d, 0, 1, shape[d]) for d in range(dim, dim + len(shape) - used)]
            dim += len(shape) - used
        elif kind == "new":
            entries.append(("new",))
        elif kind == "slice":
            entries.append(("slice", dim) + _slice_bounds(val, shape[dim], dim))
        elif kind == "int":
            n = shape[dim]
            if -n <= val < n:
                entries.append(("int", dim, val % n))
            elif mode is None:
                raise IndexError(f"index {val} is out of bounds for axis {dim} with size {n}")
            else:
                entries.append(("adv", (dim,), np.asarray(val)))
        elif kind == "bool":
            for j, (m, n) in enumerate(zip(val.shape, shape[dim:])):
                if m != n:
                    raise IndexError(f"boolean index did not match indexed array along axis {dim + j}; size of "
                                     f"axis is {n} but size of corresponding boolean axis is {m}")
            if val.ndim == 0:   # a scalar mask adds a length-1 (True) or length-0 (False) axis
                entries.append(("adv", (), np.arange(int(val))))
            for j, nz in enumerate(np.nonzero(val) if val.ndim else ()):
                entries.append(("adv", (dim + j,), nz))
        else:  # integer array
            a = val if isinstance(val, Tracer) else _check_host(val, shape[dim], dim, mode)
            entries.append(("adv", (dim,), a))
        dim += count
    entries += [("slice", d, 0, 1, shape[d]) for d in range(dim, len(shape))]
    adv = [e for e in entries if e[0] == "adv"]
    if adv and all(isinstance(e[2], np.ndarray) and e[2].ndim == 0 and e[1] and 0 <= e[2] < shape[e[1][0]]
                   for e in adv):
        # concrete scalar indices alone act like ints: plain slicing
        return [("int", e[1][0], int(e[2])) if e[0] == "adv" else e for e in entries]
    if adv:   # with any array index, ints are advanced indices too (this matters for where their dims go)
        entries = [("adv", (e[1],), np.asarray(e[2])) if e[0] == "int" else e for e in entries]
    return entries


def _index_array(comps, shape):
    """Stack index components (host or traced; (array, axis size)) broadcast to ``shape`` into
    ``(*shape, len(comps))``, wrapping negative traced indices."""
    if not comps:
        return np.zeros(tuple(shape) + (0,), np.int64)
    if all(isinstance(c, np.ndarray) for c, _ in comps):
        return np.stack([np.broadcast_to(c, shape) for c, _ in comps], axis=-1).astype(np.int64)
    parts = []
    for c, n in comps:
        if isinstance(c, np.ndarray):
            c = asarray(np.broadcast_to(c, shape), dtypes.int64)
        else:
            c = c if c.dtype == dtypes.int64 else E.convert_element_type(c, dtypes.int64)
            c = E.select_n(E.lt(c, 0), c, E.add(c, n))       # Python ints are weak: they stay int64
            c = broadcast_to_shape(c, shape)
        parts.append(S.reshape(c, tuple(shape) + (1,)))
    return S.concatenate(parts, len(shape))


# ------------------------------------------------------------------------------------------------------ getitem
def getitem(x, idx, mode: str | None = None, fill_value=None) -> Array:
    """``x[idx]`` with numpy semantics (``Array.__getitem__`` calls this).

    Supports ints (negative count from the end), slices with any step, ``None``, ``...``, integer arrays and
    lists (broadcast together, placed by numpy's rule), traced integer scalars and arrays, and boolean masks with
    concrete values. Out-of-range concrete indices raise ``IndexError``; traced ones are clamped unless ``mode``
    says otherwise (``"clip"``, ``"fill"`` with ``fill_value``, ``"promise_in_bounds"``).

    Example::

        >>> x = fnp.arange(12).reshape(3, 4)
        >>> x[1, ::-2].tolist(), x[[0, 2], 1:3].tolist()
        ([7, 5], [[1, 2], [9, 10]])
    """
    if mode not in _MODES:
        raise ValueError(f"getitem: mode must be one of {_MODES}, got {mode!r}")
    return _getitem(_arr(x), idx, mode, fill_value, "clip")


def _getitem(x, idx, mode, fill_value, traced_mode: str):
    """``x[idx]``; traced indices use ``traced_mode`` when ``mode`` is None."""
    shape = x.shape
    if type(idx) is int and shape and -shape[0] <= idx < shape[0]:     # the common x[i]: skip the parser
        i = idx % shape[0]
        y = S.slice(x, (i,) + (0,) * (len(shape) - 1), (i + 1,) + tuple(shape[1:]))
        return S.reshape(y, tuple(shape[1:]))
    entries = _parse(shape, idx, mode)
    adv, adv_shape, plain, block = _layout(entries)
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    flips, int_dims = [], []
    for e in entries:
        if e[0] == "slice":
            _, d, start, step, count = e
            if step < 0:                 # reverse the dim, then slice forward
                flips.append(d)
                start, step = (x.shape[d] - 1 - start) if count else 0, -step
            starts[d], limits[d], strides[d] = start, start + (count - 1) * step + 1 if count else start, step
        elif e[0] == "int":
            starts[e[1]], limits[e[1]] = e[2], e[2] + 1
            int_dims.append(e[1])
    y = S.rev(x, tuple(flips)) if flips else x
    if starts != [0] * x.ndim or limits != list(x.shape) or strides != [1] * x.ndim:
        y = S.slice(y, starts, limits, strides)
    kept = [d for d in range(x.ndim) if d not in int_dims]
    y = S.reshape(y, tuple(y.shape[d] for d in kept))
    sizes = tuple(1 if e[0] == "new" else e[4] for e in plain)
    if not adv:
        return S.reshape(y, sizes)
    comps = [(e[2], shape[e[1][0]]) for e in adv if e[1]]
    host = all(isinstance(c, np.ndarray) for c, _ in comps)
    out = gather(y, _index_array(comps, adv_shape), axes=tuple(kept.index(e[1][0]) for e in adv if e[1]),
                 mode=mode or ("promise_in_bounds" if host else traced_mode), fill_value=fill_value)
    # gather gives (advanced dims, slice dims); the advanced block goes after ``block`` plain dims
    n, before = len(adv_shape), sum(e[0] == "slice" for e in plain[:block])
    out = S.transpose(out, (*range(n, n + before), *range(n), *range(n + before, out.ndim)))
    return S.reshape(out, sizes[:block] + adv_shape + sizes[block:])


def _layout(entries):
    """The dims of ``x[idx]`` from its parsed entries: the advanced entries, their broadcast shape, the plain
    ("new" and "slice") entries in order, and ``block``, the number of plain dims before the advanced block
    (numpy puts the block where its indices stand when they are adjacent, else first)."""
    adv = [e for e in entries if e[0] == "adv"]
    try:
        adv_shape = tuple(np.broadcast_shapes(*[tuple(e[2].shape) for e in adv]))
    except ValueError:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with shapes "
                         f"{', '.join(str(tuple(e[2].shape)) for e in adv)}") from None
    pos = [i for i, e in enumerate(entries) if e[0] == "adv"]
    adjacent = pos and pos[-1] - pos[0] + 1 == len(pos)
    block = sum(e[0] in ("new", "slice") for e in entries[:pos[0]]) if adjacent else 0
    return adv, adv_shape, [e for e in entries if e[0] in ("new", "slice")], block


# ------------------------------------------------------------------------------------------------------ updates
def _update(x, idx, values, op: str, mode, name: str) -> Array:
    """``x`` with ``values`` combined into ``x[idx]`` by ``op``, as one scatter (traced out-of-range indices are
    dropped)."""
    if mode == "drop":
        mode = "fill"
    if mode not in _MODES:
        raise ValueError(f"at[].{name}: mode must be one of {_MODES + ('drop',)}, got {mode!r}")
    x = _arr(x)
    entries = _parse(x.shape, idx, mode)
    adv, adv_shape, plain, block = _layout(entries)
    sizes = tuple(1 if e[0] == "new" else e[4] for e in plain)
    target = sizes[:block] + adv_shape + sizes[block:]
    labels = plain[:block] + [("A", k) for k in range(len(adv_shape))] + plain[block:]
    v = _arr(values)
    if v.dtype != x.dtype:
        v = E.convert_element_type(v, x.dtype)
    vshape = tuple(v.shape)
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    if len(vshape) > len(target) or any(a not in (1, b) for a, b in zip(vshape[::-1], target[::-1])):
        raise ValueError(f"at[].{name}: values of shape {tuple(v.shape)} cannot be broadcast to the indexed "
                         f"shape {target}")
    v = broadcast_to_shape(S.reshape(v, vshape), target)
    # scatter takes the values as (partial slices, advanced dims, whole dims); partial slices become index ranges
    partial = [e for e in plain if e[0] == "slice" and e[2:] != (0, 1, x.shape[e[1]])]
    whole = [e for e in plain if e[0] == "slice" and e not in partial]
    kept = [lab for lab in labels if lab[0] != "new"]
    v = S.reshape(v, tuple(d for lab, d in zip(labels, target) if lab[0] != "new"))
    v = S.transpose(v, tuple(kept.index(lab) for lab in partial + labels[block:block + len(adv_shape)] + whole))
    if not partial and not any(e[0] in ("adv", "int") for e in entries):      # the whole array
        return v if op == "set" else {"add": E.add, "mul": E.mul, "min": E.min, "max": E.max}[op](x, v)
    comps, axes = [], []
    for e in entries:
        if e[0] == "int":
            comps.append((np.asarray(e[2]), x.shape[e[1]]))
            axes.append(e[1])
        elif e[0] == "adv" and e[1]:
            comps.append((e[2], x.shape[e[1][0]]))
            axes.append(e[1][0])
        elif e in partial:     # its range, placed at its position among the partial dims
            r = e[2] + e[3] * np.arange(e[4])
            comps.append((r.reshape((-1,) + (1,) * (len(partial) - 1 - partial.index(e) + len(adv_shape))),
                          x.shape[e[1]]))
            axes.append(e[1])
    host = all(isinstance(c, np.ndarray) for c, _ in comps)
    indices = _index_array(comps, tuple(e[4] for e in partial) + adv_shape)
    return scatter(x, indices, v, axes=tuple(axes), mode=mode or ("promise_in_bounds" if host else "fill"), op=op)


class IndexUpdateHelper:
    """``x.at``: functional versions of numpy's in-place indexed updates. ``x`` itself never changes.

    ``x.at[idx].set(v)`` is ``x[idx] = v`` on a copy; likewise ``.add`` (``+=``, duplicates accumulate like
    ``np.add.at``), ``.multiply`` / ``.mul``, ``.divide``, ``.power``, ``.min``, ``.max``, and ``.get()`` is
    ``x[idx]``. ``idx`` takes every form ``x[idx]`` does; values are cast to ``x.dtype`` and broadcast to
    ``x[idx].shape``. With duplicate indices, which ``set`` value wins is unspecified. Concrete out-of-range
    indices raise ``IndexError``; traced ones are dropped unless ``mode`` says otherwise (``"clip"``,
    ``"drop"``/``"fill"``, ``"promise_in_bounds"``).

    Example::

        >>> x = fnp.zeros(4)
        >>> x.at[1:3].set(1.0).tolist(), x.at[[0, 0]].add(1.0).tolist()
        ([0.0, 1.0, 1.0, 0.0], [2.0, 0.0, 0.0, 0.0])
    """
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, idx)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef(NamedTuple):
    array: Array
    index: object

    def get(self, *, mode: str | None = None, fill_value=None) -> Array:
        return getitem(self.array, self.index, mode, fill_value)

    def _op(op: str, name: str, combine=None):
        def method(self, values, *, mode: str | None = None) -> Array:
            if combine is None:
                return _update(self.array, self.index, values, op, mode, name)
            x = _arr(self.array)      # divide / power: combine x with the values, or 1 where not indexed
            if name == "divide" and not dtypes.is_float(x.dtype):
                raise TypeError(f"at[].divide: needs a floating-point array, got {short(x)}")
            return combine(x, _update(S.full(x.shape, 1, x.dtype), self.index, values, op, mode, name))
        method.__name__ = name
        return method

    set, add, multiply, min, max = (_op("set", "set"), _op("add", "add"), _op("mul", "multiply"), _op("min", "min"),
                                    _op("max", "max"))
    divide, power, mul = _op("mul", "divide", E.div), _op("set", "power", E.pow), multiply

    del _op


# --------------------------------------------------------------------------------------------- take and friends
def _prepare_take(indices, n: int, mode, op: str):
    """numpy's 'wrap' and 'clip' take modes act on the indices; the rest are getitem's modes."""
    if mode == "raise":
        return indices, None
    if mode not in ("wrap", "clip"):
        if mode not in _MODES:
            raise ValueError(f"{op}: mode must be one of {_MODES + ('raise', 'wrap')}, got {mode!r}")
        return indices, mode
    a = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise IndexError(f"{op}: indices must be integers, got dtype {a.dtype}")
    if n == 0 and a.size:
        raise IndexError(f"{op}: cannot take from an empty axis with mode={mode!r}")
    if not isinstance(a, Tracer):
        return (np.mod(a, n) if mode == "wrap" else np.clip(a, 0, n - 1)), "promise_in_bounds"
    a = a if a.dtype == dtypes.int64 else E.convert_element_type(a, dtypes.int64)   # n may not fit a's dtype
    lo, nn, hi = (S.full((), v, dtypes.int64) for v in (0, n, n - 1))
    wrapped = E.rem(E.add(E.rem(a, nn), nn), nn) if mode == "wrap" else E.clamp(lo, a, hi)
    return wrapped, "promise_in_bounds"


def take(x, indices, /, *, axis: int | None = None, mode: str | None = None, fill_value=None) -> Array:
    """Elements of ``x`` at ``indices`` along ``axis`` (the flattened ``x`` when ``axis`` is None).

    Negative indices count from the end. ``mode``: None / ``"raise"`` (out-of-range concrete indices raise
    ``IndexError``; traced ones are clamped), ``"wrap"``, ``"clip"`` (numpy's: negative indices clip to 0),
    ``"fill"`` (with ``fill_value``) or ``"promise_in_bounds"``.

    Example::

        >>> fnp.take(fnp.arange(10.0).reshape(2, 5), fnp.asarray([4, -1, 0]), axis=1).tolist()
        [[4.0, 4.0, 0.0], [9.0, 9.0, 5.0]]
    """
    x, axis = _flat_axis(x, axis, "take")
    indices, mode = _prepare_take(indices, x.shape[axis], mode, "take")
    return getitem(x, (slice(None),) * axis + (indices,), mode, fill_value)


def _along_axis(x, indices, axis, mode, op: str):
    """``x`` with ``axis`` moved last and the other dims broadcast against the indices', the indices as an index
    array ``(*batch, m, 1)`` for ``gather``/``scatter`` with ``batch_dims=len(batch)``, the permutation, and the
    mode. ``put_along_axis`` does not broadcast ``x`` and takes mode ``"drop"``."""
    x = _arr(x)
    put = op == "put_along_axis"
    host = not isinstance(indices, Tracer)
    ind = np.asarray(indices) if host else indices
    if axis is None:
        if ind.ndim != 1:
            raise ValueError(f"{op}: with axis=None, indices must be 1-d, got shape {tuple(ind.shape)}")
        x, axis = S.reshape(x, (x.size,)), 0
    axis = canonical_axis(axis, x.ndim, op)
    if ind.ndim != x.ndim:
        raise ValueError(f"{op}: indices must have the same rank as x, got {short(x)} and indices of shape "
                         f"{tuple(ind.shape)}")
    if not dtypes.is_int(ind.dtype):
        raise IndexError(f"{op}: indices must be integers, got dtype {ind.dtype}")
    outer = [tuple(sh[:axis] + sh[axis + 1:]) for sh in (tuple(x.shape), tuple(ind.shape))]
    try:
        batch = tuple(np.broadcast_shapes(*outer))
    except ValueError:
        batch = None
    if batch is None or (put and batch != outer[0]):
        raise ValueError(f"{op}: indices of shape {tuple(ind.shape)} do not broadcast against {short(x)} "
                         f"outside axis {axis}")
    modes = _MODES + ("drop",) if put else _MODES
    if mode not in modes:
        raise ValueError(f"{'at[].' + op if put else 'getitem'}: mode must be one of {modes}, got {mode!r}")
    n, perm = x.shape[axis], (*range(axis), *range(axis + 1, x.ndim), axis)
    if mode == "drop":
        mode = "fill"
    if host:
        ind = np.transpose(_check_host(ind, n, axis, mode), perm)
    else:
        ind = S.transpose(ind, perm)
        mode = mode or ("fill" if put else "clip")      # traced out-of-range indices: put drops, take clamps
    index = _index_array([(ind, n)], batch + (ind.shape[-1],))
    if not put and n == 0 and mode == "clip" and 0 not in index.shape:     # gather would name the moved axis
        raise ValueError(f"gather: mode='clip' has no position to clamp to in the empty axis {axis} of {short(x)}")
    return broadcast_to_shape(S.transpose(x, perm), batch + (n,)), index, perm, mode or "promise_in_bounds"


def take_along_axis(x, indices, /, *, axis: int | None = -1, mode: str | None = None, fill_value=None) -> Array:
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis``, other dims broadcast (numpy's).

    Example::

        >>> x = fnp.asarray([[10., 30., 20.], [60., 40., 50.]])
        >>> fnp.take_along_axis(x, fnp.asarray([[0, 2, 1], [1, 2, 0]]), axis=1).tolist()
        [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]
    """
    xt, index, perm, mode = _along_axis(x, indices, axis, mode, "take_along_axis")
    nb = xt.ndim - 1
    out = gather(xt, index, axes=(nb,), batch_dims=nb, mode=mode, fill_value=fill_value)
    return S.transpose(out, np.argsort(perm))


def put_along_axis(x, indices, values, /, *, axis: int | None, mode: str | None = None) -> Array:
    """A copy of ``x`` with ``values`` (broadcast to the indices' shape) written at ``indices`` along ``axis``:
    numpy's ``put_along_axis``, except that ``x`` is not modified but returned updated.

    Example::

        >>> fnp.put_along_axis(fnp.zeros((2, 3)), fnp.asarray([[2], [0]]), 1.0, axis=1).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    shape = _arr(x).shape
    xt, index, perm, mode = _along_axis(x, indices, axis, mode, "put_along_axis")
    inv, nb = tuple(np.argsort(perm)), xt.ndim - 1
    target = tuple(index.shape[:-1][i] for i in inv)      # the indexed shape, in x's dim order
    v = _arr(values)
    lead = max(len(v.shape) - len(target), 0)       # leading dims that must be 1s
    if any(d != 1 for d in v.shape[:lead]) or any(a not in (1, b) for a, b in zip(v.shape[::-1], target[::-1])):
        raise ValueError(f"at[].put_along_axis: values of shape {tuple(v.shape)} cannot be broadcast to the "
                         f"indexed shape {target}")
    v = v if v.dtype == xt.dtype else E.convert_element_type(v, xt.dtype)
    v = S.transpose(broadcast_to_shape(S.reshape(v, tuple(v.shape)[lead:]), target), perm)
    out = scatter(xt, index, v, axes=(nb,), batch_dims=nb, mode=mode)
    return S.reshape(S.transpose(out, inv), shape)


# ------------------------------------------------------------------------------------- data-dependent shapes
def _concrete(x, op: str) -> np.ndarray:
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"{op}: the result's shape depends on the values of its input, so {op} needs a concrete array, but "
            f"got a traced {short(x)}; inside a transform use fnp.where(condition, x, y) instead")
    return np.asarray(x)


def nonzero(x, /) -> tuple[Array, ...]:
    """Indices of the non-zero elements, one int64 array per dimension (eager only: data-dependent shape).

    Example::

        >>> [i.tolist() for i in fnp.nonzero(fnp.asarray([[0, 1], [2, 0]]))]
        [[0, 1], [1, 0]]
    """
    a = _concrete(x, "nonzero")
    if a.ndim == 0:
        raise ValueError("nonzero: 0-d arrays are not supported; use fnp.atleast_1d(x) first")
    return tuple(asarray(i, dtypes.int64) for i in np.nonzero(a))


def argwhere(x, /) -> Array:
    """Indices of the non-zero elements as an ``(N, x.ndim)`` array (eager only).

    Example::

        >>> fnp.argwhere(fnp.asarray([0, 3, 0, 4])).tolist()
        [[1], [3]]
    """
    return asarray(np.argwhere(_concrete(x, "argwhere")), dtypes.int64)


def flatnonzero(x, /) -> Array:
    """Indices of the non-zero elements of the flattened array (eager only): ``fnp.flatnonzero(x)``."""
    return asarray(np.flatnonzero(_concrete(x, "flatnonzero")), dtypes.int64)


def compress(condition, x, /, *, axis: int | None = None) -> Array:
    """The slices of ``x`` along ``axis`` where the 1-d ``condition`` is true (eager in ``condition``).

    Example::

        >>> fnp.compress(fnp.asarray([True, False, True]), fnp.arange(6).reshape(3, 2), axis=0).tolist()
        [[0, 1], [4, 5]]
    """
    c = _concrete(condition, "compress").astype(bool)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {c.shape}")
    x, axis = _flat_axis(x, axis, "compress")
    if c.size > x.shape[axis]:
        raise ValueError(f"compress: condition has {c.size} entries but axis {axis} of {short(x)} has "
                         f"{x.shape[axis]}")
    return take(x, np.flatnonzero(c), axis=axis)
