"""Impls written once against an array module ``xp`` (numpy or cupy), one module per primitive family.

Each family module defines ``impls(xp) -> {primitive name: fn}``, an impl that takes ``out=`` (other than a
ufunc) declared as ``WritesOut(fn)``; ``install_impls`` puts them into the primitives' impl slots for one backend
without bumping the registry version for each.
"""
from __future__ import annotations

import importlib
from typing import Callable

FAMILIES = ("elementwise", "reduce", "shape", "indexing", "linalg", "decomp", "collective")


def finish(res, out):
    """``res``, or ``out`` holding a copy of it when an impl is given a buffer to write (``out=``)."""
    if out is None or out is res:
        return res
    out[...] = res
    return out


class WritesOut:
    """``fn``, declared to write its result into an ``out=`` buffer when given one (see ``register_impl``);
    ``install_impls`` installs ``fn`` itself."""
    __slots__ = ("fn",)

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args, **params):
        return self.fn(*args, **params)


def install_impls(xp, backend: str, first: dict | None = None) -> None:
    """Fill ``backend``'s empty impl slots from ``first`` (a backend's own impls), then from the families."""
    from flfun import primitives
    tables = [first or {}] + [importlib.import_module(f"flfun.backends.xp.{f}").impls(xp) for f in FAMILIES]
    for table in tables:
        for name, fn in table.items():
            prim = primitives.get(name)
            if backend in prim.impls:
                continue
            out = type(fn) is WritesOut or type(fn).__name__ == "ufunc" and getattr(fn, "nout", 1) == 1
            prim.impls[backend] = fn = fn.fn if type(fn) is WritesOut else fn
            if out:
                prim.writes_out.add(backend)
                prim.out_impls.append(fn)
