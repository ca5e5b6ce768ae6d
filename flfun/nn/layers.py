"""Layers as pytrees: Linear, Conv1d/Conv2d, pooling, LayerNorm, RMSNorm, Embedding, Dropout, MultiHeadAttention,
MLP, Sequential.

Each layer is a ``Module`` (an immutable dataclass whose leaves are its arrays), built with an explicit PRNG
``key`` and applied by calling it. Layers accept any number of leading batch dims (convolutions: ``(N, C, ...)``
or one unbatched ``(C, ...)`` example); dense weights are ``(in, out)`` and conv weights ``(O, I, *k)``
(``(*k, I, O)`` for channels-last convolutions).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flfun import lax, random
from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn import functional as F
from flfun.nn import initializers as init
from flfun.nn.module import Module, static_field
from flfun.util import canonical_axis


def split_key(key, num: int = 2) -> list:
    """``num`` new keys as a list: ``k1, k2 = split_key(key)``."""
    keys = random.split(key, num)
    return [lax.reshape(lax.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in range(num)]


def _tuple(v, n: int, name: str, layer: str) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)):
        v = (int(v),) * n
    v = tuple(int(e) for e in v)
    if len(v) != n or any(e <= 0 for e in v):
        raise ValueError(f"{layer}: {name} must be a positive int or {n} positive ints, got {v!r}")
    return v


def _bias_init(key, fan_in: int, shape, dtype):
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return random.uniform(key, shape, dtype, -bound, bound)


def _last_dim(x, want: int, layer: str) -> None:
    if x.ndim < 1 or x.shape[-1] != want:
        raise ValueError(f"{layer}: expected input with last dim {want}, got shape {tuple(x.shape)}")


# ------------------------------------------------------------------------------------------------------- dense
class Linear(Module):
    """``y = x @ weight + bias`` with ``weight`` of shape ``(in_features, out_features)``.

    Initialised like ``torch.nn.Linear`` (uniform in ``±1/sqrt(in_features)``) unless ``weight_init`` is given.

    Example::

        >>> lin = Linear(3, 4, key=flfun.random.key(0))
        >>> lin(fnp.ones((2, 3))).shape
        (2, 4)
    """
    weight: Array
    bias: Array | None

    def __init__(self, in_features: int, out_features: int, *, key, use_bias: bool = True, dtype=np.float32,
                 weight_init: Callable | None = None):
        wkey, bkey = split_key(key)
        self.weight = (weight_init or init.torch_default())(wkey, (in_features, out_features), dtype)
        self.bias = _bias_init(bkey, in_features, (out_features,), dtype) if use_bias else None

    def __call__(self, x) -> Array:
        _last_dim(x, self.weight.shape[0], "Linear")
        y = lax.dot_general(x, self.weight, (((x.ndim - 1,), (0,)), ((), ())))
        return y if self.bias is None else y + self.bias


# -------------------------------------------------------------------------------------------------------- conv
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
        self.bias = _bias_init(bkey, ci * int(np.prod(k)), (out_channels,), dtype) if use_bias else None
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


# --------------------------------------------------------------------------------------------- normalisation
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
            _last_dim(x, self.weight.shape[0], "LayerNorm")
        xc = x - fnp.mean(x, axis=-1, keepdims=True)
        y = xc * lax.rsqrt(fnp.mean(xc * xc, axis=-1, keepdims=True) + self.eps)
        return y if self.weight is None else y * self.weight + self.bias


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
        _last_dim(x, self.weight.shape[0], "RMSNorm")
        return x * lax.rsqrt(fnp.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.weight


# ------------------------------------------------------------------------------------------------- embedding
class Embedding(Module):
    """A lookup table: integer ids ``(...)`` -> vectors ``(..., dim)``; weight ~ N(0, 1) like torch.

    Example::

        >>> Embedding(96, 128, key=key)(fnp.zeros((16, 128), dtype="int32")).shape
        (16, 128, 128)
    """
    weight: Array

    def __init__(self, num_embeddings: int, dim: int, *, key, dtype=np.float32, weight_init=None):
        self.weight = (weight_init or init.normal(1.0))(key, (num_embeddings, dim), dtype)

    def __call__(self, ids) -> Array:
        ids = fnp.asarray(ids) if not isinstance(ids, Array) else ids
        if ids.dtype.kind not in "iu":
            raise ValueError(f"Embedding: ids must be integers, got {ids.dtype}")
        return lax.gather(self.weight, lax.reshape(ids, (*ids.shape, 1)), axes=(0,), mode="clip")


# --------------------------------------------------------------------------------------------------- dropout
class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; needs an explicit ``key``
    unless ``inference=True``.

    Example::

        >>> y = Dropout(0.1)(x, key=flfun.random.key(0))
        >>> y_eval = Dropout(0.1)(x, inference=True)      # the identity
    """
    p: float = static_field(default=0.5)

    def __post_init__(self):
        if not 0.0 <= self.p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {self.p!r}")

    stochastic = True

    def __call__(self, x, *, key=None, inference: bool = False) -> Array:
        if inference or self.p == 0.0:
            return x
        if key is None:
            raise ValueError("Dropout: pass key=... (or inference=True to disable dropout)")
        keep = random.bernoulli(key, 1.0 - self.p, x.shape)
        return fnp.where(keep, x / (1.0 - self.p), fnp.zeros_like(x))


# ------------------------------------------------------------------------------------------------- attention
def causal_mask(t: int) -> Array:
    """Boolean ``(t, t)`` mask, True on and below the diagonal: position i may attend to j <= i."""
    return lax.ge(lax.iota(np.int32, (t, t), 0), lax.iota(np.int32, (t, t), 1))


def dot_product_attention(q, k, v, *, mask=None) -> Array:
    """``softmax(q k^T / sqrt(d) + mask) v`` over shapes ``(..., T, d)``; ``mask`` (bool, broadcastable to
    ``(..., Tq, Tk)``) marks the allowed positions.

    Example::

        >>> dot_product_attention(q, k, v, mask=causal_mask(q.shape[-2]))
    """
    nb = q.ndim - 2
    batch = tuple(range(nb))
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    s = lax.dot_general(q, k, (((nb + 1,), (nb + 1,)), (batch, batch)))
    if mask is not None:   # an additive 0/-inf bias: its transpose passes cotangents through untouched
        s = s + fnp.where(mask, fnp.zeros((), dtype=s.dtype), fnp.full((), -np.inf, dtype=s.dtype))
    a = F.softmax(s, axis=-1)
    return lax.dot_general(a, v, (((nb + 1,), (nb,)), (batch, batch)))


class MultiHeadAttention(Module):
    """Multi-head self-attention with a fused ``qkv`` projection ``(d, 3d)`` (q, k, v in that order, heads
    contiguous ``d/num_heads``-wide slices) and an output projection.

    Example::

        >>> mha = MultiHeadAttention(128, 4, key=key)
        >>> mha(fnp.ones((16, 128, 128)), causal=True).shape
        (16, 128, 128)
    """
    qkv: Linear
    out: Linear
    num_heads: int = static_field()

    def __init__(self, d_model: int, num_heads: int, *, key, use_bias: bool = True, dtype=np.float32):
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: num_heads={num_heads} must divide d_model={d_model}")
        k1, k2 = split_key(key)
        self.qkv = Linear(d_model, 3 * d_model, key=k1, use_bias=use_bias, dtype=dtype)
        self.out = Linear(d_model, d_model, key=k2, use_bias=use_bias, dtype=dtype)
        self.num_heads = int(num_heads)

    def __call__(self, x, *, causal: bool = False, mask=None) -> Array:
        d = self.out.weight.shape[0]
        _last_dim(x, d, "MultiHeadAttention")
        if x.ndim < 2:
            raise ValueError(f"MultiHeadAttention: expected input (..., T, {d}), got shape {tuple(x.shape)}")
        lead, t, h = tuple(x.shape[:-2]), x.shape[-2], self.num_heads
        qkv = self.qkv(x)
        nb = len(lead)
        perm = tuple(range(nb)) + (nb + 1, nb, nb + 2)           # (..., T, H, hd) -> (..., H, T, hd)

        def heads(i):
            part = lax.slice(qkv, (0,) * (nb + 1) + (i * d,), lead + (t, (i + 1) * d))
            return lax.transpose(lax.reshape(part, lead + (t, h, d // h)), perm)

        if causal:
            cm = causal_mask(t)
            mask = cm if mask is None else fnp.logical_and(mask, cm)
        o = dot_product_attention(heads(0), heads(1), heads(2), mask=mask)
        o = lax.reshape(lax.transpose(o, perm), lead + (t, d))
        return self.out(o)


# ------------------------------------------------------------------------------------------------ containers
class Lambda(Module):
    """A parameter-free function as a layer (for ``Sequential``): ``Lambda(flfun.nn.relu)``."""
    fn: Callable = static_field()

    def __call__(self, x, **kwargs) -> Array:
        return self.fn(x)


class Sequential(Module):
    """Apply layers in order; stochastic layers (Dropout) get their own key split from ``key``.

    Example::

        >>> net = Sequential(Linear(64, 128, key=k1), flfun.nn.relu, Dropout(0.1), Linear(128, 10, key=k2))
        >>> logits = net(x, key=dropout_key)
    """
    layers: tuple

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise ValueError(f"Sequential: layer {i} is not callable: {layer!r:.60}")
        self.layers = tuple(l if isinstance(l, Module) else Lambda(l) for l in layers)

    def __call__(self, x, *, key=None, inference: bool = False) -> Array:
        stochastic = [i for i, l in enumerate(self.layers) if getattr(l, "stochastic", False)]
        keys = dict(zip(stochastic, split_key(key, len(stochastic)))) if key is not None and stochastic else {}
        for i, layer in enumerate(self.layers):
            x = layer(x, key=keys.get(i), inference=inference) if i in stochastic else layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)


class MLP(Module):
    """A stack of Linear layers with ``activation`` between them: ``MLP([64, 256, 256, 10], key=key)``.

    Example::

        >>> MLP([64, 128, 10], key=key)(fnp.ones((32, 64))).shape
        (32, 10)
    """
    layers: tuple
    activation: Callable = static_field()
    final_activation: Callable | None = static_field()

    def __init__(self, sizes: Sequence[int], *, key, activation: Callable = F.relu,
                 final_activation: Callable | None = None, use_bias: bool = True, dtype=np.float32):
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or any(s <= 0 for s in sizes):
            raise ValueError(f"MLP: sizes must list at least two positive layer widths, got {sizes}")
        keys = split_key(key, len(sizes) - 1)
        self.layers = tuple(Linear(a, b, key=k, use_bias=use_bias, dtype=dtype)
                            for a, b, k in zip(sizes[:-1], sizes[1:], keys))
        self.activation, self.final_activation = activation, final_activation

    def __call__(self, x) -> Array:
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        x = self.layers[-1](x)
        return x if self.final_activation is None else self.final_activation(x)


__all__ = ["MLP", "AvgPool2d", "Conv1d", "Conv2d", "Dropout", "Embedding", "Flatten", "Lambda", "LayerNorm",
           "Linear", "MaxPool2d", "MultiHeadAttention", "RMSNorm", "Sequential", "avg_pool", "causal_mask",
           "dot_product_attention", "max_pool", "split_key"]
