"""Dense layers: ``Linear``, ``Embedding``, ``Dropout``, and the helpers the other layer files share
(``split_key``, ``bias_init``, ``check_last_dim``)."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from flfun import lax, random
from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn import initializers as init
from flfun.nn.module import Module, static_field

__all__ = ["Dropout", "Embedding", "Linear", "split_key"]


def split_key(key, num: int = 2) -> list:
    """``num`` new keys as a list: ``k1, k2 = split_key(key)``."""
    keys = random.split(key, num)
    return [lax.reshape(lax.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in range(num)]


def bias_init(key, fan_in: int, shape, dtype):
    """torch's default bias: uniform in ``±1/sqrt(fan_in)``."""
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return random.uniform(key, shape, dtype, -bound, bound)


def check_last_dim(x, want: int, layer: str) -> None:
    """ValueError naming ``layer`` unless ``x``'s last dim is ``want``."""
    if x.ndim < 1 or x.shape[-1] != want:
        raise ValueError(f"{layer}: expected input with last dim {want}, got shape {tuple(x.shape)}")


# ---------------------------------------------------------------------------------------------------------- dense
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
        self.bias = bias_init(bkey, in_features, (out_features,), dtype) if use_bias else None

    def __call__(self, x) -> Array:
        check_last_dim(x, self.weight.shape[0], "Linear")
        y = lax.dot_general(x, self.weight, (((x.ndim - 1,), (0,)), ((), ())))
        return y if self.bias is None else y + self.bias


# ------------------------------------------------------------------------------------------------------ embedding
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
        ids = fnp.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise ValueError(f"Embedding: ids must be integers, got {ids.dtype}")
        return lax.gather(self.weight, lax.reshape(ids, (*ids.shape, 1)), axes=(0,), mode="clip")


# -------------------------------------------------------------------------------------------------------- dropout
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
