"""``flfun.scipy.stats.poisson``: the Poisson distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats


def logpmf(k, mu, loc=0.0):
    """``k log mu - mu - log k!`` for integer ``k >= loc``: ``logpmf(0, 1.0) == -1.0``."""
    k, mu, loc = floats(k, mu, loc)
    k = k - loc
    ok = (k >= 0) & (k == fnp.floor(k))
    out = special.xlogy(k, mu) - mu - special.gammaln(fnp.where(ok, k, 0.0) + 1.0)
    return fnp.where(ok, out, -math.inf)


def pmf(k, mu, loc=0.0):
    """The Poisson pmf: ``pmf(0, 1.0) ~ 0.3679``."""
    return fnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0.0):
    """``Q(floor(k) + 1, mu)``: ``cdf(0, 1.0) ~ 0.3679``."""
    k, mu, loc = floats(k, mu, loc)
    k = fnp.floor(k - loc)
    return fnp.where(k < 0, 0.0, special.gammaincc(fnp.maximum(k, 0.0) + 1.0, mu))


def entropy(mu, loc=0.0):
    """``-sum_k p(k) log p(k)``: summed over ``k < 250`` for ``mu < 100``, else the asymptotic series
    ``log(2 pi e mu) / 2 - 1/(12 mu) - 1/(24 mu^2) - 19/(360 mu^3)``; 0 at ``mu == 0``, NaN below (``loc``
    does not move the entropy). ``entropy(1.0) ~ 1.3048``."""
    mu, loc = floats(mu, loc)
    mu = mu + fnp.zeros_like(loc)
    m = fnp.where((mu > 0) & (mu < 100), mu, 1.0)[..., None]
    k = fnp.arange(250.0, dtype=mu.dtype)
    logp = special.xlogy(k, m) - m - special.gammaln(k + 1.0)
    big = fnp.maximum(mu, 100.0)
    series = 0.5 * fnp.log(2 * math.pi * math.e * big) - 1 / (12 * big) - 1 / (24 * big ** 2) - 19 / (360 * big ** 3)
    out = fnp.where(mu < 100, -fnp.sum(fnp.exp(logp) * logp, axis=-1), series)
    return fnp.where(mu > 0, out, fnp.where(mu == 0, 0.0, math.nan))
