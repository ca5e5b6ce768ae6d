"""Joining, splitting and rearranging arrays for ``flfun.numpy``: concat, stack, split, unstack, tile, repeat,
flip, roll, diff. Each is a few shape primitives, so all work under every transform.
"""
import builtins
import operator

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import is_weak, short
from flfun.numpy._asarray import as_array, flat_axis, ints, no_out
from flfun.numpy._dtype_functions import result_type
from flfun.numpy._shaping import atleast, atleast_2d, ravel, reshape
from flfun.numpy._take import take
from flfun.primitives import elementwise as lax
from flfun.primitives import shape as lax_shape
from flfun.primitives.base import check_size
from flfun.util import canonical_axes, canonical_axis

__all__ = ["stack", "concat", "concatenate", "hstack", "vstack", "dstack", "column_stack", "split", "array_split",
           "unstack", "tile", "repeat", "flip", "roll", "diff"]


# ------------------------------------------------------------------------------------------- joining, splitting
def _common(arrays, op, dtype=None):
    if isinstance(arrays, Array) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{op}: expected a sequence of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{op}: need at least one array")
    arrays = [a if type(a) in (int, float, bool, complex) else as_array(a) for a in arrays]
    dt = result_type(*arrays) if dtype is None else dtypes.canonicalize(dtype)
    xs = [as_array(a) for a in arrays]
    return [x if x.dtype == dt and not is_weak(x) else lax.convert_element_type(x, dt) for x in xs]


def concat(arrays, /, *, axis: int | None = 0, dtype=None) -> Array:
    """Join arrays along an existing ``axis`` (``axis=None`` flattens them first); dtypes are promoted.

    Example::

        >>> fnp.concat([fnp.ones(2), fnp.zeros(1)]).tolist()
        [1.0, 1.0, 0.0]
    """
    xs = _common(arrays, "concat", dtype)
    xs, axis = ([ravel(x) for x in xs], 0) if axis is None else (xs, axis)
    nd = xs[0].ndim
    if nd == 0:
        raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
    ax = canonical_axis(axis, nd, "concat")
    if any(x.ndim != nd or x.shape[:ax] + x.shape[ax + 1:] != xs[0].shape[:ax] + xs[0].shape[ax + 1:] for x in xs):
        raise ValueError(f"concat: shapes must match except along axis {ax}, got {', '.join(short(x) for x in xs)}")
    return xs[0] if len(xs) == 1 else lax_shape.concatenate(xs, ax)


def concatenate(arrays, axis: int | None = 0, dtype=None) -> Array:
    """numpy's name for ``concat``: ``fnp.concatenate([a, b], axis=1)``."""
    return concat(arrays, axis=axis, dtype=dtype)


def stack(arrays, /, axis: int = 0, out=None, dtype=None) -> Array:
    """Join same-shaped arrays along a new ``axis``.

    Example::

        >>> fnp.stack([fnp.ones(2), fnp.zeros(2)], axis=1).shape
        (2, 2)
    """
    no_out("stack", out)
    xs = _common(arrays, "stack", dtype)
    if any(x.shape != xs[0].shape for x in xs):
        raise ValueError(f"stack: all arrays must have the same shape, got {', '.join(short(x) for x in xs)}")
    ax = canonical_axis(axis, xs[0].ndim + 1, "stack")
    return concat([lax_shape.expand_dims(x, (ax,)) for x in xs], axis=ax)


def hstack(tup, /, dtype=None) -> Array:
    """Stack column-wise (along axis 1; axis 0 for 1-D arrays): ``fnp.hstack([a, b])``."""
    xs = atleast(tup, 1, list)
    return concat(xs, axis=0 if xs[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, /, dtype=None) -> Array:
    """Stack row-wise (along axis 0 of ``atleast_2d`` views): ``fnp.vstack([a, b])``."""
    return concat(atleast(tup, 2, list), axis=0, dtype=dtype)


def dstack(tup, /, dtype=None) -> Array:
    """Stack depth-wise (along axis 2 of ``atleast_3d`` views): ``fnp.dstack([a, b])``."""
    return concat(atleast(tup, 3, list), axis=2, dtype=dtype)


def column_stack(tup, /) -> Array:
    """Stack 1-D arrays as columns of a 2-D array: ``fnp.column_stack([a, b]).shape == (len(a), 2)``."""
    xs = [as_array(t) for t in tup]
    return concat([lax_shape.reshape(x, (x.shape[0], 1)) if x.ndim == 1 else atleast_2d(x) for x in xs], axis=1)


def split_at(x, bounds, ax):
    """The pieces of ``x`` between consecutive ``bounds`` along axis ``ax``."""
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
    x = as_array(x)
    ax = canonical_axis(axis, x.ndim, op)
    n = x.shape[ax]
    if not isinstance(sections, (int, np.integer)):
        idx = [builtins.min(builtins.max(i + n if i < 0 else i, 0), n) for i in map(operator.index, sections)]
        return split_at(x, [0, *idx, n], ax)
    k = int(sections)
    if k <= 0 and op == "array_split":
        raise ValueError(f"array_split: the number of sections must be positive, got {k}")
    if k <= 0 or n % k and op == "split":
        raise ValueError(f"split: indices_or_sections={k} does not divide axis {ax} of {short(x)} into equal "
                         f"sections")
    q, r = divmod(n, k)
    return split_at(x, [i * q + builtins.min(i, r) for i in range(k + 1)], ax)


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
    x = as_array(x)
    ax = canonical_axis(axis, x.ndim, "unstack")
    return tuple(lax_shape.squeeze(p, (ax,)) for p in split_at(x, list(range(x.shape[ax] + 1)), ax))


# --------------------------------------------------------------------------------------------------- repetition
def tile(x, repetitions, /) -> Array:
    """Repeat the whole of ``x`` ``repetitions[i]`` times along axis ``i`` (numpy rank rules).

    Example::

        >>> fnp.tile(fnp.asarray([1, 2]), 2).tolist()
        [1, 2, 1, 2]
    """
    x = as_array(x)
    reps = ints(repetitions, "tile", "repetitions must be an int or a sequence of ints")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    wide = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    check_size("tile", tuple(r * d for r, d in zip(reps, shape)))
    out = lax_shape.broadcast_in_dim(lax_shape.reshape(x, shape), wide, tuple(range(1, 2 * nd, 2)))
    return lax_shape.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(x, repeats, /, axis: int | None = None) -> Array:
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None).

    ``repeats`` is an int, or one count per element along ``axis``; per-element counts give a data-dependent
    shape, so they must be concrete (a list, numpy array or concrete Array), not traced.

    Example::

        >>> fnp.repeat(fnp.asarray([1, 2]), 2).tolist()
        [1, 1, 2, 2]
        >>> fnp.repeat(fnp.asarray([1, 2]), [1, 3]).tolist()
        [1, 2, 2, 2]
    """
    x, ax = flat_axis(x, axis, "repeat")
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
    return take(x, np.repeat(np.arange(n, dtype=np.int64), reps.astype(np.int64)), axis=ax)


def flip(x, /, axis=None) -> Array:
    """Reverse the order of elements along ``axis`` (None: all axes; int or tuple).

    Example::

        >>> fnp.flip(fnp.arange(3)).tolist()
        [2, 1, 0]
    """
    x = as_array(x)
    axes = canonical_axes(axis, x.ndim, "flip")
    return lax_shape.rev(x, axes) if axes else x


def roll(x, /, shift, axis=None) -> Array:
    """Shift elements cyclically by ``shift`` along ``axis`` (flattened when None); tuples roll several axes.
    ``shift`` must be concrete (not traced): it decides which static slices are joined.

    Example::

        >>> fnp.roll(fnp.arange(4), 1).tolist()
        [3, 0, 1, 2]
    """
    x = as_array(x)
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
            head, tail = split_at(x, [0, n - s, n], a)
            x = lax_shape.concatenate([tail, head], a)
    return x


def diff(x, /, n: int = 1, axis: int = -1, prepend=None, append=None) -> Array:
    """The ``n``-th discrete difference along ``axis`` (``x[1:] - x[:-1]``, repeated; ``!=`` for bool), after
    joining ``prepend`` and ``append`` to ``x`` along ``axis``.

    Example::

        >>> fnp.diff(fnp.asarray([1, 4, 9, 16]), n=2).tolist()
        [2, 2]
    """
    x = as_array(x)
    ax = canonical_axis(axis, x.ndim, "diff")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if n == 0:
        return x
    x = concat([a for a in (prepend, x, append) if a is not None], axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        hi, lo = split_at(x, [builtins.min(1, m), m], ax)[0], split_at(x, [0, builtins.max(m - 1, 0)], ax)[0]
        x = lax.ne(hi, lo) if x.dtype == dtypes.bool_ else lax.sub(hi, lo)
    return x
