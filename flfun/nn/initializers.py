"""Parameter initialisers (``flfun.nn.initializers``), as in ``jax.nn.initializers``.

Each factory returns ``init(key, shape, dtype=float32) -> Array``. Fans are computed from ``in_axis`` and
``out_axis`` (defaults suit a dense weight ``(in, out)``; a conv weight ``OIHW`` uses ``in_axis=1, out_axis=0``),
with the remaining axes as the receptive field.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from flfun import numpy as fnp
from flfun import random
from flfun.util import prod

Initializer = Callable[..., "fnp.Array"]
"""An initializer: ``init(key, shape, dtype=float32) -> Array``."""


def zeros(key, shape: Sequence[int], dtype=np.float32):
    """All zeros (the key is ignored): ``zeros(key, (3,))``."""
    return fnp.zeros(tuple(shape), dtype=dtype)


def ones(key, shape: Sequence[int], dtype=np.float32):
    """All ones (the key is ignored): ``ones(key, (3,))``."""
    return fnp.ones(tuple(shape), dtype=dtype)


def constant(value: float) -> Initializer:
    """``constant(0.1)(key, shape)`` fills with ``value``."""
    return lambda key, shape, dtype=np.float32: fnp.full(tuple(shape), value, dtype=dtype)


def normal(stddev: float = 1e-2) -> Initializer:
    """``normal(0.02)(key, shape)``: N(0, stddev^2)."""
    return lambda key, shape, dtype=np.float32: random.normal(key, shape, dtype) * stddev


def uniform(scale: float = 1e-2) -> Initializer:
    """``uniform(0.1)(key, shape)``: U[0, scale), as ``jax.nn.initializers.uniform``."""
    return lambda key, shape, dtype=np.float32: random.uniform(key, shape, dtype, 0.0, scale)


def truncated_normal(stddev: float = 1e-2, lower: float = -2.0, upper: float = 2.0) -> Initializer:
    """``truncated_normal(0.02)(key, shape)``: N(0, stddev^2) cut at ``[lower, upper]`` standard deviations."""
    return lambda key, shape, dtype=np.float32: random.truncated_normal(key, lower, upper, shape, dtype) * stddev


def compute_fans(shape: Sequence[int], in_axis: int = -2, out_axis: int = -1) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight: ``compute_fans((32, 16, 3, 3), 1, 0) == (144, 288)``."""
    shape = tuple(shape)
    if len(shape) < 2:
        n = shape[0] if shape else 1
        return n, n
    in_axis, out_axis = in_axis % len(shape), out_axis % len(shape)
    receptive = prod(d for i, d in enumerate(shape) if i not in (in_axis, out_axis))
    return shape[in_axis] * receptive, shape[out_axis] * receptive


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2,
                     out_axis: int = -1) -> Initializer:
    """Samples with variance ``scale / fan`` (``mode``: 'fan_in', 'fan_out', 'fan_avg'); ``distribution``:
    'normal', 'truncated_normal' or 'uniform'.

    Example::

        >>> w = variance_scaling(2.0, "fan_in", "normal")(key, (64, 32))   # He normal
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("normal", "truncated_normal", "uniform"):
        raise ValueError(f"variance_scaling: distribution must be 'normal', 'truncated_normal' or 'uniform', "
                         f"got {distribution!r}")

    def init(key, shape, dtype=np.float32):
        fan_in, fan_out = compute_fans(shape, in_axis, out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        var = scale / max(fan, 1)
        if distribution == "uniform":
            lim = math.sqrt(3 * var)
            return random.uniform(key, shape, dtype, -lim, lim)
        if distribution == "truncated_normal":   # the std of N(0,1) truncated to [-2, 2]
            return random.truncated_normal(key, -2.0, 2.0, shape, dtype) * (math.sqrt(var) / .87962566103423978)
        return random.normal(key, shape, dtype) * math.sqrt(var)

    return init


def glorot_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier uniform: variance ``2 / (fan_in + fan_out)``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis)


def glorot_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier (truncated) normal: variance ``2 / (fan_in + fan_out)``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis)


def lecun_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun (truncated) normal: variance ``1 / fan_in``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis)


def he_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """He/Kaiming (truncated) normal for ReLU nets: variance ``2 / fan_in``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis)


def he_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """He/Kaiming uniform: variance ``2 / fan_in``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis)


def torch_default(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """PyTorch's default for Linear/Conv weights: U[-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return variance_scaling(1.0 / 3.0, "fan_in", "uniform", in_axis, out_axis)


def lecun_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun uniform: variance ``1 / fan_in``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis)


def orthogonal(scale: float = 1.0, column_axis: int = -1) -> Initializer:
    """Scaled Haar-random orthogonal weights: the matrix ``(rest, shape[column_axis])`` has orthonormal columns
    (or rows, whichever are fewer).

    Example::

        >>> w = orthogonal()(key, (4, 4))      # w.T @ w == I
    """
    def init(key, shape, dtype=np.float32):
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: shape must have at least 2 dimensions, got {shape}")
        axis = column_axis % len(shape)
        n_cols = shape[axis]
        q = random.orthogonal(key, prod(shape) // n_cols, (), dtype, m=n_cols) * scale
        rest = tuple(d for i, d in enumerate(shape) if i != axis)
        return fnp.moveaxis(fnp.reshape(q, (*rest, n_cols)), -1, axis)

    return init


def delta_orthogonal(scale: float = 1.0, column_axis: int = -1) -> Initializer:
    """Orthogonal delta kernels for convolutions (Xiao et al., 2018): a ``(*window, in, out)`` kernel that is zero
    except an orthogonal ``(in, out)`` matrix at the window's centre.

    Example::

        >>> w = delta_orthogonal()(key, (3, 3, 4, 8))
    """
    def init(key, shape, dtype=np.float32):
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5) or shape[-2] > shape[-1] or column_axis % len(shape) != len(shape) - 1:
            raise ValueError(f"delta_orthogonal: shape must be (*window, in, out) with 1-3 window axes and "
                             f"in <= out (columns last), got {shape}")
        centre = tuple(d // 2 for d in shape[:-2])
        onehot = fnp.zeros((*shape[:-2], 1, 1), dtype=dtype).at[centre].set(1)
        return onehot * orthogonal(scale, -1)(key, shape[-2:], dtype)

    return init


xavier_uniform, xavier_normal, kaiming_normal, kaiming_uniform = glorot_uniform, glorot_normal, he_normal, he_uniform

__all__ = ["compute_fans", "constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
           "delta_orthogonal", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
           "orthogonal", "torch_default",
           "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"]
