"""flfun.memory: pluggable allocators, allocation telemetry and replay.

Every device has a current allocator (``get_allocator``); swap it globally with ``set_allocator`` or for a block
of code with ``use_allocator``. Allocator classes are registered by name so experiments can say
``make_allocator("caching", max_split_size=...)``. ``record`` / ``replay`` / ``compare`` (telemetry.py) study
what a program asks of an allocator.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from flfun.memory.allocator import Allocator, DirectAllocator
from flfun.memory.caching import CachingAllocator
from flfun.memory.raw import Block, RawMemory, make_memory
from flfun.memory.telemetry import Trace, compare, record, replay, to_memory_viz

_ALLOCATOR_CLASSES: dict[str, type] = {"direct": DirectAllocator, "caching": CachingAllocator}
_CURRENT: dict = {}


def register_allocator(name: str, cls: type) -> type:
    """Register an allocator class under ``name`` (for ``make_allocator`` and experiment scripts).

    Example::

        register_allocator("mine", MyAllocator)
        alloc = make_allocator("mine", capacity=1 << 30)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_allocator: name must be a non-empty str, got {name!r}")
    _ALLOCATOR_CLASSES[name] = cls
    return cls


def make_allocator(name: str, **kwargs) -> Allocator:
    """A new allocator of the class registered as ``name``.

    Example::

        alloc = make_allocator("caching", max_split_size=64 << 20)
    """
    if name not in _ALLOCATOR_CLASSES:
        raise ValueError(f"make_allocator: unknown allocator {name!r}; registered: {sorted(_ALLOCATOR_CLASSES)}")
    return _ALLOCATOR_CLASSES[name](**kwargs)


def _key(device):
    if device is None:
        from flfun.core import default_device
        device = default_device()
    return (getattr(device, "backend", "numpy"), getattr(device, "id", 0)), device


def get_allocator(device=None) -> Allocator:
    """The allocator in use on ``device`` (default device if ``None``); a ``DirectAllocator`` until one is set.

    Example::

        block = get_allocator().malloc(1024)
    """
    key, device = _key(device)
    alloc = _CURRENT.get(key)
    if alloc is None:
        alloc = _CURRENT[key] = DirectAllocator(device=device)
        alloc._cupy_default = True   # installing it again on a GPU hands cupy back its own memory pool
    return alloc


def set_allocator(allocator: Allocator, device=None) -> Allocator:
    """Install ``allocator`` on ``device``; returns the previous one. On a GPU it also serves cupy's own arrays.

    Example::

        old = set_allocator(CachingAllocator(max_split_size=64 << 20))
    """
    if not isinstance(allocator, Allocator):
        raise ValueError(f"set_allocator: allocator must implement malloc/free/stats/empty_cache, "  # noqa: TRY004
                         f"got {allocator!r}")
    old = get_allocator(device)
    key, device = _key(device)
    _CURRENT[key] = allocator
    if getattr(device, "platform", "cpu") == "gpu":
        _install_into_cupy(allocator, device)
    return old


@contextlib.contextmanager
def use_allocator(allocator: Allocator, device=None) -> Iterator[Allocator]:
    """Use ``allocator`` on ``device`` inside the block, then restore the previous one.

    Example::

        with use_allocator(CachingAllocator()) as alloc:
            train_step(...)
        print(alloc.stats()["reserved_bytes.all.peak"])
    """
    old = set_allocator(allocator, device)
    try:
        yield allocator
    finally:
        set_allocator(old, device)


def _install_into_cupy(allocator: Allocator, device) -> None:
    import cupy

    if isinstance(allocator, DirectAllocator) and getattr(allocator, "_cupy_default", False):
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
        return

    def malloc(nbytes: int):
        block = allocator.malloc(nbytes, device)
        mem = cupy.cuda.memory.UnownedMemory(block.ptr, block.size, _Keeper(allocator, block), device.id)
        return cupy.cuda.MemoryPointer(mem, 0)

    cupy.cuda.set_allocator(malloc)


class _Keeper:
    """Owner object cupy holds for an UnownedMemory; frees the block when cupy drops it."""
    __slots__ = ("allocator", "block")

    def __init__(self, allocator, block):
        self.allocator, self.block = allocator, block

    def __del__(self):
        with contextlib.suppress(Exception):   # interpreter shutdown or allocator already torn down
            self.allocator.free(self.block)


__all__ = ["Allocator", "Block", "CachingAllocator", "DirectAllocator", "RawMemory", "Trace",
           "compare", "get_allocator", "make_allocator", "make_memory", "record", "register_allocator", "replay",
           "set_allocator", "to_memory_viz", "use_allocator"]
