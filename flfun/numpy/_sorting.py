"""Sorting, searching and set functions of ``flfun.numpy``: ``sort``, ``argsort``, ``searchsorted``, the
``unique_*`` family (array API 2024.12), ``lexsort``, ``partition`` and ``argpartition``. All are built on the
``sort`` primitive, which is always stable; NaNs sort last (first when descending, since a descending sort is the
reverse of an ascending one with ties kept in order)."""
from typing import NamedTuple, Sequence

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.numpy._asarray import as_array, asarray, concrete
from flfun.numpy._elementwise import logical_and, logical_or
from flfun.numpy.promotion import promote
from flfun.numpy._reductions import sum as _sum
from flfun.numpy._take import take
from flfun.primitives import shape as lax
from flfun.primitives.elementwise import eq, le, lt, ne, sub
from flfun.util import canonical_axis


def _prepare(op: str, x, axis):
    x = as_array(x)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least one dimension, got a 0-d array")
    return x, canonical_axis(axis, x.ndim, op)


def _argsort(x, axis: int, descending: bool):
    """int64 indices that sort ``x`` along ``axis``; ties keep their original order in both directions."""
    if descending:   # sort the reversed array ascending, then reverse back: ties stay in original order
        idx = lax.sort((lax.rev(x, (axis,)), lax.iota(dtypes.int64, x.shape, axis)), axis)[1]
        return sub(lax.full((), x.shape[axis] - 1, dtypes.int64), lax.rev(idx, (axis,)))
    return lax.sort((x, lax.iota(dtypes.int64, x.shape, axis)), axis)[1]


def sort(x, /, axis: int = -1, *, descending: bool = False, stable: bool = True) -> Array:
    """A sorted copy of ``x`` along ``axis`` (the sort is always stable; NaNs go last, or first if descending).

    Example::

        >>> fnp.sort(fnp.asarray([3, 1, 2]), descending=True).tolist()
        [3, 2, 1]
    """
    x, axis = _prepare("sort", x, axis)
    if descending:
        return lax.rev(lax.sort(lax.rev(x, (axis,)), axis), (axis,))
    return lax.sort(x, axis)


def argsort(x, /, axis: int = -1, *, descending: bool = False, stable: bool = True) -> Array:
    """int64 indices that sort ``x`` along ``axis``; equal elements keep their original order, also when
    ``descending`` (the sort is always stable).

    Example::

        >>> fnp.argsort(fnp.asarray([2, 1, 2, 0]), descending=True).tolist()
        [0, 2, 1, 3]
    """
    x, axis = _prepare("argsort", x, axis)
    return _argsort(x, axis, descending)


def lexsort(keys: Sequence, axis: int = -1) -> Array:
    """Indices that sort by several keys, numpy-style: the LAST key is the primary one.

    Example::

        >>> fnp.lexsort([fnp.asarray([1, 0, 2]), fnp.asarray([0, 0, 1])]).tolist()   # by 2nd key, then 1st
        [1, 0, 2]
    """
    keys = [as_array(k) for k in keys]
    if not keys:
        raise ValueError("lexsort: keys must contain at least one array")
    if any(k.shape != keys[0].shape for k in keys):
        raise ValueError(f"lexsort: all keys must have one shape, got {[tuple(k.shape) for k in keys]}")
    _, axis = _prepare("lexsort", keys[0], axis)
    ops = keys[::-1] + [lax.iota(dtypes.int64, keys[0].shape, axis)]
    return lax.sort(ops, axis, num_keys=len(keys))[-1]


def _check_kth(op: str, kth, n: int) -> None:
    for k in (kth if isinstance(kth, (list, tuple)) else (kth,)):
        if not isinstance(k, int) or not -n <= k < n:
            raise ValueError(f"{op}: kth={kth!r} must be an int (or ints) within [-{n}, {n})")


def partition(a, kth, axis: int = -1) -> Array:
    """numpy's ``partition``: the ``kth`` element lands where a sort would put it, smaller ones before it and
    larger ones after. flfun sorts fully, which satisfies that contract (it is one order numpy may return).

    Example::

        >>> fnp.partition(fnp.asarray([3, 4, 2, 1]), 2).tolist()   # numpy may also give [2, 1, 3, 4]
        [1, 2, 3, 4]
    """
    a, axis = _prepare("partition", a, axis)
    _check_kth("partition", kth, a.shape[axis])
    return lax.sort(a, axis)


def argpartition(a, kth, axis: int = -1) -> Array:
    """Indices that partition ``a`` around ``kth`` (see ``partition``; flfun returns a full stable argsort).

    Example::

        >>> fnp.argpartition(fnp.asarray([3, 4, 2, 1]), 1).tolist()
        [3, 2, 0, 1]
    """
    a, axis = _prepare("argpartition", a, axis)
    _check_kth("argpartition", kth, a.shape[axis])
    return _argsort(a, axis, False)


__all__ = ["sort", "argsort", "lexsort", "partition", "argpartition"]


def searchsorted(x1, x2, /, side: str = "left", sorter=None) -> Array:
    """int64 indices where inserting the elements of ``x2`` keeps the sorted 1-d ``x1`` sorted: the first such
    place (``side='left'``) or the last (``'right'``); NaN sorts last. Every pair is compared, so it works under
    every transform, at ``len(x1) * x2.size`` work.

    Example::

        >>> fnp.searchsorted(fnp.asarray([1, 2, 2, 3]), fnp.asarray([2, 5]), side="right").tolist()
        [3, 4]
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a, v = promote("searchsorted", as_array(x1), x2)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-d, got {a.ndim}-d")
    a = a if sorter is None else take(a, sorter)
    shape = (*v.shape, a.shape[0])
    a, v = lax.broadcast_in_dim(a, shape, (v.ndim,)), lax.broadcast_in_dim(v, shape, tuple(range(v.ndim)))
    v_nan = ne(v, v)
    before = logical_or(lt(a, v), logical_and(v_nan, eq(a, a))) if side == "left" else logical_or(le(a, v), v_nan)
    return _sum(before, axis=-1)


UniqueAllResult = NamedTuple("UniqueAllResult", [("values", Array), ("indices", Array), ("inverse_indices", Array),
                                                 ("counts", Array)])
UniqueCountsResult = NamedTuple("UniqueCountsResult", [("values", Array), ("counts", Array)])
UniqueInverseResult = NamedTuple("UniqueInverseResult", [("values", Array), ("inverse_indices", Array)])


def unique_all(x, /) -> UniqueAllResult:
    """The distinct values of ``x`` (sorted, flattened; every NaN counts as distinct), the index of each one's
    first occurrence, the index into ``values`` of each element of ``x`` (``x``'s shape) and the counts. The
    result's shape depends on the values, so ``x`` must be concrete (eager only), like all ``unique_*``.

    Example::

        >>> [a.tolist() for a in fnp.unique_all(fnp.asarray([3, 1, 3]))]
        [[1, 3], [1, 0], [1, 0, 1], [1, 2]]
    """
    a = concrete(x, "unique")
    values, index, inverse, counts = np.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    dev = x.device if isinstance(x, Array) else None
    return UniqueAllResult(asarray(values, a.dtype, device=dev), *[
        asarray(i, dtypes.int64, device=dev) for i in (index, inverse.reshape(a.shape), counts)])


def unique_counts(x, /) -> UniqueCountsResult:
    """The distinct values of ``x`` and their counts (eager only): ``fnp.unique_counts(x).counts``."""
    out = unique_all(x)
    return UniqueCountsResult(out.values, out.counts)


def unique_inverse(x, /) -> UniqueInverseResult:
    """The distinct values of ``x`` and where each element of ``x`` is among them (eager only)."""
    out = unique_all(x)
    return UniqueInverseResult(out.values, out.inverse_indices)


def unique_values(x, /) -> Array:
    """The distinct values of ``x``, sorted (eager only): ``fnp.unique_values(fnp.asarray([2, 1, 2])) -> [1, 2]``."""
    return unique_all(x).values


__all__ += ["searchsorted", "unique_all", "unique_counts", "unique_inverse", "unique_values"]
