"""Reductions of ``flfun.numpy``: sum, prod, max, min, mean, var, std, argmax, any, all, count_nonzero, ptp,
average and the nan-ignoring variants (running sums and products are in ``_cumulative.py``).

dtypes follow the array API: sums and products of bool and small integers accumulate in the default integer
(int64; unsigned in uint64), floats keep their dtype, and means of integers are float32.
"""
import builtins

from flfun import dtypes
from flfun.array import Array
from flfun.core import trace_state, short, wrap
from flfun.numpy._asarray import flat_axis, no_out
from flfun.numpy._elementwise import isnan, to_bool
from flfun.numpy.promotion import asarray_like, promote, to_float
from flfun.primitives import elementwise as lax, reduce as lax_reduce, shape as lax_shape
from flfun.util import canonical_axes, canonical_axis, prod as _size

_reduce_sum_impls = lax_reduce.reduce_sum_p.impls


def _axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    if ndim == 0:
        _check_0d_axis(op, axis)
        return ()
    return canonical_axes(axis, ndim, op)


def _check_0d_axis(op: str, axis) -> None:
    """numpy accepts axis=0 and axis=-1 (and no others) on a 0-d array, reducing nothing."""
    if axis is not None and axis != () and not (type(axis) is int and axis in (0, -1)):
        raise ValueError(f"{op}: axis {axis!r} is out of bounds for an array of rank 0")


def keep_reduced_dims(x, out, axes, keepdims):
    """``out``, a reduction of ``x`` over ``axes``, with those axes kept as length 1 when ``keepdims``."""
    if not keepdims:
        return out
    return lax_shape.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _scalar(value, dtype):
    return lax_shape.full((), value, dtype)


def accumulated(x, dtype):
    """``x`` as an array of the array API's result dtype for sums and products."""
    x = asarray_like(x)
    if dtype is not None:
        return _cast(x, dtypes.canonicalize(dtype))
    if x.dtype == dtypes.bool_ or (dtypes.is_int(x.dtype) and x.dtype.itemsize < 8):
        return _cast(x, dtypes.uint64 if dtypes.is_unsigned(x.dtype) else dtypes.DEFAULT_INT)
    return x


def _reduce(op: str, fn, x, axis, keepdims, out=None, combine=None, initial=None):
    """``fn`` over ``axis`` of ``x``. ``combine`` is given for max and min, which have no identity: an empty
    reduction needs ``initial``, which ``combine`` joins to the result."""
    no_out(op, out)
    axes = _axes(op, axis, len(x.shape))
    empty = [a for a in axes if x.shape[a] == 0]
    if combine is not None and initial is None and empty:
        raise ValueError(f"{op}: zero-size reduction over axis {empty[0]} of {short(x)}: {op} has no identity "
                         f"(pass initial=)")
    res = fn(x, axes)
    if initial is not None:
        res = combine(res, _scalar(initial, res.dtype))
    return keep_reduced_dims(x, res, axes, keepdims)


def _cast(x, dtype):
    return x if x.dtype == dtype else lax.convert_element_type(x, dtype)


def _count(x, axes) -> int:
    return _size(x.shape[a] for a in axes)


# ----------------------------------------------------------------------------------------------- sum and prod
def sum(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` (all axes by default); bool and small integers accumulate in int64 (uint64).

    Example::

        >>> fnp.sum(fnp.asarray([[1, 2], [3, 4]], dtype="int32"), axis=0).tolist()   # int64 result
        [4, 6]
    """
    if trace_state.evaluate and type(x) is Array and axis is None and dtype is None and out is None \
            and not keepdims and x._value.dtype.kind == "f":   # the common full float sum, to the impl (benchmark W1)
        v = x._value
        params = {"axes": tuple(range(v.ndim))}
        out = wrap(_reduce_sum_impls[x._device.backend](v, **params), x._device)
        if trace_state.tape is not None:           # an eager grad is recording
            trace_state.tape.record(lax_reduce.reduce_sum_p, params, (x,), (out,))
        return out
    return _reduce("sum", lax_reduce.reduce_sum, accumulated(x, dtype), axis, keepdims, out)


def prod(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """Product over ``axis``, with the dtype rules of :func:`sum`; its gradient is exact when entries are zero.

    Example::

        >>> fnp.prod(fnp.asarray([1., 2., 3.])).tolist()
        6.0
    """
    return _reduce("prod", lax_reduce.reduce_prod, accumulated(x, dtype), axis, keepdims, out)


# --------------------------------------------------------------------------------------------- max, min, ptp
def max(x, /, axis=None, out=None, keepdims: bool = False, *, initial=None) -> Array:
    """Maximum over ``axis`` (NaN propagates); an empty reduction needs ``initial``, else ValueError.

    The gradient is split evenly between tied maxima.

    Example::

        >>> fnp.max(fnp.asarray([[1., 5.], [7., 2.]]), axis=1).tolist()
        [5.0, 7.0]
    """
    return _reduce("max", lax_reduce.reduce_max, asarray_like(x), axis, keepdims, out, lax.max, initial)


def min(x, /, axis=None, out=None, keepdims: bool = False, *, initial=None) -> Array:
    """Minimum over ``axis`` (NaN propagates); an empty reduction needs ``initial``, else ValueError.

    Example::

        >>> fnp.min(fnp.asarray([[1., 5.], [7., 2.]]), axis=0).tolist()
        [1.0, 2.0]
    """
    return _reduce("min", lax_reduce.reduce_min, asarray_like(x), axis, keepdims, out, lax.min, initial)


amax, amin = max, min


def ptp(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """Range ``max - min`` over ``axis`` ("peak to peak").

    Example::

        >>> fnp.ptp(fnp.asarray([4., 1., 9.])).tolist()
        8.0
    """
    x = asarray_like(x)
    if x.dtype == dtypes.bool_:
        raise TypeError(f"ptp: boolean arrays are not supported, got {short(x)}")
    hi, lo = (_reduce("ptp", fn, x, axis, keepdims, out, c) for fn, c in ((lax_reduce.reduce_max, lax.max),
                                                                         (lax_reduce.reduce_min, lax.min)))
    return lax.sub(hi, lo)


# -------------------------------------------------------------------------------------------- mean, var, std
def _as_float(x, dtype):
    """``x`` as an array of ``dtype`` if given, then of a float dtype if it is not one."""
    x = asarray_like(x)
    return to_float(x if dtype is None else _cast(x, dtypes.canonicalize(dtype)))


def _averaged(op, x, axis, keepdims, out, dtype, squares=False, correction=0):
    """The mean over ``axis`` of ``x`` (in ``dtype``, else a float one), or with ``squares`` that of its squared
    deviations, divided by ``N - correction``; float16 and bfloat16 accumulate in float32."""
    no_out(op, out)
    x = _as_float(x, dtype)
    axes = _axes(op, axis, len(x.shape))
    wide = _cast(x, dtypes.float32) if dtypes.is_float(x.dtype) and x.dtype.itemsize < 4 else x
    if squares:
        wide = lax.sub(wide, mean(wide, axes, keepdims=True))
        wide = lax.real(lax.mul(wide, lax.conj(wide))) if dtypes.is_complex(wide.dtype) else lax.mul(wide, wide)
    n = builtins.max(_count(x, axes) - correction, 0)
    total = lax.div(lax_reduce.reduce_sum(wide, axes), _scalar(float(n), wide.dtype))
    result_dtype = dtypes.real_dtype(x.dtype) if squares and dtypes.is_complex(x.dtype) else x.dtype
    return keep_reduced_dims(x, _cast(total, result_dtype), axes, keepdims)


def mean(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """Arithmetic mean over ``axis``; integer and bool inputs give float32 (the mean of nothing is NaN).

    Example::

        >>> fnp.mean(fnp.asarray([1, 2, 4])).tolist()
        2.3333332538604736
    """
    return _averaged("mean", x, axis, keepdims, out, dtype)


def _correction(op, correction, ddof):
    if correction and ddof:
        raise ValueError(f"{op}: pass either correction= (array API) or ddof= (numpy), not both")
    return ddof or correction


def var(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, correction: float = 0.0) -> Array:
    """Variance over ``axis``, dividing by ``N - correction`` (numpy's ``ddof`` is accepted as well).

    Example::

        >>> fnp.var(fnp.asarray([1., 2., 3., 4.]), correction=1).tolist()
        1.6666666269302368
    """
    return _averaged("var", x, axis, keepdims, out, dtype, True, _correction("var", correction, ddof))


def std(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, correction: float = 0.0) -> Array:
    """Standard deviation over ``axis``: ``sqrt(var(x, correction=...))`` (``ddof`` accepted too).

    Example::

        >>> fnp.std(fnp.asarray([1., 3.])).tolist()
        1.0
    """
    return lax.sqrt(var(x, axis, dtype, out, _correction("std", correction, ddof), keepdims))


# ---------------------------------------------------------------------------------------------- argmax, argmin
def _arg(op, fn, x, axis, keepdims, out):
    no_out(op, out)
    x = asarray_like(x)
    nd = len(x.shape)
    if nd == 0:
        _check_0d_axis(op, axis)
    flat = axis is None or nd == 0
    y, ax = flat_axis(x, None if flat else axis, op)
    if y.shape[ax] == 0:
        where = short(x) if flat else f"axis {ax} of {short(x)}"
        raise ValueError(f"{op}: attempt to get {op} of an empty sequence ({where})")
    res = fn(y, ax, dtypes.DEFAULT_INT)
    return lax_shape.reshape(res, (1,) * nd) if flat and keepdims else keep_reduced_dims(x, res, (ax,), keepdims)


def argmax(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """Index (int64) of the first maximum along ``axis``, of the flattened array if ``axis`` is None; NaN counts
    as the maximum, as in numpy.

    Example::

        >>> fnp.argmax(fnp.asarray([[1., 9.], [8., 2.]]), axis=1).tolist()
        [1, 0]
    """
    return _arg("argmax", lax_reduce.argmax, x, axis, keepdims, out)


def argmin(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """Index (int64) of the first minimum along ``axis``, of the flattened array if ``axis`` is None; NaN counts
    as the minimum, as in numpy.

    Example::

        >>> fnp.argmin(fnp.asarray([3., 1., 1.])).tolist()
        1
    """
    return _arg("argmin", lax_reduce.argmin, x, axis, keepdims, out)


# ------------------------------------------------------------------------------------------------- any, all
def any(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """Whether any element along ``axis`` is nonzero (False for an empty reduction).

    Example::

        >>> fnp.any(fnp.asarray([0, 2])).tolist()
        True
    """
    return _reduce("any", lax_reduce.reduce_or, to_bool(x), axis, keepdims, out)


def all(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """Whether all elements along ``axis`` are nonzero (True for an empty reduction).

    Example::

        >>> fnp.all(fnp.asarray([1., 0.])).tolist()
        False
    """
    return _reduce("all", lax_reduce.reduce_and, to_bool(x), axis, keepdims, out)


def count_nonzero(x, /, axis=None, keepdims: bool = False) -> Array:
    """Number of nonzero elements along ``axis`` (int64).

    Example::

        >>> fnp.count_nonzero(fnp.asarray([[0, 1], [2, 3]]), axis=1).tolist()
        [1, 2]
    """
    return sum(to_bool(x), axis=axis, keepdims=keepdims)


# ---------------------------------------------------------------------------------------------------- average
def average(a, /, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean over ``axis``; ``weights`` has ``a``'s shape or is 1-D along an int ``axis``. With
    ``returned``, also gives the sum of the weights (broadcast to the result's shape). Unlike numpy, weights
    that sum to zero give NaN/inf instead of raising (the check would need concrete values).

    Example::

        >>> fnp.average(fnp.asarray([1., 3.]), weights=fnp.asarray([3., 1.])).tolist()
        1.5
    """
    a = asarray_like(a)
    a, w = promote("average", a, lax_shape.full(a.shape, 1, a.dtype) if weights is None else weights, to_float=True)
    if w.shape != a.shape:
        if axis is None:
            raise ValueError(f"average: axis must be given when weights ({short(w)}) and a ({short(a)}) differ "
                             f"in shape")
        if len(w.shape) != 1 or not isinstance(axis, int):
            raise ValueError(f"average: weights must be 1-D along an int axis when shapes differ, got weights "
                             f"{short(w)} for a {short(a)} and axis={axis!r}")
        ax = canonical_axis(axis, len(a.shape), "average")
        if w.shape[0] != a.shape[ax]:
            raise ValueError(f"average: length of weights ({w.shape[0]}) differs from a.shape[{ax}] of {short(a)}")
        w = lax_shape.broadcast_in_dim(w, a.shape, (ax,))
    axes = _axes("average", axis, len(a.shape))
    total = lax_reduce.reduce_sum(w, axes)
    avg = keep_reduced_dims(a, lax.div(lax_reduce.reduce_sum(lax.mul(a, w), axes), total), axes, keepdims)
    return (avg, keep_reduced_dims(a, total, axes, keepdims)) if returned else avg


# ------------------------------------------------------------------------------------------ nan-ignoring forms
def fill_nan(x, value):
    """``x`` (as an array) with NaN replaced by ``value`` (non-float arrays as they are)."""
    x = asarray_like(x)
    return lax.select(isnan(x), lax_shape.full(x.shape, value, x.dtype), x) if dtypes.is_float(x.dtype) else x


def nansum(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """:func:`sum` treating NaN as zero.

    Example::

        >>> fnp.nansum(fnp.asarray([1., fnp.nan, 2.])).tolist()
        3.0
    """
    return sum(fill_nan(x, 0), axis, dtype, out, keepdims)


def nanprod(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """:func:`prod` treating NaN as one: ``fnp.nanprod(fnp.asarray([2., fnp.nan, 3.])) == 6``."""
    return prod(fill_nan(x, 1), axis, dtype, out, keepdims)


def nanmean(x, /, axis=None, dtype=None, out=None, keepdims: bool = False) -> Array:
    """:func:`mean` of the non-NaN elements (NaN where there are none).

    Example::

        >>> fnp.nanmean(fnp.asarray([1., fnp.nan, 3.])).tolist()
        2.0
    """
    x = _as_float(x, dtype)
    count = sum(lax.not_(isnan(x)), axis, keepdims=keepdims)
    return lax.div(nansum(x, axis, None, out, keepdims), lax.convert_element_type(count, x.dtype))


def _nan_extremum(op, reduce_fn, combine, fill, x, axis, out, keepdims):
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return _reduce(op, reduce_fn, x, axis, keepdims, out, combine)
    res = _reduce(op, reduce_fn, fill_nan(x, fill), axis, keepdims, out, combine)
    return lax.select(all(isnan(x), axis, keepdims=keepdims), lax_shape.full(res.shape, float("nan"), res.dtype), res)


def nanmax(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """:func:`max` ignoring NaN (NaN where every element is NaN).

    Example::

        >>> fnp.nanmax(fnp.asarray([1., fnp.nan, 3.])).tolist()
        3.0
    """
    return _nan_extremum("nanmax", lax_reduce.reduce_max, lax.max, float("-inf"), x, axis, out, keepdims)


def nanmin(x, /, axis=None, out=None, keepdims: bool = False) -> Array:
    """:func:`min` ignoring NaN (NaN where every element is NaN).

    Example::

        >>> fnp.nanmin(fnp.asarray([1., fnp.nan, 3.])).tolist()
        1.0
    """
    return _nan_extremum("nanmin", lax_reduce.reduce_min, lax.min, float("inf"), x, axis, out, keepdims)


__all__ = ["sum", "prod", "max", "min", "amax", "amin", "ptp", "mean", "var", "std", "argmax", "argmin", "any",
           "all", "count_nonzero", "average", "nansum", "nanprod", "nanmean", "nanmax", "nanmin"]
