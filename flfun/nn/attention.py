"""``dot_product_attention`` (``flfun.nn``), as ``jax.nn.dot_product_attention``: scaled dot-product attention
with bias, boolean mask, causal and local-window masks, sequence lengths and grouped key/value heads."""
from __future__ import annotations

import functools
import math

import numpy as np

from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn.functional import softmax
from flfun.numpy.promotion import to_float


def _as_4d(x, name: str):
    x = to_float(fnp.asarray(x))
    if x.ndim not in (3, 4):
        raise ValueError(f"dot_product_attention: {name} must have shape (B, T, N, H) or (T, N, H), got "
                         f"{tuple(x.shape)}")
    return x if x.ndim == 4 else x[None]


def _check(q, k, v):
    if k.shape != v.shape:
        raise ValueError(f"dot_product_attention: key {tuple(k.shape)} and value {tuple(v.shape)} must have one shape")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or q.shape[2] % k.shape[2]:
        raise ValueError(f"dot_product_attention: query {tuple(q.shape)} and key {tuple(k.shape)} must agree on batch "
                         f"and head size, and key's heads must divide query's")


def _mask(b, t, s, mask, is_causal, local_window_size, q_lens, kv_lens):
    """The combined boolean keep-mask, broadcastable to ``(B, N, T, S)`` (None when nothing is masked)."""
    keep = [] if mask is None else [fnp.asarray(mask, dtype=bool)]
    qi, ki = fnp.arange(t)[:, None], fnp.arange(s)[None, :]
    if is_causal:
        keep.append(ki <= qi)
    if local_window_size is not None:
        lo, hi = (local_window_size, local_window_size) if isinstance(local_window_size, int) else local_window_size
        keep.append((ki >= qi - lo) & (ki <= qi + hi))
    if q_lens is not None:
        keep.append(fnp.arange(t)[None, None, :, None] < fnp.reshape(fnp.asarray(q_lens), (b, 1, 1, 1)))
    if kv_lens is not None:
        keep.append(fnp.arange(s)[None, None, None, :] < fnp.reshape(fnp.asarray(kv_lens), (b, 1, 1, 1)))
    return functools.reduce(fnp.logical_and, keep) if keep else None


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale: float | None = None,
                          is_causal: bool = False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None) -> Array:
    """``softmax(q k^T * scale + bias, masked) v`` per head: ``query`` ``(B, T, N, H)``, ``key``/``value``
    ``(B, S, K, H)`` with ``K`` dividing ``N`` (grouped-query attention); the batch axis may be left out.

    ``mask`` is a boolean keep-mask and ``bias`` an additive one, both broadcastable to ``(B, N, T, S)``;
    ``is_causal`` keeps key ``j <= i`` for query ``i``; rows with nothing kept give zeros. Returns ``(B, T, N, H)``.

    Example::

        >>> q = fnp.ones((2, 4, 8))                       # (T, N, H)
        >>> dot_product_attention(q, q, q, is_causal=True).shape
        (2, 4, 8)
    """
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation must be None or 'xla', got {implementation!r}")
    squeeze = fnp.asarray(query).ndim == 3
    q, k, v = _as_4d(query, "query"), _as_4d(key, "key"), _as_4d(value, "value")
    _check(q, k, v)
    b, t, n, h = q.shape
    s, groups = k.shape[1], n // k.shape[2]
    if groups > 1:
        k, v = fnp.repeat(k, groups, axis=2), fnp.repeat(v, groups, axis=2)
    scale = 1.0 / math.sqrt(h) if scale is None else scale
    logits = fnp.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + fnp.asarray(bias)
    keep = _mask(b, t, s, mask, is_causal, local_window_size, query_seq_lengths, key_value_seq_lengths)
    if keep is not None:
        logits = fnp.where(keep, logits, np.finfo(logits.dtype).min)
    probs = softmax(logits, axis=-1)
    if keep is not None:
        probs = fnp.where(keep, probs, 0.0)
    out = fnp.einsum("bnts,bsnh->btnh", probs, v).astype(q.dtype)
    return out[0] if squeeze else out


__all__ = ["dot_product_attention"]
