"""Small helpers shared by the whole library (one copy of each)."""
from __future__ import annotations

import functools
import inspect
import math
import operator
import threading
from typing import Callable


prod = math.prod     # the product of integers, 1 for an empty sequence


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


_guard = threading.Lock()
_making: dict = {}     # (id(cache), key) -> the lock of the thread making that entry


def once(cache, key, make: Callable, keep: Callable = lambda value: True):
    """``cache[key]``, made by ``make()`` (and stored if ``keep(value)``) by one thread only when several ask at
    once: the others wait for it and reuse it (jit/pmap's first calls from many threads compile once).

    Example::

        exe = once(closed.cache, key, lambda: compiler(closed, device))
    """
    hit = cache.get(key)
    if hit is not None:
        return hit
    with _guard:
        lock = _making.setdefault((id(cache), key), threading.RLock())
    try:
        with lock:
            hit = cache.get(key)
            if hit is None:
                hit = make()
                if keep(hit):
                    cache[key] = hit
            return hit
    finally:
        with _guard:
            if _making.get((id(cache), key)) is lock:
                del _making[(id(cache), key)]


def decorator_factory(transform: Callable) -> Callable:
    """``transform(fun, **options)`` that also takes its options first, JAX-style: ``@transform(**options)``
    (and ``functools.partial(transform, **options)``, which works anyway) decorate a function later.

    Example::

        @fl.jit(static_argnames="n")
        def power(x, n): ...
    """
    first = next(iter(inspect.signature(transform).parameters))

    @functools.wraps(transform)
    def wrapper(*args, **kwargs):
        if args or first in kwargs:
            return transform(*args, **kwargs)
        return lambda fun: transform(fun, **kwargs)
    return wrapper
