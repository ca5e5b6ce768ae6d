"""``flfun.scipy.stats.bernoulli``: the Bernoulli distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats


def logpmf(k, p, loc=0.0):
    """``log p`` at 1, ``log(1 - p)`` at 0, ``-inf`` elsewhere: ``logpmf(1, 0.5) ~ -0.6931``."""
    k, p, loc = floats(k, p, loc)
    k = k - loc
    out = special.xlogy(k, p) + special.xlog1py(1.0 - k, -p)
    return fnp.where((k == 0) | (k == 1), out, -math.inf)


def pmf(k, p, loc=0.0):
    """The Bernoulli pmf: ``pmf(0, 0.3) == 0.7``."""
    return fnp.exp(logpmf(k, p, loc))


def cdf(k, p, loc=0.0):
    """0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1: ``cdf(0, 0.3) == 0.7``."""
    k, p, loc = floats(k, p, loc)
    k = k - loc
    return fnp.where(k < 0, 0.0, fnp.where(k < 1, 1.0 - p, 1.0))


def ppf(q, p):
    """The smallest ``k`` with ``cdf(k) >= q``: ``ppf(0.8, 0.3) == 1.0``."""
    q, p = floats(q, p)
    bad = (q < 0) | (q > 1) | (p < 0) | (p > 1)
    return fnp.where(bad, math.nan, fnp.where(q <= 1.0 - p, 0.0, 1.0))
