"""Small helpers shared by the whole library (one copy of each)."""
from __future__ import annotations

import math
import operator
from typing import Iterable


def prod(xs: Iterable[int]) -> int:
    """Product of integers, 1 for an empty sequence."""
    return math.prod(xs)


def canonical_axis(axis: int, ndim: int, op: str) -> int:
    """Normalise a possibly negative axis, raising a clear error when it is out of range."""
    try:
        axis = int(operator.index(axis))       # bool and numpy integers become plain ints
    except Exception:
        raise TypeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def canonical_axes(axis, ndim: int, op: str) -> tuple[int, ...]:
    """Normalise ``None`` / int / sequence of axes to a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        out = tuple(canonical_axis(a, ndim, op) for a in axis)
        if len(set(out)) != len(out):
            raise ValueError(f"{op}: repeated axis in {tuple(axis)}")
        return tuple(sorted(out))
    return (canonical_axis(axis, ndim, op),)
