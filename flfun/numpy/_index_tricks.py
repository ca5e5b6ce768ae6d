"""Index helpers of ``flfun.numpy``: index arrays for grids and triangles (``indices``, ``ix_``,
``diag_indices``, ``tril_indices``, ...), flat <-> multi-index conversion, and selecting or writing by index
(``choose``, ``select``, ``put``, ``fill_diagonal``; the writers are functional: ``inplace=False`` as in JAX).
Index sets of static shapes are computed by numpy on the host and enter as constants."""
import numpy as np

from flfun import dtypes
from flfun.core import Tracer, short
from flfun.numpy._asarray import as_array, asarray
from flfun.numpy._creation import ones
from flfun.numpy._elementwise import floor_divide, remainder, where
from flfun.numpy._joining import stack
from flfun.numpy._shaping import broadcast_arrays, reshape
from flfun.numpy._take import nonzero, take, take_along_axis
from flfun.numpy.promotion import asarray_like
from flfun.primitives.shape import iota

__all__ = ["indices", "ix_", "diag_indices", "diag_indices_from", "tril_indices", "tril_indices_from",
           "triu_indices", "triu_indices_from", "mask_indices", "unravel_index", "ravel_multi_index", "choose",
           "select", "put", "fill_diagonal"]


def indices(dimensions, dtype=dtypes.int64, sparse: bool = False):
    """The index grid of an array of shape ``dimensions``: ``out[k][i0, i1, ...] == ik`` (stacked, or with
    ``sparse`` a tuple of broadcastable arrays).

    Example::

        >>> fnp.indices((2, 3))[1].tolist()
        [[0, 1, 2], [0, 1, 2]]
    """
    shape = tuple(int(d) for d in dimensions)
    dt = dtypes.canonicalize(dtype)
    if sparse:
        return tuple(reshape(iota(dt, (n,), 0), tuple(n if i == k else 1 for i in range(len(shape))))
                     for k, n in enumerate(shape))
    return stack([iota(dt, shape, k) for k in range(len(shape))]) if shape else asarray(np.zeros((0,), dt))


def ix_(*args):
    """An open mesh from 1-d sequences (bool ones become their nonzero indices): ``x[fnp.ix_(rows, cols)]``."""
    out = []
    for k, a in enumerate(args):
        a = as_array(a)
        if a.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-d, argument {k} is {short(a)}")
        if a.dtype == dtypes.bool_:
            (a,) = nonzero(a)
        out.append(reshape(a, tuple(-1 if i == k else 1 for i in range(len(args)))))
    return tuple(out)


def diag_indices(n: int, ndim: int = 2):
    """Indices of the main diagonal of an ``(n,) * ndim`` array: ``x[fnp.diag_indices(3)]``."""
    return (iota(dtypes.int64, (int(n),), 0),) * ndim


def diag_indices_from(arr):
    """:func:`diag_indices` for ``arr``, which must have at least 2 equal dimensions."""
    a = as_array(arr)
    if a.ndim < 2 or len(set(a.shape)) != 1:
        raise ValueError(f"diag_indices_from: needs an array of >= 2 equal dimensions, got {short(a)}")
    return diag_indices(a.shape[0], a.ndim)


def _triangle(np_fn, n, k, m=None, arr=None):
    """numpy's ``np_fn(n, k, m)`` as int64 Arrays; with ``arr``, for the shape of that 2-d array."""
    if arr is not None:
        a = as_array(arr)
        if a.ndim != 2:
            raise ValueError(f"{np_fn.__name__}_from: arr must be 2-d, got {short(a)}")
        n, m = a.shape
    return tuple(asarray(i.astype(np.int64)) for i in np_fn(n, k, m))


def tril_indices(n: int, k: int = 0, m: int | None = None):
    """Row and column indices of the lower triangle (at and below diagonal ``k``) of an ``(n, m)`` array."""
    return _triangle(np.tril_indices, n, k, m)


def triu_indices(n: int, k: int = 0, m: int | None = None):
    """Row and column indices of the upper triangle (at and above diagonal ``k``) of an ``(n, m)`` array."""
    return _triangle(np.triu_indices, n, k, m)


def tril_indices_from(arr, k: int = 0):
    """:func:`tril_indices` for the shape of the 2-d ``arr``."""
    return _triangle(np.tril_indices, None, k, arr=arr)


def triu_indices_from(arr, k: int = 0):
    """:func:`triu_indices` for the shape of the 2-d ``arr``."""
    return _triangle(np.triu_indices, None, k, arr=arr)


def mask_indices(n: int, mask_func, k: int = 0):
    """Indices where ``mask_func(ones((n, n)), k)`` is non-zero: ``fnp.mask_indices(3, fnp.triu)``."""
    return nonzero(mask_func(ones((n, n), dtypes.int64), k))


def _check_bounds(op: str, idx, limit, what: str):
    if not isinstance(idx, Tracer):
        host = np.asarray(idx)
        if host.size and (host.min() < 0 or host.max() >= limit):
            raise ValueError(f"{op}: {what} out of bounds for size {limit}: {host.min()}..{host.max()}")


def unravel_index(indices, shape):
    """The multi-index, one array per dimension, of each flat index into an array of ``shape`` (C order).

    Example::

        >>> [i.tolist() for i in fnp.unravel_index(fnp.asarray([5, 7]), (3, 4))]
        [[1, 1], [1, 3]]
    """
    idx = asarray_like(indices)
    shape = tuple(int(d) for d in shape)
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"unravel_index: indices must be integers, got {idx.dtype}")
    _check_bounds("unravel_index", idx, int(np.prod(shape)), "index")
    out = []
    for d in reversed(shape):
        out.append(remainder(idx, d))
        idx = floor_divide(idx, d)
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C"):
    """Flat indices from a tuple of index arrays into an array of shape ``dims``; ``mode`` 'raise' (checked when
    concrete), 'wrap' or 'clip'; ``order`` 'C' or 'F'.

    Example::

        >>> fnp.ravel_multi_index((fnp.asarray([1, 2]), fnp.asarray([3, 0])), (3, 4)).tolist()
        [7, 8]
    """
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions")
    if mode not in ("raise", "wrap", "clip") or order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: mode must be raise/wrap/clip and order C/F, got {mode!r}, {order!r}")
    idx = broadcast_arrays(*[asarray_like(i) for i in multi_index])
    flat, stride = 0, 1
    for k in (range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))):
        i = _index_mode("ravel_multi_index", idx[k], dims[k], mode, f"index of dimension {k}")
        flat, stride = flat + i * stride, stride * dims[k]
    return flat


def _index_mode(op, idx, n, mode, what="index"):
    if mode in (None, "raise"):
        _check_bounds(op, idx, n, what)
        return idx
    if mode == "wrap":
        return remainder(idx, n)
    if mode == "clip":
        return where(idx < 0, 0, where(idx >= n, n - 1, idx))
    raise ValueError(f"{op}: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")


def choose(a, choices, out=None, mode: str = "raise"):
    """``choices[a[i]][i]`` elementwise, all broadcast together.

    Example::

        >>> fnp.choose(fnp.asarray([0, 1, 0]), [fnp.asarray([1, 2, 3]), fnp.asarray([10, 20, 30])]).tolist()
        [1, 20, 3]
    """
    if out is not None:
        raise ValueError("choose: out= is not supported (arrays are immutable)")
    idx, *cs = broadcast_arrays(asarray_like(a), *[asarray_like(c) for c in choices])
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"choose: a must be an integer array, got {idx.dtype}")
    idx = _index_mode("choose", idx, len(cs), mode)
    return take_along_axis(stack(cs), idx[None], axis=0)[0]


def select(condlist, choicelist, default=0):
    """The first ``choicelist[k]`` whose ``condlist[k]`` holds, elementwise, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: {len(condlist)} conditions but {len(choicelist)} choices")
    out = asarray_like(default)
    for c, v in reversed(list(zip(condlist, choicelist))):
        c = asarray_like(c)
        if c.dtype != dtypes.bool_:
            raise TypeError(f"select: conditions must be bool arrays, got {c.dtype}")
        out = where(c, v, out)
    return out


def put(a, ind, v, mode=None, *, inplace: bool = True):
    """``a`` with its flat positions ``ind`` set to ``v`` (cycled); pass ``inplace=False``, as in JAX."""
    if inplace:
        raise ValueError("put: flfun arrays are immutable; call put(..., inplace=False) and use the result")
    a = as_array(a)
    i = reshape(asarray_like(ind), (-1,))
    v = reshape(as_array(v), (-1,))
    if not v.shape[0]:
        return a
    i = _index_mode("put", i, a.size, mode)
    v = take(v, iota(dtypes.int64, i.shape, 0) % v.shape[0]) if v.shape[0] != i.shape[0] else v
    return reshape(reshape(a, (-1,)).at[i].set(v), a.shape)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """``a`` with its main diagonal set to ``val`` (cycled; for tall 2-d ``a`` with ``wrap``, restarted every
    ``ncols + 1`` rows, as numpy); pass ``inplace=False``, as in JAX."""
    if inplace:
        raise ValueError("fill_diagonal: flfun arrays are immutable; call fill_diagonal(..., inplace=False)")
    a = as_array(a)
    if a.ndim < 2 or a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(f"fill_diagonal: needs a 2-d array or one of equal dimensions, got {short(a)}")
    step = a.shape[1] + 1 if a.ndim == 2 else 1 + int(np.cumprod(a.shape[:-1]).sum())
    end = a.size if a.ndim > 2 or wrap else a.shape[1] * a.shape[1]
    return put(a, np.arange(0, min(end, a.size), step), val, inplace=False)

