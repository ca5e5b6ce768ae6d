"""The caching allocator: freed blocks are kept, split and coalesced for reuse.

The PyTorch CUDA caching allocator / Flashlight CachingMemoryManager design, with their research knobs
(``max_split_size``, ``recycling_size_limit``, ``roundup_power2_divisions``).
"""
from __future__ import annotations

import bisect
import itertools

from flfun.memory.allocator import SMALL_SIZE, BaseAllocator, MiB, check_nbytes, is_int
from flfun.memory.raw import ALIGNMENT, Block, RawMemory, Segment


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
            if (v is not None or step) and (not is_int(v) or v <= 0 or step and v % step):
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
        nbytes = check_nbytes(nbytes)
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
    if spec is None or is_int(spec):
        spec = {0: spec or 0}
    if not isinstance(spec, dict) or not all(is_int(k) and is_int(v) for k, v in spec.items()):
        raise ValueError(f"roundup_power2_divisions: expected an int, dict or callable, got {spec!r}")
    for v in spec.values():
        if v < 0 or (v > 1 and v & (v - 1)):    # other divisions would give blocks off the 64-byte alignment
            raise ValueError(f"roundup_power2_divisions: expected 0, 1 or a power of two, got {v!r}")
    table = sorted((int(k), int(v)) for k, v in spec.items())
    return lambda size: next((v for k, v in reversed(table) if size >= k), 0)
