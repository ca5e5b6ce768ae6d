"""Paths of flfun.memory (allocators, registry, telemetry, planner) that the rest of the suite never reached:
user-input errors (exact messages) and small features checked against a reference."""
from __future__ import annotations

import gc
import json
import sys
import threading

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import memory
from flfun.memory import CachingAllocator, DirectAllocator, RawMemory, Trace, compare, to_memory_viz
from flfun.memory.raw import HostMemory
from flfun.compiler.liveness import plan_program

KiB, MiB = 1 << 10, 1 << 20


@pytest.mark.parametrize("make, message", [
    (lambda: memory.register_allocator("", DirectAllocator), "register_allocator: name must be a non-empty str, got ''"),
    (lambda: memory.register_allocator(3, DirectAllocator), "register_allocator: name must be a non-empty str, got 3"),
    (lambda: CachingAllocator(capacity=-1), "capacity: expected a non-negative int or None, got -1"),
    (lambda: DirectAllocator(capacity=1.5), "capacity: expected a non-negative int or None, got 1.5"),
    (lambda: CachingAllocator(small_buffer=512 * KiB), r"small_buffer: must be >= small_size \(1048576\), got 524288"),
    (lambda: CachingAllocator(roundup_power2_divisions=3),
     "roundup_power2_divisions: expected 0, 1 or a power of two, got 3"),
    (lambda: CachingAllocator(roundup_power2_divisions={0: 1, MiB: 3}),
     "roundup_power2_divisions: expected 0, 1 or a power of two, got 3"),
    (lambda: CachingAllocator(roundup_power2_divisions="x"),
     "roundup_power2_divisions: expected an int, dict or callable, got 'x'"),
    (lambda: CachingAllocator(roundup_power2_divisions=True),
     "roundup_power2_divisions: expected an int, dict or callable, got True"),
    (lambda: CachingAllocator(roundup_power2_divisions={"1MiB": 4}),
     r"roundup_power2_divisions: expected an int, dict or callable, got \{'1MiB': 4\}"),
    (lambda: CachingAllocator(memory="virtual").malloc(10).buffer,
     r"Block.buffer: a virtual allocator has no backing memory \(use memory='host'\)"),
    (lambda: to_memory_viz(Trace(), "unused.json", object()),
     r"to_memory_viz: allocator must log events \(a flfun.memory BaseAllocator\)"),
    (lambda: plan_program(fl.jit(fnp.sin).lower(fnp.ones(3)).program, alignment=3),
     "plan_program: alignment must be a power of two, got 3"),
])
def test_memory_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_register_allocator_and_given_raw_memory():
    class Counting(DirectAllocator):
        pass
    try:
        assert memory.register_allocator("counting", Counting) is Counting
        host = HostMemory()
        alloc = memory.make_allocator("counting", memory=host)
        assert type(alloc) is Counting and alloc.memory is host
        block = alloc.malloc(20)
        block.view(np.float32, (5,))[:] = np.arange(5)
        np.testing.assert_array_equal(host.buffer(block.segment.handle, 0, 20).view(np.float32), np.arange(5))
    finally:
        del memory._ALLOCATOR_CLASSES["counting"]

    class NoAlloc(RawMemory):
        pass
    with pytest.raises(NotImplementedError):
        CachingAllocator(memory=NoAlloc()).malloc(10)


def test_power2_divisions_callable_and_table():
    calls = []

    def divisions(size):
        calls.append(size)
        return 4
    by_fn = CachingAllocator(memory="virtual", roundup_power2_divisions=divisions)
    by_table = CachingAllocator(memory="virtual", roundup_power2_divisions={0: 4})
    for n in (1000, 5000, 1 << 20 | 1, 3 * MiB + 7):
        assert by_fn.round_size(n) == by_table.round_size(n)
        assert by_fn.round_size(n) % 64 == 0
    assert calls and CachingAllocator(memory="virtual", roundup_power2_divisions=4).round_size(5000) == 5120   # steps of 4096 / 4


def test_repr_in_gib_and_trace_summary():
    a = CachingAllocator(memory="virtual")
    a.malloc(3 << 30)
    assert repr(a).startswith("CachingAllocator(allocated 3.00 GiB (requested 3.00 GiB), reserved 3.00 GiB in 1 ")
    t = Trace()
    x = t.alloc(3 * MiB, op="matmul")
    t.alloc(100, op="add")
    t.free(x)
    assert repr(t) == t.summary() == "Trace(2 allocations, 1 frees, peak live 3.00 MiB, 1 live at end)"


def test_compare_prints_a_table_and_memory_viz_logs_ooms(tmp_path):
    t = Trace()
    x = t.alloc(3 * MiB, op="matmul")
    t.alloc(100, op="add")
    t.free(x)
    printed = []
    results = compare(t, {"direct": DirectAllocator(memory="virtual"),
                          "caching": lambda: CachingAllocator(memory="virtual")}, title="T", printer=printed.append)
    lines = printed[0].splitlines()
    assert lines[0] == "T" and lines[1].startswith("policy") and len(lines) == 5
    assert [ln.split()[0] for ln in lines[3:]] == list(results) == ["direct", "caching"]
    snap = to_memory_viz(t, str(tmp_path / "s.json"), CachingAllocator(memory="virtual", capacity=2 * MiB))
    trace = snap["device_traces"][0]
    assert [(e["action"], e["size"]) for e in trace] == [("oom", 3 * MiB), ("segment_alloc", 2 * MiB), ("alloc", 512)]
    assert snap["allocator_settings"]["capacity"] == 2 * MiB
    assert json.loads((tmp_path / "s.json").read_text()) == snap


def test_plan_offsets_and_check_errors():
    lowered = fl.jit(lambda x: fnp.sin(fnp.exp(x) * 2.0) + 1.0).lower(fnp.ones((64, 64)))
    plan, program = lowered.plan, lowered.program
    offsets = [plan.offset_of(v) for e in program.eqns for v in e.outputs]
    assert offsets == [0, 0, 64 * 64 * 4, None]       # exp; mul in place; sin; the output is not in the arena
    assert plan.offset_of(program.invars[0]) is None
    buf = plan.buffers[0]
    buf.offset = 8
    with pytest.raises(ValueError, match=f"MemoryPlan: buffer {buf.id} at offset 8 is not 64-aligned"):
        plan.check()
    buf.offset = plan.arena_bytes
    with pytest.raises(ValueError, match=f"MemoryPlan: buffer {buf.id} ends past the arena"):
        plan.check()


def test_record_and_profile_from_several_threads(monkeypatch):
    """Device threads (pmap) call the instrumented impls at once: every call is counted once and the shadow
    allocator of ``record`` is never corrupted (it used to raise from finalizers and lose counts)."""
    errors = []
    monkeypatch.setattr(sys, "unraisablehook", errors.append)
    old = sys.getswitchinterval()
    x = fnp.ones(3)

    def work():
        for _ in range(500):
            fnp.sin(x)
    sys.setswitchinterval(1e-6)       # switch threads as often as possible
    try:
        with fl.profile(trace=False) as prof, memory.record() as trace:
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        gc.collect()
    finally:
        sys.setswitchinterval(old)
    assert errors == [] and prof.ops["sin"].calls == 2000
    ids = [e.id for e in trace.events if e.kind == "alloc"]
    assert len(ids) == len(set(ids)) == 2000
    assert sorted(e.id for e in trace.events if e.kind == "free") == sorted(ids)
