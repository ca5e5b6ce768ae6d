"""jit: equals eager on the op table and under composed transforms, caches and retraces correctly, picks up
replaced impls, never aliases its outputs, and fails with clear errors."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from op_table import RECORDS

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.config import config
from flfun.core import ConcretizationError
from flfun.testing import arrays

JIT_RECORDS = [(r, r.dtypes[0]) for r in RECORDS]


def _check_close(out, expected, tol=1e-6):
    out_l, exp_l = fl.tree_leaves(out), fl.tree_leaves(expected)
    assert len(out_l) == len(exp_l)
    for o, e in zip(out_l, exp_l):
        o, e = np.asarray(o), np.asarray(e)
        assert o.shape == e.shape and o.dtype == e.dtype, (o.shape, o.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(o, e, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("rec,dtype", JIT_RECORDS, ids=[r.name for r, _ in JIT_RECORDS])
@given(data=st.data())
def test_jit_matches_eager_on_op_table(rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    args = [fnp.asarray(a) for a in args]
    fn = lambda *a: rec.fn(*a, **params)
    expected = fn(*args)
    compiled = fl.jit(fn).lower(*args).compile()
    if compiled.executable.arena is not None:
        compiled.executable.arena.fill(0xFF)          # NaN everywhere: reads before writes would show
    _check_close(compiled(*args), expected)
    prev, config.jit_planned = config.jit_planned, False
    try:
        _check_close(fl.jit(fn)(*args), expected)
    finally:
        config.jit_planned = prev


def f_scalar(x, y):
    return fnp.sum(fnp.tanh(x * y) ** 2 + fnp.sin(x) * 0.5)


def f_vec(x, y):
    return fnp.tanh(x * y) + fnp.exp(fnp.sin(x))


COMPOSED = {
    "grad(jit)": (lambda: fl.grad(fl.jit(f_scalar)), lambda: fl.grad(f_scalar)),
    "jit(grad)": (lambda: fl.jit(fl.grad(f_scalar)), lambda: fl.grad(f_scalar)),
    "jit(grad(jit))": (lambda: fl.jit(fl.grad(fl.jit(f_scalar), argnums=(0, 1))),
                       lambda: fl.grad(f_scalar, argnums=(0, 1))),
    "vmap(jit)": (lambda: fl.vmap(fl.jit(f_vec)), lambda: fl.vmap(f_vec)),
    "jit(vmap)": (lambda: fl.jit(fl.vmap(f_vec, in_axes=(0, None))), lambda: fl.vmap(f_vec, in_axes=(0, None))),
    "vmap(grad(jit))": (lambda: fl.vmap(fl.grad(fl.jit(f_scalar))), lambda: fl.vmap(fl.grad(f_scalar))),
    "jit(vmap(grad))": (lambda: fl.jit(fl.vmap(fl.grad(f_scalar))), lambda: fl.vmap(fl.grad(f_scalar))),
    "jvp(jit)": (lambda: lambda x, y: fl.jvp(fl.jit(f_vec), (x, y), (y, x)),
                 lambda: lambda x, y: fl.jvp(f_vec, (x, y), (y, x))),
    "jit(jvp)": (lambda: fl.jit(lambda x, y: fl.jvp(f_vec, (x, y), (y, x))),
                 lambda: lambda x, y: fl.jvp(f_vec, (x, y), (y, x))),
    "vjp(jit)": (lambda: lambda x, y: fl.vjp(fl.jit(f_vec), x, y)[1](x),
                 lambda: lambda x, y: fl.vjp(f_vec, x, y)[1](x)),
    "jacrev(jit)": (lambda: fl.jacrev(fl.jit(f_vec)), lambda: fl.jacrev(f_vec)),
    "jacfwd(jit)": (lambda: fl.jacfwd(fl.jit(f_vec)), lambda: fl.jacfwd(f_vec)),
    "hessian(jit)": (lambda: fl.hessian(fl.jit(f_scalar)), lambda: fl.hessian(f_scalar)),
    "jit(hessian)": (lambda: fl.jit(fl.hessian(f_scalar)), lambda: fl.hessian(f_scalar)),
    "grad(vmap(jit))": (lambda: fl.grad(lambda x, y: fnp.sum(fl.vmap(fl.jit(f_vec))(x, y))),
                        lambda: fl.grad(lambda x, y: fnp.sum(fl.vmap(f_vec)(x, y)))),
}


@pytest.mark.parametrize("name", list(COMPOSED))
@given(x=arrays("float32", (3, 2), low=-1, high=1), y=arrays("float32", (3, 2), low=-1, high=1))
def test_composed_transforms_match_eager(name, x, y):
    make_jitted, make_eager = COMPOSED[name]
    x, y = fnp.asarray(x), fnp.asarray(y)
    _check_close(make_jitted()(x, y), make_eager()(x, y), tol=2e-5)


def test_closures_constants_and_outer_tracers():
    w = fnp.asarray(np.arange(3.0, dtype=np.float32))
    f = fl.jit(lambda x: x * w + 1.0)
    _check_close(f(fnp.ones(3)), w + 1.0)
    # x is traced by grad outside; the inner jit takes it as an explicit input of the call primitive
    g = fl.grad(lambda x: fl.jit(lambda y: x * y * x)(2.0))
    assert float(g(3.0)) == pytest.approx(12.0)
    h = fl.vmap(lambda x: fl.jit(lambda y: fnp.sum(x * y))(fnp.ones(2)))
    _check_close(h(fnp.ones((4, 2))), fnp.full((4,), 2.0))


def test_nested_jit_is_inlined():
    inner = fl.jit(lambda x: fnp.sin(x) * 2.0)
    outer = fl.jit(lambda x: inner(x) + inner(x))
    x = fnp.asarray(np.linspace(0, 1, 4, dtype=np.float32))
    _check_close(outer(x), 4.0 * fnp.sin(x))
    assert "jit" not in [line.split("=")[-1].split()[0] for line in outer.lower(x).ir.splitlines()[1:-1]]
    assert "jit[" in fl.make_ir(lambda x: inner(x) + 1.0)(x).__str__()


def test_pytrees_kwargs_and_weak_scalars():
    f = fl.jit(lambda p, s, *, scale: {"y": p["a"] * s * scale, "z": (p["b"],)})
    p = {"a": fnp.ones(2), "b": fnp.zeros(3)}
    out = f(p, 2.0, scale=fnp.asarray(np.float32(3.0)))
    assert set(out) == {"y", "z"} and out["y"].dtype == np.float32
    _check_close(out["y"], fnp.full((2,), 6.0))
    assert f.trace_count == 1
    f(p, 3.0, scale=fnp.asarray(np.float32(3.0)))
    assert f.trace_count == 1                          # a new scalar value does not retrace
    f(p, fnp.asarray(np.float32(2.0)), scale=fnp.asarray(np.float32(3.0)))
    assert f.trace_count == 2                          # a strong f32 array is not a weak Python scalar


def test_retrace_counts_and_static_args():
    f = fl.jit(lambda x, n: x * n if n > 1 else -x, static_argnums=1)
    x = fnp.ones(3)
    _check_close(f(x, 3), fnp.full((3,), 3.0))
    f(fnp.full((3,), 2.0), 3)
    assert f.trace_count == 1
    _check_close(f(x, 1), -x)
    assert f.trace_count == 2
    f(fnp.ones(4), 1)
    assert f.trace_count == 3 and f._cache_size() == 3
    g = fl.jit(lambda x, mode: x + 1.0 if mode == "add" else x, static_argnames="mode")
    _check_close(g(x, mode="add"), x + 1.0)
    _check_close(g(x, mode="id"), x)
    assert g.trace_count == 2


def test_results_unaffected_by_later_calls():
    f = fl.jit(lambda x: fnp.exp(x) * 2.0 + x)
    a, b = fnp.asarray(np.zeros(5, np.float32)), fnp.asarray(np.ones(5, np.float32))
    ra = f(a)
    saved = np.array(ra)
    rb = f(b)
    np.testing.assert_array_equal(np.asarray(ra), saved)
    assert not np.shares_memory(np.asarray(ra), np.asarray(rb))


def test_outputs_never_alias_inputs_arena_or_each_other():
    def f(x):
        y = x * 2.0
        return x, y, y, fnp.reshape(y, (-1,)), fnp.reshape(x, (-1,)), fl.stop_gradient(y)
    x = fnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    compiled = fl.jit(f).lower(x).compile()
    outs = [np.asarray(o) for o in compiled(x)]
    arrays_ = outs + [np.asarray(x)]
    for i, a in enumerate(arrays_):
        for b in arrays_[i + 1:]:
            assert not np.shares_memory(a, b)
        arena = compiled.executable.arena
        assert arena is None or not np.shares_memory(a, arena)


def test_replacing_an_impl_changes_the_next_call():
    f = fl.jit(lambda x, y: x * y)
    x, y = fnp.full((3,), 2.0), fnp.full((3,), 5.0)
    _check_close(f(x, y), fnp.full((3,), 10.0))
    with fl.impl_override("mul", "numpy", lambda a, b, out=None: np.add(a, b, out=out)):
        _check_close(f(x, y), fnp.full((3,), 7.0))
    _check_close(f(x, y), fnp.full((3,), 10.0))
    assert f.trace_count == 1                          # recompiled, not retraced


def test_unplanned_switch_gives_identical_results():
    f = fl.jit(lambda x: fnp.sum(fnp.tanh(x) * x, axis=0) + 1.0)
    x = fnp.asarray(np.random.default_rng(0).standard_normal((8, 5), dtype=np.float32))
    planned = np.asarray(f(x))
    prev, config.jit_planned = config.jit_planned, False
    try:
        unplanned = np.asarray(f(x))
    finally:
        config.jit_planned = prev
    np.testing.assert_array_equal(planned, unplanned)


def test_env_var_turns_planning_off():
    code = ("import flfun as fl, flfun.numpy as fnp; from flfun.config import config; "
            "f = fl.jit(lambda x: x * 2.0 + 1.0); print(config.jit_planned, float(f(fnp.ones(2))[0]), "
            "f.lower(fnp.ones(2)).compile().executable.plan)")
    env = {**os.environ, "FLFUN_JIT_PLANNED": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "3.0", "None"], out.stderr


def test_lower_and_make_ir_text():
    f = lambda x, y: fnp.sum(x * y + 1.0)
    x = fnp.ones(4)
    text = str(fl.make_ir(f)(x, x))
    assert text == ("{ lambda ; a:f32[4] b:f32[4]. let\n    c:f32[4] = mul a b\n    d:f32[4] = add c 1.0:f32\n"
                    "    e:f32[] = reduce_sum[axes=(0,)] d\n  in (e,) }")
    lowered = fl.jit(f).lower(x, x)
    assert lowered.ir == text and lowered.ir == fl.jit(f).lower(x, x).ir
    assert lowered.plan.arena_bytes == 64 and lowered.plan.inplace_hits == 1
    assert float(lowered.compile()(x, x)) == 8.0


def test_error_unhashable_static_argument():
    f = fl.jit(lambda x, shape: fnp.reshape(x, shape), static_argnums=1)
    with pytest.raises(ValueError, match=r"static argument 1 of <lambda> must be hashable, got list \[2, 3\]"):
        f(fnp.ones(6), [2, 3])
    _check_close(f(fnp.ones(6), (2, 3)), fnp.ones((2, 3)))


def test_error_traced_value_in_python_control_flow():
    f = fl.jit(lambda x: x if x > 0 else -x)
    with pytest.raises(ConcretizationError, match=r"static_argnums") as info:
        f(1.0)
    assert "where" in str(info.value) and "select" in str(info.value)


def test_error_changed_pytree_structure():
    f = fl.jit(lambda d: d["a"] * 2.0)
    compiled = f.lower({"a": fnp.ones(2)}).compile()
    with pytest.raises(ValueError, match="changed pytree structure"):
        compiled({"a": fnp.ones(2), "b": fnp.ones(2)})
    with pytest.raises(ValueError, match=r"compiled for arguments \(f32\[2\]\) but called with \(f32\[3\]\)"):
        compiled({"a": fnp.ones(3)})
    f({"a": fnp.ones(2), "b": fnp.ones(2)})        # jit itself retraces on a new structure
    f({"a": fnp.ones(2)})
    assert f.trace_count == 2


def test_error_non_array_argument_and_bad_options():
    with pytest.raises(ValueError, match="argument leaf 0 of <lambda> is a str, not an array; mark it static"):
        fl.jit(lambda s: s)("hello")
    with pytest.raises(ValueError, match="static_argnums must be ints"):
        fl.jit(lambda x: x, static_argnums="x")
    with pytest.raises(ValueError, match="fun must be callable"):
        fl.jit(3)


def test_collectives_inside_jit_under_vmap():
    f = fl.vmap(fl.jit(lambda x: x - lax.pmean(x, "i")), axis_name="i")
    x = fnp.asarray(np.arange(6, dtype=np.float32).reshape(3, 2))
    _check_close(f(x), x - fnp.mean(x, axis=0))


def test_empty_arrays_and_constant_outputs():
    out = fl.jit(lambda x: (x * 2.0 + 1.0, fnp.sum(x, axis=0)))(fnp.ones((0, 3)))
    assert out[0].shape == (0, 3) and out[1].shape == (3,)
    assert int(fl.jit(lambda x: 3)(1.0)) == 3
    x, none = fl.jit(lambda x: (x, None))(fnp.ones(2))
    assert none is None and x.shape == (2,)
