"""``flfun.scipy.stats``: log densities, CDFs and quantiles as in ``jax.scipy.stats``, one module per
distribution."""
from flfun.scipy.stats import (bernoulli, beta, dirichlet, expon, gamma, laplace, logistic,  # noqa: F401
                               multivariate_normal, norm, poisson, t, uniform)
