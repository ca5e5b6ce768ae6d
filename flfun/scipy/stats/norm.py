"""``flfun.scipy.stats.norm``: the normal distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats, standard


def logpdf(x, loc=0.0, scale=1.0):
    """``log N(x; loc, scale**2)``: ``logpdf(0.0) ~ -0.9189``."""
    z, log_scale = standard(x, loc, scale)
    return -0.5 * z * z - 0.5 * math.log(2 * math.pi) - log_scale


def pdf(x, loc=0.0, scale=1.0):
    """The normal density: ``pdf(0.0) ~ 0.3989``."""
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0.0, scale=1.0):
    """``log Phi((x - loc) / scale)``, accurate in the lower tail: ``logcdf(-40.0) ~ -804.6``."""
    return special.log_ndtr(standard(x, loc, scale)[0])


def cdf(x, loc=0.0, scale=1.0):
    """``Phi((x - loc) / scale)``: ``cdf(0.0) == 0.5``."""
    return special.ndtr(standard(x, loc, scale)[0])


def sf(x, loc=0.0, scale=1.0):
    """``1 - cdf``, accurate in the upper tail: ``sf(40.0) ~ 3.6e-350`` underflows to 0 only past float64."""
    return special.ndtr(-standard(x, loc, scale)[0])


def logsf(x, loc=0.0, scale=1.0):
    """``log(1 - cdf)``: ``logsf(40.0) ~ -804.6``."""
    return special.log_ndtr(-standard(x, loc, scale)[0])


def ppf(q, loc=0.0, scale=1.0):
    """The quantile function: ``ppf(0.975) ~ 1.96``."""
    q, loc, scale = floats(q, loc, scale)
    return loc + scale * special.ndtri(q)


def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``ppf(1 - q)``: ``isf(0.025) ~ 1.96``."""
    q, loc, scale = floats(q, loc, scale)
    return loc - scale * special.ndtri(q)
