"""Telemetry: recording eager primitives, trace round trips, deterministic replay, compare/plot, memory viz."""
import gc
import json
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flfun
import flfun.numpy as fnp
from flfun import core
from flfun.memory import (
    CachingAllocator,
    DirectAllocator,
    Trace,
    compare,
    record,
    replay,
    to_memory_viz,
)
from flfun.memory.telemetry import format_table
from flfun.profiler import profile

MiB = 1 << 20


def _impls():
    return {(p.name, b): f for p in core.PRIMITIVES.values() for b, f in p.impls.items()}


def _loss(w, x):
    h = fnp.maximum(x * w, 0.0)
    return fnp.sum(fnp.tanh(h) * h)


def test_record_eager_grad_and_restore_impls():
    x = fnp.asarray(np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32))
    core.default_device()
    before = _impls()
    with record() as trace:
        g = flfun.grad(_loss)(x, x)
    assert _impls() == before and all(before[k] is f for k, f in _impls().items())
    ops = trace.by_op()
    assert ops["mul"][0] >= 3 and ops["mul"][1] >= 3 * 64 * 256 * 4
    assert "broadcast_in_dim" not in ops          # views of an input allocate nothing
    allocs = [e for e in trace if e.kind == "alloc"]
    assert all(e.allocated >= e.requested and e.allocated % 512 == 0 for e in allocs)
    assert trace.meta["live_at_end"] == 1         # only the gradient survives the block
    assert trace.live_bytes()[-1] == g.shape[0] * g.shape[1] * 4
    assert [e.t_ns for e in trace] == sorted(e.t_ns for e in trace)
    del g
    gc.collect()                                   # frees after the block are not recorded
    assert trace.meta["live_at_end"] == 1 and len(trace) == len(list(trace))


def test_record_frees_when_buffer_dies():
    x = fnp.ones((100,))
    with record(shadow=False) as trace:
        y = x * 2.0
        n = len(trace)
        del y
        assert len(trace) == n + 1 and trace.events[-1].kind == "free" and trace.events[-1].requested == 400
    assert trace.events[0].op == "mul" and trace.events[0].allocated == 400


def test_nested_record_and_profile_restore():
    before = _impls()
    with record() as t1, profile() as prof, record() as t2:
        fnp.exp(fnp.ones((10,)))
    assert _impls() == before
    assert t1.num_allocs == t2.num_allocs >= 1 and prof.ops["exp"].calls == 1


def test_trace_round_trip(tmp_path):
    t = Trace(meta={"model": "toy"})
    a = t.alloc(100, op="x")
    b = t.alloc(3 * MiB, op="y")
    t.free(a)
    t.alloc(7)
    for name in ("t.json", "t.json.gz"):
        t.save(tmp_path / name)
        u = Trace.load(tmp_path / name)
        assert u.events == t.events and u.meta == t.meta
        u.free(b)                                  # the live set survives the round trip
    with pytest.raises(ValueError, match="Trace.free: no live allocation with id 0"):
        t.free(a)
    (tmp_path / "bad.json").write_text(json.dumps({"x": 1}))
    with pytest.raises(ValueError, match="is not an flfun allocation trace"):
        Trace.load(tmp_path / "bad.json")


@given(st.lists(st.tuples(st.integers(1, 30 * MiB), st.booleans()), min_size=1, max_size=60))
def test_replay_is_deterministic(ops):
    t = Trace()
    live = []
    for n, free_one in ops:
        live.append(t.alloc(n))
        if free_one and live:
            t.free(live.pop(len(live) // 2))
    runs = [replay(t, CachingAllocator(memory="virtual", max_split_size=8 * MiB, capacity=200 * MiB))
            for _ in range(2)]
    for field in ("allocated", "reserved", "requested"):
        assert np.array_equal(getattr(runs[0], field), getattr(runs[1], field))
    assert runs[0].ooms == runs[1].ooms and runs[0].summary() == runs[1].summary()
    if not runs[0].ooms:
        assert runs[0].requested.tolist() == t.live_bytes().tolist()


def test_replay_classic_failure_and_compare(tmp_path):
    t = Trace()
    t.free(t.alloc(100 * MiB))
    t.alloc(50 * MiB)
    t.alloc(60 * MiB)
    res = compare(t, {"unrestricted": CachingAllocator(memory="virtual", capacity=120 * MiB),
                      "split limit": lambda: CachingAllocator(memory="virtual", capacity=120 * MiB,
                                                              max_split_size=64 * MiB)},
                  plot=str(tmp_path / "cmp.png"), printer=None)
    assert res["unrestricted"].ooms == [(3, 60 * MiB, "user")] and res["split limit"].ooms == []
    assert res["split limit"].summary()["peak_reserved"] == 110 * MiB
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    table = format_table(res, "classic")
    assert "unrestricted" in table and "110.00 MiB" in table
    with pytest.raises(MemoryError):
        replay(t, CachingAllocator(memory="virtual", capacity=120 * MiB), on_oom="raise")
    with pytest.raises(ValueError, match="on_oom: expected 'skip' or 'raise'"):
        replay(t, DirectAllocator(memory="virtual"), on_oom="ignore")


def test_replay_fragmentation_series():
    t = Trace()
    t.alloc(1000)
    r = replay(t, CachingAllocator(memory="virtual"))
    assert r.allocated.tolist() == [1024] and r.reserved.tolist() == [2 * MiB]
    assert r.fragmentation[0] == pytest.approx(1 - 1000 / 1024)
    assert r.summary()["internal_fragmentation"] == pytest.approx(1 - 1000 / 1024)


@pytest.mark.parametrize("suffix", ["json", "pickle"])
def test_memory_viz_snapshot(tmp_path, suffix):
    t = Trace()
    a = t.alloc(3 * MiB, op="matmul")
    t.alloc(100, op="add")
    t.free(a)
    path = tmp_path / f"snap.{suffix}"
    snap = to_memory_viz(t, str(path))
    loaded = json.loads(path.read_text()) if suffix == "json" else pickle.loads(path.read_bytes())
    assert loaded == json.loads(json.dumps(snap))
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions == ["segment_alloc", "alloc", "segment_alloc", "alloc", "free_requested", "free_completed"]
    assert snap["device_traces"][0][1]["frames"][0]["name"] == "matmul"
    states = sorted(b["state"] for s in snap["segments"] for b in s["blocks"])
    assert states == ["active_allocated", "inactive", "inactive"]


def test_fragmentation_script_classic_case():
    frag = pytest.importorskip("benchmarks.fragmentation")
    text = frag.classic()
    assert "unrestricted: OOM at 60 MiB (six)" in text and "all three allocations succeed" in text
