"""numpy's polynomial functions on coefficient arrays, highest power first: ``polyval``, ``polyadd``, ``polysub``,
``polymul``, ``polydiv``, ``polyder``, ``polyint``, ``poly``, ``polyfit`` and ``vander``. Coefficient counts are
static (array shapes), so every loop here unrolls at trace time. ``roots`` is not offered: it needs the
eigenvalues of a general matrix, which flfun does not compute."""
from flfun.core import short
from flfun.numpy._asarray import as_array
from flfun.numpy._creation import arange, ones, zeros
from flfun.numpy._cumulative import cumprod
from flfun.numpy._elementwise import sqrt
from flfun.numpy._joining import concatenate, flip
from flfun.numpy._linalg import matmul
from flfun.numpy._reductions import sum
from flfun.numpy._shaping import broadcast_to
from flfun.numpy.linalg import qr, solve
from flfun.numpy.promotion import promote, to_float

__all__ = ["polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "poly", "polyfit", "vander"]


def _coeffs(op: str, *ps, float_: bool = False, order: int = 0):
    if order < 0:
        raise ValueError(f"{op}: order m must be non-negative, got {order}")
    ps = promote(op, *ps, to_float=float_)
    for p in ps:
        if p.ndim != 1:
            raise ValueError(f"{op}: coefficients must be 1-d, got {short(p)}")
    return ps


def polyval(p, x, *, unroll: int = 16):
    """``p[0] * x**(n-1) + ... + p[n-1]`` by Horner's rule (``x`` any shape).

    Example::

        >>> fnp.polyval(fnp.asarray([1.0, 0.0, -1.0]), fnp.asarray([2.0, 3.0])).tolist()
        [3.0, 8.0]
    """
    p, x = promote("polyval", p, x)
    if p.ndim != 1:
        raise ValueError(f"polyval: p must be 1-d, got {short(p)}")
    y = zeros(x.shape, x.dtype)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def _aligned(a, b):
    n = max(a.shape[0], b.shape[0])
    return [concatenate([zeros(n - c.shape[0], c.dtype), c]) for c in (a, b)]


def polyadd(a1, a2):
    """Sum of two polynomials: ``fnp.polyadd([1, 2], [1, 0, 0]) -> [1, 1, 2]``."""
    a, b = _aligned(*_coeffs("polyadd", a1, a2))
    return a + b


def polysub(a1, a2):
    """Difference of two polynomials: ``fnp.polysub([1, 2], [1, 0, 0]) -> [-1, 1, 2]``."""
    a, b = _aligned(*_coeffs("polysub", a1, a2))
    return a - b


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """Product of two polynomials (the full convolution of their coefficients).

    Example::

        >>> fnp.polymul(fnp.asarray([1.0, 1.0]), fnp.asarray([1.0, -1.0])).tolist()
        [1.0, 0.0, -1.0]
    """
    a, b = _coeffs("polymul", a1, a2)
    out = zeros(a.shape[0] + b.shape[0] - 1, a.dtype)
    for i in range(a.shape[0]):
        out = out.at[i:i + b.shape[0]].add(a[i] * b)
    return out


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """``(quotient, remainder)`` of polynomial long division; as in JAX the remainder keeps ``u``'s length
    (leading zeros), unlike numpy's trimmed one.

    Example::

        >>> [c.tolist() for c in fnp.polydiv(fnp.asarray([1.0, 2.0, 3.0, 4.0]), fnp.asarray([1.0, 1.0]))]
        [[1.0, 1.0, 2.0], [0.0, 0.0, 0.0, 2.0]]
    """
    u, v = _coeffs("polydiv", u, v, float_=True)
    n, m = u.shape[0], v.shape[0]
    q, r = zeros(max(n - m + 1, 1), u.dtype), u
    for k in range(n - m + 1):
        d = r[k] / v[0]
        q = q.at[k].set(d)
        r = r.at[k:k + m].add(-d * v)
    return q, r


def polyder(p, m: int = 1):
    """The ``m``-th derivative: ``fnp.polyder(fnp.asarray([1.0, 1.0, 1.0])) -> [2.0, 1.0]``."""
    (p,) = _coeffs("polyder", p, order=m)
    for _ in range(m):
        n = p.shape[0]
        p = p[:-1] * arange(n - 1, 0, -1).astype(p.dtype) if n else p
    return p


def polyint(p, m: int = 1, k=None):
    """The ``m``-th antiderivative with integration constants ``k`` (one per step, default 0)."""
    (p,) = _coeffs("polyint", p, float_=True, order=m)
    ks = broadcast_to(as_array(0.0 if k is None else k).astype(p.dtype), (m,))
    for i in range(m):
        p = concatenate([p / arange(p.shape[0], 0, -1).astype(p.dtype), ks[i:i + 1]])
    return p


def poly(seq_of_zeros):
    """Coefficients of the monic polynomial with the given (real) roots: ``fnp.poly([1.0, 2.0]) -> [1, -3, 2]``.
    A matrix argument (numpy takes its eigenvalues) is not supported."""
    (z,) = _coeffs("poly", seq_of_zeros)
    c = ones(1, z.dtype)
    for i in range(z.shape[0]):
        c = polymul(c, concatenate([ones(1, z.dtype), -z[i:i + 1]]))
    return c


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix ``x[:, None] ** powers`` (decreasing powers unless ``increasing``).

    Example::

        >>> fnp.vander(fnp.asarray([2, 3]), 3).tolist()
        [[4, 2, 1], [9, 3, 1]]
    """
    x = as_array(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-d, got {short(x)}")
    n = x.shape[0] if N is None else N
    if n == 0:
        return zeros((x.shape[0], 0), x.dtype)
    cols = concatenate([ones((x.shape[0], 1), x.dtype), broadcast_to(x[:, None], (x.shape[0], n - 1))], axis=1)
    v = cumprod(cols, axis=1)
    return v if increasing else flip(v, axis=1)


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """Least-squares polynomial fit of degree ``deg`` (``y`` 1-d or one fit per column), optionally weighted by
    ``w``; solved by QR of the column-scaled Vandermonde matrix. ``full`` and ``cov`` outputs are not offered.

    Example::

        >>> fnp.polyfit(fnp.asarray([0.0, 1.0, 2.0]), fnp.asarray([1.0, 3.0, 5.0]), 1).round(6).tolist()
        [2.0, 1.0]
    """
    if full or cov:
        raise NotImplementedError("polyfit: full=True and cov=True are not supported; fit with the defaults")
    x, y = promote("polyfit", x, y, to_float=True)
    if x.ndim != 1 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"polyfit: need a 1-d x and a y with x's length first, got {short(x)} and {short(y)}")
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    lhs, rhs = vander(x, deg + 1), y
    if w is not None:
        w = to_float(w)
        lhs, rhs = lhs * w[:, None], rhs * (w if y.ndim == 1 else w[:, None])
    scale = sqrt(sum(lhs * lhs, axis=0))
    q, r = qr(lhs / scale)
    c = solve(r, matmul(q.T, rhs) if y.ndim == 2 else matmul(q.T, rhs)[:, None])
    c = c / scale[:, None]
    return c if y.ndim == 2 else c[:, 0]
