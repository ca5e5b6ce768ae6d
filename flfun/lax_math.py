"""The ``jax.lax`` math a user calls beyond the primitives' own wrappers: inverse hyperbolics, special functions,
bit operations, sorting helpers, general and prefix reductions. Each is composed from primitives (through
``flfun.numpy`` and ``flfun.scipy.special``), so it differentiates, vmaps and jits like them; like jax.lax's these
take arrays of one dtype, and Python scalars are weak."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from flfun import numpy as fnp
from flfun.primitives import elementwise as pe
from flfun.primitives import reduce as pr
from flfun.scipy import special
from flfun.tree import tree_flatten, tree_leaves, tree_unflatten
from flfun.util import canonical_axes


# jax.lax names for functions flfun.numpy, scipy.special and the primitives already have
acosh, asinh, atanh = fnp.arccosh, fnp.arcsinh, fnp.arctanh
exp2, square, reciprocal = fnp.exp2, fnp.square, fnp.reciprocal
erfc, erf_inv, lgamma, digamma, zeta = special.erfc, special.erfinv, special.gammaln, special.digamma, special.zeta
igamma, igammac, bessel_i0e, bessel_i1e = special.gammainc, special.gammaincc, special.i0e, special.i1e
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = pe.and_, pe.or_, pe.xor, pe.not_


def cbrt(x):
    """Elementwise real cube root (negative for negative ``x``).

    Example::

        >>> float(lax.cbrt(fnp.asarray(-8.0)))
        -2.0
    """
    x = fnp.asarray(x)
    r = fnp.abs(x) ** (1.0 / 3.0)
    r = r - (r * r * r - fnp.abs(x)) / fnp.where(r == 0, 1.0, 3.0 * r * r)   # one Newton step: exact cubes
    return fnp.where(x < 0, -r, r)


def polygamma(m, x):
    """The ``m``-th derivative of digamma: ``digamma`` for ``m = 0``, else ``(-1)**(m+1) m! zeta(m+1, x)``.

    Example::

        >>> round(float(lax.polygamma(1, fnp.asarray(1.0))), 6)    # pi**2 / 6
        1.644934
    """
    m = int(m) if isinstance(m, (int, np.integer)) else None
    if m is None or m < 0:
        raise ValueError(f"polygamma: m must be a non-negative Python int (the derivative order), got {m!r}")
    if m == 0:
        return special.digamma(x)
    return (-1.0) ** (m + 1) * math.factorial(m) * special.zeta(float(m + 1), x)


def _bits(x, op: str):
    """``(x, its bits as the unsigned int of its width, the width)`` for an integer array ``x``."""
    x = fnp.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{op}: needs an integer array, got {x.dtype}")
    width = np.dtype(x.dtype).itemsize * 8
    return x, x.astype(np.dtype(f"uint{width}")), width


def population_count(x):
    """Number of set bits of each element of an integer array (of its two's complement for signed ints).

    Example::

        >>> lax.population_count(fnp.asarray([0, 7, 255], dtype="int32")).tolist()
        [0, 3, 8]
    """
    x, u, _ = _bits(x, "population_count")
    return fnp.bitwise_count(u).astype(x.dtype)


def clz(x):
    """Number of leading zero bits of each element of an integer array (its width for 0).

    Example::

        >>> lax.clz(fnp.asarray([1, 256, 0], dtype="int32")).tolist()
        [31, 23, 32]
    """
    x, u, width = _bits(x, "clz")
    for shift in (1, 2, 4, 8, 16, 32)[:width.bit_length() - 1]:    # set every bit below the highest set one
        u = u | (u >> shift)
    return (width - fnp.bitwise_count(u)).astype(x.dtype)


def top_k(operand, k: int, *, axis: int = -1):
    """The ``k`` largest entries along ``axis`` and their indices, largest first (ties: the lower index first).

    Example::

        >>> v, i = lax.top_k(fnp.asarray([1., 5., 3.]), 2)
        >>> v.tolist(), i.tolist()
        ([5.0, 3.0], [1, 2])
    """
    x = fnp.asarray(operand)
    axis = canonical_axes(axis, x.ndim, "top_k")[0] if x.ndim else None
    if axis is None or not isinstance(k, (int, np.integer)) or not 0 <= k <= x.shape[axis]:
        raise ValueError(f"top_k: need 0 <= k <= operand.shape[axis] on an array of rank >= 1, got k={k!r} for "
                         f"shape {x.shape}, axis={axis}")
    order = fnp.argsort(x, axis=axis, descending=True, stable=True)
    idx = fnp.take(order, fnp.arange(int(k)), axis=axis)
    return fnp.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` largest entries along ``reduction_dimension`` and their indices, computed exactly (recall 1):
    ``lax.approx_max_k(x, 2)``."""
    return top_k(operand, k, axis=reduction_dimension)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` smallest entries along ``reduction_dimension`` and their indices, computed exactly:
    ``lax.approx_min_k(x, 2)``."""
    values, idx = top_k(-fnp.asarray(operand), k, axis=reduction_dimension)
    return -values, idx


def mulhi(x, y):
    """The high half of the double-width product of two integer arrays of width <= 32 bits.

    Example::

        >>> lax.mulhi(fnp.asarray([2 ** 30], "int32"), fnp.asarray([8], "int32")).tolist()
        [2]
    """
    x, y = fnp.asarray(x), fnp.asarray(y)
    if x.dtype != y.dtype or not np.issubdtype(x.dtype, np.integer) or x.dtype.itemsize > 4:
        raise TypeError(f"mulhi: needs two integer arrays of one dtype of at most 32 bits, got {x.dtype}, {y.dtype}")
    wide = np.int64 if np.issubdtype(x.dtype, np.signedinteger) else np.uint64
    return ((x.astype(wide) * y.astype(wide)) >> (8 * x.dtype.itemsize)).astype(x.dtype)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """``keys`` sorted along ``dimension``, and ``values`` permuted the same way.

    Example::

        >>> k, v = lax.sort_key_val(fnp.asarray([3, 1, 2]), fnp.asarray([30., 10., 20.]))
        >>> v.tolist()
        [10.0, 20.0, 30.0]
    """
    keys, values = fnp.asarray(keys), fnp.asarray(values)
    if keys.shape != values.shape:
        raise ValueError(f"sort_key_val: keys {keys.shape} and values {values.shape} must have the same shape")
    order = fnp.argsort(keys, axis=dimension, stable=True)
    return fnp.take_along_axis(keys, order, axis=dimension), fnp.take_along_axis(values, order, axis=dimension)


def reduce_xor(operand, axes: Sequence[int]):
    """Bitwise xor of an int or bool array over ``axes`` (0/False over an empty axis).

    Example::

        >>> lax.reduce_xor(fnp.asarray([1, 2, 3], dtype="int32"), (0,)).tolist()
        0
    """
    x = fnp.asarray(operand)
    if not (np.issubdtype(x.dtype, np.integer) or x.dtype == bool):
        raise TypeError(f"reduce_xor: needs an int or bool array, got {x.dtype}")
    axes = canonical_axes(tuple(axes), x.ndim, "reduce_xor")
    x = fnp.moveaxis(x, axes, tuple(range(len(axes)))).reshape((-1,) + tuple(x.shape[a] for a in range(x.ndim)
                                                                              if a not in axes))
    while x.shape[0] > 1:        # pairwise halving: log2(n) xor steps
        half, odd = x.shape[0] // 2, x.shape[0] % 2
        folded = pe.xor(x[:half], x[half:2 * half])
        x = fnp.concatenate([folded, x[2 * half:]]) if odd else folded
    return x[0] if x.shape[0] else fnp.zeros(x.shape[1:], x.dtype)


_MONOIDS = {pe.add: pr.reduce_sum, fnp.add: pr.reduce_sum, pe.mul: pr.reduce_prod, fnp.multiply: pr.reduce_prod,
            pe.max: pr.reduce_max, fnp.maximum: pr.reduce_max, pe.min: pr.reduce_min, fnp.minimum: pr.reduce_min,
            pe.and_: pr.reduce_and, pe.or_: pr.reduce_or, pe.xor: reduce_xor}


def reduce(operands, init_values, computation: Callable, dimensions: Sequence[int]):
    """``computation``-reduce ``operands`` over ``dimensions`` starting from ``init_values`` (pytrees allowed).
    As in JAX, the monoids ``lax.add``, ``mul``, ``max``, ``min``, ``bitwise_and/or/xor`` (and their
    flfun.numpy names) become one reduction primitive; any other computation is applied one slice at a time.

    Example::

        >>> lax.reduce(fnp.asarray([1., 2., 3.]), 0.0, lax.add, (0,)).tolist()
        6.0
    """
    xs, tree = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands {tree} and init_values {init_tree} must have the same structure")
    monoid = _MONOIDS.get(computation) if len(xs) == 1 else None
    if monoid is not None:
        x = fnp.asarray(xs[0])
        out = monoid(x, canonical_axes(tuple(dimensions), x.ndim, "reduce"))
        return tree_unflatten(tree, [computation(fnp.asarray(inits[0], dtype=x.dtype), out)])
    outs = [fnp.asarray(x) for x in xs]
    for d in sorted(canonical_axes(tuple(dimensions), outs[0].ndim, "reduce"), reverse=True):
        acc = [fnp.broadcast_to(fnp.asarray(i, dtype=x.dtype), x.shape[:d] + x.shape[d + 1:])
               for i, x in zip(inits, outs)]
        for j in range(outs[0].shape[d]):
            acc = tree_leaves(computation(tree_unflatten(tree, acc),
                                       tree_unflatten(tree, [fnp.take(x, j, axis=d) for x in outs])))
        outs = acc
    return tree_unflatten(tree, outs)


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """All prefix combinations ``fn(... fn(fn(e0, e1), e2) ..., ek)`` along ``axis`` of a pytree of arrays, in
    ``O(log n)`` levels of ``fn`` applied to whole slices (``fn`` must be associative and elementwise in the
    arrays' other dims).

    Example::

        >>> lax.associative_scan(lax.add, fnp.asarray([1., 2., 3., 4.])).tolist()
        [1.0, 3.0, 6.0, 10.0]
    """
    leaves, tree = tree_flatten(elems)
    leaves = [fnp.asarray(x) for x in leaves]
    if not leaves or len({x.shape[axis] if x.ndim else -1 for x in leaves}) != 1 or leaves[0].ndim == 0:
        raise ValueError(f"associative_scan: every leaf needs the same, existing axis {axis}, got shapes "
                         f"{[x.shape for x in leaves]}")
    ax = canonical_axes(axis, leaves[0].ndim, "associative_scan")[0]
    xs = [fnp.moveaxis(x, ax, 0) for x in leaves]
    xs = [fnp.flip(x, 0) for x in xs] if reverse else xs
    combine = (lambda a, b: tree_leaves(fn(tree_unflatten(tree, b), tree_unflatten(tree, a)))) if reverse else \
        (lambda a, b: tree_leaves(fn(tree_unflatten(tree, a), tree_unflatten(tree, b))))
    n, shift = xs[0].shape[0], 1
    while shift < n:             # Hillis-Steele: element i combines with element i - shift
        combined = combine([x[:n - shift] for x in xs], [x[shift:] for x in xs])
        xs = [fnp.concatenate([x[:shift], c]) for x, c in zip(xs, combined)]
        shift *= 2
    xs = [fnp.flip(x, 0) for x in xs] if reverse else xs
    return tree_unflatten(tree, [fnp.moveaxis(x, 0, ax) for x in xs])


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """Running ``log(sum(exp(x)))`` along ``axis``, stable for large and very negative values.

    Example::

        >>> lax.cumlogsumexp(fnp.log(fnp.asarray([1., 2., 3.]))).tolist()   # log of 1, 3, 6
        [0.0, 1.0986123, 1.7917595]
    """
    return associative_scan(fnp.logaddexp, fnp.asarray(operand), reverse=reverse, axis=axis)


__all__ = ["acosh", "approx_max_k", "approx_min_k", "asinh", "associative_scan", "atanh", "bessel_i0e", "bessel_i1e", "bitwise_and", "bitwise_not",
           "bitwise_or", "bitwise_xor", "cbrt", "clz", "cumlogsumexp", "digamma", "erf_inv", "erfc", "exp2",
           "igamma", "igammac", "lgamma", "mulhi", "polygamma", "population_count", "reciprocal", "reduce", "reduce_xor",
           "sort_key_val", "square", "top_k", "zeta"]
