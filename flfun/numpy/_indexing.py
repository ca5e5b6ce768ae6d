"""numpy-style indexing: ``x[idx]`` (``getitem``) and the index parser that ``x.at[idx]`` (``_updates.py``) and
``take`` (``_take.py``) share.

Static slices, ints and ``None`` become slice / rev / reshape; integer arrays and traced scalar indices become one
``gather`` (or ``scatter``), placed by numpy's rule for advanced indices. Boolean masks need concrete values.
"""
import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import ConcretizationError, Tracer, short
from flfun.numpy._asarray import as_array, asarray, leaves
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.rules import broadcast_to_shape
from flfun.primitives.indexing import gather

__all__ = ["getitem"]


_INDEX_HELP = ("only integers, slices (`:`), ellipsis (`...`), None (newaxis) and integer or boolean arrays "
               "are valid indices")
MODES = (None, "clip", "fill", "promise_in_bounds")


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
    if isinstance(item, (list, tuple)) and any(isinstance(e, Tracer) for e in leaves(item)):
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


def check_host_indices(a, n: int, dim: int, mode):
    """Wrap negative host indices; with the default mode, out-of-range ones raise IndexError as in numpy."""
    if a.size and mode is None:
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            raise IndexError(f"index {lo if lo < -n else hi} is out of bounds for axis {dim} with size {n}")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        a = np.where(a < 0, a + n, a)
    return a


def parse_index(shape, idx, mode) -> list:
    """The parsed entries (see above) of index ``idx`` into an array of ``shape``, checked."""
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
            a = val if isinstance(val, Tracer) else check_host_indices(val, shape[dim], dim, mode)
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


def index_array(comps, shape):
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


def broadcast_values(values, target, dtype, name: str):
    """``values`` in ``dtype``, broadcast to ``target``, the shape an indexed update writes (leading 1s dropped)."""
    v = as_array(values)
    v = v if v.dtype == dtype else E.convert_element_type(v, dtype)
    lead = max(v.ndim - len(target), 0)
    if any(d != 1 for d in v.shape[:lead]) or any(a not in (1, b) for a, b in zip(v.shape[::-1], target[::-1])):
        raise ValueError(f"at[].{name}: values of shape {tuple(v.shape)} cannot be broadcast to the indexed "
                         f"shape {target}")
    return broadcast_to_shape(S.reshape(v, tuple(v.shape)[lead:]), target)


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
    if mode not in MODES:
        raise ValueError(f"getitem: mode must be one of {MODES}, got {mode!r}")
    return _getitem(as_array(x), idx, mode, fill_value, "clip")


def _getitem(x, idx, mode, fill_value, traced_mode: str):
    """``x[idx]``; traced indices use ``traced_mode`` when ``mode`` is None."""
    shape = x.shape
    if type(idx) is int and shape and -shape[0] <= idx < shape[0]:     # the common x[i]: skip the parser
        i = idx % shape[0]
        y = S.slice(x, (i,) + (0,) * (len(shape) - 1), (i + 1,) + tuple(shape[1:]))
        return S.reshape(y, tuple(shape[1:]))
    entries = parse_index(shape, idx, mode)
    adv, adv_shape, plain, block, out_shape = index_layout(entries)
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
    if not adv:
        return S.reshape(y, out_shape)
    comps = [(e[2], shape[e[1][0]]) for e in adv if e[1]]
    host = all(isinstance(c, np.ndarray) for c, _ in comps)
    out = gather(y, index_array(comps, adv_shape), axes=tuple(kept.index(e[1][0]) for e in adv if e[1]),
                 mode=mode or ("promise_in_bounds" if host else traced_mode), fill_value=fill_value)
    # gather gives (advanced dims, slice dims); the advanced block goes after ``block`` plain dims
    n, before = len(adv_shape), sum(e[0] == "slice" for e in plain[:block])
    out = S.transpose(out, (*range(n, n + before), *range(n), *range(n + before, out.ndim)))
    return S.reshape(out, out_shape)


def index_layout(entries):
    """The dims of ``x[idx]`` from its parsed entries: the advanced entries, their broadcast shape, the plain
    ("new" and "slice") entries in order, and ``block``, the number of plain dims before the advanced block
    (numpy puts the block where its indices stand when they are adjacent, else first), and the shape of x[idx]."""
    adv = [e for e in entries if e[0] == "adv"]
    try:
        adv_shape = tuple(np.broadcast_shapes(*[tuple(e[2].shape) for e in adv]))
    except ValueError:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with shapes "
                         f"{', '.join(str(tuple(e[2].shape)) for e in adv)}") from None
    pos = [i for i, e in enumerate(entries) if e[0] == "adv"]
    adjacent = pos and pos[-1] - pos[0] + 1 == len(pos)
    block = sum(e[0] in ("new", "slice") for e in entries[:pos[0]]) if adjacent else 0
    plain = [e for e in entries if e[0] in ("new", "slice")]
    sizes = tuple(1 if e[0] == "new" else e[4] for e in plain)
    return adv, adv_shape, plain, block, sizes[:block] + adv_shape + sizes[block:]
