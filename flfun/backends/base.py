"""What a backend is: an array module, its devices, host transfer and raw memory.

A backend fills the primitives' impl slots (``Primitive.impls[name]``). Most impls are written once against an
array module ``xp`` (see ``flfun/backends/xp/``) and instantiated per backend; a backend overrides where it has
something better.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Device:
    """One device: ``platform`` ('cpu' or 'gpu'), ``id`` and the backend that runs on it."""
    platform: str
    id: int
    backend: str
    xp: Any = field(repr=False)
    process_index: int = 0

    def put(self, value):
        """Move a host (numpy) buffer onto this device."""
        return value if self.platform == "cpu" else self.xp.asarray(value)

    def to_host(self, value):
        return value if self.platform == "cpu" else self.xp.asnumpy(value)

    def synchronize(self) -> None:
        if self.platform != "cpu":
            self.xp.cuda.Device(self.id).synchronize()

    def __repr__(self):
        return f"{self.platform}:{self.id}"


@dataclass
class Backend:
    """A backend: its name, array module, devices and a function that installs its impls."""
    name: str
    xp: Any
    devices: list[Device]
    install: Callable[[], None]
