"""A multi-layer perceptron on the 8x8 digits (64 pixels -> 256 -> 256 -> 10 classes, ReLU)."""
from __future__ import annotations

import flfun.numpy as fnp
from flfun import nn
from flfun.lax import reshape

DEFAULTS = {"steps": 1500, "batch_size": 64, "lr": 2e-3, "weight_decay": 1e-4, "warmup": 50}


def init(key, hidden=(256, 256)) -> nn.MLP:
    """A fresh MLP: ``init(flfun.random.key(0))``."""
    return nn.MLP([64, *hidden, 10], key=key)


def logits(model: nn.MLP, x, *, key=None):
    """Class scores for images ``(B, 1, 8, 8)`` (or already flat ``(B, 64)``)."""
    return model(reshape(x, (x.shape[0], 64)))


def loss_fn(model: nn.MLP, x, y, key=None):
    """Mean softmax cross-entropy of the batch (in float32 whatever the compute dtype)."""
    return nn.softmax_cross_entropy(logits(model, x).astype(fnp.float32), y)


def accuracy(model, x, y) -> float:
    """Fraction of correctly classified examples."""
    pred = fnp.argmax(logits(model, fnp.asarray(x)), axis=-1)
    return float(fnp.mean((pred == fnp.asarray(y)).astype(fnp.float32)))
