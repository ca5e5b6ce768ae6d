"""Reduction and scan impls against an array module ``xp``."""
from __future__ import annotations


def impls(xp) -> dict:
    def reduce_sum(x, *, axes, out=None):
        return xp.sum(x, axis=axes, dtype=x.dtype, out=out)

    return {"reduce_sum": reduce_sum}
