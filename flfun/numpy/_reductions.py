"""Reductions of ``flfun.numpy``: sum, mean, max, ... with ``axis`` and ``keepdims``."""
from __future__ import annotations

from flfun import dtypes
from flfun.numpy._promote import asarray_like
from flfun.primitives import reduce as lax_reduce, shape as lax_shape
from flfun.util import canonical_axes


def _keep(x, out, axes, keepdims):
    if not keepdims:
        return out
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return lax_shape.reshape(out, shape)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis`` (all axes by default): ``fnp.sum(x, axis=0)``. bool/small ints accumulate in int64."""
    x = asarray_like(x)
    if dtype is None and (x.dtype == dtypes.bool_ or (dtypes.is_int(x.dtype) and x.dtype.itemsize < 8)):
        dtype = dtypes.uint64 if dtypes.is_unsigned(x.dtype) else dtypes.DEFAULT_INT
    if dtype is not None and dtypes.canonicalize(dtype) != x.dtype:
        x = x.astype(dtype)
    axes = canonical_axes(axis, x.ndim, "sum")
    return _keep(x, lax_reduce.reduce_sum(x, axes), axes, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over ``axis``; integer inputs give float32."""
    from flfun.numpy._promote import to_float
    x = to_float(x)
    axes = canonical_axes(axis, x.ndim, "mean")
    n = 1
    for a in axes:
        n *= x.shape[a]
    return sum(x, axis=axes, keepdims=keepdims) / float(n)
