"""Memory planner and executor invariants: no two simultaneously live buffers overlap, nothing is read before it
is written (the arena is filled with NaN before each run), inputs are never overwritten unless donated, and every
strategy is valid on random programs and on the MLP training step (W3)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from random_programs import programs

import flfun as fl
import flfun.numpy as fnp
from flfun.compiler.liveness import plan_program
from flfun.compiler.pipeline import compile_program
from flfun.config import config
from flfun.ir import ClosedProgram, eval_program
from flfun.memory.planner import STRATEGIES, BufferSpec, MemoryPlan, register_strategy
from flfun.nn import functional as F
from flfun.nn.losses import softmax_cross_entropy
from flfun.primitives.linalg import dot_general

STRATEGY_NAMES = ["naive", "greedy_by_size", "best_fit", "auto"]


def _overlap_free(specs: list[BufferSpec], offsets: dict) -> None:
    for i, a in enumerate(specs):
        assert offsets[a.id] >= 0
        for b in specs[i + 1:]:
            if a.overlaps_in_time(b) and a.size and b.size:
                assert (offsets[a.id] + a.size <= offsets[b.id] or offsets[b.id] + b.size <= offsets[a.id]), \
                    f"{a} and {b} overlap at {offsets[a.id]} / {offsets[b.id]}"


@st.composite
def buffer_specs(draw):
    n = draw(st.integers(0, 25))
    out = []
    for i in range(n):
        start = draw(st.integers(0, 30))
        out.append(BufferSpec(i, 64 * draw(st.integers(0, 20)), start, start + draw(st.integers(0, 10))))
    return out


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@given(specs=buffer_specs())
def test_strategies_place_live_buffers_apart(strategy, specs):
    offsets = STRATEGIES[strategy](specs, 64)
    _overlap_free(specs, offsets)
    assert all(o % 64 == 0 for o in offsets.values())


def _unplanned(closed, inputs, strategy):
    prev, config.jit_planned = config.jit_planned, False
    try:
        return compile_program(closed, strategy=strategy)(*inputs)
    finally:
        config.jit_planned = prev


def _run_checked(closed: ClosedProgram, inputs, strategy="auto", eager_reference=True, runs=2):
    """Run planned (NaN-filled arena) ``runs`` times and unplanned: they and the eager result must agree."""
    unplanned = [np.asarray(o) for o in _unplanned(closed, inputs, strategy)]
    expected = [np.asarray(o) for o in eval_program(closed.program, closed.consts,
                                                    [fnp.asarray(x) for x in inputs])] if eager_reference \
        else unplanned
    exe = compile_program(closed, strategy=strategy)
    exe.plan.check()
    originals = [np.array(x) for x in inputs]
    for _ in range(runs):
        if exe.arena is not None:
            exe.arena.fill(0xFF)          # NaN in every float buffer: a read before a write shows up
        outs = exe(*inputs)
        for o, e in zip(outs, expected):
            np.testing.assert_allclose(np.asarray(o), e, rtol=1e-6, atol=1e-6, equal_nan=True)
            assert exe.arena is None or not np.may_share_memory(o, exe.arena)
    for x, orig in zip(inputs, originals):
        np.testing.assert_array_equal(x, orig)        # inputs are never written
    for o, u in zip(outs, unplanned):
        np.testing.assert_array_equal(np.asarray(o), u)
    return exe


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@given(prog=programs())
def test_random_programs_run_planned(strategy, prog):
    program, consts, inputs = prog
    exe = _run_checked(ClosedProgram(program, consts), inputs, strategy)
    plan = exe.plan
    assert plan.lower_bound <= plan.arena_bytes <= plan.no_reuse_bytes
    if strategy == "naive":
        assert plan.arena_bytes == plan.no_reuse_bytes


def _mlp(sizes, batch, seed=3):
    rng = np.random.default_rng(seed)
    params = []
    for fi, fo in zip(sizes, sizes[1:]):
        w = rng.standard_normal((fi, fo), dtype=np.float32) * np.float32(np.sqrt(2 / fi))
        params.append((fnp.asarray(w), fnp.zeros((fo,), dtype=fnp.float32)))
    x = fnp.asarray(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
    y = fnp.asarray(rng.integers(0, sizes[-1], batch).astype(np.int32))
    return params, x, y


def mlp_step(params, x, y):
    def loss(params):
        h = x
        for i, (w, b) in enumerate(params):
            h = dot_general(h, w, (((1,), (0,)), ((), ()))) + b
            h = F.relu(h) if i < len(params) - 1 else h
        return softmax_cross_entropy(h, y)
    value, grads = fl.value_and_grad(loss)(params)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)], value


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_mlp_step_plan(strategy):
    params, x, y = _mlp((20, 32, 32, 10), 16)
    lowered = fl.jit(mlp_step, memory_strategy=strategy).lower(params, x, y)
    closed = ClosedProgram(lowered.program, lowered.consts)
    leaves = [np.asarray(v) for v in fl.tree_leaves((params, x, y))]
    exe = _run_checked(closed, leaves, strategy)
    assert exe.plan.inplace_hits > 0


def test_w3_plan_figures(tmp_path):
    params, x, y = _mlp((784, 1024, 1024, 10), 256)
    lowered = fl.jit(mlp_step).lower(params, x, y)
    plan = lowered.plan
    assert plan.arena_bytes <= 1.05 * plan.lower_bound
    assert plan.arena_bytes <= 0.35 * plan.naive_bytes
    assert plan_program(lowered.program, strategy="naive").arena_bytes == 0   # nothing writes out=
    closed = ClosedProgram(lowered.program, lowered.consts)
    exe = compile_program(closed)
    exe.arena.fill(0xFF)
    step = fl.jit(mlp_step)
    losses = []
    for _ in range(2):
        exe.arena.fill(0xFF)
        params, loss = step(params, x, y)
        losses.append(float(loss))
    np.testing.assert_allclose(losses, [3.10194, 2.78428], rtol=2e-5)
    text = plan.summary()
    assert "lower bound" in text and "in-place" in text and "offset" in text
    plan.plot(str(tmp_path / "plan.png"))
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"


def test_register_strategy_and_unknown_name():
    @register_strategy("reverse_start_first_fit")
    def reverse(buffers, alignment):
        from flfun.memory.planner import place_in_order
        return place_in_order(sorted(buffers, key=lambda b: -b.start))
    try:
        params, x, y = _mlp((8, 16, 4), 4)
        step = fl.jit(mlp_step, memory_strategy="reverse_start_first_fit")
        out, _ = step(params, x, y)
        ref, _ = mlp_step(params, x, y)
        np.testing.assert_allclose(np.asarray(out[0][0]), np.asarray(ref[0][0]), rtol=1e-6)
        assert step.lower(params, x, y).plan.strategy == "reverse_start_first_fit"
    finally:
        del STRATEGIES["reverse_start_first_fit"]
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        fl.jit(mlp_step, memory_strategy="nope")(params, x, y)
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        register_strategy("")


def test_plan_check_detects_overlap():
    params, x, y = _mlp((8, 16, 4), 4)
    plan = fl.jit(mlp_step).lower(params, x, y).plan
    assert isinstance(plan, MemoryPlan) and len(plan.buffers) >= 2
    live = sorted(plan.buffers, key=lambda b: b.start)
    a, b = live[0], next(b for b in live[1:] if b.start <= live[0].end)
    b.offset = a.offset
    with pytest.raises(ValueError, match="overlap in memory and in time"):
        plan.check()


def test_donated_input_is_updated_in_place():
    f = fl.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
    w, g = fnp.asarray(np.ones((64, 64), np.float32)), fnp.full((64, 64), 2.0)   # fnp.ones is a read-only view
    plan = f.lower(w, g).plan
    assert plan.inplace_hits == 1 and plan.arena_bytes == 64 * 64 * 4     # 0.5 * g in the arena
    ptr = w._value.ctypes.data
    out = f(w, g)
    assert out._value.ctypes.data == ptr                  # written into the donated buffer
    np.testing.assert_array_equal(np.asarray(out), np.zeros((64, 64)))
    with pytest.raises(RuntimeError, match="donated"):
        _ = w.shape
    np.testing.assert_array_equal(np.asarray(g), np.full((64, 64), 2.0))


def test_donation_of_a_shared_buffer_copies():
    w = fnp.ones((8,))
    alias = fl.stop_gradient(w)             # eager stop_gradient shares w's buffer
    f = fl.jit(lambda w: w * 3.0, donate_argnums=0)
    np.testing.assert_array_equal(np.asarray(f(w)), np.full(8, 3.0))
    np.testing.assert_array_equal(np.asarray(alias), np.ones(8))
    a = fnp.ones((4,))
    with pytest.raises(ValueError, match="already donated"):
        fl.jit(lambda a, b: a + b, donate_argnums=(0, 1))(a, a)


def test_w6_transformer_plan_and_run():
    w7 = pytest.importorskip("benchmarks.w7_memory")
    steps = w7.flfun_steps()
    if "W6" not in steps:
        pytest.skip("models.transformer is not available")
    step, args, _ = steps["W6"]
    lowered = fl.jit(step).lower(*args)
    plan = lowered.plan
    assert plan.arena_bytes <= 1.05 * plan.lower_bound
    assert plan.arena_bytes <= 0.35 * plan.naive_bytes
    _run_checked(ClosedProgram(lowered.program, lowered.consts), [np.asarray(v) for v in fl.tree_leaves(args)],
                 eager_reference=False, runs=1)
