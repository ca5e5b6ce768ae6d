"""``flfun.scipy.linalg``: scipy's dense linear algebra as in ``jax.scipy.linalg``, built on ``flfun.numpy.linalg``
(so every function is batched over leading axes and differentiable). Triangular solves use the general
``solve`` primitive on the masked triangle; ``lu`` is partial-pivoting Gaussian elimination written with array
ops (one step per column), and ``expm`` Pade-13 scaling and squaring with a fixed number of masked squarings."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from flfun import numpy as fnp
from flfun.array import Array
from flfun.numpy.promotion import to_float

_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def _square(fn: str, a) -> Array:
    a = to_float(fnp.asarray(a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fn}: a must be a (..., M, M) stack of square matrices, got shape {tuple(a.shape)}")
    return a


def _rhs(fn: str, a, b):
    """``b`` as (..., M, K) matching ``a`` (..., M, M), and whether it was a vector (..., M)."""
    b = to_float(fnp.asarray(b))
    vector = b.ndim == a.ndim - 1 or b.ndim == 1
    b = b[..., None] if vector else b
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"{fn}: b of shape {tuple(b.shape)[:-1] if vector else tuple(b.shape)} does not match "
                         f"a of shape {tuple(a.shape)}")
    return b, vector


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False, overwrite_b=False,
                     debug=None, check_finite=True) -> Array:
    """``x`` with ``op(T) x = b`` for the lower (``lower=True``) or upper triangle ``T`` of ``a`` (the other
    triangle is ignored); ``trans`` 0/'N', 1/'T' or 2/'C' picks ``op``; ``unit_diagonal`` takes ones on the
    diagonal.

    Example::

        >>> solve_triangular(fnp.asarray([[2.0, 0.0], [1.0, 1.0]]), fnp.asarray([2.0, 3.0]), lower=True).tolist()
        [1.0, 2.0]
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a = _square("solve_triangular", a)
    b, vector = _rhs("solve_triangular", a, b)
    t = fnp.tril(a) if lower else fnp.triu(a)
    if unit_diagonal:
        eye = fnp.eye(a.shape[-1], dtype=a.dtype)
        t = t * (1.0 - eye) + eye
    if _TRANS[trans]:
        t = fnp.swapaxes(t, -1, -2)
    x = fnp.linalg.solve(fnp.conj(t) if _TRANS[trans] == 2 else t, b)
    return x[..., 0] if vector else x


def cho_factor(a, lower: bool = False, overwrite_a=False, check_finite=True):
    """``(c, lower)``: the Cholesky factor of ``a`` (upper ``U`` with ``a = U^T U`` unless ``lower``; the other
    triangle is zero), for ``cho_solve``.

    Example::

        >>> c = cho_factor(fnp.asarray([[4.0, 2.0], [2.0, 5.0]]))
    """
    return fnp.linalg.cholesky(_square("cho_factor", a), upper=not lower), lower


def cholesky(a, lower: bool = False, overwrite_a=False, check_finite=True) -> Array:
    """The Cholesky factor (upper by default, as scipy): ``cholesky(eye(2) * 4.0) == eye(2) * 2.0``."""
    return cho_factor(a, lower)[0]


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True) -> Array:
    """``x`` with ``a x = b`` from ``cho_factor(a)``.

    Example::

        >>> x = cho_solve(cho_factor(fnp.asarray([[4.0, 2.0], [2.0, 5.0]])), fnp.asarray([1.0, 2.0]))
    """
    c, lower = c_and_lower
    y = solve_triangular(c, b, trans=0 if lower else 2, lower=lower)
    return solve_triangular(c, y, trans=2 if lower else 0, lower=lower)


class LUFactor(NamedTuple):
    lu: Array
    piv: Array


def _lu(a):
    """Packed LU of ``a`` (..., M, M) with partial pivoting: ``(lu, piv, perm)`` with ``a[perm] = L U``."""
    n = a.shape[-1]
    rows = fnp.arange(n)
    perm = fnp.broadcast_to(rows, a.shape[:-1])
    pivots = []
    for k in range(n):
        cand = fnp.where(rows >= k, fnp.abs(a[..., :, k]), -1.0)
        p = fnp.argmax(cand, axis=-1)
        pivots.append(p)
        idx = fnp.where(rows == k, p[..., None], fnp.where(rows == p[..., None], k, rows))
        a = fnp.take_along_axis(a, idx[..., None], axis=-2)
        perm = fnp.take_along_axis(perm, idx, axis=-1)
        pivot = a[..., k, k]
        safe = fnp.where(pivot == 0, 1.0, pivot)
        col = fnp.where(rows > k, a[..., :, k] / safe[..., None], 0.0)
        a = a - col[..., :, None] * fnp.where(rows > k, a[..., k, :], 0.0)[..., None, :]
        a = fnp.where((rows > k)[:, None] & (rows == k)[None, :], col[..., :, None], a)
    return a, fnp.stack(pivots, axis=-1).astype(np.int32), perm


def lu_factor(a, overwrite_a=False, check_finite=True) -> LUFactor:
    """``(lu, piv)``: ``L`` (unit diagonal, strictly below) and ``U`` packed in ``lu``, and LAPACK-style
    ``piv`` (row ``i`` was swapped with row ``piv[i]``).

    Example::

        >>> lu, piv = lu_factor(fnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    """
    lu, piv, _ = _lu(_square("lu_factor", a))
    return LUFactor(lu, piv)


def lu(a, permute_l: bool = False, overwrite_a=False, check_finite=True):
    """``(P, L, U)`` with ``a = P L U`` (or ``(P L, U)`` with ``permute_l``).

    Example::

        >>> p, l, u = lu(fnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    """
    a = _square("lu", a)
    packed, _, perm = _lu(a)
    eye = fnp.eye(a.shape[-1], dtype=np.finfo(a.dtype).dtype)     # P is real, as scipy's
    low = fnp.tril(packed, -1) + eye
    up = fnp.triu(packed)
    p = fnp.swapaxes(fnp.take(eye, perm, axis=0), -1, -2) if a.ndim == 2 else \
        fnp.swapaxes(fnp.take_along_axis(fnp.broadcast_to(eye, a.shape), perm[..., None], axis=-2), -1, -2)
    return (p @ low, up) if permute_l else (p, low, up)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True) -> Array:
    """``x`` with ``op(a) x = b`` from ``lu_factor(a)``.

    Example::

        >>> x = lu_solve(lu_factor(fnp.asarray([[1.0, 2.0], [3.0, 4.0]])), fnp.asarray([1.0, 1.0]))
    """
    if trans not in _TRANS:
        raise ValueError(f"lu_solve: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    lu_, piv = lu_and_piv
    b, vector = _rhs("lu_solve", lu_, b)
    n, rows = lu_.shape[-1], fnp.arange(lu_.shape[-1])
    perm = fnp.broadcast_to(rows, lu_.shape[:-1])
    for k in range(n):
        p = piv[..., k:k + 1]
        idx = fnp.where(rows == k, p, fnp.where(rows == p, k, rows))
        perm = fnp.take_along_axis(perm, idx, axis=-1)
    if _TRANS[trans] == 0:
        y = solve_triangular(lu_, fnp.take_along_axis(b, perm[..., None], axis=-2), lower=True, unit_diagonal=True)
        x = solve_triangular(lu_, y)
    else:
        y = solve_triangular(lu_, b, trans=trans)
        z = solve_triangular(lu_, y, trans=trans, lower=True, unit_diagonal=True)
        inverse = fnp.argsort(perm, axis=-1)
        x = fnp.take_along_axis(z, inverse[..., None], axis=-2)
    return x[..., 0] if vector else x


_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13, _MAX_SQUARINGS = 5.371920351148152, 48


def expm(A, *, upper_triangular: bool = False, max_squarings: int = _MAX_SQUARINGS) -> Array:
    """The matrix exponential (Pade-13 with scaling and squaring; up to ``max_squarings`` masked squarings, so it
    jits and vmaps with a data-dependent scaling).

    Example::

        >>> expm(fnp.zeros((2, 2))).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    a = _square("expm", A)
    norm = fnp.max(fnp.sum(fnp.abs(a), axis=-2), axis=-1)
    s = fnp.clip(fnp.ceil(fnp.log2(fnp.maximum(norm, 1e-300 if a.dtype == np.float64 else 1e-30) / _THETA13)),
                 0, max_squarings)
    a = a / (2.0 ** s)[..., None, None]
    b, eye = _PADE13, fnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = fnp.linalg.solve(v - u, v + u)
    for i in range(max_squarings):
        r = fnp.where((i < s)[..., None, None], r @ r, r)
    return r


def det(a, overwrite_a=False, check_finite=True) -> Array:
    """Determinants: ``det(eye(2) * 2.0) == 4.0``."""
    return fnp.linalg.det(_square("det", a))


def inv(a, overwrite_a=False, check_finite=True) -> Array:
    """Matrix inverses: ``inv(eye(2) * 2.0) == eye(2) * 0.5``."""
    return fnp.linalg.inv(_square("inv", a))


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """Eigenvalues (ascending) and eigenvectors of symmetric ``a`` read from its ``lower`` (or upper) triangle;
    the generalized problem (``b``) and subsets are not supported.

    Example::

        >>> w, v = eigh(fnp.asarray([[2.0, 1.0], [1.0, 2.0]]))
    """
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise NotImplementedError("eigh: the generalized problem (b) and eigenvalue subsets are not supported")
    a = _square("eigh", a)
    if not lower:
        a = fnp.conj(fnp.swapaxes(a, -1, -2))
    w, v = fnp.linalg.eigh(a)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``(U, s, Vh)`` with ``a = U diag(s) Vh`` (``s`` descending), or ``s`` alone with ``compute_uv=False``.

    Example::

        >>> u, s, vh = svd(fnp.eye(2) * 3.0)
    """
    a = to_float(fnp.asarray(a))
    if a.ndim < 2:
        raise ValueError(f"svd: a must be a (..., M, N) stack of matrices, got shape {tuple(a.shape)}")
    if not compute_uv:
        return fnp.linalg.svdvals(a)
    return tuple(fnp.linalg.svd(a, full_matrices=full_matrices))


def qr(a, overwrite_a=False, lwork=None, mode: str = "full", pivoting: bool = False, check_finite=True):
    """``(Q, R)`` with ``a = Q R``; ``mode`` 'full' (Q square), 'economic' (Q with orthonormal columns) or 'r'
    (``(R,)`` alone, as scipy).

    Example::

        >>> q, r = qr(fnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    """
    if mode not in ("full", "economic", "r") or pivoting:
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r' (no pivoting), got mode={mode!r}, "
                         f"pivoting={pivoting!r}")
    a = to_float(fnp.asarray(a))
    if a.ndim < 2:
        raise ValueError(f"qr: a must be a (..., M, N) stack of matrices, got shape {tuple(a.shape)}")
    q, r = fnp.linalg.qr(a, mode="reduced" if mode == "economic" else "complete")
    return (r,) if mode == "r" else (q, r)


def block_diag(*arrs) -> Array:
    """A block-diagonal matrix of the given 2-d (or lower, taken as ``(1, n)`` / ``(1, 1)``) blocks.

    Example::

        >>> block_diag(fnp.ones((1, 1)), fnp.ones((2, 2))).shape
        (3, 3)
    """
    if not arrs:
        return fnp.zeros((1, 0))
    blocks = [fnp.atleast_2d(fnp.asarray(x)) for x in arrs]
    if any(x.ndim != 2 for x in blocks):
        raise ValueError(f"block_diag: blocks must have at most 2 dimensions, got shapes {[x.shape for x in blocks]}")
    dt = np.result_type(*[x.dtype for x in blocks])
    cols = sum(x.shape[1] for x in blocks)
    rows, start = [], 0
    for x in blocks:
        parts = [fnp.zeros((x.shape[0], start), dt), x.astype(dt), fnp.zeros((x.shape[0], cols - start - x.shape[1]), dt)]
        rows.append(fnp.concatenate(parts, axis=1))
        start += x.shape[1]
    return fnp.concatenate(rows, axis=0)


__all__ = ["LUFactor", "block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv", "lu",
           "lu_factor", "lu_solve", "qr", "solve_triangular", "svd"]
