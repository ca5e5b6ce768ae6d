"""``flfun.numpy.linalg``: the array-API linear-algebra extension, as far as flfun's primitives reach.

Provided: the whole 2024.12 extension for real and complex floats, differentiable with JAX's conventions
(decompositions through ``flfun/primitives/decomp.py``; derivatives of ``svd(full_matrices=True)`` /
``qr(mode='complete')`` only where that is the reduced form), plus numpy's norm and matrix_power. Not provided: eig, eigvals, lstsq, tensorinv, tensorsolve, cond,
multi_dot.
"""
import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import short
from flfun.numpy._asarray import matrix_stack as _matrix_stack
from flfun.numpy._creation import eye
from flfun.numpy._elementwise import where
from flfun.numpy._joining import split_at as _split_at
from flfun.numpy._linalg import (diagonal_last as _diagonal_last, matmul, outer as _outer, tensordot, trace as _trace,
                                 vecdot)
from flfun.numpy.promotion import asarray_like, promote, to_float
from flfun.numpy._reductions import keep_reduced_dims as _keep
from flfun.numpy._shaping import matrix_transpose, moveaxis
from flfun.primitives import decomp as lax_decomp, elementwise as lax, reduce as lax_reduce, shape as lax_shape
from flfun.primitives.rules import broadcast_to_shape
from flfun.transforms.custom import custom_jvp
from flfun.util import canonical_axes, canonical_axis

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "norm",
           "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]

_UNSUPPORTED = ("eig", "eigvals", "lstsq", "tensorinv", "tensorsolve", "cond", "multi_dot")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise AttributeError(f"flfun.numpy.linalg.{name} is not implemented (see the module docstring for what is "
                             f"supported)")
    raise AttributeError(f"module 'flfun.numpy.linalg' has no attribute {name!r}")


def outer(x1, x2, /) -> Array:
    """Outer product of two vectors (array API: both must be 1-d): ``linalg.outer(a, b).shape == (m, n)``."""
    a, b = asarray_like(x1), asarray_like(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: x1 and x2 must be 1-d, got {short(a)} and {short(b)}")
    return _outer(a, b)


def diagonal(x, /, *, offset: int = 0) -> Array:
    """Diagonals of the last two axes: ``linalg.diagonal(fnp.ones((5, 3, 3))).shape == (5, 3)``."""
    return _diagonal_last(_matrix_stack(asarray_like(x), "diagonal"), int(offset))


def trace(x, /, *, offset: int = 0, dtype=None) -> Array:
    """Sums of the diagonals of the last two axes: ``linalg.trace(fnp.eye(3)) == 3``."""
    return _trace(_matrix_stack(asarray_like(x), "trace"), offset, -2, -1, dtype)


def cross(x1, x2, /, *, axis: int = -1) -> Array:
    """Cross product of 3-vectors along ``axis`` (other dims broadcast).

    Example::

        >>> linalg.cross(fnp.asarray([1.0, 0, 0]), fnp.asarray([0.0, 1, 0])).tolist()
        [0.0, 0.0, 1.0]
    """
    a, b = promote("cross", x1, x2)
    n = max(a.ndim, b.ndim)
    ax = canonical_axis(axis, n, "cross") - n
    if -ax > min(a.ndim, b.ndim) or a.shape[ax] != 3 or b.shape[ax] != 3:
        raise ValueError(f"cross: axis {axis} must have size 3 in both operands, got {short(a)} and {short(b)}")
    (a0, a1, a2), (b0, b1, b2) = [_split_at(x, [0, 1, 2, 3], x.ndim + ax) for x in (a, b)]
    comps = [lax.sub(lax.mul(a1, b2), lax.mul(a2, b1)), lax.sub(lax.mul(a2, b0), lax.mul(a0, b2)),
             lax.sub(lax.mul(a0, b1), lax.mul(a1, b0))]
    return lax_shape.concatenate(comps, n + ax)


def _magnitude(x):
    """``|x|`` for complex ``x`` (the norms of the standard are those of the magnitudes); real ``x`` itself."""
    return lax.abs(x) if dtypes.is_complex(x.dtype) else x


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Array:
    """Vector p-norm over ``axis`` (all axes by default): ``ord`` is any real p, ``inf``, ``-inf`` or 0 (the count
    of non-zeros). Integer inputs give float32.

    Example::

        >>> float(linalg.vector_norm(fnp.asarray([3.0, 4.0])))
        5.0
    """
    x = _magnitude(to_float(x))
    axes = canonical_axes(axis, x.ndim, "vector_norm")
    if isinstance(ord, str) or ord is None or isinstance(ord, bool):
        raise ValueError(f"vector_norm: ord must be a number, inf or -inf, got {ord!r}")
    if ord == 2:
        out = _two_norm(x, axes)
    elif ord in (1, math.inf, -math.inf):
        out = {1: lax_reduce.reduce_sum, math.inf: lax_reduce.reduce_max, -math.inf: lax_reduce.reduce_min}[ord](
            lax.abs(x), axes)
    elif ord == 0:
        out = lax_reduce.reduce_sum(lax.convert_element_type(lax.ne(x, lax_shape.full((), 0, x.dtype)), x.dtype), axes)
    else:
        p = float(ord)
        powered = lax.pow(lax.abs(x), lax_shape.full((), p, x.dtype))
        out = lax.pow(lax_reduce.reduce_sum(powered, axes), lax_shape.full((), 1.0 / p, x.dtype))
    return _keep(x, out, axes, keepdims)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Array:
    """Norm of the matrices in the last two axes: ``'fro'``, 1 / -1 (max / min column sum), ``inf`` / ``-inf``
    (max / min row sum), 2 / -2 (largest / smallest singular value), ``'nuc'`` (sum of singular values).

    Example::

        >>> float(linalg.matrix_norm(fnp.ones((2, 2))))
        2.0
    """
    x = _matrix_stack(to_float(x), "matrix_norm")
    r, c = x.ndim - 2, x.ndim - 1
    spectral = ord in (2, -2, "nuc") and not isinstance(ord, bool)
    x = x if spectral else _magnitude(x)      # spectral norms: of x's singular values, not of |x|'s
    if ord == "fro":
        out = _two_norm(x, (r, c))
    elif ord in (1, -1, math.inf, -math.inf) and not isinstance(ord, bool):
        summed = lax_reduce.reduce_sum(lax.abs(x), (r,) if ord in (1, -1) else (c,))
        out = (lax_reduce.reduce_max if ord > 0 else lax_reduce.reduce_min)(summed, (r,))
    elif spectral:
        s = svdvals(x)
        out = {2: lax_reduce.reduce_max, -2: lax_reduce.reduce_min, "nuc": lax_reduce.reduce_sum}[ord](s, (r,))
    else:
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    return _keep(x, out, (r, c), keepdims)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _two_norm(x, axes):
    return lax.sqrt(lax_reduce.reduce_sum(lax.mul(x, x), axes))


@_two_norm.defjvp
def _two_norm_jvp(axes, primals, tangents):
    """``sum(x t) / |x|``, and 0 at ``x = 0`` (a subgradient, where the formula gives NaN)."""
    (x,), (t,) = primals, tangents
    out = _two_norm.fun(x, axes)
    zero, one = (lax_shape.full((), k, out.dtype) for k in (0, 1))
    at_zero = lax.eq(out, zero)
    dot = lax_reduce.reduce_sum(lax.mul(x, t), axes)
    return out, where(at_zero, zero, lax.div(dot, where(at_zero, one, out)))


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
    out = matrix_norm(moveaxis(x, (a0, a1), (-2, -1)), ord="fro" if ord is None else ord)
    return _keep(x, out, (a0, a1), keepdims)


def matrix_power(x, n: int, /) -> Array:
    """``x`` multiplied by itself ``n`` times (identity for 0; ``inv(x)`` to the ``-n`` for negative ``n``), by
    repeated squaring.

    Example::

        >>> linalg.matrix_power(fnp.asarray([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    x = asarray_like(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power: x must be a (stack of) square matrices, got {short(x)}")
    if not isinstance(n, int) or isinstance(n, bool):
        raise ValueError(f"matrix_power: n must be an int, got {n!r}")
    if n == 0:
        return _eye_like(x)
    result, base = None, x if n > 0 else inv(x)
    n = abs(n)
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


# ------------------------------------------------------------------------------------------------ decompositions
EighResult = NamedTuple("EighResult", [("eigenvalues", Array), ("eigenvectors", Array)])
QRResult = NamedTuple("QRResult", [("Q", Array), ("R", Array)])
SlogdetResult = NamedTuple("SlogdetResult", [("sign", Array), ("logabsdet", Array)])
SVDResult = NamedTuple("SVDResult", [("U", Array), ("S", Array), ("Vh", Array)])


def _matrices(op: str, x, square: bool = True) -> Array:
    """``x`` as float (integers become the default float) (stacks of) matrices, else ValueError."""
    x = to_float(x)
    if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
        raise ValueError(f"{op}: x must be a (stack of) {'square ' if square else ''}matrices, got {short(x)}")
    return x


def _eye_like(x) -> Array:
    return broadcast_to_shape(eye(x.shape[-1], dtype=x.dtype), x.shape)


def cholesky(x, /, *, upper: bool = False) -> Array:
    """Cholesky factor of Hermitian positive definite matrices: lower ``L`` with ``x = L L^H`` (only the lower
    triangle of ``x`` is read), or upper ``U = L^H`` with ``upper=True``.

    Example::

        >>> linalg.cholesky(fnp.asarray([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    lower = lax_decomp.cholesky(_matrices("cholesky", x))
    return _conj_t(lower) if upper else lower


def eigh(x, /) -> EighResult:
    """Eigenvalues (ascending, real) and eigenvectors (columns) of Hermitian matrices; only the lower triangle is
    read. Derivatives assume distinct eigenvalues.

    Example::

        >>> linalg.eigh(fnp.asarray([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
        [1.0, 2.0]
    """
    return EighResult(*lax_decomp.eigh(_matrices("eigh", x)))


def eigvalsh(x, /) -> Array:
    """Eigenvalues (ascending) of Hermitian matrices: ``linalg.eigvalsh(2.0 * fnp.eye(2)).tolist() == [2.0, 2.0]``."""
    return eigh(x).eigenvalues


def svd(x, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U[..., :K] diag(S) Vh[..., :K, :]`` (``S`` descending, ``K = min(M, N)``):
    ``U`` is (..., M, M) and ``Vh`` (..., N, N) with ``full_matrices=True`` (the standard's default), else (..., M, K)
    and (..., K, N). Derivatives assume distinct, nonzero singular values; for non-square matrices they need
    ``full_matrices=False`` (the extra columns are not unique).

    Example::

        >>> linalg.svd(fnp.ones((3, 2)), full_matrices=False).S.shape
        (2,)
    """
    x = _matrices("svd", x, square=False)
    return SVDResult(*lax_decomp.svd(x, full_matrices and x.shape[-1] != x.shape[-2]))


def svdvals(x, /) -> Array:
    """Singular values, descending: ``linalg.svdvals(fnp.eye(2) * 3.0).tolist() == [3.0, 3.0]``."""
    return lax_decomp.svd(_matrices("svdvals", x, square=False))[1]


def qr(x, /, *, mode: str = "reduced") -> QRResult:
    """QR decomposition ``x = Q R`` (``Q`` with orthonormal columns, ``R`` upper triangular): ``Q`` (..., M, K) and
    ``R`` (..., K, N) with ``K = min(M, N)``, or with ``mode='complete'`` ``Q`` (..., M, M) and ``R`` (..., M, N).
    Derivatives need at least as many rows as columns, and ``mode='reduced'`` for tall matrices.

    Example::

        >>> q, r = linalg.qr(fnp.ones((3, 2)))
        >>> (q.shape, r.shape)
        ((3, 2), (2, 2))
    """
    x = _matrices("qr", x, square=False)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*lax_decomp.qr(x, mode == "complete" and x.shape[-2] > x.shape[-1]))


def slogdet(x, /) -> SlogdetResult:
    """Sign and natural log of the absolute value of determinants (-inf for singular matrices).

    Example::

        >>> linalg.slogdet(fnp.asarray([[0.0, 2.0], [1.0, 0.0]])).sign.tolist()
        -1.0
    """
    return SlogdetResult(*lax_decomp.slogdet(_matrices("slogdet", x)))


def det(x, /) -> Array:
    """Determinants, as ``sign * exp(logabsdet)``: ``float(linalg.det(fnp.eye(2) * 2.0)) == 4.0``."""
    sign, logabsdet = slogdet(x)
    return lax.mul(sign, lax.convert_element_type(lax.exp(logabsdet), sign.dtype))


def solve(x1, x2, /) -> Array:
    """``x`` with ``x1 @ x = x2`` for square ``x1``; ``x2`` of shape (M,) is one vector for every matrix, otherwise
    ``x2`` is (..., M, K) with its batch dims broadcast against ``x1``'s.

    Example::

        >>> linalg.solve(fnp.eye(2) * 2.0, fnp.asarray([1.0, 2.0])).tolist()
        [0.5, 1.0]
    """
    a, b = promote("solve", x1, x2, to_float=True)
    a = _matrices("solve", a)
    vector = b.ndim == 1
    b = lax_shape.reshape(b, (b.shape[0], 1)) if vector else b
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: x2 must be (M,) or (..., M, K) with M = {a.shape[-1]}, got {short(x2)}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    x = lax_decomp.solve(broadcast_to_shape(a, batch + a.shape[-2:]), broadcast_to_shape(b, batch + b.shape[-2:]))
    return lax_shape.squeeze(x, (x.ndim - 1,)) if vector else x


def inv(x, /) -> Array:
    """Inverses of square matrices: ``linalg.inv(fnp.eye(2) * 2.0).tolist() == [[0.5, 0.0], [0.0, 0.5]]``."""
    x = _matrices("inv", x)
    try:
        return lax_decomp.solve(x, _eye_like(x))
    except np.linalg.LinAlgError:     # (raised eagerly; under jit the executable's error names solve)
        raise np.linalg.LinAlgError(f"inv: singular matrix, it has no inverse (input {short(x)})") from None


def _cutoff(s, rtol, shape):
    """``rtol * max(s)`` per matrix (the standard's default ``rtol = max(M, N) * eps``), broadcasting against ``s``."""
    rtol = max(shape[-2:]) * float(dtypes.finfo(s.dtype).eps) if rtol is None else rtol
    return lax_reduce.reduce_max(s, (s.ndim - 1,))[..., None] * asarray_like(rtol)[..., None]


def matrix_rank(x, /, *, rtol=None) -> Array:
    """Number of singular values above ``rtol * largest`` (default ``rtol = max(M, N) * eps``), per matrix.

    Example::

        >>> int(linalg.matrix_rank(fnp.ones((3, 3))))
        1
    """
    x = _matrices("matrix_rank", x, square=False)
    s = svdvals(x)
    above = lax.convert_element_type(s > _cutoff(s, rtol, x.shape), dtypes.int64)
    return lax_reduce.reduce_sum(above, (s.ndim - 1,))


def pinv(x, /, *, rtol=None) -> Array:
    """Moore-Penrose pseudo-inverses from the SVD, singular values at most ``rtol * largest`` treated as zero
    (default ``rtol = max(M, N) * eps``).

    Example::

        >>> linalg.pinv(fnp.asarray([[2.0, 0.0]])).tolist()
        [[0.5], [0.0]]
    """
    x = _matrices("pinv", x, square=False)
    u, s, vh = lax_decomp.svd(x)
    large = s > _cutoff(s, rtol, x.shape)
    s_inv = where(large, 1.0 / where(large, s, 1.0), 0.0)
    return matmul(_conj_t(vh) * s_inv[..., None, :], _conj_t(u))


def _conj_t(x):
    """The conjugate transpose of a stack of matrices (the transpose for real ones)."""
    x = matrix_transpose(x)
    return lax.conj(x) if dtypes.is_complex(x.dtype) else x
