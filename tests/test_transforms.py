"""Composition of transforms: any nesting and order, pytrees in and out, closures over outer tracers, and
checks against finite differences and Python loops."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.testing import arrays, check_grads, check_vmap, shapes


def f3(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-x * x) + fnp.tanh(x) ** 2)


def test_grad_of_grad_of_grad():
    g3 = fl.grad(fl.grad(fl.grad(lambda x: x ** 4 + fnp.sin(x))))
    assert np.isclose(float(g3(fnp.asarray(0.7))), 24 * 0.7 - np.cos(0.7), rtol=1e-5)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x
    assert float(fl.grad(lambda x: x * fl.grad(lambda y: x * y)(3.0))(2.0)) == 4.0
    assert float(fl.grad(lambda x: fl.grad(lambda y: x * y)(1.0))(2.0)) == 1.0


@given(arrays("float64", shapes(1, 2)))
def test_vmap_of_grad_matches_loop(x):
    per_row = fl.vmap(fl.grad(f3))(fnp.asarray(x))
    loop = np.stack([np.asarray(fl.grad(f3)(fnp.asarray(r))) for r in x])
    np.testing.assert_allclose(per_row, loop, rtol=1e-10, atol=1e-12)


@given(arrays("float64", shapes(1, 3)))
def test_grad_of_vmap_equals_grad_of_sum(x):
    g1 = fl.grad(lambda x: fnp.sum(fl.vmap(f3)(x)))(fnp.asarray(x))
    g2 = fl.vmap(fl.grad(f3))(fnp.asarray(x))
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-12)


def test_jvp_of_vjp_and_vjp_of_jvp():
    x = fnp.asarray([0.3, -1.2, 2.0], dtype="float64")
    t = fnp.asarray([1.0, 0.5, -2.0], dtype="float64")
    # Hessian-vector product two ways
    hvp1 = fl.jvp(fl.grad(f3), (x,), (t,))[1]
    hvp2 = fl.grad(lambda x: fnp.sum(fl.grad(f3)(x) * t))(x)
    hvp3 = fl.vjp(lambda x: fl.jvp(f3, (x,), (t,))[1], x)[1](fnp.asarray(1.0, dtype="float64"))[0]
    np.testing.assert_allclose(hvp1, hvp2, rtol=1e-10)
    np.testing.assert_allclose(hvp1, hvp3, rtol=1e-10)
    np.testing.assert_allclose(hvp1, np.asarray(fl.hessian(f3)(x)) @ np.asarray(t), rtol=1e-10)


def test_vmap_of_vmap_and_in_out_axes():
    x = fnp.asarray(np.arange(24.0).reshape(2, 3, 4))
    # outer maps the last axis (k), inner maps axis 1 of the (2, 3) slice (j): out[j, k] lands as (k, j) -> out_axes=1
    out = fl.vmap(fl.vmap(lambda v: fnp.sum(v * v), in_axes=1), in_axes=-1, out_axes=1)(x)
    np.testing.assert_allclose(out, (np.asarray(x) ** 2).sum(0))


def test_vmap_pytrees_and_none_axes():
    Params = collections.namedtuple("Params", "w b")
    p = Params(fnp.ones(3), fnp.asarray(2.0))
    xs = {"a": fnp.asarray(np.arange(6.0).reshape(2, 3)), "c": fnp.asarray(5.0)}
    out = fl.vmap(lambda p, x: {"y": fnp.sum(p.w * x["a"]) + p.b + x["c"]}, in_axes=(None, {"a": 0, "c": None}))(p, xs)
    np.testing.assert_allclose(out["y"], [3 + 2 + 5, 12 + 2 + 5])
    check_vmap(lambda a, b: a * b, (np.ones((3, 2)), np.arange(2.0)), in_axes=(0, None))


def test_vmap_axis_size_and_out_axes_none():
    out = fl.vmap(lambda: fnp.ones(2), axis_size=3)()
    assert out.shape == (3, 2)
    w = fnp.ones(2)
    assert fl.vmap(lambda x: (x, w), out_axes=(0, None))(fnp.zeros((4, 2)))[1].shape == (2,)


def test_vmap_errors():
    with pytest.raises(ValueError, match="mapped axes have different sizes"):
        fl.vmap(lambda a, b: a + b)(fnp.ones(3), fnp.ones(4))
    with pytest.raises(ValueError, match="out of bounds"):
        fl.vmap(lambda a: a, in_axes=2)(fnp.ones((3, 4)))
    with pytest.raises(ValueError, match="all in_axes are None"):
        fl.vmap(lambda a: a, in_axes=None)(fnp.ones(3))
    with pytest.raises(ValueError, match="out_axes is None"):
        fl.vmap(lambda a: a, out_axes=None)(fnp.ones(3))
    with pytest.raises(ValueError, match="not a prefix"):
        fl.vmap(lambda a: a, in_axes=((0, 0),))(fnp.ones(3))


def test_closures_over_outer_tracers():
    def outer(x):
        inner = lambda y: fnp.sum(fnp.sin(x * y))
        return fnp.sum(fl.vmap(fl.grad(inner))(fnp.stack([x, 2 * x])))
    x = fnp.asarray([0.5, 1.0], dtype="float64")
    check_grads(outer, (np.asarray(x),), order=1)


def test_grad_pytrees_argnums_and_aux():
    def loss(params, x):
        return fnp.sum((params["w"] * x + params["b"]) ** 2), {"n": x.shape[0]}
    params = {"w": fnp.asarray([1.0, 2.0]), "b": fnp.asarray(0.5)}
    g, aux = fl.grad(loss, has_aux=True)(params, fnp.asarray([1.0, -1.0]))
    assert aux == {"n": 2}
    np.testing.assert_allclose(g["w"], [2 * 1.5 * 1, 2 * -1.5 * -1])
    np.testing.assert_allclose(g["b"], 2 * 1.5 + 2 * -1.5)
    (v, aux2), (gw, gx) = fl.value_and_grad(loss, argnums=(0, 1), has_aux=True)(params, fnp.asarray([1.0, -1.0]))
    assert float(v) == pytest.approx(1.5 ** 2 * 2)
    assert set(gw) == {"w", "b"} and gx.shape == (2,)


def test_jacobians_against_each_other():
    def f(x, y):
        return {"u": fnp.sin(x) * y, "v": fnp.sum(x ** 2) + y}
    x, y = fnp.asarray([0.1, 0.2, 0.3], dtype="float64"), fnp.asarray(1.5, dtype="float64")
    jf = fl.jacfwd(f, argnums=(0, 1))(x, y)
    jr = fl.jacrev(f, argnums=(0, 1))(x, y)
    for k in ("u", "v"):
        for a, b in zip(jf[k], jr[k]):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(jf["u"][0], np.diag(np.cos(np.asarray(x)) * 1.5))
    h = fl.hessian(lambda x: fnp.sum(x ** 3))(x)
    np.testing.assert_allclose(h, np.diag(6 * np.asarray(x)))


def test_linearize_matches_jvp():
    x = fnp.asarray([0.3, 0.7])
    y, f_jvp = fl.linearize(f3, x)
    np.testing.assert_allclose(f_jvp(fnp.ones(2)), fl.jvp(f3, (x,), (fnp.ones(2),))[1], rtol=1e-6)
    assert float(y) == pytest.approx(float(f3(x)))


def test_stop_gradient():
    assert float(fl.grad(lambda x: fl.stop_gradient(x) * x)(3.0)) == 3.0
    assert float(fl.grad(lambda x: fl.stop_gradient(x * x))(3.0)) == 0.0


def test_check_grads_detects_a_wrong_rule():
    """A test that cannot fail is a defect: a deliberately wrong jvp rule must be caught."""
    from flfun import primitives
    sin = primitives.get("sin")
    old = sin.jvp
    sin.def_jvp(lambda primals, tangents: (fnp.sin(primals[0]), tangents[0] * 2.0))
    try:
        with pytest.raises(AssertionError):
            check_grads(lambda x: fnp.sin(x), (np.array([0.3, 0.5]),), order=1)
    finally:
        sin.def_jvp(old)
