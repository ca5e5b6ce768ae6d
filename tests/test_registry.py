"""The product's central property: replacing a primitive's impl reaches every transform, and users can define
primitives with the same API the library uses."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import primitives
from flfun.core import Primitive, ShapedArray, bind, register_impl
from flfun.primitives.rules import Zero, is_zero, tangent_aval


@pytest.fixture
def counting():
    """Counting impls for add, mul and dot_general (restored afterwards)."""
    fnp.zeros(1)
    calls = Counter()
    olds = {}
    for name in ("add", "mul", "dot_general"):
        prim = primitives.get(name)
        old = prim.impls["numpy"]

        def counted(*args, _old=old, _name=name, **params):
            calls[_name] += 1
            return _old(*args, **params)
        olds[name] = register_impl(prim, "numpy", counted)
    yield calls
    for name, old in olds.items():
        register_impl(primitives.get(name), "numpy", old)


def loss(w, x):
    return fnp.sum(fnp.sin(x @ w) * (x @ w + w[0, 0]))


W = np.arange(6.0, dtype=np.float32).reshape(3, 2) / 10
X = np.ones((4, 3), np.float32)


@pytest.mark.parametrize("transform", ["eager", "grad", "vjp", "jvp", "vmap", "grad_of_vmap", "jit", "jit_grad"])
def test_counting_impl_is_hit_under_every_transform(counting, transform):
    w, x = fnp.asarray(W), fnp.asarray(X)
    run = {
        "eager": lambda: loss(w, x),
        "grad": lambda: fl.grad(loss)(w, x),
        "vjp": lambda: fl.vjp(loss, w, x)[1](fnp.asarray(1.0)),
        "jvp": lambda: fl.jvp(loss, (w, x), (w, x)),
        "vmap": lambda: fl.vmap(loss, in_axes=(None, 0))(w, fnp.stack([x, x])),
        "grad_of_vmap": lambda: fl.grad(lambda w: fnp.sum(fl.vmap(loss, in_axes=(None, 0))(w, fnp.stack([x, x]))))(w),
        "jit": lambda: fl.jit(loss)(w, x),
        "jit_grad": lambda: fl.jit(fl.grad(loss))(w, x),
    }[transform]
    if transform.startswith("jit") and not hasattr(fl, "jit"):
        pytest.skip("jit not available")
    run()
    assert counting["dot_general"] > 0 and counting["mul"] > 0 and counting["add"] > 0, dict(counting)


def test_register_impl_returns_previous_and_override_restores():
    fnp.zeros(1)
    add = primitives.get("add")
    original = add.impls["numpy"]
    with fl.impl_override("add", "numpy", lambda x, y: np.subtract(x, y)) as old:
        assert old is original
        assert float(fnp.asarray(5.0) + fnp.asarray(3.0)) == 2.0
        assert float(fl.vmap(lambda a: a + a)(fnp.asarray([1.0]))[0]) == 0.0
    assert add.impls["numpy"] is original
    assert float(fnp.asarray(5.0) + fnp.asarray(3.0)) == 8.0


def test_registry_version_bumps():
    from flfun import core
    v0 = core.registry_version
    prim = primitives.get("neg")
    old = register_impl(prim, "numpy", prim.impls["numpy"])
    assert core.registry_version > v0 and old is prim.impls["numpy"]


def test_lookup_and_listing():
    names = primitives.names()
    assert {"add", "dot_general", "reduce_sum", "gather", "psum"} <= set(names)
    assert primitives.get("add").name == "add"
    with pytest.raises(KeyError, match="no primitive named 'nope'"):
        primitives.get("nope")


def test_missing_impl_is_a_clear_error():
    p = Primitive("test_no_impl_here")   # test_* names are exempt from the coverage test
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    with pytest.raises(NotImplementedError, match="no_impl_here: no impl rule is defined on backend 'numpy'"):
        bind(p, fnp.ones(2))
    with pytest.raises(NotImplementedError, match="no_impl_here: no jvp rule"):
        fl.jvp(lambda x: bind(p, x), (fnp.ones(2),), (fnp.ones(2),))
    with pytest.raises(NotImplementedError, match="no_impl_here: no batching rule"):
        fl.vmap(lambda x: bind(p, x))(fnp.ones((2, 2)))


# --- a user-defined primitive, written the way a user would in their own file --------------------------------
cube_p = Primitive("test_cube")


@cube_p.def_abstract_eval
def _cube_abstract_eval(x):
    if x.dtype.kind != "f":
        raise TypeError(f"test_cube: needs a float operand, got {x.dtype}")
    return ShapedArray(x.shape, x.dtype)


register_impl(cube_p, "numpy", lambda x: x * x * x)


@cube_p.def_jvp
def _cube_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    out = cube(x)
    return out, Zero(tangent_aval(out)) if is_zero(t) else t * 3.0 * x * x


@cube_p.def_batch
def _cube_batch(axis, args, dims):
    return cube(args[0]), dims[0]


def cube(x):
    return bind(cube_p, x)


def test_user_primitive_works_under_every_transform():
    x = fnp.asarray([1.0, 2.0, 3.0])
    np.testing.assert_allclose(cube(x), [1, 8, 27])
    np.testing.assert_allclose(fl.grad(lambda x: fnp.sum(cube(x)))(x), [3, 12, 27])
    np.testing.assert_allclose(fl.grad(fl.grad(lambda s: cube(s)))(fnp.asarray(2.0)), 12.0)
    np.testing.assert_allclose(fl.vmap(cube)(x), [1, 8, 27])
    np.testing.assert_allclose(fl.jvp(cube, (x,), (fnp.ones(3),))[1], [3, 12, 27])
    np.testing.assert_allclose(fl.jacrev(cube)(x), np.diag([3.0, 12, 27]))
    if hasattr(fl, "jit"):
        np.testing.assert_allclose(fl.jit(fl.grad(lambda x: fnp.sum(cube(x))))(x), [3, 12, 27])
    with pytest.raises(TypeError, match="test_cube: needs a float operand"):
        cube(fnp.asarray([1, 2]))
