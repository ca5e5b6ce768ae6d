"""Keys of ``flfun.random``: splittable counter-based random numbers (threefry-2x32, as in JAX).

A key is a ``uint32[2]`` array. Every function is built from flfun primitives (uint32 add, xor, shifts), so keys
work under ``jit``, ``vmap``, ``grad`` and ``pmap`` and give the same numbers on every backend. The bit layout
follows JAX's partitionable threefry scheme, so ``uniform`` and ``permutation`` reproduce ``jax.random``.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.core import short
from flfun.numpy.promotion import to_float
from flfun.util import prod

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


def check_key(key, fn: str):
    key = fnp.asarray(key) if isinstance(key, np.ndarray) else key
    if not isinstance(key, Array) or key.shape != (2,) or key.dtype != _U32:
        got = (f"{short(key)} (under vmap, map over the leading axis of a batch of keys)" if isinstance(key, Array)
               else type(key).__name__)
        raise ValueError(f"{fn}: key must be a uint32[2] array from flfun.random.key, got {got}")
    return key


def _threefry_key(key, x0, x1):
    """``threefry_2x32`` under ``key``'s words, taken as uint32[1] (1-d keeps numpy from warning on wrap-around)."""
    return threefry_2x32(lax.slice(key, (0,), (1,)), lax.slice(key, (1,), (2,)), x0, x1)


def canonical_shape(shape, fn: str) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        out = (-1,)
    if any(d < 0 for d in out):
        raise ValueError(f"{fn}: shape must be a tuple of non-negative ints, got {shape!r}")
    return out


def sample_args(fn: str, key, shape, dtype, kinds: str = "f", **arrays):
    """The checked ``key``, the sample ``shape`` (``None``: the broadcast of ``arrays``' shapes), the ``dtype`` (its
    kind in ``kinds``, unless that is empty) and ``arrays`` as float arrays (of ``dtype`` if that is a float type),
    each broadcastable to ``shape``."""
    key, dt = check_key(key, fn), dtypes.canonicalize(dtype)
    if kinds and dtypes.kind(dt) not in kinds:
        raise ValueError(f"{fn}: dtype must be {_KINDS[kinds]}, got {dt}")
    arrays = {k: fnp.asarray(v, dtype=dt) if dtypes.is_float(dt) else to_float(fnp.asarray(v)) for k, v in arrays.items()}
    if shape is None and arrays:
        shape = np.broadcast_shapes(*[a.shape for a in arrays.values()])
    shape = canonical_shape(shape, fn)
    check_fits(shape, fn, **arrays)
    return key, shape, dt, arrays


def check_fits(shape: tuple[int, ...], fn: str, **arrays) -> None:
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
    return _stack_last(*_hash_counters(check_key(key, "split"), canonical_shape(num, "split")))


def fold_in(key: Array, data) -> Array:
    """A new key from ``key`` and an integer ``data`` (e.g. the step number or a device index).

    Example::

        >>> step_key = flfun.random.fold_in(flfun.random.key(0), 7)
    """
    key, d = check_key(key, "fold_in"), lax.reshape(_int_words(data, "fold_in", "data")[1], (1,))
    return lax.reshape(_stack_last(*_threefry_key(key, lax.full((1,), 0, _U32), d)), (2,))


def bits(key: Array, shape: Sequence[int] = (), dtype=np.uint32) -> Array:
    """Uniformly random unsigned integers of ``dtype`` (uint8/16/32/64) and ``shape``.

    Example::

        >>> flfun.random.bits(flfun.random.key(1), (3,)).dtype
        dtype('uint32')
    """
    key, shape, dt, _ = sample_args("bits", key, shape, dtype, "u")
    y0, y1 = _hash_counters(key, shape)
    if dt.itemsize == 8:
        return lax.or_(lax.shift_left(lax.convert_element_type(y0, dt), dt.type(32)), lax.convert_element_type(y1, dt))
    out = lax.xor(y0, y1)
    return out if dt == _U32 else lax.convert_element_type(out, dt)


def key_data(keys) -> Array:
    """The raw ``uint32`` words of ``keys`` (flfun keys are raw ``uint32[..., 2]`` arrays, so this checks and returns
    them).

    Example::

        >>> key_data(flfun.random.key(0)).dtype
        dtype('uint32')
    """
    keys = fnp.asarray(keys)
    if keys.dtype != _U32 or keys.ndim == 0 or keys.shape[-1] != 2:
        raise ValueError(f"key_data: keys must be uint32[..., 2] arrays, got {short(keys)}")
    return keys


def wrap_key_data(key_bits_array, *, impl=None) -> Array:
    """A key (array) from raw ``uint32[..., 2]`` words, as from ``key_data`` (only threefry2x32 keys exist).

    Example::

        >>> k = wrap_key_data(key_data(flfun.random.key(0)))
    """
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"wrap_key_data: impl must be None or 'threefry2x32', got {impl!r}")
    return key_data(key_bits_array)


def clone(key: Array) -> Array:
    """``key`` itself: flfun keys are immutable values, so a clone is the same key.

    Example::

        >>> k2 = clone(flfun.random.key(0))
    """
    return key_data(key)


def key_impl(keys) -> str:
    """The name of the bit generator behind ``keys``: always ``'threefry2x32'``.

    Example::

        >>> key_impl(flfun.random.key(0))
        'threefry2x32'
    """
    key_data(keys)
    return "threefry2x32"


__all__ = ["PRNGKey", "bits", "clone", "fold_in", "key", "key_data", "key_impl", "split", "threefry_2x32",
           "wrap_key_data"]
