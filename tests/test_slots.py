"""A primitive's behaviour lives in slots on it: a user primitive declares each one and sees its effect on the eager
tape, the simplify pass and jit's memory plan. Also: the public rule API, name clashes, lax's namespace, the
primitive families' import order, and the README's "Writing a primitive" example."""
from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
import types

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import lax, primitives
from flfun.compiler.executor import writes_out
from flfun.compiler.liveness import plan_program
from flfun.compiler.passes import simplify
from flfun.primitives import rules
from flfun.transforms.staging import trace_to_program

ROOT = pathlib.Path(__file__).resolve().parents[1]
F32 = rules.ShapedArray((4,), np.dtype("float32"))


@pytest.fixture(autouse=True)
def _forget_test_primitives():
    """The primitives a test defines leave the registry with it (other files reuse such names)."""
    from flfun import core
    before = set(core.PRIMITIVES)
    yield
    for name in set(core.PRIMITIVES) - before:
        del core.PRIMITIVES[name]


def _unary(name: str, impl, **slots) -> rules.Primitive:
    p = rules.Primitive(name, replace=True)
    p.def_abstract_eval(lambda x, **params: rules.ShapedArray(x.shape, x.dtype))
    p.def_batch(rules.vectorized_batch(p))
    rules.register_impl(p, "numpy", impl)
    for k, v in slots.items():
        setattr(p, k, v)
    return p


def _names(program) -> list[str]:
    return [e.prim.name for e in program.eqns]


# ------------------------------------------------------------------------------------------------- the tape
@pytest.mark.parametrize("linear_in", [None, "all"])
def test_linear_in_slot_decides_the_tape_route(linear_in):
    calls = {"jvp": 0, "transpose": 0}
    p = _unary("test_twice", lambda x: x * 2)

    def jvp(primals, tangents):
        calls["jvp"] += 1
        return p.bind(*primals), p.bind(rules.instantiate(tangents[0]))
    p.def_jvp(jvp)

    @p.def_transpose
    def transpose(ct, x):
        calls["transpose"] += 1
        return [p.bind(ct)]
    p.linear_in = linear_in
    g = fl.grad(lambda x: fnp.sum(p.bind(x) * x))(fnp.asarray([1.0, 2.0]))
    np.testing.assert_allclose(g, [4.0, 8.0])
    # declared linear: the tape applies the transpose rule; otherwise it linearizes (jvp) and then transposes
    assert calls["transpose"] == 1 and calls["jvp"] == (0 if linear_in else 1)


# ----------------------------------------------------------------------------------------------- the passes
def _binary_user(name: str, **slots) -> rules.Primitive:
    p = rules.Primitive(name, replace=True)
    p.def_abstract_eval(rules.naryop_abstract_eval(name, "float"))
    p.def_batch(rules.broadcasting_batch(p))
    rules.register_impl(p, "numpy", np.multiply)
    for k, v in slots.items():
        setattr(p, k, v)
    return p


@pytest.mark.parametrize("declared", [False, True])
def test_identities_and_elementwise_slots_reach_simplify(declared):
    p = _binary_user("test_times", **({"elementwise": True, "identities": ((1, 1.0),)} if declared else {}))
    program, consts = trace_to_program(lambda x: [p.bind(x, lax.full((4,), 1.0, "float32"))], [F32])
    out, _ = simplify(program, consts)
    assert ("test_times" in _names(out)) is not declared
    # a broadcast scalar operand of a declared elementwise op is fed as the scalar itself
    program, consts = trace_to_program(lambda x, s: [p.bind(x, lax.broadcast_in_dim(s, (4,), ()))],
                                       [F32, rules.ShapedArray((), np.dtype("float32"))])
    out, _ = simplify(program, consts)
    assert (out.eqns[-1].inputs[1].aval.shape == ()) is declared


@pytest.mark.parametrize("slot", ["chain", "involution", None])
def test_chain_and_involution_slots_reach_simplify(slot):
    slots = {"chain": {"chain": lambda inner, outer: {"k": inner["k"] * outer["k"]}},
             "involution": {"involution": True}, None: {}}[slot]
    p = _unary("test_scale_k", lambda x, *, k: x * k, **slots)
    program, consts = trace_to_program(lambda x: [p.bind(p.bind(x, k=2.0), k=3.0)], [F32])
    out, _ = simplify(program, consts)     # (the inner equation stays, dead, for dead-code elimination)
    x, result = out.invars[0], out.outvars[0]
    if slot == "involution":
        assert result is x
    else:
        last = out.eqns[-1]
        assert last.outputs[0] is result and (last.inputs[0] is x) is (slot == "chain")
        assert last.params == ({"k": 6.0} if slot == "chain" else {"k": 3.0})


def test_value_preserving_slot_propagates_uniform_values():
    p = _unary("test_copy", lambda x: x.copy())
    add = primitives.get("add")

    def f(x):
        return [lax.add(x, p.bind(lax.full((4,), 0.0, "float32")))]
    for preserving in (False, True):
        p.value_preserving = preserving
        program, consts = trace_to_program(f, [F32])
        out, _ = simplify(program, consts)
        # a uniform zero passed through a value-preserving op is still known to be 0, so x + 0 goes
        assert (add in [e.prim for e in out.eqns]) is not preserving


# ------------------------------------------------------------------------------------------- the memory plan
def _plan_targets(fn, writes: bool | None):
    p = _unary("test_exp_like", fn)
    rules.register_impl(p, "numpy", fn, writes_out=writes)
    program, _ = trace_to_program(lambda x: [lax.add(p.bind(lax.mul(x, x)), x)], [F32])
    plan = plan_program(program, writes_out("numpy"))
    return p, plan.summary()


def test_writes_out_is_declared_not_guessed_from_the_signature():
    def wrapped(*args, **kwargs):
        return np.exp(*args, **kwargs)

    _, with_ufunc = _plan_targets(np.exp, None)           # a ufunc writes out= by default
    p, with_wrapper = _plan_targets(wrapped, True)        # a (*args, **kwargs) wrapper, declared
    assert "numpy" in p.writes_out and with_wrapper == with_ufunc
    p, undeclared = _plan_targets(lambda x, out=None: np.exp(x, out=out), None)   # an out parameter is no promise
    assert "numpy" not in p.writes_out


@pytest.mark.parametrize("writes", [False, True])
def test_jit_passes_out_only_to_declared_impls(writes):
    seen = []

    def impl(x, out=None):
        seen.append(out is not None)
        return np.exp(x, out=out)
    p = _unary("test_exp_out", impl)
    rules.register_impl(p, "numpy", impl, writes_out=writes)
    x = fnp.asarray(np.linspace(0, 1, 64, dtype=np.float32))
    got = fl.jit(lambda x: fnp.sum(p.bind(x * 2.0) * 3.0))(x)
    np.testing.assert_allclose(got, np.sum(np.exp(np.asarray(x) * 2) * 3), rtol=1e-5)
    assert seen and all(s == writes for s in seen)
    # re-registering the same impl keeps its declaration (as impl_override's restore does)
    old = rules.register_impl(p, "numpy", np.negative)
    rules.register_impl(p, "numpy", old)
    assert ("numpy" in p.writes_out) is writes


def test_impl_override_restores_the_declaration():
    rsqrt = primitives.get("rsqrt")
    assert "numpy" in rsqrt.writes_out
    with fl.impl_override("rsqrt", "numpy", lambda x: 1 / np.sqrt(x)):
        assert "numpy" not in rsqrt.writes_out
    assert "numpy" in rsqrt.writes_out


# ------------------------------------------------------------------------------------------------ names, API
def test_an_existing_name_needs_replace():
    with pytest.raises(ValueError, match=r"Primitive\('sin'\): a primitive with this name exists; pass replace=True"):
        rules.Primitive("sin")
    assert primitives.get("sin") is lax.sin_p
    a = rules.Primitive("test_clash", replace=True)
    b = rules.Primitive("test_clash", replace=True)
    assert primitives.get("test_clash") is b is not a


def test_lax_exports_no_modules_and_nothing_private():
    bad = [n for n in dir(lax) if not n.startswith("__") and (n.startswith("_")
                                                               or isinstance(getattr(lax, n), types.ModuleType))]
    assert not bad
    assert {"add", "add_p", "reshape", "slice", "reduce_sum", "dot_general", "psum", "cholesky"} <= set(dir(lax))


def test_rules_exports_what_it_documents():
    for name in rules.__all__:
        assert hasattr(rules, name), name
    assert {"Zero", "is_zero", "is_undefined", "jvp_rule", "vectorized_batch", "broadcasting_batch",
            "register_impl", "Primitive", "linear", "unbroadcast"} <= set(rules.__all__)


FAMILIES = ["common", "base", "rules", "elementwise", "indexing", "slicing", "shape", "reduce", "linalg", "decomp",
            "collective"]


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flfun"):
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names if a.name.startswith("flfun"))


def test_primitive_families_import_downward_only_and_no_private_names():
    pkg = ROOT / "flfun" / "primitives"
    for path in sorted(pkg.glob("*.py")):
        if path.stem not in FAMILIES:
            continue
        for module, names in _imports(path):
            assert not module.startswith("flfun.backends"), (path.name, module)
            assert not [n for n in names if n.startswith("_")], (path.name, module, names)
            targets = [module.rsplit(".", 1)[1]] if module.startswith("flfun.primitives.") else \
                names if module == "flfun.primitives" else []
            for t in targets:
                assert FAMILIES.index(t) < FAMILIES.index(path.stem), f"{path.name} imports {t} (not below it)"


def test_lax_star_imports_only_modules_with_all():
    for module, _ in _imports(ROOT / "flfun" / "lax.py"):
        assert hasattr(sys.modules[module], "__all__"), module


# ---------------------------------------------------------------------------------------------------- README
def test_readme_writing_a_primitive_example_runs():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"### Writing a primitive.*?```python\n(.*?)```", text, re.S).group(1)
    # a fresh process: the example registers a primitive named "scale", which must not leak into this session
    res = subprocess.run([sys.executable, "-c", code + "\nprint('ran')"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ran", res.stderr
