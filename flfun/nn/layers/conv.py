"""Convolution and pooling layers: ``Conv1d``, ``Conv2d``, ``avg_pool`` / ``max_pool``, ``AvgPool2d`` /
``MaxPool2d``, ``Flatten``. Inputs are ``(N, C, *spatial)`` or one unbatched ``(C, *spatial)`` example
(channels last with ``channels_last=True``); conv weights are ``(O, I, *k)`` (``(*k, I, O)`` channels-last)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flfun import lax
from flfun.array import Array
from flfun.nn import initializers as init
from flfun.nn.layers.dense import bias_init, split_key
from flfun.nn.module import Module, static_field
from flfun.util import canonical_axis

__all__ = ["AvgPool2d", "Conv1d", "Conv2d", "Flatten", "MaxPool2d", "avg_pool", "max_pool"]


def _tuple(v, n: int, name: str, layer: str) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)):
        v = (int(v),) * n
    v = tuple(int(e) for e in v)
    if len(v) != n or any(e <= 0 for e in v):
        raise ValueError(f"{layer}: {name} must be a positive int or {n} positive ints, got {v!r}")
    return v


# ----------------------------------------------------------------------------------------------------------- conv
def _padding(padding, n: int, layer: str):
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"{layer}: padding must be 'SAME', 'VALID', an int or (low, high) pairs, "
                             f"got {padding!r}")
        return padding.upper()
    if isinstance(padding, (int, np.integer)):
        return ((int(padding), int(padding)),) * n
    pads = tuple((int(p), int(p)) if isinstance(p, (int, np.integer)) else (int(p[0]), int(p[1]))
                 for p in padding)
    if len(pads) != n:
        raise ValueError(f"{layer}: padding needs {n} entries, got {padding!r}")
    return pads


class _Conv(Module):
    weight: Array
    bias: Array | None
    stride: tuple = static_field()
    padding: Any = static_field()
    dilation: tuple = static_field()
    groups: int = static_field()
    channels_last: bool = static_field()

    num_spatial = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding="VALID",
                 dilation=1, groups: int = 1, *, key, use_bias: bool = True, dtype=np.float32,
                 channels_last: bool = False):
        name, n = type(self).__name__, self.num_spatial
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}")
        k = _tuple(kernel_size, n, "kernel_size", name)
        wkey, bkey = split_key(key)
        ci = in_channels // groups
        shape = (*k, ci, out_channels) if channels_last else (out_channels, ci, *k)
        self.weight = init.torch_default(*((-2, -1) if channels_last else (1, 0)))(wkey, shape, dtype)
        self.bias = bias_init(bkey, ci * int(np.prod(k)), (out_channels,), dtype) if use_bias else None
        self.stride = _tuple(stride, n, "stride", name)
        self.padding = _padding(padding, n, name)
        self.dilation = _tuple(dilation, n, "dilation", name)
        self.groups, self.channels_last = int(groups), bool(channels_last)

    def __call__(self, x) -> Array:
        n, last = self.num_spatial, self.channels_last
        c = self.weight.shape[-2 if last else 1] * self.groups
        if x.ndim not in (n + 1, n + 2) or x.shape[-1 if last else -n - 1] != c:
            shape = f"N, {'spatial, ' * n}{c}" if last else f"N, {c}, {'spatial, ' * n}..."
            raise ValueError(f"{type(self).__name__}: expected input ({shape}) or one unbatched example, got "
                             f"shape {tuple(x.shape)}")
        unbatched = x.ndim == n + 1
        if unbatched:
            x = lax.reshape(x, (1, *x.shape))
        dn = ("N...C", "...IO", "N...C") if last else None
        y = lax.conv_general_dilated(x, self.weight, self.stride, self.padding, rhs_dilation=self.dilation,
                                     dimension_numbers=dn, feature_group_count=self.groups)
        if self.bias is not None:
            y = y + (self.bias if last else lax.reshape(self.bias, (self.bias.shape[0],) + (1,) * n))
        return lax.reshape(y, y.shape[1:]) if unbatched else y


class Conv1d(_Conv):
    """1-d convolution (cross-correlation) on ``(N, C, W)``; weight ``(O, C // groups, k)`` (with
    ``channels_last=True``: ``(N, W, C)`` and ``(k, C // groups, O)``).

    Example::

        >>> Conv1d(4, 8, 3, padding="SAME", key=key)(fnp.ones((2, 4, 16))).shape
        (2, 8, 16)
    """
    num_spatial = 1


class Conv2d(_Conv):
    """2-d convolution (cross-correlation, as ``torch.nn.Conv2d``) on ``(N, C, H, W)``; weight
    ``(O, C // groups, kH, kW)``. With ``channels_last=True`` the input and output are ``(N, H, W, C)`` and the
    weight ``(kH, kW, C // groups, O)`` (lax's NHWC/HWIO), which the CPU backend runs without layout copies.

    Example::

        >>> Conv2d(1, 32, 3, key=key)(fnp.ones((64, 1, 28, 28))).shape
        (64, 32, 26, 26)
        >>> Conv2d(1, 32, 3, key=key, channels_last=True)(fnp.ones((64, 28, 28, 1))).shape
        (64, 26, 26, 32)
    """
    num_spatial = 2


# -------------------------------------------------------------------------------------------------------- pooling
def _pool(x, window, reducer, name: str, channels_last: bool):
    window = _tuple(window, len(window), "window", name)
    n, c = len(window), int(bool(channels_last))
    if x.ndim < n + c:
        raise ValueError(f"{name}: input of shape {tuple(x.shape)} has fewer than {n + c} dims")
    k = x.ndim - n - c
    lead, spatial, tail = tuple(x.shape[:k]), tuple(x.shape[k:k + n]), tuple(x.shape[k + n:])
    out = tuple(s // w for s, w in zip(spatial, window))
    if any(o == 0 for o in out):
        raise ValueError(f"{name}: window {window} is larger than the input's spatial shape {spatial}")
    crop = tuple(o * w for o, w in zip(out, window))
    if crop != spatial:
        x = lax.slice(x, (0,) * x.ndim, lead + crop + tail)
    split = lead + tuple(d for o, w in zip(out, window) for d in (o, w)) + tail
    axes = tuple(k + 2 * i + 1 for i in range(n))
    return reducer(lax.reshape(x, split), axes)


def avg_pool(x, window: Sequence[int], channels_last: bool = False) -> Array:
    """Average pooling over the last ``len(window)`` dims (the ones before the last with ``channels_last``)
    with stride equal to the window (a remainder is dropped, like torch's floor mode).

    Example::

        >>> avg_pool(fnp.ones((64, 64, 24, 24)), (2, 2)).shape
        (64, 64, 12, 12)
        >>> avg_pool(fnp.ones((64, 24, 24, 64)), (2, 2), channels_last=True).shape
        (64, 12, 12, 64)
    """
    size = float(np.prod([int(w) for w in window]))
    return _pool(x, window, lambda v, axes: lax.reduce_sum(v, axes) / size, "avg_pool", channels_last)


def max_pool(x, window: Sequence[int], channels_last: bool = False) -> Array:
    """Max pooling over the last ``len(window)`` dims (the ones before the last with ``channels_last``) with
    stride equal to the window.

    Example::

        >>> max_pool(fnp.ones((1, 3, 8, 8)), (2, 2)).shape
        (1, 3, 4, 4)
    """
    return _pool(x, window, lax.reduce_max, "max_pool", channels_last)


class _Pool2d(Module):
    window: tuple = static_field()
    channels_last: bool = static_field()

    def __init__(self, window=2, channels_last: bool = False):
        self.window = _tuple(window, 2, "window", type(self).__name__)
        self.channels_last = bool(channels_last)

    def __call__(self, x) -> Array:
        return self.pool(x, self.window, self.channels_last)


class AvgPool2d(_Pool2d):
    """2-d average pooling, stride = window: ``AvgPool2d(2)(x)`` halves H and W (of NHWC data with
    ``channels_last=True``, as after ``Conv2d(..., channels_last=True)``)."""
    pool = staticmethod(avg_pool)


class MaxPool2d(_Pool2d):
    """2-d max pooling, stride = window: ``MaxPool2d(2)(x)`` halves H and W."""
    pool = staticmethod(max_pool)


class Flatten(Module):
    """Flatten all dims from ``start_dim`` on: ``Flatten()(fnp.ones((8, 4, 3, 3))).shape == (8, 36)``."""
    start_dim: int = static_field(default=1)

    def __call__(self, x) -> Array:
        s = canonical_axis(self.start_dim, max(x.ndim, 1), "Flatten")
        return lax.reshape(x, tuple(x.shape[:s]) + (int(np.prod(x.shape[s:])),))
