"""Taking elements along an axis: ``take``, ``take_along_axis``, ``put_along_axis``, and the eager-only
``nonzero`` family (``nonzero``, ``argwhere``, ``flatnonzero``, ``compress``) whose result shapes depend on values.
"""
import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import Tracer, short
from flfun.numpy._asarray import as_array, asarray, concrete, flat_axis, no_out
from flfun.numpy._indexing import MODES, broadcast_values, check_host_indices, getitem, index_array
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.rules import broadcast_to_shape
from flfun.primitives.indexing import gather, scatter

__all__ = ["take", "take_along_axis", "put_along_axis", "nonzero", "argwhere", "flatnonzero", "compress"]


# --------------------------------------------------------------------------------------------- take and friends
def _prepare_take(indices, n: int, mode, op: str):
    """numpy's 'wrap' and 'clip' take modes act on the indices; the rest are getitem's modes."""
    if mode == "raise":
        return indices, None
    if mode not in ("wrap", "clip"):
        if mode not in MODES:
            raise ValueError(f"{op}: mode must be one of {MODES + ('raise', 'wrap')}, got {mode!r}")
        return indices, mode
    a = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise IndexError(f"{op}: indices must be integers, got dtype {a.dtype}")
    if n == 0 and a.size:
        raise IndexError(f"{op}: cannot take from an empty axis with mode={mode!r}")
    a = as_array(a.astype(np.int64))      # host or traced; n may not fit a's dtype
    lo, nn, hi = (S.full((), v, dtypes.int64) for v in (0, n, n - 1))
    return (E.rem(E.add(E.rem(a, nn), nn), nn) if mode == "wrap" else E.clamp(lo, a, hi)), "promise_in_bounds"


def take(x, indices, /, axis: int | None = None, out=None, mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None) -> Array:
    """Elements of ``x`` at ``indices`` along ``axis`` (the flattened ``x`` when ``axis`` is None).

    Negative indices count from the end. ``mode``: None / ``"raise"`` (out-of-range concrete indices raise
    ``IndexError``; traced ones are clamped), ``"wrap"``, ``"clip"`` (numpy's: negative indices clip to 0),
    ``"fill"`` (with ``fill_value``) or ``"promise_in_bounds"``. ``unique_indices`` and ``indices_are_sorted`` are
    jax.numpy's hints; they are accepted and change nothing.

    Example::

        >>> fnp.take(fnp.arange(10.0).reshape(2, 5), fnp.asarray([4, -1, 0]), axis=1).tolist()
        [[4.0, 4.0, 0.0], [9.0, 9.0, 5.0]]
    """
    no_out("take", out)
    x, axis = flat_axis(x, axis, "take")
    indices, mode = _prepare_take(indices, x.shape[axis], mode, "take")
    return getitem(x, (slice(None),) * axis + (indices,), mode, fill_value)


def _along_axis(x, indices, axis, mode, op: str):
    """``x`` with ``axis`` moved last and the other dims broadcast against the indices', the indices as an index
    array ``(*batch, m, 1)`` for ``gather``/``scatter`` with ``batch_dims=len(batch)``, the permutation, and the
    mode. ``put_along_axis`` does not broadcast ``x`` and takes mode ``"drop"``."""
    put = op == "put_along_axis"
    host = not isinstance(indices, Tracer)
    ind = np.asarray(indices) if host else indices
    if axis is None and ind.ndim != 1:
        raise ValueError(f"{op}: with axis=None, indices must be 1-d, got shape {tuple(ind.shape)}")
    x, axis = flat_axis(x, axis, op)
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
    modes = MODES + ("drop",) if put else MODES
    if mode not in modes:
        raise ValueError(f"{'at[].' + op if put else 'getitem'}: mode must be one of {modes}, got {mode!r}")
    n, perm = x.shape[axis], (*range(axis), *range(axis + 1, x.ndim), axis)
    if mode == "drop":
        mode = "fill"
    if host:
        ind = np.transpose(check_host_indices(ind, n, axis, mode), perm)
    else:
        ind = S.transpose(ind, perm)
        mode = mode or ("fill" if put else "clip")      # traced out-of-range indices: put drops, take clamps
    index = index_array([(ind, n)], batch + (ind.shape[-1],))
    if not put and n == 0 and mode == "clip" and 0 not in index.shape:     # gather would name the moved axis
        raise ValueError(f"gather: mode='clip' has no position to clamp to in the empty axis {axis} of {short(x)}")
    return broadcast_to_shape(S.transpose(x, perm), batch + (n,)), index, perm, mode or "promise_in_bounds"


def take_along_axis(x, indices, /, axis: int | None = -1, mode: str | None = None, fill_value=None) -> Array:
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


def put_along_axis(x, indices, values, /, axis: int | None, *, mode: str | None = None) -> Array:
    """A copy of ``x`` with ``values`` (broadcast to the indices' shape) written at ``indices`` along ``axis``:
    numpy's ``put_along_axis``, except that ``x`` is not modified but returned updated.

    Example::

        >>> fnp.put_along_axis(fnp.zeros((2, 3)), fnp.asarray([[2], [0]]), 1.0, axis=1).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    shape = as_array(x).shape
    xt, index, perm, mode = _along_axis(x, indices, axis, mode, "put_along_axis")
    inv, nb = tuple(np.argsort(perm)), xt.ndim - 1
    target = tuple(index.shape[:-1][i] for i in inv)      # the indexed shape, in x's dim order
    v = S.transpose(broadcast_values(values, target, xt.dtype, "put_along_axis"), perm)
    out = scatter(xt, index, v, axes=(nb,), batch_dims=nb, mode=mode)
    return S.reshape(S.transpose(out, inv), shape)


# ---------------------------------------------------------------------------------------- data-dependent shapes
def nonzero(x, /) -> tuple[Array, ...]:
    """Indices of the non-zero elements, one int64 array per dimension (eager only: data-dependent shape).

    Example::

        >>> [i.tolist() for i in fnp.nonzero(fnp.asarray([[0, 1], [2, 0]]))]
        [[0, 1], [1, 0]]
    """
    a = concrete(x, "nonzero")
    if a.ndim == 0:
        raise ValueError("nonzero: 0-d arrays are not supported; use fnp.atleast_1d(x) first")
    return tuple(asarray(i, dtypes.int64) for i in np.nonzero(a))


def argwhere(x, /) -> Array:
    """Indices of the non-zero elements as an ``(N, x.ndim)`` array (eager only).

    Example::

        >>> fnp.argwhere(fnp.asarray([0, 3, 0, 4])).tolist()
        [[1], [3]]
    """
    return asarray(np.argwhere(concrete(x, "argwhere")), dtypes.int64)


def flatnonzero(x, /) -> Array:
    """Indices of the non-zero elements of the flattened array (eager only): ``fnp.flatnonzero(x)``."""
    return asarray(np.flatnonzero(concrete(x, "flatnonzero")), dtypes.int64)


def compress(condition, x, /, axis: int | None = None) -> Array:
    """The slices of ``x`` along ``axis`` where the 1-d ``condition`` is true (eager in ``condition``).

    Example::

        >>> fnp.compress(fnp.asarray([True, False, True]), fnp.arange(6).reshape(3, 2), axis=0).tolist()
        [[0, 1], [4, 5]]
    """
    c = concrete(condition, "compress").astype(bool)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {c.shape}")
    x, axis = flat_axis(x, axis, "compress")
    if c.size > x.shape[axis]:
        raise ValueError(f"compress: condition has {c.size} entries but axis {axis} of {short(x)} has "
                         f"{x.shape[axis]}")
    return take(x, np.flatnonzero(c), axis=axis)
