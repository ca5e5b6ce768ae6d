"""``flfun.numpy.linalg``: the array-API linear-algebra extension, as far as flfun's primitives reach.

Provided: matmul, tensordot, vecdot, matrix_transpose, outer, cross, diagonal, trace, vector_norm, matrix_norm
(``'fro'``, 1, -1, inf, -inf), norm (numpy-style), matrix_power (n >= 0). Not provided, because flfun has no
matrix-decomposition primitives: cholesky, det, eigh, eigvalsh, inv, lstsq, pinv, qr, slogdet, solve, svd,
svdvals, matrix_rank, tensorinv, tensorsolve, and matrix norms of order 2, -2 and 'nuc'.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from flfun.array import Array
from flfun.core import short
from flfun.numpy._linalg import _diagonal_last, _operands, matmul, tensordot, vecdot
from flfun.numpy._linalg import outer as _outer
from flfun.numpy._linalg import trace as _trace
from flfun.numpy._manipulation import matrix_transpose
from flfun.numpy._promote import asarray_like, to_float
from flfun.numpy._reductions import _keep
from flfun.primitives import elementwise as lax
from flfun.primitives import reduce as lax_reduce
from flfun.primitives import shape as lax_shape
from flfun.util import canonical_axes, canonical_axis

__all__ = ["cross", "diagonal", "matmul", "matrix_norm", "matrix_power", "matrix_transpose", "norm", "outer",
           "tensordot", "trace", "vecdot", "vector_norm"]

_UNSUPPORTED = ("cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "pinv", "qr", "slogdet",
                "solve", "svd", "svdvals", "matrix_rank", "tensorinv", "tensorsolve", "cond", "multi_dot")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise AttributeError(f"flfun.numpy.linalg.{name} is not implemented: flfun has no matrix-decomposition "
                             f"primitives (see the module docstring for what is supported)")
    raise AttributeError(f"module 'flfun.numpy.linalg' has no attribute {name!r}")


def outer(x1, x2, /) -> Array:
    """Outer product of two vectors (array API: both must be 1-d): ``linalg.outer(a, b).shape == (m, n)``."""
    a, b = asarray_like(x1), asarray_like(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: x1 and x2 must be 1-d, got {short(a)} and {short(b)}")
    return _outer(a, b)


def diagonal(x, /, *, offset: int = 0) -> Array:
    """Diagonals of the last two axes: ``linalg.diagonal(fnp.ones((5, 3, 3))).shape == (5, 3)``."""
    x = asarray_like(x)
    if x.ndim < 2:
        raise ValueError(f"diagonal: x must have at least 2 dimensions, got {short(x)}")
    return _diagonal_last(x, int(offset))


def trace(x, /, *, offset: int = 0, dtype=None) -> Array:
    """Sums of the diagonals of the last two axes: ``linalg.trace(fnp.eye(3)) == 3``."""
    x = asarray_like(x)
    if x.ndim < 2:
        raise ValueError(f"trace: x must have at least 2 dimensions, got {short(x)}")
    return _trace(x, offset, -2, -1, dtype)


def cross(x1, x2, /, *, axis: int = -1) -> Array:
    """Cross product of 3-vectors along ``axis`` (other dims broadcast).

    Example::

        >>> linalg.cross(fnp.asarray([1.0, 0, 0]), fnp.asarray([0.0, 1, 0])).tolist()
        [0.0, 0.0, 1.0]
    """
    a, b = _operands("cross", x1, x2)
    n = max(a.ndim, b.ndim)
    ax = canonical_axis(axis, n, "cross") - n
    if -ax > min(a.ndim, b.ndim) or a.shape[ax] != 3 or b.shape[ax] != 3:
        raise ValueError(f"cross: axis {axis} must have size 3 in both operands, got {short(a)} and {short(b)}")

    def part(x, i):
        d = x.ndim + ax
        return lax_shape.slice(x, tuple(i if k == d else 0 for k in range(x.ndim)),
                               tuple(i + 1 if k == d else s for k, s in enumerate(x.shape)))
    (a0, a1, a2), (b0, b1, b2) = [[part(x, i) for i in range(3)] for x in (a, b)]
    comps = [lax.sub(lax.mul(a1, b2), lax.mul(a2, b1)), lax.sub(lax.mul(a2, b0), lax.mul(a0, b2)),
             lax.sub(lax.mul(a0, b1), lax.mul(a1, b0))]
    return lax_shape.concatenate(comps, n + ax)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Array:
    """Vector p-norm over ``axis`` (all axes by default): ``ord`` is any real p, ``inf``, ``-inf`` or 0 (the count
    of non-zeros). Integer inputs give float32.

    Example::

        >>> float(linalg.vector_norm(fnp.asarray([3.0, 4.0])))
        5.0
    """
    x = to_float(x)
    axes = canonical_axes(axis, x.ndim, "vector_norm")
    if isinstance(ord, str) or ord is None or isinstance(ord, bool):
        raise ValueError(f"vector_norm: ord must be a number, inf or -inf, got {ord!r}")
    if ord == 2:
        out = lax.sqrt(lax_reduce.reduce_sum(lax.mul(x, x), axes))
    elif ord == 1:
        out = lax_reduce.reduce_sum(lax.abs(x), axes)
    elif ord == math.inf:
        out = lax_reduce.reduce_max(lax.abs(x), axes)
    elif ord == -math.inf:
        out = lax_reduce.reduce_min(lax.abs(x), axes)
    elif ord == 0:
        nonzero = lax.convert_element_type(lax.ne(x, lax_shape.full((), 0, x.dtype)), x.dtype)
        out = lax_reduce.reduce_sum(nonzero, axes)
    else:
        p = float(ord)
        powered = lax.pow(lax.abs(x), lax_shape.full((), p, x.dtype))
        out = lax.pow(lax_reduce.reduce_sum(powered, axes), lax_shape.full((), 1.0 / p, x.dtype))
    return _keep(x, out, axes, keepdims)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Array:
    """Norm of the matrices in the last two axes: ``'fro'``, 1 / -1 (max / min column sum), ``inf`` / ``-inf``
    (max / min row sum). Orders 2, -2 and ``'nuc'`` need singular values and raise ``NotImplementedError``.

    Example::

        >>> float(linalg.matrix_norm(fnp.ones((2, 2))))
        2.0
    """
    x = to_float(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_norm: x must have at least 2 dimensions, got {short(x)}")
    r, c = x.ndim - 2, x.ndim - 1
    if ord == "fro":
        out = lax.sqrt(lax_reduce.reduce_sum(lax.mul(x, x), (r, c)))
    elif ord in (1, -1, math.inf, -math.inf) and not isinstance(ord, bool):
        summed = lax_reduce.reduce_sum(lax.abs(x), (r,) if ord in (1, -1) else (c,))
        out = (lax_reduce.reduce_max if ord > 0 else lax_reduce.reduce_min)(summed, (r,))
    elif ord in (2, -2, "nuc"):
        raise NotImplementedError(f"matrix_norm: ord={ord!r} needs singular values (svd), which flfun does not "
                                  f"provide")
    else:
        raise ValueError(f"matrix_norm: ord must be 'fro', 1, -1, inf or -inf, got {ord!r}")
    return _keep(x, out, (r, c), keepdims)


def norm(x, ord=None, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """numpy's ``linalg.norm``: a vector norm over one axis, a matrix norm over two, and with ``axis=None`` the
    2-norm of the flattened array (``ord=None``) or the ``ord`` norm of a 1-d / 2-d array.

    Example::

        >>> float(linalg.norm(fnp.ones((2, 2)), ord=1))
        2.0
    """
    x = to_float(x)
    if axis is None:
        if ord is None:
            return vector_norm(x, keepdims=keepdims)
        if x.ndim not in (1, 2):
            raise ValueError(f"norm: with axis=None, ord={ord!r} needs a 1-d or 2-d array, got {short(x)}")
        axis = tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(axes) == 1:
        if ord == "fro" or ord == "nuc":
            raise ValueError(f"norm: ord={ord!r} is a matrix norm, but one axis was given")
        return vector_norm(x, axis=axes[0], keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2:
        raise ValueError(f"norm: axis must name one or two axes, got {axis!r}")
    a0, a1 = (canonical_axis(a, x.ndim, "norm") for a in axes)
    if a0 == a1:
        raise ValueError(f"norm: axis names the same axis twice: {axis!r}")
    rest = tuple(i for i in range(x.ndim) if i not in (a0, a1))
    out = matrix_norm(lax_shape.transpose(x, rest + (a0, a1)), ord="fro" if ord is None else ord)
    return _keep(x, out, (a0, a1), keepdims)


def matrix_power(x, n: int, /) -> Array:
    """``x`` multiplied by itself ``n >= 0`` times (identity for 0), by repeated squaring.

    Example::

        >>> linalg.matrix_power(fnp.asarray([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    x = asarray_like(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power: x must be a (stack of) square matrices, got {short(x)}")
    if not isinstance(n, int) or isinstance(n, bool):
        raise ValueError(f"matrix_power: n must be an int, got {n!r}")
    if n < 0:
        raise NotImplementedError("matrix_power: negative powers need a matrix inverse, which flfun does not provide")
    if n == 0:
        k = x.shape[-1]
        eye = lax.eq(lax_shape.iota("int32", (k, k), 0), lax_shape.iota("int32", (k, k), 1))
        return lax_shape.broadcast_in_dim(lax.convert_element_type(eye, x.dtype), x.shape, (x.ndim - 2, x.ndim - 1))
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result
