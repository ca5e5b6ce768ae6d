"""Allocator invariants (hypothesis state machine), the classic split-fragmentation OOM, stats and the registry."""
import itertools

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from flfun import memory
from flfun.memory import CachingAllocator, DirectAllocator
from flfun.memory.raw import Block

KiB, MiB = 1 << 10, 1 << 20

sizes = st.one_of(st.integers(0, 4 * KiB), st.integers(4 * KiB, 2 * MiB), st.integers(2 * MiB, 40 * MiB))
configs = st.sampled_from([
    {}, {"max_split_size": 8 * MiB}, {"max_split_size": 24 * MiB, "capacity": 96 * MiB},
    {"capacity": 64 * MiB}, {"recycling_size_limit": 16 * MiB}, {"roundup_power2_divisions": 4},
    {"max_split_size": 4 * MiB, "roundup_power2_divisions": {1 * MiB: 2, 16 * MiB: 8}, "capacity": 80 * MiB},
])


class AllocatorMachine(RuleBasedStateMachine):
    """Random malloc/free/empty_cache against a CachingAllocator (virtual memory) or a DirectAllocator."""
    live = Bundle("live")

    def __init__(self):
        super().__init__()
        self.alloc = None
        self.freed: list[Block] = []
        self.requested = 0
        self.ooms = 0

    @precondition(lambda self: self.alloc is None)
    @rule(cfg=configs, direct=st.booleans())
    def make(self, cfg, direct):
        cls = DirectAllocator if direct else CachingAllocator
        if direct:
            cfg = {k: v for k, v in cfg.items() if k == "capacity"}
        self.alloc = cls(memory="virtual", **cfg)

    @precondition(lambda self: self.alloc is not None)
    @rule(target=live, n=sizes)
    def malloc(self, n):
        before = self.alloc.stats()
        try:
            b = self.alloc.malloc(n)
        except MemoryError as e:
            cap = self.alloc.capacity
            assert cap is not None, "MemoryError without a capacity"
            assert f"({n} bytes" in str(e) and "reserved" in str(e)
            after = self.alloc.stats()
            assert after["num_ooms"] == before["num_ooms"] + 1
            assert after["reserved_bytes.all.current"] <= cap
            # OOM only after the cache was emptied and a fresh segment still would not fit
            assert _inactive_whole_free(self.alloc) == 0
            need = self.alloc.allocation_size(self.alloc.round_size(n)) if hasattr(self.alloc, "round_size") else n
            assert after["reserved_bytes.all.current"] + need > cap
            self.ooms += 1
            return memory.raw.Block.__new__(Block)  # placeholder that is never a live block
        assert b.size >= n and b.requested == n and b.allocated
        self.requested += n
        return b

    @rule(b=consumes(live))
    def free(self, b):
        if not getattr(b, "allocated", False):   # OOM placeholder
            return
        self.alloc.free(b)
        self.requested -= b.requested
        self.freed.append(b)

    @precondition(lambda self: self.freed)
    @rule(i=st.integers(0, 1000))
    def double_free(self, i):
        b = self.freed[i % len(self.freed)]
        with pytest.raises(ValueError, match="free: double free"):
            self.alloc.free(b)

    @precondition(lambda self: self.alloc is not None)
    @rule()
    def free_foreign(self):
        other = CachingAllocator(memory="virtual")
        b = other.malloc(100)
        with pytest.raises(ValueError, match="not allocated by this allocator"):
            self.alloc.free(b)

    @precondition(lambda self: self.alloc is not None)
    @rule()
    def empty_cache(self):
        self.alloc.empty_cache()
        assert _inactive_whole_free(self.alloc) == 0
        if not self.alloc.live_blocks():
            assert self.alloc.stats()["reserved_bytes.all.current"] == 0

    @invariant()
    def accounting(self):
        a = self.alloc
        if a is None:
            return
        s = a.stats()
        live = a.live_blocks()
        free = a.free_blocks()
        live_bytes = sum(b.size for b in live)
        free_bytes = sum(b.size for b in free)
        reserved = sum(seg.size for seg in a._segments.values())
        assert s["allocated_bytes.all.current"] == live_bytes
        assert s["requested_bytes.all.current"] == self.requested == sum(b.requested for b in live)
        assert s["reserved_bytes.all.current"] == reserved == live_bytes + free_bytes
        assert s["cached_free_bytes"] == free_bytes
        assert s["allocation.all.current"] == len(live) == s["active.all.current"]
        assert s["segment.all.current"] == len(a._segments)
        for name in ("allocated_bytes", "reserved_bytes", "segment", "allocation", "inactive_split_bytes"):
            assert s[f"{name}.all.current"] == s[f"{name}.small_pool.current"] + s[f"{name}.large_pool.current"]
            assert s[f"{name}.all.peak"] >= s[f"{name}.all.current"] >= 0
            assert s[f"{name}.all.allocated"] - s[f"{name}.all.freed"] == s[f"{name}.all.current"]
        split = [b for b in free if b.prev is not None or b.next is not None]
        assert s["inactive_split_bytes.all.current"] == sum(b.size for b in split)
        assert s["largest_free_block"] == max((b.size for b in free), default=0)
        if a.capacity is not None:
            assert reserved <= a.capacity
        assert 0.0 <= s["internal_fragmentation"] <= 1.0
        # live blocks never overlap, and every segment is tiled exactly by its blocks
        spans = sorted((b.ptr, b.ptr + b.size) for b in live + free)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start
        if isinstance(a, CachingAllocator):
            for seg, blocks in a.segments():
                assert blocks and blocks[0].ptr == seg.ptr and sum(b.size for b in blocks) == seg.size
                for x, y in itertools.pairwise(blocks):
                    assert x.ptr + x.size == y.ptr and x.next is y and y.prev is x
                    assert x.allocated or y.allocated, "free neighbours were not coalesced"
                if a.max_split_size is not None:
                    for b in blocks:   # a cached oversize block never gets split
                        assert b.size < a.max_split_size or b.prev is None and b.next is None or \
                            b.segment.size - b.size <= a.small_size or b.segment.size <= a.large_buffer


def _inactive_whole_free(a):
    return sum(b.size for b in a.free_blocks() if b.prev is None and b.next is None)


TestAllocatorMachine = AllocatorMachine.TestCase


@pytest.mark.parametrize("memory_kind", ["host", "virtual"])
def test_classic_10_5_6_failure(memory_kind):
    """10 -> free -> 5 -> 6 under capacity 12: unrestricted splitting OOMs, the split limit succeeds."""
    unit = 10 * MiB
    plain = CachingAllocator(capacity=12 * unit, memory=memory_kind)
    plain.free(plain.malloc(10 * unit))
    plain.malloc(5 * unit)
    with pytest.raises(MemoryError, match=r"out of memory allocating 60.00 MiB \(62914560 bytes.*reserved 100.00 MiB"):
        plain.malloc(6 * unit)
    assert plain.stats()["num_ooms"] == 1 and plain.stats()["num_alloc_retries"] == 1
    limited = CachingAllocator(capacity=12 * unit, memory=memory_kind, max_split_size=8 * unit)
    limited.free(limited.malloc(10 * unit))
    a = limited.malloc(5 * unit)
    b = limited.malloc(6 * unit)
    assert a.ptr + a.size <= b.ptr or b.ptr + b.size <= a.ptr
    assert limited.stats()["num_ooms"] == 0 and limited.stats()["reserved_bytes.all.current"] == 11 * unit


def test_caching_reuses_splits_and_coalesces():
    a = CachingAllocator(memory="virtual")
    x = a.malloc(1000)
    assert x.size == 1024 and x.segment.size == 2 * MiB
    y = a.malloc(1000)
    assert y.ptr == x.ptr + 1024
    a.free(x)
    z = a.malloc(600)             # best fit: the freed 1 KiB hole, not the big tail
    assert z.ptr == x.ptr and z.size == 1024
    a.free(z), a.free(y)
    s = a.stats()
    assert s["allocated_bytes.all.current"] == 0 and s["largest_free_block"] == 2 * MiB
    assert s["inactive_split_bytes.all.current"] == 0 and s["segment.all.current"] == 1
    big = a.malloc(3 * MiB)
    assert big.segment.size == 20 * MiB
    huge = a.malloc(33 * MiB + 1)
    assert huge.segment.size == 34 * MiB and huge.size == 34 * MiB   # a tail under 1 MiB is not split off
    a.free(big), a.free(huge)
    a.empty_cache()
    assert a.stats()["reserved_bytes.all.current"] == 0 and a.stats()["num_device_free"] == 3


def test_round_size_and_power2_divisions():
    a = CachingAllocator(memory="virtual", roundup_power2_divisions=4)
    assert [a.round_size(n) for n in (0, 1, 513, 1 << 20)] == [512, 512, 1024, 1 << 20]
    assert a.round_size(1200 * KiB) == 1280 * KiB and a.round_size(5 * MiB + 1) == 6 * MiB
    b = CachingAllocator(memory="virtual", roundup_power2_divisions={2 * MiB: 2})
    assert b.round_size(1200 * KiB) == 1200 * KiB and b.round_size(5 * MiB) == 6 * MiB
    with pytest.raises(ValueError, match="roundup_power2_divisions: expected 0, 1 or a power of two"):
        CachingAllocator(roundup_power2_divisions=3)


def test_max_split_size_policy():
    a = CachingAllocator(memory="virtual", max_split_size=32 * MiB)
    a.free(a.malloc(100 * MiB))
    b = a.malloc(5 * MiB)         # small request: never served by the oversize block
    assert b.segment.size == 20 * MiB and a.stats()["segment.all.current"] == 2
    c = a.malloc(90 * MiB)        # large request within the slack: takes the whole block, unsplit
    assert c.size == 100 * MiB and c.requested == 90 * MiB
    assert a.stats()["internal_fragmentation"] > 0.05
    r = CachingAllocator(memory="virtual", recycling_size_limit=16 * MiB)
    r.free(r.malloc(40 * MiB))    # released at once, never cached
    assert r.stats()["reserved_bytes.all.current"] == 0


def test_host_blocks_are_aligned_views():
    for alloc in (DirectAllocator(), CachingAllocator()):
        blocks = [alloc.malloc(n) for n in (1, 100, 4096, 3 * MiB)]
        for b in blocks:
            assert b.ptr % 64 == 0 and b.buffer.nbytes == b.size and b.buffer.ctypes.data == b.ptr
        v = blocks[1].view(np.float32, (5, 5))
        v[:] = 7.0
        assert blocks[1].buffer[:4].view(np.float32)[0] == 7.0
        with pytest.raises(ValueError, match="Block.view: 1600 bytes of float32"):
            blocks[1].view(np.float32, (20, 20))
        for b in blocks:
            alloc.free(b)
        with pytest.raises(ValueError, match="Block.buffer: .* has been freed"):
            _ = blocks[0].buffer


def test_errors_and_registry():
    a = CachingAllocator(memory="virtual")
    with pytest.raises(ValueError, match="malloc: nbytes must be a non-negative int, got -1"):
        a.malloc(-1)
    with pytest.raises(ValueError, match="free: expected a Block"):
        a.free(123)
    with pytest.raises(ValueError, match="max_split_size: expected a positive int"):
        CachingAllocator(max_split_size=0)
    with pytest.raises(ValueError, match="memory: expected 'host'"):
        CachingAllocator(memory="disk")
    with pytest.raises(ValueError, match="make_allocator: unknown allocator 'nope'"):
        memory.make_allocator("nope")
    assert isinstance(memory.make_allocator("caching", max_split_size=MiB * 64), CachingAllocator)
    with pytest.raises(ValueError, match="set_allocator: allocator must implement"):
        memory.set_allocator(object())


def test_use_allocator_restores():
    before = memory.get_allocator()
    with memory.use_allocator(CachingAllocator()) as alloc:
        assert memory.get_allocator() is alloc
        alloc.free(memory.get_allocator().malloc(10))
    assert memory.get_allocator() is before


def test_stats_names_and_histograms():
    a = CachingAllocator(memory="virtual")
    blocks = [a.malloc(n) for n in (100, 3000, 3000, 5 * MiB)]
    s = a.stats()
    for key in ("allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "active_bytes.all.allocated",
                "inactive_split_bytes.small_pool.freed", "requested_bytes.all.current", "num_alloc_retries",
                "num_ooms"):
        assert key in s
    assert s["histogram.allocated"] == {9: 1, 11: 2, 22: 1}
    assert s["requested_bytes.all.current"] == 6100 + 5 * MiB
    a.free(blocks[1])
    # the freed block, the small segment's tail and the 20 MiB segment's tail
    assert a.stats()["inactive_split.all.current"] == 3
    assert a.stats()["inactive_split_bytes.all.current"] == (2 * MiB - 6656) + 3072 + 15 * MiB
    a.reset_peak_stats()
    assert a.stats()["allocated_bytes.all.peak"] == a.stats()["allocated_bytes.all.current"]


def test_machine_reaches_oom():
    """The state machine's OOM branch is not dead code: a capacity-bound allocator does run out."""
    a = CachingAllocator(memory="virtual", capacity=64 * MiB)
    held = [a.malloc(20 * MiB), a.malloc(20 * MiB)]
    a.free(a.malloc(5 * MiB))   # a cached 20 MiB segment, split then coalesced
    with pytest.raises(MemoryError):
        a.malloc(30 * MiB)
    assert a.stats()["num_alloc_retries"] == 1 and a.stats()["segment.all.current"] == 2 and held


@pytest.mark.parametrize("make", [DirectAllocator, CachingAllocator])
def test_memory_running_out_without_a_capacity_is_a_memory_error(make):
    class Exhausted(memory.raw.HostMemory):
        def alloc(self, nbytes):
            raise MemoryError("no more")
    with pytest.raises(MemoryError, match=r"out of memory allocating 1.00 KiB .* capacity unlimited"):
        make(memory=Exhausted()).malloc(1024)


@pytest.mark.parametrize("make", [DirectAllocator, CachingAllocator,
                                  lambda: CachingAllocator(max_split_size=2 * MiB, roundup_power2_divisions=4)])
def test_jit_executor_with_every_allocator(make):
    import flfun
    import flfun.numpy as fnp
    if not hasattr(flfun, "jit"):
        pytest.skip("flfun.jit not available yet")
    x = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)
    with memory.use_allocator(make()) as alloc:
        f = flfun.jit(lambda a: fnp.sum(fnp.tanh(a * 2.0 + 1.0) * a, axis=0) + 1.0)
        out = np.asarray(f(fnp.asarray(x)))
        np.testing.assert_allclose(out, np.sum(np.tanh(x * 2 + 1) * x, axis=0) + 1, rtol=1e-5, atol=1e-5)
        assert alloc.stats()["allocation.all.allocated"] >= 1   # the executor's arena came from this allocator
        np.testing.assert_allclose(np.asarray(f(fnp.asarray(x))), out)


def test_cupy_allocator_serves_cupy():
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver / no GPU
        pytest.skip("no GPU")
    from flfun.backends.base import Device
    dev = Device("gpu", 0, "cupy", cp)
    a = CachingAllocator(device=dev)
    b = a.malloc(1000)
    assert a.memory.kind == "cupy" and b.buffer.data.ptr == b.ptr and b.buffer.nbytes == b.size
    b.view(np.float32, (250,))[:] = 3
    assert float(b.view(np.float32, (250,)).sum()) == 750.0
    a.free(b)
    with memory.use_allocator(CachingAllocator(device=dev, max_split_size=64 * MiB), dev) as alloc:
        x = cp.arange(1 << 20, dtype=cp.float32) * 2
        assert alloc.stats()["allocation.all.current"] >= 1
        del x
        assert alloc.stats()["allocation.all.current"] == 0
    assert cp.cuda.get_allocator().__self__ is cp.get_default_memory_pool()
    cap = CachingAllocator(device=dev, capacity=120 * MiB)
    cap.free(cap.malloc(100 * MiB))
    cap.malloc(50 * MiB)
    with pytest.raises(MemoryError, match="out of memory allocating 60.00 MiB"):
        cap.malloc(60 * MiB)
