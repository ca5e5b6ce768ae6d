"""The CPU executor's tools and its re-entrant call: ``Executable.profile`` and the unplanned fallback."""
from __future__ import annotations

import time

import numpy as np

from flfun import lax
from flfun.compiler.executor import Executable, writes_out
from flfun.compiler.liveness import plan_program
from flfun.core import ShapedArray, default_device
from flfun.transforms.jit import close_program
from flfun.transforms.staging import trace_to_program


def _executable():
    device = default_device()      # (loads the backend's impls)

    def f(x, y):
        return [lax.tanh(lax.add(lax.mul(x, y), x))]
    program, consts = trace_to_program(f, [ShapedArray((3, 4), np.float32)] * 2, dynamic=True)
    closed, _ = close_program(program, consts)
    plan = plan_program(closed.program, writes_out("numpy"))
    return Executable(closed.program, closed.consts, device, plan)


def _inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]


def test_profile_times_every_equation_and_leaves_results_alone():
    exe, (x, y) = _executable(), _inputs()
    rows = exe.profile(x, y, repeat=3, clock=time.process_time)
    assert [(i, name) for i, name, _ in rows] == [(i, e.prim.name) for i, e in enumerate(exe.program.eqns)]
    assert [name for _, name, _ in rows] == ["mul", "add", "tanh"]
    assert all(t >= 0.0 for _, _, t in rows)
    np.testing.assert_allclose(exe(x, y)[0], np.tanh(x * y + x), rtol=1e-6)


def test_reentrant_call_runs_unplanned_without_touching_the_arena():
    exe, (x, y) = _executable(), _inputs()
    assert exe.arena is not None
    want = exe(x, y)[0]
    arena_before = exe.arena.copy()
    with exe._lock:          # as if another thread were running the planned code
        out = exe(2 * x, y)[0]
    np.testing.assert_array_equal(exe.arena, arena_before)
    np.testing.assert_allclose(out, np.tanh(2 * x * y + 2 * x), rtol=1e-6)
    assert exe._fallback is not None and exe._fallback.plan is None
    np.testing.assert_array_equal(exe(x, y)[0], want)
