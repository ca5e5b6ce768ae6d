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
