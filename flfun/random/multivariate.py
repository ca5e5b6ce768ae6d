"""Vector-valued and norm-based samplers of ``flfun.random``: multivariate_normal, orthogonal, ball, and the
generalized-normal and Maxwell families."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flfun import dtypes
from flfun import numpy as fnp
from flfun.array import Array
from flfun.random.basic import bernoulli, normal
from flfun.random.continuous import exponential, gamma
from flfun.random.keys import canonical_shape, check_key, sample_args, split

_METHODS = ("cholesky", "eigh", "svd")


def generalized_normal(key: Array, p, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Draws with density proportional to ``exp(-|x|**p)`` (``p=2``: normal with variance 1/2).

    Example::

        >>> x = flfun.random.generalized_normal(flfun.random.key(0), 1.5, (10,))
    """
    key, shape, dt, q = sample_args("generalized_normal", key, shape, dtype, p=p)
    kg, ks = split(key)
    g = gamma(kg, 1.0 / q["p"], shape, dt)
    return fnp.where(bernoulli(ks, 0.5, shape), 1.0, -1.0).astype(dt) * g ** (1.0 / q["p"])


def maxwell(key: Array, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Maxwell draws: the length of a standard normal 3-vector.

    Example::

        >>> x = flfun.random.maxwell(flfun.random.key(0), (10,))
    """
    key, shape, dt, _ = sample_args("maxwell", key, shape, dtype)
    return fnp.sqrt(fnp.sum(normal(key, (*shape, 3), dt) ** 2, axis=-1))


def double_sided_maxwell(key: Array, loc, scale, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """``loc + scale * S * M`` for a Maxwell draw ``M`` and a random sign ``S``.

    Example::

        >>> x = flfun.random.double_sided_maxwell(flfun.random.key(0), 0.0, 1.0, (10,))
    """
    key, shape, dt, q = sample_args("double_sided_maxwell", key, shape, dtype, loc=loc, scale=scale)
    km, ks = split(key)
    sign = fnp.where(bernoulli(ks, 0.5, shape), 1.0, -1.0).astype(dt)
    return q["loc"] + q["scale"] * sign * maxwell(km, shape, dt)


def ball(key: Array, d: int, p: float = 2, shape: Sequence[int] = (), dtype=np.float32) -> Array:
    """Uniform draws from the unit ``p``-norm ball in ``d`` dimensions: shape ``(*shape, d)``.

    Example::

        >>> x = flfun.random.ball(flfun.random.key(0), 3, shape=(10,))
    """
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"ball: d must be a positive int, got {d!r}")
    key, shape, dt, _ = sample_args("ball", key, shape, dtype)
    kg, ke = split(key)
    g = generalized_normal(kg, p, (*shape, d), dt)
    e = exponential(ke, shape, dt)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1.0 / p))[..., None]


def orthogonal(key: Array, n: int, shape: Sequence[int] = (), dtype=np.float32, m: int | None = None) -> Array:
    """Haar-random ``(n, m)`` matrices with orthonormal columns (``n >= m``) or rows: shape ``(*shape, n, m)``.

    Example::

        >>> q = flfun.random.orthogonal(flfun.random.key(0), 3)
    """
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"orthogonal: {name} must be a positive int, got {v!r}")
    key, shape, dt, _ = sample_args("orthogonal", key, shape, dtype)
    z = normal(key, (*shape, max(n, m), min(n, m)), dt)
    q, r = fnp.linalg.qr(z)
    q = q * fnp.sign(fnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return fnp.swapaxes(q, -1, -2) if n < m else q


def multivariate_normal(key: Array, mean, cov, shape: Sequence[int] | None = None, dtype=None,
                        method: str = "cholesky") -> Array:
    """Draws from N(mean, cov) with ``cov`` factored by ``method`` ('cholesky', 'eigh' or 'svd'); ``shape``
    defaults to the broadcast batch shape of ``mean`` (..., n) and ``cov`` (..., n, n).

    Example::

        >>> x = flfun.random.multivariate_normal(flfun.random.key(0), fnp.zeros(2), fnp.eye(2), (5,))
    """
    if method not in _METHODS:
        raise ValueError(f"multivariate_normal: method must be one of {_METHODS}, got {method!r}")
    key = check_key(key, "multivariate_normal")
    dt = dtypes.canonicalize(np.float32 if dtype is None else dtype)
    mean, cov = fnp.asarray(mean, dtype=dt), fnp.asarray(cov, dtype=dt)
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != (mean.shape[-1],) * 2:
        raise ValueError(f"multivariate_normal: mean (..., n) and cov (..., n, n) must agree, got "
                         f"{tuple(mean.shape)} and {tuple(cov.shape)}")
    batch = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    shape = batch if shape is None else canonical_shape(shape, "multivariate_normal")
    if np.broadcast_shapes(shape, batch) != tuple(shape):
        raise ValueError(f"multivariate_normal: shape {shape} must end with the batch shape {batch}")
    if method == "cholesky":
        factor = fnp.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(fnp.maximum(w, 0.0))[..., None, :]
    else:
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s)[..., None, :]
    z = normal(key, (*shape, mean.shape[-1]), dt)
    return mean + fnp.einsum("...ij,...j->...i", factor, z)


__all__ = ["ball", "double_sided_maxwell", "generalized_normal", "maxwell", "multivariate_normal", "orthogonal"]
