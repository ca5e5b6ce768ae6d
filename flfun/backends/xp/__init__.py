"""Impls written once against an array module ``xp`` (numpy or cupy), one module per primitive family.

Each family module defines ``impls(xp) -> {primitive name: fn}``; ``install_impls`` puts them into the
primitives' impl slots for one backend without bumping the registry version for each.
"""
from __future__ import annotations

import importlib

FAMILIES = ("elementwise", "reduce", "shape", "indexing", "linalg", "decomp", "collective", "random")


def install_impls(xp, backend: str) -> None:
    from flfun import primitives
    for family in FAMILIES:
        try:
            mod = importlib.import_module(f"flfun.backends.xp.{family}")
        except ModuleNotFoundError as e:
            if e.name != f"flfun.backends.xp.{family}":
                raise
            continue
        for name, fn in mod.impls(xp).items():
            prim = primitives.get(name)
            prim.impls.setdefault(backend, fn)
