"""``flfun.scipy.stats.laplace``: the Laplace (double exponential) distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy.stats._common import standard


def logpdf(x, loc=0.0, scale=1.0):
    """``-|z| - log(2 scale)``: ``logpdf(0.0) ~ -0.6931``."""
    z, log_scale = standard(x, loc, scale)
    return -fnp.abs(z) - math.log(2.0) - log_scale


def pdf(x, loc=0.0, scale=1.0):
    """The Laplace density: ``pdf(0.0) == 0.5``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """``exp(z) / 2`` below ``loc``, ``1 - exp(-z) / 2`` above: ``cdf(0.0) == 0.5``."""
    z, _ = standard(x, loc, scale)
    return fnp.where(z < 0, 0.5 * fnp.exp(fnp.minimum(z, 0.0)), 1.0 - 0.5 * fnp.exp(-fnp.maximum(z, 0.0)))
