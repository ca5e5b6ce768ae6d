"""IR passes: each is semantics-preserving on random programs, and each does its job."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from random_programs import programs

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.ir import ClosedProgram, Literal, Var, eval_program, typecheck
from flfun.compiler.passes import (
    FOLD_MAX_BYTES,
    PASSES,
    cse,
    dce,
    fold_constants,
    inline_calls,
    optimize,
    partial_eval,
)


def _run(program, consts, inputs):
    return [np.asarray(o) for o in eval_program(program, consts, [fnp.asarray(x) for x in inputs])]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", ["simplify", "fold", "cse", "dce", "inline"])
@given(prog=programs())
def test_pass_preserves_semantics(name, prog):
    program, consts, inputs = prog
    new, new_consts = PASSES[name](program, consts)
    typecheck(new)
    _same(_run(new, new_consts, inputs), _run(program, consts, inputs))
    assert [v.aval.shape for v in new.outvars] == [v.aval.shape for v in program.outvars]


@given(prog=programs())
def test_pipeline_preserves_semantics_and_never_grows(prog):
    program, consts, inputs = prog
    new, new_consts = optimize(program, consts)
    typecheck(new)
    _same(_run(new, new_consts, inputs), _run(program, consts, inputs))
    assert len(new.eqns) <= len(program.eqns)


@given(prog=programs())
def test_dce_leaves_only_live_equations(prog):
    new, _ = dce(*prog[:2])
    used = {v.id for e in new.eqns for v in e.inputs if type(v) is Var} | {v.id for v in new.outvars
                                                                            if type(v) is Var}
    assert all(any(v.id in used for v in e.outputs) for e in new.eqns)


@given(prog=programs())
def test_cse_leaves_no_duplicate(prog):
    new, _ = cse(*prog[:2])
    keys = [(e.prim.name, tuple(v.key if type(v) is Literal else v.id for v in e.inputs),
             tuple(sorted(map(str, e.params.items())))) for e in new.eqns]
    assert len(keys) == len(set(keys))


@given(prog=programs())
def test_fold_leaves_no_small_constant_equation(prog):
    new, _ = fold_constants(*prog[:2])
    consts = {v.id for v in new.constvars}
    for e in new.eqns:
        if all(type(v) is Literal or v.id in consts for v in e.inputs):
            assert sum(v.aval.nbytes for v in e.outputs) > FOLD_MAX_BYTES


@given(prog=programs())
def test_simplify_removes_identities(prog):
    new, _ = optimize(prog[0], prog[1], ("simplify", "dce"))
    for e in new.eqns:
        if e.prim.name in ("add", "sub"):
            assert not any(type(v) is Literal and v.val == 0 for v in e.inputs[1:]), str(new)
        if e.prim.name == "mul":
            assert not any(type(v) is Literal and v.val == 1 for v in e.inputs), str(new)
        if e.prim.name in ("reshape", "broadcast_in_dim", "transpose"):
            assert e.inputs[0].aval.shape != e.outputs[0].aval.shape or e.prim.name == "transpose"


def _prog(f, *args):
    return fl.make_ir(f)(*args)


def test_simplify_exact_patterns():
    x = fnp.ones((2, 3))
    closed = _prog(lambda x: lax.neg(lax.neg(x * 1.0 + 0.0)), x)
    new, _ = optimize(closed.program, closed.consts)
    assert new.eqns == [] and new.outvars == new.invars
    closed = _prog(lambda x: fnp.reshape(fnp.reshape(x, (3, 2)), (6,)), x)
    new, _ = optimize(closed.program, closed.consts)
    assert [e.prim.name for e in new.eqns] == ["reshape"]


def test_transpose_of_dot_becomes_swapped_dot():
    a, b = fnp.ones((4, 3)), fnp.ones((4, 5))
    from flfun.primitives.linalg import dot_general
    closed = _prog(lambda a, b: lax.sin(fnp.transpose(dot_general(a, b, (((0,), (0,)), ((), ()))))), a, b)
    new, _ = optimize(closed.program, closed.consts)
    assert [e.prim.name for e in new.eqns] == ["dot_general", "sin"]
    assert new.eqns[0].params["dimension_numbers"] == (((0,), (0,)), ((), ()))
    assert new.eqns[0].inputs == tuple(new.invars[::-1])


def test_gather_gradient_accumulates_by_scattering_into_the_addend():
    idx = np.array([2, 0, 2, 3])                      # a repeated index
    f = fl.grad(lambda z: fnp.sum(z[fnp.asarray(idx)] * fnp.arange(4.0)) + fnp.sum(z * z))
    z = np.array([1.0, -2.0, 0.5, 3.0, 4.0])
    closed = _prog(f, fnp.asarray(z))
    new, consts = optimize(closed.program, closed.consts)
    names = [e.prim.name for e in new.eqns]
    assert names.count("scatter") == 1 and names[-1] == "scatter", str(new)
    expected = 2 * z
    np.add.at(expected, idx, np.arange(4.0))
    np.testing.assert_allclose(_run(new, consts, [z])[0], expected)
    np.testing.assert_allclose(np.asarray(fl.jit(f)(fnp.asarray(z))), expected)


def test_broadcast_operands_are_left_to_numpy():
    x, r = fnp.ones((4, 3)), fnp.ones((4,))
    closed = _prog(lambda x, r: x * lax.broadcast_in_dim(r, (4, 3), (0,)) + lax.broadcast_in_dim(
        fnp.ones(3), (4, 3), (1,)), x, r)
    new, _ = optimize(closed.program, closed.consts)
    assert [e.prim.name for e in new.eqns] == ["reshape", "mul", "add"], str(new)


def test_grad_program_is_simplified():
    f = lambda x, y: fnp.sum(fnp.sin(x) * y + 1.0)
    x = fnp.ones(5)
    closed = _prog(fl.grad(f), x, x)
    new, _ = optimize(closed.program, closed.consts)
    assert str(new) == ("{ lambda ; a:f32[5] b:f32[5]. let\n    c:f32[5] = cos a\n    d:f32[5] = mul b c\n"
                        "  in (d,) }")


def test_inline_nested_calls_and_partial_eval():
    inner = fl.jit(lambda x: fnp.sin(x) * 2.0)
    closed = _prog(lambda x: inner(inner(x)) + 1.0, fnp.ones(3))
    assert [e.prim.name for e in closed.program.eqns] == ["jit", "jit", "add"]
    new, consts = inline_calls(closed.program, closed.consts)
    assert [e.prim.name for e in new.eqns] == ["sin", "mul", "sin", "mul", "add"]
    x = np.array([0.1, 0.2, 0.3], np.float32)
    _same(_run(new, consts, [x]), _run(closed.program, closed.consts, [x]))
    known, unknown, res_in = partial_eval(new, [False], 0)
    assert known.eqns == [] and len(unknown.eqns) == 5 and res_in == []


def test_optimize_rejects_unknown_pass():
    closed = _prog(lambda x: x + 1.0, fnp.ones(2))
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        optimize(closed.program, closed.consts, ("dce", "nope"))


def test_closed_program_checks_consts():
    c = fnp.asarray(np.arange(3.0, dtype=np.float32))
    closed = _prog(lambda x: x * c, fnp.ones(3))
    with pytest.raises(ValueError, match="1 constvars but 0 consts"):
        ClosedProgram(closed.program, [])


def test_scatter_add_rewrite_keeps_broadcasting():
    i = fnp.asarray(np.array([0]))
    u = fnp.asarray(np.array([5.0], np.float32))

    def f(u, y):
        return fnp.zeros(3).at[i].add(u) + y
    for y in (fnp.zeros((1, 3)), fnp.zeros((2, 3))):
        np.testing.assert_array_equal(np.asarray(fl.jit(f)(u, y)), np.asarray(f(u, y)))
