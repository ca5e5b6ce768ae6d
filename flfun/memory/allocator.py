"""Allocators: where every buffer's bytes come from.

An ``Allocator`` hands out ``Block``s (byte ranges of a ``Segment``) carved from a ``RawMemory``: numpy byte
buffers (``host``), cupy device memory (``cupy``), or a ``virtual`` address space with no backing for offline
trace replay.
``DirectAllocator`` asks the backend for every request; ``CachingAllocator`` keeps freed blocks for reuse
(the PyTorch/Flashlight caching allocator design, with the ``max_split_size`` research knob).
"""
from __future__ import annotations

import bisect
import contextlib
import itertools
from collections import Counter
from typing import Any, Protocol, runtime_checkable

import numpy as np

ALIGNMENT = 64


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


@contextlib.contextmanager
def _figure(path: str, dpi: int, **subplots):
    """``(pyplot, axes)`` of a new matplotlib figure (Agg), saved to ``path`` as a PNG when the block ends."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(**subplots)
    yield plt, axes
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


# --------------------------------------------------------------------------------------------------- protocol
@runtime_checkable
class Allocator(Protocol):
    """What every allocator provides. ``device`` may be ``None`` (the allocator's own device)."""

    def malloc(self, nbytes: int, device=None) -> Block: ...

    def free(self, block: Block) -> None: ...

    def stats(self) -> dict: ...

    def empty_cache(self) -> None: ...


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _check_nbytes(nbytes) -> int:
    if not _is_int(nbytes) or nbytes < 0:
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
        if capacity is not None and (not _is_int(capacity) or capacity < 0):
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
        limit = "unlimited (the memory itself ran out)" if self.capacity is None else _fmt(self.capacity)
        return MemoryError(f"{type(self).__name__}: out of memory allocating {_fmt(nbytes)} ({nbytes} bytes, "
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
        return (f"allocated {_fmt(s['allocated_bytes.all.current'])} (requested "
                f"{_fmt(s['requested_bytes.all.current'])}), reserved {_fmt(s['reserved_bytes.all.current'])} in "
                f"{s['segment.all.current']} segments, cached free {_fmt(s['cached_free_bytes'])} (largest block "
                f"{_fmt(s['largest_free_block'])}), peak reserved {_fmt(s['reserved_bytes.all.peak'])}")

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
        nbytes = _check_nbytes(nbytes)
        size = max(-(-nbytes // ALIGNMENT) * ALIGNMENT, ALIGNMENT)
        seg = self._new_segment(size, self._pool_of(size))
        if seg is None:
            raise self._oom(nbytes, size)
        return self._mark_allocated(Block(seg.ptr, size, seg), nbytes, device)

    def free(self, block: Block) -> None:
        self._mark_freed(block)
        self._release_segment(block.segment)


# ----------------------------------------------------------------------------------------------------- caching
def _link(*chain: Block | None) -> None:
    """Make the blocks of ``chain`` neighbours in that order (``None`` ends it)."""
    for a, b in itertools.pairwise(chain):
        if a is not None:
            a.next = b
        if b is not None:
            b.prev = a


class CachingAllocator(BaseAllocator):
    """The caching allocator of PyTorch's CUDA allocator and Flashlight's CachingMemoryManager.

    Requests are rounded up to 512 bytes (or to power-of-two divisions, ``roundup_power2_divisions``). Requests of
    at most 1 MiB come from the small pool, carved from 2 MiB segments; larger ones from the large pool: 20 MiB
    segments for requests under 10 MiB, segments rounded up to 2 MiB above. The best-fitting cached block is
    reused and split when the rest is worth keeping; freed blocks coalesce with free neighbours.

    Research knobs:
      * ``max_split_size``: blocks of at least this size are "oversize": a cached oversize block is never split,
        never serves a request below the limit, and serves a larger request only if it wastes less than
        ``oversize_slack`` (20 MiB, or ``max_split_size`` if smaller). On memory pressure whole oversize
        segments are released first. This is the Flashlight policy that PyTorch adopted as
        ``max_split_size_mb`` (which PyTorch requires to exceed 20 MiB; here smaller limits also work: segments
        for below-limit requests stay below the limit, and oversize requests get segments of their own size).
      * ``recycling_size_limit``: cached blocks of at least this size are never reused; a whole segment of that
        size returns to the backend when freed (Flashlight's ``recyclingSizeLimit``).
      * ``roundup_power2_divisions``: an int, ``{min_size: divisions}`` or ``fn(size) -> divisions``; sizes
        round up to the next of ``divisions`` equal steps between powers of two (PyTorch's knob).

    With ``capacity`` (bytes) a failed segment allocation first releases cached segments (oversize ones, then
    all unsplit ones) and retries, then raises ``MemoryError`` naming the request and a stats summary.
    Geometry (``small_size``, ``small_buffer``, ``large_buffer``, ``min_large_alloc``, ``round_large``,
    ``min_block_size``) defaults to PyTorch's constants and may be scaled for experiments.

    Example::

        alloc = CachingAllocator(max_split_size=64 << 20, capacity=1 << 30)
        a = alloc.malloc(100 << 20); alloc.free(a)
        b = alloc.malloc(40 << 20)          # does not split the cached 100 MiB block
        print(alloc.stats()["internal_fragmentation"])
    """

    def __init__(self, device=None, memory: str | RawMemory | None = None, capacity: int | None = None, *,
                 max_split_size: int | None = None, recycling_size_limit: int | None = None,
                 roundup_power2_divisions=None, oversize_slack: int | None = None,
                 min_block_size: int = 512, small_size: int = SMALL_SIZE, small_buffer: int = 2 * MiB,
                 large_buffer: int = 20 * MiB, min_large_alloc: int = 10 * MiB, round_large: int = 2 * MiB):
        super().__init__(device, memory, capacity)
        geometry = {"min_block_size": min_block_size, "small_size": small_size, "small_buffer": small_buffer,
                    "large_buffer": large_buffer, "min_large_alloc": min_large_alloc, "round_large": round_large}
        for name, v in {"max_split_size": max_split_size, "recycling_size_limit": recycling_size_limit,
                        "oversize_slack": oversize_slack, **geometry}.items():
            step = ALIGNMENT if name in geometry else None
            if (v is not None or step) and (not _is_int(v) or v <= 0 or step and v % step):
                raise ValueError(f"{name}: expected a positive {f'multiple of {step}' if step else 'int or None'}, "
                                 f"got {v!r}")
        if small_buffer < small_size:
            raise ValueError(f"small_buffer: must be >= small_size ({small_size}), got {small_buffer}")
        self.__dict__.update(geometry, max_split_size=max_split_size, recycling_size_limit=recycling_size_limit)
        self.oversize_slack = oversize_slack or min(large_buffer, max_split_size or large_buffer)
        self.roundup_power2_divisions = _divisions_fn(roundup_power2_divisions)
        # the cached free blocks of each pool as (size, ptr, block), sorted for best-fit search
        self.pools: dict[str, list[tuple[int, int, Block]]] = {"small_pool": [], "large_pool": []}

    # --- sizes
    def round_size(self, nbytes: int) -> int:
        """The block size a request of ``nbytes`` gets."""
        mb = self.min_block_size
        if nbytes < mb:
            return mb
        div = self.roundup_power2_divisions(nbytes)
        if div > 1 and nbytes > mb * div:   # round up to the next of ``div`` equal steps between powers of two
            mb = (1 << (nbytes.bit_length() - 1)) // div
        return -(-nbytes // mb) * mb

    def allocation_size(self, size: int) -> int:
        """The segment size requested from the backend for a block of ``size``."""
        rounded = -(-size // self.round_large) * self.round_large
        if size <= self.small_size:
            return self.small_buffer
        limit = self.max_split_size
        if limit is not None and size >= limit:
            return rounded   # an oversize block is never split: a bigger segment would only be waste
        seg = self.large_buffer if size < self.min_large_alloc else rounded
        # a segment for a below-limit request stays below the limit, so that it can be split and reused
        return size if limit is not None and seg >= limit else seg

    # --- malloc
    def malloc(self, nbytes: int, device=None) -> Block:
        nbytes = _check_nbytes(nbytes)
        size = self.round_size(nbytes)
        pool = self._pool_of(size)
        block = self._get_free_block(size, pool)
        if block is None:
            alloc_size = self.allocation_size(size)
            # a fresh segment, else one after releasing oversize segments, else after emptying the cache
            seg = (self._new_segment(alloc_size, pool) or (self._release_oversize(size, pool)
                   and self._new_segment(alloc_size, pool)) or self._retry(alloc_size, pool))
            if seg is None:
                raise self._oom(nbytes, size)
            block = Block(seg.ptr, seg.size, seg)
        rest = block.size - size
        if (rest >= self.min_block_size if pool == "small_pool" else
                rest > self.small_size and (self.max_split_size is None or size < self.max_split_size)):
            tail = Block(block.ptr + size, rest, block.segment)
            _link(block, tail, block.next)
            block.size = size
            self._cache(tail, True)
        return self._mark_allocated(block, nbytes, device)

    def _retry(self, alloc_size: int, pool: str) -> Segment | None:
        """As PyTorch: release every unsplit cached segment, then retry (counted as a retry)."""
        self.empty_cache()
        self.num_alloc_retries += 1
        return self._new_segment(alloc_size, pool)

    def _get_free_block(self, size: int, pool: str) -> Block | None:
        cached, limit, recycle = self.pools[pool], self.max_split_size, self.recycling_size_limit
        i = bisect.bisect_left(cached, (size, -1))
        if i == len(cached):
            return None
        n, _, block = cached[i]
        # in the large pool an oversize block never serves a small request, nor a large one it would waste too
        # much of, and a block over the recycling limit is never reused
        if pool == "large_pool" and (recycle is not None and n >= recycle or limit is not None
                                     and (size < limit <= n or limit <= size <= n - self.oversize_slack)):
            return None
        self._cache(block, False)
        return block

    # --- free
    def free(self, block: Block) -> None:
        self._mark_freed(block)
        # the caller's Block object is retired; the cache tracks the range with a fresh one
        node = Block(block.ptr, block.size, block.segment)
        prev, nxt = block.prev, block.next
        block.prev = block.next = None
        if prev is not None and not prev.allocated:   # coalesce with free neighbours
            self._cache(prev, False)
            node.ptr, node.size, prev = prev.ptr, node.size + prev.size, prev.prev
        if nxt is not None and not nxt.allocated:
            self._cache(nxt, False)
            node.size, nxt = node.size + nxt.size, nxt.next
        _link(prev, node, nxt)
        if (self.recycling_size_limit is not None and prev is None and nxt is None
                and node.size >= self.recycling_size_limit and node.segment.pool == "large_pool"):
            self._release_segment(node.segment)
        else:
            self._cache(node, True)

    def _cache(self, block: Block, insert: bool) -> None:
        """Put ``block`` into (or take it out of) its pool's cache, counting it as inactive split if it is one."""
        cached, key = self.pools[block.segment.pool], (block.size, block.ptr)
        if insert:
            bisect.insort(cached, (*key, block))
        else:
            del cached[bisect.bisect_left(cached, key)]
        if block.prev is not None or block.next is not None:
            self._count(block.segment.pool, 1 if insert else -1, None, inactive_split=1,
                        inactive_split_bytes=block.size)

    # --- releasing cached memory
    def _release_whole(self, blocks: list[Block]) -> int:
        """Return the segments of these unsplit cached blocks to the backend; the bytes released."""
        for b in blocks:
            self._cache(b, False)
            self._release_segment(b.segment)
        return sum(b.size for b in blocks)

    def _release_oversize(self, size: int, pool: str) -> bool:
        """Free whole oversize segments: the best fit for ``size``, else the largest until enough is freed."""
        limit = self.max_split_size
        if limit is None:
            return False
        key = max(size, limit)
        whole = [b for s, _, b in self.pools[pool] if s >= limit and b.prev is None and b.next is None]
        enough = bisect.bisect_left(list(itertools.accumulate(b.size for b in whole[::-1])), key) + 1
        return self._release_whole([b for b in whole if b.size >= key][:1] or whole[::-1][:enough]) >= key

    def empty_cache(self) -> None:
        """Return every cached segment that holds no live block to the backend."""
        self._release_whole([b for b in self.free_blocks() if b.prev is None and b.next is None])

    def free_blocks(self) -> list[Block]:
        return [b for cached in self.pools.values() for _, _, b in cached]

    def segments(self) -> list[tuple[Segment, list[Block]]]:
        """Each segment with its blocks (live and cached) in address order."""
        by_seg = {ptr: (seg, []) for ptr, seg in self._segments.items()}
        for b in sorted(itertools.chain(self._live.values(), self.free_blocks()), key=lambda b: b.ptr):
            by_seg[b.segment.ptr][1].append(b)
        return list(by_seg.values())


def _divisions_fn(spec):
    if callable(spec):
        return spec
    if spec is None or _is_int(spec):
        spec = {0: spec or 0}
    if not isinstance(spec, dict) or not all(_is_int(k) and _is_int(v) for k, v in spec.items()):
        raise ValueError(f"roundup_power2_divisions: expected an int, dict or callable, got {spec!r}")
    for v in spec.values():
        if v < 0 or (v > 1 and v & (v - 1)):    # other divisions would give blocks off the 64-byte alignment
            raise ValueError(f"roundup_power2_divisions: expected 0, 1 or a power of two, got {v!r}")
    table = sorted((int(k), int(v)) for k, v in spec.items())
    return lambda size: next((v for k, v in reversed(table) if size >= k), 0)

