"""``flfun.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy.stats._common import floats, standard


def logpdf(x, loc=0.0, scale=1.0):
    """``-log(scale)`` inside the support, ``-inf`` outside: ``logpdf(0.5) == 0.0``."""
    z, log_scale = standard(x, loc, scale)
    return fnp.where((z < 0) | (z > 1), -math.inf, -log_scale)


def pdf(x, loc=0.0, scale=1.0):
    """The uniform density: ``pdf(2.0) == 0.0``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """``clip(z, 0, 1)``: ``cdf(0.25) == 0.25``."""
    return fnp.clip(standard(x, loc, scale)[0], 0.0, 1.0)


def ppf(q, loc=0.0, scale=1.0):
    """``loc + q * scale`` on ``[0, 1]``, NaN outside: ``ppf(0.25) == 0.25``."""
    q, loc, scale = floats(q, loc, scale)
    return fnp.where((q < 0) | (q > 1), math.nan, loc + q * scale)
