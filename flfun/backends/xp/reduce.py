"""Reduction and scan impls against an array module ``xp``. Reductions over an empty axis give the identity
(max: -inf / the integer minimum), as in lax; ``flfun.numpy`` raises numpy's errors before it gets here."""
from __future__ import annotations

from functools import partial

import numpy as np

from flfun import dtypes

from flfun.backends.xp.common import WritesOut, finish, in_float32


def reduction_identity(dtype, biggest: bool):
    """The identity of reduce_min (``biggest``) or reduce_max over ``dtype``: +-inf, an integer bound or a bool."""
    if dtype.kind == "f" or dtype == dtypes.bfloat16:
        return float("inf") if biggest else float("-inf")
    if dtype.kind == "b":
        return biggest
    info = np.iinfo(dtype)
    return info.max if biggest else info.min


def extremum(xp, reduce, biggest: bool, x, *, axes, out=None):
    """reduce_max (``xp.maximum.reduce``) or reduce_min; over an empty axis, the identity."""
    if x.size == 0 and any(x.shape[a] == 0 for a in axes):
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return finish(xp.full(shape, reduction_identity(x.dtype, biggest), dtype=x.dtype), out)
    return reduce(x, axis=axes, out=out)


def reduce_sum(add_reduce, x, *, axes, out=None):
    return add_reduce(x, axis=axes, dtype=x.dtype, out=out)


def scan(xp, fn, x, *, axis, reverse, out=None):
    """A cumulative ``fn(x, axis, out)``, run on the flipped array when ``reverse``."""
    if not reverse:
        return fn(x, axis, out)
    res = fn(xp.flip(x, axis), axis, None if out is None else xp.flip(out, axis))
    return xp.flip(res, axis) if out is None else out


def by_steps(xp, ufunc, x, axis, out):
    """``ufunc.accumulate`` in log2(n) doubling steps (cupy has the method but raises NotImplementedError for
    maximum/minimum)."""
    res = xp.array(x, copy=True)
    d, lead = 1, (slice(None),) * axis
    while d < x.shape[axis]:
        hi, lo = lead + (slice(d, None),), lead + (slice(None, -d),)
        res[hi] = ufunc(res[lo], res[hi])
        d *= 2
    return finish(res, out)


def _cumulative(xp, name):
    """``fn(x, axis, out)`` for the scan called ``name``."""
    if name in ("cumsum", "cumprod"):
        method = getattr(xp, name)
        return lambda x, axis, out: method(x, axis=axis, dtype=x.dtype, out=out)
    ufunc = xp.maximum if name == "cummax" else xp.minimum
    if xp.__name__ == "numpy":
        return lambda x, axis, out: ufunc.accumulate(x, axis=axis, out=out)
    return partial(by_steps, xp, ufunc)


def impls(xp) -> dict:
    """name -> impl for ``xp`` (the ufunc methods directly: np.sum's and np.max's Python wrappers cost more)."""
    out = {"reduce_sum": partial(reduce_sum, xp.add.reduce),
           "reduce_max": partial(extremum, xp, xp.maximum.reduce, False),
           "reduce_min": partial(extremum, xp, xp.minimum.reduce, True),
           "reduce_prod": lambda x, *, axes, out=None: xp.prod(x, axis=axes, dtype=x.dtype, out=out),
           "reduce_or": lambda x, *, axes, out=None: xp.any(x, axis=axes, out=out),
           "reduce_and": lambda x, *, axes, out=None: xp.all(x, axis=axes, out=out),
           **{name: partial(scan, xp, _cumulative(xp, name)) for name in ("cumsum", "cumprod", "cummax", "cummin")}}
    low = ("reduce_sum", "reduce_prod", "cumsum", "cumprod")     # accumulate bf16/f16 in float32, as JAX does
    return {name: WritesOut(in_float32(xp, fn) if name in low else fn) for name, fn in out.items()} | {
        "argmax": lambda x, *, axis, index_dtype: xp.argmax(x, axis=axis).astype(index_dtype),
        "argmin": lambda x, *, axis, index_dtype: xp.argmin(x, axis=axis).astype(index_dtype),
    }
