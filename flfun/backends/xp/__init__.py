"""Impls written once against an array module ``xp`` (numpy or cupy), one module per primitive family.

Each family module defines ``impls(xp) -> {primitive name: fn}``; ``install_impls`` puts them into the
primitives' impl slots for one backend without bumping the registry version for each.
"""
from __future__ import annotations

import importlib

FAMILIES = ("elementwise", "reduce", "shape", "indexing", "linalg", "decomp", "collective")


def finish(res, out):
    """``res``, or ``out`` holding a copy of it when an impl is given a buffer to write (``out=``)."""
    if out is None or out is res:
        return res
    out[...] = res
    return out


def install_impls(xp, backend: str) -> None:
    from flfun import primitives
    for family in FAMILIES:
        for name, fn in importlib.import_module(f"flfun.backends.xp.{family}").impls(xp).items():
            primitives.get(name).impls.setdefault(backend, fn)
