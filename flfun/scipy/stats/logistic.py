"""``flfun.scipy.stats.logistic``: the logistic distribution."""
from __future__ import annotations

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats, standard


def _softplus(z):
    pos = z > 0
    return fnp.where(pos, z, 0.0) + fnp.log1p(fnp.exp(fnp.where(pos, -z, z)))


def logpdf(x, loc=0.0, scale=1.0):
    """``-z - 2 softplus(-z) - log(scale)``: ``logpdf(0.0) ~ -1.3863``."""
    z, log_scale = standard(x, loc, scale)
    return -z - 2.0 * _softplus(-z) - log_scale


def pdf(x, loc=0.0, scale=1.0):
    """The logistic density: ``pdf(0.0) == 0.25``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """``expit(z)``: ``cdf(0.0) == 0.5``."""
    return special.expit(standard(x, loc, scale)[0])


def logcdf(x, loc=0.0, scale=1.0):
    """``log expit(z)``, stable: ``logcdf(-100.0) == -100.0``."""
    return -_softplus(-standard(x, loc, scale)[0])


def sf(x, loc=0.0, scale=1.0):
    """``expit(-z)``: ``sf(0.0) == 0.5``."""
    return special.expit(-standard(x, loc, scale)[0])


def ppf(q, loc=0.0, scale=1.0):
    """``loc + scale * logit(q)``: ``ppf(0.5) == 0.0``."""
    q, loc, scale = floats(q, loc, scale)
    return loc + scale * special.logit(q)


def isf(q, loc=0.0, scale=1.0):
    """``ppf(1 - q)``: ``isf(0.5) == 0.0``."""
    q, loc, scale = floats(q, loc, scale)
    return loc - scale * special.logit(q)
