"""Attention: ``causal_mask``, ``dot_product_attention`` and the ``MultiHeadAttention`` layer."""
from __future__ import annotations

import math

import numpy as np

from flfun import lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn import functional as F
from flfun.nn.layers.dense import Linear, split_key
from flfun.nn.module import Module, static_field

__all__ = ["MultiHeadAttention", "causal_mask", "dot_product_attention"]


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
        if x.ndim < 2 or x.shape[-1] != d:
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
