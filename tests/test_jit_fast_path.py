"""jit's positional fast path: Arrays and tuples of Arrays (``f(params, x, y)``) skip the pytree flattening,
and different nestings of the same leaves never share a cached executable."""
from __future__ import annotations

import numpy as np

import flfun as fl
import flfun.numpy as fnp
from flfun.transforms import jit as jit_module


def test_tuple_arguments_hit_the_cache_and_keep_nestings_apart(monkeypatch):
    f = fl.jit(lambda *args: [fnp.sum(a) * (i + 1) for i, a in enumerate(fl.tree_leaves(args))])
    a, b = fnp.ones(3), fnp.arange(3.0)
    calls = [((a, b), a), (a, (b, a)), ((a,), (b, a)), (a, b, a), ((), a), ((a, b), a)]
    expected = [[3, 6, 9], [3, 6, 9], [3, 6, 9], [3, 6, 9], [3], [3, 6, 9]]
    for args, want in zip(calls, expected):
        for _ in range(2):                     # the second call runs from the fast cache
            assert [float(v) for v in f(*args)] == want
    assert f.trace_count == 5 and len(f._fast) == 5
    monkeypatch.setattr(jit_module, "tree_flatten", None)    # cached calls never flatten
    for args, want in zip(calls, expected):
        assert [float(v) for v in f(*args)] == want


def test_tuple_arguments_return_the_traced_structure():
    g = fl.jit(lambda p, x: {"y": p[0] * x, "b": (p[1],)})
    a, b = fnp.ones(3), fnp.arange(3.0)
    for _ in range(2):
        out = g((a, b), b)
        assert sorted(out) == ["b", "y"] and isinstance(out["b"], tuple)
        np.testing.assert_array_equal(np.asarray(out["y"]), [0, 1, 2])
    h = fl.jit(lambda p: p[0])
    for _ in range(2):
        assert isinstance(h((a,)), type(a))
