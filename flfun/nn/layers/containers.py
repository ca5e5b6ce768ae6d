"""Containers: ``Lambda`` (a function as a layer), ``Sequential``, ``MLP``."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from flfun.array import Array
from flfun.nn import functional as F
from flfun.nn.layers.dense import Linear, split_key
from flfun.nn.module import Module, static_field

__all__ = ["Lambda", "MLP", "Sequential"]


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
