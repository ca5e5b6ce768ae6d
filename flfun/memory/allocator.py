"""Allocators: the ``Allocator`` protocol, the bookkeeping every allocator shares, and the ``DirectAllocator``.

An ``Allocator`` hands out ``Block``s (byte ranges of a ``Segment``) carved from a ``RawMemory`` (raw.py).
``BaseAllocator`` keeps PyTorch-compatible statistics, the live blocks, capacity and errors;
``DirectAllocator`` asks the backend for every request. ``CachingAllocator`` (caching.py) keeps freed blocks
for reuse.
"""
from __future__ import annotations

from collections import Counter
from typing import Protocol, runtime_checkable

import numpy as np

from flfun.memory.raw import ALIGNMENT, Block, RawMemory, Segment, make_memory
from flfun.memory.report import format_bytes


# --------------------------------------------------------------------------------------------------- protocol
@runtime_checkable
class Allocator(Protocol):
    """What every allocator provides. ``device`` may be ``None`` (the allocator's own device)."""

    def malloc(self, nbytes: int, device=None) -> Block: ...

    def free(self, block: Block) -> None: ...

    def stats(self) -> dict: ...

    def empty_cache(self) -> None: ...


def is_int(v) -> bool:
    """Whether ``v`` is a Python or numpy integer (not a bool)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_nbytes(nbytes) -> int:
    """``nbytes`` as an int; ValueError naming ``malloc`` unless it is a non-negative integer."""
    if not is_int(nbytes) or nbytes < 0:
        raise ValueError(f"malloc: nbytes must be a non-negative int, got {nbytes!r}")
    return int(nbytes)


# ------------------------------------------------------------------------------------------------------ stats
MiB = 1 << 20
SMALL_SIZE = 1 * MiB
STAT_NAMES = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
              "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "small_pool", "large_pool")


class _Stat:
    __slots__ = ("allocated", "current", "freed", "peak")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def add(self, delta: int) -> None:
        self.current += delta
        self.allocated += max(delta, 0)
        self.freed += max(-delta, 0)
        self.peak = max(self.peak, self.current)


class BaseAllocator:
    """Shared bookkeeping: PyTorch-compatible statistics, live-block registry, capacity and errors."""

    def __init__(self, device=None, memory: str | RawMemory | None = None, capacity: int | None = None):
        if capacity is not None and (not is_int(capacity) or capacity < 0):
            raise ValueError(f"capacity: expected a non-negative int or None, got {capacity!r}")
        self.device, self.memory = device, make_memory(memory, device)
        self.capacity = None if capacity is None else int(capacity)
        self._stats = {name: {pool: _Stat() for pool in POOLS} for name in STAT_NAMES}
        self._live, self._segments = {}, {}   # ptr -> live Block, ptr -> Segment
        self.num_alloc_retries = self.num_ooms = 0
        self.events: list | None = None   # set to a list to log (action, ptr, size) as PyTorch's device_traces

    # --- bookkeeping helpers
    def _count(self, pool: str, sign: int, event: tuple | None, **deltas: int) -> None:
        """Add ``sign * delta`` to each named statistic (in ``pool`` and ``all``); log ``event`` if logging."""
        for name, delta in deltas.items():
            self._stats[name]["all"].add(sign * delta)
            self._stats[name][pool].add(sign * delta)
        if event is not None and self.events is not None:
            self.events.append(event)

    small_size = SMALL_SIZE   # requests up to this size come from the small pool

    def _pool_of(self, size: int) -> str:
        return "small_pool" if size <= self.small_size else "large_pool"

    def _new_segment(self, size: int, pool: str) -> Segment | None:
        """A fresh backend segment, or ``None`` when it would exceed the capacity."""
        if self.capacity is not None and self._stats["reserved_bytes"]["all"].current + size > self.capacity:
            return None
        try:
            ptr, handle = self.memory.alloc(size)
        except MemoryError:
            return None
        self._segments[ptr] = seg = Segment(ptr, size, handle, self.memory, pool, self)
        self._count(pool, 1, ("segment_alloc", ptr, size), segment=1, reserved_bytes=size)
        return seg

    def _release_segment(self, seg: Segment) -> None:
        self.memory.release(self._segments.pop(seg.ptr).handle)
        seg.handle = None
        self._count(seg.pool, -1, ("segment_free", seg.ptr, seg.size), segment=1, reserved_bytes=seg.size)

    def _account(self, block: Block, sign: int) -> None:
        self._count(block.segment.pool, sign, ("alloc" if sign > 0 else "free", block.ptr, block.size), allocation=1,
                    active=1, allocated_bytes=block.size, active_bytes=block.size, requested_bytes=block.requested)

    def _mark_allocated(self, block: Block, requested: int, device) -> Block:
        block.allocated, block.requested, block.device = True, requested, device or self.device
        self._live[block.ptr] = block
        self._account(block, 1)
        return block

    def _mark_freed(self, block) -> None:
        if not isinstance(block, Block):
            raise ValueError(f"free: expected a Block, got {block!r:.80}")  # noqa: TRY004
        if self._live.get(block.ptr) is not block:
            if block.segment.owner is self and not block.allocated:
                raise ValueError(f"free: double free of {block!r}")
            raise ValueError(f"free: {block!r} was not allocated by this allocator")
        del self._live[block.ptr]
        block.allocated = False
        self._account(block, -1)

    def _oom(self, nbytes: int, size: int) -> MemoryError:
        self.num_ooms += 1
        limit = "unlimited (the memory itself ran out)" if self.capacity is None else format_bytes(self.capacity)
        return MemoryError(f"{type(self).__name__}: out of memory allocating {format_bytes(nbytes)} ({nbytes} bytes, "
                           f"rounded to {size}) with capacity {limit}; {self.summary()}")

    # --- public stats
    def live_blocks(self) -> list[Block]:
        """The blocks handed out and not yet freed."""
        return list(self._live.values())

    def free_blocks(self) -> list[Block]:
        """Cached free blocks (none for allocators that do not cache)."""
        return []

    def empty_cache(self) -> None:
        """Return cached memory to the backend (nothing to do for allocators that do not cache)."""

    def stats(self) -> dict:
        """Statistics with PyTorch's ``memory_stats()`` names plus fragmentation and size histograms.

        Keys ``<stat>.<pool>.<current|peak|allocated|freed>`` for stat in ``allocation segment active
        inactive_split allocated_bytes reserved_bytes active_bytes inactive_split_bytes requested_bytes`` and pool in
        ``all small_pool large_pool``; ``num_alloc_retries``, ``num_ooms``, ``num_device_alloc``,
        ``num_device_free``; ``cached_free_bytes``, ``largest_free_block``, ``internal_fragmentation``
        (1 - requested / (reserved - cached free)), ``external_fragmentation`` (1 - largest free / cached free)
        and ``histogram.{allocated,free,segment}``: {log2 bucket: count}.

        Example::

            s = alloc.stats()
            s["reserved_bytes.all.peak"], s["internal_fragmentation"]
        """
        out = {f"{name}.{pool}.{field}": getattr(st, field) for name, pools in self._stats.items()
               for pool, st in pools.items() for field in _Stat.__slots__}
        used, requested = out["allocated_bytes.all.current"], out["requested_bytes.all.current"]
        free, cached_free = self.free_blocks(), out["reserved_bytes.all.current"] - used
        largest = max((b.size for b in free), default=0)
        out.update(num_alloc_retries=self.num_alloc_retries, num_ooms=self.num_ooms,
                   num_device_alloc=out["segment.all.allocated"], num_device_free=out["segment.all.freed"],
                   cached_free_bytes=cached_free, largest_free_block=largest,
                   internal_fragmentation=(1.0 - requested / used) if used else 0.0,
                   external_fragmentation=(1.0 - largest / cached_free) if cached_free else 0.0)
        for name, items in (("allocated", self._live.values()), ("free", free), ("segment", self._segments.values())):
            out[f"histogram.{name}"] = dict(sorted(Counter(max(x.size.bit_length() - 1, 0) for x in items).items()))
        return out

    def summary(self) -> str:
        """One line: allocated / requested / reserved / cached-free / largest free block."""
        s = self.stats()
        f = format_bytes
        return (f"allocated {f(s['allocated_bytes.all.current'])} (requested "
                f"{f(s['requested_bytes.all.current'])}), reserved {f(s['reserved_bytes.all.current'])} in "
                f"{s['segment.all.current']} segments, cached free {f(s['cached_free_bytes'])} (largest block "
                f"{f(s['largest_free_block'])}), peak reserved {f(s['reserved_bytes.all.peak'])}")

    def reset_peak_stats(self) -> None:
        for st in (st for pools in self._stats.values() for st in pools.values()):
            st.peak = st.current

    def __repr__(self):
        return f"{type(self).__name__}({self.summary()})"


# ------------------------------------------------------------------------------------------------------ direct
class DirectAllocator(BaseAllocator):
    """No caching: every ``malloc`` is a fresh backend buffer (64-byte aligned); ``free`` returns it at once.

    Example::

        alloc = DirectAllocator()
        b = alloc.malloc(1000)
        b.view(np.float32, (250,))[:] = 1.0
        alloc.free(b)
    """

    def malloc(self, nbytes: int, device=None) -> Block:
        nbytes = check_nbytes(nbytes)
        size = max(-(-nbytes // ALIGNMENT) * ALIGNMENT, ALIGNMENT)
        seg = self._new_segment(size, self._pool_of(size))
        if seg is None:
            raise self._oom(nbytes, size)
        return self._mark_allocated(Block(seg.ptr, size, seg), nbytes, device)

    def free(self, block: Block) -> None:
        self._mark_freed(block)
        self._release_segment(block.segment)
