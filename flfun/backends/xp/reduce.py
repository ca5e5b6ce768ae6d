"""Reduction and scan impls against an array module ``xp``. Reductions over an empty axis give the identity
(max: -inf / the integer minimum), as in lax; ``flfun.numpy`` raises numpy's errors before it gets here."""
from __future__ import annotations

import numpy as np

from flfun.backends.xp import WritesOut, finish


def reduction_identity(dtype, biggest: bool):
    """The identity of reduce_min (``biggest``) or reduce_max over ``dtype``: +-inf, an integer bound or a bool."""
    if dtype.kind == "f":
        return float("inf") if biggest else float("-inf")
    if dtype.kind == "b":
        return biggest
    info = np.iinfo(dtype)
    return info.max if biggest else info.min


def impls(xp) -> dict:
    def extremum(fn, biggest: bool):
        def impl(x, *, axes, out=None):
            if x.size == 0 and any(x.shape[a] == 0 for a in axes):
                shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
                return finish(xp.full(shape, reduction_identity(x.dtype, biggest), dtype=x.dtype), out)
            return fn(x, axis=axes, out=out)
        return impl

    add_reduce = xp.add.reduce   # the ufunc methods directly: np.sum's (np.max's) Python wrapper costs more

    def reduce_sum(x, *, axes, out=None):
        return add_reduce(x, axis=axes, dtype=x.dtype, out=out)

    def scan(fn):
        def impl(x, *, axis, reverse, out=None):
            if not reverse:
                return fn(x, axis, out)
            res = fn(xp.flip(x, axis), axis, None if out is None else xp.flip(out, axis))
            return xp.flip(res, axis) if out is None else out
        return impl

    def accumulate(ufunc):
        if xp.__name__ == "numpy":   # cupy has the method but raises NotImplementedError for maximum/minimum
            return lambda x, axis, out: ufunc.accumulate(x, axis=axis, out=out)

        def by_steps(x, axis, out):   # log2(n) doubling steps
            res = xp.array(x, copy=True)
            d, lead = 1, (slice(None),) * axis
            while d < x.shape[axis]:
                hi, lo = lead + (slice(d, None),), lead + (slice(None, -d),)
                res[hi] = ufunc(res[lo], res[hi])
                d *= 2
            return finish(res, out)
        return by_steps

    out = {
        "reduce_sum": reduce_sum,
        "reduce_max": extremum(xp.maximum.reduce, False), "reduce_min": extremum(xp.minimum.reduce, True),
        "reduce_prod": lambda x, *, axes, out=None: xp.prod(x, axis=axes, dtype=x.dtype, out=out),
        "reduce_or": lambda x, *, axes, out=None: xp.any(x, axis=axes, out=out),
        "reduce_and": lambda x, *, axes, out=None: xp.all(x, axis=axes, out=out),
        "cumsum": scan(lambda x, axis, out: xp.cumsum(x, axis=axis, dtype=x.dtype, out=out)),
        "cumprod": scan(lambda x, axis, out: xp.cumprod(x, axis=axis, dtype=x.dtype, out=out)),
        "cummax": scan(accumulate(xp.maximum)), "cummin": scan(accumulate(xp.minimum)),
    }
    return {name: WritesOut(fn) for name, fn in out.items()} | {
        "argmax": lambda x, *, axis, index_dtype: xp.argmax(x, axis=axis).astype(index_dtype),
        "argmin": lambda x, *, axis, index_dtype: xp.argmin(x, axis=axis).astype(index_dtype),
    }
