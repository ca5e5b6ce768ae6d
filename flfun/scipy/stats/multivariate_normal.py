"""``flfun.scipy.stats.multivariate_normal``: the multivariate normal distribution."""
from __future__ import annotations

import math

from flfun import numpy as fnp
from flfun.scipy.linalg import solve_triangular
from flfun.scipy.stats._common import floats


def logpdf(x, mean, cov, allow_singular=None):
    """``log N(x; mean, cov)`` for ``x`` and ``mean`` of shape ``(..., n)``, ``cov`` ``(..., n, n)`` (or a
    scalar variance for ``n == 1``), via a Cholesky factor.

    Example::

        >>> round(float(logpdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(2))), 4)   # -log(2 pi)
        -1.8379
    """
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True is not supported")
    x, mean, cov = floats(x, mean, cov)
    n = x.shape[-1] if x.ndim else 1
    if cov.ndim < 2:
        cov = fnp.reshape(cov, cov.shape + (1, 1)) * fnp.eye(n, dtype=cov.dtype) if cov.ndim == 0 else \
            fnp.reshape(cov, (*cov.shape[:-1], n, 1)) * fnp.eye(n, dtype=cov.dtype)
    if cov.shape[-1] != n or cov.shape[-2] != n:
        raise ValueError(f"multivariate_normal.logpdf: x of shape {tuple(x.shape)} and cov of shape "
                         f"{tuple(cov.shape)} must agree on n")
    chol = fnp.linalg.cholesky(cov)
    d = fnp.broadcast_to(x - mean, fnp.broadcast_shapes(x.shape, mean.shape, cov.shape[:-1]))
    chol = fnp.broadcast_to(chol, d.shape[:-1] + (n, n))
    y = solve_triangular(chol, d[..., None], lower=True)[..., 0]
    log_det = fnp.sum(fnp.log(fnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * fnp.sum(y * y, axis=-1) - log_det - 0.5 * n * math.log(2 * math.pi)


def pdf(x, mean, cov):
    """The multivariate normal density: ``pdf(zeros(1), zeros(1), eye(1)) ~ 0.3989``."""
    return fnp.exp(logpdf(x, mean, cov))
