"""Uniform, normal and other basic samplers of ``flfun.random`` (bit streams as ``jax.random``'s), and
permutations."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.numpy.promotion import to_float
from flfun.random.keys import bits, canonical_shape, check_fits, check_key, sample_args, split
from flfun.scipy.special import erfinv as _erfinv
from flfun.util import canonical_axis, prod


# ------------------------------------------------------------------------------------------------- floats
def uniform(key: Array, shape: Sequence[int] = (), dtype=np.float32, minval=0.0, maxval=1.0) -> Array:
    """Uniform floats in ``[minval, maxval)``.

    Example::

        >>> u = flfun.random.uniform(flfun.random.key(0), (2, 3), minval=-1.0, maxval=1.0)
    """
    key, shape, dt, _ = sample_args("uniform", key, shape, dtype)
    minval, maxval = fnp.asarray(minval, dtype=dt), fnp.asarray(maxval, dtype=dt)
    check_fits(shape, "uniform", minval=minval, maxval=maxval)
    nmant, ut = np.finfo(dt).nmant, np.dtype(f"uint{dt.itemsize * 8}")   # floats in [0, 1), all mantissa bits random
    mant = lax.shift_right_logical(bits(key, shape, ut), ut.type(dt.itemsize * 8 - nmant))
    unit = lax.mul(lax.convert_element_type(mant, dt), dt.type(2.0 ** -nmant))
    return fnp.maximum(minval, unit * (maxval - minval) + minval)


def normal(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard normal floats (inverse-CDF method, as ``jax.random.normal``).

    Example::

        >>> z = flfun.random.normal(flfun.random.key(0), (1000,))
    """
    key, shape, dt, _ = sample_args("normal", key, shape, dtype)
    return _erfinv(uniform(key, shape, dt, np.nextafter(dt.type(-1), dt.type(0)), 1.0)) * dt.type(math.sqrt(2))


def truncated_normal(key: Array, lower, upper, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Standard normal floats conditioned on ``lower < z < upper`` (``shape`` defaults to their broadcast).

    Example::

        >>> z = flfun.random.truncated_normal(flfun.random.key(0), -2.0, 2.0, (4, 4))
    """
    key, shape, dt, p = sample_args("truncated_normal", key, shape, dtype, lower=lower, upper=upper)
    lower, upper = p["lower"], p["upper"]
    sqrt2 = dt.type(math.sqrt(2))
    out = _erfinv(uniform(key, shape, dt, lax.erf(lower / sqrt2), lax.erf(upper / sqrt2))) * sqrt2
    tiny = dt.type(np.finfo(dt).eps)
    return fnp.clip(out, lower + fnp.abs(lower) * tiny, upper - fnp.abs(upper) * tiny)


def bernoulli(key: Array, p=0.5, shape: Sequence[int] | None = None) -> Array:
    """Booleans that are True with probability ``p`` (``shape`` defaults to ``p``'s shape).

    Example::

        >>> mask = flfun.random.bernoulli(flfun.random.key(0), 0.9, (8,))
    """
    dt = to_float(p).dtype
    key, shape, _, a = sample_args("bernoulli", key, shape, dt, p=p)
    return uniform(key, shape, dt) < a["p"]


def gumbel(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard Gumbel floats: ``-log(-log(u))``.

    Example::

        >>> g = flfun.random.gumbel(flfun.random.key(0), (5,))
    """
    key, shape, dt, _ = sample_args("gumbel", key, shape, dtype)
    return fnp.negative(fnp.log(fnp.negative(fnp.log(uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)))))


def categorical(key: Array, logits, axis: int = -1, shape: Sequence[int] | None = None) -> Array:
    """Samples from the categorical distributions given by unnormalised log-probabilities ``logits``.

    The result has ``logits``' shape without ``axis`` (or ``shape``, which must end with that batch shape).

    Example::

        >>> flfun.random.categorical(flfun.random.key(0), fnp.log(fnp.asarray([0.1, 0.9])))
    """
    key = check_key(key, "categorical")
    logits = fnp.asarray(logits)
    axis = canonical_axis(axis, logits.ndim, "categorical")
    logits = logits if axis == logits.ndim - 1 else fnp.moveaxis(logits, axis, -1)
    batch = tuple(logits.shape[:-1])
    shape = batch if shape is None else canonical_shape(shape, "categorical")
    if tuple(shape[len(shape) - len(batch):]) != batch:
        raise ValueError(f"categorical: shape {shape} must end with the logits' batch shape {batch}")
    g = gumbel(key, (*shape, logits.shape[-1]), logits.dtype if dtypes.is_float(logits.dtype) else np.float32)
    return lax.argmax(g + logits, len(shape), dtypes.DEFAULT_INT)


def randint(key: Array, shape: Sequence[int], minval, maxval, dtype=np.int64) -> Array:
    """Uniform integers in ``[minval, maxval)`` (the same unbiased-enough scheme as ``jax.random.randint``).

    Example::

        >>> flfun.random.randint(flfun.random.key(0), (3,), 0, 10)
    """
    key, shape, dt, _ = sample_args("randint", key, shape, dtype, "iu")
    ut = np.dtype(f"uint{max(dt.itemsize * 8, 32)}")
    try:
        minval, maxval = fnp.asarray(minval, dtype=dt), fnp.asarray(maxval, dtype=dt)
    except OverflowError:
        raise ValueError(f"randint: minval {minval} and maxval {maxval} must fit in {dt}") from None
    check_fits(shape, "randint", minval=minval, maxval=maxval)
    hi_bits, lo_bits = (bits(k, shape, ut) for k in split(key))
    span = fnp.where(maxval <= minval, ut.type(1), lax.convert_element_type(maxval - minval, ut))
    mult = lax.rem(ut.type(2 ** (ut.itemsize * 4)), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    offset = lax.rem(lax.add(lax.mul(lax.rem(hi_bits, span), mult), lax.rem(lo_bits, span)), span)
    return minval + lax.convert_element_type(offset, dt)


# -------------------------------------------------------------------------------------------- permutations
def _shuffle(key, x, axis: int):
    n = x.size
    rounds = math.ceil(3 * math.log(max(1, n)) / math.log(2 ** 32 - 1))
    for _ in range(rounds):
        key, sub = split(key)
        x = lax.sort((bits(sub, x.shape), x), dimension=axis, is_stable=True, num_keys=1)[1]
    return x


def permutation(key: Array, x, axis: int = 0, independent: bool = False) -> Array:
    """A random permutation of ``range(x)`` (int ``x``) or of ``x``'s slices along ``axis``.

    With ``independent=True`` every 1-d slice along ``axis`` is shuffled independently.

    Example::

        >>> perm = flfun.random.permutation(flfun.random.key(0), 10)
    """
    key = check_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if x < 0:
            raise ValueError(f"permutation: x must be a non-negative int or an array, got {x}")
        return _shuffle(key, fnp.arange(int(x)), 0)
    x = fnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("permutation: x must be a non-negative int or an array with at least one dimension")
    axis = canonical_axis(axis, x.ndim, "permutation")
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    return fnp.take(x, _shuffle(key, fnp.arange(x.shape[axis]), 0), axis=axis)


def shuffle(key: Array, x, axis: int = 0) -> Array:
    """``x`` with its slices along ``axis`` in random order (same as ``permutation(key, x, axis)``).

    Example::

        >>> flfun.random.shuffle(flfun.random.key(0), fnp.arange(5))
    """
    return permutation(key, x, axis)


def choice(key: Array, n: int, shape: Sequence[int] = (), replace: bool = True) -> Array:
    """Random indices into ``range(n)``: with replacement (uniform ints) or without (a permutation prefix).

    Example::

        >>> idx = flfun.random.choice(flfun.random.key(0), 100, (8,), replace=False)
    """
    shape = canonical_shape(shape, "choice")
    size = prod(shape)
    if size > n and (n <= 0 or not replace):
        raise ValueError(f"choice: cannot draw {size} values from {n}{'' if replace else ' without replacement'}")
    if replace:
        return randint(key, shape, 0, n)
    return lax.reshape(lax.slice(permutation(key, n), (0,), (size,)), shape)


__all__ = ["bernoulli", "categorical", "choice", "gumbel", "normal", "permutation", "randint", "shuffle",
           "truncated_normal", "uniform"]
