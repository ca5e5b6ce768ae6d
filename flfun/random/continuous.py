"""Continuous distributions of ``flfun.random`` beyond uniform/normal, as in ``jax.random``: the gamma family
(gamma, loggamma, beta, dirichlet, chisquare, t, f), closed-form inverse-CDF samplers, and vector and norm-based
samplers (multivariate_normal, orthogonal, ball, generalized_normal, maxwell).

Gamma draws use Marsaglia-Tsang rejection with a fixed number of parallel proposals (so they jit and vmap),
``a < 1`` boosted as ``Gamma(a + 1) * U**(1/a)``, and are differentiable in ``a`` by implicit reparameterisation
(as ``jax.random.gamma``): ``dx/da = -(dP(a, x)/da) / pdf(x; a)``, with ``dP/da`` from autodiff of
``flfun.scipy.special.gammainc``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.random.basic import bernoulli, normal, uniform
from flfun.random.keys import canonical_shape, check_key, sample_args, split
from flfun.scipy.special import gammainc, gammaln, logsumexp

_PROPOSALS = 8   # Marsaglia-Tsang accepts > 95% for a >= 1: all 8 rejected with probability < 1e-10
_METHODS = ("cholesky", "eigh", "svd")


def open_uniform(key, shape, dt):
    """Uniform floats in ``(0, 1)``."""
    return uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)


def first_accepted(accept, values):
    """``values[i]`` for the first proposal ``i`` (leading axis) that ``accept`` marks (the last when none does)."""
    accept = fnp.logical_or(accept, fnp.arange(accept.shape[0]).reshape((-1,) + (1,) * (accept.ndim - 1))
                            == accept.shape[0] - 1)
    idx = lax.argmax(lax.convert_element_type(accept, np.int32), 0, np.int32)
    return fnp.take_along_axis(values, idx[None], axis=0)[0]


# ------------------------------------------------------------------------------------------------- gamma
def _log_gamma_sample(key, a, shape, dt):
    """``log`` of Gamma(a, 1) draws (no gradient), exact also where the draw underflows."""
    a = lax.stop_gradient(fnp.broadcast_to(a, shape))
    boost = a < 1.0
    ab = fnp.where(boost, a + 1.0, a)
    d = ab - 1.0 / 3.0
    c = 1.0 / fnp.sqrt(9.0 * d)
    kz, ku, kb = split(key, 3)
    z, u = normal(kz, (_PROPOSALS, *shape), dt), open_uniform(ku, (_PROPOSALS, *shape), dt)
    v = (1.0 + c * z) ** 3
    safe_v = fnp.where(v > 0, v, 1.0)
    accept = (v > 0) & (fnp.log(u) < 0.5 * z * z + d - d * safe_v + d * fnp.log(safe_v))
    logx = fnp.log(d) + fnp.log(first_accepted(accept, safe_v))
    return fnp.where(boost, logx + fnp.log(open_uniform(kb, shape, dt)) / fnp.where(boost, a, 1.0), logx)


def _gamma(fn: str, key, a, shape, dtype, log_scale: bool):
    """Gamma(a, 1) draws (their logs with ``log_scale``) whose derivative in ``a`` is the implicit-reparameterisation
    one."""
    key, shape, dt, p = sample_args(fn, key, shape, dtype, a=a)
    a = fnp.broadcast_to(p["a"], shape)
    logx = _log_gamma_sample(key, a, shape, dt)
    x0 = fnp.exp(logx)
    log_density = (a - 1.0) * logx - x0 - gammaln(a) + (logx if log_scale else 0.0)   # pdf(x) [* x]
    dens = lax.stop_gradient(fnp.exp(log_density))
    surrogate = -gammainc(a, lax.stop_gradient(x0)) / fnp.where(dens > 0, dens, 1.0)
    surrogate = fnp.where(dens > 0, surrogate, 0.0)
    return (logx if log_scale else x0) + (surrogate - lax.stop_gradient(surrogate))


def gamma(key: Array, a, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Gamma(a, 1) draws, differentiable in ``a`` (implicit reparameterisation).

    Example::

        >>> x = flfun.random.gamma(flfun.random.key(0), 2.0, (1000,))
    """
    return _gamma("gamma", key, a, shape, dtype, log_scale=False)


def loggamma(key: Array, a, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """``log`` of Gamma(a, 1) draws, accurate for small ``a`` where the draws themselves underflow.

    Example::

        >>> lx = flfun.random.loggamma(flfun.random.key(0), 0.01, (10,))
    """
    return _gamma("loggamma", key, a, shape, dtype, log_scale=True)


def beta(key: Array, a, b, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Beta(a, b) draws as ``Ga / (Ga + Gb)`` (in log space, so small ``a, b`` work).

    Example::

        >>> x = flfun.random.beta(flfun.random.key(0), 2.0, 3.0, (100,))
    """
    key, shape, dt, p = sample_args("beta", key, shape, dtype, a=a, b=b)
    ka, kb = split(key)
    la, lb = loggamma(ka, p["a"], shape, dt), loggamma(kb, p["b"], shape, dt)
    return fnp.exp(la - fnp.logaddexp(la, lb))


def dirichlet(key: Array, alpha, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Dirichlet(alpha) draws, ``alpha`` of shape ``(..., K)``; the result has shape ``(*shape, K)``.

    Example::

        >>> x = flfun.random.dirichlet(flfun.random.key(0), fnp.ones(3), (5,))   # (5, 3), rows sum to 1
    """
    alpha = fnp.asarray(alpha, dtype=dtypes.canonicalize(dtype))
    if alpha.ndim < 1:
        raise ValueError(f"dirichlet: alpha must have at least one dimension, got shape {tuple(alpha.shape)}")
    batch = tuple(alpha.shape[:-1]) if shape is None else canonical_shape(shape, "dirichlet")
    key, full, dt, p = sample_args("dirichlet", key, (*batch, alpha.shape[-1]), dtype, alpha=alpha)
    lg = loggamma(key, p["alpha"], full, dt)
    return fnp.exp(lg - logsumexp(lg, axis=-1, keepdims=True))


def chisquare(key: Array, df, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Chi-square(df) draws: ``2 * Gamma(df / 2)``.

    Example::

        >>> x = flfun.random.chisquare(flfun.random.key(0), 3.0, (10,))
    """
    key, shape, dt, p = sample_args("chisquare", key, shape, dtype, df=df)
    return 2.0 * gamma(key, p["df"] / 2.0, shape, dt)


def t(key: Array, df, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Student's t(df) draws: ``Z * sqrt(df / chisquare(df))``.

    Example::

        >>> x = flfun.random.t(flfun.random.key(0), 5.0, (10,))
    """
    key, shape, dt, p = sample_args("t", key, shape, dtype, df=df)
    kn, kg = split(key)
    half = p["df"] / 2.0
    return normal(kn, shape, dt) * fnp.sqrt(half / gamma(kg, half, shape, dt))


def f(key: Array, dfnum, dfden, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """F(dfnum, dfden) draws: the ratio of two scaled chi-squares.

    Example::

        >>> x = flfun.random.f(flfun.random.key(0), 3.0, 7.0, (10,))
    """
    key, shape, dt, p = sample_args("f", key, shape, dtype, dfnum=dfnum, dfden=dfden)
    k1, k2 = split(key)
    return ((chisquare(k1, p["dfnum"], shape, dt) / p["dfnum"])
            / (chisquare(k2, p["dfden"], shape, dt) / p["dfden"]))


# --------------------------------------------------------------------------------------- inverse-CDF samplers
def exponential(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Exponential(1) draws: ``-log1p(-U)``.

    Example::

        >>> x = flfun.random.exponential(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("exponential", key, shape, dtype)
    return -fnp.log1p(-uniform(key, shape, dt))


def laplace(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Laplace(0, 1) draws.

    Example::

        >>> x = flfun.random.laplace(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("laplace", key, shape, dtype)
    u = uniform(key, shape, dt, np.nextafter(dt.type(-1), dt.type(0)), 1.0)
    return -fnp.sign(u) * fnp.log1p(-fnp.abs(u))


def logistic(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard logistic draws: ``log(U / (1 - U))``.

    Example::

        >>> x = flfun.random.logistic(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("logistic", key, shape, dtype)
    u = open_uniform(key, shape, dt)
    return fnp.log(u) - fnp.log1p(-u)


def cauchy(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Standard Cauchy draws: ``tan(pi * (U - 1/2))``.

    Example::

        >>> x = flfun.random.cauchy(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("cauchy", key, shape, dtype)
    u = uniform(key, shape, dt, np.finfo(dt).eps, 1.0)
    return fnp.tan(math.pi * (u - 0.5))


def lognormal(key: Array, sigma=1.0, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Log-normal draws ``exp(sigma * Z)``.

    Example::

        >>> x = flfun.random.lognormal(flfun.random.key(0), 0.5, (10,))
    """
    key, shape, dt, p = sample_args("lognormal", key, shape, dtype, sigma=sigma)
    return fnp.exp(p["sigma"] * normal(key, shape, dt))


def pareto(key: Array, b, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Pareto(b) draws on ``[1, inf)``: ``exp(E / b)``.

    Example::

        >>> x = flfun.random.pareto(flfun.random.key(0), 3.0, (10,))
    """
    key, shape, dt, p = sample_args("pareto", key, shape, dtype, b=b)
    return fnp.exp(exponential(key, shape, dt) / p["b"])


def weibull_min(key: Array, scale, concentration, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Weibull draws: ``scale * E**(1 / concentration)``.

    Example::

        >>> x = flfun.random.weibull_min(flfun.random.key(0), 1.0, 2.0, (10,))
    """
    key, shape, dt, p = sample_args("weibull_min", key, shape, dtype, scale=scale, concentration=concentration)
    return p["scale"] * exponential(key, shape, dt) ** (1.0 / p["concentration"])


def rayleigh(key: Array, scale, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Rayleigh(scale) draws: ``scale * sqrt(2 E)``.

    Example::

        >>> x = flfun.random.rayleigh(flfun.random.key(0), 1.0, (10,))
    """
    key, shape, dt, p = sample_args("rayleigh", key, shape, dtype, scale=scale)
    return p["scale"] * fnp.sqrt(2.0 * exponential(key, shape, dt))


def triangular(key: Array, left, mode, right, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Triangular(left, mode, right) draws by inverting the CDF.

    Example::

        >>> x = flfun.random.triangular(flfun.random.key(0), 0.0, 0.3, 1.0, (10,))
    """
    key, shape, dt, p = sample_args("triangular", key, shape, dtype, left=left, mode=mode, right=right)
    lo, mo, hi = p["left"], p["mode"], p["right"]
    u = uniform(key, shape, dt)
    below = lo + fnp.sqrt(u * (hi - lo) * (mo - lo))
    above = hi - fnp.sqrt((1.0 - u) * (hi - lo) * (hi - mo))
    return fnp.where(u < (mo - lo) / (hi - lo), below, above)


def wald(key: Array, mean, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Wald (inverse Gaussian, unit shape) draws by Michael-Schucany-Haas.

    Example::

        >>> x = flfun.random.wald(flfun.random.key(0), 1.0, (10,))
    """
    key, shape, dt, p = sample_args("wald", key, shape, dtype, mean=mean)
    kn, ku = split(key)
    mu, y = p["mean"], normal(kn, shape, dt) ** 2
    x = mu + mu * mu * y / 2.0 - mu / 2.0 * fnp.sqrt(4.0 * mu * y + mu * mu * y * y)
    return fnp.where(uniform(ku, shape, dt) <= mu / (mu + x), x, mu * mu / x)


# ---------------------------------------------------------------------------- vector and norm-based samplers
def generalized_normal(key: Array, p, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Draws with density proportional to ``exp(-|x|**p)`` (``p=2``: normal with variance 1/2).

    Example::

        >>> x = flfun.random.generalized_normal(flfun.random.key(0), 1.5, (10,))
    """
    key, shape, dt, q = sample_args("generalized_normal", key, shape, dtype, p=p)
    kg, ks = split(key)
    g = gamma(kg, 1.0 / q["p"], shape, dt)
    return fnp.where(bernoulli(ks, 0.5, shape), 1.0, -1.0).astype(dt) * g ** (1.0 / q["p"])


def maxwell(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Maxwell draws: the length of a standard normal 3-vector.

    Example::

        >>> x = flfun.random.maxwell(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("maxwell", key, shape, dtype)
    return fnp.sqrt(fnp.sum(normal(key, (*shape, 3), dt) ** 2, axis=-1))


def double_sided_maxwell(key: Array, loc, scale, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """``loc + scale * S * M`` for a Maxwell draw ``M`` and a random sign ``S``.

    Example::

        >>> x = flfun.random.double_sided_maxwell(flfun.random.key(0), 0.0, 1.0, (10,))
    """
    key, shape, dt, q = sample_args("double_sided_maxwell", key, shape, dtype, loc=loc, scale=scale)
    km, ks = split(key)
    sign = fnp.where(bernoulli(ks, 0.5, shape), 1.0, -1.0).astype(dt)
    return q["loc"] + q["scale"] * sign * maxwell(km, shape, dt)


def ball(key: Array, d: int, p: float = 2, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Uniform draws from the unit ``p``-norm ball in ``d`` dimensions: shape ``(*shape, d)``.

    Example::

        >>> x = flfun.random.ball(flfun.random.key(0), 3, shape=(10,))
    """
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"ball: d must be a positive int, got {d!r}")
    key, shape, dt, _ = sample_args("ball", key, shape, dtype)
    kg, ke = split(key)
    g = generalized_normal(kg, p, (*shape, d), dt)
    e = exponential(ke, shape, dt)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1.0 / p))[..., None]


def orthogonal(key: Array, n: int, shape: Sequence[int] = (), dtype=np.float32, m: int | None = None) -> Array:
    """Haar-random ``(n, m)`` matrices with orthonormal columns (``n >= m``) or rows: shape ``(*shape, n, m)``.

    Example::

        >>> q = flfun.random.orthogonal(flfun.random.key(0), 3)
    """
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"orthogonal: {name} must be a positive int, got {v!r}")
    key, shape, dt, _ = sample_args("orthogonal", key, shape, dtype)
    z = normal(key, (*shape, max(n, m), min(n, m)), dt)
    q, r = fnp.linalg.qr(z)
    q = q * fnp.sign(fnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return fnp.swapaxes(q, -1, -2) if n < m else q


def multivariate_normal(key: Array, mean, cov, shape: Sequence[int] | None = None, dtype=None,
                        method: str = "cholesky") -> Array:
    """Draws from N(mean, cov) with ``cov`` factored by ``method`` ('cholesky', 'eigh' or 'svd'); ``shape``
    defaults to the broadcast batch shape of ``mean`` (..., n) and ``cov`` (..., n, n).

    Example::

        >>> x = flfun.random.multivariate_normal(flfun.random.key(0), fnp.zeros(2), fnp.eye(2), (5,))
    """
    if method not in _METHODS:
        raise ValueError(f"multivariate_normal: method must be one of {_METHODS}, got {method!r}")
    key = check_key(key, "multivariate_normal")
    dt = dtypes.canonicalize(np.float32 if dtype is None else dtype)
    mean, cov = fnp.asarray(mean, dtype=dt), fnp.asarray(cov, dtype=dt)
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != (mean.shape[-1],) * 2:
        raise ValueError(f"multivariate_normal: mean (..., n) and cov (..., n, n) must agree, got "
                         f"{tuple(mean.shape)} and {tuple(cov.shape)}")
    batch = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    shape = batch if shape is None else canonical_shape(shape, "multivariate_normal")
    if np.broadcast_shapes(shape, batch) != tuple(shape):
        raise ValueError(f"multivariate_normal: shape {shape} must end with the batch shape {batch}")
    if method == "cholesky":
        factor = fnp.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(fnp.maximum(w, 0.0))[..., None, :]
    else:
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s)[..., None, :]
    z = normal(key, (*shape, mean.shape[-1]), dt)
    return mean + fnp.einsum("...ij,...j->...i", factor, z)


__all__ = ["ball", "beta", "cauchy", "chisquare", "dirichlet", "double_sided_maxwell", "exponential", "f", "gamma",
           "generalized_normal", "laplace", "loggamma", "logistic", "lognormal", "maxwell", "multivariate_normal",
           "orthogonal", "pareto", "rayleigh", "t", "triangular", "wald", "weibull_min"]
