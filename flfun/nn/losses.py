"""Losses: softmax cross-entropy with integer labels, and mean squared error."""
from __future__ import annotations

from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn import functional as F

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(x, reduction: str, fn: str):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return fnp.mean(x) if reduction == "mean" else fnp.sum(x) if reduction == "sum" else x


def softmax_cross_entropy(logits, labels, *, reduction: str = "mean") -> Array:
    """``logsumexp(z) - z[label]`` per example, averaged over all examples by default.

    ``logits`` has shape ``(..., K)`` and ``labels`` integer class ids of shape ``(...)``.

    Example::

        >>> softmax_cross_entropy(fnp.zeros((4, 10)), fnp.asarray([1, 2, 3, 4])).item()   # log(10)
        2.3025851249694824
    """
    logits, labels = fnp.asarray(logits), fnp.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise ValueError(f"softmax_cross_entropy: labels must be integer class ids, got {labels.dtype}")
    if tuple(logits.shape[:-1]) != tuple(labels.shape):
        raise ValueError(f"softmax_cross_entropy: logits {tuple(logits.shape)} need labels of shape "
                         f"{tuple(logits.shape[:-1])}, got {tuple(labels.shape)}")
    logp = F.log_softmax(logits, axis=-1)
    picked = fnp.sum(logp * F.one_hot(labels, logits.shape[-1], dtype=logp.dtype), axis=-1)
    return _reduce(fnp.negative(picked), reduction, "softmax_cross_entropy")


def mse(predictions, targets, *, reduction: str = "mean") -> Array:
    """Mean squared error ``mean((predictions - targets) ** 2)``.

    Example::

        >>> mse(fnp.asarray([1.0, 2.0]), fnp.asarray([1.0, 4.0])).item()
        2.0
    """
    d = fnp.asarray(predictions) - targets
    return _reduce(d * d, reduction, "mse")


__all__ = ["mse", "softmax_cross_entropy"]
