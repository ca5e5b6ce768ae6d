"""Matrix decompositions: ``cholesky``, ``eigh``, ``svd`` and ``qr`` (reduced, or full with ``full_matrices``),
``solve`` and ``slogdet``, on stacks of float32 / float64 / complex64 / complex128 matrices in the last two axes
(leading axes are batch axes, so batching moves the mapped axis to the front). The jvps are the standard formulas
with conjugate transposes, one rule for real and complex, and the gauge choices of ``jax.lax.linalg`` (eigh's
eigenvector tangents orthogonal to their vectors; svd's phase part in ``u``). eigh and svd assume distinct
eigen / singular values, qr's needs at least as many rows as columns, and full forms have none where they add
columns (those are not unique). ``solve`` is linear in its right-hand side (it transposes there). Impls are in
``flfun/backends/xp/decomp.py``.
"""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, short
from flfun.primitives.rules import Zero, front_batch, is_undefined, is_zero, jvp_rule, tangent_aval
from flfun.primitives.elementwise import add, conj, convert_element_type, div, eq, gt, mul, neg, real, sub
from flfun.primitives.linalg import dot_general
from flfun.primitives.reduce import reduce_sum
from flfun.primitives.shape import expand_dims, full, iota, transpose


def _check(op: str, x, square: bool = True) -> None:
    if x.dtype.name not in _DTYPES or len(x.shape) < 2 or (square and x.shape[-1] != x.shape[-2]):
        raise TypeError(f"{op}: expected a stack of {'square ' if square else ''}float32, float64, complex64 or "
                        f"complex128 matrices, got {short(x)}")


_DTYPES = ("float32", "float64", "complex64", "complex128")


def _mm(a, b):
    nb = len(a.shape) - 2
    return dot_general(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)),) * 2))


def _T(x):
    n = len(x.shape)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _H(x):
    """The conjugate transpose (the transpose of real matrices)."""
    x = _T(x)
    return conj(x) if x.dtype.kind == "c" else x


def _herm(t):
    """The Hermitian part ``(t + t^H) / 2``: the tangent of a decomposition that reads one triangle."""
    return mul(add(t, _H(t)), full((), 0.5, t.dtype))


def _as(x, dtype):
    return x if x.dtype == dtype else convert_element_type(x, dtype)


def _re(x):
    return real(x) if x.dtype.kind == "c" else x


def _i_imag(x):
    """``i Im(x)`` in x's complex dtype."""
    return sub(x, _as(real(x), x.dtype))


def _mask(n: int, dtype, lower: float = 0.0, diag: float = 1.0):
    """The n x n constant with ``lower`` below the diagonal and ``diag`` on it."""
    i, j = iota("int32", (n, n), 0), iota("int32", (n, n), 1)
    part = lambda m, v: mul(convert_element_type(m, dtype), full((), v, dtype))
    return add(part(gt(i, j), lower), part(eq(i, j), diag))


def _diag(x):
    return reduce_sum(mul(x, _mask(x.shape[-1], x.dtype)), (len(x.shape) - 1,))


def _gaps_inv(eye, d):
    """``1 / d`` off the diagonal, 0 on it."""
    return sub(div(full((), 1, d.dtype), add(d, eye)), eye)


def _unary(name: str, multiple_results: bool = False, out_shapes=None, real_out: tuple = ()) -> Primitive:
    """A decomposition of one operand; ``out_shapes(batch, m, n, **params)`` gives its results' shapes, and the
    results ``real_out`` are real for complex input (eigenvalues, singular values, log|det|)."""
    p = Primitive(name, multiple_results=multiple_results)

    def abstract_eval(x, **params):
        _check(name, x, square=name != "svd" and name != "qr")
        shapes = out_shapes(tuple(x.shape[:-2]), *x.shape[-2:], **params)
        outs = [ShapedArray(s, dtypes.real_dtype(x.dtype) if i in real_out else x.dtype) for i, s in enumerate(shapes)]
        return outs if multiple_results else outs[0]
    p.def_abstract_eval(abstract_eval)
    p.def_batch(front_batch(lambda size, x, **params: p.bind(x, **params)))
    return p


# ---------------------------------------------------------------------------------------------------- cholesky
cholesky_p = _unary("cholesky", out_shapes=lambda b, m, n: [b + (m, n)])


@jvp_rule(cholesky_p)
def _cholesky_jvp(l, primals, tangents):
    # L' = L Phi(L^-1 A' L^-H), Phi: the lower triangle with the diagonal halved
    return _mm(l, mul(solve(l, _H(solve(l, _herm(tangents[0])))), _mask(l.shape[-1], l.dtype, 1.0, 0.5)))


def cholesky(x):
    """Lower Cholesky factor ``L`` (``x = L L^H``) of Hermitian positive definite matrices (the lower triangle of
    ``x`` is read). Example: ``lax.cholesky(fnp.eye(3) * 4.0)`` is ``2 * eye(3)``."""
    return bind(cholesky_p, x)


# -------------------------------------------------------------------------------------------------------- eigh
eigh_p = _unary("eigh", True, lambda b, m, n: [b + (n,), b + (n, n)], real_out=(0,))


@jvp_rule(eigh_p, float_only=False)
def _eigh_jvp(out, primals, tangents):
    (w, v), (t,) = out, tangents
    vtv = _mm(_H(v), _mm(_herm(t), v))
    f = _gaps_inv(_mask(w.shape[-1], w.dtype), sub(expand_dims(w, (-2,)), expand_dims(w, (-1,))))     # 1 / (w_j - w_i)
    return [_re(_diag(vtv)), _mm(v, mul(_as(f, v.dtype), vtv))]


def eigh(x):
    """Eigenvalues (ascending, real) and eigenvectors (columns) of Hermitian matrices: ``w, v = lax.eigh(x)`` with
    ``x = v diag(w) v^H`` (the lower triangle of ``x`` is read)."""
    return bind(eigh_p, x)


# --------------------------------------------------------------------------------------------------------- svd
def _full_jvp_error(op: str, x, extra: str, fix: str = "full_matrices=False"):
    return NotImplementedError(f"{op}: derivatives of full_matrices=True are not implemented for {short(x)} ({extra} "
                               f"are not unique); use {fix}")


def _svd_shapes(b, m, n, full_matrices):
    k = min(m, n)
    return [b + (m, m if full_matrices else k), b + (k,), b + (n if full_matrices else k, n)]


svd_p = _unary("svd", True, _svd_shapes, real_out=(1,))


@jvp_rule(svd_p, float_only=False)
def _svd_jvp(out, primals, tangents, *, full_matrices):
    (u, s, vh), (x,), (t,) = out, primals, tangents
    v, (m, n), dt = _H(vh), x.shape[-2:], x.dtype
    if full_matrices and m != n:
        raise _full_jvp_error("svd", x, "the extra columns of u / rows of vh")
    ds = _mm(_H(u), _mm(t, v))
    sr, sc = expand_dims(s, (-2,)), expand_dims(s, (-1,))   # a row, a column
    f = _as(_gaps_inv(_mask(s.shape[-1], s.dtype), mul(add(sr, sc), sub(sr, sc))), dt)     # 1 / (s_j^2 - s_i^2)
    sr, sc = _as(sr, dt), _as(sc, dt)
    dss, sds = mul(ds, sr), mul(sc, ds)
    du, dv = _mm(u, mul(f, add(dss, _H(dss)))), _mm(v, mul(f, add(sds, _H(sds))))
    if dt.kind == "c":   # the phase of each pair of singular vectors, put into u as JAX does
        du = add(du, mul(u, div(_i_imag(expand_dims(_diag(ds), (-2,))), sr)))
    if m > n:   # the parts of the tangent outside the span of u (of v, below)
        du = add(du, div(sub(_mm(t, v), _mm(u, ds)), sr))
    if n > m:
        dv = add(dv, div(sub(_mm(_H(t), u), _mm(v, _H(ds))), sr))
    return [du, _re(_diag(ds)), _H(dv)]


def svd(x, full_matrices: bool = False):
    """Singular value decomposition: ``u, s, vh = lax.svd(x)`` with ``x = u[..., :k] diag(s) vh[..., :k, :]``,
    ``s`` descending, ``k = min(m, n)``; ``u`` is (..., m, k) and ``vh`` (..., k, n), or with ``full_matrices``
    square unitary (..., m, m) and (..., n, n)."""
    return bind(svd_p, x, full_matrices=bool(full_matrices))


# ---------------------------------------------------------------------------------------------------------- qr
def _qr_shapes(b, m, n, full_matrices):
    k = m if full_matrices else min(m, n)
    return [b + (m, k), b + (k, n)]


qr_p = _unary("qr", True, _qr_shapes)


@jvp_rule(qr_p, float_only=False)
def _qr_jvp(out, primals, tangents, *, full_matrices):
    (q, r), (x,), (t,) = out, primals, tangents
    if full_matrices and x.shape[-2] > x.shape[-1]:
        raise _full_jvp_error("qr", x, "the extra columns of q",
                              "full_matrices=False (mode='reduced' in fnp.linalg.qr)")
    if x.shape[-2] < x.shape[-1]:
        raise NotImplementedError(f"qr: derivatives need at least as many rows as columns, got {short(x)}")
    t_rinv = _T(solve(_T(r), _T(t)))     # t r^-1
    qt = _mm(_H(q), t_rinv)
    low = mul(qt, _mask(r.shape[-1], r.dtype, 1.0, 0.0))
    do = sub(low, _H(low))      # skew-Hermitian, with the imaginary diagonal of qt for complex input
    if qt.dtype.kind == "c":
        do = add(do, mul(_i_imag(qt), _mask(r.shape[-1], r.dtype)))
    return [add(_mm(q, sub(do, qt)), t_rinv), _mm(sub(qt, do), r)]


def qr(x, full_matrices: bool = False):
    """QR decomposition: ``q, r = lax.qr(x)``, ``q`` with orthonormal columns, ``r`` upper triangular; reduced
    (``q`` (..., m, k), ``r`` (..., k, n), ``k = min(m, n)``) or with ``full_matrices`` ``q`` square (..., m, m)
    and ``r`` (..., m, n)."""
    return bind(qr_p, x, full_matrices=bool(full_matrices))


# ----------------------------------------------------------------------------------------------------- slogdet
slogdet_p = _unary("slogdet", True, lambda b, m, n: [b, b], real_out=(1,))


@jvp_rule(slogdet_p, float_only=False)
def _slogdet_jvp(out, primals, tangents):
    (sign, _), (x,), (t,) = out, primals, tangents
    tr = reduce_sum(_diag(solve(x, t)), (len(x.shape) - 2,))    # d log det
    if x.dtype.kind != "c":
        return [Zero(tangent_aval(sign)), tr]
    return [mul(_i_imag(tr), sign), real(tr)]


def slogdet(x):
    """Sign and log of the absolute value of determinants: ``sign, logabsdet = lax.slogdet(x)``."""
    return bind(slogdet_p, x)


# ------------------------------------------------------------------------------------------------------- solve
solve_p = Primitive("solve")


@solve_p.def_abstract_eval
def _solve_abstract_eval(a, b):
    _check("solve", a)
    _check("solve", b, square=False)
    if a.dtype != b.dtype or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise TypeError(f"solve: expected matrices a (..., n, n) and b (..., n, k) of one dtype and batch shape, "
                        f"got {short(a)} and {short(b)}")
    return ShapedArray(b.shape, b.dtype)


@jvp_rule(solve_p)
def _solve_jvp(x, primals, tangents):
    (a, _), (ta, tb) = primals, tangents
    if is_zero(ta):
        return solve(a, tb)
    return solve(a, neg(_mm(ta, x)) if is_zero(tb) else sub(tb, _mm(ta, x)))


@solve_p.def_transpose
def _solve_transpose(ct, a, b):
    if is_undefined(a):
        raise TypeError("solve: the matrix a is not a linear input (only the right-hand side b is)")
    return [None, solve(_T(a), ct)]


solve_p.def_batch(front_batch(lambda size, a, b: solve_p.bind(a, b)))


def solve(a, b):
    """``x`` with ``a @ x = b`` for square ``a`` (..., n, n) and ``b`` (..., n, k) of the same batch shape:
    ``lax.solve(fnp.eye(2) * 2.0, fnp.ones((2, 1)))`` is ``[[0.5], [0.5]]``."""
    return bind(solve_p, a, b)


__all__ = ["cholesky", "eigh", "qr", "slogdet", "solve", "svd"]
