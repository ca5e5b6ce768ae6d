"""Shape manipulation and dtype utilities of ``flfun.numpy``: reshape, transpose, stack, split, tile, repeat,
flip, roll, broadcasting, astype, result_type, ... Each is a few shape primitives, so all work under every
transform. Arrays are immutable: ``copy`` arguments are accepted but never observable.
"""
import builtins
import operator
from typing import Sequence

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import is_weak, short
from flfun.numpy._creation import _arr, _ints, _matrix_stack, asarray
from flfun.numpy._promote import dtype_and_weak
from flfun.primitives import elementwise as lax
from flfun.primitives import shape as lax_shape
from flfun.primitives.rules import broadcast_to_shape
from flfun.util import canonical_axes, canonical_axis, prod

__all__ = ["reshape", "ravel", "flatten", "transpose", "permute_dims", "matrix_transpose", "moveaxis", "swapaxes",
           "squeeze", "expand_dims", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "stack", "concat",
           "concatenate", "hstack", "vstack", "dstack", "column_stack", "split", "array_split", "unstack", "tile",
           "repeat", "flip", "roll", "diff", "atleast_1d", "atleast_2d", "atleast_3d", "astype", "result_type",
           "can_cast", "isdtype", "finfo", "iinfo", "size", "ndim", "shape"]


def _flat_axis(x, axis, op: str):
    """``(x, axis)`` with ``axis`` canonical, or the flattened ``x`` and 0 when ``axis`` is None."""
    x = _arr(x)
    return (lax_shape.reshape(x, (x.size,)), 0) if axis is None else (x, canonical_axis(axis, x.ndim, op))


# ---------------------------------------------------------------------------------------------------- reshape
def reshape(x, /, shape, *, copy: bool | None = None) -> Array:
    """Row-major reshape; one dimension may be -1 (inferred). ``copy`` is accepted (Arrays are immutable).

    Example::

        >>> fnp.reshape(fnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    x = _arr(x)
    shape = _ints(shape, "reshape", "shape must be a sequence of ints")
    n, known = prod(x.shape), prod(d for d in shape if d != -1)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise ValueError(f"reshape: shape {shape} may hold at most one -1 and no other negative size")
    if -1 in shape and known and n % known == 0:
        shape = tuple(n // known if d == -1 else d for d in shape)
    if -1 in shape or prod(shape) != n:
        raise ValueError(f"reshape: cannot reshape {short(x)} ({n} elements) into shape {shape}")
    return lax_shape.reshape(x, shape)


def ravel(x, /) -> Array:
    """The elements of ``x`` as a 1-D array (row-major): ``fnp.ravel(fnp.ones((2, 3))).shape == (6,)``."""
    x = _arr(x)
    return lax_shape.reshape(x, (prod(x.shape),))


flatten = ravel


def _check_perm(axes, x, op):
    try:
        axes = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise TypeError(f"{op}: axes must be a sequence of ints, got {axes!r}") from None
    nd = x.ndim
    if any(not -nd <= a < nd for a in axes) or sorted(a % nd for a in axes) != list(range(nd)):
        raise ValueError(f"{op}: axes {axes} are not a permutation of the axes of {short(x)}")
    return tuple(a % nd for a in axes)


def permute_dims(x, /, axes: Sequence[int]) -> Array:
    """Permute the axes: output axis ``i`` is input axis ``axes[i]``.

    Example::

        >>> fnp.permute_dims(fnp.ones((2, 3, 4)), (2, 0, 1)).shape
        (4, 2, 3)
    """
    x = _arr(x)
    return lax_shape.transpose(x, _check_perm(axes, x, "permute_dims"))


def transpose(x, /, axes: Sequence[int] | None = None) -> Array:
    """numpy's ``transpose``: reverse the axes, or permute them by ``axes``.

    Example::

        >>> fnp.transpose(fnp.ones((2, 3))).shape
        (3, 2)
    """
    x = _arr(x)
    return lax_shape.transpose(x, tuple(reversed(range(x.ndim))) if axes is None else _check_perm(axes, x, "transpose"))


def matrix_transpose(x, /) -> Array:
    """Swap the last two axes of a stack of matrices.

    Example::

        >>> fnp.matrix_transpose(fnp.ones((5, 2, 3))).shape
        (5, 3, 2)
    """
    return swapaxes(_matrix_stack(_arr(x), "matrix_transpose"), -1, -2)


def _axis_list(axis, ndim, op):
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(canonical_axis(a, ndim, op) for a in seq)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {tuple(seq)}")
    return out


def moveaxis(x, source, destination, /) -> Array:
    """Move axes ``source`` (int or tuple) to positions ``destination``, keeping the others in order.

    Example::

        >>> fnp.moveaxis(fnp.ones((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    x = _arr(x)
    src, dst = (_axis_list(a, x.ndim, "moveaxis") for a in (source, destination))
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have the same length")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax_shape.transpose(x, tuple(order))


def swapaxes(x, axis1: int, axis2: int, /) -> Array:
    """Swap two axes: ``fnp.swapaxes(fnp.ones((2, 3)), 0, 1).shape == (3, 2)``."""
    x = _arr(x)
    a, b = canonical_axis(axis1, x.ndim, "swapaxes"), canonical_axis(axis2, x.ndim, "swapaxes")
    return lax_shape.transpose(x, tuple(b if i == a else a if i == b else i for i in range(x.ndim)))


def squeeze(x, /, axis=None) -> Array:
    """Remove axes of length one (all of them when ``axis`` is None).

    Example::

        >>> fnp.squeeze(fnp.ones((1, 3, 1)), axis=0).shape
        (3, 1)
    """
    x = _arr(x)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _axis_list(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: cannot remove axis {a} of {short(x)}: its size is {x.shape[a]}, not 1")
    return lax_shape.squeeze(x, tuple(sorted(axes))) if axes else x


def expand_dims(x, /, axis=0) -> Array:
    """Insert axes of length one at positions ``axis`` (int or tuple) of the result.

    Example::

        >>> fnp.expand_dims(fnp.ones(3), axis=(0, 2)).shape
        (1, 3, 1)
    """
    x = _arr(x)
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = _axis_list(seq, x.ndim + len(seq), "expand_dims")
    return lax_shape.expand_dims(x, tuple(sorted(axes)))


# ----------------------------------------------------------------------------------------------- broadcasting
def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to: ``fnp.broadcast_shapes((3, 1), (4,)) == (3, 4)``."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {', '.join(map(str, shapes))} do not broadcast") from None


def broadcast_to(x, /, shape) -> Array:
    """``x`` broadcast to ``shape`` (numpy rules; no data is copied on the numpy backend).

    Example::

        >>> fnp.broadcast_to(fnp.arange(3), (2, 3)).shape
        (2, 3)
    """
    x = _arr(x)
    shape = _ints(shape, "broadcast_to")
    if len(x.shape) > len(shape) or any(s not in (1, d) for s, d in zip(x.shape, shape[len(shape) - x.ndim:])):
        raise ValueError(f"broadcast_to: cannot broadcast {short(x)} to shape {shape}")
    return broadcast_to_shape(x, shape)


def broadcast_arrays(*arrays) -> list[Array]:
    """Broadcast arrays against each other: ``fnp.broadcast_arrays(fnp.ones(3), fnp.ones((2, 1)))``."""
    xs = [_arr(a) for a in arrays]
    shape = broadcast_shapes(*[x.shape for x in xs])
    return [broadcast_to_shape(x, shape) for x in xs]


# ------------------------------------------------------------------------------------------ joining, splitting
def _common(arrays, op):
    if isinstance(arrays, Array) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{op}: expected a sequence of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{op}: need at least one array")
    arrays = [a if type(a) in (int, float, bool) else _arr(a) for a in arrays]
    dt = result_type(*arrays)
    xs = [_arr(a) for a in arrays]
    return [x if x.dtype == dt and not is_weak(x) else lax.convert_element_type(x, dt) for x in xs]


def concat(arrays, /, *, axis: int | None = 0) -> Array:
    """Join arrays along an existing ``axis`` (``axis=None`` flattens them first); dtypes are promoted.

    Example::

        >>> fnp.concat([fnp.ones(2), fnp.zeros(1)]).tolist()
        [1.0, 1.0, 0.0]
    """
    xs = _common(arrays, "concat")
    xs, axis = ([ravel(x) for x in xs], 0) if axis is None else (xs, axis)
    nd = xs[0].ndim
    if nd == 0:
        raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
    ax = canonical_axis(axis, nd, "concat")
    if any(x.ndim != nd or x.shape[:ax] + x.shape[ax + 1:] != xs[0].shape[:ax] + xs[0].shape[ax + 1:] for x in xs):
        raise ValueError(f"concat: shapes must match except along axis {ax}, got {', '.join(short(x) for x in xs)}")
    return xs[0] if len(xs) == 1 else lax_shape.concatenate(xs, ax)


def concatenate(arrays, axis: int | None = 0) -> Array:
    """numpy's name for ``concat``: ``fnp.concatenate([a, b], axis=1)``."""
    return concat(arrays, axis=axis)


def stack(arrays, /, axis: int = 0) -> Array:
    """Join same-shaped arrays along a new ``axis``.

    Example::

        >>> fnp.stack([fnp.ones(2), fnp.zeros(2)], axis=1).shape
        (2, 2)
    """
    xs = _common(arrays, "stack")
    if any(x.shape != xs[0].shape for x in xs):
        raise ValueError(f"stack: all arrays must have the same shape, got {', '.join(short(x) for x in xs)}")
    ax = canonical_axis(axis, xs[0].ndim + 1, "stack")
    return concat([lax_shape.expand_dims(x, (ax,)) for x in xs], axis=ax)


def hstack(tup, /) -> Array:
    """Stack column-wise (along axis 1; axis 0 for 1-D arrays): ``fnp.hstack([a, b])``."""
    xs = _atleast(tup, 1, list)
    return concat(xs, axis=0 if xs[0].ndim == 1 else 1)


def vstack(tup, /) -> Array:
    """Stack row-wise (along axis 0 of ``atleast_2d`` views): ``fnp.vstack([a, b])``."""
    return concat(_atleast(tup, 2, list), axis=0)


def dstack(tup, /) -> Array:
    """Stack depth-wise (along axis 2 of ``atleast_3d`` views): ``fnp.dstack([a, b])``."""
    return concat(_atleast(tup, 3, list), axis=2)


def column_stack(tup, /) -> Array:
    """Stack 1-D arrays as columns of a 2-D array: ``fnp.column_stack([a, b]).shape == (len(a), 2)``."""
    xs = [_arr(t) for t in tup]
    return concat([lax_shape.reshape(x, (x.shape[0], 1)) if x.ndim == 1 else atleast_2d(x) for x in xs], axis=1)


def _split_at(x, bounds, ax):
    return [lax_shape.slice(x, [lo if i == ax else 0 for i in range(x.ndim)],
                            [builtins.max(lo, hi) if i == ax else d for i, d in enumerate(x.shape)])
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(x, indices_or_sections, /, axis: int = 0) -> list[Array]:
    """Split into equal sections (an int that must divide the axis) or at the given indices.

    Example::

        >>> [p.tolist() for p in fnp.split(fnp.arange(4), 2)]
        [[0, 1], [2, 3]]
    """
    return _split(x, indices_or_sections, axis, "split")


def _split(x, sections, axis, op):
    x = _arr(x)
    ax = canonical_axis(axis, x.ndim, op)
    n = x.shape[ax]
    if not isinstance(sections, (int, np.integer)):
        idx = [builtins.min(builtins.max(i + n if i < 0 else i, 0), n) for i in map(operator.index, sections)]
        return _split_at(x, [0, *idx, n], ax)
    k = int(sections)
    if k <= 0 and op == "array_split":
        raise ValueError(f"array_split: the number of sections must be positive, got {k}")
    if k <= 0 or n % k and op == "split":
        raise ValueError(f"split: indices_or_sections={k} does not divide axis {ax} of {short(x)} into equal "
                         f"sections")
    q, r = divmod(n, k)
    return _split_at(x, [i * q + builtins.min(i, r) for i in range(k + 1)], ax)


def array_split(x, indices_or_sections, /, axis: int = 0) -> list[Array]:
    """Like ``split``, but an int need not divide the axis (the first sections get one more element).

    Example::

        >>> [p.shape for p in fnp.array_split(fnp.arange(5), 2)]
        [(3,), (2,)]
    """
    return _split(x, indices_or_sections, axis, "array_split")


def unstack(x, /, *, axis: int = 0) -> tuple[Array, ...]:
    """Split ``x`` along ``axis`` into a tuple of arrays of one rank less.

    Example::

        >>> [a.tolist() for a in fnp.unstack(fnp.asarray([[1, 2], [3, 4]]))]
        [[1, 2], [3, 4]]
    """
    x = _arr(x)
    ax = canonical_axis(axis, x.ndim, "unstack")
    return tuple(lax_shape.squeeze(p, (ax,)) for p in _split_at(x, list(range(x.shape[ax] + 1)), ax))


# ------------------------------------------------------------------------------------------------- repetition
def tile(x, repetitions, /) -> Array:
    """Repeat the whole of ``x`` ``repetitions[i]`` times along axis ``i`` (numpy rank rules).

    Example::

        >>> fnp.tile(fnp.asarray([1, 2]), 2).tolist()
        [1, 2, 1, 2]
    """
    x = _arr(x)
    reps = _ints(repetitions, "tile", "repetitions must be an int or a sequence of ints")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    wide = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    out = lax_shape.broadcast_in_dim(lax_shape.reshape(x, shape), wide, tuple(range(1, 2 * nd, 2)))
    return lax_shape.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(x, repeats, /, *, axis: int | None = None) -> Array:
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None).

    ``repeats`` is an int, or one count per element along ``axis``; per-element counts give a data-dependent
    shape, so they must be concrete (a list, numpy array or concrete Array), not traced.

    Example::

        >>> fnp.repeat(fnp.asarray([1, 2]), 2).tolist()
        [1, 1, 2, 2]
        >>> fnp.repeat(fnp.asarray([1, 2]), [1, 3]).tolist()
        [1, 2, 2, 2]
    """
    x, ax = _flat_axis(x, axis, "repeat")
    n = x.shape[ax]
    reps = np.asarray(repeats)
    if reps.dtype.kind not in "iub":
        raise ValueError(f"repeat: repeats must be integers, got {reps.dtype}")
    if reps.ndim > 1 or (reps.ndim == 1 and reps.shape[0] not in (1, n)):
        raise ValueError(f"repeat: repeats must be an int or have one entry per element along axis {ax} "
                         f"({n}), got shape {reps.shape}")
    if np.any(reps < 0):
        raise ValueError("repeat: repeats must be non-negative")
    if reps.ndim == 0 or reps.shape[0] == 1:
        r = int(reps.reshape(()))
        shape = tuple(x.shape)
        wide = shape[:ax + 1] + (r,) + shape[ax + 1:]
        dims = tuple(range(ax + 1)) + tuple(range(ax + 2, len(wide)))
        out = lax_shape.broadcast_in_dim(x, wide, dims)
        return lax_shape.reshape(out, shape[:ax] + (n * r,) + shape[ax + 1:])
    from flfun.numpy._indexing import take
    return take(x, np.repeat(np.arange(n, dtype=np.int64), reps.astype(np.int64)), axis=ax)


def flip(x, /, axis=None) -> Array:
    """Reverse the order of elements along ``axis`` (None: all axes; int or tuple).

    Example::

        >>> fnp.flip(fnp.arange(3)).tolist()
        [2, 1, 0]
    """
    x = _arr(x)
    axes = canonical_axes(axis, x.ndim, "flip")
    return lax_shape.rev(x, axes) if axes else x


def roll(x, /, shift, axis=None) -> Array:
    """Shift elements cyclically by ``shift`` along ``axis`` (flattened when None); tuples roll several axes.
    ``shift`` must be concrete (not traced): it decides which static slices are joined.

    Example::

        >>> fnp.roll(fnp.arange(4), 1).tolist()
        [3, 0, 1, 2]
    """
    x = _arr(x)
    if axis is None:
        return reshape(roll(ravel(x), shift, axis=0), x.shape)
    try:
        shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
    except ValueError:
        shifts = axes = np.zeros((0, 0))     # sequences of different lengths: the error below
    if shifts.ndim > 1 or shifts.dtype.kind not in "iu" or axes.dtype.kind not in "iu":
        raise ValueError(f"roll: shift and axis must be ints or 1-D sequences of ints, got {shift!r}, {axis!r}")
    for s, a in zip(shifts.ravel().tolist(), axes.ravel().tolist()):
        a = canonical_axis(a, x.ndim, "roll")
        n = x.shape[a]
        s = s % n if n else 0
        if s:
            head, tail = _split_at(x, [0, n - s, n], a)
            x = lax_shape.concatenate([tail, head], a)
    return x


def diff(x, /, *, axis: int = -1, n: int = 1, prepend=None, append=None) -> Array:
    """The ``n``-th discrete difference along ``axis`` (``x[1:] - x[:-1]``, repeated; ``!=`` for bool), after
    joining ``prepend`` and ``append`` to ``x`` along ``axis``.

    Example::

        >>> fnp.diff(fnp.asarray([1, 4, 9, 16]), n=2).tolist()
        [2, 2]
    """
    x = _arr(x)
    ax = canonical_axis(axis, x.ndim, "diff")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if n == 0:
        return x
    x = concat([a for a in (prepend, x, append) if a is not None], axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        hi, lo = _split_at(x, [builtins.min(1, m), m], ax)[0], _split_at(x, [0, builtins.max(m - 1, 0)], ax)[0]
        x = lax.ne(hi, lo) if x.dtype == dtypes.bool_ else lax.sub(hi, lo)
    return x


def _atleast(arrays, nd: int, single=None):
    """``arrays`` with at least ``nd`` dims (numpy's placement); one array in gives one out unless ``single``."""
    out = []
    for x in map(_arr, arrays):
        shape = (1,) * (builtins.min(nd, 2) - x.ndim) + tuple(x.shape)
        out.append(x if x.ndim >= nd else lax_shape.reshape(x, shape + (1,) * (nd - len(shape))))
    return out[0] if len(out) == 1 and single is None else out


def atleast_1d(*arrays):
    """Arrays with at least one dimension (one array in, one out; several in, a list out)."""
    return _atleast(arrays, 1)


def atleast_2d(*arrays):
    """Arrays with at least two dimensions: 1-D ``(n,)`` becomes ``(1, n)``."""
    return _atleast(arrays, 2)


def atleast_3d(*arrays):
    """Arrays with at least three dimensions: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``."""
    return _atleast(arrays, 3)


# ------------------------------------------------------------------------------------------------------ dtypes
def astype(x, dtype, /, *, copy: bool = True, device=None) -> Array:
    """``x`` converted to ``dtype``. ``copy`` is accepted; an Array of the right dtype is returned as it is.

    Example::

        >>> fnp.astype(fnp.asarray([1.7, -1.7]), "int32").tolist()
        [1, -1]
    """
    x = _arr(x)
    dt = dtypes.canonicalize(dtype)
    out = x if x.dtype == dt and not is_weak(x) else lax.convert_element_type(x, dt)
    return out if device is None else asarray(out, device=device)


def result_type(*arrays_and_dtypes) -> np.dtype:
    """The dtype that combining the arguments gives (Python scalars are weak: they defer to arrays).

    Example::

        >>> fnp.result_type(fnp.int8, fnp.uint8), fnp.result_type(fnp.ones(2, "int32"), 1.0)
        (dtype('int16'), dtype('float32'))
    """
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    return dtypes.result_type(*[dtype_and_weak(a) for a in arrays_and_dtypes])[0]


def can_cast(from_, to, /) -> bool:
    """Whether ``from_`` (a dtype or array) casts to ``to`` without losing information (numpy's 'safe').

    Example::

        >>> fnp.can_cast(fnp.int8, fnp.float32), fnp.can_cast(fnp.float64, fnp.float32)
        (True, False)
    """
    src = dtype_and_weak(from_)[0]
    return bool(np.can_cast(src, dtypes.canonicalize(to), casting="safe"))


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu", "real floating": "f",
          "complex floating": "c", "numeric": "iuf"}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, an array-API kind name ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric') or a tuple of those.

    Example::

        >>> fnp.isdtype(fnp.float32, ("integral", "real floating"))
        True
    """
    dt = np.dtype(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {', '.join(_KINDS)} or a dtype")
        return dt.kind in _KINDS[kind]
    return dt == dtypes.canonicalize(kind)


def finfo(type, /):
    """numpy's ``finfo`` for a float dtype or array: ``fnp.finfo(fnp.float32).eps``."""
    return dtypes.finfo(type.dtype if hasattr(type, "dtype") else type)


def iinfo(type, /):
    """numpy's ``iinfo`` for an integer dtype or array: ``fnp.iinfo(fnp.int8).max == 127``."""
    return dtypes.iinfo(type.dtype if hasattr(type, "dtype") else type)


def size(x, axis: int | None = None) -> int:
    """Number of elements (along ``axis`` if given): ``fnp.size(fnp.ones((2, 3))) == 6``."""
    s = np.shape(x) if not hasattr(x, "shape") else tuple(x.shape)
    return prod(s) if axis is None else s[canonical_axis(axis, len(s), "size")]


def ndim(x) -> int:
    """Number of dimensions: ``fnp.ndim(fnp.ones((2, 3))) == 2``."""
    return len(x.shape) if hasattr(x, "shape") else np.ndim(x)


def shape(x) -> tuple[int, ...]:
    """The shape of an array or nested sequence: ``fnp.shape([[1, 2]]) == (1, 2)``."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
