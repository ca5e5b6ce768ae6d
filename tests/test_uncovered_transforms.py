"""Transform code the rest of the suite never ran: pytree Jacobians and Hessians against jax, jit's inspection
API, user-input errors with their messages, and compositions users hit, checked against jax on float64."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from peers import require

from cpu_devices import cpu_devices
import flfun as fl
import flfun.numpy as fnp
from flfun.transforms.jit import JitFunction

jax = require("jax")
jnp = jax.numpy


@pytest.fixture(autouse=True)
def _x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


X = np.array([0.3, -0.7, 1.1])
W = np.array([[0.5, 0.2], [-0.4, 0.9]])


def _args(m, single):
    """``(a, b)`` pytree arguments built with array module ``m`` (a single-leaf dict when ``single``)."""
    a = {"w": m.asarray(X)} if single else {"w": m.asarray(X), "u": (m.asarray(W[0]),)}
    return a, (m.asarray(np.float64(2.0)), m.asarray(W))


def _fn(m, out):
    def f(a, b):
        s = m.sum(m.sin(a["w"]) * b[0]) + m.sum(m.tanh(b[1] @ a.get("u", (a["w"][:2],))[0]))
        if out == "scalar":
            return s * s
        if out == "array":
            return m.exp(a["w"]) * s
        if out == "single_dict":
            return {"y": s * m.cos(b[1])}
        return {"s": s, "v": (m.exp(b[1]) * m.sum(a["w"]), a["w"] ** 2)}
    return f


def _assert_tree_close(got, want, rtol=1e-10):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


@functools.lru_cache(maxsize=None)
def _jax_reference(name, single, out):
    """jax's jacfwd (for both Jacobians) or hessian over argnums (0, 1), jitted (eager jax is slow), with the
    output and argument structures; other argnums are blocks of it."""
    jname = "hessian" if name == "hessian" else "jacfwd"
    args = _args(jnp, single)
    ref = jax.jit(getattr(jax, jname)(_fn(jnp, out), (0, 1)))(*args)
    structure = jax.tree_util.tree_structure
    return ref, structure(jax.eval_shape(_fn(jnp, out), *args)), [structure(a) for a in args]


def _block(ref, arg_trees, hess, argnums):
    """The block of a per-output-leaf (0, 1) Jacobian/Hessian ``ref`` for ``argnums`` (a Hessian nests
    ``H[i]`` shaped like argument i, with a tuple over j at each leaf)."""
    if argnums == (0, 1):
        return ref
    i = argnums if isinstance(argnums, int) else argnums[0]
    block = ref[i]
    if hess:
        block = arg_trees[i].unflatten([t[i] for t in arg_trees[i].flatten_up_to(block)])
        if not isinstance(argnums, int):
            block = arg_trees[i].unflatten([(leaf,) for leaf in arg_trees[i].flatten_up_to(block)])
    return block if isinstance(argnums, int) else (block,)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)])
@pytest.mark.parametrize("out", ["scalar", "array", "single_dict", "tree"])
@pytest.mark.parametrize("single", [True, False])
@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_jacobians_of_pytrees_match_jax(name, single, out, argnums):
    got = getattr(fl, name)(_fn(fnp, out), argnums)(*_args(fnp, single))
    ref, out_tree, arg_trees = _jax_reference(name, single, out)
    want = out_tree.unflatten([_block(r, arg_trees, name == "hessian", argnums) for r in out_tree.flatten_up_to(ref)])
    _assert_tree_close(got, want)


# ----------------------------------------------------------------------------------------------- compositions
A = np.array([[0.4, -1.2, 0.7], [1.5, 0.3, -0.6]])
V = np.array([0.2, -0.5, 0.9])


def _h(m, jit):
    def inner(w, row):
        return m.tanh(row @ w) * m.sin(w)
    return jit(inner)


def _loss(m, jit, vmap):
    def loss(w, xs):
        out = vmap(_h(m, jit), in_axes=(None, 0))(w, xs)
        return m.sum(out ** 2), {"mean": m.mean(out)}
    return loss


LIBS = {"fl": (fnp, fl), "jax": (jnp, jax)}


def _composition(lib, which):
    m, t = LIBS[lib]
    loss = _loss(m, t.jit, t.vmap)
    w, xs = m.asarray(V), m.asarray(A)
    if which == "grad_vmap_jit_none":
        return t.grad(lambda w, xs: loss(w, xs)[0])(w, xs)
    if which == "jit_value_and_grad_aux":
        return t.jit(t.value_and_grad(loss, has_aux=True))(w, xs)
    if which == "grad_argnums_tuple_aux":
        return t.grad(loss, argnums=(0, 1), has_aux=True)(w, xs)
    if which == "vmap_jvp":
        return t.vmap(lambda tw: t.jvp(lambda w: loss(w, xs)[0], (w,), (tw,)))(xs)
    if which == "jit_hessian":
        return t.jit(t.hessian(lambda w, xs: loss(w, xs)[0], argnums=(0, 1)))(w, xs)
    if which == "vmap_grad":
        return t.vmap(t.grad(lambda w, x: m.sum(_h(m, t.jit)(w, x))), in_axes=(None, 0))(w, xs)
    raise AssertionError(which)


@pytest.mark.parametrize("which", ["grad_vmap_jit_none", "jit_value_and_grad_aux", "grad_argnums_tuple_aux",
                                   "vmap_jvp", "jit_hessian", "vmap_grad"])
def test_compositions_match_jax(which):
    _assert_tree_close(_composition("fl", which), _composition("jax", which))


def test_transposing_jit_with_a_non_linear_tangent_operand():
    """nextafter's tangent in y is a concrete zero array, so the jit call in the linear program gets an operand
    that is not linear: backward_pass evaluates the equations reading only it (the non-linear branch)."""
    g = fl.jit(lambda a, b: fnp.sin(a) * b)
    c, y = np.array([0.5, 1.5]), np.array([2.0, -1.0])

    def f(y):
        return fnp.sum(g(fnp.nextafter(fnp.asarray(c), y), y))
    want = np.sin(np.nextafter(c, y))
    np.testing.assert_allclose(np.asarray(fl.jit(fl.grad(f))(fnp.asarray(y))), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fl.vmap(fl.grad(f))(fnp.asarray(np.stack([y, y])))), [want, want],
                               rtol=1e-12)


# ------------------------------------------------------------------------------------------- scalar seeds
def test_python_scalar_tangents_and_cotangents_take_the_primal_dtype():
    x = fnp.asarray(np.array([0.5, 1.0]))
    _, f_vjp = fl.vjp(lambda a: fnp.sum(fnp.sin(a)), x)
    np.testing.assert_allclose(np.asarray(f_vjp(1.0)[0]), np.cos([0.5, 1.0]), rtol=1e-12)
    assert f_vjp(1.0)[0].dtype == np.float64
    _, f_vjp = fl.vjp(fnp.sin, 0.5)               # the docstring example
    assert np.isclose(float(f_vjp(1.0)[0]), np.cos(0.5))
    _, tangent = fl.jvp(fnp.sin, (np.float64(0.5),), (1.0,))
    _, f_jvp = fl.linearize(fnp.sin, np.float64(0.5))
    assert tangent.dtype == f_jvp(1.0).dtype == np.float64 and np.isclose(float(f_jvp(2.0)), 2 * np.cos(0.5))


# ------------------------------------------------------------------------------------------------ jit API
class _Scale:
    def __init__(self, k):
        self.k = k

    @functools.partial(fl.jit, static_argnums=0)
    def apply(self, x):
        return x * self.k


def test_jit_as_a_method_decorator():
    x = fnp.asarray(np.array([1.0, 2.0]))
    assert isinstance(_Scale.__dict__["apply"], JitFunction) and _Scale.apply is _Scale.__dict__["apply"]
    np.testing.assert_array_equal(np.asarray(_Scale(3.0).apply(x)), [3.0, 6.0])
    np.testing.assert_array_equal(np.asarray(_Scale(-1.0).apply(x)), [-1.0, -2.0])


def test_jit_clear_cache_retraces():
    f = fl.jit(lambda x: x + 1.0)
    x = fnp.asarray(np.array([1.0]))
    f(x), f(x)
    assert f.trace_count == 1 and f._cache_size() == 1
    f.clear_cache()
    assert f._cache_size() == 0
    np.testing.assert_array_equal(np.asarray(f(x)), [2.0])
    assert f.trace_count == 2


def test_jit_inspection_before_and_after_the_passes():
    x = fnp.asarray(np.array([1.0, 2.0]))

    def f(x):
        return fnp.sin(x) * 1.0 + 0.0
    lowered = fl.jit(f).lower(x)
    assert "mul" in lowered.traced_ir and "add" in lowered.traced_ir
    assert "mul" not in lowered.ir and "sin" in lowered.ir
    assert str(fl.make_ir(f, optimized=True)(x)) == lowered.ir
    assert "mul" in str(fl.make_ir(f)(x))
    compiled = lowered.compile()
    assert str(compiled.plan) == str(lowered.plan)
    np.testing.assert_allclose(np.asarray(compiled(x)), np.sin([1.0, 2.0]))


def test_donated_array_cannot_be_read_or_donated_twice():
    x = fnp.asarray(np.array([1.0, 2.0]))
    y = fl.jit(lambda x: x * 2.0, donate_argnums=0)(x)
    np.testing.assert_array_equal(np.asarray(y), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="this Array was donated to a jitted function"):
        np.asarray(x)
    with pytest.raises(ValueError, match=r"^jit: a donated argument was already donated \(passed twice"):
        fl.jit(lambda a, b: a + b, donate_argnums=(0, 1))(y, y)


class _NoSignature:
    @property
    def __signature__(self):
        raise ValueError("no signature found")

    def __call__(self, x):
        return -x


def test_jit_of_a_callable_without_signature_and_lower_under_a_transform():
    x = fnp.asarray(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(fl.jit(_NoSignature())(x)), [-1.0, -2.0])
    with pytest.raises(ValueError, match=r"^jit.lower: the function closes over values traced by an outer "):
        fl.vmap(lambda v: fl.jit(lambda y: y * v).lower(x))(x)


@pytest.fixture
def two_devices():
    with cpu_devices(2) as devs:
        yield devs


def test_jit_arguments_on_different_devices(two_devices):
    from flfun.distributed.devices import device_put
    x = fnp.asarray(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"^jit: arguments live on different devices \(cpu:1 and cpu:0\); move "
                                         r"them with flfun.device_put first$"):
        fl.jit(lambda a, b: a + b)(device_put(x, two_devices[1]), x)


@pytest.mark.parametrize("eager_tape", [True, False])
def test_grad_seeds_the_cotangent_on_the_output_device(two_devices, eager_tape, monkeypatch):
    from flfun.config import config
    from flfun.distributed.devices import device_put
    monkeypatch.setattr(config, "eager_tape", eager_tape)
    x = device_put(fnp.asarray(np.array([1.0, 2.0])), two_devices[1])
    g = fl.grad(lambda x: fnp.sum(fnp.sin(x)))(x)
    assert g.device is two_devices[1]
    np.testing.assert_allclose(np.asarray(g), np.cos([1.0, 2.0]), rtol=1e-12)


# ----------------------------------------------------------------------------------------------- user errors
X2 = np.array([1.0, 2.0])


def _linearized(tangents):
    _, f_jvp = fl.linearize(lambda a, b: a * b, fnp.asarray(X2), fnp.asarray(X2))
    return f_jvp(*tangents)


def _vjp_of_dict(ct):
    _, f_vjp = fl.vjp(lambda a: {"o": a * 2.0, "p": a}, fnp.asarray(X2))
    return f_vjp(ct)


ONES3, INTS2, F32_2 = np.ones(3), np.arange(2), np.ones(2, np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: fl.jvp(lambda a, b: a * b, (X2, X2), (X2,)), ValueError,
     r"jvp: primal and tangent structures differ: tuple\(\*, \*\) and tuple\(\*\)"),
    (lambda: fl.jvp(lambda a: a, (X2,), (ONES3,)), ValueError,
     r"jvp: tangent 0 has aval f64\[3\] but its primal has f64\[2\]; they must match"),
    (lambda: fl.jvp(lambda a: a, (X2,), (F32_2,)), ValueError,
     r"jvp: tangent 0 has aval f32\[2\] but its primal has f64\[2\]; they must match"),
    (lambda: fl.jvp(lambda a: a, X2, X2), TypeError, r"jvp: primals and tangents must be tuples"),
    (lambda: _linearized((X2,)), ValueError,
     r"linearize: tangent structure tuple\(\*\) does not match primals tuple\(\*, \*\)"),
    (lambda: _linearized((X2, ONES3)), ValueError,
     r"linearize: tangent 1 has aval f64\[3\] but its primal has f64\[2\]; they must match"),
    (lambda: _vjp_of_dict({"o": X2}), ValueError, r"vjp: cotangent structure dict\('o': \*\) does not match the output's dict\('o': \*, 'p': \*\)"),
    (lambda: _vjp_of_dict({"o": X2, "p": ONES3}), ValueError,
     r"vjp: cotangent 1 has aval f64\[3\] but the output has f64\[2\]; they must match"),
    (lambda: _vjp_of_dict({"o": X2, "p": INTS2}), ValueError,
     r"vjp: cotangent 1 has aval i64\[2\] but the output has f64\[2\]; they must match"),
    (lambda: fl.vmap(lambda a: a, in_axes=("0",))(X2), ValueError, r"vmap: in_axes entries must be int or None, got '0'"),
    (lambda: fl.vmap(lambda a: a, in_axes=1.0)(X2), ValueError, r"vmap: in_axes entries must be int or None, got 1.0"),
    (lambda: fl.vmap(3), TypeError, r"vmap: expected a function, got 3"),
    (lambda: fl.jacfwd(lambda a, b: a * b, 1)(X2, INTS2), TypeError,
     r"jacfwd requires real- or complex-valued inputs .* but got int64 \(argument 1\)"),
    (lambda: fl.jacrev(lambda a, b: a, (0, 1))(X2, {"k": INTS2}), TypeError,
     r"jacrev requires real- or complex-valued inputs .* but got int64 \(argument 1\)"),
    (lambda: fl.hessian(fnp.sum)(INTS2), TypeError,
     r"hessian requires real- or complex-valued inputs .* but got int64 \(argument 0\)"),
    (lambda: fl.hessian(fnp.sum, 3)(X2), ValueError, r"hessian: argnums 3 out of range for 1 positional arguments"),
])
def test_user_input_errors(call, error, message):
    with pytest.raises(error, match="^" + message):
        call()


# ------------------------------------------------------------------------------ user primitives without rules
@pytest.fixture
def rule_less_primitives():
    """``test_twice`` (a jvp that applies it to the tangent, no transpose or batching rule) and ``test_bare``
    (no rules at all)."""
    from flfun.core import PRIMITIVES, Primitive, ShapedArray, register_impl
    prims = {name: Primitive(name) for name in ("test_twice", "test_bare")}
    for p in prims.values():
        p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
        register_impl(p, "numpy", lambda x: x * 2)
    twice = prims["test_twice"]
    twice.def_jvp(lambda primals, tangents: (twice.bind(*primals), twice.bind(*tangents)))
    yield twice, prims["test_bare"]
    for name in prims:
        del PRIMITIVES[name]


@pytest.mark.parametrize("transform, which, message", [
    (lambda p: fl.jvp(p.bind, (X2,), (X2,)), 1, "test_bare: no jvp rule is defined"),
    (lambda p: fl.grad(lambda x: fnp.sum(p.bind(x)))(fnp.asarray(X2)), 0, "test_twice: no transpose rule is defined"),
    (lambda p: fl.vjp(p.bind, X2)[1](X2), 0, "test_twice: no transpose rule is defined"),
    (lambda p: fl.vmap(p.bind)(X2), 0, "test_twice: no batching rule is defined"),
])
def test_missing_rules_name_the_primitive(rule_less_primitives, transform, which, message):
    twice = rule_less_primitives[0]
    np.testing.assert_array_equal(np.asarray(fl.jvp(twice.bind, (X2,), (X2,))[1]), 2 * X2)
    with pytest.raises(NotImplementedError, match=message):
        transform(rule_less_primitives[which])
