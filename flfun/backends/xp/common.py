"""What every xp impl family shares: ``finish`` (honour an ``out=`` buffer) and the ``WritesOut`` declaration."""
from __future__ import annotations

from typing import Callable


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


__all__ = ["WritesOut", "finish"]
