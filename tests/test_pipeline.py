"""The compile pipeline (flfun/compiler/pipeline.py): one cache key for jit and pmap (allocator, strategy, registry
version), the backend-compiler registry, and per-primitive lowerings (core.register_lowering) reaching fusion."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_devices import cpu_devices

import flfun as fl
import flfun.numpy as fnp
from flfun import lax, memory
from flfun.backends.cuda.lowering import kernel_source
from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise, fusible
from flfun.compiler.passes import optimize
from flfun.compiler.pipeline import compile_key, compile_program, register_backend_compiler
from flfun.core import Primitive, ShapedArray, default_device, register_impl, register_lowering
from flfun.ir import ClosedProgram, eval_program
from flfun.memory.planner import STRATEGIES, place_in_order, register_strategy
from flfun.transforms.jit import close_program
from flfun.transforms.staging import trace_to_program


class _Counting(memory.DirectAllocator):
    """A direct allocator that counts its mallocs."""

    def __init__(self):
        super().__init__()
        self.mallocs = 0

    def malloc(self, nbytes, device=None):
        self.mallocs += 1
        return super().malloc(nbytes, device)


def _f(x):
    return fnp.sin(x) * 2.0 + 1.0      # two arena intermediates (sin, mul)


def test_a_function_compiled_before_an_allocator_switch_gets_an_arena_from_the_new_allocator():
    f, x = fl.jit(_f), fnp.linspace(-1.0, 1.0, 256)
    want = np.sin(np.asarray(x, np.float64)) * 2 + 1
    f(x)
    f(x)                                # compiled and on the per-call fast path
    alloc = _Counting()
    with memory.use_allocator(alloc):
        np.testing.assert_allclose(np.asarray(f(x)), want, atol=1e-6)
        np.testing.assert_allclose(np.asarray(f(x)), want, atol=1e-6)
    assert alloc.mallocs == 1           # one arena, reused on the second call
    np.testing.assert_allclose(np.asarray(f(x)), want, atol=1e-6)
    assert alloc.mallocs == 1           # back on the old allocator's executable


def test_compile_key_changes_with_allocator_strategy_donation_and_registry_version():
    dev = default_device()
    key = compile_key(dev)
    assert compile_key(dev) == key and compile_key(dev, (), "auto") == key
    assert compile_key(dev, (), "best_fit") != key and compile_key(dev, (0,)) != key
    with memory.use_allocator(_Counting()):
        assert compile_key(dev) != key
    assert compile_key(dev) == key
    prim = Primitive("test_pipeline_version")
    register_impl(prim, "numpy", np.negative)
    assert compile_key(dev) != key
    key = compile_key(dev)
    register_lowering(prim, "cuda", lambda e, args: f"(-({args[0]}))")
    assert compile_key(dev) != key


def test_register_impl_recompiles_a_jitted_function():
    p = Primitive("test_pipeline_twice")
    p.def_abstract_eval(lambda x: x)
    register_impl(p, "numpy", lambda x: x * 2)
    f, x = fl.jit(lambda x: p.bind(x) + 1.0), fnp.ones(4)
    np.testing.assert_array_equal(np.asarray(f(x)), [3.0] * 4)
    register_impl(p, "numpy", lambda x: x * 3)
    np.testing.assert_array_equal(np.asarray(f(x)), [4.0] * 4)


@pytest.fixture
def recording_strategy():
    calls = []

    @register_strategy("test_pipeline_recording")
    def record(buffers, alignment):
        calls.append(len(buffers))
        return place_in_order(buffers)
    yield calls
    del STRATEGIES["test_pipeline_recording"]


def test_pmap_memory_strategy_reaches_the_planner(recording_strategy):
    with cpu_devices(2):
        f = fl.pmap(lambda x: fnp.sin(x) * 2.0 + 1.0, axis_name="i", memory_strategy="test_pipeline_recording")
        x = fnp.linspace(-1.0, 1.0, 2 * 64).reshape(2, 64)
        np.testing.assert_allclose(np.asarray(f(x)), np.sin(np.asarray(x)) * 2 + 1, rtol=1e-6)
        assert recording_strategy, "the pmap's strategy was never asked"
        assert f.lower(x).compile().plan.strategy == "test_pipeline_recording"
        assert fl.pmap(lambda x: x * 2.0, axis_name="i").lower(x).compile().plan.strategy == "auto"


def _closed(fn, *avals):
    return close_program(*trace_to_program(fn, list(avals)))[0]


def test_register_backend_compiler_is_used_and_cached_by_compile_program():
    closed = _closed(lambda x: [lax.sin(x) * 2.0], ShapedArray((3,), np.float32))
    seen = []

    def compiler(closed, device, donated, strategy):
        seen.append((device, donated, strategy))
        return lambda *args: ["mine"]
    old = register_backend_compiler("numpy", compiler)
    try:
        dev = default_device()
        assert compile_program(closed, dev, (), "best_fit")() == ["mine"]
        compile_program(closed, dev, (), "best_fit")
        assert seen == [(dev, (), "best_fit")]
    finally:
        assert register_backend_compiler("numpy", old) is compiler
    exe = compile_program(closed)
    np.testing.assert_allclose(exe(np.ones(3, np.float32))[0], np.sin(1.0) * 2, rtol=1e-6)


def test_register_backend_compiler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="register_backend_compiler: backend"):
        register_backend_compiler("", lambda *a: None)
    with pytest.raises(ValueError, match="register_backend_compiler: fn"):
        register_backend_compiler("numpy", 3)


def _user_square():
    p = Primitive("test_pipeline_square")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    register_impl(p, "numpy", lambda x: x * x)
    return p


def test_a_user_primitive_with_a_cuda_lowering_joins_a_fused_group():
    sq = _user_square()
    aval = ShapedArray((4, 5), np.float32)
    closed = _closed(lambda x: [lax.sin(lax.add(sq.bind(x), x))], aval)
    program, consts = optimize(closed.program, closed.consts)
    assert not fusible(program.eqns[0])              # no lowering yet: left out of the groups
    assert [e.prim.name for e in fuse_elementwise(program).eqns][0] == "test_pipeline_square"
    register_lowering(sq, "cuda", lambda e, args: f"(({args[0]}) * ({args[0]}))")
    fused = fuse_elementwise(program)
    assert len(fused.eqns) == 1 and isinstance(fused.eqns[0].prim, FusedPrimitive)
    group = fused.eqns[0].prim.group
    assert [e.prim.name for e in group.eqns] == ["test_pipeline_square", "add", "sin"]
    assert "((in0) * (in0))" in kernel_source(group).body
    x = np.linspace(-2, 2, 20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose(np.asarray(eval_program(fused, consts, [x])[0]), np.sin(x * x + x), rtol=1e-6)
    assert not fusible(program.eqns[0], "other_target")
    register_lowering(sq, "other_target", lambda e, args: "sq")
    assert fusible(program.eqns[0], "other_target") and not fusible(program.eqns[1], "other_target")


def test_register_lowering_rejects_a_non_primitive():
    with pytest.raises(TypeError, match="register_lowering: expected a Primitive"):
        register_lowering("sin", "cuda", lambda e, args: "x")


def test_closed_program_compiles_once_per_key():
    closed = ClosedProgram(*optimize(*trace_to_program(lambda x: [lax.exp(x) + 1.0],
                                                           [ShapedArray((8,), np.float32)])))
    dev = default_device()
    assert compile_program(closed, dev) is compile_program(closed, dev)
    assert compile_program(closed, dev, (), "naive") is not compile_program(closed, dev)
    assert compile_program(closed, dev, (), "naive").plan.strategy == "naive"
