"""``flfun.scipy.stats.beta``: the beta distribution on ``[0, 1]``."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats, standard


def logpdf(x, a, b, loc=0.0, scale=1.0):
    """``(a-1) log z + (b-1) log(1-z) - betaln(a, b) - log(scale)`` on ``[0, 1]``: ``logpdf(0.5, 1.0, 1.0) == 0``."""
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    z, log_scale = standard(x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    zs = fnp.where(inside, z, 0.5)
    out = special.xlogy(a - 1.0, zs) + special.xlog1py(b - 1.0, -zs) - special.betaln(a, b) - log_scale
    return fnp.where(inside, out, -math.inf)


def pdf(x, a, b, loc=0.0, scale=1.0):
    """The beta density: ``pdf(0.5, 2.0, 2.0) == 1.5``."""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0.0, scale=1.0):
    """``I_z(a, b)`` (0 below the support, 1 above): ``cdf(0.5, 2.0, 2.0) == 0.5``."""
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    return special.betainc(a, b, fnp.clip(standard(x, loc, scale)[0], 0.0, 1.0))


def logcdf(x, a, b, loc=0.0, scale=1.0):
    """``log cdf``: ``logcdf(1.0, 2.0, 2.0) == 0``."""
    return fnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0.0, scale=1.0):
    """``1 - cdf`` as ``I_{1-z}(b, a)`` (accurate in the upper tail): ``sf(0.5, 2.0, 2.0) == 0.5``."""
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - fnp.clip(standard(x, loc, scale)[0], 0.0, 1.0))


def logsf(x, a, b, loc=0.0, scale=1.0):
    """``log sf``: ``logsf(0.0, 2.0, 2.0) == 0``."""
    return fnp.log(sf(x, a, b, loc, scale))
