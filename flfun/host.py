"""Results to the host, JAX's way: ``device_get`` (numpy arrays out of a pytree) and ``block_until_ready``
(wait for a pytree's pending device work)."""
from __future__ import annotations

from typing import Any

import numpy as np

from flfun.tree import tree_map

__all__ = ["device_get", "block_until_ready"]


def device_get(x: Any) -> Any:
    """``x`` with every Array replaced by a numpy array on the host (other leaves as they are).

    Example::

        >>> fl.device_get({"w": fnp.ones(2)})
        {'w': array([1., 1.], dtype=float32)}
    """
    return tree_map(lambda leaf: np.asarray(leaf) if hasattr(leaf, "block_until_ready") else leaf, x)  # Arrays


def block_until_ready(x: Any) -> Any:
    """``x`` itself, once the device work behind each of its arrays is done: ``fl.block_until_ready(f(x))``."""
    tree_map(lambda leaf: leaf.block_until_ready() if hasattr(leaf, "block_until_ready") else leaf, x)
    return x
