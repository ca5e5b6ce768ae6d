"""Impls written once against an array module ``xp`` (numpy or cupy), one module per primitive family.

Each family module defines ``impls(xp) -> {primitive name: fn}``, an impl that takes ``out=`` (other than a
ufunc) declared as ``WritesOut(fn)``; ``install_impls`` puts them into the primitives' impl slots for one backend
without bumping the registry version for each.
"""
from __future__ import annotations

from flfun.backends.xp import collective, decomp, elementwise, fft, indexing, linalg, reduce, shape
from flfun.backends.xp.common import WritesOut, finish

FAMILIES = (elementwise, reduce, shape, indexing, linalg, decomp, collective, fft)


def install_impls(xp, backend: str, first: dict | None = None) -> None:
    """Fill ``backend``'s empty impl slots from ``first`` (a backend's own impls), then from the families."""
    from flfun import primitives
    tables = [first or {}] + [f.impls(xp) for f in FAMILIES]
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


__all__ = ["FAMILIES", "WritesOut", "finish", "install_impls"]
