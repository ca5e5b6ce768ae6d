"""A small convolutional net: conv 3x3 -> ReLU -> conv 3x3 -> ReLU -> 2x2 pool -> dense.

With ``channels=(32, 64)``, VALID padding, average pooling and 28x28 inputs this is exactly benchmark W5's
network; the digits model uses ``channels=(16, 32)``, SAME padding and max pooling on 8x8 images, trained with
random one-pixel shifts (see ``augment``). ``channels_last=True`` runs the same network in NHWC (faster on the
CPU); its dense weight's rows are then in ``(h, w, c)`` order (W5 permutes them to match).
"""
from __future__ import annotations

import numpy as np

import flfun.numpy as fnp
from flfun import nn
from flfun.lax import reshape, transpose

DEFAULTS = {"steps": 500, "batch_size": 64, "lr": 3e-3, "weight_decay": 1e-4, "warmup": 50}


def augment(x: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Shift each image ``(N, C, H, W)`` by ``shifts[i] - 1`` pixels (``shifts`` in {0, 1, 2}, shape (N, 2)),
    filling with zeros: cheap translation invariance for the small digits set."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    rows = shifts[:, 0, None] + np.arange(h)[None, :]
    cols = shifts[:, 1, None] + np.arange(w)[None, :]
    out = padded[np.arange(n)[:, None, None, None], np.arange(c)[None, :, None, None],
                 rows[:, None, :, None], cols[:, None, None, :]]
    return out.astype(x.dtype, copy=False)


class CNN(nn.Module):
    """Two 3x3 convolutions with ReLU, a 2x2 pool, and a dense classifier on the flattened map. Inputs are NCHW;
    the convolutions and the flattening are NHWC with ``channels_last=True``.

    Example::

        >>> net = CNN(key=flfun.random.key(0))
        >>> net(fnp.ones((4, 1, 8, 8))).shape
        (4, 10)
    """
    conv1: nn.Conv2d
    conv2: nn.Conv2d
    dense: nn.Linear
    pool: str = nn.static_field()
    channels_last: bool = nn.static_field()

    def __init__(self, *, key, in_channels: int = 1, image_size: int = 8, channels=(16, 32),
                 num_classes: int = 10, padding: str = "SAME", pool: str = "max", channels_last: bool = False):
        if pool not in ("avg", "max"):
            raise ValueError(f"CNN: pool must be 'avg' or 'max', got {pool!r}")
        k1, k2, k3 = nn.split_key(key, 3)
        c1, c2 = channels
        self.conv1 = nn.Conv2d(in_channels, c1, 3, padding=padding, key=k1, channels_last=channels_last)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=padding, key=k2, channels_last=channels_last)
        side = image_size if padding == "SAME" else image_size - 4
        self.dense = nn.Linear(c2 * (side // 2) ** 2, num_classes, key=k3)
        self.pool, self.channels_last = pool, bool(channels_last)

    def __call__(self, x):
        last = self.channels_last
        h = nn.relu(self.conv1(transpose(x, (0, 2, 3, 1)) if last else x))
        h = nn.relu(self.conv2(h))
        h = (nn.avg_pool if self.pool == "avg" else nn.max_pool)(h, (2, 2), channels_last=last)
        return self.dense(reshape(h, (h.shape[0], int(np.prod(h.shape[1:])))))


def init(key) -> CNN:
    """A fresh digits CNN: ``init(flfun.random.key(0))``."""
    return CNN(key=key)


def loss_fn(model: CNN, x, y, key=None):
    """Mean softmax cross-entropy of the batch (in float32 whatever the compute dtype)."""
    return nn.softmax_cross_entropy(model(x).astype(fnp.float32), y)


def accuracy(model, x, y) -> float:
    """Fraction of correctly classified examples."""
    pred = fnp.argmax(model(fnp.asarray(x)), axis=-1)
    return float(fnp.mean((pred == fnp.asarray(y)).astype(fnp.float32)))
