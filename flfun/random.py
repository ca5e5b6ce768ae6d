"""``flfun.random``: splittable counter-based random numbers (threefry-2x32, as in JAX).

A key is a ``uint32[2]`` array. Every function is built from flfun primitives (uint32 add, xor, shifts), so keys
work under ``jit``, ``vmap``, ``grad`` and ``pmap`` and give the same numbers on every backend. The bit layout
follows JAX's partitionable threefry scheme, so ``uniform`` and ``permutation`` reproduce ``jax.random``.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.core import short
from flfun.numpy._promote import to_float
from flfun.util import canonical_axis, prod

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)
_KINDS = {"f": "a floating-point type", "u": "an unsigned integer type", "iu": "an integer type"}


# ------------------------------------------------------------------------------------------------- threefry
def threefry_2x32(k0, k1, x0, x1):
    """The threefry-2x32 block cipher (20 rounds) of Salmon et al. (Random123) on uint32 arrays.

    ``k0, k1`` are the key words, ``x0, x1`` the counter words (all broadcastable uint32 arrays);
    returns the two output words.

    Example::

        >>> y0, y1 = threefry_2x32(*[fnp.asarray(np.uint32(0))] * 4)
        >>> hex(int(y0)), hex(int(y1))
        ('0x6b200159', '0x99ba4efe')
    """
    for name, v in (("k0", k0), ("k1", k1), ("x0", x0), ("x1", x1)):
        if v.dtype != _U32:
            raise ValueError(f"threefry_2x32: {name} must be uint32, got {v.dtype}")
    ks = (k0, k1, lax.xor(lax.xor(k0, k1), _PARITY))
    x0, x1 = lax.add(x0, ks[0]), lax.add(x1, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = lax.add(x0, x1)
            x1 = lax.xor(x0, lax.or_(lax.shift_left(x1, np.uint32(r)), lax.shift_right_logical(x1, np.uint32(32 - r))))
        x0 = lax.add(x0, ks[(i + 1) % 3])
        x1 = lax.add(lax.add(x1, ks[(i + 2) % 3]), np.uint32(i + 1))
    return x0, x1


def _stack_last(a, b):
    """``stack([a, b], axis=-1)`` for two arrays of one shape, from broadcast + select (no concatenate)."""
    shape, dims = tuple(a.shape) + (2,), tuple(range(a.ndim))
    which = lax.iota(np.int32, shape, a.ndim)
    return lax.select_n(which, lax.broadcast_in_dim(a, shape, dims), lax.broadcast_in_dim(b, shape, dims))


def _check_key(key, fn: str):
    key = fnp.asarray(key) if isinstance(key, np.ndarray) else key
    if not isinstance(key, Array) or key.shape != (2,) or key.dtype != _U32:
        got = (f"{short(key)} (under vmap, map over the leading axis of a batch of keys)" if isinstance(key, Array)
               else type(key).__name__)
        raise ValueError(f"{fn}: key must be a uint32[2] array from flfun.random.key, got {got}")
    return key


def _threefry_key(key, x0, x1):
    """``threefry_2x32`` under ``key``'s words, taken as uint32[1] (1-d keeps numpy from warning on wrap-around)."""
    return threefry_2x32(lax.slice(key, (0,), (1,)), lax.slice(key, (1,), (2,)), x0, x1)


def _canonical_shape(shape, fn: str) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        out = (-1,)
    if any(d < 0 for d in out):
        raise ValueError(f"{fn}: shape must be a tuple of non-negative ints, got {shape!r}")
    return out


def _args(key, shape, dtype, fn: str, kinds: str = "f"):
    """The checked ``key``, canonical ``shape`` and a ``dtype`` whose kind is in ``kinds``."""
    key, shape, dt = _check_key(key, fn), _canonical_shape(shape, fn), dtypes.canonicalize(dtype)
    if dt.kind not in kinds:
        raise ValueError(f"{fn}: dtype must be {_KINDS[kinds]}, got {dt}")
    return key, shape, dt


def _check_fits(shape: tuple[int, ...], fn: str, **arrays) -> None:
    for name, a in arrays.items():
        if len(a.shape) > len(shape) or any(d not in (1, s) for d, s in zip(a.shape[::-1], shape[::-1])):
            raise ValueError(f"{fn}: {name} of shape {tuple(a.shape)} does not broadcast to shape {shape}")


def _hash_counters(key, shape: tuple[int, ...]):
    """Threefry of the row-major counter over ``shape`` under ``key``: two uint32 arrays of ``shape``."""
    n = prod(shape)
    if n >= 2 ** 32:
        raise ValueError(f"random: at most 2**32 - 1 values per call, got shape {shape}")
    m = (max(n, 1),)
    y0, y1 = _threefry_key(key, lax.full(m, 0, _U32), lax.iota(_U32, m, 0))
    return tuple(lax.reshape(lax.slice(y, (0,), (0,)) if n == 0 else y, shape) for y in (y0, y1))


# ---------------------------------------------------------------------------------------------------- keys
def _int_words(x, fn: str, arg: str):
    """An integer scalar ``x`` (Python, numpy or Array, also traced) as uint32 words ``(high, low)`` of
    ``x mod 2**64``."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        s = int(x) % 2 ** 64
        return fnp.asarray(np.uint32(s >> 32)), fnp.asarray(np.uint32(s & 0xFFFFFFFF))
    if not isinstance(x, Array) or x.shape != () or not dtypes.is_int(x.dtype):
        raise ValueError(f"{fn}: {arg} must be an integer scalar, got {x!r:.60}")
    hi = (lax.convert_element_type(lax.shift_right_logical(x, x.dtype.type(32)), _U32)
          if x.dtype.itemsize == 8 else lax.full((), 0, _U32))
    return hi, lax.convert_element_type(x, _U32)


def key(seed) -> Array:
    """A new key from an integer seed (a Python int or an integer array, also traced): ``uint32[2]``.

    Seeds in ``[0, 2**32)`` give the same key as ``jax.random.PRNGKey(seed)``.

    Example::

        >>> k = flfun.random.key(0)
        >>> k.shape, k.dtype
        ((2,), dtype('uint32'))
    """
    return _stack_last(*_int_words(seed, "key", "seed"))


PRNGKey = key


def split(key: Array, num: int | Sequence[int] = 2) -> Array:
    """``num`` new independent keys from ``key``: an array of shape ``(num, 2)`` (or ``(*num, 2)``).

    Example::

        >>> k1, k2 = flfun.random.split(flfun.random.key(0))
    """
    return _stack_last(*_hash_counters(_check_key(key, "split"), _canonical_shape(num, "split")))


def fold_in(key: Array, data) -> Array:
    """A new key from ``key`` and an integer ``data`` (e.g. the step number or a device index).

    Example::

        >>> step_key = flfun.random.fold_in(flfun.random.key(0), 7)
    """
    key, d = _check_key(key, "fold_in"), lax.reshape(_int_words(data, "fold_in", "data")[1], (1,))
    return lax.reshape(_stack_last(*_threefry_key(key, lax.full((1,), 0, _U32), d)), (2,))


def bits(key: Array, shape: Sequence[int] = (), dtype=np.uint32) -> Array:
    """Uniformly random unsigned integers of ``dtype`` (uint8/16/32/64) and ``shape``.

    Example::

        >>> flfun.random.bits(flfun.random.key(1), (3,)).dtype
        dtype('uint32')
    """
    key, shape, dt = _args(key, shape, dtype, "bits", "u")
    y0, y1 = _hash_counters(key, shape)
    if dt.itemsize == 8:
        return lax.or_(lax.shift_left(lax.convert_element_type(y0, dt), dt.type(32)), lax.convert_element_type(y1, dt))
    out = lax.xor(y0, y1)
    return out if dt == _U32 else lax.convert_element_type(out, dt)


# ------------------------------------------------------------------------------------------------- floats
def uniform(key: Array, shape: Sequence[int] = (), dtype=np.float32, minval=0.0, maxval=1.0) -> Array:
    """Uniform floats in ``[minval, maxval)``.

    Example::

        >>> u = flfun.random.uniform(flfun.random.key(0), (2, 3), minval=-1.0, maxval=1.0)
    """
    key, shape, dt = _args(key, shape, dtype, "uniform")
    minval, maxval = fnp.asarray(minval, dtype=dt), fnp.asarray(maxval, dtype=dt)
    _check_fits(shape, "uniform", minval=minval, maxval=maxval)
    nmant, ut = np.finfo(dt).nmant, np.dtype(f"uint{dt.itemsize * 8}")   # floats in [0, 1), all mantissa bits random
    mant = lax.shift_right_logical(bits(key, shape, ut), ut.type(dt.itemsize * 8 - nmant))
    unit = lax.mul(lax.convert_element_type(mant, dt), dt.type(2.0 ** -nmant))
    return fnp.maximum(minval, unit * (maxval - minval) + minval)


def _erfinv(x):
    """Inverse error function: Giles' single-precision polynomial (what XLA uses), plus two Newton steps in
    float64."""
    w = fnp.negative(fnp.log1p(fnp.negative(x * x)))
    small = w < 5.0
    ws, wl = w - 2.5, fnp.sqrt(fnp.maximum(w, 5.0)) - 3.0
    cs = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
          -0.00417768164, 0.246640727, 1.50140941)
    cl = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
          0.00943887047, 1.00167406, 2.83297682)
    ps, pl = fnp.full_like(x, cs[0]), fnp.full_like(x, cl[0])
    for a, b in zip(cs[1:], cl[1:]):
        ps = ps * ws + a
        pl = pl * wl + b
    y = fnp.where(small, ps, pl) * x
    if x.dtype == np.float64:
        for _ in range(2):
            y = y - (lax.erf(y) - x) / (fnp.exp(fnp.negative(y * y)) * (2 / math.sqrt(math.pi)))
    return y


def normal(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard normal floats (inverse-CDF method, as ``jax.random.normal``).

    Example::

        >>> z = flfun.random.normal(flfun.random.key(0), (1000,))
    """
    key, shape, dt = _args(key, shape, dtype, "normal")
    return _erfinv(uniform(key, shape, dt, np.nextafter(dt.type(-1), dt.type(0)), 1.0)) * dt.type(math.sqrt(2))


def truncated_normal(key: Array, lower, upper, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Standard normal floats conditioned on ``lower < z < upper`` (``shape`` defaults to their broadcast).

    Example::

        >>> z = flfun.random.truncated_normal(flfun.random.key(0), -2.0, 2.0, (4, 4))
    """
    dt = dtypes.canonicalize(dtype)
    lower, upper = fnp.asarray(lower, dtype=dt), fnp.asarray(upper, dtype=dt)
    if shape is None:
        shape = np.broadcast_shapes(lower.shape, upper.shape)
    key, shape, dt = _args(key, shape, dt, "truncated_normal")
    _check_fits(shape, "truncated_normal", lower=lower, upper=upper)
    sqrt2 = dt.type(math.sqrt(2))
    out = _erfinv(uniform(key, shape, dt, lax.erf(lower / sqrt2), lax.erf(upper / sqrt2))) * sqrt2
    tiny = dt.type(np.finfo(dt).eps)
    return fnp.clip(out, lower + fnp.abs(lower) * tiny, upper - fnp.abs(upper) * tiny)


def bernoulli(key: Array, p=0.5, shape: Sequence[int] | None = None) -> Array:
    """Booleans that are True with probability ``p`` (``shape`` defaults to ``p``'s shape).

    Example::

        >>> mask = flfun.random.bernoulli(flfun.random.key(0), 0.9, (8,))
    """
    key = _check_key(key, "bernoulli")
    p = to_float(fnp.asarray(p))
    shape = _canonical_shape(p.shape if shape is None else shape, "bernoulli")
    _check_fits(shape, "bernoulli", p=p)
    return uniform(key, shape, p.dtype) < p


def gumbel(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard Gumbel floats: ``-log(-log(u))``.

    Example::

        >>> g = flfun.random.gumbel(flfun.random.key(0), (5,))
    """
    key, shape, dt = _args(key, shape, dtype, "gumbel")
    return fnp.negative(fnp.log(fnp.negative(fnp.log(uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)))))


def categorical(key: Array, logits, axis: int = -1, shape: Sequence[int] | None = None) -> Array:
    """Samples from the categorical distributions given by unnormalised log-probabilities ``logits``.

    The result has ``logits``' shape without ``axis`` (or ``shape``, which must end with that batch shape).

    Example::

        >>> flfun.random.categorical(flfun.random.key(0), fnp.log(fnp.asarray([0.1, 0.9])))
    """
    key = _check_key(key, "categorical")
    logits = fnp.asarray(logits)
    axis = canonical_axis(axis, logits.ndim, "categorical")
    logits = logits if axis == logits.ndim - 1 else fnp.moveaxis(logits, axis, -1)
    batch = tuple(logits.shape[:-1])
    shape = batch if shape is None else _canonical_shape(shape, "categorical")
    if tuple(shape[len(shape) - len(batch):]) != batch:
        raise ValueError(f"categorical: shape {shape} must end with the logits' batch shape {batch}")
    g = gumbel(key, (*shape, logits.shape[-1]), logits.dtype if dtypes.is_float(logits.dtype) else np.float32)
    return lax.argmax(g + logits, len(shape), dtypes.DEFAULT_INT)


def randint(key: Array, shape: Sequence[int], minval, maxval, dtype=np.int64) -> Array:
    """Uniform integers in ``[minval, maxval)`` (the same unbiased-enough scheme as ``jax.random.randint``).

    Example::

        >>> flfun.random.randint(flfun.random.key(0), (3,), 0, 10)
    """
    key, shape, dt = _args(key, shape, dtype, "randint", "iu")
    ut = np.dtype(f"uint{max(dt.itemsize * 8, 32)}")
    try:
        minval, maxval = fnp.asarray(minval, dtype=dt), fnp.asarray(maxval, dtype=dt)
    except OverflowError:
        raise ValueError(f"randint: minval {minval} and maxval {maxval} must fit in {dt}") from None
    _check_fits(shape, "randint", minval=minval, maxval=maxval)
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
    key = _check_key(key, "permutation")
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
    shape = _canonical_shape(shape, "choice")
    size = prod(shape)
    if size > n and (n <= 0 or not replace):
        raise ValueError(f"choice: cannot draw {size} values from {n}{'' if replace else ' without replacement'}")
    if replace:
        return randint(key, shape, 0, n)
    return lax.reshape(lax.slice(permutation(key, n), (0,), (size,)), shape)


__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "choice", "fold_in", "gumbel", "key", "normal",
           "permutation", "randint", "shuffle", "split", "threefry_2x32", "truncated_normal", "uniform"]
