"""Cumulative sums and products of ``flfun.numpy``: cumsum, cumprod (numpy: ``axis=None`` flattens) and the array
API's cumulative_sum, cumulative_prod (with ``include_initial``). dtypes accumulate as in ``sum`` / ``prod``.
"""
from flfun.array import Array
from flfun.core import short
from flfun.numpy._asarray import no_out
from flfun.numpy.promotion import asarray_like
from flfun.numpy._reductions import accumulated
from flfun.primitives import reduce as lax_reduce, shape as lax_shape
from flfun.util import canonical_axis, prod as _size

__all__ = ["cumsum", "cumprod", "cumulative_sum", "cumulative_prod"]


def _scan(op, fn, x, axis, dtype, include_initial=False, initial_value=0, out=None):
    no_out(op, out)
    x = asarray_like(x)
    if axis is None:       # numpy's cumsum flattens; the array API's cumulative_sum needs a vector
        if op.startswith("cumulative") and len(x.shape) > 1:
            raise ValueError(f"{op}: axis is required for arrays of rank > 1, got {short(x)}")
        x, axis = lax_shape.reshape(x, (_size(x.shape),)), 0
    x = accumulated(x, dtype)
    if len(x.shape) == 0:
        x = lax_shape.reshape(x, (1,))
    ax = canonical_axis(axis, len(x.shape), op)
    res = fn(x, ax)
    if include_initial:
        cfg = tuple((1, 0, 0) if i == ax else (0, 0, 0) for i in range(len(x.shape)))
        res = lax_shape.pad(res, lax_shape.full((), initial_value, res.dtype), cfg)
    return res


def cumsum(x, /, axis=None, dtype=None, out=None) -> Array:
    """Running sum along ``axis``; ``axis=None`` flattens first (numpy); dtypes as in :func:`sum`.

    Example::

        >>> fnp.cumsum(fnp.asarray([[1, 2], [3, 4]])).tolist()
        [1, 3, 6, 10]
    """
    return _scan("cumsum", lax_reduce.cumsum, x, axis, dtype, out=out)


def cumprod(x, /, axis=None, dtype=None, out=None) -> Array:
    """Running product along ``axis``; ``axis=None`` flattens first (numpy); dtypes as in :func:`prod`.

    Example::

        >>> fnp.cumprod(fnp.asarray([1., 2., 3.])).tolist()
        [1.0, 2.0, 6.0]
    """
    return _scan("cumprod", lax_reduce.cumprod, x, axis, dtype, out=out)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial: bool = False) -> Array:
    """Running sum along ``axis`` (array API 2024.12); ``include_initial`` prepends the zero.

    Example::

        >>> fnp.cumulative_sum(fnp.asarray([1., 2.]), include_initial=True).tolist()
        [0.0, 1.0, 3.0]
    """
    return _scan("cumulative_sum", lax_reduce.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial: bool = False) -> Array:
    """Running product along ``axis`` (array API 2024.12); ``include_initial`` prepends the one.

    Example::

        >>> fnp.cumulative_prod(fnp.asarray([2., 3.]), include_initial=True).tolist()
        [1.0, 2.0, 6.0]
    """
    return _scan("cumulative_prod", lax_reduce.cumprod, x, axis, dtype, include_initial, 1)
