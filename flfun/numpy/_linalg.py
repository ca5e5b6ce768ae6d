"""Products of ``flfun.numpy``: matmul, dot, vdot, inner, outer, tensordot, vecdot, kron, diagonal, trace (einsum is
in ``_einsum.py``).

Every contraction lowers to one ``dot_general`` per operand pair (plus transposes, reshapes and ``reduce_sum``),
so it runs as BLAS matmuls and differentiates and batches through dot_general's rules. Broadcast batch
dimensions become free dimensions of the contraction instead of being materialised.
"""
import itertools
from collections.abc import Sequence

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import trace_state, short, wrap
from flfun.numpy._einsum import contract, take_diagonals
from flfun.numpy.promotion import asarray_like, promote
from flfun.numpy._reductions import sum as _sum
from flfun.primitives import elementwise as lax, shape as lax_shape
from flfun.primitives.linalg import dot_general, dot_general_p
from flfun.util import canonical_axis

__all__ = ["diagonal", "dot", "inner", "kron", "matmul", "outer", "tensordot", "trace", "vdot", "vecdot",
           "matvec", "vecmat"]


def _check_contract(op: str, a, b, ca: Sequence[int], cb: Sequence[int]) -> None:
    if any(a.shape[i] != b.shape[j] for i, j in zip(ca, cb)):
        raise TypeError(f"{op}: contracting dimensions must match, got {short(a)} and {short(b)}")


# ------------------------------------------------------------------------------------------------------ matmul
_MATMUL_DN = (((1,), (0,)), ((), ()))
_MATMUL_DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                                                 "uint8", "uint16", "uint32", "uint64", "bool")) | {dtypes.bfloat16}
_dot_impls = dot_general_p.impls


def matmul(x1, x2, /, *, preferred_element_type=None) -> Array:
    """Matrix product with array-API semantics: 1-d operands are promoted to a row / column and that axis is
    removed again; the leading (batch) dimensions broadcast. Integer products are exact. As in JAX,
    ``preferred_element_type`` is the dtype to accumulate in and return (e.g. float32 for bfloat16 operands).

    Example::

        >>> fnp.matmul(fnp.ones((5, 2, 3)), fnp.ones((3, 4))).shape
        (5, 2, 4)
    """
    if preferred_element_type is not None:     # bf16/f16 products are exact in f32: casting first is the same
        pet = dtypes.canonicalize(preferred_element_type)
        x1, x2 = (asarray_like(x).astype(pet) for x in (x1, x2))
    if trace_state.eager and type(x1) is Array and type(x2) is Array:   # eager 2-d fast path (checks done here)
        v1, v2 = x1._value, x2._value
        if v1.ndim == 2 and v2.ndim == 2 and v1.shape[1] == v2.shape[0] and v1.dtype == v2.dtype \
                and x1._device is x2._device and v1.dtype in _MATMUL_DTYPES:
            impl = _dot_impls.get(x1._device.backend)
            if impl is not None:
                return wrap(impl(v1, v2, dimension_numbers=_MATMUL_DN), x1._device)
    a, b = promote("matmul", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least one dimension, got {short(a)} and {short(b)} "
                         f"(use multiply for scalars)")
    ca, cb = a.ndim - 1, (0 if b.ndim == 1 else b.ndim - 2)
    _check_contract("matmul", a, b, (ca,), (cb,))
    nb = max(a.ndim, b.ndim, 2) - 2
    la = [*range(nb - max(a.ndim - 2, 0), nb)] + (["m"] if a.ndim > 1 else []) + ["k"]
    lb = [*range(nb - max(b.ndim - 2, 0), nb)] + ["k"] + (["n"] if b.ndim > 1 else [])
    return _broadcast_dot("matmul", a, la, b, lb, [*range(nb), "m", "n"])


def _broadcast_dot(op: str, a, la: list, b, lb: list, order: list):
    """One dot_general contracting label "k" of ``a`` and ``b``; the other labels are batch dims (shared) or free
    dims, and shared ones broadcast: a size-1 dim facing a larger one is dropped. Result dims follow ``order``."""
    sa, sb = dict(zip(la, a.shape)), dict(zip(lb, b.shape))
    if any(sa[c] != sb[c] and 1 not in (sa[c], sb[c]) for c in sa if c in sb):
        raise TypeError(f"{op}: batch dimensions do not broadcast: {short(a)} and {short(b)}")
    sizes = {c: max(sa.get(c, 1), sb.get(c, 1)) for c in {**sa, **sb}}
    return contract([(a, la), (b, lb)], sizes, [c for c in order if c in sizes])


def dot(a, b, /) -> Array:
    """numpy's ``dot``: scalars multiply, 1-d·1-d is the inner product, otherwise the last axis of ``a`` meets
    the second-to-last of ``b`` (its only axis when ``b`` is 1-d).

    Example::

        >>> fnp.dot(fnp.ones((2, 3)), fnp.ones(3)).tolist()
        [3.0, 3.0]
    """
    return _dot("dot", a, b, lambda b: 0 if b.ndim == 1 else b.ndim - 2)


def _dot(op, a, b, b_axis, flat: bool = False):
    """Contract the last axis of ``a`` with axis ``b_axis(b)`` of ``b`` (scalars multiply); with ``flat`` both
    are flattened first, and ``b_axis=None`` contracts nothing (an outer product)."""
    a, b = promote(op, a, b)
    if flat:
        a, b = lax_shape.reshape(a, (a.size,)), lax_shape.reshape(b, (b.size,))
    elif a.ndim == 0 or b.ndim == 0:
        return lax.mul(a, b)
    ca, cb = ((), ()) if b_axis is None else ((a.ndim - 1,), (b_axis(b),))
    _check_contract(op, a, b, ca, cb)
    return dot_general(a, b, ((ca, cb), ((), ())))


def vdot(a, b, /) -> Array:
    """Dot product of the flattened operands: ``fnp.vdot(fnp.ones((2, 2)), fnp.ones(4)) == 4``."""
    return _dot("vdot", a, b, lambda b: 0, flat=True)


def inner(a, b, /) -> Array:
    """Contract the last axes of ``a`` and ``b`` (scalars multiply): result shape ``a.shape[:-1] + b.shape[:-1]``.

    Example::

        >>> fnp.inner(fnp.ones((2, 3)), fnp.ones((4, 3))).shape
        (2, 4)
    """
    return _dot("inner", a, b, lambda b: b.ndim - 1)


def outer(a, b, /) -> Array:
    """Outer product of the flattened operands: ``fnp.outer(fnp.ones(2), fnp.ones(3)).shape == (2, 3)``.
    (A broadcast product, not a contraction: ``0 * -0`` stays ``-0``.)"""
    a, b = promote("outer", a, b)
    return lax.mul(lax_shape.reshape(a, (a.size, 1)), lax_shape.reshape(b, (1, b.size)))


def tensordot(a, b, /, axes=2) -> Array:
    """Contract ``axes`` of ``a`` with ``axes`` of ``b``; the result holds a's free axes then b's.

    Args:
        axes: an int ``n`` (the last ``n`` axes of ``a`` with the first ``n`` of ``b``) or a pair of axis
            sequences (or ints) of equal length.

    Example::

        >>> fnp.tensordot(fnp.ones((2, 3, 4)), fnp.ones((3, 4, 5)), axes=2).shape
        (2, 5)
    """
    a, b = promote("tensordot", a, b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={n} must be between 0 and the smaller rank of {short(a)} and "
                             f"{short(b)}")
        ca, cb = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    else:
        try:
            xa, xb = axes
        except (TypeError, ValueError):
            raise ValueError(f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}") from None
        xa, xb = ((v,) if isinstance(v, (int, np.integer)) else tuple(v) for v in (xa, xb))
        if len(xa) != len(xb):
            raise ValueError(f"tensordot: axes must name as many axes of each operand, got {axes!r}")
        ca, cb = (tuple(canonical_axis(i, x.ndim, "tensordot") for i in xs) for x, xs in ((a, xa), (b, xb)))
        if len(set(ca)) != len(ca) or len(set(cb)) != len(cb):
            raise ValueError(f"tensordot: repeated axis in axes={axes!r}")
    _check_contract("tensordot", a, b, ca, cb)
    return dot_general(a, b, ((ca, cb), ((), ())))


def vecdot(x1, x2, /, *, axis: int = -1) -> Array:
    """Dot products of vectors along ``axis``, broadcasting the other dimensions (array API).

    Example::

        >>> fnp.vecdot(fnp.ones((4, 3)), fnp.ones(3)).shape
        (4,)
    """
    a, b = promote("vecdot", x1, x2)
    a = lax.conj(a) if a.dtype.kind == "c" else a      # the standard's sum of conj(x1) * x2
    n = max(a.ndim, b.ndim)
    if n == 0:
        raise ValueError("vecdot: operands must have at least one dimension, got scalars")
    ax = canonical_axis(axis, n, "vecdot") - n
    if -ax > min(a.ndim, b.ndim):
        raise ValueError(f"vecdot: axis {axis} is not an axis of both {short(a)} and {short(b)}")
    _check_contract("vecdot", a, b, (a.ndim + ax,), (b.ndim + ax,))
    la, lb = ([n - x.ndim + j if j != x.ndim + ax else "k" for j in range(x.ndim)] for x in (a, b))
    return _broadcast_dot("vecdot", a, la, b, lb, [*range(n)])


def matvec(x1, x2, /) -> Array:
    """Matrix-vector products over broadcast batch dimensions: ``x1[..., i, j] * x2[..., j]`` summed over ``j``."""
    a, b = asarray_like(x1), asarray_like(x2)
    if a.ndim < 2 or b.ndim < 1:
        raise ValueError(f"matvec: needs a matrix stack and a vector stack, got {short(a)} and {short(b)}")
    return matmul(a, b[..., None])[..., 0]


def vecmat(x1, x2, /) -> Array:
    """Vector-matrix products over broadcast batch dimensions: ``x1[..., i] * x2[..., i, j]`` summed over ``i``."""
    a, b = asarray_like(x1), asarray_like(x2)
    if a.ndim < 1 or b.ndim < 2:
        raise ValueError(f"vecmat: needs a vector stack and a matrix stack, got {short(a)} and {short(b)}")
    return matmul(a[..., None, :], b)[..., 0, :]


def kron(a, b, /) -> Array:
    """Kronecker product (the rank of the smaller operand is padded with leading 1s, as in numpy).

    Example::

        >>> fnp.kron(fnp.eye(2), fnp.ones((2, 2))).shape
        (4, 4)
    """
    a, b = promote("kron", a, b)
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    a = lax_shape.reshape(a, tuple(itertools.chain.from_iterable((d, 1) for d in sa)))
    b = lax_shape.reshape(b, tuple(itertools.chain.from_iterable((1, d) for d in sb)))
    return lax_shape.reshape(lax.mul(a, b), tuple(x * y for x, y in zip(sa, sb)))


# ------------------------------------------------------------------------------------------- diagonal, trace
def diagonal_last(x, offset: int = 0):
    """The (offset) diagonal of the last two axes of ``x`` as its last axis: crop to a square block, flatten it
    and take every ``L + 1``-th element (exact and NaN-safe, unlike multiplying by an identity mask)."""
    n1, n2 = x.shape[-2], x.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(n1 - r0, n2 - c0))
    r0, c0 = (r0, c0) if length else (0, 0)
    x = lax_shape.slice(x, (0,) * (x.ndim - 2) + (r0, c0), tuple(x.shape[:-2]) + (r0 + length, c0 + length))
    return take_diagonals(x, [*range(x.ndim - 2), "d", "d"])[0]


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """numpy's ``diagonal``: the diagonal of the ``axis1``/``axis2`` planes, as a new last axis.

    Example::

        >>> fnp.diagonal(fnp.arange(9).reshape(3, 3)).tolist()
        [0, 4, 8]
    """
    a = asarray_like(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: the array must have at least 2 dimensions, got {short(a)}")
    ax1, ax2 = canonical_axis(axis1, a.ndim, "diagonal"), canonical_axis(axis2, a.ndim, "diagonal")
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    rest = tuple(i for i in range(a.ndim) if i not in (ax1, ax2))
    return diagonal_last(lax_shape.transpose(a, rest + (ax1, ax2)), int(offset))


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None) -> Array:
    """Sum along a diagonal (numpy's ``trace``); integers accumulate like ``sum``.

    Example::

        >>> int(fnp.trace(fnp.eye(3)))
        3
    """
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
