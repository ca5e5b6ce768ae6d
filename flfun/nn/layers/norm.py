"""Normalisation layers over the last dim: ``LayerNorm``, ``RMSNorm``."""
from __future__ import annotations

import numpy as np

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn.layers.dense import check_last_dim
from flfun.nn.module import Module, static_field

__all__ = ["LayerNorm", "RMSNorm"]


def _widened(x):
    """``x`` in float32 if it is bfloat16/float16: norms are computed there (in float16 the derivative of rsqrt at
    a variance below ~6e-4 exceeds its range), as mixed-precision recipes do."""
    return x.astype(dtypes.float32) if x.dtype in dtypes.LOW_PRECISION else x


class LayerNorm(Module):
    """Normalise the last dim to zero mean and unit (biased) variance, then scale and shift.

    Example::

        >>> LayerNorm(128)(fnp.ones((16, 128, 128))).shape
        (16, 128, 128)
    """
    weight: Array | None
    bias: Array | None
    eps: float = static_field()

    def __init__(self, dim: int, eps: float = 1e-5, elementwise_affine: bool = True, dtype=np.float32):
        self.weight = fnp.ones((dim,), dtype=dtype) if elementwise_affine else None
        self.bias = fnp.zeros((dim,), dtype=dtype) if elementwise_affine else None
        self.eps = float(eps)

    def __call__(self, x) -> Array:
        if self.weight is not None:
            check_last_dim(x, self.weight.shape[0], "LayerNorm")
        x, dt = _widened(fnp.asarray(x)), fnp.asarray(x).dtype
        xc = x - fnp.mean(x, axis=-1, keepdims=True)
        y = xc * lax.rsqrt(fnp.mean(xc * xc, axis=-1, keepdims=True) + self.eps)
        return (y if self.weight is None else y * self.weight + self.bias).astype(dt)


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dim.

    Example::

        >>> RMSNorm(64)(fnp.ones((2, 64))).shape
        (2, 64)
    """
    weight: Array
    eps: float = static_field()

    def __init__(self, dim: int, eps: float = 1e-6, dtype=np.float32):
        self.weight = fnp.ones((dim,), dtype=dtype)
        self.eps = float(eps)

    def __call__(self, x) -> Array:
        check_last_dim(x, self.weight.shape[0], "RMSNorm")
        x, dt = _widened(fnp.asarray(x)), fnp.asarray(x).dtype
        return (x * lax.rsqrt(fnp.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.weight).astype(dt)
