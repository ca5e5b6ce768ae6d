"""Discrete distributions of ``flfun.random``: poisson, binomial, multinomial, geometric, rademacher.

Poisson and binomial use inversion (a fixed number of CDF terms) for means below 10 and Hormann's transformed
rejection (PTRS / BTRS) with a fixed number of parallel proposals above, so both jit and vmap and are exact
samplers up to a rejection failure probability below 1e-12.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from flfun import dtypes
from flfun import numpy as fnp
from flfun.array import Array
from flfun.random.basic import bernoulli, uniform
from flfun.random.continuous import first_accepted, open_uniform
from flfun.random.keys import canonical_shape, check_key, sample_args, split
from flfun.scipy.special import gammaln

_SMALL_MEAN, _TERMS, _PROPOSALS = 10.0, 48, 16


def _invert(u, log_p0, ratio):
    """The smallest k with ``u <= CDF(k)`` for a pmf given by ``p0`` and ``p(k+1)/p(k) = ratio(k)``."""
    pk = fnp.exp(log_p0)
    cdf, count = pk, fnp.zeros_like(u)
    for k in range(_TERMS):
        count = count + (u > cdf)
        pk = pk * ratio(float(k))
        cdf = cdf + pk
    return count


def poisson(key: Array, lam, shape: Sequence[int] | None = None, dtype=dtypes.DEFAULT_INT) -> Array:
    """Poisson(lam) draws (integers of ``dtype``).

    Example::

        >>> k = flfun.random.poisson(flfun.random.key(0), 3.0, (10,))
    """
    key, shape, dt, p = sample_args("poisson", key, shape, dtype, "", lam=lam)
    lam = fnp.broadcast_to(p["lam"], shape)
    small = lam < _SMALL_MEAN
    ls = fnp.where(small, lam, 1.0)
    k_inv, k_rej = split(key)
    inv = _invert(uniform(k_inv, shape, lam.dtype), -ls, lambda k: ls / (k + 1.0))
    lb = fnp.where(small, 100.0, lam)                      # PTRS (Hormann 1993)
    slam, loglam = fnp.sqrt(lb), fnp.log(lb)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha, vr = 1.1239 + 1.1328 / (b - 3.4), 0.9277 - 3.6224 / (b - 2.0)
    ku, kv = split(k_rej)
    u = uniform(ku, (_PROPOSALS, *shape), lam.dtype) - 0.5
    v = open_uniform(kv, (_PROPOSALS, *shape), lam.dtype)
    us = fnp.maximum(0.5 - fnp.abs(u), 1e-7)
    k = fnp.floor((2.0 * a / us + b) * u + lb + 0.43)
    quick = (us >= 0.07) & (v <= vr)
    ok = (k >= 0) & ~((us < 0.013) & (v > us))
    logv = fnp.log(v) + fnp.log(inv_alpha) - fnp.log(a / (us * us) + b)
    slow = ok & (logv <= -lb + k * loglam - gammaln(fnp.maximum(k, 0.0) + 1.0))
    rej = first_accepted(quick | slow, k)
    out = fnp.where(small, inv, rej)
    return fnp.where(lam == 0, 0.0, fnp.where(lam > 0, out, -1.0)).astype(dt)


def binomial(key: Array, n, p, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Binomial(n, p) draws (floats of ``dtype``, as ``jax.random.binomial``).

    Example::

        >>> k = flfun.random.binomial(flfun.random.key(0), 10, 0.3, (10,))
    """
    key, shape, dt, a = sample_args("binomial", key, shape, dtype, "", n=n, p=p)
    n, p = fnp.broadcast_to(a["n"], shape), fnp.broadcast_to(a["p"], shape)
    flip = p > 0.5
    q = fnp.where(flip, 1.0 - p, p)                       # sample with q <= 1/2, flip back
    mean = n * q
    small = mean < _SMALL_MEAN
    k_inv, k_rej = split(key)
    qs = fnp.where(small & (q < 1), q, 0.5)
    ratio = qs / (1.0 - qs)
    inv = _invert(uniform(k_inv, shape, dt), n * fnp.log1p(-qs), lambda k: fnp.maximum(n - k, 0.0) / (k + 1.0) * ratio)
    inv = fnp.minimum(inv, n)
    nb, qb = fnp.where(small, 100.0, n), fnp.where(small, 0.25, q)   # BTRS (Hormann 1993)
    spq = fnp.sqrt(nb * qb * (1.0 - qb))
    b = 1.15 + 2.53 * spq
    aa = -0.0873 + 0.0248 * b + 0.01 * qb
    c, alpha, vr = nb * qb + 0.5, (2.83 + 5.1 / b) * spq, 0.92 - 4.2 / b
    m = fnp.floor((nb + 1.0) * qb)
    ku, kv = split(k_rej)
    u = uniform(ku, (_PROPOSALS, *shape), dt) - 0.5
    v = open_uniform(kv, (_PROPOSALS, *shape), dt)
    us = fnp.maximum(0.5 - fnp.abs(u), 1e-7)
    k = fnp.floor((2.0 * aa / us + b) * u + c)
    ok = (k >= 0) & (k <= nb)
    quick = ok & (us >= 0.07) & (v <= vr)
    kc = fnp.clip(k, 0.0, nb)
    bound = (gammaln(m + 1.0) + gammaln(nb - m + 1.0) - gammaln(kc + 1.0) - gammaln(nb - kc + 1.0)
             + (kc - m) * fnp.log(qb / (1.0 - qb)))
    slow = ok & (fnp.log(v * alpha / (aa / (us * us) + b)) <= bound)
    out = fnp.where(small, inv, first_accepted(quick | slow, k))
    out = fnp.where(flip, n - out, out)
    return fnp.where((p < 0) | (p > 1) | (n < 0), math.nan, out).astype(dt)


def multinomial(key: Array, n, p, *, shape: Sequence[int] | None = None, dtype=np.float32) -> Array:
    """Counts of ``n`` draws over the outcomes on ``p``'s last axis (``p`` is normalised), shape
    ``(*shape, K)``, as conditional binomials.

    Example::

        >>> c = flfun.random.multinomial(flfun.random.key(0), 10, fnp.asarray([0.2, 0.3, 0.5]))
    """
    key, dt = check_key(key, "multinomial"), dtypes.canonicalize(dtype)
    p = fnp.asarray(p, dtype=dt)
    if p.ndim < 1:
        raise ValueError(f"multinomial: p must have at least one dimension, got shape {tuple(p.shape)}")
    batch = np.broadcast_shapes(p.shape[:-1], fnp.shape(n)) if shape is None else canonical_shape(shape,
                                                                                                   "multinomial")
    p = fnp.broadcast_to(p / fnp.sum(p, axis=-1, keepdims=True), (*batch, p.shape[-1]))
    remaining, rest = fnp.broadcast_to(fnp.asarray(n, dtype=dt), batch), fnp.ones(batch, dtype=dt)
    counts = []
    for i, k in enumerate(split(key, p.shape[-1] - 1) if p.shape[-1] > 1 else []):
        pi = p[..., i]
        x = binomial(k, remaining, fnp.clip(pi / fnp.maximum(rest, np.finfo(dt).tiny), 0.0, 1.0), batch, dt)
        counts.append(x)
        remaining, rest = remaining - x, rest - pi
    return fnp.stack(counts + [remaining], axis=-1)


def geometric(key: Array, p, shape: Sequence[int] | None = None, dtype=dtypes.DEFAULT_INT) -> Array:
    """Geometric(p) draws on ``{1, 2, ...}``: the number of trials to the first success.

    Example::

        >>> k = flfun.random.geometric(flfun.random.key(0), 0.3, (10,))
    """
    key, shape, dt, a = sample_args("geometric", key, shape, dtype, "", p=p)
    u = open_uniform(key, shape, a["p"].dtype)
    return (fnp.floor(fnp.log(u) / fnp.log1p(-a["p"])) + 1.0).astype(dt)


def rademacher(key: Array, shape: Sequence[int] = (), dtype=dtypes.DEFAULT_INT) -> Array:
    """Random signs ``-1`` / ``+1`` with equal probability.

    Example::

        >>> s = flfun.random.rademacher(flfun.random.key(0), (4,))
    """
    key, shape, dt, _ = sample_args("rademacher", key, shape, dtype, "")
    return fnp.where(bernoulli(key, 0.5, shape), 1, -1).astype(dt)


__all__ = ["binomial", "geometric", "multinomial", "poisson", "rademacher"]
