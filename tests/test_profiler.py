"""Profiler: per-primitive table, Chrome trace contents, and zero footprint when off."""
import json

import numpy as np
import pytest

import flfun
import flfun.memory
import flfun.numpy as fnp
from flfun import core
from flfun.profiler import profile


def _impls():
    core.default_device()
    return {(p.name, b): f for p in core.PRIMITIVES.values() for b, f in p.impls.items()}


def test_profile_table_and_counts():
    x = fnp.asarray(np.arange(1000, dtype=np.float32))
    with profile() as prof:
        for _ in range(3):
            y = fnp.exp(x) * x
        s = fnp.sum(y)
    assert prof.ops["exp"].calls == 3 and prof.ops["mul"].calls == 3 and prof.ops["reduce_sum"].calls == 1
    assert prof.ops["exp"].bytes == 3 * 4000 and prof.ops["mul"].time_ns > 0
    table = prof.table(sort_by="calls")
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["primitive", "calls"]
    names = [ln.split()[0] for ln in lines[2:5]]
    assert names[:2] in (["exp", "mul"], ["mul", "exp"]) and names[2] == "reduce_sum"
    assert "total in impls" in table and "wall time" in table
    by_time = [ln.split()[0] for ln in prof.table("time").splitlines()[2:5]]
    assert by_time == sorted(by_time, key=lambda n: -prof.ops[n].time_ns)
    assert prof.table(limit=1).count("\n") == 5
    assert prof.wall_ns >= prof.total_ns > 0
    with pytest.raises(ValueError, match="sort_by: expected one of"):
        prof.table(sort_by="speed")
    assert float(s) > 0


def test_chrome_trace(tmp_path):
    x = fnp.ones((256, 256))
    with profile() as prof:
        fnp.tanh(x + 1.0)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["add", "tanh"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["args"]["bytes"] == 256 * 256 * 4 for e in slices)
    assert slices[0]["ts"] + slices[0]["dur"] <= slices[1]["ts"]
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert counters[-1]["args"]["cumulative"] == 2 * 256 * 256 * 4
    with profile(trace=False) as quiet:
        fnp.tanh(x)
    assert quiet.events == [] and quiet.ops["tanh"].calls == 1
    with pytest.raises(ValueError, match="export_chrome_trace: profile\\(trace=False\\)"):
        quiet.export_chrome_trace(str(path))


def test_profiling_off_leaves_impls_untouched():
    before = _impls()
    version = core.registry_version
    with profile():
        during = _impls()
        assert all(during[k] is not f for k, f in before.items())
        assert core.registry_version != version
    after = _impls()
    assert after.keys() == before.keys() and all(after[k] is f for k, f in before.items())
    assert not flfun.memory.telemetry._listeners and not flfun.memory.telemetry._saved


def test_profile_restores_on_error_and_keeps_foreign_replacements():
    before = _impls()
    exp_p = core.PRIMITIVES["exp"]
    with pytest.raises(RuntimeError), profile():
        raise RuntimeError("boom")
    assert _impls() == before
    mine = lambda x: np.exp(x)
    with profile():
        old = core.register_impl(exp_p, "numpy", mine)
    assert exp_p.impls["numpy"] is mine          # a replacement made while profiling survives
    core.register_impl(exp_p, "numpy", old.__wrapped__)
    assert _impls() == before


def test_profile_sees_jit_if_available():
    jit = getattr(flfun, "jit", None)
    if jit is None:
        pytest.skip("flfun.jit not available yet")
    f = jit(lambda a: fnp.tanh(a) * 2.0)
    x = fnp.ones((8,))
    f(x)
    with profile() as prof:
        f(x)
    assert prof.ops.get("tanh") and prof.ops["tanh"].calls == 1
