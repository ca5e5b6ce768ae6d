"""Op-table records for the reductions and scans; the axes are drawn too. ``smooth_args`` draw values at least
0.01 apart so that finite differences of max/min-like ops never straddle a tie."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from flfun import lax
from flfun.testing import arrays, shapes
from op_table import ALL, FLOATS, INTS, OpRecord


def _distinct(dtype, shape):
    """Values in [-3, 3] on a 0.01 grid, all different (float) or any (other dtypes)."""
    if np.dtype(dtype).kind != "f":
        return arrays(dtype, shape)
    grid = hnp.arrays(np.int64, shape, elements=st.integers(-300, 300), unique=True)
    return grid.map(lambda a: (a / 100).astype(dtype))


def reduce_args(low=-3.0, high=3.0, distinct=False, min_dims=0):
    def strat(dtype):
        @st.composite
        def draw(draw):
            shape = draw(shapes(min_dims=min_dims))
            x = draw(_distinct(dtype, shape) if distinct else arrays(dtype, shape, low=low, high=high))
            axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)).map(tuple)
                        if shape else st.just(()))
            return (x,), {"axes": axes}
        return draw()
    return strat


def axis_args(low=-3.0, high=3.0, distinct=False, extra=None):
    """One array of rank >= 1, an ``axis`` param and the params drawn by ``extra`` (a dict of strategies)."""
    def strat(dtype):
        @st.composite
        def draw(draw):
            shape = draw(shapes(min_dims=1))
            x = draw(_distinct(dtype, shape) if distinct else arrays(dtype, shape, low=low, high=high))
            params = {"axis": draw(st.integers(0, len(shape) - 1))}
            params.update({k: draw(v) for k, v in (extra or {}).items()})
            return (x,), params
        return draw()
    return strat


def _scan_ref(fn):
    def ref(x, axis, reverse):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis), axis)
        return fn(x, axis)
    return ref


_REVERSE = {"reverse": st.booleans()}
_INDEX = {"index_dtype": st.sampled_from(["int32", "int64"])}

RECORDS = [
    OpRecord("reduce_sum", lax.reduce_sum, lambda x, axes: np.sum(x, axis=axes, dtype=x.dtype), reduce_args(),
             dtypes=FLOATS + INTS),
    OpRecord("reduce_max", lax.reduce_max, lambda x, axes: np.max(x, axis=axes), reduce_args(), dtypes=ALL,
             smooth_args=reduce_args(distinct=True)),
    OpRecord("reduce_min", lax.reduce_min, lambda x, axes: np.min(x, axis=axes), reduce_args(), dtypes=ALL,
             smooth_args=reduce_args(distinct=True)),
    OpRecord("reduce_prod", lax.reduce_prod, lambda x, axes: np.prod(x, axis=axes, dtype=x.dtype),
             reduce_args(-2.0, 2.0), dtypes=FLOATS + INTS, rtol=1e-4),
    OpRecord("reduce_or", lax.reduce_or, lambda x, axes: np.any(x, axis=axes), reduce_args(), dtypes=("bool",),
             diff=False),
    OpRecord("reduce_and", lax.reduce_and, lambda x, axes: np.all(x, axis=axes), reduce_args(), dtypes=("bool",),
             diff=False),
    OpRecord("argmax", lax.argmax, lambda x, axis, index_dtype: np.argmax(x, axis).astype(index_dtype),
             axis_args(extra=_INDEX), dtypes=ALL, diff=False),
    OpRecord("argmin", lax.argmin, lambda x, axis, index_dtype: np.argmin(x, axis).astype(index_dtype),
             axis_args(extra=_INDEX), dtypes=ALL, diff=False),
    OpRecord("cumsum", lax.cumsum, _scan_ref(lambda x, a: np.cumsum(x, a, dtype=x.dtype)),
             axis_args(extra=_REVERSE), dtypes=FLOATS + INTS),
    OpRecord("cumprod", lax.cumprod, _scan_ref(lambda x, a: np.cumprod(x, a, dtype=x.dtype)),
             axis_args(-2.0, 2.0, extra=_REVERSE), dtypes=FLOATS + INTS),
    OpRecord("cummax", lax.cummax, _scan_ref(np.maximum.accumulate), axis_args(extra=_REVERSE),
             dtypes=FLOATS + INTS, smooth_args=axis_args(distinct=True, extra=_REVERSE)),
    OpRecord("cummin", lax.cummin, _scan_ref(np.minimum.accumulate), axis_args(extra=_REVERSE),
             dtypes=FLOATS + INTS, smooth_args=axis_args(distinct=True, extra=_REVERSE)),
]
