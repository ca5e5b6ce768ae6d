"""Set operations and other functions whose result size depends on the values: ``unique``, ``isin``,
``intersect1d``, ``union1d``, ``setdiff1d``, ``setxor1d``, ``extract``, ``place`` and ``trim_zeros``.

As in JAX, each works eagerly and, given a static ``size=`` (and optionally ``fill_value=``), under jit and vmap
too: the values are sorted (stably), the wanted ones marked, and the marked ones compacted into ``size`` slots by
a scatter. Without ``size`` the number of results is read from the concrete input."""
import numpy as np

from flfun import dtypes
from flfun.core import short
from flfun.numpy._asarray import as_array, concrete
from flfun.numpy._creation import arange, full, zeros
from flfun.numpy._cumulative import cumsum
from flfun.numpy._elementwise import isnan, logical_not, not_equal, where
from flfun.numpy._joining import concatenate
from flfun.numpy._reductions import any, sum
from flfun.numpy._shaping import reshape
from flfun.numpy._sorting import argsort, lexsort, searchsorted
from flfun.numpy._take import take
from flfun.numpy.promotion import promote

__all__ = ["unique", "isin", "intersect1d", "union1d", "setdiff1d", "setxor1d", "extract", "place", "trim_zeros"]


def _count(keep, size, op: str) -> int:
    return int(concrete(sum(keep), op)) if size is None else size


def _compact(values, keep, size: int, fill_value=None):
    """The ``values`` where ``keep``, in order, in ``size`` slots; the rest is ``fill_value`` (default: the first
    kept value, i.e. the smallest of sorted values, as JAX)."""
    slot = where(keep, cumsum(keep.astype(dtypes.int64)) - 1, size)        # slot ``size``: dropped
    out = zeros(size, values.dtype).at[slot].set(values, mode="drop")
    filled = arange(size) < sum(keep)
    fill = (out[0] if size else 0) if fill_value is None else fill_value
    return where(filled, out, fill).astype(values.dtype)


def _sorted(x, equal_nan: bool = True):
    """``(sorted values, their original indices, mask of each first occurrence)`` of the flattened ``x``."""
    x = reshape(as_array(x), (-1,))
    perm = argsort(x, stable=True)
    s = take(x, perm)
    new = not_equal(s[1:], s[:-1])
    if equal_nan and dtypes.is_float(s.dtype):
        new = new & logical_not(isnan(s[1:]) & isnan(s[:-1]))
    return s, perm, concatenate([full((min(1, s.shape[0]),), True), new])


def unique(ar, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis=None, *, equal_nan: bool = True, size: int | None = None, fill_value=None):
    """The sorted distinct values of the flattened ``ar`` and, as asked, the index of each one's first occurrence,
    the inverse (``ar``'s shape) and the counts. ``size`` makes the result size static (padded with
    ``fill_value``), for jit. ``axis`` (distinct slices) is eager only.

    Example::

        >>> fnp.unique(fnp.asarray([3, 1, 3, 2])).tolist()
        [1, 2, 3]
    """
    if axis is not None:
        if size is not None:
            raise NotImplementedError("unique: axis= together with size= is not supported")
        out = np.unique(concrete(ar, "unique"), return_index, return_inverse, return_counts, axis=axis,
                        equal_nan=equal_nan)
        return tuple(as_array(o) for o in out) if isinstance(out, tuple) else as_array(out)
    a = as_array(ar)
    s, perm, keep = _sorted(a, equal_nan)
    size = _count(keep, size, "unique")
    out = [_compact(s, keep, size, fill_value)]
    if return_index:
        out.append(_compact(perm, keep, size, 0))
    group = cumsum(keep.astype(dtypes.int64)) - 1
    if return_inverse:
        out.append(reshape(zeros(s.shape[0], dtypes.int64).at[perm].set(group), a.shape))
    if return_counts:
        out.append(zeros(size, dtypes.int64).at[group].add(1, mode="drop"))
    return out[0] if len(out) == 1 else tuple(out)


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False):
    """True where an element of ``element`` is in ``test_elements`` (every pair is compared).

    Example::

        >>> fnp.isin(fnp.asarray([1, 2, 3]), fnp.asarray([3, 1])).tolist()
        [True, False, True]
    """
    e, t = promote("isin", element, test_elements)
    found = any(e[..., None] == reshape(t, (-1,)), axis=-1)
    return logical_not(found) if invert else found


def union1d(ar1, ar2, *, size: int | None = None, fill_value=None):
    """Sorted distinct values in either array: ``fnp.union1d(x, y)``."""
    a, b = promote("union1d", ar1, ar2)
    return unique(concatenate([a, b], axis=None), size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *, size: int | None = None,
                fill_value=None):
    """Sorted distinct values in both arrays; with ``return_indices`` also where each first occurs in each.

    Example::

        >>> fnp.intersect1d(fnp.asarray([1, 3, 4, 3]), fnp.asarray([3, 1, 2, 1])).tolist()
        [1, 3]
    """
    a, b = promote("intersect1d", ar1, ar2)
    s1, p1, k1 = _sorted(a)
    s2, p2, _ = _sorted(b)
    j = searchsorted(s2, s1)
    hit = k1 & (take(s2, where(j < s2.shape[0], j, 0)) == s1) & (j < s2.shape[0]) if s2.shape[0] else k1 & False
    size = _count(hit, size, "intersect1d")
    values = _compact(s1, hit, size, fill_value)
    if not return_indices:
        return values
    return values, _compact(p1, hit, size, 0), _compact(take(p2, where(j < s2.shape[0], j, 0)), hit, size, 0)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None, fill_value=None):
    """Sorted distinct values of ``ar1`` that are not in ``ar2``: ``fnp.setdiff1d(x, y)``."""
    a, b = promote("setdiff1d", ar1, ar2)
    s, _, keep = _sorted(a)
    keep = keep & isin(s, b, invert=True)
    return _compact(s, keep, _count(keep, size, "setdiff1d"), fill_value)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None, fill_value=None):
    """Sorted distinct values in exactly one of the arrays: ``fnp.setxor1d(x, y)``."""
    a, b = promote("setxor1d", ar1, ar2)
    s1, _, k1 = _sorted(a)
    s2, _, k2 = _sorted(b)
    c = concatenate([s1, s2])
    keep = concatenate([k1 & isin(s1, b, invert=True), k2 & isin(s2, a, invert=True)])
    order = lexsort([c, logical_not(keep)])
    c, keep = take(c, order), take(keep, order)
    return _compact(c, keep, _count(keep, size, "setxor1d"), fill_value)


def extract(condition, arr, *, size: int | None = None, fill_value=0):
    """The elements of the flattened ``arr`` where the flattened ``condition`` is true.

    Example::

        >>> fnp.extract(fnp.asarray([True, False, True]), fnp.asarray([1, 2, 3])).tolist()
        [1, 3]
    """
    a, c = reshape(as_array(arr), (-1,)), reshape(as_array(condition), (-1,))
    if c.shape != a.shape:
        raise ValueError(f"extract: condition {short(c)} and arr {short(a)} must have the same size")
    keep = c if c.dtype == dtypes.bool_ else c != 0
    return _compact(a, keep, _count(keep, size, "extract"), fill_value)


def place(arr, mask, vals, *, inplace: bool = True):
    """``arr`` with the positions where ``mask`` is true filled by ``vals`` in order (cycled). Arrays are
    immutable, so pass ``inplace=False`` (as JAX requires) and use the result.

    Example::

        >>> fnp.place(fnp.zeros(4), fnp.asarray([True, False, True, True]), fnp.asarray([1.0, 2.0]),
        ...           inplace=False).tolist()
        [1.0, 0.0, 2.0, 1.0]
    """
    if inplace:
        raise ValueError("place: flfun arrays are immutable; call place(..., inplace=False) and use the result")
    a, m, v = as_array(arr), as_array(mask), reshape(as_array(vals), (-1,))
    if m.shape != a.shape:
        raise ValueError(f"place: mask {short(m)} must have arr's shape {short(a)}")
    pos = cumsum(reshape(m, (-1,)).astype(dtypes.int64)) - 1
    return where(m, reshape(take(v, pos % max(1, v.shape[0])), a.shape), a) if v.shape[0] else a


def trim_zeros(filt, trim: str = "fb"):
    """The 1-d ``filt`` without its leading (``'f'``) and/or trailing (``'b'``) zeros (eager only)."""
    f = as_array(filt)
    nz = np.flatnonzero(concrete(f, "trim_zeros"))
    if not nz.size:
        return f[:0]
    start = nz[0] if "f" in trim.lower() else 0
    stop = nz[-1] + 1 if "b" in trim.lower() else f.shape[0]
    return f[int(start):int(stop)]
