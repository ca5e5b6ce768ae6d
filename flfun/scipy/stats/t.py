"""``flfun.scipy.stats.t``: Student's t distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats, standard


def logpdf(x, df, loc=0.0, scale=1.0):
    """The log density of Student's t with ``df`` degrees of freedom: ``logpdf(0.0, 1.0) ~ -1.1447``."""
    x, df, loc, scale = floats(x, df, loc, scale)
    z, log_scale = standard(x, loc, scale)
    norm = special.gammaln((df + 1) / 2) - special.gammaln(df / 2) - 0.5 * fnp.log(df * math.pi)
    return norm - (df + 1) / 2 * fnp.log1p(z * z / df) - log_scale


def pdf(x, df, loc=0.0, scale=1.0):
    """Student's t density: ``pdf(0.0, 1.0) ~ 0.3183``."""
    return fnp.exp(logpdf(x, df, loc, scale))
