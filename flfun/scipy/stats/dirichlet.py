"""``flfun.scipy.stats.dirichlet``: the Dirichlet distribution over the simplex (last axis)."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy import special
from flfun.scipy.stats._common import floats


def logpdf(x, alpha):
    """``sum((alpha - 1) log x) - (sum gammaln(alpha) - gammaln(sum alpha))`` for ``x`` on the simplex
    (``x`` of shape ``(..., K)`` or ``(K, ...)`` as scipy takes it, ``alpha`` of shape ``(K,)``).

    Example::

        >>> round(float(logpdf(fnp.asarray([0.5, 0.5]), fnp.asarray([1.0, 1.0]))), 6)   # log Gamma(2)
        0.0
    """
    x, alpha = floats(x, alpha)
    if alpha.ndim != 1 or x.shape[0] != alpha.shape[0]:
        raise ValueError(f"dirichlet.logpdf: alpha must have shape (K,) and x shape (K, ...), got "
                         f"{tuple(alpha.shape)} and {tuple(x.shape)}")
    a = fnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    norm = fnp.sum(special.gammaln(alpha)) - special.gammaln(fnp.sum(alpha))
    out = fnp.sum(special.xlogy(a - 1.0, x), axis=0) - norm
    on_simplex = fnp.all(x >= 0, axis=0) & (fnp.abs(fnp.sum(x, axis=0) - 1.0) < 1e-6 * x.shape[0] ** 0.5 * 10)
    return fnp.where(on_simplex, out, -math.inf)


def pdf(x, alpha):
    """The Dirichlet density: ``pdf([0.5, 0.5], [1.0, 1.0]) == 1.0``."""
    return fnp.exp(logpdf(x, alpha))
