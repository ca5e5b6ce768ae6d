"""What every xp impl family shares: ``finish`` (honour an ``out=`` buffer), the ``WritesOut`` declaration and
``in_float32`` (bfloat16/float16 operands computed in float32 where numpy has no fast or no such loop)."""
from __future__ import annotations

from typing import Callable

from flfun import dtypes


def finish(res, out):
    """``res``, or ``out`` holding a copy of it when an impl is given a buffer to write (``out=``)."""
    if out is None or out is res:
        return res
    out[...] = res
    return out


def in_float32(xp, fn: Callable) -> Callable:
    """``fn(*arrays, **params)`` that, on numpy, computes bfloat16/float16 operands (recognised by the first one)
    in float32 and rounds the result once to its dtype (``preferred_element_type``, ``out``'s, or the operands');
    numpy has no bf16 matmul or einsum, f16 ones that run without BLAS, and sums that would accumulate in 8 bits.
    """
    if xp.__name__ != "numpy":
        return fn

    def wrapped(*args, out=None, **params):
        low = args[0].dtype
        if low not in dtypes.LOW_PRECISION:
            return fn(*args, out=out, **params)
        res = fn(*[a.astype(dtypes.float32) if a.dtype == low else a for a in args], **params)
        dt = out.dtype if out is not None else params.get("preferred_element_type") or low
        return finish(res.astype(dt, copy=False), out)
    return wrapped


class WritesOut:
    """``fn``, declared to write its result into an ``out=`` buffer when given one (see ``register_impl``);
    ``install_impls`` installs ``fn`` itself."""
    __slots__ = ("fn",)

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args, **params):
        return self.fn(*args, **params)


__all__ = ["WritesOut", "finish", "in_float32"]
