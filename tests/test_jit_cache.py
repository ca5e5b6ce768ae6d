"""jit's compiled-program cache is bounded: least recently used programs beyond ``cache_size`` entries or
``cache_bytes`` of pinned arena bytes are dropped, their arenas are freed, ``cache_info()`` counts it all, and results
never change."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.compiler.cache import ProgramCache


def _f(x):      # the matmul keeps an intermediate in the arena, fused CPU kernels or not
    return fnp.sum(fnp.tanh(x * 2.0).T @ x, axis=0)


def _executables(jf) -> list:
    return [v for t in jf._traces.values() for v in t.closed.cache.values() if hasattr(v, "arena")]


@settings(max_examples=20, deadline=None)
@given(size=st.integers(1, 4), calls=st.lists(st.integers(1, 7), min_size=1, max_size=25))
def test_lru_by_entries_matches_a_model_and_eager(size, calls):
    jf = fl.jit(_f, cache_size=size)
    model: list = []                      # most recently used last
    misses = evictions = 0
    for n in calls:
        x = fnp.arange(float(n * 3)).reshape(n, 3)
        np.testing.assert_allclose(np.asarray(jf(x)), np.asarray(_f(x)), rtol=1e-6)
        if n in model:
            model.remove(n)
        else:
            misses += 1
            if len(model) == size:
                model.pop(0)
                evictions += 1
        model.append(n)
    info = jf.cache_info()
    assert (info.entries, info.misses, info.evictions, info.max_entries) == (len(model), misses, evictions, size)
    assert info.hits == len(calls) - misses and jf.trace_count == misses
    assert sorted(t.avals[0].shape[0] for t in jf._traces.values()) == sorted(model)
    assert len(jf._fast) == len(model)      # no fast-path entry outlives its program


def test_evicted_arenas_are_released():
    jf = fl.jit(_f, cache_size=2)
    refs = []
    for n in (64, 128, 256, 512):
        jf(fnp.ones((n, 64)))
        refs += [weakref.ref(e) for e in _executables(jf) if all(r() is not e for r in refs)]
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert len(refs) == 4 and len(alive) == 2 and all(e.arena.nbytes > 0 for e in alive)
    assert jf.cache_info().arena_bytes == sum(e.arena.nbytes for e in alive)


def test_lru_by_pinned_bytes():
    jf = fl.jit(_f)
    jf(fnp.ones((256, 64)))
    one = jf.cache_info().arena_bytes
    assert one > 0
    jb = fl.jit(_f, cache_bytes=int(2.5 * one))
    for n in (256, 16, 256, 255, 254, 16):
        jb(fnp.ones((n, 64)))
        info = jb.cache_info()
        assert info.arena_bytes <= 2.5 * one or info.entries == 1
    info = jb.cache_info()
    assert info.evictions >= 2 and info.arena_bytes <= info.max_bytes
    jt = fl.jit(_f, cache_bytes=1)        # a single program bigger than the budget is still kept
    jt(fnp.ones((256, 64)))
    jt(fnp.ones((256, 64)))
    assert jt.cache_info().entries == 1 and jt.cache_info().hits == 1


def test_cache_bounds_are_checked_and_default_from_config(monkeypatch):
    with pytest.raises(ValueError, match="jit: max_entries .* must be a positive int, got -1"):
        fl.jit(_f, cache_size=-1)
    with pytest.raises(ValueError, match="jit: max_bytes .* must be a positive int, got 1.5"):
        fl.jit(_f, cache_bytes=1.5)
    monkeypatch.setattr(fl.config, "jit_cache_size", 3)
    assert fl.jit(_f).cache_info().max_entries == 3


def test_clear_cache_resets_entries():
    jf = fl.jit(_f)
    jf(fnp.ones((2, 3)))
    jf.clear_cache()
    assert jf.cache_info().entries == 0 and not jf._fast
    jf(fnp.ones((2, 3)))
    assert jf.trace_count == 2


def test_program_cache_alone():
    dropped = []
    c = ProgramCache(2, 100, lambda k, v: dropped.append(k))
    c["a"], c["b"] = 1, 2
    assert c.get("a") == 1
    c["c"] = 3                          # "b" is the least recently used
    assert dropped == ["b"] and c.get("b") is None
    c.pin("a", 80)
    c.pin("c", 30)                      # over 100 bytes: "a" goes, "c" (the newest) stays
    assert dropped == ["b", "a"] and c.info().arena_bytes == 30 and len(c) == 1


def test_pmap_cache_is_the_same_lru():
    from cpu_devices import cpu_devices
    with cpu_devices(2):
        pf = fl.pmap(_f, cache_size=2)
        refs = []
        for n in (1, 2, 1, 3, 4):
            x = fnp.arange(float(2 * n * 3)).reshape(2, n, 3)
            np.testing.assert_allclose(np.asarray(pf(x)), np.stack([np.asarray(_f(x[i])) for i in range(2)]),
                                       rtol=1e-6)
            refs += [weakref.ref(e) for t in pf._traces.values() for e in t[0].cache.values()
                     if hasattr(e, "arena") and all(r() is not e for r in refs)]
        info = pf.cache_info()
        assert (info.entries, info.misses, info.hits, info.evictions, info.max_entries) == (2, 4, 1, 2, 2)
        assert pf.trace_count == 4 and len(pf._fast) == 2    # no fast-path entry outlives its program
        gc.collect()
        alive = [r() for r in refs if r() is not None]
        assert len(refs) == 8 and len(alive) == 4                    # two programs x two devices
        assert info.arena_bytes == sum(e.arena.nbytes for e in alive) > 0
        pf.clear_cache()
        assert pf.cache_info().entries == 0
    with pytest.raises(ValueError, match="pmap: max_entries .* must be a positive int, got 0"):
        fl.pmap(_f, cache_size=0)
