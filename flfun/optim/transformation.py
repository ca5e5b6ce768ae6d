"""``GradientTransformation``, what every optimiser of ``flfun.optim`` is (its plain and its sharded ones)."""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class GradientTransformation(NamedTuple):
    """A pair of pure functions: ``init(params) -> state`` and
    ``update(grads, state, params=None) -> (updates, new_state)``.

    Example::

        scale = GradientTransformation(lambda p: (), lambda g, s, p=None: (tree_map(lambda x: -0.1 * x, g), s))
    """
    init: Callable
    update: Callable


__all__ = ["GradientTransformation"]
