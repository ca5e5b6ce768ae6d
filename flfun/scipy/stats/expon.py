"""``flfun.scipy.stats.expon``: the exponential distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy.stats._common import floats, standard


def logpdf(x, loc=0.0, scale=1.0):
    """``-z - log(scale)`` for ``z = (x - loc) / scale >= 0``: ``logpdf(1.0) == -1.0``."""
    z, log_scale = standard(x, loc, scale)
    return fnp.where(z < 0, -math.inf, -z - log_scale)


def pdf(x, loc=0.0, scale=1.0):
    """The exponential density: ``pdf(0.0) == 1.0``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """``1 - exp(-z)``: ``cdf(0.0) == 0.0``."""
    z, _ = standard(x, loc, scale)
    return fnp.where(z < 0, 0.0, -fnp.expm1(-fnp.maximum(z, 0.0)))


def logcdf(x, loc=0.0, scale=1.0):
    """``log(1 - exp(-z))``: ``logcdf(1.0) ~ -0.4587``."""
    return fnp.log(cdf(x, loc, scale))


def sf(x, loc=0.0, scale=1.0):
    """``exp(-z)``: ``sf(1.0) ~ 0.3679``."""
    z, _ = standard(x, loc, scale)
    return fnp.where(z < 0, 1.0, fnp.exp(-fnp.maximum(z, 0.0)))


def logsf(x, loc=0.0, scale=1.0):
    """``-z``: ``logsf(2.0) == -2.0``."""
    z, _ = standard(x, loc, scale)
    return fnp.where(z < 0, 0.0, -z)


def ppf(q, loc=0.0, scale=1.0):
    """``loc - scale * log1p(-q)``: ``ppf(0.5) ~ 0.6931``."""
    q, loc, scale = floats(q, loc, scale)
    return loc - scale * fnp.log1p(-q)
