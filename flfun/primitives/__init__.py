"""The primitive registry: every primitive, looked up by name, with its impls swappable at run time.

Families live in one file each (base, elementwise, indexing, slicing, shape, reduce, linalg, decomp, collective),
each importing only the ones before it; a primitive's shape rule, its jvp / transpose / batching rules and its
facts (slots) stand together in its block there. ``flfun.primitives.rules`` is the API they are written with.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from flfun.core import PRIMITIVES, Primitive, register_impl

from flfun.primitives import (base, elementwise, indexing, slicing, shape, reduce, linalg, decomp,  # noqa: F401
                              collective, fft, rules)    # (importing a family registers its primitives)


def get(name: str) -> Primitive:
    """The primitive called ``name``: ``primitives.get("add")``."""
    try:
        return PRIMITIVES[name]
    except KeyError:
        raise KeyError(f"no primitive named {name!r}; see flfun.primitives.names()") from None


def names() -> list[str]:
    """Names of all registered primitives, sorted."""
    return sorted(PRIMITIVES)


def all_primitives() -> list[Primitive]:
    return [PRIMITIVES[n] for n in names()]


@contextmanager
def impl_override(prim: Primitive | str, backend: str, fn: Callable) -> Iterator[Callable | None]:
    """Temporarily replace an impl; yields the previous one.

    Example::

        with impl_override("add", "numpy", counting_add):
            fl.grad(f)(x)
    """
    prim = get(prim) if isinstance(prim, str) else prim
    from flfun.backends import get_backend
    get_backend(backend)  # make sure the backend's own impls are installed before we swap one
    old = register_impl(prim, backend, fn)
    try:
        yield old
    finally:
        register_impl(prim, backend, old)


__all__ = ["Primitive", "register_impl", "get", "names", "all_primitives", "impl_override"]
