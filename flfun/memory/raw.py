"""Raw memory and the blocks carved from it: where every buffer's bytes come from.

A ``RawMemory`` hands out segments: numpy byte buffers (``host``), cupy device memory (``cupy``), or a ``virtual``
address space with no backing for offline trace replay. Allocators (allocator.py, caching.py) carve ``Block``s,
byte ranges of a ``Segment``, from them.
"""
from __future__ import annotations

import mmap
from typing import Any

import numpy as np

ALIGNMENT = 64
SMALL_PAGES_BYTES = 1 << 22     # host segments this big are mapped with small pages (see HostMemory)


# ------------------------------------------------------------------------------------------------- raw memory
class RawMemory:
    """A source of raw segments: ``alloc(nbytes) -> (ptr, handle)``; ``release(handle)`` gives them back;
    ``buffer(handle, offset, nbytes)`` views their bytes (memory with no backing raises)."""
    kind = "abstract"

    def alloc(self, nbytes: int):
        raise NotImplementedError

    def release(self, handle) -> None:
        """Give a segment back (nothing to do by default)."""

    def buffer(self, handle, offset: int, nbytes: int):
        raise ValueError(f"Block.buffer: a {self.kind} allocator has no backing memory (use memory='host')")


class HostMemory(RawMemory):
    """numpy byte buffers, 64-byte aligned; the handle is the aligned uint8 array itself."""
    kind = "host"

    def alloc(self, nbytes: int):
        if nbytes >= SMALL_PAGES_BYTES and hasattr(mmap, "MADV_NOHUGEPAGE"):
            # numpy advises huge pages for big buffers; touching a fresh huge page may mean compacting memory
            # first (W9 at T=1024: its first call touched a 544 MB arena in 1.8 s, 0.2 s with small pages, and
            # the steady state ran at the same speed)
            m = mmap.mmap(-1, nbytes)
            m.madvise(mmap.MADV_NOHUGEPAGE)
            arr = np.frombuffer(m, dtype=np.uint8)
            return arr.ctypes.data, arr
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        arr = raw[(start := (-raw.ctypes.data) % ALIGNMENT):start + nbytes]
        return arr.ctypes.data, arr

    def buffer(self, handle, offset: int, nbytes: int):
        return handle[offset:offset + nbytes]


class CupyMemory(RawMemory):
    """cupy device memory (raw ``cupy.cuda.Memory``, not cupy's pool) on one GPU; the handle is a ``MemoryPointer``."""
    kind = "cupy"

    def __init__(self, device_id: int = 0):
        import cupy
        self.cupy, self.device_id = cupy, device_id

    def alloc(self, nbytes: int):
        with (cp := self.cupy).cuda.Device(self.device_id):
            mem = cp.cuda.MemoryPointer(cp.cuda.Memory(max(nbytes, 1)), 0)   # raw cudaMalloc, not cupy's pool
        return mem.ptr, mem

    def buffer(self, handle, offset: int, nbytes: int):
        return self.cupy.ndarray((nbytes,), dtype=self.cupy.uint8, memptr=handle + offset)


class VirtualMemory(RawMemory):
    """No backing at all: addresses from a counter. For replaying traces of any size offline."""
    kind = "virtual"

    _next = 1 << 20

    def alloc(self, nbytes: int):
        ptr, self._next = self._next, self._next + -(-(nbytes + 1) // 4096) * 4096 + 4096
        return ptr, None


def make_memory(memory: str | RawMemory | None, device=None) -> RawMemory:
    """``'host'``, ``'cupy'``, ``'virtual'``, a ``RawMemory``, or ``None`` (follow the device's platform)."""
    if isinstance(memory, RawMemory):
        return memory
    if memory is None:
        memory = "cupy" if getattr(device, "platform", "cpu") == "gpu" else "host"
    kinds = {"host": HostMemory, "virtual": VirtualMemory, "cupy": lambda: CupyMemory(getattr(device, "id", 0))}
    if memory not in tuple(kinds):
        raise ValueError(f"memory: expected 'host', 'cupy', 'virtual' or a RawMemory, got {memory!r}")
    return kinds[memory]()


# ------------------------------------------------------------------------------------------------------ blocks
class Segment:
    """One raw allocation from the backend that blocks are carved from."""
    __slots__ = ("handle", "memory", "owner", "pool", "ptr", "size")

    def __init__(self, ptr: int, size: int, handle, memory: RawMemory, pool: str, owner=None):
        self.ptr, self.size, self.handle, self.memory, self.pool, self.owner = ptr, size, handle, memory, pool, owner


class Block:
    """A contiguous range ``[ptr, ptr + size)`` of one segment; ``requested`` is what the caller asked for.

    Example::

        b = DirectAllocator().malloc(100)
        x = b.view(np.float32, (5, 5))      # the first 100 bytes as a float32 array
    """
    __slots__ = ("__weakref__", "allocated", "device", "next", "prev", "ptr", "requested", "segment", "size")

    def __init__(self, ptr: int, size: int, segment: Segment, device=None, requested: int = 0):
        self.ptr, self.size, self.segment, self.device, self.requested = ptr, size, segment, device, requested
        self.prev: Block | None = None   # the neighbouring blocks of the segment, in address order
        self.next: Block | None = None
        self.allocated = False

    @property
    def buffer(self):
        """The block's bytes: a uint8 array of exactly ``size`` bytes (a view into its segment, never a copy)."""
        if not self.allocated:
            raise ValueError(f"Block.buffer: {self!r} has been freed")
        return self.segment.memory.buffer(self.segment.handle, self.ptr - self.segment.ptr, self.size)

    def view(self, dtype, shape) -> Any:
        """The first bytes of the block as an array of ``dtype`` and ``shape`` (a view)."""
        dtype = np.dtype(dtype)
        shape = tuple(shape) if np.ndim(shape) else (int(shape),)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes > self.size:
            raise ValueError(f"Block.view: {nbytes} bytes of {dtype}{list(shape)} do not fit in a block of "
                             f"{self.size} bytes")
        return self.buffer[:nbytes].view(dtype).reshape(shape)

    def __repr__(self):
        return (f"Block(ptr={self.ptr:#x}, size={self.size}, requested={self.requested}, "
                f"{'allocated' if self.allocated else 'free'})")
