"""``flfun.scipy.stats.gamma``: the gamma distribution with shape ``a``."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats, standard


def logpdf(x, a, loc=0.0, scale=1.0):
    """``(a - 1) log z - z - gammaln(a) - log(scale)`` for ``z >= 0``: ``logpdf(1.0, 1.0) == -1.0``."""
    x, a, loc, scale = floats(x, a, loc, scale)
    z, log_scale = standard(x, loc, scale)
    out = special.xlogy(a - 1.0, fnp.maximum(z, 0.0)) - z - special.gammaln(a) - log_scale
    return fnp.where(z < 0, -math.inf, out)


def pdf(x, a, loc=0.0, scale=1.0):
    """The gamma density: ``pdf(1.0, 1.0) ~ 0.3679``."""
    return fnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """``P(a, z)``, the regularised lower incomplete gamma: ``cdf(1.0, 1.0) ~ 0.6321``."""
    x, a, loc, scale = floats(x, a, loc, scale)
    return special.gammainc(a, fnp.maximum(standard(x, loc, scale)[0], 0.0))


def logcdf(x, a, loc=0.0, scale=1.0):
    """``log cdf``: ``logcdf(1.0, 1.0) ~ -0.4587``."""
    return fnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0.0, scale=1.0):
    """``Q(a, z) = 1 - cdf``, accurate in the upper tail: ``sf(1.0, 1.0) ~ 0.3679``."""
    x, a, loc, scale = floats(x, a, loc, scale)
    return special.gammaincc(a, fnp.maximum(standard(x, loc, scale)[0], 0.0))


def logsf(x, a, loc=0.0, scale=1.0):
    """``log sf``: ``logsf(1.0, 1.0) ~ -1.0``."""
    return fnp.log(sf(x, a, loc, scale))
