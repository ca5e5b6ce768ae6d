"""``flfun.scipy.special``: special functions as in ``jax.scipy.special``, composed from flfun primitives (so
every one differentiates, vmaps and jits; derivatives are those of the approximating formula, accurate to a few
ulp where the function is smooth). Float64 inputs give float64 accuracy; integers become float32."""
from __future__ import annotations

import functools
import math

import numpy as np

from flfun.primitives import base as pb, elementwise as pe, reduce as pr
from flfun import numpy as fnp
from flfun.array import Array
from flfun.numpy.promotion import to_float
from flfun.transforms.custom import custom_jvp
from flfun.util import canonical_axes

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_SERIES_TERMS = 64


def _f(x) -> Array:
    return to_float(x if isinstance(x, Array) else fnp.asarray(x))


def _floats(*xs):
    """``xs`` as float arrays of one dtype: the promoted dtype of the array arguments (Python scalars are weak
    and take it, as in JAX); float32 when all are Python scalars."""
    arrays = [to_float(fnp.asarray(x)) for x in xs if not isinstance(x, (int, float))]
    dt = np.result_type(*[x.dtype for x in arrays]) if arrays else np.dtype(np.float32)
    return [fnp.asarray(x, dtype=dt) if isinstance(x, (int, float)) else to_float(fnp.asarray(x)).astype(dt)
            for x in xs]




# ----------------------------------------------------------------------------------------- gamma family
def _lgamma_pos(x):
    """log Gamma(x) for x >= 0.5 (Lanczos, g = 7)."""
    z = x - 1.0
    acc = fnp.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        acc = acc + c / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    return 0.5 * math.log(2 * math.pi) + (z + 0.5) * fnp.log(t) - t + fnp.log(acc)


def gammaln(x) -> Array:
    """``log|Gamma(x)|`` (reflection for ``x < 0.5``; ``inf`` at the poles).

    Example::

        >>> round(float(gammaln(5.0)), 6)        # log(24)
        3.178054
    """
    x = _f(x)
    small = x < 0.5
    pos = _lgamma_pos(fnp.where(small, 1.0 - x, x))
    sin = fnp.abs(fnp.sin(math.pi * fnp.where(small, x, 0.5)))
    refl = math.log(math.pi) - fnp.log(sin) - pos
    pole = small & (x == fnp.floor(x))
    return fnp.where(pole, math.inf, fnp.where(small, refl, pos))


def gamma(x) -> Array:
    """``Gamma(x)`` as ``sign * exp(gammaln(x))``.

    Example::

        >>> float(gamma(5.0))
        24.0
    """
    x = _f(x)
    neg_odd = (x < 0) & (fnp.remainder(fnp.floor(x), 2.0) == 1.0)
    return fnp.where(neg_odd, -1.0, 1.0) * fnp.exp(gammaln(x))


def _digamma_pos(x, shift: int = 10):
    acc = fnp.zeros_like(x)
    for k in range(shift):
        acc = acc + 1.0 / (x + float(k))
    y = x + float(shift)
    y2 = 1.0 / (y * y)
    series = y2 * (1 / 12 - y2 * (1 / 120 - y2 * (1 / 252 - y2 * (1 / 240 - y2 * (1 / 132)))))
    return fnp.log(y) - 0.5 / y - series - acc


def digamma(x) -> Array:
    """The digamma function ``psi(x) = d/dx log Gamma(x)`` (NaN at the poles ``0, -1, ...``).

    Example::

        >>> round(float(digamma(1.0)), 6)       # -Euler's gamma
        -0.577216
    """
    x = _f(x)
    small = x < 0.5
    pos = _digamma_pos(fnp.where(small, 1.0 - x, x))
    xs = fnp.where(small, x, 0.25)
    refl = pos - math.pi / fnp.tan(math.pi * xs)
    pole = small & (x == fnp.floor(x))
    return fnp.where(pole, math.nan, fnp.where(small, refl, pos))


def betaln(a, b) -> Array:
    """``log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``.

    Example::

        >>> round(float(betaln(2.0, 3.0)), 6)   # log(1/12)
        -2.484907
    """
    a, b = _floats(a, b)
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def multigammaln(a, d: int) -> Array:
    """The log of the multivariate gamma function of dimension ``d``.

    Example::

        >>> round(float(multigammaln(3.0, 2)), 6)
        1.527896
    """
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"multigammaln: d must be a positive int, got {d!r}")
    a = _f(a)
    out = fnp.full_like(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        out = out + gammaln(a - j / 2)
    return out


def _gammainc_series(a, x):
    """P(a, x) by its power series (good for x < a + 1)."""
    term = fnp.ones_like(x) / a
    total = term
    for n in range(1, _SERIES_TERMS):
        term = term * x / (a + float(n))
        total = total + term
    return total * fnp.exp(a * fnp.log(x) - x - gammaln(a))


def _gammaincc_cf(a, x):
    """Q(a, x) by its continued fraction, evaluated bottom-up (good for x >= a + 1)."""
    f = fnp.zeros_like(x)
    for n in range(_SERIES_TERMS, 0, -1):
        f = n * (a - n) / (x + 2 * n + 1 - a + f)
    return fnp.exp(a * fnp.log(x) - x - gammaln(a)) / (x + 1.0 - a + f)


def gammainc(a, x) -> Array:
    """The regularised lower incomplete gamma ``P(a, x)`` (series / continued fraction with a fixed number of
    terms: float64 accuracy for ``a`` up to about 50; differentiable in both ``a`` and ``x``).

    Example::

        >>> round(float(gammainc(1.0, 1.0)), 6)   # 1 - exp(-1)
        0.632121
    """
    a, x = _floats(a, x)
    a, x = fnp.broadcast_arrays(a, x)
    use_series = x < a + 1.0
    xs = fnp.where(use_series, x, fnp.minimum(a, 1.0) * 0.5)
    xc = fnp.where(use_series, a + 2.0, x)
    p = fnp.where(use_series, _gammainc_series(a, fnp.maximum(xs, 1e-300 if x.dtype == np.float64 else 1e-38)),
                  1.0 - _gammaincc_cf(a, xc))
    return fnp.where(x <= 0, 0.0, p)


def gammaincc(a, x) -> Array:
    """The regularised upper incomplete gamma ``Q(a, x) = 1 - P(a, x)`` (accurate in the upper tail).

    Example::

        >>> round(float(gammaincc(1.0, 1.0)), 6)   # exp(-1)
        0.367879
    """
    a, x = _floats(a, x)
    a, x = fnp.broadcast_arrays(a, x)
    use_cf = x >= a + 1.0
    xc = fnp.where(use_cf, x, a + 2.0)
    q = fnp.where(use_cf, _gammaincc_cf(a, xc), 1.0 - gammainc(a, fnp.where(use_cf, 0.0, x)))
    return fnp.where(x <= 0, 1.0, q)


def _betainc_cf(a, b, x):
    """I_x(a, b) by its continued fraction, evaluated bottom-up (good for x < (a + 1) / (a + b + 2))."""
    f = fnp.zeros_like(x)
    for n in range(2 * _SERIES_TERMS, 0, -1):
        m = n // 2
        d = (m * (b - m) / ((a + (2 * m - 1)) * (a + 2 * m)) if n % 2 == 0 else
             -(a + m) * (a + b + m) / ((a + 2 * m) * (a + (2 * m + 1))))
        f = d * x / (1.0 + f)
    return fnp.exp(xlogy(a, x) + xlog1py(b, -x) - fnp.log(a) - betaln(a, b)) / (1.0 + f)


def betainc(a, b, x) -> Array:
    """The regularised incomplete beta ``I_x(a, b)`` for ``a, b > 0`` (a continued fraction with a fixed number
    of terms, on the side of the symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` where it converges fast; float64
    accuracy for ``a, b`` up to about 100; differentiable in ``a``, ``b`` and ``x``).

    Example::

        >>> round(float(betainc(2.0, 3.0, 0.4)), 6)
        0.5248
    """
    a, b, x = fnp.broadcast_arrays(*_floats(a, b, x))
    flip = x > (a + 1.0) / (a + b + 2.0)
    xs = fnp.where((x <= 0) | (x >= 1), 0.5, fnp.where(flip, 1.0 - x, x))     # inside (0, 1) for the fraction
    v = _betainc_cf(fnp.where(flip, b, a), fnp.where(flip, a, b), xs)
    out = fnp.where(x <= 0, 0.0, fnp.where(x >= 1, 1.0, fnp.where(flip, 1.0 - v, v)))
    return fnp.where((a <= 0) | (b <= 0), math.nan, out)


# --------------------------------------------------------------------------------------- elementary-ish
def xlogy(x, y) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (also for ``y == 0``).

    Example::

        >>> float(xlogy(0.0, 0.0))
        0.0
    """
    x, y = _floats(x, y)
    zero = x == 0
    return fnp.where(zero, 0.0, x * fnp.log(fnp.where(zero, 1.0, y)))


def xlog1py(x, y) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0``.

    Example::

        >>> float(xlog1py(0.0, -1.0))
        0.0
    """
    x, y = _floats(x, y)
    zero = x == 0
    return fnp.where(zero, 0.0, x * fnp.log1p(fnp.where(zero, 0.0, y)))


def entr(x) -> Array:
    """``-x log x`` for ``x > 0``, 0 at 0 and ``-inf`` for ``x < 0``.

    Example::

        >>> float(entr(1.0))
        -0.0
    """
    x = _f(x)
    neg = x < 0
    safe = fnp.where(neg, 1.0, x)
    return fnp.where(neg, -math.inf, -xlogy(safe, safe))


def expit(x) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``.

    Example::

        >>> float(expit(0.0))
        0.5
    """
    return pe.logistic(_f(x))


def logit(p) -> Array:
    """``log(p / (1 - p))``, the inverse of ``expit``.

    Example::

        >>> float(logit(0.5))
        0.0
    """
    p = _f(p)
    return fnp.log(p) - fnp.log1p(-p)


def _keep(x, out, axes):
    """Reinsert the reduced ``axes`` of ``x`` as length-one axes of ``out``."""
    return pb.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow (scipy's argument order); entries where ``where``
    is False are left out; ``return_sign`` gives ``(log|sum|, sign)`` (else a negative sum is NaN). Its gradient
    is softmax.

    Example::

        >>> logsumexp(fnp.asarray([0.0, 0.0])).item() == math.log(2)
        True
    """
    x = _f(a)
    if where is not None:
        x = fnp.where(where, x, -math.inf)
    axes = canonical_axes(axis, x.ndim, "logsumexp")
    if b is None and not return_sign:
        return _logsumexp(x, axes, keepdims)
    return _logsumexp_general(x, axes, b, keepdims, return_sign)


@functools.partial(custom_jvp, nondiff_argnums=(1, 2))
def _logsumexp(x, axes, keepdims):
    return _logsumexp_general(x, axes, None, keepdims, False)


@_logsumexp.defjvp
def _logsumexp_jvp(axes, keepdims, primals, tangents):
    """``sum(softmax(x) t)``, the softmax shifted by the row's max (exact for huge ``x``) and 0 in rows of -inf."""
    (x,), (t,) = primals, tangents
    m = pr.reduce_max(x, axes)
    e = pe.exp(pe.sub(x, _keep(x, pe.select(pe.is_finite(m), m, pb.full((), 0, m.dtype)), axes)))
    total = _keep(x, pr.reduce_sum(e, axes), axes)
    empty = pe.eq(total, pb.full((), 0, x.dtype))
    p = fnp.where(empty, pb.full((), 0, x.dtype), pe.div(e, fnp.where(empty, pb.full((), 1, x.dtype), total)))
    dt = pr.reduce_sum(pe.mul(p, t), axes)
    out = _logsumexp.fun(x, axes, keepdims)
    return out, _keep(x, dt, axes) if keepdims else dt


def _logsumexp_general(x, axes, b, keepdims: bool, return_sign: bool):
    m = pr.reduce_max(pe.stop_gradient(x), axes)     # a constant shift: exact gradients, -inf rows stay -inf
    m = _keep(x, pe.select(pe.is_finite(m), m, pb.full((), 0, m.dtype)), axes)
    e = pe.exp(pe.sub(x, m))
    if b is not None:
        b_shape = tuple(fnp.shape(b))
        if len(b_shape) > x.ndim or any(d not in (1, s) for d, s in zip(b_shape[::-1], x.shape[::-1])):
            raise ValueError(f"logsumexp: b of shape {b_shape} must broadcast to x's {tuple(x.shape)}")
        e = to_float(fnp.multiply(e, b))
    total = _keep(x, pr.reduce_sum(e, axes), axes)
    sign = pe.sign(total)
    out = pe.add(pe.log(pe.abs(total) if return_sign else total), pb.convert_element_type(m, total.dtype))
    if not keepdims:
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        out, sign = pb.reshape(out, kept), pb.reshape(sign, kept)
    return (out, sign) if return_sign else out


# -------------------------------------------------------------------------------------------- error functions
def erf(x) -> Array:
    """The error function.

    Example::

        >>> float(erf(0.0))
        0.0
    """
    return pe.erf(_f(x))


def _erfc_cf(z):
    """``(erfc(z) * exp(z**2) * sqrt(pi))^-1``'s continued fraction ``z + (1/2)/(z + 1/(z + ...))`` for z >= 2."""
    f = z
    for n in range(_SERIES_TERMS, 0, -1):
        f = z + (n / 2) / f
    return f


def _log_erfc(z):
    """log erfc(z): through 1 - erf(z) for z < 2, the continued fraction beyond (no underflow)."""
    big = z >= 2.0
    zb = fnp.where(big, z, 2.0)
    tail = -zb * zb - 0.5 * math.log(math.pi) - fnp.log(_erfc_cf(zb))
    return fnp.where(big, tail, fnp.log1p(-pe.erf(fnp.where(big, 0.0, z))))


def erfc(x) -> Array:
    """``1 - erf(x)``, accurate for large ``x`` (no cancellation).

    Example::

        >>> float(erfc(0.0))
        1.0
    """
    x = _f(x)
    return fnp.exp(_log_erfc(x))


def erfinv(x) -> Array:
    """The inverse error function on ``(-1, 1)``: Giles' single-precision polynomial, refined by two Newton steps
    in float64.

    Example::

        >>> float(erfinv(0.0))
        0.0
    """
    x = _f(x)
    w = -fnp.log1p(-x * x)
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
            y = y - (pe.erf(y) - x) / (fnp.exp(-(y * y)) * (2 / math.sqrt(math.pi)))
    return y


def ndtr(x) -> Array:
    """The standard normal CDF ``Phi(x)``, accurate in both tails.

    Example::

        >>> float(ndtr(0.0))
        0.5
    """
    return fnp.exp(log_ndtr(x))


def log_ndtr(x) -> Array:
    """``log Phi(x)``, accurate in both tails (``log_ndtr(-40) ~ -804.6``, ``log_ndtr(9) ~ -1.1e-19``).

    Example::

        >>> round(float(log_ndtr(0.0)), 6)
        -0.693147
    """
    x = _f(x)
    pos = x > 0
    lower = math.log(0.5) + _log_erfc(-fnp.where(pos, 0.0, x) * (1 / math.sqrt(2)))
    upper = fnp.log1p(-0.5 * fnp.exp(_log_erfc(fnp.where(pos, x, 0.0) * (1 / math.sqrt(2)))))
    return fnp.where(pos, upper, lower)


def ndtri(p) -> Array:
    """The inverse of ``ndtr`` (the standard normal quantile): Abramowitz-Stegun 26.2.23 refined by Newton steps
    on ``log_ndtr`` (so the far tails keep their digits: ``ndtri(1e-300) ~ -37.05``).

    Example::

        >>> round(float(ndtri(0.975)), 4)
        1.96
    """
    p = _f(p)
    lower = p < 0.5
    q = fnp.where(lower, p, 1.0 - p)                       # solve in the lower tail, where q keeps its digits
    logq = fnp.log(fnp.where(q > 0, q, 0.25))
    t = fnp.sqrt(-2.0 * logq)
    z = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    for _ in range(3 if p.dtype == np.float64 else 2):
        lz = log_ndtr(z)
        z = z - (lz - logq) * fnp.exp(lz + 0.5 * z * z + 0.5 * math.log(2 * math.pi))
    z = fnp.where(q == 0, -math.inf, fnp.where(q == 0.5, 0.0, z))
    return fnp.where(lower, z, -z)


# ------------------------------------------------------------------------------------------------- bessel
def _bessel_series(ax, nu: int, terms: int = 90):
    """``I_nu(ax) * exp(-ax)`` by the power series (ax <= 30)."""
    q = ax * ax / 4
    term = fnp.ones_like(ax) / math.factorial(nu)
    total = term
    for k in range(1, terms):
        term = term * q / (k * (k + nu))
        total = total + term
    return total * (ax / 2) ** nu * fnp.exp(-ax)


def _bessel_asymptotic(ax, nu: int, terms: int = 30):
    """``I_nu(ax) * exp(-ax)`` by Hankel's asymptotic expansion (ax >= 30)."""
    mu, term = 4.0 * nu * nu, fnp.ones_like(ax)
    total = term
    for k in range(1, terms):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        total = total + term
    return total / fnp.sqrt(2 * math.pi * ax)


def _bessel_e(x, nu: int):
    x = _f(x)
    ax = fnp.abs(x)
    big = ax >= 30.0
    out = fnp.where(big, _bessel_asymptotic(fnp.where(big, ax, 30.0), nu),
                    _bessel_series(fnp.where(big, 1.0, ax), nu))
    return out if nu == 0 else fnp.sign(x) * out


def i0e(x) -> Array:
    """The exponentially scaled modified Bessel function ``exp(-|x|) I0(x)``.

    Example::

        >>> float(i0e(0.0))
        1.0
    """
    return _bessel_e(x, 0)


def i1e(x) -> Array:
    """The exponentially scaled modified Bessel function ``exp(-|x|) I1(x)``.

    Example::

        >>> float(i1e(0.0))
        0.0
    """
    return _bessel_e(x, 1)


def i0(x) -> Array:
    """The modified Bessel function ``I0(x)``: ``i0(1.0) ~ 1.2661``."""
    return i0e(x) * fnp.exp(fnp.abs(_f(x)))


def i1(x) -> Array:
    """The modified Bessel function ``I1(x)``: ``i1(1.0) ~ 0.5652``."""
    return i1e(x) * fnp.exp(fnp.abs(_f(x)))


# --------------------------------------------------------------------------------------------------- zeta
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798)


def zeta(x, q=None) -> Array:
    """The Hurwitz zeta function ``sum_k (k + q)^-x`` for ``x > 1`` (Riemann's for ``q=None``), by Euler-Maclaurin
    summation; NaN for ``x < 1``, ``inf`` at ``x == 1``.

    Example::

        >>> round(float(zeta(2.0)), 6)           # pi**2 / 6
        1.644934
    """
    x, q = _floats(x, 1.0 if q is None else q)
    x, q = fnp.broadcast_arrays(x, q)
    n = 12
    total = fnp.zeros_like(x)
    for k in range(n):
        total = total + (q + k) ** -x
    a = q + n
    total = total + a ** (1 - x) / (x - 1) + 0.5 * a ** -x
    fac, rise = 1.0, fnp.ones_like(x)
    for j, b in enumerate(_BERNOULLI, start=1):
        rise = rise * (x + (2 * j - 2)) * ((x + (2 * j - 3)) if j > 1 else 1.0)
        fac *= (2 * j) * (2 * j - 1)
        total = total + b / fac * rise * a ** (-x - (2 * j - 1))
    return fnp.where(x == 1, math.inf, fnp.where(x < 1, math.nan, total))


__all__ = ["betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gamma", "gammainc", "gammaincc",
           "gammaln", "i0", "i0e", "i1", "i1e", "log_ndtr", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
           "xlog1py", "xlogy", "zeta"]
